"""A million conversations (issue 52): the desk's queues walk the handed-over conversations
newest first (`falai_sess_silenced` on `-last_user_at`), and PostgreSQL gets the list's order and
the search's trigram and full-text indexes (`falai_django.models.search_indexes`), built
concurrently: this migration is not atomic."""

from django.db import migrations, models

from falai_django.models import search_indexes


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('falai_django', '0015_erasure'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='session',
            name='falai_sess_silenced',
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(condition=models.Q(('silenced_reason__isnull', False)), fields=['-last_user_at', 'id'], name='falai_sess_silenced'),
        ),
        migrations.RunPython(search_indexes.create, search_indexes.drop, elidable=False),
    ]
