"""Batch accuracy with 95% confidence intervals, tie statistics, result files, and dev tuning."""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import sys
import time
from dataclasses import asdict, replace
from itertools import product
from pathlib import Path
from typing import Any, Sequence

from scipy.stats import binomtest

from openqa.config import TUNED_DIR
from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.retrieval.hybrid import Fusion
from openqa.scorers.hybrid import HybridScorer, fuse_options
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.ir import AGGREGATES, IRScorer, IRSettings, scores_from_hits
from openqa.text.medical_filter import filter_question

#: The dev grid of ``openqa tune`` for IR scorers.
TOP_N_GRID = (1, 2, 3, 5, 10, 20, 30, 50)


def wilson_interval(correct: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of an accuracy, in percent."""
    if n == 0:
        return (0.0, 0.0)
    ci = binomtest(correct, n).proportion_ci(confidence_level=0.95, method="wilson")
    return (round(100 * ci.low, 2), round(100 * ci.high, 2))


def summarise(results: Sequence[OptionScores]) -> dict[str, Any]:
    """Accuracy, its interval, and how often the best score is tied (with the random-tie expectation)."""
    n = len(results)
    correct = sum(r.prediction() == r.question.answer_idx for r in results)
    ties = [r.tied_best() for r in results]
    expected = sum(r.question.answer_idx in t and 1 / len(t) for r, t in zip(results, ties))
    return {
        "n": n,
        "correct": correct,
        "accuracy": round(100 * correct / n, 2) if n else 0.0,
        "ci95": list(wilson_interval(correct, n)),
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
            "scores": {k: round(v, 4) if math.isfinite(v) else None for k, v in r.scores.items()},
        }
        for r in results
    ]


def run_record(command: str | None = None) -> dict[str, Any]:
    """How a result was produced: the command, time, machine and peak memory."""
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "command": command or " ".join(["openqa", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "peak_memory_mb": round(peak_kb / 1024, 1),
    }


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that an interruption never leaves it half-written."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_results(summary: dict[str, Any], rows: list[dict[str, Any]], out_dir: Path) -> Path:
    """Write ``<stem>.json`` (summary), ``<stem>.predictions.jsonl`` and ``<stem>.md``; return the JSON path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{summary['dataset']}-{summary['split']}-{summary['method']}"
    if summary.get("variant"):
        stem += f"-{summary['variant']}"
    if summary.get("limit"):
        stem += f"-limit{summary['limit']}"
    write_atomic(out_dir / f"{stem}.predictions.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    lo, hi = summary["ci95"]
    report = (
        f"# {summary['method']} on {summary['dataset']} {summary['split']}\n\n"
        f"| n | correct | accuracy | 95% CI | tied best | seconds |\n|---|---|---|---|---|---|\n"
        f"| {summary['n']} | {summary['correct']} | {summary['accuracy']:.2f} | {lo:.2f}-{hi:.2f} "
        f"| {summary['ties']['tie_rate']:.2f}% | {summary['seconds']:.2f} |\n\n"
        f"Command: `{summary['command']}`  \nDate: {summary['date']}  \n"
        f"Settings: `{json.dumps(summary.get('settings', {}))}`  \nCorpus: {summary.get('corpus', '')}\n"
    )
    write_atomic(out_dir / f"{stem}.md", report)
    path = out_dir / f"{stem}.json"
    write_atomic(path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return path


def tuned_path(method: str, dataset: str) -> Path:
    """Where ``openqa tune`` records the settings it chose for a method and dataset."""
    return TUNED_DIR / f"{method}-{dataset}.json"


def load_tuned(method: str, dataset: str | None, query: str | None = None) -> tuple[IRSettings, str]:
    """Settings chosen on dev by ``openqa tune`` (and their source), else the defaults.

    With ``query`` fixed, the best dev row of the recorded grid for that query mode is used.
    """
    path = tuned_path(method, dataset) if dataset else None
    if path is None or not path.is_file():
        return IRSettings(**({"query": query} if query else {})), "defaults (not tuned)"
    try:
        record = json.loads(path.read_text())
        if query is None:
            return IRSettings(**record["chosen"]), str(path)
        rows = [r for r in record["grid"] if r["query"] == query]
        if not rows:
            return IRSettings(query=query), f"defaults (query {query!r} not in {path})"
        best = max(rows, key=lambda r: (r["accuracy"], -r["top_n"]))
        fields = {k: best[k] for k in asdict(IRSettings()) if k in best}
        return IRSettings(**fields), f"{path} (best dev row for query {query!r})"
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise OpenQAError(f"{path}: unreadable tuning record ({exc}); rerun `openqa tune`") from None


def tune_ir(
    scorer: IRScorer, questions: Sequence[Question], query_modes: Sequence[str]
) -> tuple[IRSettings, list[dict[str, Any]]]:
    """Grid-search top-N, aggregate and query mode on ``questions`` (dev); best accuracy wins.

    Ties between settings go to the smaller N, then the grid order, so the choice is stable.
    """
    table = []
    for mode in query_modes:
        scorer.settings = IRSettings(top_n=1, query=mode)
        hits = scorer.retrieve(questions, max(TOP_N_GRID))
        for top_n, how in product(TOP_N_GRID, AGGREGATES):
            summary = summarise(scores_from_hits(questions, hits, top_n, how))
            table.append({**asdict(IRSettings(top_n, how, mode)), **summary})
    best = max(table, key=lambda row: (row["accuracy"], -row["top_n"]))
    return IRSettings(best["top_n"], best["aggregate"], best["query"]), table


#: Fusions ``openqa tune`` tries for the hybrid method: RRF, and weighted sums (weight on IR-Custom).
FUSION_GRID = (("rrf", 0.5), *(("weighted", w) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)))


def tune_fusion(scorer: HybridScorer, questions: Sequence[Question]) -> tuple[IRSettings, list[dict[str, Any]]]:
    """Every fusion of ``FUSION_GRID`` over the parts' option scores (each part scored once)."""
    first, second = scorer.part_scores(questions)
    table = []
    for kind, weight in FUSION_GRID:
        fused = [fuse_options(a, b, Fusion(kind, weight)) for a, b in zip(first, second)]
        table.append({**asdict(replace(scorer.settings, fusion=kind, weight=weight)), **summarise(fused)})
    best = max(table, key=lambda row: row["accuracy"])
    return IRSettings(**{k: best[k] for k in asdict(IRSettings())}), table


def tune_query_mode(
    scorer: OptionScorer, questions: Sequence[Question], query_modes: Sequence[str]
) -> tuple[IRSettings, list[dict[str, Any]]]:
    """For scorers without top-N (PMI): pick the query mode with the best dev accuracy."""
    table = []
    for mode in query_modes:
        scorer.settings = IRSettings(query=mode)
        table.append({**asdict(scorer.settings), **summarise(scorer.score(questions))})
    best = max(table, key=lambda row: row["accuracy"])
    return IRSettings(query=best["query"]), table


def filter_agreement(questions: Sequence[Question]) -> dict[str, Any]:
    """Token precision/recall of ``filter_question`` against MetaMap's phrases (stop words aside).

    A token is a lower-cased alphanumeric word of the question that is not a stop word; MetaMap
    keeps it if it occurs in one of the question's ``metamap_phrases``.
    """
    from openqa.text.medical_filter import is_stopword, words

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
