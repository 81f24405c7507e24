"""`OfflineProvider`: a deterministic stand-in for a model, for demos and first runs.

No network, no randomness, no model. It answers the engine's three calls by reading the
request's JSON schema (`parameters.json_schema`) and a few stable prompt sections
(persistence-and-LLM note §6.2, §6.4), and it is honest about it: every customer-facing reply
starts with ``[offline]``.

What it can do:

- **understand** (schema name ``"understand"``): score flows by their trigger phrases (a flow
  whose phrases the message does not match scores 0, so a catch-all takes over; the current
  flow keeps a neutral 60), answer mentions the same way, and fill fields from the customer's
  latest message: enum values (also a number inside a range such as ``"11-50"``), numbers,
  booleans (sim/não, yes/no, ...) and free text for the first field the current step is
  waiting for (the one its last reply asked). A message that reads ``"<a>, <b>"`` or
  ``"<a> da <b>"`` fills the first two text fields the step waits for. ``asks`` is true when
  the message contains a question mark. `when` branches are left unjudged (null).
- **speak** (``"speak"``): fill the envelope's pending enum, number and boolean fields (and a
  lone pending text field) the same way, and phrase the message from the step's guideline
  and the ``ask`` of the first field still missing (with an enum's options, and for a yes/no
  field a one-line summary of what is already known). It never calls tools.
- **summary** (no schema name, the compaction call): a plain one-line-per-item digest.

    agent = f.agent(name="Ana", provider=OfflineProvider(language="pt"), flows=[...])

`chunk_delay_s` slows `generate_message_stream` down so a demo shows text streaming in.

Media understanding is marked, not performed: `transcribe(data, mime_type)` answers
``[transcription: <mime_type>, <n> bytes]`` and `describe_image(data, mime_type)` answers
``[image description: <mime_type>, <n> bytes]`` (async twins `atranscribe`, `adescribe_image`),
so a demo or a test sees that a voice note or a picture reached the agent, and which.
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from falai_django.llm.guidelines import DEFAULT_ANSWER, DEFAULT_COLLECT
from falai_django.llm.types import (
    BaseProvider,
    GenerateInput,
    GenerateOutput,
    ProviderCapabilities,
    StreamChunk,
)

__all__ = ["MARK", "OfflineProvider"]

MARK = "[offline]"

_YES = frozenset({
    "sim", "s", "isso", "certo", "certinho", "correto", "exato", "exatamente", "ok", "okay", "claro", "confirmo",
    "confirmado", "perfeito", "pode", "positivo", "beleza", "yes", "y", "yeah", "yep", "yup", "sure", "correct",
    "right", "true", "confirm", "confirmed",
})
_NO = frozenset({
    "nao", "n", "errado", "incorreto", "negativo", "nunca", "no", "nope", "nah", "wrong", "incorrect", "false",
})
# Lead-ins stripped from a free-text answer ("meu nome é Ana" -> "Ana").
_LEAD_INS = re.compile(
    r"^(?:(?:oi|ola|olá|hi|hello|hey)[,!.\s]+)?"
    r"(?:meu nome (?:e|é)|me chamo|eu sou (?:o|a)|eu sou|sou (?:o|a)|sou|aqui (?:e|é) (?:o|a)|aqui (?:e|é)|"
    r"(?:eu )?trabalho (?:na|no|em)|(?:a )?empresa (?:e|é)|da empresa|na empresa|"
    r"my name is|i am|i'm|im|this is|it's|it is|i work at|i work for)\s+",
    re.IGNORECASE,
)
# An introduction names the customer even when nobody asked yet ("oi, sou o João da Acme").
_INTRO = re.compile(r"\b(?:meu nome (?:e|é)|me chamo|sou (?:o|a)|my name is|i'm|i am)\s", re.IGNORECASE)
_NAME_FIELD = re.compile(r"nome|name", re.IGNORECASE)
_SPLIT = re.compile(r"\s*,\s*|\s+(?:da|do|de|from|at)\s+", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.,])-?\d{1,3}(?:\.\d{3})+(?![\d,])|(?<![\w.,])-?\d+(?:[.,]\d+)?")
_RANGE = re.compile(r"^\s*(\d+)\s*[-–]\s*(\d+)\s*$")
_PLUS = re.compile(r"^\s*(\d+)\s*\+\s*$")
_WORD = re.compile(r"[a-z0-9]+")

_TEXT = {
    "en": {
        "draft_thanks": "Thank you! Someone from the team follows up from here.",
        "noted": "Noted: {pairs}.",
        "options": "Options: {options}.",
        "yes_no": "(yes / no)",
        "known": "So far: {pairs}.",
        "idle": "There is no model here (set GEMINI_API_KEY for one), so I can only follow my flows. You said: \u201c{text}\u201d.",
        "idle_first": "There is no model here (set GEMINI_API_KEY for one), so I can only follow my flows.",
        "fixed": "Without a model I cannot answer \u201c{text}\u201d.",
        "summary": "Summary of the earlier conversation",
        "yes": "yes",
        "no": "no",
    },
    "pt": {
        "draft_thanks": "Obrigada! Alguém do time continua daqui.",
        "noted": "Anotado: {pairs}.",
        "options": "Opções: {options}.",
        "yes_no": "(sim / não)",
        "known": "Até aqui: {pairs}.",
        "idle": "Estou sem modelo (defina GEMINI_API_KEY para ter um), então só sigo meus fluxos. Você disse: \u201c{text}\u201d.",
        "idle_first": "Estou sem modelo (defina GEMINI_API_KEY para ter um), então só sigo meus fluxos.",
        "fixed": "Sem modelo, não sei responder a \u201c{text}\u201d.",
        "summary": "Resumo da conversa anterior",
        "yes": "sim",
        "no": "não",
    },
}


def fold(text: str) -> str:
    """Lowercase without accents, for matching."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    return _WORD.findall(fold(text))


