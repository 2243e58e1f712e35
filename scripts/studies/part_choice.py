"""Whether an ensemble keeps a part read from a predictions file (a cross-fitted reader's out-of-fold
dev predictions, ``openqa train --cross-fit``), chosen on dev only (issue 59).

The exam's default ensemble parts (and, with ``--llm``, the LLM part from its compact dev
predictions; with ``--with bank``, the bank, as the named ensembles have them) are scored once on
the first ``--limit`` dev questions (file order), and so is the part the file holds; both sets are judged by 5-fold cross-validation over those questions as
``scripts/studies/ensemble_parts.py`` judges parts. The part is kept only if it raises the mean
held-out log-likelihood; the record gives the per-question gap with its standard error, and the
held-out accuracy of both sets. No test question is read.

    python scripts/studies/part_choice.py --dataset us --part maxout=eval/results/training/train-maxout-us-crossfit5.part.jsonl
    -> eval/results/studies/part-choice-maxout-us-dev.json (with --llm: part-choice-maxout-llm-us-dev.json;
       with --llm and --with bank: part-choice-maxout-llm-bank-us-dev.json)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np
from studies.bank_choice import dev_parts

from benchlib import command_line, data_dir, write_record
from openqa import CrossValidation, score_parts


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="us", help="dataset whose dev split is judged (default: us)")
    parser.add_argument("--part", required=True, metavar="LABEL=FILE", help="the part judged: its label and predictions file")
    parser.add_argument("--limit", type=int, help="the first N dev questions (default: all)")
    parser.add_argument("--llm", metavar="PART.jsonl", help="the LLM part's compact dev predictions, joined to both sets")
    parser.add_argument("--with", dest="also", action="append", default=[], metavar="PART",
                        help="another part scored by name and joined to both sets, as a named ensemble has it "
                             "(e.g. bank: the exam's solved questions, where a question never finds itself); repeatable")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    parser.add_argument("--results", type=Path, help="folder of the record (default: eval/results/studies)")
    args = parser.parse_args(argv)
    label, _, file = args.part.partition("=")
    if not label or not file:
        parser.error("--part takes LABEL=FILE, e.g. maxout=train-maxout-us-crossfit5.predictions.jsonl")
    data = data_dir()
    folds = CrossValidation()  # the ensemble's own folds, seed and L2 penalty
    questions, scored = dev_parts(args.dataset, args.limit, args.llm, args.index_dir)  # as bank_choice.py scores them
    if args.also:
        scored.update(score_parts(questions, args.dataset, args.also, data_dir=data, index_dir=args.index_dir))
    base = list(scored)
    judged = score_parts(questions, args.dataset, [label], predictions={label: file}, data_dir=data, index_dir=args.index_dir)
    without, with_part = folds.held_out(scored), folds.held_out({**scored, **judged})
    gap = with_part.log_likelihood - without.log_likelihood
    keep = with_part.summary()["log_likelihood"] > without.summary()["log_likelihood"]
    record = {"dataset": args.dataset, "split": "dev", "method": "part-choice", "n": len(questions), "limit": args.limit,
              "accuracy": None,  # a choice of parts: see each set's held-out accuracy
              "folds": folds.folds, "seed": folds.seed, "l2": folds.l2,
              "rule": "the part is kept only if it raises the mean held-out log-likelihood of the parts without it",
              "parts": base, "part": label, "part_file": Path(file).name, "llm_part": Path(args.llm).name if args.llm else None,
              "without_part": without.summary(), "with_part": with_part.summary(),
              "gap": {"mean": round(float(gap.mean()), 4), "se": round(float(gap.std(ddof=1) / np.sqrt(len(gap))), 4)},
              "keep_part": keep}
    name = f"part-choice-{'-'.join([label, *(['llm'] if args.llm else []), *args.also])}-{args.dataset}-dev.json"
    path = write_record(name, record, command_line("scripts/studies/part_choice.py", argv, ("--index-dir", "--results")), args.results)
    print(f"wrote {path}: keep {label}: {keep} (held-out log-likelihood gap {record['gap']['mean']} +- {record['gap']['se']})")


if __name__ == "__main__":
    main(sys.argv[1:])
