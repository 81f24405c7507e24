"""The models named as the design asks: `Session` (table `agent_sessions`) and `History`
(table `falai_history`). Tables and columns stay; `Conversation` becomes a proxy of `Session`
so the admin's URLs and the `*_conversation` permissions stay as they were."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("falai_django", "0001_initial"),
    ]

    operations = [
        # A proxy's base is not followed by RenameModel: take OutboxItem off and put it back.
        migrations.DeleteModel("OutboxItem"),
        migrations.RenameModel("Conversation", "Session"),
        migrations.RenameModel("HistoryItem", "History"),
        migrations.AlterModelOptions(
            name="session",
            options={"verbose_name": "session", "verbose_name_plural": "sessions"},
        ),
        migrations.CreateModel(
            name="Conversation",
            fields=[],
            options={
                "verbose_name": "conversation",
                "verbose_name_plural": "conversations",
                "proxy": True,
                "indexes": [],
                "constraints": [],
                "permissions": [
                    ("handoff_conversation", "Can hand a conversation over to a human and back"),
                    ("reply_conversation", "Can reply to a conversation as a human"),
                ],
            },
            bases=("falai_django.session",),
        ),
        migrations.CreateModel(
            name="OutboxItem",
            fields=[],
            options={"verbose_name": "outbox message", "verbose_name_plural": "outbox", "proxy": True,
                     "indexes": [], "constraints": []},
            bases=("falai_django.history",),
        ),
    ]
