"""Scale bench on PostgreSQL: the admin, the desk and the API at 1,000,000 conversations (issue 52).

    .venv/bin/python bench/scale.py [--quick] [--rounds N]

On a PRIVATE PostgreSQL cluster (initdb'd for the bench, `falai_django.testing.postgres`;
`SERVER_SETTINGS`: shared_buffers 8 GB, a server sized to hold the grown database), two
databases are migrated and grown with bulk `INSERT … SELECT generate_series` (no ORM, no turns):

- `small`: 1,000 conversations, 20,000 transcript rows (the baseline every figure sits beside);
- `large`: 1,000,000 conversations, 20,000,000 transcript rows (`--quick`: 100,000 / 2,000,000).

Each conversation has a phone number as its id, a valid session blob (a real session the host
saved, with its own id and collected `nome` / `empresa`), twenty transcript lines alternating
customer and assistant (interleaved across conversations, as they arrive), and derived columns
spread as a live number's are: a third asking in `triagem`, a third waiting, the rest idle; last
messages spread over three years. One in twenty was handed to a person; those of the last 30
days still are (silenced, assigned to one of twenty staff people, with a take-over marker, the
customer writing last, unread), the older ones were given back. The run log and the wakes hold what their default
retention keeps (`FALAI["RETENTION"]`: 90 and 30 days). Then `VACUUM (ANALYZE)`.

Measured in the bench's child process, through Django's test client (a superuser, no socket),
`REPEAT` times each after one warm-up, p50 and p95 in ms:

- `admin_<page>`: the admin conversation list — the default page, each filter (each status,
  flow, owner, silenced yes/no), a search by phone number (a customer's number without the
  country code), a search by customer name (the full name), a search for transcript words (the
  order number a customer gave) and, `COMMON_REPEAT` times and last in each round (it churns the
  buffers), one for a word in one customer line of ten (`search_common_word`: no target; the slow
  case of a search, reported as it is);
- `conversation_page`: a conversation's admin page (transcript, data, runs, outcomes, wakes);
- `api_<page>`: `GET sessions` — the first page, page 2 and page 20, a status filter, a search;
- `desk_poll`: the desk's queue poll with its counts (`desk/poll/?q=waiting`, sending `since` as
  the page does), 20 pollers at once, each a different staff person in a process of its own,
  each polling once a second (a desk tab polls every two) for `POLL_SECONDS`;
- `turn`: a message turn (`host.handle`, the bench agent's zero-latency model) on a conversation
  picked at random among them (`TURNS` of them, each on a different conversation, in a process
  of their own; the rounds alternate between the two sizes).

Each figure of `large` is reported beside the same figure of `small` (`<figure>_p95_ms` and
`<figure>_p95_ms_at_1k`); `turn_vs_1k` = the turn's p50 at `large` ÷ its p50 at `small`.
`--rounds N` measures N rounds on the same data (the fill is the slow part) and reports each
figure's min, median and max over the rounds (`rounds`); the top-level figures are the medians.
Writes bench/results/scale.json; `main()` returns the same dict.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "scale.json"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SMALL = 1_000
LARGE, LARGE_QUICK = 1_000_000, 100_000
LINES = 20  # transcript rows per conversation
STAFF = 20  # desk people, and pollers
POLLERS = 20
POLL_SECONDS, POLL_SECONDS_QUICK = 20, 8
REPEAT, REPEAT_QUICK = 30, 12
COMMON_REPEAT = 5
COMMON_WORD = "CRM"  # in one customer line of ten
TURNS, TURNS_QUICK = 300, 100
TURN_WARMUP = 20
ROUNDS_ENV = "FALAI_BENCH_ROUNDS"
SIZE_ENV = "FALAI_SCALE_CONVERSATIONS"

# A database server sized for the data, on this 24 GiB machine: shared_buffers a third of the
# memory holds the grown database (about 6 GB), as a server for a million conversations would be
# sized. With fewer buffers than data, a turn on a conversation picked at random reads its
# transcript's pages from the OS cache (docs/DECISIONS.md, S6).
SERVER_SETTINGS = [
    "max_connections=80", "shared_buffers=8GB", "work_mem=16MB", "maintenance_work_mem=1GB",
    "max_wal_size=16GB", "checkpoint_timeout=30min", "synchronous_commit=off", "autovacuum=off",
    "random_page_cost=1.1", "effective_cache_size=16GB", "wal_level=minimal", "max_wal_senders=0",
]

FIRST = ("Ana Beatriz Bruno Camila Carlos Daniela Eduardo Fernanda Gabriel Helena Igor Isabela João Juliana "
         "Lucas Larissa Marcos Mariana Mateus Natália Otávio Patrícia Paulo Rafaela Ricardo Sabrina Sérgio "
         "Tatiana Thiago Vanessa Vinícius Yasmin André Bianca Caio Débora Felipe Giovana Henrique Letícia "
         "Leonardo Luana Márcio Priscila Renato Sofia Tiago Valéria Wagner Luísa").split()
LAST = ("Silva Santos Oliveira Souza Rodrigues Ferreira Alves Pereira Lima Gomes Costa Ribeiro Martins Carvalho "
        "Almeida Lopes Soares Fernandes Vieira Barbosa Rocha Dias Nascimento Andrade Moreira Nunes Marques "
        "Machado Mendes Freitas Cardoso Ramos Gonçalves Santana Teixeira Moura Correia Cavalcanti Araújo "
        "Pinto Campos Monteiro Barros Castro Reis Azevedo Duarte Farias Medeiros Fonseca").split()
USER_LINES = ("oi, tudo bem?", "quero saber do plano para minha equipe", "somos umas trinta pessoas",
              "pode ser na semana que vem", "sim, está certo", "qual o preço por pessoa?",
              "vocês integram com o nosso CRM?", "obrigado!", "prefiro falar com alguém", "ainda estou aqui")
BOT_LINES = ("Oi! Com quem eu falo?", "Prazer! De qual empresa você fala?", "Quantas pessoas trabalham aí?",
             "Anotei tudo. Está certo?", "Perfeito, um vendedor continua daqui.", "Posso ajudar em algo mais?")


def rounds() -> int:
    return max(1, int(os.environ.get(ROUNDS_ENV, "1") or 1))


def sizes() -> dict[str, int]:
    from bench.hostbench import quick

    return {"small": SMALL, "large": LARGE_QUICK if quick() else LARGE}


def _array(values: tuple[str, ...] | list[str]) -> str:
    return "ARRAY[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


def phone(n: int) -> str:
    """Conversation n's id: a Brazilian mobile number (country 55, area code, 9 and 8 digits)."""
    return f"55{11 + n % 80}9{n * 7919 % 100_000_000:08d}"