# ---------------------------------------------------------------------------------------------
# A draft's name and trigger, from the description (flow_spec)
# ---------------------------------------------------------------------------------------------

NAME_LIMIT = 60  # characters: a draft's name is a whole-word prefix of its description
TRIGGER_WORDS = 6  # at most this many words in a draft's trigger phrase
_CLAUSE_END = re.compile(r"[.;:!?,]")
_TOKEN = re.compile(r"\w+", re.UNICODE)
# Words a name does not end on and a trigger neither starts nor ends on (folded): articles,
# prepositions, conjunctions, pronouns.
_FUNCTION_WORDS = frozenset(
    "o a os as um uma uns umas de do da dos das em no na nos nas por pelo pela para pra com sem e ou que "
    "se ao aos me te lhe seu sua seus suas meu minha "
    "the a an of to for and or in on at by with without from about as that if it its their his her "
    "my your our some any".split())
# The lead-in of a "when the customer asks for X" description: not what the customer says (folded).
_TRIGGER_LEAD_IN = _FUNCTION_WORDS | frozenset(
    "quando caso sempre cliente clientes visitante visitantes usuario usuarios pessoa pessoas lead leads alguem "
    "pedir pede pedirem pedido quiser quer querem queira solicitar solicita solicitarem perguntar pergunta "
    "perguntarem falar fala falarem mencionar menciona mencionarem precisar precisa precisarem tiver tem "
    "interesse interessado interessada sobre "
    "when whenever once customer customers visitor visitors user users person people client clients someone "
    "asks ask asking wants want wanting requests request requesting needs need mentions mention says say "
    "talks talk is are".split())


