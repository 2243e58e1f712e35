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

import numpy as np

from benchlib import command_line, data_dir, write_record
from openqa import load_questions
from openqa.config import Settings
from openqa.evaluate.calibration import CROSS_FIT_FOLDS, CROSS_FIT_SEED, cross_fitted_logits, softmax
from openqa.methods import Part, Request, ensemble_features, open_method
from openqa.scorers.ensemble import EnsembleScorer
from openqa.workspace import Context, Exam

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
FOLDS = CROSS_FIT_FOLDS
SEED = CROSS_FIT_SEED


def held_out(features: list[np.ndarray], answers: list[int], l2: float) -> tuple[np.ndarray, np.ndarray]:
    """Each question's held-out log-likelihood and its share right (a tie counts its expected share),
    over ``FOLDS`` seeded folds of the questions."""
    loglik, right = [], []
    for z, answer in zip(cross_fitted_logits(features, answers, l2, FOLDS, SEED), answers):
        p = softmax(z)
        loglik.append(float(np.log(max(p[answer], 1e-12))))
        best = np.flatnonzero(p >= p.max() - 1e-12)
        right.append(float(answer in best) / len(best))
    return np.array(loglik), np.array(right)


def cross_validate(features: list[np.ndarray], answers: list[int], l2: float) -> dict[str, float]:
    """Mean held-out log-likelihood and accuracy over ``FOLDS`` seeded folds of the questions."""
    loglik, right = held_out(features, answers, l2)
    return {"log_likelihood": round(float(np.mean(loglik)), 4), "accuracy": round(100 * float(np.mean(right)), 2)}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="us,mainland", help="one dataset per language (default: us,mainland)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    ctx = Context(Settings.resolve(data_dir=data_dir(), index_dir=args.index_dir)).sharing()
    record = {"dataset": args.datasets, "split": "dev", "method": "ensemble-parts", "folds": FOLDS, "seed": SEED,
              "rule": "best mean held-out log-likelihood; ties: fewer parts, then the smaller L2", "choices": {}}
    for dataset in args.datasets.split(","):
        start = time.perf_counter()
        target = Exam.resolve(dataset)
        questions = load_questions(dataset, "dev", ctx.settings.require_data_dir())
        scorers = {}
        scored = {}
        for spec in CANDIDATES:
            part = Part.parse(spec)
            opened = open_method(ctx, part.method, target, Request(part.overrides))
            scorers[spec] = opened.scorer
            scored[spec] = opened.scorer.score(questions, progress=False)
            print(f"{dataset}: scored {spec}", file=sys.stderr)
        rows = []
        for parts in SETS:
            scorer = EnsembleScorer({p: scorers[p] for p in parts}, [1.0] * len(parts))
            features, answers = ensemble_features(scorer, {p: scored[p] for p in parts})
            for l2 in PENALTIES:
                rows.append({"parts": list(parts), "l2": l2, **cross_validate(features, answers, l2)})
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