def full_name(n: int) -> str:
    return f"{FIRST[n % 50]} {LAST[n // 50 % 50]} {LAST[n // 2500 % 50]}"


def order_number(n: int) -> str:
    """The order number conversation n's customer gives in its third line."""
    return phone(n)[-8:][::-1]


def fill_sql(conversations: int, template: str) -> list[tuple[str, str, list[Any]]]:
    """(label, statement, parameters): the bulk fill, in order. Mirrors `phone` / `full_name`."""
    import json

    n, version = conversations, int(json.loads(template)["version"])  # the column agrees with the blob
    sessions = f"""
      INSERT INTO agent_sessions (id, version, blob, created_at, updated_at, asking_flow, asking_step,
             silenced_reason, human_owner, last_user_at, last_assistant_at, run_count)
      SELECT s.id, {version},
             jsonb_set(jsonb_set(%s::jsonb, '{{id}}', to_jsonb(s.id)), '{{data}}',
                       jsonb_build_object('nome', s.nome, 'empresa', 'Empresa ' || s.n, 'tamanho', '11-50')),
             s.at - interval '2 days', s.at,
             CASE WHEN s.n % 3 = 0 THEN 'triagem' END,
             CASE WHEN s.n % 3 = 0 THEN (ARRAY['quem', 'porte', 'confirma'])[1 + s.n / 3 % 3] END,
             CASE WHEN s.handed THEN 'human: agente' || (s.n / 20 % {STAFF}) END,
             CASE WHEN s.handed THEN 'agente' || (s.n / 20 % {STAFF}) END,
             s.at, s.at + interval '4 seconds', CASE WHEN s.n % 3 = 2 THEN 0 ELSE 1 END
      FROM (SELECT g AS n,
                   '55' || (11 + g % 80) || '9' || lpad((g::bigint * 7919 % 100000000)::text, 8, '0') AS id,
                   ({_array(FIRST)})[1 + g % 50] || ' ' || ({_array(LAST)})[1 + g / 50 % 50] || ' '
                     || ({_array(LAST)})[1 + g / 2500 % 50] AS nome,
                   now() - (g::float8 / {n} * 3 * 365 * 86400) * interval '1 second' AS at,
                   -- one in twenty is handed to a person; those of the last 30 days are still with them
                   g % 20 = 1 AND g::float8 / {n} * 3 * 365 < 30 AS handed
            FROM generate_series(1, {n}) g) s"""
    steps: list[tuple[str, str, list[Any]]] = [("sessions", sessions, [template])]
    users, bots = _array(USER_LINES), _array(BOT_LINES)
    for k in range(1, LINES + 1):  # one statement per line number: the rows interleave as they would arrive
        customer = "true" if k % 2 == 1 else "s.silenced_reason IS NOT NULL" if k == LINES else "false"
        steps.append((f"history {k}", f"""
          INSERT INTO falai_history (conversation_id, role, content, at, after_ms, send_attempts, send_error,
                 kind, send_status, sent_at, message_key, delivery_status)
          SELECT s.id, CASE WHEN {customer} THEN 'user' ELSE 'assistant' END,
                 CASE WHEN {k} = 3 THEN 'meu pedido é o ' || reverse(right(s.id, 8))
                      WHEN {customer} THEN ({users})[1 + (hashtext(s.id) & 1023 + {k}) % {len(USER_LINES)}]
                      ELSE ({bots})[1 + (hashtext(s.id) & 1023 + {k}) % {len(BOT_LINES)}] END,
                 s.last_user_at - ({LINES - k} * interval '1 minute'), 0,
                 CASE WHEN {customer} THEN 0 ELSE 1 END, '',
                 CASE WHEN {customer} THEN NULL ELSE 'ai' END, CASE WHEN {customer} THEN NULL ELSE 'sent' END,
                 CASE WHEN {customer} THEN NULL ELSE s.last_user_at - ({LINES - k} * interval '1 minute') END,
                 CASE WHEN {customer} THEN 'wamid.' || s.id || '.{k}' END,
                 CASE WHEN {customer} THEN NULL ELSE 'read' END
          FROM agent_sessions s""", []))
    steps += [
        # The run log as its default retention (90 days) keeps it: one row per customer line.
        ("run log", f"""
          INSERT INTO falai_turn (conversation_id, kind, input_key, input, status, received_at, finished_at,
                 attempts, replays, error, version, started, ended, outcomes, skipped, schedule, llm_calls)
          SELECT s.id, 'message', 'wamid.' || s.id || '.' || k,
                 jsonb_build_object('message', 'oi', 'id', 'wamid.' || s.id || '.' || k), 'done',
                 s.last_user_at - ({LINES} - k) * interval '1 minute',
                 s.last_user_at - ({LINES} - k) * interval '1 minute', 1, 0, '', 3, '[]', '[]',
                 jsonb_build_array(jsonb_build_object('code', 'COLLECTED', 'flowId', 'triagem')), '[]', '[]', 2
          FROM agent_sessions s CROSS JOIN generate_series(1, {LINES}, 2) k
          WHERE s.last_user_at > now() - interval '90 days'""", []),
        # Wakes: the ten-minute silence follow-up of recent conversations, pending; fired ones kept 30 days.
        ("wakes", """
          INSERT INTO falai_wake (conversation_id, key, at, state, attempts, fired_at)
          SELECT s.id, 'silence:lembrete:' || s.id, s.last_user_at + interval '10 minutes',
                 CASE WHEN s.last_user_at > now() - interval '1 day' THEN 'pending' ELSE 'done' END, 0,
                 CASE WHEN s.last_user_at > now() - interval '1 day' THEN NULL
                      ELSE s.last_user_at + interval '10 minutes' END
          FROM agent_sessions s WHERE s.last_user_at > now() - interval '30 days'""", []),
        # The desk: each taken-over conversation assigned to its owner, with its take-over marker and
        # the owner's read marker (the customer's last line unread).
        ("desk", """
          INSERT INTO falai_assignment (conversation_id, assignee_id, assigned_at)
          SELECT s.id, u.id, s.last_user_at FROM agent_sessions s JOIN auth_user u ON u.username = s.human_owner
          WHERE s.human_owner IS NOT NULL""", []),
        ("desk entries", """
          INSERT INTO falai_desk_entry (conversation_id, kind, author_id, author_name, text, at, after_item)
          SELECT s.id, 'take_over', u.id, u.username, '', s.last_user_at - interval '2 minutes',
                 (SELECT max(h.id) FROM falai_history h WHERE h.conversation_id = s.id) - 2
          FROM agent_sessions s JOIN auth_user u ON u.username = s.human_owner
          WHERE s.human_owner IS NOT NULL""", []),
        ("read markers", """
          INSERT INTO falai_read_marker (user_id, conversation_id, last_read_id)
          SELECT u.id, s.id, (SELECT max(h.id) FROM falai_history h WHERE h.conversation_id = s.id) - 1
          FROM agent_sessions s JOIN auth_user u ON u.username = s.human_owner
          WHERE s.human_owner IS NOT NULL""", []),
    ]
    return steps


