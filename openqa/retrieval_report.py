"""Retrieval quality without gold passages: does the evidence a retriever finds for the question
alone mention the right answer more often than the wrong ones?

For each retriever and k in ``KS``: the share of questions whose correct option's text (as index
terms: normalised, stemmed) occurs as a contiguous term sequence in one of the top-k paragraphs
of the question-only query, against the same share over the wrong options. The gap is what
matters: a retriever that surfaces answer-bearing text for the right option, not just any option.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from openqa.data import Question
from openqa.evaluate.results import result_stem, write_atomic
from openqa.progress import tqdm
from openqa.scorers.ir import IRScorer, question_query
from openqa.text.tokenize import make_tokenizer

KS = (1, 5, 10, 25)


def contains(haystack: list[str], needle: list[str]) -> bool:
    """Whether ``needle`` occurs as a contiguous run in ``haystack``."""
    n = len(needle)
    if n == 0:
        return False
    first = needle[0]
    return any(haystack[i : i + n] == needle for i, t in enumerate(haystack) if t == first)


def first_rank(paragraph_terms: list[list[str]], option_terms: list[str]) -> int | None:
    """1-based rank of the first paragraph containing the option's terms, or None."""
    return next((rank for rank, terms in enumerate(paragraph_terms, 1) if contains(terms, option_terms)), None)


def answer_support(retriever: IRScorer, questions: Sequence[Question], query_mode: str) -> dict[str, Any]:
    """Shares of correct and wrong options found in the top-k evidence of the question alone."""
    engine = retriever.engine
    lang = engine.manifest["lang"]
    tok = make_tokenizer({**engine.tokenizer.config(), "ngram": 1})  # n-grams would break the contiguous match
    cache: dict[int, list[str]] = {}
    correct = {k: 0 for k in KS}
    wrong = {k: 0 for k in KS}
    n_wrong = 0
    queries = [question_query(q, query_mode, lang) for q in questions]
    with tqdm(total=len(queries), desc=f"retrieving ({engine.name})", unit="query") as bar:
        found = retriever.search(queries, max(KS), bar.update)  # avgQL: the mean over all questions
    for q, hits in zip(questions, found):
        terms = [cache.setdefault(h.index, tok.tokenize(engine.paragraphs[h.index].text)) for h in hits]
        for letter, text in q.options.items():
            rank = first_rank(terms, tok.tokenize(tok.prepare_query(text)))
            is_correct = letter == q.answer_idx
            n_wrong += not is_correct
            for k in KS:
                if rank is not None and rank <= k:
                    (correct if is_correct else wrong)[k] += 1
    n = len(questions)
    return {
        "correct": {k: round(100 * correct[k] / n, 2) for k in KS},
        "wrong": {k: round(100 * wrong[k] / max(n_wrong, 1), 2) for k in KS},
        "gap": {k: round(100 * correct[k] / n - 100 * wrong[k] / max(n_wrong, 1), 2) for k in KS},
    }


def write_report(table: dict[str, dict[str, Any]], meta: dict[str, Any], out_dir: Path) -> Path:
    """Markdown, JSON and a PNG plot of share against k per retriever; returns the JSON path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / result_stem("retrieval", meta["dataset"], meta["split"], variant=meta.get("variant"), limit=meta.get("limit"))
    lines = [
        f"# Retrieval quality on {meta['dataset']} {meta['split']} ({meta['n']} questions)\n",
        "Share (%) of questions whose correct option occurs in the top-k paragraphs of the question-only "
        "query, against the share of wrong options; gap = correct - wrong.\n",
        "| retriever | " + " | ".join(f"correct@{k} | wrong@{k} | gap@{k}" for k in KS) + " |",
        "|---|" + "---|" * (3 * len(KS)),
    ]
    for name, row in table.items():
        cells = " | ".join(f"{row['correct'][k]:.1f} | {row['wrong'][k]:.1f} | {row['gap'][k]:+.1f}" for k in KS)
        lines.append(f"| {name} | {cells} |")
    lines.append(f"\nCommand: `{meta['command']}`  \nDate: {meta['date']}\n")
    write_atomic(stem.with_name(stem.name + ".md"), "\n".join(lines) + "\n")
    figure, axis = plt.subplots(figsize=(6, 4))
    for name, row in table.items():
        line = axis.plot(KS, [row["correct"][k] for k in KS], marker="o", label=f"{name} (correct)")[0]
        axis.plot(KS, [row["wrong"][k] for k in KS], linestyle="--", color=line.get_color(), label=f"{name} (wrong)")
    axis.set_xscale("log")
    axis.set_xticks(KS, [str(k) for k in KS])
    axis.set_xlabel("top-k paragraphs (question-only query)")
    axis.set_ylabel("options found in evidence (%)")
    axis.set_title(f"{meta['dataset']} {meta['split']}: answer support")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(stem.with_name(stem.name + ".png"), dpi=120)
    plt.close(figure)
    path = stem.with_name(stem.name + ".json")  # the summary last: its presence means the others are written
    write_atomic(path, json.dumps({**meta, "retrievers": table}, indent=2) + "\n")
    return path
