"""What a larger bank of solved questions buys: the bank's reach against its size, for a user who
holds more solved questions than this copy of MedQA (the full release's train splits: US 10,178,
MCMLE 27,400, Taiwan 11,298).

Random subsets of an exam's dev split (each size with several seeds; ``all`` is the whole split,
one draw) are the bank, and the exam's whole test split is asked. For each bank: how many test
questions have a nearest solved question (k=1, normalized matching: the bank method's defaults)
whose answer is one of their options, at each similarity threshold, and how often that vote is
right; and the bank part's gain: the accuracy of the exam's fitted ``--ensemble bank`` (weights
fitted on dev with the whole dev bank, used as they are) with this bank, against the same weights
with an empty bank (the bank part silent). A question's copy in the bank (the same text, its answer
among the options) is never its evidence, as in every run. No setting is chosen here: the figures
only describe how the reach grows, so a user can judge what their own bank would add.

    python scripts/studies/bank_reach.py --dataset mainland [--sizes 250,500,1000,2000,all] [--seeds 0,1,2]
    -> eval/results/studies/bank-reach-mainland.json (+ .png)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import command_line, data_dir, record_path, write_record
from openqa import BankScorer, QuestionBank, ScoredQuestions, dataset_spec, load_questions, score_parts

#: The similarity thresholds a bank run's record discloses (its ``bank.nearest_similarity_at_least``).
THRESHOLDS = (0.3, 0.5, 0.7, 0.9)

#: The fitted ensemble whose weights weigh the bank part (shipped with openqa).
FIT = Path(__file__).resolve().parents[2] / "openqa" / "tuned" / "ensemble-bank-{dataset}.json"


def reach(results: list[Any]) -> dict[str, dict[str, Any]]:
    """At each disclosed similarity: the share of questions whose nearest solved question is that
    close and voted for one of their options, and how often that vote was right."""
    rows = {}
    for threshold in THRESHOLDS:
        voted = [r for r in results if max(r.scores.values()) > 0
                 and max(n["similarity"] for n in r.details.get("solved_questions", [])) >= threshold]
        right = sum(r.prediction() == r.question.answer_idx for r in voted)
        rows[f"{threshold:.1f}"] = {"questions": len(voted), "share": round(100 * len(voted) / len(results), 2),
                                    "right": round(100 * right / len(voted), 2) if voted else None}
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mainland", help="the exam's dataset (default: mainland)")
    parser.add_argument("--sizes", default="250,500,1000,2000,all", help="bank sizes, drawn from dev ('all': the whole split)")
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the draws (default: 0,1,2)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    data = data_dir()
    spec = dataset_spec(args.dataset)
    dev, questions = load_questions(args.dataset, "dev", data), load_questions(args.dataset, "test", data)
    fit = json.loads(Path(str(FIT).format(dataset=args.dataset)).read_text(encoding="utf-8"))
    weights = dict(zip(fit["chosen"]["parts"], fit["chosen"]["weights"]))
    if "bank" not in weights or fit["chosen"].get("letter_priors"):
        raise SystemExit(f"bank_reach: the fitted ensemble of {args.dataset} has no bank part, or letter priors this script does not apply")
    others = score_parts(questions, args.dataset, [p for p in weights if p != "bank"], data_dir=data, index_dir=args.index_dir)
    first = next(iter(others.values()))
    logits_of = {label: scored.logits() for label, scored in others.items()}
    base = [sum(weights[label] * logits_of[label][i] for label in others) for i in range(len(questions))]
    silent = first.with_logits(base).accuracy
    sizes = [len(dev) if s == "all" else int(s) for s in args.sizes.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for size in sizes:
        for seed in (seeds if size < len(dev) else seeds[:1]):  # the whole split is one draw
            subset = random.Random(seed).sample(dev, size) if size < len(dev) else dev
            bank = QuestionBank(subset, spec.lang, [{"dataset": args.dataset, "split": "dev", "questions": len(subset)}])
            results = BankScorer(bank).score(questions, progress=False)
            logits = ScoredQuestions(results, BankScorer.scale).logits()
            accuracy = first.with_logits([b + weights["bank"] * z for b, z in zip(base, logits)]).accuracy
            rows.append({"size": size, "seed": seed if size < len(dev) else None, "reach": reach(results),
                         "bank_alone": round(ScoredQuestions(results, BankScorer.scale).accuracy, 2),
                         "ensemble": round(accuracy, 2), "gain": round(accuracy - silent, 2)})
            print(rows[-1], file=sys.stderr)
    record = {"dataset": args.dataset, "split": "test", "method": "bank-reach", "n": len(questions),
              "accuracy": rows[-1]["ensemble"],  # the ensemble with the whole dev bank (the last, largest draw)
              "bank_from": f"{args.dataset} dev ({len(dev)} questions), random subsets",
              "ensemble": f"--ensemble bank of {args.dataset} (weights fitted on dev with the whole dev bank, shipped with openqa)",
              "weights": weights, "ensemble_without_bank_part": round(silent, 2), "sizes": sizes, "seeds": seeds,
              "k": 1, "match": "normalized", "rows": rows,
              "means": {str(size): {key: round(float(np.mean([r[key] for r in rows if r["size"] == size])), 2)
                                    for key in ("bank_alone", "ensemble", "gain")}
                        | {"reach_0.3": round(float(np.mean([r["reach"]["0.3"]["share"] for r in rows if r["size"] == size])), 2)}
                        for size in sizes}}
    name = f"bank-reach-{args.dataset}.json"
    path = write_record(name, record, command_line("scripts/studies/bank_reach.py", argv, ("--index-dir",)))
    plot(record, record_path(name).with_suffix(".png"))
    print(f"wrote {path}")


def plot(record: dict[str, Any], path: Path) -> None:
    """The reach at similarity 0.3 and the gain against the bank's size (each seed a dot, means joined)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        print("no plot: matplotlib is not installed", file=sys.stderr)
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    sizes = record["sizes"]
    for axis, key, label in ((left, "reach_0.3", "test questions reached (%, similarity >= 0.3)"),
                             (right, "gain", "ensemble accuracy gain (points)")):
        axis.plot(sizes, [record["means"][str(s)][key] for s in sizes], marker="o")
        for row in record["rows"]:
            axis.scatter(row["size"], row["reach"]["0.3"]["share"] if key == "reach_0.3" else row["gain"], s=8, color="grey")
        axis.set_xlabel("solved questions in the bank")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    fig.suptitle(f"{record['dataset']} test: the bank's reach against its size")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1:])
