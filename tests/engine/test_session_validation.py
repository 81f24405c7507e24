"""`Session.from_json` checks a stored blob exactly as upstream `assertSession` does."""

from __future__ import annotations

import copy
import json

import pytest

from falai_django.engine.errors import InvalidSessionError
from falai_django.engine.session import Session, describe


@pytest.fixture
def blob(legacy_blobs_dir) -> dict:
    value = json.loads((legacy_blobs_dir / "v4.json").read_text())
    value["id"] = "s1"
    return value


def broken(blob: dict, path: str, value=...):
    """The blob with one key (dotted path, list indexes as numbers) set to `value`, or deleted."""
    out = copy.deepcopy(blob)
    *parents, last = path.split(".")
    target = out
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    key = int(last) if isinstance(target, list) else last
    if value is ...:
        del target[key]
    else:
        target[key] = value
    return out


def reason_of(blob, session_id="s1") -> str:
    with pytest.raises(InvalidSessionError) as caught:
        Session.from_json(blob, session_id)
    error = caught.value
    assert error.session_id == session_id
    assert str(error).startswith(f'[InvalidSessionError] stored session "{session_id}" is unreadable: ')
    assert "Repair or delete the row" in str(error)
    # the text path gives the same answer
    if not isinstance(blob, float):
        with pytest.raises(InvalidSessionError) as again:
            Session.from_json_text(json.dumps(blob), session_id)
        assert again.value.reason == error.reason
    return error.reason


@pytest.mark.parametrize(("value", "reason"), [
    (None, "expected an object, got null"),
    ("nope", 'expected an object, got "nope"'),
    ([1], "expected an object, got a list"),
    ({}, "v is missing, expected 4"),
])
def test_non_objects_and_empty_blobs(value, reason):
    assert reason_of(value) == reason


@pytest.mark.parametrize(("path", "value", "reason"), [
    ("v", 3, "v is 3, expected 4"),
    ("v", True, "v is true, expected 4"),
    ("v", ..., "v is missing, expected 4"),
    ("id", "other", 'id is "other", expected "s1"'),
    ("version", "3", 'version is "3", expected a whole number'),
    ("version", 1.5, "version is 1.5, expected a whole number"),
    ("version", True, "version is true, expected a whole number"),
    ("version", -1, "version is -1, expected a whole number"),
    ("data", ..., "data is missing, expected an object"),
    ("data", "nope", 'data is "nope", expected an object'),
    ("data", [], "data is a list, expected an object"),
    ("runs", {}, "runs is an object, expected a list"),
    ("claims.triagem:conv_v4:", {"when": "x"}, "claims is not a map of { at }"),
    ("claims", [], "claims is not a map of { at }"),
    ("inputs", ["m1", 2], "inputs is not a list of ids"),
    ("metadata", ..., "metadata is missing, expected an object"),
    ("history", {}, "history is an object, expected a list"),
    ("history", None, "history is null, expected a list"),
    ("lastUserAt", None, "lastUserAt is not text"),
    ("lastAssistantAt", 5, "lastAssistantAt is not text"),
    ("runs.0", "x", 'runs[0] is "x", expected an object'),
    ("runs.1.status", "sleeping", 'runs[1].status is "sleeping"'),
    ("runs.0.status", None, "runs[0].status is null, expected text"),
    ("runs.0.trigger", ..., "runs[0].trigger needs kind and key"),
    ("runs.0.trigger", {"kind": "message"}, "runs[0].trigger needs kind and key"),
    ("runs.0.hop", "0", 'runs[0].hop is "0", expected a whole number'),
    ("runs.0.hop", -1, "runs[0].hop is -1, expected a whole number"),
    ("runs.0.hop", 1.5, "runs[0].hop is 1.5, expected a whole number"),
    ("runs.0.stepId", ..., "runs[0].stepId is missing, expected text or null"),
    ("runs.0.outcomes", {}, "runs[0].outcomes is an object, expected a list"),
    ("runs.0.waiting", 5, "runs[0].waiting is 5, expected an object"),
    ("runs.1.waiting", None, "runs[1].waiting is null, expected an object"),
    ("runs.0.dedupeKey", None, "runs[0].dedupeKey is null, expected text"),
    ("runs.0.asked", [], "runs[0].asked is a list, expected an object"),
])
def test_each_broken_key_names_its_reason(blob, path, value, reason):
    assert reason_of(broken(blob, path, value)) == reason


def test_the_message_starts_as_upstream_writes_it(blob):
    with pytest.raises(InvalidSessionError, match=r'^\[InvalidSessionError\] stored session "s1" is unreadable: '
                                                  r'data is "nope"'):
        Session.from_json(broken(blob, "data", "nope"), "s1")


def test_invalid_json_text():
    with pytest.raises(InvalidSessionError, match="blob is not valid JSON"):
        Session.from_json_text("{oops", "s1")


def test_without_an_expected_id_any_text_id_passes(blob):
    assert Session.from_json(blob).id == "s1"
    with pytest.raises(InvalidSessionError, match="id is 5, expected text"):
        Session.from_json(broken(blob, "id", 5))


def test_whole_floats_read_as_numbers_like_javascript(blob):
    session = Session.from_json(broken(broken(blob, "version", 3.0), "runs.0.hop", 0.0), "s1")
    assert session.version == 3 and isinstance(session.version, int)
    assert session.runs[0].hop == 0 and isinstance(session.runs[0].hop, int)


def test_normalisation_drops_what_upstream_drops(blob):
    messy = copy.deepcopy(blob)
    messy["createdAt"] = "2026-01-01"
    messy["updatedAt"] = "2026-01-02"
    messy["runs"][0]["staying"] = False
    messy["runs"][0]["suspendedAt"] = 12
    messy["runs"][0]["extra"] = 1
    session = Session.from_json(messy, "s1")
    assert session.to_json() == blob
    assert set(session.to_json()) == {"claims", "data", "id", "inputs", "lastAssistantAt", "lastUserAt",
                                      "metadata", "runs", "v", "version"}


@pytest.mark.parametrize(("value", "text"), [
    (..., "missing"), (None, "null"), ([], "a list"), ("x", '"x"'), (3, "3"), (1.5, "1.5"), (2.0, "2"),
    (True, "true"), ({}, "an object"),
])
def test_describe_names_values_like_upstream(value, text):
    assert (describe() if value is ... else describe(value)) == text
