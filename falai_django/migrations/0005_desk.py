# The human desk: assignments, desk entries (markers and notes), saved replies, read markers.

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('falai_django', '0004_whatsapp'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='SavedReply',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('title', models.CharField(max_length=120, unique=True, verbose_name='title')),
                ('text', models.TextField(verbose_name='text')),
            ],
            options={
                'verbose_name': 'saved reply',
                'verbose_name_plural': 'saved replies',
                'db_table': 'falai_saved_reply',
                'ordering': ['title'],
            },
        ),
        migrations.CreateModel(
            name='Assignment',
            fields=[
                ('conversation', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='assignment', serialize=False, to='falai_django.session', verbose_name='conversation')),
                ('assigned_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='assigned at')),
                ('assignee', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='falai_assignments', to=settings.AUTH_USER_MODEL, verbose_name='assignee')),
            ],
            options={
                'verbose_name': 'assignment',
                'verbose_name_plural': 'assignments',
                'db_table': 'falai_assignment',
            },
        ),
        migrations.CreateModel(
            name='DeskEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('take_over', 'taken over'), ('give_back', 'given back'), ('silence', 'silenced'), ('assign', 'assigned'), ('note', 'note'), ('resolve', 'resolved')], max_length=16, verbose_name='kind')),
                ('author_name', models.CharField(blank=True, default='', max_length=255, verbose_name='author name')),
                ('text', models.TextField(blank=True, default='', verbose_name='text')),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='time')),
                ('after_item', models.BigIntegerField(default=0, verbose_name='after transcript item')),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='author')),
                ('conversation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='desk_entries', to='falai_django.session', verbose_name='conversation')),
            ],
            options={
                'verbose_name': 'desk entry',
                'verbose_name_plural': 'desk entries',
                'db_table': 'falai_desk_entry',
                'ordering': ['id'],
                'indexes': [models.Index(fields=['conversation', 'id'], name='falai_desk_conv_id')],
            },
        ),
        migrations.CreateModel(
            name='ReadMarker',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('last_read_id', models.BigIntegerField(default=0, verbose_name='last read item')),
                ('conversation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='falai_django.session', verbose_name='conversation')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='user')),
            ],
            options={
                'verbose_name': 'read marker',
                'verbose_name_plural': 'read markers',
                'db_table': 'falai_read_marker',
                'constraints': [models.UniqueConstraint(fields=('user', 'conversation'), name='falai_read_unique')],
            },
        ),
    ]
