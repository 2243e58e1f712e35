"""Benchmark the core pipeline's speed and memory targets; writes eval/results/benchmarks/bench-core.json.

Runs, as separate processes of the installed ``openqa`` command: ``index --lang en``,
``index --lang zh`` and ``eval --dataset us --split test`` (index load and scoring timed by the
command itself). Peak memory is the largest resident set of any of those processes.

    python scripts/benchmarks/bench_core.py            # needs OPENQA_DATA (or ../shared/medqa/data_clean)
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import data_dir, write_record

OPENQA = str(Path(sys.executable).with_name("openqa"))
TARGETS = {"index_en_s": 60, "index_zh_s": 120, "load_s": 3, "us_test_eval_s": 10, "peak_memory_mb": 4096}


def timed(*args: str) -> tuple[float, str]:
    """Wall seconds and stdout of one ``openqa`` run (fails loudly if it fails)."""
    start = time.perf_counter()
    done = subprocess.run([OPENQA, *args], capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def main() -> None:
    data = data_dir()
    index_en, _ = timed("index", "--lang", "en")
    index_zh, _ = timed("index", "--lang", "zh")
    _, out = timed("eval", "--dataset", "us", "--split", "test", "--json", "--output", tempfile.mkdtemp(prefix="openqa-bench-"))
    summary = json.loads(out)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    figures = {
        "index_en_s": round(index_en, 2),
        "index_zh_s": round(index_zh, 2),
        "load_s": summary["load_seconds"],
        "us_test_eval_s": summary["seconds"],
        "peak_memory_mb": round(peak_mb, 1),
    }
    record = {
        "dataset": "us",
        "split": "test",
        "method": "ir-custom (speed benchmark)",
        "n": summary["n"],
        "accuracy": summary["accuracy"],
        "figures": figures,
        "targets": TARGETS,
        "met": {k: figures[k] <= v for k, v in TARGETS.items()},
        "data": str(data),
    }
    out_path = write_record("bench-core.json", record, "python scripts/benchmarks/bench_core.py")
    print(json.dumps(figures), "->", out_path)


if __name__ == "__main__":
    main()
