"""Speed of openqa's own code paths on a GPU (or the CPU), in named sections, each a function
returning a record written to eval/results/benchmarks/bench-gpu-<section>-<cuda|cpu>.json naming the device:

- ``encoder``: paragraphs/s end to end (tokenizing included) through openqa's SentenceTransformerEncoder:
  the old path (``SentenceTransformer.encode``, batch 64, as openqa called it before issue 48; on a
  GPU also at batch 1,024) against the fast path at several batch sizes and each 16-bit precision,
  the fast path over all the paragraphs, and the fast path's vectors against fp32 ones computed on
  the CPU from the same weights.
- ``search``: queries/s of exact inner-product top-10 with torch on the device (``TorchExactSearch``)
  against FAISS's flat index on the CPU where FAISS is installed, in DenseIndex's batches of 128
  queries, and whether their hits agree.
- ``check`` (the real packaged all-MiniLM-L6-v2, on the CPU by default): the fast path's vectors in
  each precision against the old path's, fp32 on the CPU and the same precision: cosine of 5,000
  textbook paragraphs, and the top-10 overlap and top-1 agreement of 300 US dev queries (question +
  correct option) over them.

- ``reader`` and ``letters`` (``gpu_models.py``, which also runs them alone, with ``--small`` shapes
  for the CPU): a training step of openqa's reader on an fp16-stored checkpoint, and letter
  scoring of a Qwen2.5-1.5B-shaped model through openqa's in-process backend, one at a time and
  batched; both built with random weights from their configs.

``encoder`` and ``search`` need nothing downloaded: MiniLM-L6 is built with RANDOM weights from its
config (``--model-config DIR``: config.json, the tokenizer and sentence-transformers module files;
default: the packaged model's folder, whose weights are not used), so their figures are timing only
(the record says so); ``check`` is what says the vectors are right. Paragraphs: ``--paragraphs FILE``
(JSON lines with "contents" or "text", or plain text, one paragraph a line, either gzipped), else the
default English index's paragraph store (``$OPENQA_INDEXES/en-custom``), else synthetic text.
``--payload DIR`` writes the folder to carry to a GPU machine: the packaged MiniLM with its weights
stored in fp16 (``check`` reads them; the other sections only its config), the English paragraphs
as gzipped JSON lines and the ``check`` section's queries (no MedQA data is needed there).

``--all DIR`` runs every section from a payload folder in sizes that take under 5 minutes on an
H100 or H200 (``ALL``; ``--quick``: tiny ones, for the CPU test), then writes
``bench-gpu-all-<cuda|cpu>.json``: each section's seconds and headline figures.

    python scripts/benchmarks/bench_gpu.py --payload build/gpu-payload     # 54 MB; build/ is ignored: carry it
    python scripts/benchmarks/bench_gpu.py --all build/gpu-payload --output-dir OUT                # on the GPU: everything
    python scripts/benchmarks/bench_gpu.py --sections encoder,search --model-config build/gpu-payload/model \
        --paragraphs build/gpu-payload/paragraphs.jsonl.gz --check-paragraphs 2000                  # on the GPU, two sections
    python scripts/benchmarks/bench_gpu.py --sections check                                        # on the CPU
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import alternate, command_line, data_dir, rates, write_record
from openqa import TorchExactSearch, load_questions, make_encoder, resolve_model

#: The packaged model whose config (and, for ``check``, weights) the sections use.
MODEL = "all-MiniLM-L6-v2"
#: What a model folder holds that is not configuration: left out of the payload, rebuilt at random.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".onnx", ".h5", ".msgpack", ".ckpt", ".ot")
RANDOM_WEIGHTS = "random weights built from the config: timing only"
#: Batch sizes the encoder section tries, by device type (the old path's 64 is always timed too).
BATCH_GRID = {"cuda": [256, 512, 1024, 2048, 4096], "cpu": [64]}
#: Precisions the fast path runs in, by device type ("auto" is the device's default).
PRECISIONS = {"cuda": ["fp16", "bf16"], "cpu": ["fp32", "auto"]}
QUERY_BATCH = 128  # DenseIndex.query_batch: how many queries a dense search gets at once
K = 10


def read_paragraphs(args: argparse.Namespace) -> tuple[list[str], str]:
    """The paragraphs the sections encode (see the module), at most ``--limit``, and where they came from."""
    store = Path(os.environ.get("OPENQA_INDEXES", "indexes")) / "en-custom" / "paragraphs.jsonl"
    path = Path(args.paragraphs) if args.paragraphs else store if store.is_file() else None
    if path is None:
        return synthetic(args.limit or 20000), "synthetic text (seeded)"
    texts = []
    with (gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")) as lines:
        for line in lines:
            if args.limit and len(texts) >= args.limit:
                break
            if ".jsonl" in path.name:
                row = json.loads(line)
                texts.append(row if isinstance(row, str) else row.get("contents", row.get("text", "")))
            elif line.strip():
                texts.append(line.strip())
    return texts, path.name


def synthetic(n: int) -> list[str]:
    """``n`` paragraphs of seeded random words, 8 to 120 words each (the textbooks' mean is ~66 tokens)."""
    rng = np.random.default_rng(0)
    words = ("the patient presents with acute pain fever cough renal hepatic cardiac artery vein nerve "
             "muscle bone infection therapy dose aspirin inhibits cyclooxygenase receptor protein cell "
             "tissue blood pressure chronic syndrome diagnosis treatment of and in a is by").split()
    return [" ".join(rng.choice(words, size=int(rng.integers(8, 121)))) for _ in range(n)]


def spread(items: list[str], n: int) -> list[str]:
    """``n`` of ``items`` taken evenly across them (every k-th)."""
    return items[:: max(1, len(items) // n)][:n] if n < len(items) else items


def environment(device: str) -> dict[str, Any]:
    """The device and library versions a record names."""
    import sentence_transformers
    import torch
    import transformers

    cuda = device.startswith("cuda")
    try:
        import faiss

        faiss_version: str | None = faiss.__version__
    except ImportError:
        faiss_version = None
    return {
        "device": device, "device_name": torch.cuda.get_device_name(torch.device(device)) if cuda else platform.processor() or platform.machine(),
        "cuda": torch.version.cuda if cuda else None, "torch": torch.__version__, "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__, "faiss": faiss_version, "cpu_threads": torch.get_num_threads(),
    }


def config_files(folder: Path) -> list[Path]:
    """The files of a model folder but its weights (relative paths)."""
    return [p.relative_to(folder) for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(WEIGHT_SUFFIXES)]


def random_model(config: Path, into: Path) -> Path:
    """A sentence-transformers folder ``into``: the files of ``config`` but weights, with weights drawn
    at random (seeded) for the architecture of its config.json."""
    import torch
    from transformers import AutoConfig, AutoModel

    for name in config_files(config):
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(config / name, into / name)
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(config)).save_pretrained(into)
    return into


def agreement(candidate: tuple[np.ndarray, np.ndarray], reference: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    """How near (passage vectors, query vectors) are to the reference's: cosine of each passage
    vector with its reference (min, mean), and per query the overlap of the top-10 passages and
    whether the top one is the same."""
    (passages, queries), (ref_passages, ref_queries) = candidate, reference
    cosine = np.sum(passages * ref_passages, axis=1) / np.maximum(
        np.linalg.norm(passages, axis=1) * np.linalg.norm(ref_passages, axis=1), 1e-12)
    top = np.argsort(-(queries @ passages.T), axis=1, kind="stable")[:, :K]
    ref_top = np.argsort(-(ref_queries @ ref_passages.T), axis=1, kind="stable")[:, :K]
    return {"cosine_min": round(float(cosine.min()), 5), "cosine_mean": round(float(cosine.mean()), 6),
            "top10_overlap": round(float(np.mean([len(set(a) & set(b)) / K for a, b in zip(top, ref_top)])), 4),
            "top1_agreement": round(float(np.mean(top[:, 0] == ref_top[:, 0])), 4)}


def old_path(encoder: Any, texts: list[str], batch_size: int = 64) -> np.ndarray:
    """How openqa encoded before issue 48: ``SentenceTransformer.encode`` (its own length sort, per-batch tokenizing)."""
    vectors = encoder.model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)


def encoder_section(args: argparse.Namespace) -> dict[str, Any]:
    """Paragraphs/s of the old path against the fast path (see the module), and the fast path's vectors
    against fp32 ones from the CPU with the same random weights."""
    paragraphs, source = read_paragraphs(args)
    sample = spread(paragraphs, args.sample)
    kind = args.device.split(":")[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = str(random_model(Path(args.model_config), Path(tmp)))
        default = make_encoder(folder, device=args.device)
        encoders = {default.precision: default}
        for asked in PRECISIONS[kind]:
            if asked not in encoders and asked != "auto":
                encoder = make_encoder(folder, precision=asked, device=args.device)
                encoders.setdefault(encoder.precision, encoder)  # bf16 runs as fp16 on a GPU without it
        reference = encoders["fp32"] if kind == "cpu" and "fp32" in encoders else make_encoder(folder, precision="fp32", device="cpu")
    default_batch = default.batch_size
    tokens = default.model.tokenizer(sample, truncation=True, max_length=default.max_length)["input_ids"]
    runs: dict[str, Callable[[], Any]] = {}
    counts: dict[str, int] = {}

    def variant(name: str, texts: list[str], run: Callable[[list[str]], Any]) -> None:
        runs[name], counts[name] = (lambda: run(texts)), len(texts)

    old_batches = [64, 1024] if kind == "cuda" else [64]
    for size in old_batches:
        variant(f"old path, {default.precision}, batch {size}", sample, lambda texts, size=size: old_path(default, texts, size))
    for size in sorted(set(args.batch_sizes or BATCH_GRID[kind])):
        variant(f"fast path, {default.precision}, batch {size}", sample, lambda texts, size=size: default.encode_passages(texts, size))
    for precision, encoder in encoders.items():
        if precision != default.precision:
            variant(f"fast path, {precision}, batch {default_batch}", sample, lambda texts, encoder=encoder: encoder.encode_passages(texts))
    if len(paragraphs) > len(sample):
        variant(f"fast path, {default.precision}, batch {default_batch}, all paragraphs", paragraphs, default.encode_passages)
    tokenizer = default.model.tokenizer
    variant("tokenizing only, old path (one padded call to tensors)", sample,
            lambda texts: tokenizer(texts, truncation=True, max_length=default.max_length, padding=True, return_tensors="pt"))
    variant("tokenizing only, fast path (unpadded, each batch padded alone)", sample, lambda texts: default._batches(texts, default_batch))
    seconds, _, load = alternate(runs, args.rounds)

    checked = spread(sample, args.check_paragraphs)
    queries = [" ".join(text.split()[:20]) for text in spread(paragraphs[1::2] or paragraphs, args.check_queries)]
    fp32 = (reference.encode_passages(checked), reference.encode_queries(queries))
    vectors = {f"fast path, {precision}": agreement((e.encode_passages(checked), e.encode_queries(queries)), fp32)
               for precision, e in encoders.items()}
    vectors[f"old path, {default.precision}"] = agreement((old_path(default, checked), old_path(default, queries, 32)), fp32)
    return {
        "dataset": source, "split": None, "method": "dense encoding throughput (MiniLM-L6 architecture)", "n": len(sample),
        "accuracy": None, "weights": RANDOM_WEIGHTS, **environment(args.device),
        "paragraphs": len(paragraphs), "mean_tokens": round(float(np.mean([len(t) for t in tokens])), 1),
        "max_length": default.max_length, "default_batch_size": default_batch, "default_precision": default.precision,
        "paragraphs_per_second": rates(seconds, counts), "rounds": args.rounds, "load": load,
        "vectors_against_cpu_fp32": {"paragraphs": len(checked), "queries": len(queries), "queries_are": "the first 20 words of other paragraphs",
                                     "same_random_weights": True, **vectors},
    }


def search_section(args: argparse.Namespace) -> dict[str, Any]:
    """Queries/s of exact top-10 with torch on the device against FAISS flat on the CPU (when installed),
    over random unit vectors, as many as the paragraphs."""
    paragraphs, source = read_paragraphs(args)
    rng = np.random.default_rng(0)

    def unit(n: int) -> np.ndarray:
        v = rng.standard_normal((n, args.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    vectors, queries = unit(len(paragraphs)), unit(args.queries)
    batches = [queries[i:i + QUERY_BATCH] for i in range(0, len(queries), QUERY_BATCH)]
    backends: dict[str, Any] = {f"torch exact, {args.device}": TorchExactSearch(vectors, args.device)}
    try:
        import faiss

        flat = faiss.IndexFlatIP(args.dim)
        flat.add(vectors)
        backends["faiss flat, cpu"] = flat
    except ImportError:
        pass
    runs = {name: (lambda backend=backend: [backend.search(batch, K) for batch in batches]) for name, backend in backends.items()}
    seconds, last, load = alternate(runs, args.rounds)
    hits = {name: np.concatenate([ids for _, ids in found]) for name, found in last.items()}
    scores = {name: np.concatenate([s for s, _ in found]) for name, found in last.items()}
    torch_name = next(iter(backends))
    if not args.device.startswith("cpu"):  # the device's hits against the same search on the CPU (not timed)
        scores["torch exact, cpu"], hits["torch exact, cpu"] = TorchExactSearch(vectors, "cpu").search(queries, K)
    same = {name: {"identical_top10_rows": round(float(np.mean(np.all(hits[name] == hits[torch_name], axis=1))), 4),
                   "max_score_difference": float(np.abs(scores[name] - scores[torch_name]).max())}
            for name in hits if name != torch_name}
    return {
        "dataset": f"random unit vectors, as many as the paragraphs of {source}", "split": None,
        "method": "dense search throughput (exact inner-product top-10)", "n": len(queries), "accuracy": None,
        **environment(args.device), "vectors": len(vectors), "dim": args.dim, "k": K, "query_batch": QUERY_BATCH,
        "queries_per_second": rates(seconds, dict.fromkeys(seconds, len(queries))), "rounds": args.rounds, "load": load,
        "hits_against_torch": same,
    }


def check_queries(args: argparse.Namespace) -> list[str]:
    """The ``check`` section's queries: ``--queries-file`` (JSON lines of {"query": ...}, the payload's),
    else the US dev questions, each with its correct option, from the MedQA data."""
    if args.queries_file:
        with open(args.queries_file, encoding="utf-8") as lines:
            return [json.loads(line)["query"] for line in lines if line.strip()]
    return [f"{q.question} {q.options[q.answer_idx]}" for q in load_questions("us", "dev", data_dir())]


def check_section(args: argparse.Namespace) -> dict[str, Any]:
    """The fast path's vectors with the real weights against the old path's fp32 ones on the CPU (see the module)."""
    paragraphs, source = read_paragraphs(args)
    passages = spread(paragraphs, args.check_paragraphs)
    queries = check_queries(args)[: args.check_queries]
    model = args.check_model or MODEL
    reference_encoder = make_encoder(model, precision="fp32", device="cpu")
    reference = (old_path(reference_encoder, passages), old_path(reference_encoder, queries, 32))
    kind = args.device.split(":")[0]
    found = {}
    for asked in PRECISIONS[kind]:
        encoder = make_encoder(model, precision=asked, device=args.device)
        fast = (encoder.encode_passages(passages), encoder.encode_queries(queries))
        old = reference if (kind, encoder.precision) == ("cpu", "fp32") else (old_path(encoder, passages), old_path(encoder, queries, 32))
        against = agreement(fast, reference)
        found[f"fast path, {encoder.precision}"] = {
            "against_old_path_fp32_cpu": against, "against_old_path_same_precision": agreement(fast, old),
            "met": against["cosine_min"] >= 0.999 and against["top10_overlap"] >= 0.99,
        }
    return {
        "dataset": f"us dev questions over {source}", "split": "dev", "method": "fast encoding path against SentenceTransformer.encode",
        "n": len(queries), "accuracy": None, "weights": f"{MODEL} (the packaged model{', stored in fp16' if args.check_model else ''})",
        **environment(args.device),
        "paragraphs": len(passages), "queries_are": "question + correct option", "vectors": found,
        "targets": {"cosine_min": 0.999, "top10_overlap": 0.99,
                    "for": "a GPU's 16-bit precisions against the CPU's fp32 (issue 48); the CPU's bf16 default predates them "
                           "(top-10 overlap 0.987 with fp32 in bench-encoder.json)"},
    }


def reader_section(args: argparse.Namespace) -> dict[str, Any]:
    """``gpu_models.reader_step``: a training step of openqa's reader on an fp16-stored MiniLM-shaped checkpoint."""
    from benchmarks.gpu_models import reader_step

    return reader_step(args.device, model_config=args.model_config, **getattr(args, "reader", {}))


def letters_section(args: argparse.Namespace) -> dict[str, Any]:
    """``gpu_models.letters``: letter scoring of a Qwen2.5-1.5B-shaped model one at a time and batched."""
    from benchmarks.gpu_models import letters

    return letters(args.device, rounds=args.rounds, **getattr(args, "letters", {}))


SECTIONS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "encoder": encoder_section, "search": search_section, "check": check_section,
    "reader": reader_section, "letters": letters_section,
}


def payload(folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Write the folder to carry to a GPU machine: ``model/`` (the packaged model, its weights stored
    in fp16: the ``check`` section's real weights at half the size; the other sections read only its
    config), ``paragraphs.jsonl.gz`` (the paragraphs, one {"contents": ...} a line) and
    ``queries.jsonl`` (``check``'s queries, one {"query": ...} a line); its size."""
    import torch
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(resolve_model(MODEL, None), device="cpu").to(torch.float16).save(str(folder / "model"))
    paragraphs, source = read_paragraphs(args)
    with gzip.open(folder / "paragraphs.jsonl.gz", "wt", encoding="utf-8", compresslevel=9) as out:
        out.writelines(json.dumps({"contents": text}, ensure_ascii=False) + "\n" for text in paragraphs)
    try:
        queries, queries_are = check_queries(args)[: args.check_queries], "US dev questions, each with its correct option"
    except SystemExit:  # no MedQA data here
        queries, queries_are = [" ".join(text.split()[:20]) for text in spread(paragraphs[1::2] or paragraphs, args.check_queries)], \
            "the first 20 words of other paragraphs (no MedQA data where the payload was made)"
    (folder / "queries.jsonl").write_text("".join(json.dumps({"query": q}, ensure_ascii=False) + "\n" for q in queries), encoding="utf-8")
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return {"folder": str(folder), "paragraphs": len(paragraphs), "queries": len(queries), "queries_are": queries_are,
            "source": source, "megabytes": round(size / 2**20, 2)}


#: ``--all``'s sizes: every section in under 5 minutes on an H100 or H200 (the encoder over all the
#: paragraphs once a round, 10,000 of them for the other variants); ``--quick``: seconds on a CPU.
ALL = {"sample": 10000, "rounds": 2, "batch_sizes": [1024, 2048], "check_paragraphs": 2000, "check_queries": 300, "queries": 4096,
       "letters": {"questions": 512, "alone": 128, "batch_sizes": (32, 64), "ways": ("rows", "lengths", "padded")}, "reader": {}}
QUICK = {"sample": 40, "rounds": 1, "batch_sizes": [16], "check_paragraphs": 20, "check_queries": 5, "queries": 64, "limit": 200,
         "letters": {"small": True, "questions": 6, "alone": 4, "batch_sizes": (2,), "prompt_tokens": 100, "ways": ("rows",)},
         "reader": {"small": True, "steps": 2, "max_length": 64}}


def run_all(args: argparse.Namespace, command: str) -> None:
    """``--all DIR``: every section from the payload ``DIR`` in ``ALL``'s sizes (``QUICK``'s with
    ``--quick``), each record written as it ends, then ``bench-gpu-all-<kind>.json``: the seconds
    of each section and of all, and where each record is."""
    folder = Path(args.all)
    for key, value in (QUICK if args.quick else ALL).items():
        setattr(args, key, value)
    args.model_config = args.check_model = str(folder / "model")
    args.paragraphs, args.queries_file = str(folder / "paragraphs.jsonl.gz"), str(folder / "queries.jsonl")
    start = time.perf_counter()
    written = {name: run_section(name, args, command) for name in SECTIONS}
    kind = args.device.split(":")[0]
    summary = {
        "dataset": "the payload's paragraphs and queries", "split": None, "method": "every section of the GPU benchmark",
        "n": len(SECTIONS), "accuracy": None, **environment(args.device), "sizes": "quick (a CPU test)" if args.quick else "ALL",
        "sections": written, "seconds": round(time.perf_counter() - start, 1), "target_seconds": 300,
    }
    path = write_record(f"bench-gpu-all-{kind}.json", summary, command, Path(args.output_dir) if args.output_dir else None)
    print(f"all: {summary['seconds']} s -> {path}", flush=True)


def run_section(name: str, args: argparse.Namespace, command: str) -> dict[str, Any]:
    """Run the section ``name`` and write its record ``bench-gpu-<name>-<kind>.json``: its seconds and the record's name."""
    start = time.perf_counter()
    record = {**SECTIONS[name](args), "section_seconds": round(time.perf_counter() - start, 1)}
    kind = args.device.split(":")[0]
    path = write_record(f"bench-gpu-{name}-{kind}.json", record, command, Path(args.output_dir) if args.output_dir else None)
    print(f"{name}: {time.perf_counter() - start:.1f} s -> {path}", flush=True)
    return {"seconds": record["section_seconds"], "record": path.name}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sections", default="encoder,search", help=f"comma-separated, of: {', '.join(SECTIONS)}")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--paragraphs", help="a .jsonl or .txt file (optionally .gz) of paragraphs, one a line")
    parser.add_argument("--model-config", help="a sentence-transformers model folder; weights, if any, are not used (default: the packaged MiniLM)")
    parser.add_argument("--limit", type=int, help="at most this many paragraphs")
    parser.add_argument("--sample", type=int, default=20000, help="paragraphs the variants are timed on (spread across all)")
    parser.add_argument("--batch-sizes", type=lambda s: [int(x) for x in s.split(",")], help="the fast path's batch sizes (default: by device)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every variant in turn, after one warm-up")
    parser.add_argument("--check-paragraphs", type=int, default=5000, help="paragraphs whose vectors are compared")
    parser.add_argument("--check-queries", type=int, default=300, help="queries whose top-10 are compared")
    parser.add_argument("--queries", type=int, default=4096, help="search: queries timed")
    parser.add_argument("--dim", type=int, default=384, help="search: vector size")
    parser.add_argument("--output-dir", help="where records go (default: eval/results/benchmarks)")
    parser.add_argument("--payload", help="write the folder to carry to a GPU machine here, and stop")
    parser.add_argument("--all", metavar="PAYLOAD", help="every section from this payload folder, in sizes for under 5 minutes on an H100/H200")
    parser.add_argument("--quick", action="store_true", help="with --all: tiny sizes (the CPU test)")
    parser.add_argument("--check-model", help="check: the model with real weights (default: the packaged MiniLM)")
    parser.add_argument("--queries-file", help="check: JSON lines of {\"query\": ...} (default: US dev questions from the MedQA data)")
    args = parser.parse_args()
    if args.payload:
        Path(args.payload).mkdir(parents=True, exist_ok=True)
        print(json.dumps(payload(Path(args.payload), args)))
        return
    folders = ("--paragraphs", "--model-config", "--output-dir", "--all", "--check-model", "--queries-file")
    command = command_line("scripts/benchmarks/bench_gpu.py", sys.argv[1:], folders)
    if args.all:
        run_all(args, command)
        return
    args.model_config = args.model_config or resolve_model(MODEL, None)
    names = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = [name for name in names if name not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown sections {unknown}: choose from {', '.join(SECTIONS)}")
    for name in names:
        run_section(name, args, command)


if __name__ == "__main__":
    main()
