"""Fault suite: the ``openqa`` console script against hostile input and interruptions, with figures.

It builds a synthetic corpus (seeded), then runs the hostile cases (scripts/benchmarks/faultsuite/cases.py,
text.py, files.py, limits.py and refusals.py), the keys typed at a terminal (typed.py) and the interruptions of ``index``,
``eval`` and ``tune --method ensemble`` (interruptions.py), each judged by tally.py, and writes eval/results/benchmarks/bench-faults.json: cases
tried, clean errors, right answers, clean stops, and every bad outcome (tracebacks, hangs, wrong
exits, indexes lost or served half-written, scratch folders, crash logs, inconsistent result sets,
temporary files: target 0 of each). The full-disk case mounts a tiny tmpfs, so it runs as root only.

    python scripts/benchmarks/bench_faults.py                 # everything (some 25 minutes here)
    python scripts/benchmarks/bench_faults.py --quick         # the part the tests run
    python scripts/benchmarks/bench_faults.py --engines custom,lucene --tries 5

In parts (each under 10 minutes here, as a machine shared with timed runs asks), then merged:

    python scripts/benchmarks/bench_faults.py --part cases --output /tmp/cases.json
    python scripts/benchmarks/bench_faults.py --part builds --engines custom,pmi,lucene --output /tmp/builds1.json
    python scripts/benchmarks/bench_faults.py --part builds --engines word2vec,dense --output /tmp/builds2.json
    python scripts/benchmarks/bench_faults.py --part runs --output /tmp/runs.json
    python scripts/benchmarks/bench_faults.py --merge /tmp/cases.json /tmp/builds1.json /tmp/builds2.json /tmp/runs.json
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import REPO, command_line, record_path, write_record  # noqa: E402

RESULT = record_path("bench-faults.json")
sys.path.insert(1, str(REPO))  # the typed scenarios drive the terminal with the tests' helper

from faultsuite.record import PARTS, merge, run_suite  # noqa: E402
from faultsuite.tally import BAD  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases of each kind and two interruptions each (what the tests run)")
    parser.add_argument("--engines", help="comma-separated engines whose builds are interrupted (default: custom,pmi,lucene,word2vec,dense)")
    parser.add_argument("--tries", type=int, help="interruptions per engine and signal (default: per engine, up to 10)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the interruption moments (default: 11)")
    parser.add_argument("--part", action="append", choices=PARTS,
                        help="run only this part (repeat for more): the hostile cases and typed keys, the interrupted index "
                             "builds, the interrupted evals and tunes (default: all)")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="RECORD", help="merge the records of parts run alone into one")
    parser.add_argument("--output", type=Path, default=RESULT, help=f"record path (default: {RESULT})")
    args = parser.parse_args()
    # an --output elsewhere (a part's scratch record) is where this machine keeps it: FOLDER, as benchlib writes folders
    command = command_line("scripts/benchmarks/bench_faults.py", sys.argv[1:], ("--output",))
    if args.merge:
        record = merge([json.loads(path.read_text()) for path in args.merge])
        path = write_record(args.output.name, record, command, args.output.parent)
        print(f"{record['cases']} cases, {record['interruptions']} interruptions: {({k: record[k] for k in BAD})}; wrote {path}")
        return
    # Started in the background, this process may ignore SIGINT; every command it starts gets SIGINT
    # at its default anyway (faultsuite.tally.default_sigint), and so does this process, to be stoppable.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    start = time.perf_counter()
    record = run_suite(args.quick, args.engines and args.engines.split(","), args.tries, args.seed, tuple(args.part or PARTS))
    record["seconds"] = round(time.perf_counter() - start, 1)
    path = write_record(args.output.name, record, command, args.output.parent)
    print(f"{record['cases']} cases, {record['interruptions']} interruptions: {({k: record[k] for k in BAD})}; wrote {path}")


if __name__ == "__main__":
    main()
