"""scripts/bench_spread.py: the spread of each figure over several runs' tables."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_spread.py"


def _script():
    spec = importlib.util.spec_from_file_location("bench_spread", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_min_median_max_and_met_count_per_figure():
    tables = [
        [{"bench": "host", "key": "x", "target": "≥ 0.1", "measured": 0.12, "met": True},
         {"bench": "wakes", "key": "y", "target": "≤ 1 s", "measured": None, "met": False}],
        [{"bench": "host", "key": "x", "target": "≥ 0.1", "measured": 0.08, "met": False}],
        [{"bench": "host", "key": "x", "target": "≥ 0.1", "measured": 0.11, "met": True}],
    ]
    result = _script().spread(tables)
    assert result["host"]["x"] == {"target": "≥ 0.1", "values": [0.12, 0.08, 0.11], "met": 2, "runs": 3,
                                   "min": 0.08, "median": 0.11, "max": 0.12}
    assert result["wakes"]["y"]["runs"] == 0 and result["wakes"]["y"]["median"] is None  # not run: no value
