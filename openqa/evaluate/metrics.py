"""Accuracy with a 95% confidence interval, how often the best score is tied, per-question rows,
and the medical filter's agreement with MetaMap."""

from __future__ import annotations

import math
from typing import Any, Sequence, cast

from openqa.cancel import checkpoint
from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.scorers.base import OptionScores
from openqa.text.medical_filter import filter_question, is_stopword, words


def wilson_interval(correct: float, n: int) -> tuple[float, float]:
    """95% Wilson score interval of an accuracy, in percent (the closed form, so an expected count of
    right answers, which ties can make fractional, has one too)."""
    if n == 0:
        return (0.0, 0.0)
    z = 1.959963984540054  # the normal quantile of 0.975
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (round(100 * max(0.0, centre - half), 2), round(100 * min(1.0, centre + half), 2))


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
            "rule": "among tied options, the one whose text hashes lowest with the question's text (content only: not its id, file or line)",
            "expected_accuracy_random_ties": round(100 * expected / n, 2) if n else 0.0,
        },
    }


def prediction_rows(results: Sequence[OptionScores], probabilities: Sequence[dict[str, float]] | None = None,
                    scale: str | None = None) -> list[dict[str, Any]]:
    """Per-question predictions for the JSONL file (with each option's probability when given): each
    row names its question by id and by content (``digest``, what an ensemble part read from the
    file is matched by) and says what its scores are (``scale``, ``openqa.scorers.logits``: how
    they become logits)."""
    return [
        {
            "qid": r.question.qid,
            "digest": r.question.digest(),
            **({"scale": scale} if scale else {}),
            "prediction": r.prediction(),
            "answer": r.question.answer_idx,
            "correct": r.prediction() == r.question.answer_idx,
            "tied": r.tied_best() if len(r.tied_best()) > 1 else [],
            "matched": r.matched,
            "scores": {k: round(v, 4) if math.isfinite(v) else None for k, v in r.scores.items()},
            **({"probabilities": {k: round(v, 4) for k, v in p.items()},
                "confidence": round(p[cast(str, r.prediction())], 4) if r.prediction() is not None else None} if p is not None else {}),
            **({"abstained": True} if r.abstained else {}),
            **r.details,
        }
        for r, p in zip(results, probabilities if probabilities is not None else [None] * len(results))
    ]


#: Paired bootstrap resamples of the questions, and the seed that draws them.
BOOTSTRAP_ROUNDS = 2000
BOOTSTRAP_SEED = 0
#: The most question draws the bootstrap holds at once (its resamples are drawn in chunks of rows).
BOOTSTRAP_CHUNK = 1 << 20


def paired_bootstrap(first: Sequence[OptionScores], second: Sequence[OptionScores]) -> dict[str, Any]:
    """The accuracy of ``first`` minus that of ``second`` on the same questions, in the same order
    (points), with its 95% interval: ``paired_difference`` keyed by each question's digest, the way
    ``openqa compare`` keys the runs it reads, so that ``openqa eval`` and ``openqa compare`` give one
    interval for one pair."""
    keys = [r.question.digest() for r in first]
    if keys != [r.question.digest() for r in second]:
        raise OpenQAError("a paired difference needs both runs' results on the same questions, in the same order")
    return paired_difference(keys, [r.prediction() == r.question.answer_idx for r in first],
                             [r.prediction() == r.question.answer_idx for r in second])


def paired_difference(keys: Sequence[str], first: Sequence[bool], second: Sequence[bool]) -> dict[str, Any]:
    """The accuracy of ``first`` minus that of ``second`` (points) from their right (True) and wrong
    answers to the same questions, with a 95% percentile interval from ``BOOTSTRAP_ROUNDS`` resamples
    of the questions (seeded: the same every run). The questions are put in the order of their
    ``keys`` (question digests; a stable sort, so a key given twice keeps both) before they are
    drawn: the interval depends on the pair of runs alone, never on the order a file or a dataset
    lists the questions in. The single source of every paired interval openqa prints."""
    if not len(keys) == len(first) == len(second):
        raise OpenQAError(f"a paired difference needs one key and two answers a question, not {len(keys)} keys, "
                          f"{len(first)} and {len(second)} answers")
    import numpy as np

    order = sorted(range(len(keys)), key=keys.__getitem__)
    a, b = np.asarray(first, dtype=float)[order], np.asarray(second, dtype=float)[order]
    diff = a - b
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    rows = max(1, BOOTSTRAP_CHUNK // max(1, len(diff)))  # resamples drawn at once: memory bounded whatever the questions
    chunks = []
    for start in range(0, BOOTSTRAP_ROUNDS, rows):  # the same draws, in order, as one matrix
        checkpoint()  # a server's comparison stops here once it is no longer wanted
        chunks.append(100 * diff[rng.integers(0, len(diff), size=(min(rows, BOOTSTRAP_ROUNDS - start), len(diff)))].mean(axis=1))
    means = np.concatenate(chunks)
    return {
        "difference": round(100 * float(diff.mean()), 2),
        "ci95": [round(float(np.percentile(means, 2.5)), 2), round(float(np.percentile(means, 97.5)), 2)],
        "interval": f"paired bootstrap over questions, {BOOTSTRAP_ROUNDS} resamples (seed {BOOTSTRAP_SEED}), percentile",
        "only_first_right": int(((a == 1) & (b == 0)).sum()),
        "only_second_right": int(((a == 0) & (b == 1)).sum()),
    }


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
        assert q.metamap_phrases is not None  # with_phrases holds only questions that have them
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
