"""Thin views: validate with a serializer, call the host, render. No loop logic here."""

from __future__ import annotations

import io
import itertools
import json
import logging
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, JsonResponse, StreamingHttpResponse
from django.utils.translation import gettext_lazy as _
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, NotFound, ParseError, PermissionDenied, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from falai_django import host, jsondepth
from falai_django.api import failures, serializers, shapes
from falai_django.api.auth import CanDriveConversations, CanEraseConversations, WebhookSignatureAuthentication
from falai_django.api.schema import FalaiAutoSchema, answers, extend_method_schema
from falai_django.engine.errors import FlowConfigurationError, InvalidSessionError, SessionConflictError
from falai_django.host import outages
from falai_django.host.counting import EstimatingPaginator
from falai_django.models import Erasure

logger = logging.getLogger("falai_django.api")


def _authentication_classes() -> list:
    from rest_framework.settings import api_settings

    return [WebhookSignatureAuthentication, *api_settings.DEFAULT_AUTHENTICATION_CLASSES]


class JSONParser(parsers.JSONParser):
    """DRF's parser, plus: a body whose values nest deeper than `FALAI["MAX_JSON_DEPTH"]` is a 400
    naming the limit, refused from its text before the decoder runs (which would run out of stack:
    a 500). The values themselves (payload, input, context, spec) are held to the limit by name
    after parsing."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        encoding = (parser_context or {}).get("encoding") or django_settings.DEFAULT_CHARSET
        try:
            jsondepth.check_body_text(raw.decode(encoding, "replace"))
        except jsondepth.JSONDepthError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        try:
            return super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError(_("JSON parse error - the body is nested too deeply.")) from None


class FalaiView(APIView):
    permission_classes = [CanDriveConversations]
    parser_classes = [JSONParser]
    schema = FalaiAutoSchema()  # drf-spectacular's, whatever the project's DEFAULT_SCHEMA_CLASS
    falai_api = True  # what the schema describes (schema._only_falai)

    def get_authenticators(self):
        return [auth() for auth in _authentication_classes()]

    def handle_exception(self, exc):
        refused = outages.refusal(self.request, exc, self.kwargs.get("session_id"))
        if refused is not None:  # a 503 the caller retries, not an HTML 500 page
            return refused
        if isinstance(exc, host.InputError | FlowConfigurationError):
            exc = ValidationError({"detail": str(exc)})
        elif isinstance(exc, host.ConversationBusyError):
            return Response({"detail": _("A turn of this conversation is running; nothing was erased. Retry in a few "
                                         "seconds.")}, status=status.HTTP_409_CONFLICT,
                            headers={"Retry-After": str(exc.retry_after_s)})
        elif isinstance(exc, host.UnknownConversationError):
            exc = NotFound(_("No conversation with this id."))
        elif isinstance(exc, InvalidSessionError):
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        elif isinstance(exc, SessionConflictError):  # a handoff that lost every compare-and-swap
            return Response({"detail": _("The conversation kept changing; nothing was written. Try again.")},
                            status=status.HTTP_409_CONFLICT)
        elif not isinstance(exc, APIException | Http404 | DjangoPermissionDenied):
            # Not DRF's to answer: a JSON 500 with an error id, never Django's page (with DEBUG on,
            # a traceback with the exception's text); the log line has the id and the details.
            error_id = failures.report(exc, f"{self.request.method} {self.request.path}", self.kwargs.get("session_id"))
            return Response(failures.body(error_id), status=status.HTTP_500_INTERNAL_SERVER_ERROR)
        return super().handle_exception(exc)


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """A path under the API's prefixes that no pattern takes (an id with a `/`, a misspelt
    endpoint): a JSON 404 with a reason, as the API answers everywhere, not Django's HTML page."""
    return JsonResponse({"detail": str(_("No API endpoint at this path."))}, status=404)


def _check_session_id(session_id: str) -> None:
    if not session_id or len(session_id) > 255:
        raise ValidationError({"session_id": [_("A session id is 1 to 255 characters.")]})
    problem = serializers.text_problem(session_id)
    if problem:
        raise ValidationError({"session_id": [problem]})


SESSION_ID = OpenApiParameter("session_id", {"type": "string", "maxLength": 255, "pattern": shapes.SESSION_ID},
                              OpenApiParameter.PATH,
                              description="The conversation's id (e.g. the customer's phone number).")
