"""Fewer indexes: each one is written on every turn's save. The admin's filters and sort keep
theirs (partial where the values are rare), the composites cover the foreign keys, and the
`varchar_pattern_ops` copy PostgreSQL gets of the session id (for `LIKE 'x%'`, never run) goes."""

import django.db.models.deletion
from django.db import migrations, models


def drop_pattern_index_of_the_session_id(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'agent_sessions' "
            "AND indexdef LIKE '%%varchar_pattern_ops%%' AND indexdef LIKE '%%(id %%'"
        )
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):

    dependencies = [
        ('falai_django', '0002_rename_session_history'),
    ]

    operations = [
        migrations.RunPython(drop_pattern_index_of_the_session_id, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='history',
            name='at',
            field=models.DateTimeField(verbose_name='time'),
        ),
        migrations.AlterField(
            model_name='history',
            name='conversation',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='history', to='falai_django.session', verbose_name='conversation'),
        ),
        migrations.AlterField(
            model_name='history',
            name='send_status',
            field=models.CharField(blank=True, choices=[('pending', 'pending'), ('sending', 'sending'), ('sent', 'sent'), ('failed', 'failed')], max_length=16, null=True, verbose_name='send status'),
        ),
        migrations.AlterField(
            model_name='session',
            name='asking_flow',
            field=models.CharField(blank=True, max_length=255, null=True, verbose_name='asking flow'),
        ),
        migrations.AlterField(
            model_name='session',
            name='asking_step',
            field=models.CharField(blank=True, max_length=255, null=True, verbose_name='asking step'),
        ),
        migrations.AlterField(
            model_name='session',
            name='human_owner',
            field=models.CharField(blank=True, max_length=255, null=True, verbose_name='human owner'),
        ),
        migrations.AlterField(
            model_name='session',
            name='last_assistant_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='last assistant message at'),
        ),
        migrations.AlterField(
            model_name='session',
            name='last_user_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='last user message at'),
        ),
        migrations.AlterField(
            model_name='session',
            name='silenced_reason',
            field=models.CharField(blank=True, max_length=255, null=True, verbose_name='silenced reason'),
        ),
        migrations.AlterField(
            model_name='session',
            name='waiting_until',
            field=models.DateTimeField(blank=True, null=True, verbose_name='waiting until'),
        ),
        migrations.AlterField(
            model_name='turnrecord',
            name='conversation_id',
            field=models.CharField(max_length=255, verbose_name='session id'),
        ),
        migrations.AlterField(
            model_name='turnrecord',
            name='next_attempt_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='next attempt at'),
        ),
        migrations.AlterField(
            model_name='wake',
            name='conversation',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='wakes', to='falai_django.session', verbose_name='conversation'),
        ),
        migrations.AddIndex(
            model_name='history',
            index=models.Index(condition=models.Q(('send_status__in', ['pending', 'sending'])), fields=['conversation', 'id'], name='falai_hist_unsent'),
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(fields=['-last_user_at'], name='falai_sess_last_user'),
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(condition=models.Q(('asking_flow__isnull', False)), fields=['asking_flow'], name='falai_sess_asking'),
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(condition=models.Q(('silenced_reason__isnull', False)), fields=['silenced_reason'], name='falai_sess_silenced'),
        ),
        migrations.AddIndex(
            model_name='session',
            index=models.Index(condition=models.Q(('human_owner__isnull', False)), fields=['human_owner'], name='falai_sess_owner'),
        ),
        migrations.AddIndex(
            model_name='turnrecord',
            index=models.Index(fields=['conversation_id', 'id'], name='falai_turn_conv_id'),
        ),
    ]
