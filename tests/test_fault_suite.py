"""The quick part of the fault suite (scripts/benchmarks/bench_faults.py --quick, run as a command): hostile
input of every kind, keys typed at a terminal, and interrupted index builds and evaluations end
cleanly, lose nothing and leave consistent results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmarks" / "bench_faults.py"


@pytest.mark.spawns
@pytest.mark.slow
def test_quick_fault_suite_has_no_bad_outcome(tmp_path):
    output = tmp_path / "bench-faults.json"
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--output", str(output)], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(output.read_text())
    assert record["cases"] >= 12 and record["interruptions"] >= 8
    assert {"hostile input", "environment", "edited manifest", "lock", "typed at a terminal"} <= set(record["categories"])
    bad = {k: record[k] for k in ("tracebacks", "crashes", "hangs", "wrong_exits", "indexes_lost", "indexes_half_written",
                                  "scratch_left", "crash_logs", "result_sets_inconsistent", "temporaries_left")}
    assert bad == dict.fromkeys(bad, 0), record["failures"]
