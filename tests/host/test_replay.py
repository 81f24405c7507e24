"""Replay (issue 49): every turn the host runs keeps its recording on the run-log row, and
`replay()` runs the stored inputs again through an agent with the model's recorded replies.

Runs on SQLite here and on PostgreSQL in tests/host/test_postgres.py's run (the recording rides
in the turn's one statement there)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from falai_django import falai, host
from falai_django.models import History, Session, TurnRecord, Wake
from falai_django.replay import ReplayError, case_of, replay
from falai_django.testing import fake_clock, mock_provider, replay_case

from . import agents, senders

pytestmark = pytest.mark.django_db(transaction=True)

SID = "5511900000001"


def ana(*, tchau: str = "Obrigado, {{data.nome}}! Até logo.", extra_steps: list[dict[str, Any]] | None = None,
        provider: Any = None, clock: Any = None, actions: dict[str, Any] | None = None) -> Any:
    """The host tests' Ana (quem → espera → tchau), reworded or with steps added, plus an event
    `pago` whose flow runs the action `registrar` and says thanks."""
    f = falai().fields({"nome": {"type": "string", "ask": "Pergunte o nome da pessoa."},
                        "cidade": {"type": "string", "ask": "Pergunte a cidade."},
                        "valor": {"type": "string"}})
    registered: list[Any] = []
    return f.agent(
        name="Ana",
        provider=provider or agents.scripted_provider(),
        clock=clock or agents.clock(),
        events={"pago": {}},
        actions=actions or {"registrar": {"parameters": {"valor": {"type": "string"}},
                                          "run": lambda p, ctx: registered.append(p) or ctx.set({"valor": p["valor"]})
                                          or {"ok": True, "detail": "registrado"}}},
        flows=[
            f.flow({"id": "triagem", "name": "Triagem", "on": [{"message": []}],
                    "steps": [{"id": "quem", "prompt": "Descubra o nome.", "collect": ["nome"]},
                              {"id": "espera", "wait": "1h"},
                              *(extra_steps or []),
                              {"id": "tchau", "say": tchau}]}),
            f.flow({"id": "pagamento", "name": "Pagamento", "on": [{"event": "pago"}],
                    "steps": [{"id": "registra", "do": "registrar", "with": {"valor": "{{input.valor}}"}},
                              {"id": "obrigado", "say": "Recebemos {{data.valor}}, {{data.nome}}."}]}),
        ],
    )


@pytest.fixture
def conversation():
    """A conversation with messages, the model's replies, a wake, an event with an action, a
    handoff and a message while silenced; returns what the action saw."""
    seen: list[Any] = []
    actions = {"registrar": {"parameters": {"valor": {"type": "string"}},
                             "run": lambda p, ctx: seen.append(p) or ctx.set({"valor": p["valor"]})
                             or {"ok": True, "detail": "registrado"}}}
    agents.use(ana(actions=actions))
    host.handle_message(SID, "oi", id="m1")
    host.handle_message(SID, "meu nome é Ana", id="m2")
    agents.clock().advance("61m")
    (key,) = Wake.objects.filter(conversation_id=SID).values_list("key", flat=True)
    host.handle_wake(SID, key)
    host.handle_event(SID, "pago", key="pay:1", payload={"valor": "R$ 10"})
    host.silence(SID, "human:maria")
    host.handle_message(SID, "tem alguém aí?", id="m3")
    return seen


def tables() -> dict[str, int]:
    return {"sessions": Session.objects.count(), "history": History.objects.count(),
            "turns": TurnRecord.objects.count(), "wakes": Wake.objects.count()}


def test_every_turn_keeps_its_recording_on_its_run_log_row(conversation):
    rows = list(TurnRecord.objects.filter(conversation_id=SID).order_by("id"))
    assert [r.kind for r in rows] == ["message", "message", "wake", "event", "message"]
    first, second, wake, event, silenced = (r.recording for r in rows)
    assert first["at"] == "2026-09-20T10:00:00.000Z" and wake["at"] == "2026-09-20T11:01:00.000Z"
    assert [r["schema"] for r in first["replies"]] == ["speak"]
    assert [r["schema"] for r in second["replies"]] == ["understand", "speak"]
    assert second["replies"][0]["reply"]["structured"] == {"fields": {"nome": "Ana"}}
    assert second["history"] == {"upto": History.objects.filter(conversation_id=SID).order_by("id")[1].id, "n": 2}
    assert second["before"] == {"messages": ["Prazer, Ana!"], "codes": ["collect:ok", "wait:waiting", "idle:ok"],
                                "schedule": [rows[2].input_key], "ended": []}
    # the data a turn changed, not the whole data on every turn; the case adds them up
    assert [r["data_changes"] for r in (first, second, wake, event, silenced)] == [
        {}, {"nome": "Ana"}, {}, {"valor": "R$ 10"}, {}]
    assert [t["before"]["data"] for t in case_of(SID)["turns"]] == [
        {}, {"nome": "Ana"}, {"nome": "Ana"}, {"nome": "Ana", "valor": "R$ 10"}, {"nome": "Ana", "valor": "R$ 10"}]
    assert wake["replies"] == [] and wake["before"]["messages"] == ["Obrigado, Ana! Até logo."]
    assert event["effects"] == [{"action": "registrar", "result": {"ok": True, "detail": "registrado"},
                                 "set": [{"valor": "R$ 10"}]}]
    assert silenced["silenced"] == "human:maria" and silenced["before"]["messages"] == []


def test_recording_can_be_turned_off(settings):
    settings.FALAI = {**settings.FALAI, "RECORD_MODEL_REPLIES": False}
    host.handle_message(SID, "oi", id="m1")
    assert TurnRecord.objects.get(conversation_id=SID).recording is None


def test_an_unchanged_agent_replays_every_turn_the_same_with_no_model_call(conversation):
    provider = agents.current_agent().provider
    calls, before, sent = len(provider.calls), tables(), len(senders.sent)
    report = replay(SID)
    assert report.same is True and report.first_difference is None and report.model_calls == 0
    assert [(t.index, t.kind, t.same, t.needs_model, t.diffs) for t in report.turns] == [
        (0, "message", True, False, []), (1, "message", True, False, []), (2, "wake", True, False, []),
        (3, "event", True, False, []), (4, "message", True, False, [])]
    assert report.turns[3].after["messages"] == ["Recebemos R$ 10, Ana."]
    assert report.turns[3].actions == [{"action": "registrar", "params": {"valor": "R$ 10"}}]
    # nothing called, written or sent; the real action never ran again
    assert len(provider.calls) == calls and tables() == before and len(senders.sent) == sent
    assert conversation == [{"valor": "R$ 10"}]


def test_a_reworded_say_differs_at_its_turn_in_the_messages_only(conversation):
    report = replay(SID, agent=ana(tchau="Valeu, {{data.nome}}! Até mais."))
    assert report.same is False and report.first_difference == 2
    turn = report.turns[2]
    assert turn.kind == "wake" and turn.diffs == ["messages"] and not turn.needs_model
    assert turn.before["messages"] == ["Obrigado, Ana! Até logo."]
    assert turn.after["messages"] == ["Valeu, Ana! Até mais."]
    assert [t.same for t in report.turns] == [True, True, False, True, True]


def test_a_new_collect_step_needs_the_model_and_a_live_replay_fills_it(conversation):
    extra = [{"id": "onde", "prompt": "Descubra a cidade.", "collect": ["cidade"]}]
    report = replay(SID, agent=ana(extra_steps=extra))
    # The new field makes the first message's turn ask the model to understand it, which the
    # recording cannot answer: left unanswered, the turn says the same but needs the model.
    first, asks = report.turns[0], report.turns[2]
    assert report.first_difference == 0 and first.needs_model and first.diffs == [] and not first.same
    # The wake's turn now asks for the city (a speak the recording never had) instead of saying goodbye.
    assert asks.needs_model and "messages" in asks.diffs and asks.before["messages"] == ["Obrigado, Ana! Até logo."]
    assert report.model_calls == 0 and report.status == "needs_model"

    def speak(request: Any) -> dict[str, Any]:
        if "Descubra a cidade" in (request.prompt or ""):
            return {"message": "E de qual cidade você fala?"}
        return agents.speak_reply(request)

    live = mock_provider(understand=[agents.understand_reply] * 10, speak=[speak] * 10)
    report = replay(SID, agent=ana(extra_steps=extra, provider=live), live=True)
    asks = report.turns[2]
    assert not any(t.needs_model for t in report.turns)
    assert asks.after["messages"] == ["E de qual cidade você fala?"] and asks.diffs == ["messages", "codes", "ended"]
    assert asks.after["ended"] == []  # the run waits for the city instead of ending
    assert report.model_calls == len(live.calls) > 0


def test_the_replay_never_runs_the_changed_agents_action(conversation):
    def broken(params, ctx):
        raise RuntimeError("boom")

    report = replay(SID, agent=ana(actions={"registrar": {"parameters": {"valor": {"type": "string"}},
                                                          "run": broken}}))
    # the stand-in answers as the real action did: the replay never runs the new one
    assert report.same is True


def test_export_then_replay_case_round_trip_without_a_database(conversation, tmp_path, django_assert_num_queries):
    case = json.loads(json.dumps(case_of(SID)))
    assert case["format"] == "falai_django.replay-case" and len(case["turns"]) == 5
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case), encoding="utf-8")
    agent = ana(clock=fake_clock("2030-01-01T00:00:00Z"), provider=mock_provider())  # no reply scripted
    with django_assert_num_queries(0):
        from_file = replay_case(path, agent)
        from_dict = replay_case(case, agent)
        changed = replay_case(case, ana(tchau="Tchau!", provider=mock_provider()))
    assert from_file.same and from_dict.same and from_file.model_calls == 0
    assert [t.after for t in from_file.turns] == [t.before for t in from_file.turns]
    assert changed.first_difference == 2 and changed.turns[2].diffs == ["messages"]


def test_replay_case_refuses_what_is_not_a_case(tmp_path):
    with pytest.raises(ValueError, match="not a replay case"):
        replay_case({"turns": []}, ana())
    path = tmp_path / "x.json"
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ValueError, match="not a replay case"):
        replay_case(path, ana())


def test_an_unknown_conversation_is_a_replay_error():
    with pytest.raises(ReplayError, match="no turns"):
        replay("nobody")


def test_the_history_each_turn_read_is_the_stored_one(conversation):
    case = case_of(SID)
    transcript = case["transcript"]
    slices = [transcript[a:b] for a, b in (t["history"] for t in case["turns"])]
    assert slices[0] == [] and [i["content"] for i in slices[1]] == ["oi", "Oi! Com quem eu falo?"]
    assert [i["content"] for i in slices[2]][-1] == "Prazer, Ana!"


def test_postgres_keeps_the_recording_in_the_turns_one_statement(conversation):
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement write is PostgreSQL's (the ORM path is covered above)")
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        host.handle_message(SID + "9", "oi", id="x1")
    writes = [q["sql"] for q in queries.captured_queries if "falai_turn" in q["sql"] and "recording" in q["sql"]]
    assert len(writes) == 1 and "agent_sessions" in writes[0]  # the session save and the run log, together
    assert TurnRecord.objects.get(conversation_id=SID + "9").recording["replies"][0]["schema"] == "speak"


# -- the command -----------------------------------------------------------------------------------

def run_command(*args: str) -> tuple[int, str, str]:
    """`falai_replay` through call_command: (exit status, stdout, stderr)."""
    import io

    from django.core.management import CommandError, call_command

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("falai_replay", *args, stdout=out, stderr=err)
        status = 0
    except CommandError as exc:
        status = exc.returncode
        err.write(str(exc))
    return status, out.getvalue(), err.getvalue()


def recorded_ana() -> Any:
    """FALAI["AGENT"] of the command run as its own process: the conversation's Ana (the replay
    pins the clock to each turn's recorded time)."""
    return ana(clock=fake_clock("2030-01-01T00:00:00Z"))


