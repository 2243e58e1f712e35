"""Throughput of the custom BM25, Lucene (Pyserini) and bm25s on the same US test option queries.

All 5,092 queries (full question + option, 1,273 questions x 4 options) go through each engine
in one process, one thread each, top-10; the custom engine gets a question's four options per
call as ``openqa eval`` does. bm25s indexes the same tokenized paragraphs. Writes
eval/results/bench-engines.json with queries per second and the ratios.

    python scripts/bench_engines.py      # needs the en custom and lucene indexes
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import bm25s
import numpy as np

from openqa.data import load_questions
from openqa.retrieval.registry import open_index
from openqa.scorers.ir import option_queries

K = 10


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    data = Path(os.environ.get("OPENQA_DATA", "../shared/medqa/data_clean"))
    index_dir = Path(os.environ.get("OPENQA_INDEXES", "indexes"))
    questions = load_questions("us", "test", data)
    groups = [option_queries(q, "full", "en") for q in questions]
    flat = [text for g in groups for text in g]

    custom = open_index(index_dir, "en", "custom", data_dir=data)
    custom.fit_queries(flat)
    lucene = open_index(index_dir, "en", "lucene", data_dir=data)

    tok = custom.tokenizer
    corpus_tokens = [tok.tokenize(custom.paragraphs[i].text) for i in range(custom.manifest["paragraphs"])]
    query_tokens = [tok.tokenize(q) for q in flat]
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(bm25s.tokenization.Tokenized(*_vocab_ids(corpus_tokens)), show_progress=False)
    vocab = retriever.vocab_dict
    bm25s_queries = [[vocab[t] for t in q if t in vocab] or [0] for q in query_tokens]

    seconds = {
        "custom": timed(lambda: [custom.search(g, K) for g in groups]),
        "lucene": timed(lambda: [lucene.search([q], K) for q in flat]),
        "bm25s": timed(lambda: retriever.retrieve(bm25s_queries, k=K, n_threads=1, show_progress=False)),
    }
    qps = {name: round(len(flat) / s, 1) for name, s in seconds.items()}
    record = {
        "dataset": "us",
        "split": "test",
        "method": "engine throughput (question + option queries, top-10, one thread)",
        "n": len(flat),
        "queries_per_second": qps,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "ratios": {
            "custom_over_lucene": round(qps["custom"] / qps["lucene"], 2),
            "custom_over_bm25s": round(qps["custom"] / qps["bm25s"], 2),
            "bm25s_over_lucene": round(qps["bm25s"] / qps["lucene"], 2),
        },
        "target": "custom >= 10x lucene",
        "command": "python scripts/bench_engines.py",
        "data": str(data),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{os.cpu_count()} cores",
    }
    out = Path("eval/results/bench-engines.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["queries_per_second"]), json.dumps(record["ratios"]), "->", out)


def _vocab_ids(docs: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    """bm25s' (ids, vocab) form of already-tokenized documents."""
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in docs]
    return ids, vocab


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