# One server-sent event of the stream, as a client's SSE parser hands it over.
_SSE_EVENT = {"type": "object", "required": ["event", "data"], "properties": {
    "event": {"type": "string", "enum": ["delta", "replay", "done", "error"]},
    "data": {"type": "string",
             "description": "JSON. delta: {delta}; replay: {replay}; done: the turn (as POST messages answers); error: "
                            "{detail, error_id}."},
}}
_TURN = {200: (serializers.TurnResponseSerializer, "The turn ran: what it said, scheduled and recorded."),
         202: (serializers.TurnResponseSerializer,
               "The provider failed: the input is kept and retried later (status retry or failed).")}
_HANDOFF_ERRORS = {404: "No conversation with this id."}


class _InputView(FalaiView):
    serializer_class: type[serializers._Common]

    def get_serializer(self, *args, **kwargs):  # for the schema generator
        return self.serializer_class(*args, **kwargs)

    def authorize_input(self, session_id: str, serializer) -> None:
        """Hook: refuse an input this conversation may not take."""

    def post(self, request, session_id: str) -> Response:
        _check_session_id(session_id)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.authorize_input(session_id, serializer)
        result = host.handle(session_id, serializer.checked_input())
        code = status.HTTP_202_ACCEPTED if result.status in ("retry", "failed") else status.HTTP_200_OK
        return Response(serializers.TurnResponseSerializer.from_host(result), status=code)


@extend_schema(tags=["inputs"], parameters=[SESSION_ID], responses=answers(_TURN))
class MessageView(_InputView):
    """An inbound customer message."""

    serializer_class = serializers.MessageInputSerializer


@extend_schema(tags=["inputs"], parameters=[SESSION_ID], responses=answers(_TURN, errors={
    403: "The wake belongs to another conversation.", 404: "This conversation has no wake with that key."}))
class WakeView(_InputView):
    """Fire a wake of this conversation (`turn(wake=key)`)."""

    serializer_class = serializers.WakeInputSerializer

    def authorize_input(self, session_id: str, serializer) -> None:
        from falai_django.models import Wake

        key = serializer.validated_data["key"]
        owners = set(Wake.objects.filter(key=key).values_list("conversation_id", flat=True)[:50])
        if session_id in owners:
            return
        if owners or key.startswith("silence:") and f":{session_id}:" not in key:
            raise PermissionDenied(_("This wake belongs to another conversation."))
        raise NotFound(_("This conversation has no wake with that key."))


@extend_schema(tags=["inputs"], parameters=[SESSION_ID], responses=answers(_TURN))
class EventView(_InputView):
    """An event from your system."""

    serializer_class = serializers.EventInputSerializer


@extend_schema(tags=["inputs"], parameters=[SESSION_ID], responses=answers(_TURN))
class StartView(_InputView):
    """Start a flow by hand."""

    serializer_class = serializers.StartInputSerializer


@extend_schema(tags=["inputs"], parameters=[SESSION_ID], responses=answers(
    {200: (_SSE_EVENT, "`delta` events, `replay` (the text so far is void), then `done` (the turn); `error` if "
                       "the turn fails after the first byte.")},
    content_type="text/event-stream"))