def changed_ana() -> Any:
    """A dotted path's target for --agent: Ana with her goodbye reworded."""
    return ana(tchau="Valeu, {{data.nome}}!", clock=fake_clock("2030-01-01T00:00:00Z"))


def test_the_command_says_same_and_exits_0(conversation):
    status, out, err = run_command(SID)
    assert status == 0, err
    assert f"{SID}      5  same" in out and "1 conversation(s): 1 same, 0 different, 0 need the model" in out


def test_the_command_shows_the_difference_and_exits_1(conversation):
    status, out, err = run_command(SID, "--agent", "host.test_replay.changed_ana")
    assert status == 1 and "1 of 1 conversation(s) would change" in err
    assert "different" in out and "turn 2 (wake " in out
    assert 'before: ["Obrigado, Ana! Até logo."]' in out and 'after:  ["Valeu, Ana!"]' in out


def test_the_command_json_prints_one_report_per_line_and_nothing_else(conversation):
    host.handle_message(SID + "2", "oi", id="z1")
    status, out, err = run_command("--json", "--limit", "5")
    assert status == 0, err
    reports = [json.loads(line) for line in out.splitlines()]
    assert [r["session_id"] for r in reports] == [SID + "2", SID]  # the latest first
    assert all(r["same"] and r["status"] == "same" and r["model_calls"] == 0 for r in reports)
    assert [len(r["turns"]) for r in reports] == [1, 5]
    assert set(reports[1]["turns"][2]) >= {"index", "input_key", "kind", "same", "needs_model", "diffs", "before",
                                           "after"}