def draft_name(description: str, limit: int = NAME_LIMIT) -> str:
    """A whole-word prefix of `description` of at most `limit` characters: its first clause when
    that is long enough to name the flow, else as many whole words as fit; never a cut word, a
    trailing punctuation mark or a trailing article/preposition."""
    text = " ".join(description.split())
    if len(text) > limit:
        head = text[:limit + 1]
        ends = [m.start() for m in _CLAUSE_END.finditer(head) if m.start() >= limit // 2]
        if ends:
            text = text[:ends[-1]]
        else:
            space = head.rfind(" ")
            text = text[:space] if space > 0 else text[:limit]
    tokens = list(_TOKEN.finditer(text))
    while len(tokens) > 1 and fold(tokens[-1].group()) in _FUNCTION_WORDS:
        tokens.pop()
    if not tokens:
        return ""
    return text[:tokens[-1].end()].rstrip()


def draft_trigger(description: str, max_words: int = TRIGGER_WORDS) -> str:
    """What a customer would say for this flow, as a phrase taken whole from the description: its
    first clause without the "when the customer asks for" lead-in, up to `max_words` words, never
    starting or ending on an article or a preposition ("Quando o cliente pedir um orçamento de
    instalação, perguntar…" -> "orçamento de instalação")."""
    text = " ".join(description.split())
    clause = _CLAUSE_END.split(text, maxsplit=1)[0] if text else ""
    tokens = list(_TOKEN.finditer(clause))
    start = 0
    while start < len(tokens) and fold(tokens[start].group()) in _TRIGGER_LEAD_IN:
        start += 1
    core = (tokens[start:] or tokens)[:max_words]  # all lead-in ("Quando o cliente pedir"): the clause
    while len(core) > 1 and fold(core[-1].group()) in _FUNCTION_WORDS:
        core.pop()
    if not core:
        return ""
    return clause[core[0].start():core[-1].end()]


# ---------------------------------------------------------------------------------------------
# Reading the request
# ---------------------------------------------------------------------------------------------


def section(prompt: str, heading: str) -> str | None:
    """The body of `## <heading>` (up to the next `## ` heading), or None."""
    match = re.search(r"(?m)^## " + re.escape(heading) + r"[^\n]*\n(.*?)(?=\n\n## |\Z)", prompt or "", re.DOTALL)
    return match.group(1).strip("\n") if match else None


def customer_message(prompt: str) -> str | None:
    """The customer's latest message, as the understand (triple quotes) or speak call quotes it."""
    body = section(prompt, "Customer's latest message")
    if body is None:
        return None
    body = body.strip()
    if body.startswith('"""') and body.endswith('"""') and len(body) >= 6:
        return body[3:-3].strip()
    if len(body) >= 2 and body.startswith('"') and body.endswith('"'):
        return body[1:-1].strip()
    return body


@dataclass
class FieldSpec:
    """One envelope property: its wire name and JSON-schema facts."""

    wire: str
    type: str
    enum: list[Any] | None = None

    @classmethod
    def of(cls, wire: str, schema: Mapping[str, Any]) -> FieldSpec:
        raw = schema.get("type", "string")
        types = [raw] if isinstance(raw, str) else [t for t in raw if t != "null"]
        enum = [v for v in schema.get("enum") or [] if v is not None] or None
        return cls(wire=wire, type=types[0] if types else "string", enum=enum)

    @property
    def is_text(self) -> bool:
        return self.type == "string" and not self.enum


def schema_fields(schema: Mapping[str, Any] | None) -> list[FieldSpec]:
    props = (schema or {}).get("properties") or {}
    return [FieldSpec.of(wire, s) for wire, s in props.items() if isinstance(s, Mapping)]


def listed_names(body: str | None) -> list[str]:
    """Names from `- <name> (<type>)...` lines."""
    if not body:
        return []
    return re.findall(r"(?m)^\s*- (.+?) \([a-z]+\)", body)


def known_facts(prompt: str) -> dict[str, Any]:
    body = section(prompt, "Already known") or ""
    facts: dict[str, Any] = {}
    for slug, raw in re.findall(r"(?m)^- ([^:\n]+): (.+)$", body):
        try:
            facts[slug] = json.loads(raw)
        except (ValueError, RecursionError):
            facts[slug] = raw
    return facts


def pending_asks(prompt: str) -> list[tuple[str, str | None]]:
    """(name, ask) per line of `## Still to collect`, in order."""
    body = section(prompt, "Still to collect")
    if not body:
        return []
    out: list[tuple[str, str | None]] = []
    for line in body.splitlines():
        head = re.match(r"^- (.+?) \([a-z]+\)", line)
        if head:
            out.append((head.group(1), None))
            continue
        ask = re.match(r"^\s+How to ask: (.*)$", line)
        if ask and out:
            out[-1] = (out[-1][0], ask.group(1).strip())
    return out


# ---------------------------------------------------------------------------------------------
# Reading the customer's words
# ---------------------------------------------------------------------------------------------


def parse_number(text: str) -> float | None:
    match = _NUMBER.search(text)
    if not match:
        return None
    raw = match.group(0)
    if re.fullmatch(r"-?\d{1,3}(?:\.\d{3})+", raw):
        raw = raw.replace(".", "")
    return float(raw.replace(",", "."))


def match_enum(text: str, options: list[Any]) -> Any:
    """The option the text names, or the numeric range (`"11-50"`, `"200+"`) a number falls in."""
    folded = fold(text)
    for option in sorted(options, key=lambda o: -len(str(o))):
        needle = fold(str(option))
        if re.search(r"(?<![\w+-])" + re.escape(needle) + r"(?![\w+-])", folded):
            return option
    number = parse_number(text)
    if number is None:
        return None
    for option in options:
        span = _RANGE.match(str(option))
        if span and float(span.group(1)) <= number <= float(span.group(2)):
            return option
        plus = _PLUS.match(str(option))
        if plus and number >= float(plus.group(1)):
            return option
    for option in options:
        if isinstance(option, (int, float)) and not isinstance(option, bool) and option == number:
            return option
    return None


def parse_boolean(text: str) -> bool | None:
    """The first yes or no word in the text."""
    for word in words(text):
        if word in _YES:
            return True
        if word in _NO:
            return False
    return None


def clean_text(text: str) -> str | None:
    value = _LEAD_INS.sub("", text.strip()).strip(" \t\n.!;:")
    if not value or "?" in value or len(value) > 120:
        return None
    return value


def value_for(spec: FieldSpec, text: str) -> Any:
    """A non-text field's value from the customer's words, or None."""
    if spec.enum:
        return match_enum(text, spec.enum)
    if spec.type in ("number", "integer"):
        number = parse_number(text)
        if number is None:
            return None
        return int(number) if spec.type == "integer" or number.is_integer() else number
    if spec.type == "boolean":
        return parse_boolean(text)
    return None


def text_values(text: str, count: int) -> list[str]:
    """Free-text answers for `count` fields asked in order (one, or two split by `,` / `da`)."""
    if count >= 2:
        parts = [p for p in _SPLIT.split(_LEAD_INS.sub("", text.strip()), maxsplit=1) if p.strip()]
        if len(parts) == 2:
            parts[1] = re.sub(r"^(?:da|do|de|na|no|from|at)\s+", "", parts[1].strip(), flags=re.IGNORECASE)
            cleaned = [clean_text(p) for p in parts]
            if all(cleaned):
                return [c for c in cleaned if c]
    value = clean_text(text)
    return [value] if value else []


def _collectable_fields(schema: Any) -> list[str]:
    """The field slugs a FlowSpec schema lets a collect step name (its `collect` items' enum)."""
    stack = [schema]
    while stack:
        node = stack.pop(0)
        if isinstance(node, Mapping):
            collect = node.get("properties", {}).get("collect") if isinstance(node.get("properties"), Mapping) else None
            if isinstance(collect, Mapping):
                for option in ([collect], collect.get("anyOf") or []):
                    for item in option if isinstance(option, list) else [option]:
                        enum = (item.get("items") or {}).get("enum") if isinstance(item, Mapping) else None
                        if enum:
                            return [str(e) for e in enum]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return []


def phrase_matches(text: str, phrase: str) -> bool:
    """Most of the phrase's content words (crudely stemmed) appear in the text."""
    targets = [w for w in words(phrase) if len(w) >= 3]
    if not targets:
        return False
    have = words(text)
    hits = sum(1 for t in targets if any(h[:5] == t[:5] for h in have))
    return hits >= max(1, round(len(targets) * 0.6))


# ---------------------------------------------------------------------------------------------
# The provider
# ---------------------------------------------------------------------------------------------


class OfflineProvider(BaseProvider):
    """A deterministic, network-free provider; see the module docstring."""

    name = "offline"
    capabilities = ProviderCapabilities(
        supports_tools=False,
        supports_native_json_schema=True,
        supports_streaming=True,
        supports_streaming_tool_calls=False,
        supports_prompt_caching=False,
    )

    def __init__(self, *, language: str = "en", chunk_size: int = 6, chunk_delay_s: float = 0.0) -> None:
        self.language = language if language in _TEXT else "en"
        self.chunk_size = max(1, chunk_size)
        self.chunk_delay_s = max(0.0, chunk_delay_s)
        self.model = "offline"

    def __repr__(self) -> str:
        return f"OfflineProvider(language={self.language!r})"

    def _t(self, key: str, **values: Any) -> str:
        return _TEXT[self.language][key].format(**values)

    # -- the Provider interface ------------------------------------------------------------
    def generate_message(self, input: GenerateInput) -> GenerateOutput:
        structured, message = self.reply(input)
        return GenerateOutput(message=message, metadata={"model": self.model}, structured=structured)

    def generate_message_stream(self, input: GenerateInput) -> Iterator[StreamChunk]:
        structured, message = self.reply(input)
        text = json.dumps(structured, ensure_ascii=False) if structured is not None else message
        accumulated = ""
        for start in range(0, len(text), self.chunk_size):
            piece = text[start : start + self.chunk_size]
            accumulated += piece
            if self.chunk_delay_s:
                time.sleep(self.chunk_delay_s)
            yield StreamChunk(delta=piece, accumulated=accumulated)
        yield StreamChunk(delta="", accumulated=accumulated, done=True, metadata={"model": self.model},
                          structured=structured)

    # -- media understanding: deterministic markers, since there is no model to hear or see --
    def transcribe(self, data: bytes, mime_type: str) -> str:
        """A marker naming the audio's type and size, in place of its words."""
        return f"[transcription: {mime_type}, {len(data)} bytes]"

    async def atranscribe(self, data: bytes, mime_type: str) -> str:
        """See transcribe()."""
        return self.transcribe(data, mime_type)

    def describe_image(self, data: bytes, mime_type: str) -> str:
        """A marker naming the image's type and size, in place of a description."""
        return f"[image description: {mime_type}, {len(data)} bytes]"

    async def adescribe_image(self, data: bytes, mime_type: str) -> str:
        """See describe_image()."""
        return self.describe_image(data, mime_type)

    def reply(self, input: GenerateInput) -> tuple[dict[str, Any] | None, str]:
        """(structured envelope or None, message text) for one request."""
        name = input.parameters.schema_name
        if name == "understand":
            envelope = self.understand(input)
            return envelope, json.dumps(envelope, ensure_ascii=False)
        if name == "speak":
            envelope = self.speak(input)
            return envelope, envelope["message"]
        if name == "flow_spec":
            envelope = self.flow_spec(input)
            return envelope, json.dumps(envelope, ensure_ascii=False)
        return None, self.summary(input)

    # -- a flow written from a description (falai_django.flows.drafts) ----------------------------
    def flow_spec(self, input: GenerateInput) -> dict[str, Any]:
        """A deterministic draft: a flow named after the description, one collect step for each
        field the description names (by slug or by a word of its ask), else one prompt step
        with the description as its guideline, then a thank-you."""
        description = section(input.prompt or "", "The flow to write") or input.prompt or ""
        said = set(words(description))
        fields = _collectable_fields(input.parameters.json_schema or {})
        named = [slug for slug in fields if slug in said or set(words(slug.replace("_", " "))) & said]
        head = [w for w in words(description) if len(w) > 2][:4]
        flow_id = "-".join(head) or "rascunho"
        steps: list[dict[str, Any]] = [
            {"id": f"pede_{slug}", "kind": "collect", "collect": [slug]} for slug in named
        ] or [{"id": "conversa", "kind": "prompt", "prompt": " ".join(description.split())}]
        steps.append({"id": "fim", "kind": "say", "say": self._t("draft_thanks")})
        trigger = draft_trigger(description)
        return {"id": flow_id, "name": draft_name(description) or flow_id,
                "description": " ".join(description.split()),
                "on": [{"message": [trigger] if trigger else []}], "steps": steps}

    # -- understand ------------------------------------------------------------------------
    def understand(self, input: GenerateInput) -> dict[str, Any]:
        prompt = input.prompt or ""
        props = (input.parameters.json_schema or {}).get("properties") or {}
        text = customer_message(prompt) or ""
        out: dict[str, Any] = {}
        if "flows" in props:
            out["flows"] = self._scores(prompt, text, list(props["flows"].get("properties") or {}))
        if "mentions" in props:
            out["mentions"] = self._mentions(prompt, text, list(props["mentions"].get("properties") or {}))
        if "extract" in props:
            out["extract"] = {}
            for wire, schema in (props["extract"].get("properties") or {}).items():
                specs = schema_fields(schema)
                hit = (out.get("mentions") or {}).get(wire)
                out["extract"][wire] = {s.wire: (value_for(s, text) if hit else None) for s in specs}
        if "branches" in props:
            out["branches"] = {wire: None for wire in props["branches"].get("properties") or {}}
        if "fields" in props:
            out["fields"] = self._understand_fields(prompt, text, schema_fields(props["fields"]))
        if "asks" in props:
            out["asks"] = "?" in text
        return out

    def _scores(self, prompt: str, text: str, wires: list[str]) -> dict[str, int]:
        # The current flow is always the first candidate (its wire name may be an alias).
        current = wires[0] if section(prompt, "Current flow") is not None and wires else None
        phrases, excludes = self._flow_phrases(section(prompt, "Flows the customer may want"))
        scores: dict[str, int] = {}
        for wire in wires:
            if any(phrase_matches(text, p) for p in excludes.get(wire, [])):
                scores[wire] = 0
            elif any(phrase_matches(text, p) for p in phrases.get(wire, [])):
                scores[wire] = 90
            elif wire == current:
                scores[wire] = 60
            else:
                scores[wire] = 0
        return scores

    @staticmethod
    def _flow_phrases(body: str | None) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        phrases: dict[str, list[str]] = {}
        excludes: dict[str, list[str]] = {}
        wire: str | None = None
        for line in (body or "").splitlines():
            head = re.match(r"^\d+\. (\S+) — ", line)
            if head:
                wire = head.group(1)
                continue
            if wire is None:
                continue
            if line.startswith("   The customer: "):
                phrases.setdefault(wire, []).extend(p.strip() for p in line[17:].split(";"))
            elif line.startswith("   Score 0 when: "):
                excludes.setdefault(wire, []).extend(p.strip() for p in line[17:].split(";"))
        return phrases, excludes

    def _mentions(self, prompt: str, text: str, wires: list[str]) -> dict[str, bool]:
        body = section(prompt, "Things the customer may mention") or ""
        counts: dict[str, list[str]] = {}
        excludes: dict[str, list[str]] = {}
        wire: str | None = None
        for line in body.splitlines():
            head = re.match(r"^- (\S+) — ", line)
            if head:
                wire = head.group(1)
            elif wire and line.startswith("  Counts when: "):
                counts.setdefault(wire, []).extend(p.strip() for p in line[15:].split(";"))
            elif wire and line.startswith("  Does not count when: "):
                excludes.setdefault(wire, []).extend(p.strip() for p in line[22:].split(";"))
        return {
            w: any(phrase_matches(text, p) for p in counts.get(w, []))
            and not any(phrase_matches(text, p) for p in excludes.get(w, []))
            for w in wires
        }

    def _understand_fields(self, prompt: str, text: str, specs: list[FieldSpec]) -> dict[str, Any]:
        values: dict[str, Any] = {s.wire: None for s in specs}
        if not text:
            return values
        by_wire = {s.wire: s for s in specs}
        for spec in specs:
            if not spec.is_text:
                values[spec.wire] = value_for(spec, text)
        if any(v is not None for v in values.values()):
            return values
        # Free text only answers what the current step waits for: the first text field it asked.
        waiting = listed_names(section(prompt, "Current flow"))
        texts = [w for w in waiting if w in by_wire and by_wire[w].is_text]
        run: list[str] = []
        if texts and waiting[0] == texts[0]:
            run = texts[:2] if waiting[1:2] == texts[1:2] else texts[:1]
        elif not waiting and _INTRO.search(text):
            # Nobody asked yet, but the customer introduced themselves: a name field takes it.
            free = [s.wire for s in specs if s.is_text]
            named = [i for i, wire in enumerate(free) if _NAME_FIELD.search(wire)]
            run = free[named[0]:named[0] + 2] if named else []
        for wire, value in zip(run, text_values(text, len(run)), strict=False):
            values[wire] = value
        return values

    # -- speak -----------------------------------------------------------------------------
    def speak(self, input: GenerateInput) -> dict[str, Any]:
        prompt = input.prompt or ""
        specs = [s for s in schema_fields(input.parameters.json_schema) if s.wire != "message"]
        text = customer_message(prompt)
        facts = known_facts(prompt)
        fields: dict[str, Any] = {s.wire: None for s in specs}
        if text:
            for spec in specs:
                if not spec.is_text:
                    fields[spec.wire] = value_for(spec, text)
            lone = [s for s in specs if s.is_text]
            already = {fold(str(v)) for v in facts.values()}
            if len(lone) == 1 and len(specs) == 1 and input.history and not already & {fold(text)}:
                last = input.history[-1]
                role = last.get("role") if isinstance(last, Mapping) else getattr(last, "role", None)
                if role == "assistant":
                    values = text_values(text, 1)
                    if values and fold(values[0]) not in already:
                        fields[lone[0].wire] = values[0]
        message = self._message(prompt, specs, fields, facts, text)
        return {"message": message, **fields}

    def _message(self, prompt: str, specs: list[FieldSpec], fields: dict[str, Any], facts: dict[str, Any],
                 text: str | None) -> str:
        guideline = (section(prompt, "Guideline for your reply") or "").strip()
        asks = dict(pending_asks(prompt))
        spec_of = {s.wire: s for s in specs}
        parts: list[str] = []
        filled = [(w, v) for w, v in fields.items() if v is not None]
        if filled:
            parts.append(self._t("noted", pairs=", ".join(f"{w} = {self._show(v)}" for w, v in filled)))
        if section(prompt, "Fixed question") is not None:
            # The fixed question follows word for word: answer, never ask.
            if not filled and text:
                parts.append(self._t("fixed", text=text))
            return self._mark(parts)
        missing = [w for w in spec_of if fields.get(w) is None]
        if section(prompt, "Flow") is None:  # the idle speaker
            parts.append(self._t("idle", text=text) if text else self._t("idle_first"))
            return self._mark(parts)
        if guideline and not self._is_default(guideline) and (missing or not filled):
            parts.append(guideline)
        if missing:
            wire = missing[0]
            spec = spec_of[wire]
            slug = self._slug_for(wire, asks)
            parts.append(asks.get(slug) or slug)
            if spec.enum:
                parts.append(self._t("options", options=" | ".join(self._show(o) for o in spec.enum)))
            elif spec.type == "boolean":
                shown = {k: v for k, v in facts.items()}
                if shown:
                    parts.append(self._t("known", pairs="; ".join(f"{k}: {self._show(v)}" for k, v in shown.items())))
                parts.append(self._t("yes_no"))
        elif not parts and guideline:
            parts.append(guideline)
        return self._mark(parts)

    @staticmethod
    def _slug_for(wire: str, asks: Mapping[str, str | None]) -> str:
        """The slug behind a wire name (an alias `field_<n>` is the n-th pending line)."""
        if wire in asks:
            return wire
        alias = re.fullmatch(r"field_(\d+)", wire)
        names = list(asks)
        if alias and 0 < int(alias.group(1)) <= len(names):
            return names[int(alias.group(1)) - 1]
        return wire

    @staticmethod
    def _is_default(guideline: str) -> bool:
        """The engine's built-in guidelines are for a model; offline they add nothing."""
        return guideline in (DEFAULT_ANSWER, DEFAULT_COLLECT)

    def _show(self, value: Any) -> str:
        if value is True:
            return self._t("yes")
        if value is False:
            return self._t("no")
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    @staticmethod
    def _mark(parts: list[str]) -> str:
        body = " ".join(p.strip() for p in parts if p and p.strip())
        return f"{MARK} {body}" if body else MARK

    # -- compaction summary ----------------------------------------------------------------
    def summary(self, input: GenerateInput) -> str:
        lines = []
        for item in input.history or []:
            role = item.get("role") if isinstance(item, Mapping) else getattr(item, "role", "")
            content = item.get("content") if isinstance(item, Mapping) else getattr(item, "content", "")
            if role in ("user", "assistant") and isinstance(content, str) and content.strip():
                short = " ".join(content.split())
                lines.append(f"- {role}: {short[:100]}{'…' if len(short) > 100 else ''}")
        if not lines:
            quoted = [" ".join(line.split())[:100] for line in (input.prompt or "").splitlines() if line.strip()]
            lines = [f"- {line}" for line in quoted[-20:]]
        return f"{MARK} {self._t('summary')}:\n" + "\n".join(lines)
