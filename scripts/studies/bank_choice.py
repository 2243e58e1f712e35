"""How the bank part votes (how many neighbours, how an answer is matched to an option), and
whether an ensemble keeps it, chosen on dev only (issue 52).

The exam's default ensemble parts (and, with ``--llm``, the LLM part read from its compact dev
predictions) are scored once on the first ``--limit`` dev questions (file order); each bank variant
(``k`` neighbours x ``exact`` / ``normalized`` / ``fuzzy`` matching) is scored leave-one-out over the
exam's bank (its dev split, and train where the data folder has one: a question never finds its own
row) and joins them as a part. Each set is judged by 5-fold cross-validation over those questions
as ``scripts/studies/ensemble_parts.py`` judges parts; the variant with the best mean held-out
log-likelihood wins (ties: the smaller k, then the stricter matching), and the bank is kept only
if it beats the parts without it. Beside each variant: how many questions it votes on and how many
milliseconds a question costs. No test question is read.

    python scripts/studies/bank_choice.py --dataset mainland --limit 1000 [--llm eval/results/llm-parts/NAME-mainland-dev.jsonl]
    -> eval/results/studies/bank-choice-mainland-dev.json (with --llm: bank-choice-llm-mainland-dev.json)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np
from ensemble_parts import FOLDS, SEED, held_out

from benchlib import command_line, data_dir, write_record
from openqa import load_questions
from openqa.config import Settings
from openqa.methods import DEFAULT_PARTS, ENSEMBLE_L2, Part, Request, ensemble_features, open_method
from openqa.methods.bank import load_bank
from openqa.scorers.bank import MATCHES, BankScorer
from openqa.scorers.ensemble import EnsembleScorer, letter_priors
from openqa.scorers.precomputed import PrecomputedScorer
from openqa.workspace import Context, Exam

#: Neighbours tried.
KS = (1, 3, 5, 10)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mainland", help="dataset whose dev split is sampled (default: mainland)")
    parser.add_argument("--limit", type=int, default=1000, help="the first N dev questions (default: 1000)")
    parser.add_argument("--llm", metavar="PART.jsonl", help="the LLM part's compact dev predictions, joined to every set")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    ctx = Context(Settings.resolve(data_dir=data_dir(), index_dir=args.index_dir)).sharing()
    target = Exam.resolve(args.dataset)
    questions = load_questions(args.dataset, "dev", ctx.settings.require_data_dir())[: args.limit]
    base = list(DEFAULT_PARTS[target.lang])
    scorers: dict[str, Any] = {}
    scored: dict[str, Any] = {}
    for spec in base:
        part = Part.parse(spec)
        scorers[spec] = open_method(ctx, part.method, target, Request(part.overrides)).scorer
        scored[spec] = scorers[spec].score(questions, progress=False)
        print(f"scored {spec}", file=sys.stderr)
    if args.llm:
        scorers["llm"] = PrecomputedScorer(Path(args.llm), "llm")
        scored["llm"] = scorers["llm"].score(questions, progress=False)
        base.append("llm")

    def judged(extra: dict[str, tuple[Any, Any]]) -> tuple[dict[str, float], np.ndarray]:
        parts = {**scorers, **{label: s for label, (s, _) in extra.items()}}
        results = {**scored, **{label: r for label, (_, r) in extra.items()}}
        features, answers = ensemble_features(EnsembleScorer(parts, [1.0] * len(parts), letter_priors(parts, results)), results)
        loglik, right = held_out(features, answers, ENSEMBLE_L2)
        return {"log_likelihood": round(float(loglik.mean()), 4), "accuracy": round(100 * float(right.mean()), 2)}, loglik

    without, without_ll = judged({})
    started = time.perf_counter()
    bank = load_bank(ctx, target)
    build_seconds = time.perf_counter() - started
    rows: dict[str, dict[str, Any]] = {}
    logliks = {}
    for k in KS:
        for match in MATCHES:
            scorer = BankScorer(bank, k, match)
            started = time.perf_counter()
            results = scorer.score(questions, progress=False)
            ms = 1000 * (time.perf_counter() - started) / len(questions)
            label = f"k{k}_{match}"
            summary, logliks[label] = judged({"bank": (scorer, results)})
            voted = sum(max(r.scores.values()) > 0 for r in results)
            rows[label] = {"k": k, "match": match, **summary, "questions_voted_on": voted,
                           "ms_per_question": round(ms, 2)}
            print(label, rows[label], file=sys.stderr)
    order = list(MATCHES)
    best = max(rows, key=lambda label: (rows[label]["log_likelihood"], -rows[label]["k"], -order.index(rows[label]["match"])))
    for label, row in rows.items():
        gap = logliks[label] - without_ll
        row["vs_without_bank"] = {"mean": round(float(gap.mean()), 4), "se": round(float(gap.std(ddof=1) / np.sqrt(len(gap))), 4)}
    keep = rows[best]["log_likelihood"] > without["log_likelihood"]
    record = {"dataset": args.dataset, "split": "dev", "method": "bank-choice", "n": len(questions), "limit": args.limit,
              "accuracy": None,  # a choice of settings: see each variant's held-out accuracy
              "folds": FOLDS, "seed": SEED, "l2": ENSEMBLE_L2,
              "rule": "best mean held-out log-likelihood (ties: smaller k, then exact before normalized before fuzzy); "
                      "the bank is kept only if it beats the parts without it",
              "parts": base, "llm_part": Path(args.llm).name if args.llm else None,
              "bank": {**bank.describe(), "build_seconds": round(build_seconds, 2)},
              "without_bank": without, "chosen": best, "keep_bank": keep, "variants": rows}
    name = f"bank-choice{'-llm' if args.llm else ''}-{args.dataset}-dev.json"
    path = write_record(name, record, command_line("scripts/studies/bank_choice.py", argv, ("--index-dir",)))
    print(f"wrote {path}: {best}, keep the bank: {keep}")


if __name__ == "__main__":
    main(sys.argv[1:])
