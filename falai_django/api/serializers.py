"""Request validation (every problem is a 400 naming the field) and response shapes."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from falai_django import conf
from falai_django.api import shapes
from falai_django.api.shapes import ISO_TIME, NO_NUL, NOT_BLANK
from falai_django.host.conversations import STATUSES
from falai_django.host.inputs import (
    HANDOFF_MODES,
    UNSET,
    InputError,
    TurnInput,
    check_anchors,
    check_claims,
    parse_turn_input,
)


@extend_schema_field(shapes.SILENCED)
class SilencedField(serializers.Field):
    """`silenced`: a reason string, or `{reason, understand?: bool, skip?: bool}`."""

    default_error_messages = {
        "invalid": _("Expected a non-empty reason, or an object {{reason, understand?, skip?}}."),
        "reason": _("'reason' must be non-empty text."),
        "flag": _("'{name}' must be true or false."),
        "unknown": _("Unknown keys: {keys}."),
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            if not data.strip():
                self.fail("reason")
            return data
        if not isinstance(data, dict):
            self.fail("invalid")
        unknown = set(data) - {"reason", "understand", "skip"}
        if unknown:
            self.fail("unknown", keys=", ".join(sorted(unknown)))
        if not isinstance(data.get("reason"), str) or not data["reason"].strip():
            self.fail("reason")
        for name in ("understand", "skip"):
            if name in data and not isinstance(data[name], bool):
                self.fail("flag", name=name)
        return dict(data)

    def to_representation(self, value: Any) -> Any:
        return value


class Text(serializers.CharField):
    """A text field of the API: kept as sent (no trimming), never empty unless `allow_blank`, no
    NUL; `pattern` (a regular expression, read as JSON Schema reads one) is also what the schema
    says, so a schema-valid value is an accepted one."""

    default_error_messages = {"pattern": _("Must match %(pattern)s.")}

    def __init__(self, *, pattern: str = NO_NUL, pattern_message: Any = None, schema_pattern: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.pattern = pattern
        self.pattern_message = pattern_message
        # What the schema promises, when it is narrower than what the server takes (`at`: the
        # RFC 3339 form; the server also reads the other ISO 8601 forms the engine reads).
        self.schema_pattern = schema_pattern or pattern

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):  # DRF's own field takes 5 as "5": the schema says text
            self.fail("invalid")
        value = super().to_internal_value(data)
        if value and not re.search(self.pattern, value):  # as a JSON Schema validator reads it
            if problem := text_problem(value):  # NUL, or a lone surrogate: say which
                raise serializers.ValidationError(problem)
            raise serializers.ValidationError(self.pattern_message or self.error_messages["pattern"]
                                              % {"pattern": self.pattern})
        return value


class FlowName(Text):
    """One of the running agent's flows (the schema's enum: `schema_hooks.FlowNameExtension`)."""


class EventName(Text):
    """One of the running agent's events (the schema's enum: `schema_hooks.EventNameExtension`)."""


class WholeNumber(serializers.IntegerField):
    """A JSON whole number: text ("5") and true/false are refused, as the schema's `integer` says
    (DRF's own field reads "5" as 5)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str | bool):
            self.fail("invalid")
        return super().to_internal_value(data)


def text_problem(value: Any) -> str | None:
    """Why a value cannot be stored as text / JSON on PostgreSQL (NUL, lone surrogate), or None."""
    if isinstance(value, str):
        if "\x00" in value:
            return str(_("NUL characters are not allowed."))
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return str(_("Text must be valid Unicode (no lone surrogates)."))
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = text_problem(key) or text_problem(item)
            if problem:
                return problem
    elif isinstance(value, list | tuple):
        for item in value:
            problem = text_problem(item)
            if problem:
                return problem
    return None


if TYPE_CHECKING:
    _SerializerBase = serializers.Serializer[Any]
else:
    _SerializerBase = object


class StorableTextMixin(_SerializerBase):  # mixed into serializers: its super() is Serializer's
    """Every field's text (JSON fields included, keys too) must be storable on any database."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        problems = {name: [problem] for name, value in attrs.items() if (problem := text_problem(value))}
        if problems:
            raise serializers.ValidationError(problems)
        return super().validate(attrs)


class _ShapeField(serializers.JSONField):
    """A JSON option whose shape `inputs` checks (the same check a Python caller gets)."""

    check: Any = None

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        try:
            return type(self).check(value)
        except InputError as exc:
            raise serializers.ValidationError(str(exc)) from None


class AnchorsField(_ShapeField):
    check = staticmethod(check_anchors)


class ClaimsField(_ShapeField):
    check = staticmethod(check_claims)


class FlowSpecField(serializers.JSONField):
    """A FlowSpec: a JSON object (its schema: `schema_hooks.FlowSpecExtension`; the flows API
    checks it against the agent)."""


class JSONValueField(serializers.JSONField):
    """Any JSON value but null (null is refused: leave the field out); its schema is
    `schema_hooks.JSONValueExtension`'s."""


class _Common(StorableTextMixin, serializers.Serializer):
    silenced = SilencedField(required=False, allow_null=True, help_text=_("Why the assistant must not speak now."))
    context = JSONValueField(  # type: ignore[assignment]  # a declared field (DRF's metaclass takes it), not the property
        required=False, help_text=_("Per-turn data the flows read."))
    anchors = AnchorsField(required=False, allow_null=True,
                           help_text=_("Host anchors by name: {name: {key, lastInboundAt?}}."))
    claims = ClaimsField(required=False, allow_null=True,
                         help_text=_("Claims from the customer's other sessions: {held: {dedupeKey: ISO}, active: [pair]}."))

    def turn_input(self) -> dict[str, Any]:
        raise NotImplementedError

    def host_options(self) -> dict[str, Any]:
        data = self.validated_data
        options: dict[str, Any] = {"silenced": data.get("silenced")}
        if "context" in data:
            options["context"] = data["context"]
        for name in ("anchors", "claims"):
            if data.get(name):
                options[name] = data[name]
        return options

    def checked_input(self) -> TurnInput:
        """The one validated input the host runs (a problem is a 400 naming the field)."""
        options = self.host_options()
        try:
            return parse_turn_input(self.turn_input(), now=conf.agent_now(), silenced=options["silenced"],
                                    context=options.get("context", UNSET), anchors=options.get("anchors"),
                                    claims=options.get("claims"))
        except InputError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None


class MessageInputSerializer(_Common):
    text = Text(max_length=20000, help_text=_("What the customer wrote."))
    id = Text(max_length=255, required=False, help_text=_("The channel's message id."))
    at = Text(required=False, max_length=64, schema_pattern=ISO_TIME,
                               help_text=_("When the customer wrote it (ISO 8601, e.g. 2026-09-24T10:00:00Z)."))

    def validate_at(self, value: str) -> str:
        from falai_django.host.inputs import parse_at

        try:
            return parse_at(value) or ""
        except InputError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def turn_input(self) -> dict[str, Any]:
        data = self.validated_data
        out: dict[str, Any] = {"message": data["text"]}
        if data.get("id"):
            out["id"] = data["id"]
        if data.get("at"):
            out["at"] = data["at"]
        return out


class WakeInputSerializer(_Common):
    key = Text(max_length=1024, help_text=_("The key of a scheduled wake of this conversation."))

    def turn_input(self) -> dict[str, Any]:
        return {"wake": self.validated_data["key"]}


def _known(kind: str, names: list[str]) -> str:
    return (f"Known {kind}s: {', '.join(sorted(names))}." if names
            else f"This agent declares no {kind}s.")


class EventInputSerializer(_Common):
    event = EventName(max_length=255, help_text=_("One of the agent's events (a 400 names them)."))
    key = Text(max_length=1024, help_text=_("Your idempotency key for this event."))
    payload = JSONValueField(required=False, help_text=_("What the event carries (any JSON but null)."))
    hop = WholeNumber(min_value=0, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)  # unstorable text first: it is the body's own problem
        events = list(getattr(conf.get_agent(), "events", None) or {})
        if attrs["event"] not in events:
            raise serializers.ValidationError({"event": [f"Unknown event {attrs['event']!r}. {_known('event', events)}"]})
        return attrs

    def turn_input(self) -> dict[str, Any]:
        data = self.validated_data
        out = {"event": data["event"], "key": data["key"]}
        if "payload" in data:
            out["payload"] = data["payload"]
        if "hop" in data:
            out["hop"] = data["hop"]
        return out


class StartInputSerializer(_Common):
    flow = FlowName(max_length=255, help_text=_("One of the agent's flows (a 400 names them)."))

    key = Text(max_length=1024, help_text=_("Your idempotency key for this start."))
    input = JSONValueField(required=False, help_text=_("What the run starts with (any JSON but null)."))
    hop = WholeNumber(min_value=0, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)  # unstorable text first: it is the body's own problem
        flows = [flow.id for flow in getattr(conf.get_agent(), "flows", ())]
        if attrs["flow"] not in flows:
            raise serializers.ValidationError({"flow": [f"Unknown flow {attrs['flow']!r}. {_known('flow', flows)}"]})
        return attrs

    def turn_input(self) -> dict[str, Any]:
        data = self.validated_data
        start = {"flow": data["flow"], "key": data["key"]}
        if "input" in data:
            start["input"] = data["input"]
        if "hop" in data:
            start["hop"] = data["hop"]
        return {"start": start}


class SilenceSerializer(StorableTextMixin, serializers.Serializer):
    reason = Text(max_length=255, pattern=NOT_BLANK, pattern_message=_("Write a reason (not only spaces)."),
                  help_text=_("Why the assistant is silenced (e.g. 'human')."))
    owner = Text(max_length=255, required=False, help_text=_("Who owns the conversation now."))
    mode = serializers.ChoiceField(choices=HANDOFF_MODES, default="stop")


class HandoffResponseSerializer(serializers.Serializer):
    """What silence / unsilence answer: the handoff now in force (null once given back)."""

    handoff = serializers.DictField(allow_null=True, help_text=_("reason, mode, at, owner?"))
    version = serializers.IntegerField()


class OutboundMessageSerializer(serializers.Serializer):
    text = serializers.CharField()
    kind = serializers.CharField()
    key = serializers.CharField()
    after_ms = serializers.IntegerField()


class TurnResponseSerializer(serializers.Serializer):
    """What an input did."""

    status = serializers.CharField()
    changed = serializers.BooleanField()
    turn_id = serializers.IntegerField()
    replays = serializers.IntegerField()
    version = serializers.IntegerField(allow_null=True)
    messages = serializers.ListField(child=serializers.DictField())
    schedule = serializers.ListField(child=serializers.DictField())
    outcomes = serializers.ListField(child=serializers.DictField())
    retry_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True)

    @staticmethod
    def from_host(host_result) -> dict[str, Any]:
        result = host_result.result
        return {
            "status": host_result.status,
            "changed": host_result.changed,
            "turn_id": host_result.turn_id,
            "replays": host_result.replays,
            "version": host_result.version,
            "messages": [m.to_json() for m in result.messages] if result is not None else [],
            "schedule": [s.to_json() for s in result.schedule] if result is not None else [],
            "outcomes": [o.to_json() for o in result.outcomes] if result is not None else [],
            "retry_at": host_result.retry_at,
            "error": host_result.error,
        }


