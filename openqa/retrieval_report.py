"""Retrieval quality without gold passages: does the evidence a retriever finds for the question
alone mention the right answer more often than the wrong ones?

For each retriever and k in ``KS``: the share of questions whose correct option's text (as index
terms: normalised, stemmed) occurs as a contiguous term sequence in one of the top-k paragraphs
of the question-only query, against the same share over the wrong options. The gap is what
matters: a retriever that surfaces answer-bearing text for the right option, not just any option.

The same matching judges the paragraphs: every paragraph a compared retriever found in the top
``max(KS)`` for a question is relevant (1) when it mentions the correct option's text, else not (0),
and these judgments are written as a TREC qrels file, so that a run of ``openqa search --topics``
(over the topics file written beside it) can be scored with trec_eval or pytrec_eval.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

from openqa.data import Question
from openqa.evaluate.results import result_stem, write_all_or_none, write_atomic
from openqa.progress import tqdm
from openqa.scorers.ir import IRScorer, question_query
from openqa.text.tokenize import make_tokenizer

KS = (1, 5, 10, 25)

#: What a judgment of the qrels file means (the report's JSON says it too).
RELEVANCE = (f"the paragraphs any compared retriever found in the top {max(KS)} of a question's question-only query, "
             "judged 1 when they mention the correct option's text (a contiguous run of its index terms: normalised, "
             "stemmed), whatever else they mention, and 0 otherwise; paragraphs no retriever found are not judged")


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


def trec_id(qid: str) -> str:
    """A question id as one word of a TREC line (white space and unprintable characters become ``_``)."""
    return re.sub(r"\s", "_", "".join(c if c.isprintable() else "_" for c in qid)) or "_"


def answer_support(retriever: IRScorer, questions: Sequence[Question], query_mode: str,
                   judgments: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """Shares of correct and wrong options found in the top-k evidence of the question alone; with
    ``judgments``, each retrieved paragraph's relevance is added to it as ``{qid: {paragraph id: 0 or 1}}``
    (``RELEVANCE``; the question ids as ``trec_id`` writes them)."""
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
        if judgments is not None:
            answer = tok.tokenize(tok.prepare_query(q.options[q.answer_idx]))
            judged = judgments.setdefault(trec_id(q.qid), {})
            for hit, paragraph_terms in zip(hits, terms):
                pid = engine.paragraphs[hit.index].pid
                judged[pid] = max(judged.get(pid, 0), int(contains(paragraph_terms, answer)))
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


def qrels_lines(judgments: dict[str, dict[str, int]]) -> list[str]:
    """TREC qrels lines ``qid 0 docid relevance``: questions in their order, paragraphs by id."""
    return [f"{qid} 0 {pid} {relevance}" for qid, judged in judgments.items() for pid, relevance in sorted(judged.items())]


def topic_lines(questions: Sequence[Question], query_mode: str, lang: str) -> list[str]:
    """``qid<TAB>query`` lines of ``openqa search --topics``: each question's question-only query, on one line."""
    lines = []
    for q in questions:
        text = " ".join(question_query(q, query_mode, lang).split()) or " ".join(q.question.split())
        lines.append(f"{trec_id(q.qid)}\t{text}")
    return lines


def write_report(table: dict[str, dict[str, Any]], meta: dict[str, Any], out_dir: Path,
                 judgments: dict[str, dict[str, int]] | None = None, topics: list[str] | None = None) -> Path:
    """Markdown, JSON and a PNG plot of share against k per retriever, with ``judgments`` a TREC
    qrels file (``.qrels``) and with ``topics`` the questions' topics file (``.topics.tsv``); returns
    the JSON path."""
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
    files: dict[Path, str | bytes] = {}
    if judgments is not None:
        files[stem.with_name(stem.name + ".qrels")] = "".join(line + "\n" for line in qrels_lines(judgments))
        meta = {**meta, "qrels": stem.name + ".qrels", "relevance": RELEVANCE}
    if topics is not None:
        files[stem.with_name(stem.name + ".topics.tsv")] = "".join(line + "\n" for line in topics)
        meta = {**meta, "topics": stem.name + ".topics.tsv"}
    if files:
        write_all_or_none(files)
    path = stem.with_name(stem.name + ".json")  # the summary last: its presence means the others are written
    write_atomic(path, json.dumps({**meta, "retrievers": table}, indent=2) + "\n")
    return path
