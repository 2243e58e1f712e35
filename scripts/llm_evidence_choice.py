"""Which evidence the LLM part of an ensemble reads, chosen on a dev sample only (issue 40).

The exam's default ensemble parts are scored once on the first ``--limit`` dev questions (file
order); each LLM variant (closed book, the question's paragraphs, each option's paragraphs) joins
them as a part read from its compact predictions (``scripts/llm_part.py``), matched by content.
Each set is judged by 5-fold cross-validation over those questions, as ``scripts/ensemble_parts.py``
judges parts (weights fitted on four folds, the fifth's log-likelihood and accuracy measured, folds
drawn with a fixed seed, the ensemble's own L2 penalty). The variant with the best mean held-out
log-likelihood wins (ties: fewer model seconds). Each variant's model seconds per question come
from its runs' records. No test question is read.

    python scripts/llm_evidence_choice.py --dataset mainland --limit 100 \\
        --variant none=eval/results/llm-parts/NAME-mainland-dev.jsonl --variant question=... --variant options=...
    -> eval/results/llm-evidence-choice-mainland-dev.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ensemble_parts import FOLDS, SEED, cross_validate

from benchlib import command_line, data_dir, write_record
from openqa.config import Settings
from openqa.data import load_questions
from openqa.evaluate.metrics import summarise
from openqa.methods import DEFAULT_PARTS, ENSEMBLE_L2, Part, Request, ensemble_features, open_method
from openqa.scorers.ensemble import EnsembleScorer
from openqa.scorers.precomputed import PrecomputedScorer
from openqa.workspace import Context, Exam


def seconds_per_question(part: Path) -> float | None:
    """The model seconds a question cost in the runs behind a compact part (its ``.json``)."""
    meta = json.loads(part.with_suffix(".json").read_text())
    seconds = meta.get("model_seconds_all_slices") or meta.get("model_reported_seconds")
    return round(seconds / meta["n"], 2) if seconds else None


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mainland", help="dataset whose dev split is sampled (default: mainland)")
    parser.add_argument("--limit", type=int, default=100, help="the first N dev questions (default: 100)")
    parser.add_argument("--variant", action="append", required=True, metavar="EVIDENCE=PART.jsonl",
                        help="an LLM variant and its compact predictions (repeat)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    variants = dict(v.split("=", 1) for v in args.variant)
    ctx = Context(Settings.resolve(data_dir=data_dir(), index_dir=args.index_dir)).sharing()
    target = Exam.resolve(args.dataset)
    questions = load_questions(args.dataset, "dev", ctx.settings.require_data_dir())[: args.limit]
    base = DEFAULT_PARTS[target.lang]
    scorers, scored = {}, {}
    for spec in base:
        part = Part.parse(spec)
        scorers[spec] = open_method(ctx, part.method, target, Request(part.overrides)).scorer
        scored[spec] = scorers[spec].score(questions, progress=False)
        print(f"scored {spec}", file=sys.stderr)

    def judged(extra: dict[str, PrecomputedScorer]) -> dict[str, float]:
        parts = {**scorers, **extra}
        results = {**scored, **{label: s.score(questions, progress=False) for label, s in extra.items()}}
        features, answers = ensemble_features(EnsembleScorer(parts, [1.0] * len(parts)), results)
        return cross_validate(features, answers, ENSEMBLE_L2)

    rows = [{"evidence": None, "parts": list(base), **judged({}), "model_seconds_per_question": 0.0}]
    for evidence, file in variants.items():
        llm = PrecomputedScorer(Path(file), "llm")
        alone = summarise(llm.score(questions, progress=False))["accuracy"]
        rows.append({"evidence": evidence, "parts": [*base, "llm"], "file": Path(file).name, "llm_alone_accuracy": alone,
                     **judged({"llm": llm}), "model_seconds_per_question": seconds_per_question(Path(file))})
        print(rows[-1], file=sys.stderr)
    with_llm = [r for r in rows if r["evidence"] is not None]
    best = max(with_llm, key=lambda r: (r["log_likelihood"], -(r["model_seconds_per_question"] or 0.0)))
    record = {"dataset": args.dataset, "split": "dev", "method": "llm-evidence-choice", "n": len(questions),
              "limit": args.limit, "accuracy": None,  # a choice of settings: see each row's held-out accuracy
              "folds": FOLDS, "seed": SEED, "l2": ENSEMBLE_L2, "rule": "best mean held-out log-likelihood; ties: fewer model seconds",
              "chosen": best["evidence"], "rows": rows}
    path = write_record(f"llm-evidence-choice-{args.dataset}-dev.json", record,
                        command_line("scripts/llm_evidence_choice.py", argv, ("--index-dir",)))
    print(f"wrote {path}: evidence {best['evidence']}")


if __name__ == "__main__":
    main(sys.argv[1:])