def test_the_command_picks_the_conversations_that_ran_a_flow(conversation):
    host.handle_message(SID + "2", "oi", id="z1")  # ran triagem only
    status, out, _ = run_command("--flow", "pagamento", "--json")
    assert status == 0 and [json.loads(line)["session_id"] for line in out.splitlines()] == [SID]
    status, out, err = run_command("--flow", "nenhum")
    assert status == 0 and out == "" and "no conversation matches" in err
    status, out, err = run_command("--flow", "triagem", "--since", "2999-01-01")
    assert status == 0 and "no conversation matches" in err


def test_the_command_exports_a_case(conversation):
    status, out, err = run_command("--export", SID)
    assert status == 0 and err == ""
    case = json.loads(out)
    assert case["session_id"] == SID and [t["kind"] for t in case["turns"]] == ["message", "message", "wake", "event",
                                                                                 "message"]
    assert replay_case(case, ana()).same


def test_a_replay_counts_and_traces_no_model_call(conversation, monkeypatch):
    """The recorded calls were counted when they ran; played back they are not calls (a live
    replay's are: those reach the model)."""
    from falai_django.llm import calling
    from falai_django.models import DailyTotal, MetricTotal
    from falai_django.observe import metrics

    metrics.flush()
    totals = lambda: (sorted(MetricTotal.objects.values_list("name", "labels", "value")),  # noqa: E731
                      sorted(DailyTotal.objects.values_list("day", "name", "labels", "value")))
    before = totals()
    assert any(name == "falai_llm_calls_total" for name, _, _ in before[0])  # the real calls were counted
    opened: list[Any] = []
    monkeypatch.setattr(calling, "_span_opener", [lambda provider: opened.append(provider)])
    seen: list[Any] = []
    monkeypatch.setattr(calling, "_observers", [*calling._observers, lambda *args: seen.append(args)])
    assert replay(SID).same
    metrics.flush()
    assert totals() == before and seen == [] and opened == []
    live = replay(SID, live=True)
    assert live.model_calls == len(seen) > 0 and len(opened) == len(seen)


