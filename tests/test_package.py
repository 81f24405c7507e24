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
