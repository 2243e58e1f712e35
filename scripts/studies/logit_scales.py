"""Which logit scale turns IR-Custom's evidence scores into probabilities best, judged on dev only.

IR-Custom scores are large sums (1925.16 against 1893.33) whose size depends on the question. Three
ways of making logits of one question's option scores are compared, each with its own temperature
fitted on the exam's dev split by maximum likelihood, then judged on the same dev questions by
log-likelihood (what the temperature maximizes), the area under the risk-coverage curve and the
accuracy of the 20% most confident questions:

- ``standardized`` (what openqa uses: ``ScoredQuestions.logits``): within-question z-scores;
- ``centered``: scores minus the question's mean, over one dev-wide standard deviation (keeps how
  far apart the options are in score points);
- ``relative``: scores minus the question's mean, over that mean (differences as a share of the
  question's score level).

An option without evidence lies one spread below the worst with some, as in ``standardized``. No
test question is read.

    python scripts/studies/logit_scales.py          # -> eval/results/studies/logit-scales-dev.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import command_line, data_dir, write_record
from openqa import ScoredQuestions, load_questions, score_parts


def filled(scores: np.ndarray) -> np.ndarray:
    """Scores with a non-finite one (no evidence) one standard deviation below the worst finite one."""
    finite = np.isfinite(scores)
    if not finite.any():
        return np.zeros_like(scores)
    low, spread = scores[finite].min(), scores[finite].std()
    return np.where(finite, scores, low - (spread if spread > 0 else 1.0))


def candidates(scored: ScoredQuestions, spread: float) -> dict[str, list[np.ndarray]]:
    """Each compared scale's logits of ``scored`` (``spread``: the dev-wide standard deviation of the finite scores)."""
    raw = [filled(np.array(list(r.scores.values()), float)) for r in scored.results]
    return {
        "standardized": scored.logits(),
        "centered": [(s - s.mean()) / spread for s in raw],
        "relative": [(s - s.mean()) / max(abs(s.mean()), 1e-9) for s in raw],
    }


def judge(scored: ScoredQuestions, logits: list[np.ndarray], dataset: str) -> dict[str, float]:
    """Fit a temperature over ``logits`` of ``scored``'s questions and report how its probabilities rank them."""
    report = scored.with_logits(logits).calibration(dataset)
    return {"temperature": round(report["temperature"], 4), "log_likelihood": report["log_likelihood"], "aurc": report["aurc"],
            "accuracy_at_20": report["accuracy_at_coverage"]["20"]["accuracy"], "ece": report["ece"]}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="us,mainland,tw-en", help="datasets whose dev split is scored (default: us,mainland,tw-en)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    data = data_dir()
    record = {"dataset": args.datasets, "split": "dev", "method": "ir-custom", "choices": {},
              "rule": "best dev log-likelihood (what the temperature maximizes)"}
    for dataset in args.datasets.split(","):
        start = time.perf_counter()
        scored = score_parts(load_questions(dataset, "dev", data), dataset, ["ir-custom"], data_dir=data,
                             index_dir=args.index_dir)["ir-custom"]
        scored = ScoredQuestions([r for r in scored.results if r.question.answer_idx in r.scores], scored.scale)
        finite = np.concatenate([[v for v in r.scores.values() if np.isfinite(v)] for r in scored.results])
        rows = {name: judge(scored, logits, dataset) for name, logits in candidates(scored, float(finite.std())).items()}
        best = max(rows, key=lambda name: rows[name]["log_likelihood"])
        record["choices"][dataset] = {"n": len(scored.results), "best": best, "scales": rows, "seconds": round(time.perf_counter() - start, 1)}
        print(f"{dataset}: {rows} -> {best}", file=sys.stderr)
    record["n"] = sum(c["n"] for c in record["choices"].values())
    record["accuracy"] = None  # a choice of scale, not an evaluation: each row's accuracy_at_20 is on dev
    path = write_record("logit-scales-dev.json", record, command_line("scripts/studies/logit_scales.py", argv, ("--index-dir",)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
