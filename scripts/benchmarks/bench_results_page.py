"""How fast the results page's listing opens a folder of a few hundred eval records: every record of
eval/results/ copied (with its predictions file) under new names until the folder holds ``--runs``,
one of them half-written, then ``openqa.browse_results`` timed (``--repeats`` times, median and spread;
the page's ``GET /v1/results`` returns exactly this list).

    python scripts/benchmarks/bench_results_page.py [--runs 300]   -> eval/results/benchmarks/bench-results-page.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import RESULTS, write_record
from openqa import browse_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="eval records in the folder (default: 300)")
    parser.add_argument("--repeats", type=int, default=7, help="timed listings (default: 7)")
    args = parser.parse_args()
    records = [p for p in sorted(RESULTS.rglob("*.json"), key=lambda p: p.name) if "result_files" in json.loads(p.read_text())]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for i in range(args.runs - 1):
            source = records[i % len(records)]
            shutil.copy(source, folder / f"copy{i:04d}-{source.name}")
            predictions = source.with_name(source.name.removesuffix(".json") + ".predictions.jsonl")
            if predictions.is_file():
                shutil.copy(predictions, folder / f"copy{i:04d}-{predictions.name}")
        (folder / "half-written.json").write_text(records[0].read_text()[:100])
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            runs = browse_results(folder)
            seconds.append(round(time.perf_counter() - start, 4))
        unreadable = sum("unreadable" in r for r in runs)
    record = {"dataset": "eval/results", "split": "records", "method": "results page listing (openqa.browse_results)",
              "n": len(runs), "accuracy": None, "unreadable_listed": unreadable, "seconds": seconds,
              "median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
              "target": "a folder of a few hundred records opens in under a second", "met": statistics.median(seconds) < 1.0}
    out = write_record("bench-results-page.json", record, "python scripts/benchmarks/bench_results_page.py"
                       + (f" --runs {args.runs}" if args.runs != 300 else ""))
    print(f"{len(runs)} runs ({unreadable} unreadable) listed in {record['median_s']} s (median of {args.repeats}); wrote {out}")


if __name__ == "__main__":
    main()
