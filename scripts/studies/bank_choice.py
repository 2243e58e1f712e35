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

from benchlib import command_line, data_dir, write_record
from openqa import BankScorer, CrossValidation, Question, ScoredQuestions, exam_bank, load_questions, score_parts

#: Neighbours tried.
KS = (1, 3, 5, 10)


def dev_parts(dataset: str, limit: int | None, llm: str | None, index_dir: str) -> tuple[list[Question], dict[str, ScoredQuestions]]:
    """The first ``limit`` dev questions of ``dataset`` (file order) and the exam's default ensemble
    parts scored on them; with ``llm``, the LLM part too, read from its compact dev predictions."""
    data = data_dir()
    questions = load_questions(dataset, "dev", data)[:limit]
    scored = score_parts(questions, dataset, data_dir=data, index_dir=index_dir)  # the exam's default parts
    if llm:
        scored.update(score_parts(questions, dataset, ["llm"], predictions={"llm": llm}, data_dir=data, index_dir=index_dir))
    return questions, scored


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mainland", help="dataset whose dev split is sampled (default: mainland)")
    parser.add_argument("--limit", type=int, default=1000, help="the first N dev questions (default: 1000)")
    parser.add_argument("--llm", metavar="PART.jsonl", help="the LLM part's compact dev predictions, joined to every set")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    data = data_dir()
    folds = CrossValidation()  # the ensemble's own folds, seed and L2 penalty
    questions, scored = dev_parts(args.dataset, args.limit, args.llm, args.index_dir)
    base = list(scored)
    print(f"scored {', '.join(base)}", file=sys.stderr)

    def judged(extra: dict[str, ScoredQuestions]) -> tuple[dict[str, float], np.ndarray]:
        held = folds.held_out({**scored, **extra})
        return held.summary(), held.log_likelihood

    without, without_ll = judged({})
    started = time.perf_counter()
    bank = exam_bank(args.dataset, data_dir=data)
    build_seconds = time.perf_counter() - started
    rows: dict[str, dict[str, Any]] = {}
    logliks = {}
    for k in KS:
        for match in BankScorer.matches:
            scorer = BankScorer(bank, k, match)
            started = time.perf_counter()
            results = scorer.score(questions, progress=False)
            ms = 1000 * (time.perf_counter() - started) / len(questions)
            label = f"k{k}_{match}"
            summary, logliks[label] = judged({"bank": ScoredQuestions(results, scorer.scale)})
            voted = sum(max(r.scores.values()) > 0 for r in results)
            rows[label] = {"k": k, "match": match, **summary, "questions_voted_on": voted,
                           "ms_per_question": round(ms, 2)}
            print(label, rows[label], file=sys.stderr)
    order = list(BankScorer.matches)
    best = max(rows, key=lambda label: (rows[label]["log_likelihood"], -rows[label]["k"], -order.index(rows[label]["match"])))
    for label, row in rows.items():
        gap = logliks[label] - without_ll
        row["vs_without_bank"] = {"mean": round(float(gap.mean()), 4), "se": round(float(gap.std(ddof=1) / np.sqrt(len(gap))), 4)}
    keep = rows[best]["log_likelihood"] > without["log_likelihood"]
    record = {"dataset": args.dataset, "split": "dev", "method": "bank-choice", "n": len(questions), "limit": args.limit,
              "accuracy": None,  # a choice of settings: see each variant's held-out accuracy
              "folds": folds.folds, "seed": folds.seed, "l2": folds.l2,
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
