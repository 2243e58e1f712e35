"""Which parts an ensemble combines by default, chosen on dev only.

For each language's main dataset (us for English, mainland for Chinese), every candidate part is
scored once on the dev split; each candidate set of parts and L2 penalty is then judged by 5-fold
cross-validation over the dev questions (weights fitted on four folds, the fifth's log-likelihood
and accuracy measured, folds drawn with a fixed seed). The set and penalty with the best mean
held-out log-likelihood win (ties: fewer parts, then the smaller penalty). No test question is read.

    python scripts/studies/ensemble_parts.py            # -> eval/results/studies/ensemble-parts-dev.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import command_line, data_dir, write_record
from openqa import CrossValidation, load_questions, score_parts

#: Candidate parts, each scored once per dataset.
CANDIDATES = ("ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=3", "ir-custom:top_n=50", "pmi")
#: Candidate sets (subsets of ``CANDIDATES``).
SETS = (
    ("ir-custom",),
    ("ir-custom", "pmi"),
    ("ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=50"),
    ("ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=50", "pmi"),
    ("ir-custom", "ir-custom:top_n=1", "ir-custom:top_n=3", "ir-custom:top_n=50", "pmi"),
)
PENALTIES = (0.1, 1.0, 10.0)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="us,mainland", help="one dataset per language (default: us,mainland)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    data = data_dir()
    folds = CrossValidation()  # the ensemble's own folds and seed (openqa tune fits its temperature on the same)
    record = {"dataset": args.datasets, "split": "dev", "method": "ensemble-parts", "folds": folds.folds, "seed": folds.seed,
              "rule": "best mean held-out log-likelihood; ties: fewer parts, then the smaller L2", "choices": {}}
    for dataset in args.datasets.split(","):
        start = time.perf_counter()
        questions = load_questions(dataset, "dev", data)
        scored = score_parts(questions, dataset, CANDIDATES, data_dir=data, index_dir=args.index_dir)
        print(f"{dataset}: scored {', '.join(scored)}", file=sys.stderr)
        rows = []
        for parts in SETS:
            for l2 in PENALTIES:
                judged = CrossValidation(folds.folds, folds.seed, l2).held_out({p: scored[p] for p in parts})
                rows.append({"parts": list(parts), "l2": l2, **judged.summary()})
                print(f"{dataset}: {rows[-1]}", file=sys.stderr)
        best = max(rows, key=lambda r: (r["log_likelihood"], -len(r["parts"]), -r["l2"]))
        record["choices"][dataset] = {"n": len(questions), "best": best, "rows": rows,
                                      "seconds": round(time.perf_counter() - start, 1)}
    record["n"] = sum(c["n"] for c in record["choices"].values())
    record["accuracy"] = None  # a choice of settings, not an evaluation: see each row's held-out accuracy
    path = write_record("ensemble-parts-dev.json", record, command_line("scripts/studies/ensemble_parts.py", argv, ("--index-dir",)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
