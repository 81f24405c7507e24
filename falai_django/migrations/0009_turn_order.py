"""One conversation's inputs are processed in the order they were received (issue 28;
host/ordering.py).

- `TurnRecord.claimed_until`: an input run in-line by its caller (the API, the desk) is claimed
  while it is `received`; the workers draining the conversation wait for it.
- `falai_turn_open`: the conversation's open inputs (received or parked for retry, wakes left
  out), in id order; a partial index, so it holds only the unfinished rows and the head is one
  index probe however long the conversation's run log grows.
- `TurnLock` (`falai_turn_lock`): the conversation's turn lock where PostgreSQL advisory locks are
  not used (other databases, `SEND_LOCK = "lease"`).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('falai_django', '0008_delete_outboxitem'),
    ]

    operations = [
        migrations.CreateModel(
            name='TurnLock',
            fields=[
                ('conversation_id', models.CharField(max_length=255, primary_key=True, serialize=False,
                                                     verbose_name='session id')),
                ('until', models.DateTimeField(blank=True, null=True, verbose_name='held until')),
            ],
            options={
                'verbose_name': 'turn lock',
                'verbose_name_plural': 'turn locks',
                'db_table': 'falai_turn_lock',
            },
        ),
        migrations.AddField(
            model_name='turnrecord',
            name='claimed_until',
            field=models.DateTimeField(blank=True, null=True, verbose_name='claimed until'),
        ),
        migrations.AddIndex(
            model_name='turnrecord',
            index=models.Index(condition=models.Q(('status__in', ['received', 'retry']),
                                                  models.Q(('kind', 'wake'), _negated=True)),
                               fields=['conversation_id', 'id'], name='falai_turn_open'),
        ),
    ]
