"""`make run` heals like a deployment (issue 28): `scripts/run_demo.py`'s supervisor restarts a
child that exits, with a notice naming it and its exit code and a doubling backoff (reset once the
child stayed up), kills what a dead child left in its group, and stopping stops every child.

Cheap fake children stand for the web server, the worker and the dispatcher (the real ones under
`make run` are tests/demo/test_run_demo.py's).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import alive

ROOT = Path(__file__).resolve().parents[2]

CHILD = r'''
import os, subprocess, sys, time

kind, log = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write(f"{time.monotonic()}\n")
runs = len(open(log).read().split())
# a grandchild in the child's process group, as qcluster forks its workers
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(log + ".pids", "a") as f:
    f.write(f"{os.getpid()} {grandchild.pid}\n")
if kind == "flaky" and runs <= 3:  # dies at once three times, then stays up
    sys.exit(3)
if kind == "slow":  # stays up a while, then dies, every time
    time.sleep(0.6)
    sys.exit(4)
time.sleep(60)
'''


def load_run_demo():
    spec = importlib.util.spec_from_file_location("run_demo_supervised", ROOT / "scripts" / "run_demo.py")
    run_demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_demo)
    return run_demo


def pids(log: Path) -> list[int]:
    path = log.with_name(log.name + ".pids")
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def starts(log: Path) -> list[float]:
    return [float(t) for t in log.read_text().split()] if log.exists() else []


def supervise(tmp_path, kinds, until, **backoff):
    run_demo = load_run_demo()
    (tmp_path / "child.py").write_text(CHILD)
    logs = {kind: tmp_path / f"{kind}.log" for kind in kinds}
    supervisor = run_demo.Supervisor([[sys.executable, str(tmp_path / "child.py"), kind, str(logs[kind])]
                                      for kind in kinds], poll_s=0.05, **backoff)
    deadline = time.monotonic() + 15
    try:
        supervisor.start()
        supervisor.run(until=lambda: until(logs) or time.monotonic() > deadline)
        assert time.monotonic() <= deadline, "the supervisor never got there"
        running = list(supervisor.procs)
    finally:
        run_demo.stop(supervisor.procs)
    everyone = [pid for log in logs.values() for pid in pids(log)]
    settle = time.monotonic() + 5  # a SIGKILLed grandchild (reparented) takes a moment to be gone
    while any(alive(pid) for pid in everyone) and time.monotonic() < settle:
        time.sleep(0.05)
    assert everyone and not [pid for pid in everyone if alive(pid)]  # stopping stopped them all, grandchildren too
    assert all(proc.returncode is not None for proc in running)
    return supervisor, logs


def test_a_child_that_exits_is_restarted_with_a_notice_and_a_doubling_backoff(tmp_path, capsys):
    def flaky_back_up(logs):
        return len(starts(logs["flaky"])) == 4 and len(pids(logs["flaky"])) == 8

    supervisor, logs = supervise(tmp_path, ["steady", "flaky"], flaky_back_up, first_s=0.2, cap_s=0.3)
    err = capsys.readouterr().err
    notices = [line for line in err.splitlines() if line.startswith("run_demo:")]
    child = supervisor.commands[1][1]
    assert notices == [f"run_demo: `{child} flaky` exited (3); restarting it in {delay} s."
                       for delay in ("0.2", "0.3", "0.3")], err  # doubled, then capped
    assert supervisor.restarts == [0, 3]  # the steady child was left alone
    times = starts(logs["flaky"])
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.2 and gaps[1] >= 0.3 and gaps[2] >= 0.3, gaps
    assert len(starts(logs["steady"])) == 1


def test_a_dead_childs_stragglers_are_killed_and_a_child_that_stayed_up_waits_the_first_backoff(tmp_path,
                                                                                                 capsys):
    def three_deaths(logs):
        return len(starts(logs["slow"])) == 4

    supervisor, logs = supervise(tmp_path, ["slow"], three_deaths, first_s=0.1, cap_s=5, steady_s=0.4)
    notices = re.findall(r"exited \((\d+)\); restarting it in (\S+) s\.", capsys.readouterr().err)
    assert notices == [("4", "0.1")] * 3  # up 0.6 s > steady_s each time: never doubled
    first_grandchild = pids(logs["slow"])[1]
    assert not alive(first_grandchild)


def test_a_child_killed_by_a_signal_is_named_so():
    run_demo = load_run_demo()
    assert run_demo.describe(-9) == "killed by SIGKILL"
    assert run_demo.describe(0) == "exited (0)" and run_demo.describe(-200) == "killed by signal 200"


def test_make_run_supervises_its_three_children_until_ctrl_c(monkeypatch, capsys, keep_signal_handlers):
    """`main` hands the web server, the worker and the dispatcher to the supervisor, and a Ctrl-C
    during supervision ends it and stops all (what `stop` is given is what runs at that moment)."""

    run_demo = load_run_demo()
    seen: dict[str, object] = {}

    def run(self, tick=lambda: None, until=lambda: False):
        seen["commands"] = [command[2] for command in self.commands]
        self.procs = ["running"]
        assert not until()
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: the handler asks, it raises nothing
        deadline = time.monotonic() + 5
        while not until():
            assert time.monotonic() < deadline, "the signal never reached the supervision loop"
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)  # a second signal while stopping is ignored
        time.sleep(0.05)

    monkeypatch.setattr(run_demo, "manage", lambda *args, **kw: None)
    monkeypatch.setattr(run_demo, "setup_django", lambda: None)
    monkeypatch.setattr(run_demo, "ensure_admin", lambda: None)
    monkeypatch.setattr(run_demo, "start", lambda commands: [])
    monkeypatch.setattr(run_demo.Supervisor, "run", run)
    monkeypatch.setattr(run_demo, "stop", lambda procs: seen.setdefault("stopped", list(procs)))
    monkeypatch.chdir(ROOT)
    assert run_demo.main() == 0
    assert seen == {"commands": ["runserver", "qcluster", "falai_dispatch_wakes"], "stopped": ["running"]}
    assert "run_demo: all stopped." in capsys.readouterr().out


# run_demo.main() in a real process with slow-to-stop fake children (each with a grandchild in
# its group); the test signals it as a process manager and `make` would.
SLOW_CHILD = r'''
import os, signal, subprocess, sys, time

grandchild = subprocess.Popen([sys.executable, "-c",
                               "import signal, time; signal.signal(signal.SIGINT, signal.SIG_DFL); time.sleep(120)"])
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()} {grandchild.pid}\n")

def slow_exit(*_):
    time.sleep(0.8)  # a web server finishing its requests, a cluster stopping its workers
    sys.exit(0)

signal.signal(signal.SIGINT, slow_exit)
time.sleep(120)
'''

DRIVER = r'''
import importlib.util, sys

spec = importlib.util.spec_from_file_location("run_demo", sys.argv[1])
run_demo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run_demo)
run_demo.manage = lambda *args, **kw: None
run_demo.setup_django = lambda: None
run_demo.ensure_admin = lambda: None
run_demo.server_answers = lambda: True
run_demo.provider_in_use = lambda: "fake"
run_demo.children = lambda: [[sys.executable, sys.argv[2], sys.argv[3]]] * 3
sys.modules["django.db"] = type(sys)("django.db")
sys.modules["django.db"].connections = type("C", (), {"close_all": staticmethod(lambda: None)})
sys.exit(run_demo.main())
'''


@pytest.mark.parametrize("spacing", [0.0, 0.05, 0.4, 1.2])
def test_two_sigterms_at_any_spacing_leave_no_process_behind(tmp_path, spacing):
    (tmp_path / "child.py").write_text(SLOW_CHILD)
    (tmp_path / "driver.py").write_text(DRIVER)
    log = tmp_path / "pids"
    demo = subprocess.Popen([sys.executable, str(tmp_path / "driver.py"), str(ROOT / "scripts" / "run_demo.py"),
                             str(tmp_path / "child.py"), str(log)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    everyone: list[int] = []
    try:
        deadline = time.monotonic() + 20
        while len(everyone) < 6:
            assert demo.poll() is None, demo.stdout.read()
            assert time.monotonic() < deadline, "the children never started"
            everyone = [int(pid) for pid in log.read_text().split()] if log.exists() else []
            time.sleep(0.05)
        time.sleep(0.3)  # supervising now, the banner printed
        os.killpg(demo.pid, signal.SIGTERM)  # the process manager signals the group
        time.sleep(spacing)
        with contextlib.suppress(ProcessLookupError):
            os.kill(demo.pid, signal.SIGTERM)  # and make forwards another
        output, _ = demo.communicate(timeout=30)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
        for pid in everyone:  # never leave strays behind, even when failing
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    settle = time.monotonic() + 5  # a SIGKILLed grandchild (reparented) takes a moment to be gone
    while any(alive(pid) for pid in everyone) and time.monotonic() < settle:
        time.sleep(0.05)
    assert demo.returncode == 0, output
    assert "Traceback" not in output and "run_demo: all stopped." in output, output
    assert not [pid for pid in everyone if alive(pid)], output
