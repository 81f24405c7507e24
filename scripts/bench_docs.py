"""Rewrite the benchmark figures quoted in the docs from bench/results/*.json.

A figure in README.md or docs/**/*.md is written between two HTML comments (invisible once
rendered), naming the bench's result file and the key inside it:

    host turns beside pgbench: <!-- bench:host.host_vs_pgbench_2 -->0.12<!-- /bench --> with 2 clients
    p99 <!-- bench:wakes.lateness_p99_s|.2f -->0.84<!-- /bench --> s

- `host` is bench/results/host.json; the dotted key walks into nested objects (and lists, by
  index): `stores.djangostore_saves_per_s.16`.
- After `|`, an optional Python format spec (`.2f`, `.0f`, `,.0f`, `.1%`). Without one: whole
  numbers as they are, other numbers with three significant digits (no exponent: 1234.5 -> 1234),
  text as it is.

    .venv/bin/python scripts/bench_docs.py            # rewrite the values in place
    .venv/bin/python scripts/bench_docs.py --check    # exit 1 when a doc is stale (nothing written)
    .venv/bin/python scripts/bench_docs.py --list     # every marker, its file:line and value

A marker whose result file or key is missing (the bench has not run, or the key was renamed) is
reported and makes the exit status 1 in every mode; its text is left alone. `make bench` runs this
after bench/run_all.py.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
MARKER = re.compile(
    r"(?P<open><!--\s*bench:(?P<ref>[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)+)(?:\|(?P<fmt>[^>\n]*?))?\s*-->)"
    r"(?P<value>[^\n]*?)(?P<close><!--\s*/bench\s*-->)"
)


@dataclass
class Finding:
    path: Path
    line: int
    ref: str
    old: str
    new: str | None  # None: the figure is missing
    reason: str = ""


def doc_files(root: Path = ROOT) -> list[Path]:
    files = [root / "README.md"] if (root / "README.md").is_file() else []
    docs = root / "docs"
    if docs.is_dir():
        files += sorted(p for p in docs.rglob("*.md") if p.is_file())
    return files


def lookup(results: Path, ref: str, cache: dict[str, Any]) -> tuple[bool, Any, str]:
    """(found, value, reason) for `bench.key.path`."""
    bench, *keys = ref.split(".")
    if bench not in cache:
        path = results / f"{bench}.json"
        try:
            cache[bench] = json.loads(path.read_text())
        except FileNotFoundError:
            cache[bench] = None
        except ValueError as exc:
            cache[bench] = exc
    data = cache[bench]
    if data is None:
        return False, None, f"{bench}.json not found in {results}"
    if isinstance(data, Exception):
        return False, None, f"{bench}.json is not valid JSON: {data}"
    value: Any = data
    for key in keys:
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.lstrip("-").isdigit() and -len(value) <= int(key) < len(value):
            value = value[int(key)]
        else:
            return False, None, f"no {'.'.join(keys)!r} in {bench}.json"
    if value is None or isinstance(value, dict | list):
        return False, None, f"{ref} is {'null' if value is None else type(value).__name__}, not a figure"
    return True, value, ""


def render(value: Any, fmt: str | None) -> str:
    if fmt:
        return format(value, fmt.strip())
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value == int(value) and abs(value) < 1e15:
            return str(int(value))
        if abs(value) >= 100:
            return str(round(value))
        return f"{value:.3g}" if abs(value) >= 1e-3 else f"{value:.3e}"
    return str(value)


def process(path: Path, results: Path, cache: dict[str, Any], write: bool) -> tuple[list[Finding], list[Finding]]:
    """(all markers, the ones whose value changes or is missing) of one file; rewrites it if `write`."""
    text = path.read_text()
    markers: list[Finding] = []

    def replace(match: re.Match) -> str:
        line = text.count("\n", 0, match.start()) + 1
        found, value, reason = lookup(results, match["ref"], cache)
        old = match["value"]
        if not found:
            markers.append(Finding(path, line, match["ref"], old, None, reason))
            return match.group(0)
        try:
            new = render(value, match["fmt"])
        except (ValueError, TypeError) as exc:
            markers.append(Finding(path, line, match["ref"], old, None, f"format {match['fmt']!r}: {exc}"))
            return match.group(0)
        markers.append(Finding(path, line, match["ref"], old, new))
        return f"{match['open']}{new}{match['close']}"

    rewritten = MARKER.sub(replace, text)
    if write and rewritten != text:
        path.write_text(rewritten)
    return markers, [m for m in markers if m.new is None or m.new != m.old]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="docs to process (default: README.md and docs/**/*.md)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the bench results directory")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when a doc is stale; write nothing")
    mode.add_argument("--list", action="store_true", help="list every marker and its current value")
    args = parser.parse_args(argv)

    files = args.files or doc_files()
    cache: dict[str, Any] = {}
    total, stale, missing = 0, 0, 0
    for path in files:
        markers, changed = process(path, args.results, cache, write=not (args.check or args.list))
        total += len(markers)
        shown = markers if args.list else changed
        for m in shown:
            where = f"{_relative(m.path)}:{m.line} {m.ref}"
            if m.new is None:
                print(f"{where}: MISSING ({m.reason}); left as {m.old!r}")
            elif m.new != m.old:
                print(f"{where}: {m.old!r} -> {m.new!r}" + (" (stale)" if args.check else ""))
            else:
                print(f"{where}: {m.old!r}")
        missing += sum(1 for m in changed if m.new is None)
        stale += sum(1 for m in changed if m.new is not None)
    verb = "stale" if args.check or args.list else "rewritten"
    print(f"bench_docs: {total} figure(s) in {len(files)} file(s); {stale} {verb}, {missing} missing",
          file=sys.stderr)
    if missing or (args.check and stale):
        return 1
    return 0


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