class MessageStreamView(FalaiView):
    """An inbound message answered as server-sent events: `delta` chunks, then `done`."""

    serializer_class = serializers.MessageInputSerializer

    def get_serializer(self, *args, **kwargs):
        return self.serializer_class(*args, **kwargs)

    def post(self, request, session_id: str):
        _check_session_id(session_id)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        events = host.stream(session_id, serializer.checked_input())
        # Run the loop up to its first event before the headers go out: the session row is loaded
        # by then, so an unreadable row is a 409 like on every other endpoint, not a 200 with an
        # in-band error (the first byte would wait for this event anyway).
        first = next(events)
        response = StreamingHttpResponse(_sse(itertools.chain([first], events), session_id),
                                         content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


def _sse_frame(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"


def _sse(events, session_id: str = ""):
    try:
        for event in events:
            if "delta" in event:
                yield _sse_frame("delta", {"delta": event["delta"]})
            elif "replay" in event:
                yield _sse_frame("replay", {"replay": event["replay"]})
            elif event.get("done"):
                yield _sse_frame("done", serializers.TurnResponseSerializer.from_host(event["host"]))
    except Exception as exc:  # noqa: BLE001 - headers are out: report in-band
        # The client gets a sentence and an id, never the exception (its text may carry SQL, paths,
        # a provider's answer); the log line carries the same id and the traceback.
        error_id = failures.report(exc, "the stream (after its first byte)", session_id)
        yield _sse_frame("error", failures.body(error_id, failures.STREAM_FAILED))


class SessionStateView(FalaiView):
    """The conversation: read it (GET), or erase it everywhere (DELETE)."""

    def get_permissions(self):
        if self.request is not None and self.request.method == "DELETE":
            return [CanEraseConversations()]
        return super().get_permissions()

    @extend_method_schema(tags=["sessions"], parameters=[SESSION_ID], responses=answers(
        {200: (dict, "Session, handoff, pending wakes, recent history and turns.")}, errors=_HANDOFF_ERRORS))
    def get(self, request, session_id: str) -> Response:
        """The conversation: session data, runs, pending wakes, recent history, handoff."""
        _check_session_id(session_id)
        state = host.session_state(session_id)
        if state is None:
            raise NotFound(_("No conversation with this id."))
        return Response(state)

    @extend_method_schema(tags=["sessions"], parameters=[SESSION_ID], responses=answers(
        {204: (None, "Erased: every row of the conversation is gone, and an audit row keeps its id as an HMAC.")},
        errors={**_HANDOFF_ERRORS, 403: "You need the 'erase conversation' permission (a signed webhook never has it).",
                409: "A turn of this conversation is running; nothing was erased. Retry after Retry-After seconds."}))
    def delete(self, request, session_id: str) -> Response:
        """Erase the conversation everywhere (README "Erasure and retention"): session, transcript,
        run log, wakes, inbox, desk records and flow funnel entries, in one transaction."""
        _check_session_id(session_id)
        host.erase(session_id, user=request.user, via=Erasure.Via.API)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["handoff"], parameters=[SESSION_ID], responses=answers(
    {200: (serializers.HandoffResponseSerializer, "The conversation's handoff and its new version.")},
    errors=_HANDOFF_ERRORS))
class SilenceView(FalaiView):
    """Hand the conversation to a human: later inputs are silenced with this reason."""

    serializer_class = serializers.SilenceSerializer

    def get_serializer(self, *args, **kwargs):
        return self.serializer_class(*args, **kwargs)

    def post(self, request, session_id: str) -> Response:
        _check_session_id(session_id)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        saved = host.silence(session_id, data["reason"], owner=data.get("owner"), mode=data["mode"])
        return Response({"handoff": host.handoff_of(saved), "version": saved.version})


@extend_schema(tags=["handoff"], parameters=[SESSION_ID], request=None, responses=answers(
    {200: (serializers.HandoffResponseSerializer, "The handoff is cleared; the new version.")},
    errors=_HANDOFF_ERRORS))
class UnsilenceView(FalaiView):
    """Give the conversation back to the agent."""

    def post(self, request, session_id: str) -> Response:
        _check_session_id(session_id)
        saved = host.unsilence(session_id)
        return Response({"handoff": None, "version": saved.version})


class _ListSchema(FalaiAutoSchema):
    def get_operation_id(self) -> str:
        return "sessions_list"  # the generated name would collide with GET sessions/<id>


class SessionPagination(PageNumberPagination):
    """Pages of conversations; `count` is exact up to 10,000 and the planner's estimate past it
    (`host.counting`), which `count_is_estimate` says."""

    django_paginator_class = EstimatingPaginator
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = serializers.MAX_PAGE_SIZE

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        # paginate_queryset set the page, with django_paginator_class's paginator
        assert self.page is not None and isinstance(self.page.paginator, EstimatingPaginator)
        response.data["count_is_estimate"] = self.page.paginator.count_is_estimate
        return response


@extend_schema(tags=["sessions"], parameters=[serializers.SessionListQuerySerializer],
               responses=answers({200: (serializers.SessionPageSerializer,
                                        "A page of conversations: count, next, previous, results.")},
                                 errors={404: "No such page."}))
class SessionListView(FalaiView):
    """List conversations, most recent customer message first, filtered as in the admin."""

    schema = _ListSchema()

    def get(self, request) -> Response:
        from falai_django.host.conversations import LIST_ORDER, STATUS_FILTERS, search
        from falai_django.models import Session

        # a plain dict, not the QueryDict: DRF reads an empty optional form value as left out, and
        # `status=` is a value the schema refuses, so the server says so too
        query = serializers.SessionListQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        filters = query.validated_data
        rows = Session.objects.defer("blob").order_by(*LIST_ORDER)
        if filters.get("status"):
            rows = rows.filter(STATUS_FILTERS[filters["status"]])
        if filters.get("flow"):
            rows = rows.filter(asking_flow=filters["flow"])
        if filters.get("owner"):
            rows = rows.filter(human_owner=filters["owner"])
        if "silenced" in filters:
            rows = rows.filter(silenced_reason__isnull=not filters["silenced"])
        if filters.get("q"):
            rows = search(rows, filters["q"])
        paginator = SessionPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(serializers.SessionSummarySerializer(page, many=True).data)
