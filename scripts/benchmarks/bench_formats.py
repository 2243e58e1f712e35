"""The same questions in every question format give the same figure: MedQA US test (4 options) as
``--dataset us`` and written by ``openqa.write_questions`` as MedQA JSON lines, a
MIRAGE benchmark file (one line), MedMCQA JSON lines and an MMLU CSV, each under two file names,
all scored by ``openqa eval --questions FILE`` (IR-Custom, the dev-tuned US settings, 11 books).
Writes eval/results/studies/formats-us-test-ir-custom.json: per file its accuracy, ties, and whether its
predictions equal those of ``--dataset us`` question by question.

    python scripts/benchmarks/bench_formats.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import command_line, data_dir, print_notes, write_record
from openqa import OpenQAError, Workspace, load_questions, run_eval, write_questions

#: Each format under two names (a file's name and line once picked the tie-breaks).
FILES = {"medqa": ("us_test.jsonl", "copy_of_us_test.jsonl"), "mirage": ("benchmark.json", "mirage_us.json"),
         "medmcqa": ("medmcqa_dev.json", "other.jsonl"), "mmlu": ("clinical_test.csv", "us.csv")}


def predictions(summary: dict) -> list[str | None]:
    path = Path(summary["files"]["summary"]).with_suffix(".predictions.jsonl")
    return [json.loads(line)["prediction"] for line in path.read_text().splitlines()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--method", default="ir-custom", help="option scorer (default: ir-custom)")
    p.add_argument("--index-dir", help="indexes (default: $OPENQA_INDEXES or ./indexes); ir-custom is built if missing")
    args = p.parse_args()
    data = data_dir()
    print_notes()
    with tempfile.TemporaryDirectory() as scratch:
        where = Workspace(data_dir=data, index_dir=args.index_dir, results_dir=Path(scratch) / "results")
        reference = run_eval(args.method, "us", split="test", workspace=where).to_dict()
        expected = predictions(reference)
        questions = load_questions("us", "test", data)
        rows = [{"format": "--dataset us", "file": "US/4_options/phrases_no_exclude_test.jsonl", "n": reference["n"],
                 "accuracy": reference["accuracy"], "tied": reference["ties"]["questions_with_tied_best"],
                 "predictions_equal_dataset": True}]
        for fmt, names in FILES.items():
            for name in names:
                path = write_questions(questions, Path(scratch) / name, fmt)
                summary = run_eval(args.method, questions=path, workspace=where, results_dir=Path(scratch) / f"results-{name}").to_dict()
                rows.append({"format": fmt, "file": name, "n": summary["n"], "accuracy": summary["accuracy"],
                             "tied": summary["ties"]["questions_with_tied_best"],
                             "predictions_equal_dataset": predictions(summary) == expected})
                print(f"{fmt:8} {name:24} n={summary['n']} {summary['accuracy']:.2f}% tied {rows[-1]['tied']} "
                      f"same predictions: {rows[-1]['predictions_equal_dataset']}", flush=True)
    record = {
        "dataset": "us", "split": "test", "method": args.method, "n": reference["n"],
        "accuracy": reference["accuracy"],
        "benchmark": "one question set in every question format and under two file names each: the same predictions",
        "identical": len({r["accuracy"] for r in rows}) == 1 and all(r["predictions_equal_dataset"] for r in rows),
        "tie_rule": reference["ties"]["rule"], "settings": reference["settings"], "corpus": reference["corpus"],
        "files": rows,
    }
    path = write_record(f"formats-us-test-{args.method}.json", record, command_line("scripts/benchmarks/bench_formats.py", sys.argv[1:]))
    print(f"identical: {record['identical']}; wrote {path}")


if __name__ == "__main__":
    try:
        main()
    except OpenQAError as exc:
        raise SystemExit(f"bench_formats: error: {exc}") from None
