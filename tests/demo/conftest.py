"""Demo test setup: the `demo_settings` fixture (the demo agent offline, django-q2 in-line) and
the file SQLite database both come from tests/conftest.py."""
