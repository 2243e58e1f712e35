"""The quick part of the fault suite (scripts/bench_faults.py): hostile input of every kind and
interrupted index builds and evaluations end cleanly, lose nothing and leave consistent results."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_faults.py"


def load_suite():
    spec = importlib.util.spec_from_file_location("bench_faults", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_quick_fault_suite_has_no_bad_outcome():
    record = load_suite().run_suite(quick=True)
    assert record["cases"] >= 15 and record["interruptions"] >= 8
    assert len(record["categories"]) >= 6
    bad = {k: record[k] for k in ("tracebacks", "hangs", "wrong_exits", "indexes_lost", "indexes_half_written",
                                  "scratch_left", "crash_logs", "result_sets_inconsistent")}
    assert bad == dict.fromkeys(bad, 0), record["failures"]
