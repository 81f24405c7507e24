"""Read any failure of a model call: its `ProviderError` kind and what it carries (persistence-and-LLM
note §5.4). `errors` builds the `ProviderError` from these readings (`classify_error`)::

    from falai_django.llm.errors import classify_error, speak_deferral

    try:
        out = provider.generate_message(request)
    except Exception as exc:
        err = classify_error(exc, provider.name)      # ProviderError (passed through if it is one)
        deferred = speak_deferral(err)                # {"code", "retryable", "reset_at_ms"} (§6.5)

A `ProviderError` keeps its kind. Anything else is read the way the README's ruling 9 says:
its HTTP status from `status` / `status_code` (or an integer `code`, which is where
google-genai keeps it), a string `code` / `status` where the SDK sets one
(`RESOURCE_EXHAUSTED`), and its message text plus any parsed body it carries (`details`,
`body`, `error`). The tests run in the note's order and the first match wins. A server's
`Retry-After` header, `retry-after-ms` header or Gemini `RetryInfo.retryDelay` becomes
`retry_after_ms`; an `x-should-retry` header becomes `should_retry`.
"""

from __future__ import annotations

import email.utils
import errno
import json
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:  # for the TypeGuard only: `errors` builds on this module
    from falai_django.llm.errors import ProviderError

ERROR_KINDS = (
    "aborted", "timeout", "network", "overload", "rate", "quota", "entitlement",
    "auth", "model", "context", "content", "invalid", "unknown",
)
TRANSIENT_KINDS = frozenset({"timeout", "network", "overload", "rate"})
BACKUP_ELIGIBLE_KINDS = frozenset({"overload", "rate"})

BODY_LIMIT = 2000
_CAUSE_DEPTH = 5

# -- abort and transport: failures with no status ------------------------------------------

_ABORT_NAMES = frozenset({"AbortError", "APIUserAbortError", "CancelledError"})

# Exception class names (anywhere in the MRO) meaning the socket died, across httpx / httpx2,
# requests, aiohttp, urllib3 and the standard library. Timeouts are deliberately absent.
_TRANSPORT_NAMES = frozenset({
    "ConnectError", "ReadError", "WriteError", "NetworkError", "RemoteProtocolError", "LocalProtocolError",
    "ProxyError", "ConnectionError", "ConnectionResetError", "ConnectionRefusedError",
    "ConnectionAbortedError", "BrokenPipeError", "RemoteDisconnected", "IncompleteRead",
    "ChunkedEncodingError", "ProtocolError", "ClientConnectionError", "ServerDisconnectedError",
    "ClientOSError", "ClientPayloadError", "APIConnectionError", "gaierror",
})
_TRANSPORT_ERRNOS = frozenset(
    getattr(errno, name) for name in (
        "ECONNRESET", "ECONNREFUSED", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "ENETUNREACH",
        "ENETDOWN", "EHOSTUNREACH",
    ) if hasattr(errno, name)
)
_TRANSPORT_CODES = frozenset({
    "ECONNRESET", "ECONNREFUSED", "ECONNABORTED", "ETIMEDOUT", "EPIPE", "ENETUNREACH", "ENETDOWN",
    "ENOTFOUND", "EHOSTUNREACH", "EAI_AGAIN", "ERR_STREAM_PREMATURE_CLOSE",
})
_TRANSPORT_WORDS = re.compile(
    r"fetch failed|failed to fetch|network\s?error|unable to connect|socket hang up|"
    r"connection (?:reset|refused|aborted|closed|error)|server disconnected|remote end closed|"
    r"peer closed connection|incomplete chunked read|premature close|"
    r"stream (?:ended|closed) unexpectedly|und_err",
    re.IGNORECASE,
)
_TIMEOUT_NAMES = frozenset({
    "TimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout",
    "Timeout", "ServerTimeoutError", "APITimeoutError",
})

# -- wording, most specific first ----------------------------------------------------------