# ---------------------------------------------------------------------------------------------
# The child: fill one database, then measure
# ---------------------------------------------------------------------------------------------


def _template_blob() -> str:
    """A real session the host saved (Ana asking in triagem), as the fill's blob template."""
    import json

    from falai_django import host
    from falai_django.models import Session

    sid = "5500000000000"
    host.handle(sid, {"message": "oi, meu nome é Ana", "id": "template.1"})
    blob = Session.objects.get(pk=sid).blob
    Session.objects.filter(pk=sid).delete()
    from falai_django.models import TurnRecord, Wake

    TurnRecord.objects.filter(conversation_id=sid).delete()
    Wake.objects.filter(conversation_id=sid).delete()
    return json.dumps(blob)


def _staff() -> list[Any]:
    from django.contrib.auth.models import User

    return [User.objects.create_superuser(f"agente{i}", f"agente{i}@example.com", "unused") for i in range(STAFF)]


def fill(conversations: int) -> dict[str, Any]:
    from types import SimpleNamespace

    from django.db import connection

    from bench.hostbench import progress
    from falai_django.models import search_indexes

    staff = _staff()
    template = _template_blob()
    took: dict[str, float] = {}
    with connection.cursor() as cursor:  # built once after the fill, as `migrate` builds them on a grown table
        for name in search_indexes.INDEXES:
            cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
        for label, statement, params in fill_sql(conversations, template):
            started = time.perf_counter()
            if params:  # the % operator doubled where placeholders are read
                cursor.execute(statement.replace("%", "%%").replace("%%s", "%s"), params)
            else:
                cursor.execute(statement)
            took[label] = time.perf_counter() - started
            progress(f"fill {conversations:,}: {label} in {took[label]:.1f}s")
    started = time.perf_counter()
    search_indexes.create(None, SimpleNamespace(connection=connection))
    took["search indexes"] = time.perf_counter() - started
    progress(f"fill {conversations:,}: search indexes in {took['search indexes']:.1f}s")
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")
    took["vacuum analyze"] = time.perf_counter() - started
    progress(f"fill {conversations:,}: vacuum analyze in {took['vacuum analyze']:.1f}s")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM falai_history")
        history = cursor.fetchone()[0]
        cursor.execute("SELECT pg_database_size(current_database())")
        size = cursor.fetchone()[0]
    return {"conversations": conversations, "history_rows": history, "staff": len(staff),
            "database_mb": round(size / 2**20), "fill_s": round(sum(took.values()), 1),
            "fill_steps_s": {k: round(v, 1) for k, v in took.items()}}


