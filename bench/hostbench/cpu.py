"""CPU accounting for the load rounds (Linux `/proc`): where a turn's CPU goes, client or server.

`snapshot(pids)` reads the CPU seconds used so far by the given client processes, by every process
named `postgres` (the backends and the server's own writers: a local server is assumed, as the
bench's pgbench run is), and the machine's busy and idle time. `usage(before, after, turns)`
turns two snapshots into per-turn milliseconds and the machine's idle share. Off Linux both
answer None and the bench leaves the figures out.
"""

from __future__ import annotations

import os
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _process_cpu(pid: str) -> tuple[str, float] | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            name = f.read().strip()
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return None
    return name, (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime


def snapshot(pids: set[int]) -> dict[str, Any] | None:
    if not os.path.exists("/proc/stat"):
        return None
    clients: dict[int, float] = {}
    server: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        found = _process_cpu(entry)
        if found is None:
            continue
        name, seconds = found
        if int(entry) in pids:
            clients[int(entry)] = seconds
        elif name == "postgres":
            server[int(entry)] = seconds
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return {"clients": clients, "server": server, "total": sum(ticks) / _TICK,
            "idle": (ticks[3] + ticks[4]) / _TICK}  # idle + iowait


def _spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU used between the snapshots: per process, so one that ended meanwhile (a pgbench
    backend) takes nothing away; one that started counts from zero."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def usage(before: dict[str, Any] | None, after: dict[str, Any] | None, turns: int) -> dict[str, Any]:
    if before is None or after is None or turns <= 0:
        return {}
    elapsed = after["total"] - before["total"]
    return {
        "client_cpu_ms_per_turn": round(_spent(before["clients"], after["clients"]) * 1000 / turns, 3),
        "server_cpu_ms_per_turn": round(_spent(before["server"], after["server"]) * 1000 / turns, 3),
        "idle_share": round((after["idle"] - before["idle"]) / elapsed, 3) if elapsed > 0 else None,
    }