def _any(*patterns: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


_CONTEXT = _any(
    r"context[_\s]length[_\s]exceeded", r"maximum context length", r"context window",
    r"prompt is too long", r"input is too long", r"too many (?:input )?tokens",
    r"reduce the length of the (?:messages|prompt|input)",
    r"exceeds? the (?:model'?s? )?maximum (?:input |prompt |context )?(?:tokens?|length|context)",
    # Gemini: "The input token count (N) exceeds the maximum number of tokens allowed (M)."
    r"input token count.{0,40}exceeds", r"exceeds the maximum number of tokens",
)
_ENTITLEMENT = _any(
    r"plan does(?:n't| not) (?:include|support)", r"not included (?:in|with) your .{0,40}plan",
    r"upgrade to [\w ]{1,30}(?:or higher|plan)", r"no api access",
)
_QUOTA = _any(
    r"insufficient[_\s]quota", r"exceeded your current quota", r"insufficient (?:balance|credits?)",
    r"credit balance is too low", r"(?:no|out of) credits", r"usage limits? (?:reached|exceeded|hit)",
    r"reached your (?:usage|weekly|monthly|daily) limit", r"(?:weekly|monthly|daily|plan) usage limit",
    r"purchase extra usage", r"upgrade your plan", r"quota\b[^.]{0,40}\b(?:exhausted|exceeded|will be refreshed)",
    r"balance (?:is )?(?:too low|not enough|insufficient)", r"余额不足", r"欠费", r"额度(?:不足|已用完)",
)
_MODEL = _any(r"(?:model|models/)[^.{\n]{0,40}(?:not found|does not exist|unknown)", r"no model named",
              r"unsupported model")
_AUTH = _any(
    r"invalid (?:x-api-key|api[ _-]?key|token|credentials?)", r"api[ _-]?key (?:is )?(?:not valid|invalid|incorrect)",
    r"unauthorized|UNAUTHENTICATED|PERMISSION_DENIED|API_KEY_INVALID",
    r"authentication[_\s](?:failed|invalid|error)", r"account (?:disabled|suspended|deactivated|banned)",
)
_CONTENT = _any(r"content[_\s]filter", r"content policy", r"safety|PROHIBITED_CONTENT|blocked|refusal",
               # OpenAI's 400 `invalid_prompt`: "... flagged as potentially violating our usage policy"
               r"flagged as potentially violating", r"violat\w* (?:our |the )?usage polic")
_RATE = re.compile(r"(?i:rate[_\s-]?limit|too many requests)|RESOURCE_EXHAUSTED")
# Google's status names are upper case by contract; kept exact so prose does not match.
_OVERLOAD = re.compile(
    r"(?i:overloaded|\bunavailable\b|internal error|\bcapacity\b)|\bUNAVAILABLE\b|\bINTERNAL\b|\"code\"\s*:\s*5\d\d"
)
_TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)
_RETRY_DELAY = re.compile(r"\"?retryDelay\"?\s*[:=]\s*\"?(\d+(?:\.\d+)?)s", re.IGNORECASE)


# -- reading whatever was raised -----------------------------------------------------------


def _mro_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _int_attr(obj: Any, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_attr(obj: Any, name: str) -> str | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, str) and value else None


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries: `status`, `status_code`, an integer `code`, or its response's."""
    for name in ("status", "status_code", "code"):
        value = _int_attr(exc, name)
        if value is not None and 100 <= value <= 599:
            return value
    response_status = _int_attr(getattr(exc, "response", None), "status_code")
    if response_status is not None and response_status >= 400:
        return response_status
    return None


def code_of(exc: BaseException) -> str | None:
    """The SDK's string code (`RESOURCE_EXHAUSTED`, `ECONNRESET`, `insufficient_quota`), if any."""
    for name in ("code", "status", "type"):
        value = _str_attr(exc, name)
        if value is not None:
            return value
    errno_value = _int_attr(exc, "errno")
    if errno_value is not None:
        return errno.errorcode.get(errno_value)
    return None


def message_of(exc: BaseException) -> str:
    return _str_attr(exc, "message") or str(exc) or type(exc).__name__


def body_text_of(exc: BaseException) -> str:
    """The message plus any parsed vendor body the exception carries, as searchable text."""
    text = str(exc) or type(exc).__name__
    for name in ("details", "body", "error"):
        body = getattr(exc, name, None)
        if body is None or body == "" or body is exc:
            continue
        if isinstance(body, str):
            text = f"{text} {body}"
        else:
            try:
                text = f"{text} {json.dumps(body, ensure_ascii=False, default=str)}"
            except (TypeError, ValueError):
                text = f"{text} {body!r}"
        break
    return text


def with_codes(text: str, exc: BaseException) -> str:
    """The searchable text plus the SDK's string codes (README ruling 9): an exception whose
    message says only "Request failed" but whose `code` is `insufficient_quota` or whose `status`
    is `RESOURCE_EXHAUSTED` is read by those codes."""
    codes = [value for name in ("code", "status", "type")
             if (value := _str_attr(exc, name)) is not None and value not in text]
    return " ".join([text, *codes]) if codes else text


def _causes(exc: BaseException) -> Iterator[BaseException]:
    current: BaseException | None = exc
    for _ in range(_CAUSE_DEPTH):
        if current is None:
            return
        yield current
        current = current.__cause__


