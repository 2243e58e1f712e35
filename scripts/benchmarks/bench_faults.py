"""Fault suite: the ``openqa`` console script against hostile input and interruptions, with figures.

It builds a synthetic corpus (seeded), then runs the hostile cases (scripts/benchmarks/faultsuite/cases.py,
text.py, files.py, limits.py and refusals.py), the keys typed at a terminal (typed.py) and the interruptions of ``index``,
``eval`` and ``tune --method ensemble`` (interruptions.py), each judged by tally.py, and writes eval/results/benchmarks/bench-faults.json: cases
tried, clean errors, right answers, clean stops, and every bad outcome (tracebacks, hangs, wrong
exits, indexes lost or served half-written, scratch folders, crash logs, inconsistent result sets,
temporary files: target 0 of each). The full-disk case mounts a tiny tmpfs, so it runs as root only.

    python scripts/benchmarks/bench_faults.py                 # everything (some 20 minutes here)
    python scripts/benchmarks/bench_faults.py --quick         # the part the tests run
    python scripts/benchmarks/bench_faults.py --engines custom,lucene --tries 5
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import REPO, record_path, write_record  # noqa: E402

RESULT = record_path("bench-faults.json")
sys.path.insert(1, str(REPO))  # the typed scenarios drive the terminal with the tests' helper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases of each kind and two interruptions each (what the tests run)")
    parser.add_argument("--engines", help="comma-separated engines whose builds are interrupted (default: custom,pmi,lucene,word2vec,dense)")
    parser.add_argument("--tries", type=int, help="interruptions per engine and signal (default: per engine, up to 10)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the interruption moments (default: 11)")
    parser.add_argument("--output", type=Path, default=RESULT, help=f"record path (default: {RESULT})")
    args = parser.parse_args()
    # Started in the background, this process may ignore SIGINT; every command it starts gets SIGINT
    # at its default anyway (faultsuite.tally.default_sigint), and so does this process, to be stoppable.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from faultsuite.record import run_suite
    from faultsuite.tally import BAD


    start = time.perf_counter()
    record = run_suite(args.quick, args.engines and args.engines.split(","), args.tries, args.seed)
    record["seconds"] = round(time.perf_counter() - start, 1)
    path = write_record(args.output.name, record, "python scripts/benchmarks/bench_faults.py " + " ".join(sys.argv[1:]), args.output.parent)
    print(f"{record['cases']} cases, {record['interruptions']} interruptions: {({k: record[k] for k in BAD})}; wrote {path}")


if __name__ == "__main__":
    main()
