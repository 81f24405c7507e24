"""MemoryStore specifics: rows are JSON text, loads are independent, clear() forgets."""

from __future__ import annotations

from falai_django.stores.memory import MemoryStore

from .contract import bare, full_session


def test_rows_are_json_text_and_loads_are_independent():
    store = MemoryStore()
    session = full_session("s1")
    store.save(session, 0)
    assert store.raw("s1") == session.model_copy(update={"version": 1}).to_json_text()
    first = store.load("s1")
    first.data["nome"] = "mudou"
    first.runs[0].asked["x"] = 9
    assert store.load("s1").data["nome"] == "João Ñandú 🚀"
    assert "x" not in store.load("s1").runs[0].asked


def test_clear_forgets_everything():
    store = MemoryStore()
    store.save(bare("s1"), 0)
    store.save(bare("s2"), 0)
    assert len(store) == 2
    store.clear()
    assert store.load("s1") is None and len(store) == 0