def _timed(call: Any, repeat: int) -> list[float]:
    call()  # warm-up (and a check that it answers)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _figure(times: list[float]) -> dict[str, float]:
    from bench.hostbench import percentile

    return {"p50": round(percentile(times, 50), 2), "p95": round(percentile(times, 95), 2)}


def admin_pages(conversations: int) -> dict[str, str]:
    pick = conversations // 2 + 1
    return {
        "list": "",
        "status_asking": "?status=asking",
        "status_waiting": "?status=waiting",
        "status_idle": "?status=idle",
        "status_silenced": "?status=silenced",
        "flow": "?flow=triagem",
        "owner": "?human_owner=agente3",
        "silenced_yes": "?silenced=yes",
        "silenced_no": "?silenced=no",
        "search_phone": "?q=" + phone(pick)[2:],
        "search_name": "?q=" + full_name(pick).replace(" ", "+"),
        "search_transcript": "?q=pedido+" + order_number(pick),
    }


API_PAGES = {
    "first": "",
    "page_2": "?page=2",
    "page_20": "?page=20",
    "status": "?status=asking",
    "search": None,  # a phone number, filled in per size
}


def _ok(response: Any, url: str) -> Any:
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}: {response.content[:300]!r}")
    return response


def _admin_client() -> Any:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="agente0"))
    return client