def test_the_command_exports_the_chosen_conversations_to_a_directory(conversation, tmp_path):
    agents.use(ana())
    host.handle_message("5511900000002", "oi", id="x1")
    status, out, err = run_command("--flow", "triagem", "--limit", "5", "--export-dir", str(tmp_path / "cases"))
    assert status == 0 and out == "" and "exported 2 case(s)" in err
    files = sorted(p.name for p in (tmp_path / "cases").iterdir())
    assert files == ["5511900000001.json", "5511900000002.json"]
    case = json.loads((tmp_path / "cases" / f"{SID}.json").read_text(encoding="utf-8"))
    assert case == json.loads(json.dumps(case_of(SID)))
    assert replay_case(tmp_path / "cases" / f"{SID}.json", ana()).same
    assert not replay_case(tmp_path / "cases" / f"{SID}.json", ana(tchau="Tchau, {{data.nome}}.")).same
    status, out, err = run_command("--flow", "nenhum", "--export-dir", str(tmp_path / "none"))
    assert status == 0 and "nothing to export" in err and not (tmp_path / "none").exists()
    (tmp_path / "file").write_text("x")
    status, out, err = run_command(SID, "--export-dir", str(tmp_path / "file"))
    assert status == 2 and "falai_replay:" in err


@pytest.mark.parametrize("args, message", [
    (["nobody"], "has no turns to replay"),
    (["--export", "nobody"], "has no turns to replay"),
    (["--flow-version", "vendas"], "is not FLOW_ID:VERSION"),
    (["--flow-version", "vendas:3"], "has no version 3"),
    (["--since", "ontem"], "is not an ISO date"),
    (["--limit", "0"], "--limit must be 1 or more"),
    (["--agent", "host.no_such_module.agent"], "No module named"),
])
def test_the_command_exits_2_on_an_error(args, message):
    status, out, err = run_command(*args)
    assert status == 2 and message in err and out == ""


