import subprocess
import sys


def test_import_needs_no_django_settings():
    # A plain process with no DJANGO_SETTINGS_MODULE must import the engine's public names.
    code = (
        "import os, sys; os.environ.pop('DJANGO_SETTINGS_MODULE', None);"
        "import falai_django;"
        "assert 'django' not in sys.modules or 'django.conf' not in sys.modules, 'django imported';"
        "print(falai_django.__version__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0.1.0"


def test_every_public_name_resolves_without_django():
    # The exports resolve lazily, so importing the package alone proves little: resolve every
    # public name (and the test doubles) in a plain process and check Django never loaded, nor
    # the drivers of the optional stores (MongoStore, PrismaStore and OpenSearchStore import none of
    # their own).
    code = (
        "import os, sys; os.environ.pop('DJANGO_SETTINGS_MODULE', None);"
        "import falai_django;"
        "[getattr(falai_django, n) for n in falai_django.__all__];"
        "from falai_django.testing import fake_clock, MemoryScheduler, mock_provider;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework', 'django_q', 'pymongo', 'bson', 'prisma', 'opensearchpy'));"
        "assert not bad, bad;"
        "print(len(falai_django.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": ""})
    assert out.returncode == 0, out.stderr
    required = {
        "falai", "Agent", "Session", "user_message", "assistant_message", "migrate_session",
        "from_spec", "to_spec", "validate_flow", "flow_spec_schema", "flow_authoring_schema", "parse_duration",
        "MemoryStore", "PostgresStore", "SQLiteStore", "RedisStore", "MongoStore", "PrismaStore", "OpenSearchStore",
        "SessionConflictError",
        "InvalidSessionError", "FlowConfigurationError", "ProviderError", "GeminiProvider",
        "FallbackProvider",
    }
    import falai_django

    assert required <= set(falai_django.__all__)
