"""Dense retrieval speed: the whole English dense index build, and single-query latency.

Builds ``openqa index --lang en --engine dense`` into a scratch index folder (unless
``--skip-build``) and times it; then, on the built index, times 200 single option queries of US
dev (encode + FAISS search, one at a time) and reports the median and 95th percentile, for the
exact flat index and for an HNSW index made from the same vectors (``--faiss-index hnsw``).
Writes eval/results/benchmarks/bench-dense.json.

    python scripts/benchmarks/bench_dense.py [--skip-build]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import data_dir, write_record
from openqa import Searcher, load_questions, option_queries

TARGETS = {"build_en_s": 900, "query_median_ms": 30}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-build", action="store_true", help="only time queries on ./indexes/en-dense")
    args = parser.parse_args()
    data = data_dir()
    figures: dict[str, float] = {}
    index_dir = Path(os.environ.get("OPENQA_INDEXES", "indexes"))
    if not args.skip_build:
        index_dir = Path(tempfile.mkdtemp(prefix="openqa-bench-"))
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).with_name("openqa")), "index", "--lang", "en", "--engine", "dense",
                        "--data-dir", str(data), "--index-dir", str(index_dir)], check=True)
        figures["build_en_s"] = round(time.perf_counter() - start, 1)
    engine = Searcher.open("en", "dense", index_dir=index_dir, data_dir=data).engine
    queries = [text for q in load_questions("us", "dev", data)[:50] for text in option_queries(q, "filter", "en")]
    for name, searched in (("", engine), ("hnsw_", engine.with_faiss("hnsw"))):  # the same vectors in an HNSW index
        searched.search(queries[:5], 10)  # warm-up
        times = []
        for query in queries:
            start = time.perf_counter()
            searched.search([query], 10)
            times.append(1000 * (time.perf_counter() - start))
        figures[f"{name}query_median_ms"] = round(float(np.median(times)), 2)
        figures[f"{name}query_p95_ms"] = round(float(np.percentile(times, 95)), 2)
    record = {
        "dataset": "us", "split": "dev", "method": "dense retrieval speed (MiniLM-L6, FAISS flat)", "n": len(queries),
        "figures": figures, "targets": TARGETS,
        "met": {k: figures[k] <= v for k, v in TARGETS.items() if k in figures},
        "encoder": engine.manifest["encoder"], "paragraphs": engine.manifest["paragraphs"],
    }
    out = write_record("bench-dense.json", record, "python scripts/benchmarks/bench_dense.py" + (" --skip-build" if args.skip_build else ""))
    print(json.dumps(figures), "->", out)


if __name__ == "__main__":
    main()