def is_abort(exc: BaseException) -> bool:
    return bool(_mro_names(exc) & _ABORT_NAMES) or getattr(exc, "code", None) == "ABORT_ERR"


def is_transport_failure(exc: BaseException) -> bool:
    """True when the socket died (on the exception or up to five causes deep); never for an abort."""
    for current in _causes(exc):
        if is_abort(current):
            return False
        names = _mro_names(current)
        if names & _TIMEOUT_NAMES:
            return False  # the openai / anthropic SDKs' APITimeoutError subclasses APIConnectionError
        if names & _TRANSPORT_NAMES:
            return True
        if _int_attr(current, "errno") in _TRANSPORT_ERRNOS:
            return True
        code = _str_attr(current, "code")
        if code is not None and (code in _TRANSPORT_CODES or (code.startswith("UND_ERR_") and code != "UND_ERR_ABORTED")):
            return True
        # wording only counts when no HTTP status came back (a status means the server answered)
        if not (names & _TIMEOUT_NAMES) and status_of(current) is None and _TRANSPORT_WORDS.search(str(current)):
            return True
    return False


def is_provider_error(exc: object) -> TypeGuard[ProviderError]:
    """Whether `exc` is already a classified `ProviderError` (its kind is kept). Read from the
    instance, so this module needs nothing from `errors`, which builds on it."""
    return getattr(type(exc), "classified", False) is True and getattr(exc, "kind", None) in ERROR_KINDS


def classify_kind(exc: BaseException | None, status: int | None = None, body: str | None = None) -> str:
    """The `ErrorKind` of a failure; `status` and `body` default to what `exc` carries."""
    if is_provider_error(exc):
        return exc.kind
    if exc is not None and is_abort(exc):
        return "aborted"
    if exc is not None and is_transport_failure(exc):
        return "network"
    if status is None and exc is not None:
        status = status_of(exc)
    text = body if body is not None else (body_text_of(exc) if exc is not None else "")
    if body is None and exc is not None:
        text = with_codes(text, exc)
    if (exc is not None and _mro_names(exc) & _TIMEOUT_NAMES) or status == 408:
        return "timeout"
    client_side = status is None or status < 500
    if client_side and _CONTEXT.search(text):
        return "context"
    if client_side and _ENTITLEMENT.search(text):
        return "entitlement"
    if client_side and _QUOTA.search(text):
        return "quota"
    if _MODEL.search(text):
        return "model"
    if status in (401, 403) or _AUTH.search(text):
        return "auth"
    if status == 402:
        return "quota"
    if status == 404:
        return "model"
    if status == 429:
        return "rate"
    if _CONTENT.search(text):
        return "content"
    if status in (529, 409, 425):
        return "overload"
    if status is not None and status >= 500:
        return "overload"
    if _RATE.search(text):
        return "rate"
    if _OVERLOAD.search(text):
        return "overload"
    if _TIMED_OUT.search(text):
        return "timeout"
    if status is not None and status >= 400:
        return "invalid"
    return "unknown"


classify = classify_kind  # upstream's name: classify(err, status?, body?) -> ErrorKind


def _headers_of(exc: BaseException) -> Any:
    headers = getattr(exc, "headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    return headers


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value = headers.get(name)
        if value is None and isinstance(headers, dict):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:  # an exotic headers object: no hint rather than a crash
        return None
    return str(value) if value is not None else None


def retry_after_ms_of(exc: BaseException, body: str | None = None, *, now_ms: float | None = None) -> int | None:
    """How long the server asked us to wait: an explicit attribute, RetryInfo, or Retry-After."""
    explicit = getattr(exc, "retry_after_ms", None)
    if isinstance(explicit, int | float) and not isinstance(explicit, bool) and explicit >= 0:
        return int(explicit)
    text = body if body is not None else body_text_of(exc)
    delay = _RETRY_DELAY.search(text)
    if delay:
        return _round_half_up(float(delay.group(1)) * 1000)
    headers = _headers_of(exc)
    millis = _header(headers, "retry-after-ms")
    if millis is not None:
        try:
            return max(0, _round_half_up(float(millis)))
        except ValueError:
            pass
    value = _header(headers, "retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value) * 1000
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    now = time.time() * 1000 if now_ms is None else now_ms
    return max(0, int(when.timestamp() * 1000 - now))


def should_retry_of(exc: BaseException) -> bool | None:
    value = _header(_headers_of(exc), "x-should-retry")
    if value is None:
        return None
    value = value.strip().lower()
    return True if value == "true" else False if value == "false" else None


def _round_half_up(value: float) -> int:
    return int(value + 0.5)
