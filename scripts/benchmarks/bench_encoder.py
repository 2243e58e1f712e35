"""Encoding speed of the English dense encoder (MiniLM-L6) under CPU options, and what each
costs in retrieval agreement with the plain fp32 model. Writes eval/results/benchmarks/bench-encoder.json.

``--paths``: the encoder's pipeline against the one it replaced (issue 61), on the CPU, one torch
thread: the old path tokenized each chunk of 16,384 texts in one padded call to tensors, then ran
length-sorted batches cut from it; the new one tokenizes unpadded through the tokenizer's Rust
backend, pads each batch alone and tokenizes the next chunk in a worker thread during the forward
passes. Both end to end (paragraphs/s) and tokenizing alone, alternated round by round (medians,
min, max), and the largest difference between their vectors. Writes bench-encoder-paths.json.

Variants: fp32, bf16 or int8 dynamic quantisation, max length 256 or 128. Speed: passages per second
on a spread sample of real paragraphs (sentence-transformers sorts each batch by length).
Quality: for US dev queries (filtered question + correct option), the overlap of each variant's
top-10 paragraphs in the sample with the fp32/256 model's top-10.

    python scripts/benchmarks/bench_encoder.py [--passages 3000] [--queries 300]
    python scripts/benchmarks/bench_encoder.py --paths [--passages 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np
import torch

from benchlib import alternate, data_dir, rates, write_record
from openqa import load_questions, make_encoder, question_query

#: The texts the old path tokenized in one padded call.
OLD_CHUNK = 16384

VARIANTS = {
    "fp32-256": (256, "fp32"), "fp32-128": (128, "fp32"), "bf16-256": (256, "bf16"), "bf16-128": (128, "bf16"),
    "int8-256": (256, "int8"), "int8-128": (128, "int8"),
}


def padded_tokens(encoder: Any, texts: list[str]) -> dict[str, torch.Tensor]:
    """The old path's tokenizing: one call of the tokenizer, padded to the longest text, to tensors."""
    return dict(encoder.model.tokenizer(texts, truncation=True, max_length=encoder.max_length, padding=True, return_tensors="pt"))


def old_path(encoder: Any, texts: list[str], size: int) -> np.ndarray:
    """How ``SentenceTransformerEncoder`` encoded before issue 61 (its ``_encode_chunk``, CPU part): each
    chunk tokenized in one padded call, sorted longest first, batches cut to their longest text."""
    vectors = torch.empty((len(texts), encoder.dim), dtype=torch.float32)
    with torch.inference_mode():
        for start in range(0, len(texts), OLD_CHUNK):
            tokens = padded_tokens(encoder, texts[start:start + OLD_CHUNK])
            lengths = tokens["attention_mask"].sum(dim=1)
            order = torch.argsort(lengths, descending=True, stable=True)
            for first in range(0, len(order), size):
                rows = order[first:first + size]
                width = max(int(lengths[rows[0]]), 1)
                features = {key: values[:, :width][rows] for key, values in tokens.items()}
                embedded = encoder.model.forward(features)["sentence_embedding"].float()
                vectors[start + rows] = torch.nn.functional.normalize(embedded, dim=1)
    return vectors.numpy()


def compare_paths(passages: list[str], rounds: int) -> dict[str, object]:
    """The ``--paths`` record (see the module)."""
    torch.set_num_threads(1)
    encoder = make_encoder("all-MiniLM-L6-v2", device="cpu")
    assert hasattr(encoder, "model") and encoder.model.tokenizer.padding_side == "right"  # a sentence-transformers encoder
    size = encoder.batch_size
    runs = {
        "old path (padded call per 16,384 texts)": lambda: old_path(encoder, passages, size),
        "new path (unpadded, batches padded alone, tokenized ahead)": lambda: encoder.encode_passages(passages),
        "tokenizing only, old (padded call to tensors)": lambda: [padded_tokens(encoder, passages[i:i + OLD_CHUNK]) for i in range(0, len(passages), OLD_CHUNK)],
        "tokenizing only, new (unpadded, batches padded alone)": lambda: encoder._batches(passages, size),
    }
    seconds, last, load = alternate(runs, rounds)
    old, new = (last[name] for name in list(runs)[:2])
    speeds = rates(seconds, dict.fromkeys(seconds, len(passages)))
    medians = [speeds[name]["median"] for name in runs]
    return {
        "dataset": "English textbook paragraphs (en-custom store, spread)", "split": None, "accuracy": None,
        "method": "MiniLM-L6 encoding pipeline, old against new (CPU, one torch thread)", "n": len(passages),
        "precision": encoder.precision, "batch_size": size, "max_length": encoder.max_length,
        "paragraphs_per_second": speeds, "rounds": rounds, "load": load,
        "speedup_end_to_end_median": round(medians[1] / medians[0], 3), "speedup_tokenizing_median": round(medians[3] / medians[2], 3),
        "max_abs_vector_difference": float(np.abs(old - new).max()),
        "torch_threads": torch.get_num_threads(),
        "tokenizer_threads": "the tokenizer's own (Rust, all cores) in both paths; TOKENIZERS_PARALLELISM "
                             f"{os.environ.get('TOKENIZERS_PARALLELISM', 'unset')}",
        "machine_note": "a shared 2-core machine, loaded by other work while this ran (see load): rounds alternate the "
                        "paths so that each sees the same load; read the medians with their min and max",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=3000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--paths", action="store_true", help="the encoding pipeline, old against new (bench-encoder-paths.json)")
    parser.add_argument("--rounds", type=int, default=3, help="--paths: timed rounds of each path in turn, after a warm-up")
    args = parser.parse_args()
    store = Path(os.environ.get("OPENQA_INDEXES", "indexes")) / "en-custom" / "paragraphs.jsonl"
    rows = [json.loads(line)["contents"] for line in open(store, encoding="utf-8")]
    passages = rows[:: max(1, len(rows) // args.passages)][: args.passages]
    if args.paths:
        record = compare_paths(passages, args.rounds)
        out = write_record("bench-encoder-paths.json", record, f"python scripts/benchmarks/bench_encoder.py --paths "
                           f"--passages {args.passages} --rounds {args.rounds}")
        print(json.dumps({key: record[key] for key in ("paragraphs_per_second", "max_abs_vector_difference", "load")}, indent=1))
        print("->", out)
        return
    data = data_dir()
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
