# The `OutboxItem` proxy of `History` was never used (the outbox is the outbound History rows,
# read through `History.objects.pending_sends`). A proxy has no table: nothing changes in the database.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('falai_django', '0007_session_blob_lz4'),
    ]

    operations = [
        migrations.DeleteModel(
            name='OutboxItem',
        ),
    ]