MAX_PAGE_SIZE = 500


@extend_schema_field({"type": "boolean"})
class QueryBoolean(serializers.Field):
    """A query parameter that is `true` or `false`, as OpenAPI writes a boolean in a query (DRF's
    own field also reads 1, yes, on, null...: more than the schema says)."""

    default_error_messages = {"invalid": _("Write true or false.")}

    def to_internal_value(self, data: Any) -> bool:
        if data not in ("true", "false"):
            self.fail("invalid")
        return data == "true"

    def to_representation(self, value: Any) -> Any:
        return value


class SessionListQuerySerializer(serializers.Serializer):
    """`GET sessions` filters: the admin list's (status, flow, owner, silenced, search)."""

    status = serializers.ChoiceField(
        choices=list(STATUSES), required=False, help_text=_("asking, waiting, idle or silenced (as in the admin)."),
        # DRF's own message ('"x" is not a valid choice.') does not say what is valid.
        error_messages={"invalid_choice": "Unknown status {input!r}. Known statuses: " + ", ".join(sorted(STATUSES)) + "."})
    flow = FlowName(max_length=255, required=False, help_text=_("The asking run's flow."))
    owner = Text(max_length=255, required=False, help_text=_("The human who took it over."))
    silenced = QueryBoolean(required=False, help_text=_("Only silenced (true) or only not silenced (false)."))
    q = Text(max_length=255, required=False,
                              help_text=_("Words in the id, a collected value or the transcript."))

    page = serializers.IntegerField(min_value=1, required=False, help_text=_("Page number, from 1."))
    page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, required=False,
                                         help_text=_("Conversations a page (default 50, at most 500)."))

    def validate_flow(self, value: str) -> str:
        flows = [flow.id for flow in getattr(conf.get_agent(), "flows", ())]
        if value not in flows:
            raise serializers.ValidationError(f"Unknown flow {value!r}. {_known('flow', flows)}")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        problems = {name: [problem] for name, value in attrs.items() if (problem := text_problem(value))}
        if problems:
            raise serializers.ValidationError(problems)
        return attrs


