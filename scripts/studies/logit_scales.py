"""Which logit scale turns IR-Custom's evidence scores into probabilities best, judged on dev only.

IR-Custom scores are large sums (1925.16 against 1893.33) whose size depends on the question. Three
ways of making logits of one question's option scores are compared, each with its own temperature
fitted on the exam's dev split by maximum likelihood, then judged on the same dev questions by
log-likelihood (what the temperature maximizes), the area under the risk-coverage curve and the
accuracy of the 20% most confident questions:

- ``standardized`` (what openqa uses, ``openqa.scorers.logits``): within-question z-scores;
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
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import command_line, data_dir, write_record
from openqa import load_questions
from openqa.config import Settings
from openqa.evaluate.calibration import Calibration, confidence_report
from openqa.methods import open_method
from openqa.scorers.base import OptionScores
from openqa.scorers.logits import SCALES
from openqa.workspace import Context, Exam


def filled(scores: np.ndarray) -> np.ndarray:
    """Scores with a non-finite one (no evidence) one standard deviation below the worst finite one."""
    finite = np.isfinite(scores)
    if not finite.any():
        return np.zeros_like(scores)
    low, spread = scores[finite].min(), scores[finite].std()
    return np.where(finite, scores, low - (spread if spread > 0 else 1.0))


def candidates(spread: float) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Each compared scale (``spread``: the dev-wide standard deviation of the finite scores)."""
    return {
        "standardized": SCALES["standardized"],
        "centered": lambda s: (filled(s) - filled(s).mean()) / spread,
        "relative": lambda s: (filled(s) - filled(s).mean()) / max(abs(filled(s).mean()), 1e-9),
    }


def judge(results: list[OptionScores], scale: Callable[[np.ndarray], np.ndarray], dataset: str) -> dict[str, float]:
    """Fit a temperature over ``scale``'s logits of ``results`` and report how its probabilities rank them."""
    as_logits = [OptionScores(r.question, dict(zip(r.scores, map(float, scale(np.array(list(r.scores.values()), float))))))
                 for r in results]
    fitted = Calibration.fit(as_logits, "logits", dataset, {})
    report = confidence_report(as_logits, [fitted.probabilities(r) for r in as_logits])
    return {"temperature": round(fitted.temperature, 4), "log_likelihood": report["log_likelihood"], "aurc": report["aurc"],
            "accuracy_at_20": report["accuracy_at_coverage"]["20"]["accuracy"], "ece": report["ece"]}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="us,mainland,tw-en", help="datasets whose dev split is scored (default: us,mainland,tw-en)")
    parser.add_argument("--index-dir", default="indexes", help="index folder (default: ./indexes)")
    args = parser.parse_args(argv)
    ctx = Context(Settings.resolve(data_dir=data_dir(), index_dir=args.index_dir))
    record = {"dataset": args.datasets, "split": "dev", "method": "ir-custom", "choices": {},
              "rule": "best dev log-likelihood (what the temperature maximizes)"}
    for dataset in args.datasets.split(","):
        start = time.perf_counter()
        results = open_method(ctx, "ir-custom", Exam.resolve(dataset)).scorer.score(
            load_questions(dataset, "dev", ctx.settings.require_data_dir()), progress=False)
        results = [r for r in results if r.question.answer_idx in r.scores]
        finite = np.concatenate([[v for v in r.scores.values() if np.isfinite(v)] for r in results])
        rows = {name: judge(results, scale, dataset) for name, scale in candidates(float(finite.std())).items()}
        best = max(rows, key=lambda name: rows[name]["log_likelihood"])
        record["choices"][dataset] = {"n": len(results), "best": best, "scales": rows, "seconds": round(time.perf_counter() - start, 1)}
        print(f"{dataset}: {rows} -> {best}", file=sys.stderr)
    record["n"] = sum(c["n"] for c in record["choices"].values())
    record["accuracy"] = None  # a choice of scale, not an evaluation: each row's accuracy_at_20 is on dev
    path = write_record("logit-scales-dev.json", record, command_line("scripts/studies/logit_scales.py", argv, ("--index-dir",)))
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
