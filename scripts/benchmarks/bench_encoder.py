"""Encoding speed of the English dense encoder (MiniLM-L6) under CPU options, and what each
costs in retrieval agreement with the plain fp32 model. Writes eval/results/benchmarks/bench-encoder.json.

Variants: fp32, bf16 or int8 dynamic quantisation, max length 256 or 128. Speed: passages per second
on a spread sample of real paragraphs (sentence-transformers sorts each batch by length).
Quality: for US dev queries (filtered question + correct option), the overlap of each variant's
top-10 paragraphs in the sample with the fp32/256 model's top-10.

    python scripts/benchmarks/bench_encoder.py [--passages 3000] [--queries 300]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np
import torch

from benchlib import data_dir, write_record
from openqa import load_questions, make_encoder, question_query

VARIANTS = {
    "fp32-256": (256, "fp32"), "fp32-128": (128, "fp32"), "bf16-256": (256, "bf16"), "bf16-128": (128, "bf16"),
    "int8-256": (256, "int8"), "int8-128": (128, "int8"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    data = data_dir()
    store = Path(os.environ.get("OPENQA_INDEXES", "indexes")) / "en-custom" / "paragraphs.jsonl"
    rows = [json.loads(line)["contents"] for line in open(store, encoding="utf-8")]
    passages = rows[:: max(1, len(rows) // args.passages)][: args.passages]
    questions = load_questions("us", "dev", data)[: args.queries]
    queries = [f"{question_query(q, 'filter', 'en')} {q.options[q.answer_idx]}" for q in questions]

    results, reference = {}, None
    for name, (max_length, precision) in VARIANTS.items():
        encoder = make_encoder("all-MiniLM-L6-v2", max_length=max_length, precision=precision)
        encoder.encode_passages(passages[:64])  # warm-up
        start = time.perf_counter()
        vectors = encoder.encode_passages(passages)
        seconds = time.perf_counter() - start
        top = np.argsort(-(encoder.encode_queries(queries) @ vectors.T), axis=1)[:, :10]
        reference = top if reference is None else reference
        overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top, reference)]))
        results[name] = {"passages_per_second": round(len(passages) / seconds, 1), "top10_overlap_with_fp32_256": round(overlap, 3)}
        print(name, results[name], flush=True)
    record = {
        "dataset": "us", "split": "dev", "method": "MiniLM-L6 encoding options (CPU)", "n": len(passages),
        "variants": results, "torch_threads": torch.get_num_threads(),
    }
    out = write_record("bench-encoder.json", record, "python scripts/benchmarks/bench_encoder.py")
    print("->", out)


if __name__ == "__main__":
    main()
