"""Ana exactly as the page ("Go to production") builds her, translated with the README's names."""

from __future__ import annotations

from falai_django import falai

ANA_FIELDS = {
    "nome": {"type": "string", "ask": "Pergunte o nome da pessoa, sem tom de formulário."},
    "empresa": {"type": "string", "ask": "Pergunte de qual empresa a pessoa fala."},
    "tamanho": {
        "type": "string",
        "enum": ["1-10", "11-50", "51-200", "200+"],
        "ask": "Pergunte quantas pessoas trabalham lá e ofereça as faixas.",
    },
    "confirmado": {"type": "boolean", "ask": "Resuma em uma frase o que anotou e pergunte se está tudo certo."},
}

TRIAGEM = {
    "id": "triagem",
    "name": "Triagem",
    "on": [{"message": []}],
    "steps": [
        {"id": "quem", "prompt": "Descubra quem é e de onde fala.", "collect": ["nome", "empresa"]},
        {"id": "porte", "collect": ["tamanho"], "maxAsks": 2},
        {"id": "confirma", "collect": ["confirmado"]},
        {"id": "ok", "if": {"equals": {"confirmado": True}}, "else": {"step": "quem", "clear": ["confirmado"]}},
        {"id": "tchau", "prompt": "Agradeça e diga que um vendedor continua daqui."},
    ],
}


def build_ana(provider, clock=None):
    f = falai().fields(ANA_FIELDS)
    kwargs = {"clock": clock} if clock is not None else {}
    return f.agent(name="Ana", provider=provider, flows=[f.flow(TRIAGEM)], **kwargs)


# --------------------------------------------------------------------------- the page's host loop

from falai_django import SessionConflictError  # noqa: E402


class Host:
    """The page's `handle()` in Python, with the channel, the queue and the transcript in memory.

    `sent` collects (session_id, OutboundMessage), `queued` (session_id, ScheduleEntry). The
    transcript is what `load_history` returns: every inbound text and every sent reply.
    """

    def __init__(self, agent, store):
        self.agent = agent
        self.store = store
        self.sent: list = []
        self.queued: list = []
        self.transcripts: dict[str, list] = {}
        self.results: list = []
        self.attempts = 0

    def load_history(self, session_id: str) -> list:
        return list(self.transcripts.get(session_id, []))

    def handle(self, session_id: str, **input):
        """One input in. Messages and wakes go out only after the save."""
        while True:
            self.attempts += 1
            session = self.store.load(session_id)
            history = self.load_history(session_id)
            r = self.agent.turn(session_id=session_id, **input, session=session, history=history)
            self.results.append(r)
            if not r.changed:
                return r
            try:
                self.store.save(r.session, session.version if session is not None else 0)
            except SessionConflictError:
                continue  # someone saved first: replay the same input
            from falai_django import assistant_message, user_message

            transcript = self.transcripts.setdefault(session_id, [])
            if "message" in input:
                transcript.append(user_message(input["message"]))
            for message in r.messages:
                self.sent.append((session_id, message))
                transcript.append(assistant_message(message.text))
            for entry in r.schedule:
                self.queued.append((session_id, entry))
            return r


class RacingStore:
    """Wraps a store; before the first save goes through, `before_first_save()` runs (another turn
    that saves first), so that first save meets a newer version."""

    def __init__(self, store, before_first_save):
        self.store = store
        self.before_first_save = before_first_save
        self.saves = 0
        self.conflicts = 0

    def load(self, session_id):
        return self.store.load(session_id)

    def save(self, session, expected_version):
        self.saves += 1
        if self.saves == 1:
            self.before_first_save()
        try:
            return self.store.save(session, expected_version)
        except SessionConflictError:
            self.conflicts += 1
            raise
