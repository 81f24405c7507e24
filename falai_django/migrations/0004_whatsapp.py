"""WhatsApp delivery: the channel's delivery status beside the send status, and an index to find a
row by its channel message id (statuses arrive keyed by it)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('falai_django', '0003_lean_indexes'),
    ]

    operations = [
        migrations.AddField(
            model_name='history',
            name='delivery_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='delivery status at'),
        ),
        migrations.AddField(
            model_name='history',
            name='delivery_status',
            field=models.CharField(blank=True, choices=[('sent', 'sent to the phone'), ('delivered', 'delivered'), ('read', 'read'), ('failed', 'not delivered')], max_length=16, null=True, verbose_name='delivery status'),
        ),
        migrations.AddIndex(
            model_name='history',
            index=models.Index(condition=models.Q(('channel_message_id__isnull', False)), fields=['channel_message_id'], name='falai_hist_channel_id'),
        ),
    ]