def test_the_command_replays_a_stored_flow_version(conversation):
    from falai_django.models import Flow

    spec = {"id": "pagamento", "name": "Pagamento", "on": [{"event": "pago"}],
            "steps": [{"id": "registra", "do": "registrar", "with": {"valor": "{{input.valor}}"}},
                      {"id": "obrigado", "say": "Pagamento de {{data.valor}} confirmado."}]}
    flow = Flow(id="pagamento", name="Pagamento", enabled=False, spec=spec)
    flow.save()
    status, out, err = run_command(SID, "--flow-version", "pagamento:1", "--json")
    assert status == 1 and "would change" in err
    (report,) = [json.loads(line) for line in out.splitlines()]
    assert report["first_difference"] == 3 and report["turns"][3]["diffs"] == ["messages"]
    assert report["turns"][3]["after"]["messages"] == ["Pagamento de R$ 10 confirmado."]


def test_the_command_as_a_real_process(conversation, tmp_path):
    """`manage.py falai_replay` in its own process, against this test's database: 0, 1 and 2."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    db = connection.settings_dict
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "host.replay_settings", "DB_CONN_MAX_AGE": "0",
           "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    if connection.vendor == "postgresql":
        env["DATABASE_URL"] = f"postgresql://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    else:
        env.pop("DATABASE_URL", None)
        env["SQLITE_PATH"] = db["NAME"]

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "django", "falai_replay", *args], cwd=root, env=env,
                              capture_output=True, text=True, timeout=120)

    same = manage(SID, "--json")
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["same"] is True
    different = manage(SID, "--agent", "host.test_replay.changed_ana")
    assert different.returncode == 1 and "would change" in different.stderr
    assert manage("nobody").returncode == 2
    exported = manage("--export", SID)
    assert exported.returncode == 0 and json.loads(exported.stdout)["session_id"] == SID


def saldo_agent(handler: Any, provider: Any) -> Any:
    f = falai().fields({"conta": {"type": "string", "ask": "Pergunte o número da conta."}})
    return f.agent(
        name="Ana", provider=provider, clock=agents.clock(),
        tools=[{"id": "consulta", "description": "o saldo da conta", "handler": handler,
                "parameters": {"type": "object", "properties": {"conta": {"type": "string"}}, "required": ["conta"]}}],
        flows=[f.flow({"id": "saldo", "name": "Saldo", "on": [{"message": []}],
                       "steps": [{"id": "s", "prompt": "Informe o saldo.", "collect": ["conta"]}]})])


def test_a_tool_answers_from_the_recording_and_never_runs_again():
    calls: list[Any] = []

    def consulta(args, ctx):
        calls.append(args)
        return {"value": {"saldo": 10}, "data": {"conta": args["conta"]}}

    provider = mock_provider(understand=[{}] * 5, speak=[
        {"message": "Deixa eu ver...", "toolCalls": [{"toolName": "consulta", "arguments": {"conta": "9"}}]},
        {"message": "Seu saldo é R$ 10."}])
    agents.use(saldo_agent(consulta, provider))
    host.handle_message(SID, "meu saldo, conta 9", id="m1")
    assert calls == [{"conta": "9"}]
    recorded = TurnRecord.objects.get(conversation_id=SID).recording
    assert [r["schema"] for r in recorded["replies"]] == ["understand", "speak", "speak"][-len(recorded["replies"]):]
    assert recorded["effects"] == [{"tool": "consulta", "text": '{"saldo":10}', "data": {"conta": "9"}}]

    report = replay(SID)
    assert report.same and report.turns[0].after["data"] == {"conta": "9"}
    assert report.turns[0].after["messages"] == ["Seu saldo é R$ 10."]
    assert calls == [{"conta": "9"}]  # the tool's handler never ran again


def test_a_streamed_turn_replays_like_any_other(conversation):
    events = list(host.stream(SID + "s", {"message": "oi", "id": "s1"}))
    assert events[-1]["done"] is True
    recorded = TurnRecord.objects.get(conversation_id=SID + "s").recording
    assert [r["schema"] for r in recorded["replies"]] == ["speak"]
    report = replay(SID + "s")
    assert report.same and report.turns[0].after["messages"] == ["Oi! Com quem eu falo?"]


def test_data_changes_add_up_to_the_data_again():
    from falai_django.engine.results import apply_changes, data_changes

    before, after = {"nome": "Ana", "cidade": "Rio", "valor": 1}, {"nome": "Ana", "valor": 2, "email": "a@b.c"}
    changes = data_changes(before, after)
    assert changes == {"valor": 2, "email": "a@b.c", "cidade": None}
    assert apply_changes(before, changes) == after and before["cidade"] == "Rio"  # a new dict
    assert data_changes(None, {"nome": "Ana"}) == {"nome": "Ana"} and data_changes(after, after) == {}


def test_turns_without_a_recording_replay_from_the_run_log_and_the_transcript(settings):
    settings.FALAI = {**settings.FALAI, "RECORD_MODEL_REPLIES": False}
    agents.use(ana())
    host.handle_message(SID, "oi", id="m1")
    host.handle_message(SID, "meu nome é Ana", id="m2")
    agents.clock().advance("61m")
    (key,) = Wake.objects.filter(conversation_id=SID).values_list("key", flat=True)
    host.handle_wake(SID, key)
    case = case_of(SID)
    slices = [[i["content"] for i in case["transcript"][a:b]] for a, b in (t["history"] for t in case["turns"])]
    assert slices == [[], ["oi", "Oi! Com quem eu falo?"], ["oi", "Oi! Com quem eu falo?", "meu nome é Ana",
                                                            "Prazer, Ana!"]]
    assert [t["before"] for t in case["turns"]] == [
        {"messages": ["Oi! Com quem eu falo?"], "codes": ["collect:ok"], "schedule": [], "ended": [], "data": None},
        {"messages": ["Prazer, Ana!"], "codes": ["collect:ok", "wait:waiting", "idle:ok"], "schedule": [key],
         "ended": [], "data": None},
        {"messages": ["Obrigado, Ana! Até logo."], "codes": ["no-reply", "say:ok"], "schedule": [], "ended": ["end"],
         "data": None}]
    report = replay(SID)
    # no replies kept: the message turns need the model (so the name is never collected, and the
    # wake that said goodbye finds nothing to wake)
    assert [t.needs_model for t in report.turns] == [True, True, False] and report.first_difference == 0
    assert report.turns[2].after["messages"] == [] and "messages" in report.turns[2].diffs
