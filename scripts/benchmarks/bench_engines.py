"""Throughput of the custom BM25 engine against bm25s (numba backend) and Lucene (Pyserini).

All 5,092 US test option queries (full question + option, 1,273 questions x 4 options), top-10.
The custom engine and bm25s search the same term ids: bm25s indexes the paragraphs as the custom
engine's vocabulary rows, and both get the rows the custom engine's tokenizer gives each query
(the custom engine scores a question's four options in one pass, its own design; bm25s one query
at a time). Measured, in turn within each round so that both see the same load:

- custom, 1 thread and 2 threads: term rows in, top-10 arrays out;
- custom from text, 1 thread: ``search`` as ``openqa eval`` calls it (tokenizing, Hit objects);
- bm25s-numba, 1 thread: term ids in, top-10 arrays out (its numba code compiled beforehand);
- Lucene: one text query at a time, as ``openqa eval`` calls it.

Writes eval/results/benchmarks/bench-engines.json: per engine the median, min and max queries per second over
the rounds, the ratio custom / bm25s-numba against the 2x target, and the accuracy of the custom
engine's predictions from its last round (sum of the top-10 scores, paper query parameters).

    python scripts/benchmarks/bench_engines.py [--rounds 5] [--note "..."]   # needs the en custom and lucene indexes
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import bm25s
import numpy as np

from benchlib import alternate, data_dir, write_record
from openqa import ScoredQuestions, Searcher, load_questions, option_queries

K = 10
TARGET = 2.0  # custom (1 thread) at least this many times bm25s-numba's queries per second


def bm25s_index(custom: Any) -> tuple[bm25s.BM25, int]:
    """bm25s (numba backend) over the custom index's paragraphs, as the custom engine's term rows;
    also the id of bm25s' empty token, the query of a question with no known term."""
    tok = custom.tokenizer
    vocab = custom.vocab
    docs = [[vocab[t] for t in tok.tokenize(custom.paragraphs[i].text)] for i in range(custom.weights.shape[1])]
    retriever = bm25s.BM25(backend="numba")
    retriever.index(bm25s.tokenization.Tokenized(ids=docs, vocab=dict(vocab)), show_progress=False)
    return retriever, retriever.vocab_dict[""]


def spread(seconds: list[float], n: int) -> dict[str, float]:
    """Median, min and max queries per second over the rounds."""
    qps = [n / s for s in seconds]
    return {"median": round(statistics.median(qps), 1), "min": round(min(qps), 1), "max": round(max(qps), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every engine in turn (at least 5)")
    parser.add_argument("--note", default="", help="a remark for the record (e.g. other jobs on the machine)")
    args = parser.parse_args()
    rounds = max(5, args.rounds)
    data = data_dir()
    index_dir = Path(os.environ.get("OPENQA_INDEXES", "indexes"))
    questions = load_questions("us", "test", data)
    groups = [option_queries(q, "full", "en") for q in questions]
    flat = [text for g in groups for text in g]

    custom = Searcher.open("en", "custom", index_dir=index_dir, data_dir=data).engine  # the engines themselves
    lucene = Searcher.open("en", "lucene", index_dir=index_dir, data_dir=data).engine
    terms = custom.encode(flat)  # the custom engine's term rows of every query
    retriever, empty = bm25s_index(custom)
    rows = [terms.rows[a:b].tolist() or [empty] for a, b in zip(terms.starts[:-1], terms.starts[1:])]

    def custom_rank(threads: int) -> Callable[[], object]:
        def run() -> object:
            custom.threads = threads
            return custom.rank(terms, K)  # avgQL: each query's own length (no tuned value given)
        return run

    def custom_text() -> None:
        custom.threads = 1
        custom.search(flat, K)

    engines: dict[str, Callable[[], object]] = {
        "custom_1_thread": custom_rank(1),
        "custom_2_threads": custom_rank(2),
        "custom_from_text_1_thread": custom_text,
        "bm25s_numba_1_thread": lambda: retriever.retrieve(rows, k=K, n_threads=1, show_progress=False),
        "lucene": lambda: [lucene.search([q], K) for q in flat],
    }
    seconds, last, load = alternate(engines, rounds)
    ranking = last["custom_1_thread"]

    hits = iter(ranking.hits())
    predictions = ScoredQuestions.from_hits(questions, [[next(hits) for _ in g] for g in groups], K, "sum")
    qps = {name: spread(s, len(flat)) for name, s in seconds.items()}
    ratio = qps["custom_1_thread"]["median"] / qps["bm25s_numba_1_thread"]["median"]
    record = {
        "dataset": "us",
        "split": "test",
        "method": "engine throughput: question + option queries (query mode full), top-10; "
        "accuracy = custom engine's predictions (sum of top-10, paper query parameters)",
        "n": len(flat),
        "accuracy": predictions.accuracy,
        "rounds": rounds,
        "queries_per_second": qps,
        "ratios": {
            "custom_over_bm25s_numba": round(ratio, 2),
            "custom_2_threads_over_bm25s_numba": round(
                qps["custom_2_threads"]["median"] / qps["bm25s_numba_1_thread"]["median"], 2),
            "custom_2_threads_over_1_thread": round(
                qps["custom_2_threads"]["median"] / qps["custom_1_thread"]["median"], 2),
            "custom_over_lucene": round(qps["custom_1_thread"]["median"] / qps["lucene"]["median"], 2),
        },
        "target": f"custom (1 thread) >= {TARGET}x bm25s-numba (1 thread), same term ids",
        "met": ratio >= TARGET,
        "notes": " ".join(filter(None, [
            f"{os.cpu_count()} cores; {load}.",
            args.note])),
        "data": str(data),
    }
    out = write_record("bench-engines.json", record,
                       "python scripts/benchmarks/bench_engines.py" + (f" --rounds {args.rounds}" if args.rounds != 5 else ""))
    print(json.dumps(qps), json.dumps(record["ratios"]), "accuracy", record["accuracy"], "->", out)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
