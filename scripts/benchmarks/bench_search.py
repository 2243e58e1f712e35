"""Search end to end, as an IR user calls it: text in, hits (ids, scores, texts) out, one thread.

openqa's ``Searcher.batch_search`` over the English custom index against bm25s (numba backend) over
the same paragraphs, tokenizing its queries with its own English stemmer and stop words, then
retrieving (``bm25s.tokenize`` + ``BM25.retrieve`` with the corpus, so it returns texts too). The
queries: the 5,092 US test option queries (full question + option), top-10. Rounds alternate the two
engines so both see the same load; the record keeps every round, the medians and the ratio.

    python scripts/benchmarks/bench_search.py [--rounds 5]   -> eval/results/benchmarks/bench-search.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import bm25s
import numpy as np
import Stemmer

from benchlib import alternate, data_dir, write_record
from openqa import Searcher, load_questions, option_queries

K = 10
TARGET = 3.0  # batch_search at least this many times bm25s' queries per second, end to end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both engines in turn (at least 3)")
    args = parser.parse_args()
    rounds = max(3, args.rounds)
    data = data_dir()
    queries = [text for q in load_questions("us", "test", data) for text in option_queries(q, "full", "en")]
    searcher = Searcher.open("en", "custom", data_dir=data)
    corpus = [searcher.engine.paragraphs[i].text for i in range(searcher.engine.weights.shape[1])]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25(backend="numba")
    retriever.index(bm25s.tokenize(corpus, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)

    def openqa_run() -> int:
        return sum(len(h) for h in searcher.batch_search(queries, k=K, threads=1).hits)

    def bm25s_run() -> int:
        tokens = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, show_progress=False)
        docs, _ = retriever.retrieve(tokens, corpus=corpus, k=K, n_threads=1, show_progress=False)
        return int(docs.size)

    engines = {"openqa_batch_search_1_thread": openqa_run, "bm25s_numba_1_thread": bm25s_run}
    seconds, _, load = alternate(engines, rounds)
    qps = {name: {"median": round(len(queries) / statistics.median(s), 1), "min": round(len(queries) / max(s), 1),
                  "max": round(len(queries) / min(s), 1), "seconds": s} for name, s in seconds.items()}
    ratio = qps["openqa_batch_search_1_thread"]["median"] / qps["bm25s_numba_1_thread"]["median"]
    record = {
        "dataset": "us", "split": "test", "method": "search end to end (text in, hits with texts out), top-10, one thread",
        "n": len(queries), "accuracy": None, "rounds": rounds, "queries_per_second": qps,
        "ratio_openqa_over_bm25s": round(ratio, 2), "target": f"openqa >= {TARGET}x bm25s end to end", "met": ratio >= TARGET,
        "engines": {"openqa": "Searcher.batch_search, custom index (IR-Custom's engine, default query parameters)",
                    "bm25s": f"bm25s {bm25s.__version__} numba backend, bm25s.tokenize (English stop words, Snowball stemmer)"},
        "notes": f"{os.cpu_count()} cores; {load}",
        "data": str(data),
    }
    out = write_record("bench-search.json", record, "python scripts/benchmarks/bench_search.py" + (f" --rounds {args.rounds}" if args.rounds != 5 else ""))
    print(json.dumps({k: v["median"] for k, v in qps.items()}), "ratio", record["ratio_openqa_over_bm25s"], "->", out)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
