"""hypothesis over the engine's other entry points that read untrusted data.

- `validate_flow` / `from_spec` / the agent constructor on arbitrary JSON-ish flows: a
  `FlowConfigurationError` or success, never another exception;
- `Session.from_json` / `from_json_text` / `migrate_session` on arbitrary JSON and on a valid
  blob with one value swapped for junk: a `Session` or `InvalidSessionError`, never another
  exception; a blob that loads round-trips stably.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from falai_django import (
    FlowConfigurationError,
    InvalidSessionError,
    Session,
    from_spec,
    migrate_session,
    validate_flow,
)
from falai_django.testing import mock_provider

from .world import ACTIONS, CONDITIONS, EVENTS, FIELDS, TOOLS

EXAMPLES = int(os.environ.get("FALAI_FUZZ_EXAMPLES", "300"))
IN_CI = os.environ.get("CI", "").lower() == "true"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=IN_CI,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REGISTRIES = {"fields": FIELDS, "actions": ACTIONS, "events": EVENTS, "conditions": CONDITIONS, "tools": TOOLS,
              "flows": [{"id": "f"}]}

WORDS = st.sampled_from(["id", "name", "steps", "on", "say", "do", "wait", "if", "else", "then", "collect",
                         "prompt", "question", "maxAsks", "branches", "when", "event", "upTo", "message",
                         "mention", "silence", "repeat", "cooldown", "equals", "known", "silenced", "vip",
                         "with", "onFail", "step", "clear", "flow", "onEnd", "anchor", "while", "kind",
                         "nome", "porte", "ok", "1h", "3d", "end", "once", "always", "f", "s1", "{{data.nome}}"])
# Floats stay below 1e12: a bigger float prints as JS does (1.8e16 -> "18022705257184330"), which Python
# reads back as an exact int of a slightly different value; JavaScript reads the same double again.
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 100), st.floats(min_value=-1e12, max_value=1e12), WORDS,
                    st.text(max_size=8))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(WORDS, inner, max_size=5)),
                       max_leaves=25)


@st.composite
def flowish(draw):
    """Mostly flow-shaped dicts with junk in random places."""
    steps = draw(st.lists(st.dictionaries(WORDS, JSONISH, max_size=4), max_size=4))
    for i, step in enumerate(steps):
        if draw(st.booleans()):
            step["id"] = f"s{i}"
    flow = {"id": draw(st.sampled_from(["f", "f", "", None, 3])), "name": "F", "steps": steps}
    flow.update(draw(st.dictionaries(WORDS, JSONISH, max_size=3)))
    return flow


@SETTINGS
@given(flow=st.one_of(flowish(), JSONISH))
def test_validate_flow_only_ever_raises_flow_configuration_error(flow):
    try:
        result = validate_flow(flow, REGISTRIES)
    except FlowConfigurationError as exc:
        assert str(exc).startswith("[FlowConfigurationError] ")
        return
    assert isinstance(result.warnings, list)


@SETTINGS
@given(flow=flowish())
def test_from_spec_and_the_agent_only_ever_raise_flow_configuration_error(flow):
    from falai_django import falai

    try:
        spec = from_spec(flow)
        falai().fields(FIELDS).agent(name="Ana", provider=mock_provider(), flows=[spec], actions=ACTIONS,
                                     events=EVENTS, conditions=CONDITIONS, tools=TOOLS)
    except FlowConfigurationError:
        pass


def _good_blob() -> dict:
    from baddata.rows import good_blob

    return good_blob("s1")


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(_good_blob()) if p]


@SETTINGS
@given(path=st.sampled_from(PATHS), junk=JSONISH, drop=st.booleans())
def test_a_blob_with_one_value_broken_loads_or_is_invalid(path, junk, drop):
    blob = _good_blob()
    target = blob
    for part in path[:-1]:
        target = target[part]
    if drop and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = junk
    _load_or_invalid(blob)


@SETTINGS
@given(blob=st.one_of(JSONISH, st.dictionaries(WORDS, JSONISH, max_size=8)))
def test_arbitrary_json_loads_or_is_invalid(blob):
    _load_or_invalid(blob)


def _load_or_invalid(blob) -> None:
    try:
        text = json.dumps(blob)
    except ValueError:
        text = None
    for load in (lambda: Session.from_json(blob, "s1"),
                 lambda: Session.from_json_text(text, "s1") if text is not None else None,
                 lambda: migrate_session(blob, session_id="s1", flow_id_of=lambda x: x,
                                         now="2026-09-20T10:00:00Z")):
        try:
            session = load()
        except InvalidSessionError as exc:
            assert exc.session_id == "s1"
            continue
        if session is None:
            continue
        out = session.to_json()
        assert Session.from_json(out, "s1").to_json() == out
        assert Session.from_json_text(session.to_json_text(), "s1").to_json() == out