class SessionSummarySerializer(serializers.Serializer):
    """One conversation in `GET sessions`: the indexed columns, as the admin's list shows them."""

    id = serializers.CharField()
    status = serializers.CharField(help_text=_("asking, waiting, idle or silenced."))
    flow = serializers.CharField(source="asking_flow", allow_null=True)
    step = serializers.CharField(source="asking_step", allow_null=True)
    waiting_until = serializers.DateTimeField(allow_null=True)
    silenced_reason = serializers.CharField(allow_null=True)
    owner = serializers.CharField(source="human_owner", allow_null=True)
    live_runs = serializers.IntegerField(source="run_count", allow_null=True)
    last_user_at = serializers.DateTimeField(allow_null=True)
    last_assistant_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    version = serializers.IntegerField()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        from falai_django.host.conversations import conversation_status

        instance.status = conversation_status(instance)
        return super().to_representation(instance)


class SessionPageSerializer(serializers.Serializer):
    """A page of `GET sessions` (DRF's page-number pagination)."""

    count = serializers.IntegerField(help_text=_("Conversations the filters match: exact up to 10,000, the "
                                                 "database's estimate past it (see count_is_estimate)."))
    count_is_estimate = serializers.BooleanField(help_text=_("Whether count is an estimate."))
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = SessionSummarySerializer(many=True)
