"""How long the question bank takes to build and to answer from (issue 52's targets: a 30,000-question
bank built in under 30 s, under 5 ms a question for the bank part).

Banks of the exam's default size (MCMLE dev, 3,425 questions) and of 30,000 questions (the MCMLE dev
and test questions repeated under new ids until there are 30,000: the real release's MCMLE train
split has 27,400) are built ``--rounds`` times each, alternating; the first ``--questions`` MCMLE
test questions are then scored against each (one neighbour, normalized matching: the bank part's
defaults). Medians with the spread (min-max) of the rounds. The same for US (English) at its dev size.

    python scripts/benchmarks/bench_bank.py [--rounds 3] [--questions 500]   # -> eval/results/benchmarks/bench-bank.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import command_line, data_dir, write_record
from openqa import BankScorer, QuestionBank, load_questions

#: Questions in the large bank.
LARGE = 30_000


def spread(values: list[float], digits: int = 3) -> dict[str, float]:
    return {"median": round(statistics.median(values), digits), "min": round(min(values), digits),
            "max": round(max(values), digits)}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="builds and scorings of each bank (default: 3)")
    parser.add_argument("--questions", type=int, default=500, help="test questions scored per round (default: 500)")
    args = parser.parse_args(argv)
    data = data_dir()
    banks = {}
    zh_dev, zh_test = load_questions("mainland", "dev", data), load_questions("mainland", "test", data)
    pool = zh_dev + zh_test
    large = [replace(pool[i % len(pool)], qid=f"bank-{i}") for i in range(LARGE)]
    banks["mainland_dev"] = ("zh", zh_dev, zh_test[: args.questions])
    banks[f"zh_{LARGE}"] = ("zh", large, zh_test[: args.questions])
    banks["us_dev"] = ("en", load_questions("us", "dev", data), load_questions("us", "test", data)[: args.questions])
    build: dict[str, list[float]] = {name: [] for name in banks}
    per_question: dict[str, list[float]] = {name: [] for name in banks}
    for _ in range(args.rounds):
        for name, (lang, questions, asked) in banks.items():  # alternating the banks in each round
            started = time.perf_counter()
            bank = QuestionBank(questions, lang)
            build[name].append(time.perf_counter() - started)
            scorer = BankScorer(bank)  # the bank part's defaults
            started = time.perf_counter()
            scorer.score(asked, progress=False)
            per_question[name].append(1000 * (time.perf_counter() - started) / len(asked))
            print(name, round(build[name][-1], 2), "s build,", round(per_question[name][-1], 2), "ms/q", file=sys.stderr)
    record = {"dataset": "mainland,us", "split": "test", "method": "bank", "n": args.questions, "accuracy": None,
              "rounds": args.rounds, "k": scorer.k, "match": scorer.match,
              "banks": {name: {"questions": len(banks[name][1]), "build_seconds": spread(build[name], 2),
                               "ms_per_question": spread(per_question[name], 2)} for name in banks},
              "targets": {"build_seconds_30000": 30, "ms_per_question": 5}}
    path = write_record("bench-bank.json", record, command_line("scripts/benchmarks/bench_bank.py", argv))
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