def measure_common_word(conversations: int) -> dict[str, Any]:
    """The search for a common word, last in a round: it reads a tenth of the transcript through
    the buffers, which the figures measured after it would otherwise pay for."""
    client = _admin_client()
    url = "/admin/falai_django/conversation/?q=" + COMMON_WORD
    return {"admin_search_common_word": _figure(_timed(lambda: _ok(client.get(url), url), COMMON_REPEAT))}


def measure_pages(conversations: int, repeat: int) -> dict[str, Any]:
    client = _admin_client()
    out: dict[str, Any] = {}
    for name, query in admin_pages(conversations).items():
        url = "/admin/falai_django/conversation/" + query
        out[f"admin_{name}"] = _figure(_timed(lambda url=url: _ok(client.get(url), url), repeat))
    rng = random.Random(7)
    ids = [phone(rng.randrange(1, conversations + 1)) for _ in range(repeat + 1)]
    pages = iter(ids * 2)

    def conversation_page() -> None:
        url = f"/admin/falai_django/conversation/{next(pages)}/change/"
        _ok(client.get(url), url)

    out["conversation_page"] = _figure(_timed(conversation_page, repeat))
    for name, query in API_PAGES.items():
        url = "/falai/sessions" + (query if query is not None else "?q=" + phone(conversations // 3 + 2)[2:])
        out[f"api_{name}"] = _figure(_timed(lambda url=url: _ok(client.get(url), url), repeat))
    return out


def _poller(index: int, seconds: float, start_at: float, queue: Any) -> None:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    connection.close()  # the parent's connection is not this process's
    client = Client()
    client.force_login(User.objects.get(username=f"agente{index % STAFF}"))
    url = "/admin/falai_django/conversation/desk/poll/?q=waiting"
    since = _ok(client.get(url), url).json()["signature"]  # this process's warm-up
    times: list[float] = []
    phase = random.Random(index).random()
    tick = start_at + phase
    while tick < start_at + seconds:
        time.sleep(max(0.0, tick - time.time()))
        started = time.perf_counter()
        # as the page does: `since` is what it shows (the answer renders only what changed)
        since = _ok(client.get(f"{url}&since={since}"), url).json()["signature"]
        times.append((time.perf_counter() - started) * 1000)
        tick += 1.0
    queue.put(times)


def measure_desk(seconds: float) -> dict[str, Any]:
    import multiprocessing

    from django.db import connections

    connections.close_all()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start_at = time.time() + 3.0  # every poller set up and warm before the first tick
    workers = [context.Process(target=_poller, args=(i, seconds, start_at, queue)) for i in range(POLLERS)]
    for worker in workers:
        worker.start()
    times: list[float] = []
    for _ in workers:
        times += queue.get(timeout=seconds + 120)
    for worker in workers:
        worker.join(timeout=30)
    if any(worker.exitcode != 0 for worker in workers):
        raise RuntimeError(f"a desk poller failed: exit codes {[w.exitcode for w in workers]}")
    return {"desk_poll": {**_figure(times), "samples": len(times), "pollers": POLLERS}}


def measure_turns(conversations: int, turns: int, seed: int) -> dict[str, Any]:
    """`turns` message turns, each on a different conversation picked at random, after a few
    that warm the process up."""
    from falai_django import host

    rng = random.Random(seed)
    picked = rng.sample(range(1, conversations + 1), min(turns + TURN_WARMUP, conversations))
    times = []
    for i, n in enumerate(picked):
        sid = phone(n)
        started = time.perf_counter()
        result = host.handle(sid, {"message": "meu nome é Bia", "id": f"bench.{seed}.{sid}.{i}"})
        took = (time.perf_counter() - started) * 1000
        if result.status not in ("done", "unchanged"):
            raise RuntimeError(f"the turn on {sid} did not land: {result.status} {result.error}")
        if i >= TURN_WARMUP:
            times.append(took)
    return {"turn": _figure(times) | {"turns": len(times)}}


def measure(part: str = "small") -> dict[str, Any]:
    """`small` / `large`: fill the database, then measure the pages and the desk `rounds` times.
    `turns-<seed>`: only message turns (the parent alternates them between the two sizes)."""
    from bench.hostbench import progress, quick, setup_django

    conversations = int(os.environ[SIZE_ENV])
    if part.startswith("turns-"):
        setup_django(migrate=False, truncate=False)
        return measure_turns(conversations, TURNS_QUICK if quick() else TURNS, int(part.removeprefix("turns-")))
    setup_django(migrate=True, truncate=True)
    result = {"size": part, **fill(conversations)}
    repeat = REPEAT_QUICK if quick() else REPEAT
    seconds = POLL_SECONDS_QUICK if quick() else POLL_SECONDS
    measured: list[dict[str, Any]] = []
    for number in range(rounds()):
        progress(f"{part}: round {number + 1} of {rounds()}: pages")
        one = measure_pages(conversations, repeat)
        progress(f"{part}: round {number + 1}: desk poll ({POLLERS} pollers, {seconds}s)")
        one |= measure_desk(seconds)
        progress(f"{part}: round {number + 1}: a search for a common word")
        one |= measure_common_word(conversations)
        measured.append(one)
    result["rounds"] = measured
    return result


# ---------------------------------------------------------------------------------------------
# The parent: a private cluster, two databases, one child each
# ---------------------------------------------------------------------------------------------

TARGETS_P95_MS = {"desk_poll": 50, "admin": 200, "api": 100, "conversation_page": 150}


def combine(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    """The result: each figure's p95 (and p50) at the large size, the median over rounds, beside
    the small size's; each figure's min / median / max over the rounds; the summary figures the
    targets read."""
    def medians(rounds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
        names = rounds[0].keys()
        return {name: {q: round(statistics.median(r[name][q] for r in rounds), 2) for q in ("p50", "p95")}
                for name in names}

    big, base = medians(large["rounds"]), medians(small["rounds"])
    result: dict[str, Any] = {
        "database": "postgresql (private cluster)",
        "conversations": large["conversations"], "history_rows": large["history_rows"],
        "baseline_conversations": small["conversations"], "baseline_history_rows": small["history_rows"],
        "database_mb": large["database_mb"], "fill_s": large["fill_s"], "fill_steps_s": large["fill_steps_s"],
        "rounds_measured": len(large["rounds"]), "pollers": POLLERS,
    }
    for name in big:
        result[f"{name}_p50_ms"] = big[name]["p50"]
        result[f"{name}_p95_ms"] = big[name]["p95"]
        result[f"{name}_p95_ms_at_1k"] = base[name]["p95"]
        values = sorted(r[name]["p95"] for r in large["rounds"])
        result.setdefault("rounds", {})[name] = {"min": values[0], "median": round(statistics.median(values), 2),
                                                 "max": values[-1]}
    admin = [n for n in big if n.startswith("admin_")]
    api = [n for n in big if n.startswith("api_")]
    result["admin_worst_p95_ms"] = max(big[n]["p95"] for n in admin)
    result["admin_list_worst_p95_ms"] = max(big[n]["p95"] for n in admin if not n.startswith("admin_search"))
    result["admin_search_worst_p95_ms"] = max(big[n]["p95"] for n in admin if n.startswith("admin_search_")
                                              and n != "admin_search_common_word")
    result["api_worst_p95_ms"] = max(big[n]["p95"] for n in api)
    result["turn_vs_1k"] = round(big["turn"]["p50"] / base["turn"]["p50"], 3) if base["turn"]["p50"] else None
    result["turn_vs_1k_rounds"] = [round(b["turn"]["p50"] / s["turn"]["p50"], 3)
                                   for b, s in zip(large["rounds"], small["rounds"], strict=True)]
    return result


def main() -> dict[str, Any]:
    from bench.hostbench import environment, progress, run_child, write_result
    from falai_django.testing.postgres import PrivatePostgres, available

    problem = available()
    if problem:
        raise RuntimeError(f"the scale bench needs a private PostgreSQL cluster: {problem}")
    results: dict[str, dict[str, Any]] = {}
    with PrivatePostgres(prefix="falai-scale-pg-", settings=SERVER_SETTINGS) as pg:
        envs = {}
        for part, conversations in sizes().items():
            dsn = pg.create_database(f"falai_scale_{part}")
            envs[part] = {**environment(), "DATABASE_URL": dsn, SIZE_ENV: str(conversations)}
            progress(f"scale: {part} = {conversations:,} conversations")
            results[part] = run_child(Path(__file__).resolve(), timeout=7200, part=part, env=envs[part])
        # The turns last, alternating between the sizes round by round, so a slow minute of the
        # shared machine lands on both sides of the ratio.
        for number in range(rounds()):
            for part in results:
                progress(f"scale: {part}: round {number + 1}: message turns")
                turns = run_child(Path(__file__).resolve(), timeout=3600, part=f"turns-{number + 1}",
                                  env=envs[part])
                results[part]["rounds"][number] |= turns
    result = combine(results["small"], results["large"])
    write_result(RESULTS, result)
    print_table(result)
    return result


def print_table(r: dict[str, Any]) -> None:
    print(f"scale: {r['conversations']:,} conversations, {r['history_rows']:,} transcript rows "
          f"({r['database_mb']:,} MB, filled in {r['fill_s']:.0f}s), beside {r['baseline_conversations']:,}; "
          f"p95 ms, median of {r['rounds_measured']} round(s):")
    print(f"  {'figure':<26}{'at 1k':>10}{'p50':>10}{'p95':>10}{'min-max p95':>18}")
    for name, spread in r["rounds"].items():
        print(f"  {name:<26}{r[f'{name}_p95_ms_at_1k']:>10.1f}{r[f'{name}_p50_ms']:>10.1f}{r[f'{name}_p95_ms']:>10.1f}"
              f"{spread['min']:>9.1f}-{spread['max']:<8.1f}")
    print(f"  turn at scale / at 1k (p50): {r['turn_vs_1k']}")


if __name__ == "__main__":
    from bench.hostbench import cli

    cli(measure, main, options={"--rounds": ROUNDS_ENV})
