"""Which evidence the LLM part of an ensemble reads, chosen on a dev sample only (issue 40).

The exam's default ensemble parts are scored once on the first ``--limit`` dev questions (file
order); each LLM variant (closed book, the question's paragraphs, each option's paragraphs) joins
them as a part read from its compact predictions (``scripts/studies/llm_part.py``), matched by content.
Each set is judged by 5-fold cross-validation over those questions, as ``scripts/studies/ensemble_parts.py``
judges parts (weights fitted on four folds, the fifth's log-likelihood and accuracy measured, folds
drawn with a fixed seed, the ensemble's own L2 penalty; the LLM's letter prior divided out, as
``openqa tune`` does; each variant's figures without it are beside them). The variant with the best mean held-out
log-likelihood wins (ties: fewer model seconds). Each variant's model seconds per question come
from its runs' records. No test question is read.

With ``--cheapest-within-se`` (used to cut the chosen evidence's cost, e.g. fewer paragraphs or a
smaller ``--evidence-tokens``), the rule is the one-standard-error rule instead: the variant with the
fewest model seconds whose held-out log-likelihood is below the best's by at most one standard error
of their per-question difference. Every row reports that difference and its standard error.

    python scripts/studies/llm_evidence_choice.py --dataset mainland --limit 100 \\
        --variant none=eval/results/llm-parts/NAME-mainland-dev.jsonl --variant question=... --variant options=...
    -> eval/results/studies/llm-evidence-choice-mainland-dev.json
    python scripts/studies/llm_evidence_choice.py --cheapest-within-se --record llm-evidence-cost \\
        --variant k3_t1024=... --variant k1_t1024=... --variant k3_t512=...
    -> eval/results/studies/llm-evidence-cost-mainland-dev.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import command_line, data_dir, write_record
from openqa import CrossValidation, ScoredQuestions, load_questions, score_parts


def paragraphs_per_question(part: Path) -> float | None:
    """The paragraphs a prompt showed on average in the run behind a compact part (its ``.json``)."""
    return json.loads(part.with_suffix(".json").read_text()).get("evidence_paragraphs_per_question")


def seconds_per_question(part: Path) -> float | None:
    """The model seconds a question cost in the runs behind a compact part (its ``.json``): seconds per
    model call (one call a question), so replies another run left in the shared cache do not make a
    variant look cheaper."""
    meta = json.loads(part.with_suffix(".json").read_text())
    seconds = meta.get("model_seconds_all_slices") or meta.get("model_reported_seconds")
    return round(seconds / (meta.get("model_calls_all_slices") or meta["n"]), 2) if seconds else None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mainland", help="dataset whose dev split is sampled (default: mainland)")
    parser.add_argument("--limit", type=int, default=100, help="the first N dev questions (default: 100)")
    parser.add_argument("--variant", action="append", required=True, metavar="LABEL=PART.jsonl",
                        help="an LLM variant (a label of letters, digits and _) and its compact predictions (repeat)")
    parser.add_argument("--cheapest-within-se", action="store_true",
                        help="choose the cheapest variant within one standard error of the best likelihood")
    parser.add_argument("--record", default="llm-evidence-choice",
                        help="the record's name, before -DATASET-dev.json (default: llm-evidence-choice)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    variants = dict(v.split("=", 1) for v in args.variant)
    if bad := [label for label in variants if not label.isidentifier()]:
        parser.error(f"variant label {bad[0]!r}: use letters, digits and _ (the docs name a figure by it)")
    data = data_dir()
    folds = CrossValidation()  # the ensemble's own folds, seed and L2 penalty
    questions = load_questions(args.dataset, "dev", data)[: args.limit]
    scored = score_parts(questions, args.dataset, data_dir=data, index_dir=args.index_dir)  # the exam's default parts
    base = list(scored)
    print(f"scored {', '.join(base)}", file=sys.stderr)

    def judged(extra: dict[str, ScoredQuestions], prior: bool = True) -> tuple[dict[str, float], np.ndarray]:
        held = folds.held_out({**scored, **extra}, letter_priors=prior)  # priors as openqa tune fits them (on all the sample)
        return held.summary(), held.log_likelihood

    summary, _ = judged({})
    no_llm = {"parts": list(base), **summary, "model_seconds_per_question": 0.0}
    rows: dict[str, dict[str, Any]] = {}  # keyed by label: the docs name a figure by its key
    logliks = {}
    for label, file in variants.items():
        llm = score_parts(questions, args.dataset, ["llm"], predictions={"llm": file}, data_dir=data,
                          index_dir=args.index_dir)  # scored once, judged with and without its prior
        summary, logliks[label] = judged(llm)
        rows[label] = {"parts": [*base, "llm"], "file": Path(file).name, "llm_alone_accuracy": llm["llm"].accuracy,
                       **summary, "model_seconds_per_question": seconds_per_question(Path(file)),
                       "paragraphs_per_question": paragraphs_per_question(Path(file)),
                       "letter_prior": llm["llm"].letter_prior,
                       "without_letter_prior": judged(llm, prior=False)[0]}
        print(label, rows[label], file=sys.stderr)

    def cost(label: str) -> float:
        return float(rows[label]["model_seconds_per_question"] or 0.0)

    best = max(rows, key=lambda label: (rows[label]["log_likelihood"], -cost(label)))
    for label, row in rows.items():  # paired: the same questions, the same folds
        gap = logliks[label] - logliks[best]
        row["vs_best"] = {"mean": round(float(gap.mean()), 4),
                          "se": round(float(gap.std(ddof=1) / np.sqrt(len(gap))), 4) if len(gap) > 1 else None}
    rule = "best mean held-out log-likelihood; ties: fewer model seconds"
    chosen = best
    if args.cheapest_within_se:
        rule = ("one-standard-error rule: the fewest model seconds among the variants whose mean held-out "
                "log-likelihood is below the best's by at most one standard error of the per-question difference")
        near = [label for label, r in rows.items() if r["vs_best"]["mean"] >= -(r["vs_best"]["se"] or 0.0)]
        chosen = min(near, key=lambda label: (cost(label), -rows[label]["log_likelihood"]))
    record = {"dataset": args.dataset, "split": "dev", "method": "llm-evidence-choice", "n": len(questions),
              "limit": args.limit, "accuracy": None,  # a choice of settings: see each variant's held-out accuracy
              "folds": folds.folds, "seed": folds.seed, "l2": folds.l2, "rule": rule,
              "best_likelihood": best, "chosen": chosen, "no_llm": no_llm, "variants": rows}
    path = write_record(f"{args.record}-{args.dataset}-dev.json", record,
                        command_line("scripts/studies/llm_evidence_choice.py", argv, ("--index-dir",)))
    print(f"wrote {path}: evidence {record['chosen']}")


if __name__ == "__main__":
    main(sys.argv[1:])
