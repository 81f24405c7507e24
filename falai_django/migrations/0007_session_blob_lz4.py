"""The session blob is compressed with lz4 on PostgreSQL (14 and newer, built with lz4).

A conversation's blob passes the 2 KB TOAST threshold early (a steady one is about 11 KB of
JSON), so every turn's save compresses it. PostgreSQL's default, pglz, costs about a third of the
UPDATE's server time there; lz4 compresses the same blob to about the same size in far less time.
Rows already stored keep their compression until they are written again. Elsewhere (SQLite, an
older PostgreSQL or one built without lz4) nothing changes. See docs/DECISIONS.md H10.
"""

from django.db import migrations


def lz4_available(connection) -> bool:
    """Whether this database can store a column with lz4 (tests/host/test_pg_write_path.py asks too)."""
    if connection.vendor != "postgresql" or connection.pg_version < 140000:
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
    return bool(row and row[0])


def _set_compression(method: str):
    def run(apps, schema_editor) -> None:
        if not lz4_available(schema_editor.connection):
            return
        model = apps.get_model("falai_django", "Session")
        quote = schema_editor.quote_name
        schema_editor.execute(
            f"ALTER TABLE {quote(model._meta.db_table)} ALTER COLUMN {quote('blob')} SET COMPRESSION {method}")

    return run


class Migration(migrations.Migration):
    dependencies = [("falai_django", "0006_flows")]

    operations = [
        migrations.RunPython(_set_compression("lz4"), _set_compression("default"), elidable=False),
    ]
