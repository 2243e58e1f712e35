"""Accuracy with a 95% confidence interval, how often the best score is tied, per-question rows,
and the medical filter's agreement with MetaMap."""

from __future__ import annotations

import math
from typing import Any, Sequence

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.scorers.base import OptionScores
from openqa.text.medical_filter import filter_question, is_stopword, words


def wilson_interval(correct: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of an accuracy, in percent."""
    if n == 0:
        return (0.0, 0.0)
    from scipy.stats import binomtest  # scipy.stats takes a second to import: only when a result is summarised

    ci = binomtest(correct, n).proportion_ci(confidence_level=0.95, method="wilson")
    return (round(100 * ci.low, 2), round(100 * ci.high, 2))


def summarise(results: Sequence[OptionScores]) -> dict[str, Any]:
    """Accuracy, its interval, how often the best score is tied (with the random-tie expectation), and
    how many questions had no term in the index (``unmatched``: their prediction is a tie-break), and
    how many got no answer (``parse_failures``: an LLM reply without a readable letter; counted wrong)."""
    n = len(results)
    correct = sum(r.prediction() == r.question.answer_idx for r in results)
    ties = [r.tied_best() for r in results]
    expected = sum(r.question.answer_idx in t and 1 / len(t) for r, t in zip(results, ties))
    return {
        "n": n,
        "correct": correct,
        "accuracy": round(100 * correct / n, 2) if n else 0.0,
        "ci95": list(wilson_interval(correct, n)),
        "unmatched": sum(not r.matched for r in results),
        "parse_failures": sum(r.abstained for r in results),
        "ties": {
            "questions_with_tied_best": sum(len(t) > 1 for t in ties),
            "tie_rate": round(100 * sum(len(t) > 1 for t in ties) / n, 2) if n else 0.0,
            "rule": "among tied options, the one whose text hashes lowest with the question id",
            "expected_accuracy_random_ties": round(100 * expected / n, 2) if n else 0.0,
        },
    }


def prediction_rows(results: Sequence[OptionScores]) -> list[dict[str, Any]]:
    """Per-question predictions for the JSONL file."""
    return [
        {
            "qid": r.question.qid,
            "prediction": r.prediction(),
            "answer": r.question.answer_idx,
            "correct": r.prediction() == r.question.answer_idx,
            "tied": r.tied_best() if len(r.tied_best()) > 1 else [],
            "matched": r.matched,
            "scores": {k: round(v, 4) if math.isfinite(v) else None for k, v in r.scores.items()},
            **({"abstained": True} if r.abstained else {}),
            **r.details,
        }
        for r in results
    ]


def filter_agreement(questions: Sequence[Question]) -> dict[str, Any]:
    """Token precision/recall of ``filter_question`` against MetaMap's phrases (stop words aside).

    A token is a lower-cased alphanumeric word of the question that is not a stop word; MetaMap
    keeps it if it occurs in one of the question's ``metamap_phrases``.
    """
    tp = fp = fn = 0
    with_phrases = [q for q in questions if q.metamap_phrases is not None]
    if not with_phrases:
        raise OpenQAError("these questions have no metamap_phrases to compare with")
    for q in with_phrases:
        asked = {w for w in words(q.question) if not is_stopword(w)}
        metamap = {w for w in words(" ".join(q.metamap_phrases)) if w in asked}
        kept = set(words(filter_question(q.question)))
        tp += len(kept & metamap)
        fp += len(kept - metamap)
        fn += len(metamap - kept)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "n": len(with_phrases),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0,
        "tokens": {"kept_and_metamap": tp, "kept_not_metamap": fp, "metamap_not_kept": fn},
    }
