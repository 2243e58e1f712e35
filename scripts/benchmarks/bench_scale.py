"""How the cost of indexing and searching grows with the corpus; writes eval/results/benchmarks/bench-scale.json
and bench-scale.png.

Corpora: the MedQA English textbooks (72,885 paragraphs; the default corpus) and, for each of
``--sizes`` (default 1 M and 5 M paragraphs), a corpus made of the textbooks' sentences reshuffled
into new paragraphs (seeded): each new paragraph takes as many sentences as a real paragraph drawn
at random, from a stream of all the books' sentences in a fresh random order per pass, so paragraph
lengths, vocabulary and term frequencies stay the books' while the paragraphs are new. They are
written as JSONL and indexed through ``openqa index --corpus``, as a user's corpus is.

For each corpus and engine (custom; lucene up to ``--lucene-max`` paragraphs):

- **build**: ``openqa index`` as a child process: wall time and peak memory (the child's rusage,
  from ``os.wait4``), and the index's size on disk (all its files: weights, vocabulary, paragraph
  store and offsets);
- **search**: another child opens the index as ``openqa answer`` does (the open time; its memory
  right after, anonymous vs file-backed: a memory-mapped index is file-backed, shared by every
  process that opens it), answers the first ``--latency-questions`` US test questions (4 options)
  one at a time as ``openqa answer --json`` / ``POST /v1/answer`` do (scores, then 3 evidence
  paragraphs per option with their matched words): p50/p95 latency; then scores the whole US test
  split as ``openqa eval`` does: throughput and accuracy.

Accuracy over the reshuffled corpora is expected to be lower than over the textbooks: they hold the
books' own sentences, but a paragraph joins sentences of unrelated pages, so evidence is diluted.
They measure cost, not quality.

    python scripts/benchmarks/bench_scale.py               # needs OPENQA_DATA; 11 minutes here, about 5 GB of disk at most
    python scripts/benchmarks/bench_scale.py --sizes 200000 --lucene-max 0 --work /tmp/quick   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import data_dir, record_path, write_record
from openqa import corpus_paragraphs, language

OPENQA = str(Path(sys.executable).with_name("openqa"))
#: The issue's targets for the custom engine at 5 M paragraphs on this machine.
TARGETS = {"paragraphs": 5_000_000, "build_s": 15 * 60, "peak_memory_mb": 8 * 1024, "p95_ms": 100}
#: Method scoring each engine's index.
METHODS = {"custom": "ir-custom", "lucene": "ir-es"}
#: Evidence paragraphs per option in a latency request (the HTTP API's default).
EVIDENCE = 3
#: Disk one paragraph of a reshuffled corpus needs, generously: measured at 200 k paragraphs, its
#: JSONL line takes 0.4 KB, its custom index 0.63 KB and its Lucene index 0.47 KB (each with its
#: own paragraph store, 0.4 KB).
BYTES_PER_PARAGRAPH = 2000
#: Files of an index that are its paragraph store (the rest is the engine's own index).
STORE_FILES = ("paragraphs.jsonl", "paragraphs.offsets.npy")


def book_sentences(data: Path) -> tuple[list[str], np.ndarray]:
    """The English textbooks' sentences in order, and how many sentences each real paragraph has."""
    sentences, shapes = [], []
    for paragraph in corpus_paragraphs("en", data_dir=data):
        parts = [s for s in language("en").sentence_end.split(paragraph.text) if s]
        sentences += parts
        shapes.append(len(parts))
    return sentences, np.asarray(shapes)


def write_shuffled(path: Path, size: int, sentences: list[str], shapes: np.ndarray, seed: int) -> None:
    """``size`` new paragraphs of reshuffled sentences as a JSONL corpus (see the module's doc)."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice(shapes, size)
    order, cursor = rng.permutation(len(sentences)), 0
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for row, length in enumerate(lengths):
            picked = []
            while len(picked) < length:
                if cursor == len(order):
                    order, cursor = rng.permutation(len(sentences)), 0
                take = min(length - len(picked), len(order) - cursor)
                picked += [sentences[i] for i in order[cursor : cursor + take]]
                cursor += take
            record = {"id": f"s{row}", "title": f"shuffled-{row // 10_000}", "text": " ".join(picked)}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)


def run_child(command: list[str], log: Path) -> tuple[float, float, int]:
    """Run ``command`` (output to ``log``); its wall seconds, peak memory (MB) and exit status."""
    start = time.perf_counter()
    with open(log, "a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, child.returncode


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def memory_mb() -> dict[str, float]:
    """This process' resident memory now, in MB: all, anonymous (its own) and file-backed (shared)."""
    fields = {"VmRSS": "rss_mb", "RssAnon": "anon_mb", "RssFile": "file_mb"}
    with open("/proc/self/status") as status:
        return {fields[k]: round(int(v.split()[0]) / 1024, 1) for k, v in (line.split(":", 1) for line in status) if k in fields}


def measure(index_dir: Path, engine: str, corpus: str | None, n_latency: int) -> dict[str, Any]:
    """Open ``engine``'s index as ``openqa answer`` does, answer ``n_latency`` questions one at a time,
    then score the whole US test split as ``openqa eval`` does (runs in a child: see ``main``)."""
    from openqa import Solver, load_questions

    questions = load_questions("us", "test", data_dir())
    start = time.perf_counter()
    solver = Solver.open(METHODS[engine], "en", exam="us", engine=engine, corpus=corpus, data_dir=data_dir(), index_dir=index_dir)
    record: dict[str, Any] = {"open_s": round(time.perf_counter() - start, 3), "after_open": memory_mb()}
    solver.answer(questions[0], evidence=EVIDENCE)  # a first request outside the timings (lazy parts warm up)
    latencies = []
    for question in questions[:n_latency]:
        start = time.perf_counter()
        solver.answer(question, evidence=EVIDENCE)
        latencies.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    scored = solver.score_all(questions)
    seconds = time.perf_counter() - start
    summary = scored.summary()
    return {**record, "latency_questions": len(latencies), "p50_ms": round(float(np.percentile(latencies, 50)), 1),
            "p95_ms": round(float(np.percentile(latencies, 95)), 1), "max_ms": round(max(latencies), 1),
            "throughput_qps": round(len(questions) / seconds, 1), "n": summary["n"], "accuracy": summary["accuracy"],
            "after_queries": memory_mb(), "settings": {k: v for k, v in solver.settings.items() if k != "sources"},
            "peak_memory_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def bench_corpus(name: str | None, source: Path | None, engines: list[str], work: Path, n_latency: int) -> list[dict[str, Any]]:
    """Build and measure each engine's index of one corpus (``name`` None: the textbooks)."""
    rows = []
    for engine in engines:
        named = ["--corpus", str(source), "--name", name] if name else []
        build = [OPENQA, "index", "--lang", "en", "--engine", engine, "--index-dir", str(work / "indexes"), *named]
        build_s, peak_mb, status = run_child(build, work / "log.txt")
        if status:
            raise SystemExit(f"build failed ({status}): {' '.join(build)}; see {work / 'log.txt'}")
        folder = work / "indexes" / (f"{name}-en-{engine}" if name else f"en-{engine}")
        manifest = json.loads((folder / "manifest.json").read_text())
        probe = [sys.executable, __file__, "measure", "--index-dir", str(work / "indexes"), "--engine", engine,
                 "--latency-questions", str(n_latency), *(["--corpus", name] if name else [])]
        result = subprocess.run(probe, capture_output=True, text=True, check=False)
        if result.returncode:
            raise SystemExit(f"measuring failed: {' '.join(probe)}\n{result.stderr[-2000:]}")
        measured = json.loads(result.stdout.strip().splitlines()[-1])
        size = folder_bytes(folder)
        store = sum((folder / name).stat().st_size for name in STORE_FILES)
        rows.append({
            "corpus": name or "textbooks", "paragraphs": manifest["paragraphs"], "engine": engine, "method": METHODS[engine],
            "build_s": round(build_s, 1), "build_peak_memory_mb": round(peak_mb, 1), "index_bytes": size,
            "index_bytes_per_paragraph": round(size / manifest["paragraphs"], 1), "store_bytes": store,
            "engine_bytes_per_paragraph": round((size - store) / manifest["paragraphs"], 1),
            "files": {path.name: path.stat().st_size for path in sorted(folder.iterdir()) if path.is_file()},
            "build_command": " ".join(["openqa", *build[1:]]), **measured,
        })
        print(f"{rows[-1]['corpus']} {engine}: {manifest['paragraphs']} paragraphs, build {build_s:.0f} s, "
              f"peak {peak_mb:.0f} MB, index {size / 1e9:.2f} GB, open {measured['open_s']} s, "
              f"p50 {measured['p50_ms']} ms, p95 {measured['p95_ms']} ms, {measured['throughput_qps']} q/s, "
              f"accuracy {measured['accuracy']:.2f}%", flush=True)
    return rows


def targets_met(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The custom engine's figures at the largest corpus against ``TARGETS``."""
    row = max((r for r in rows if r["engine"] == "custom"), key=lambda r: r["paragraphs"])
    return {"paragraphs": row["paragraphs"], "build_s": row["build_s"] <= TARGETS["build_s"],
            "peak_memory_mb": row["build_peak_memory_mb"] <= TARGETS["peak_memory_mb"], "p95_ms": row["p95_ms"] <= TARGETS["p95_ms"]}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Build time, build memory, index size and p95 latency against paragraphs, per engine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("build_s", "build time (min)", 1 / 60, TARGETS["build_s"] / 60),
              ("build_peak_memory_mb", "build peak memory (GB)", 1 / 1024, TARGETS["peak_memory_mb"] / 1024),
              ("index_bytes", "index on disk (GB)", 1e-9, None),
              ("p95_ms", f"p95 latency per question, {EVIDENCE} evidence/option (ms)", 1, TARGETS["p95_ms"])]
    figure, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for axis, (key, label, scale, target) in zip(axes.flat, panels):
        for engine in sorted({r["engine"] for r in rows}):
            mine = sorted((r for r in rows if r["engine"] == engine), key=lambda r: r["paragraphs"])
            axis.plot([r["paragraphs"] for r in mine], [r[key] * scale for r in mine], "o-", label=f"{engine} ({METHODS[engine]})")
        if target is not None:
            axis.axhline(target, color="red", linestyle="--", linewidth=1, label="custom target at 5 M")
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("paragraphs")
        axis.set_title(label, fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    figure.suptitle("openqa: cost against corpus size (2 cores, 24 GB)", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000,5000000", help="paragraphs of each reshuffled corpus (default: 1 M and 5 M)")
    parser.add_argument("--lucene-max", type=int, default=1_000_000, help="the largest corpus Lucene is benchmarked on (default: 1 M; 0: none)")
    parser.add_argument("--latency-questions", type=int, default=200, help="US test questions answered one at a time (default: 200)")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "openqa-bench-scale"),
                        help="scratch folder for corpora and indexes (removed at the end) (default: $TMPDIR/openqa-bench-scale)")
    parser.add_argument("--keep", action="store_true", help="keep the corpora and indexes")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--output", default=str(record_path("bench-scale.json").parent),
                        help="folder for bench-scale.json and .png (default: eval/results/benchmarks of this repository)")
    args = parser.parse_args()
    data = data_dir()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    need = BYTES_PER_PARAGRAPH * max(sizes, default=0)
    if shutil.disk_usage(work).free < need:
        raise SystemExit(f"{work}: {shutil.disk_usage(work).free / 1e9:.1f} GB free, the largest corpus needs about {need / 1e9:.1f} GB")
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "dataset": "us", "split": "test", "method": "ir-custom (custom engine), ir-es (lucene engine)",
        "targets": TARGETS, "corpora": [], "rows": [],
        "accuracy_note": "US test accuracy of each engine over each corpus (dataset us, its shipped dev-tuned "
                         "settings); the reshuffled corpora hold the books' own sentences in random paragraphs, so "
                         "evidence is diluted and accuracy is expected to be lower than over the textbooks: they "
                         "measure cost, not quality",
    }
    command = "python " + " ".join(sys.argv)
    sentences, shapes = book_sentences(data)
    for size in [None, *sizes]:
        engines = ["custom", *(["lucene"] if (size or 72_885) <= args.lucene_max else [])]
        if size is None:
            record["rows"] += bench_corpus(None, None, engines, work, args.latency_questions)
            textbooks = record["rows"][0]  # the custom engine over the textbooks: the record's headline accuracy
            record.update(n=textbooks["n"], accuracy=textbooks["accuracy"])
            continue
        name = f"shuffled-{size // 1000}k"
        source = work / f"{name}.jsonl"
        start = time.perf_counter()
        write_shuffled(source, size, sentences, shapes, args.seed + size)
        record["corpora"].append({"name": name, "paragraphs": size, "jsonl_bytes": source.stat().st_size,
                                  "written_s": round(time.perf_counter() - start, 1), "seed": args.seed + size})
        record["rows"] += bench_corpus(name, source, engines, work, args.latency_questions)
        if not args.keep:
            source.unlink()
            for folder in (work / "indexes").glob(f"{name}-*"):
                shutil.rmtree(folder)
        record["targets_met"] = targets_met(record["rows"])
        write_record("bench-scale.json", record, command, out)  # after every corpus: a partial run keeps its figures
    record["targets_met"] = targets_met(record["rows"])
    write_record("bench-scale.json", record, command, out)  # peak memory: this driver's, apart from its children's
    plot(record["rows"], out / "bench-scale.png")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {out / 'bench-scale.json'} and {out / 'bench-scale.png'}; targets met: {record['targets_met']}")


def measure_main() -> None:
    """``bench_scale.py measure``: one child's measurement, printed as one JSON line."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--index-dir", required=True)
    parser.add_argument("--engine", required=True)
    parser.add_argument("--corpus")
    parser.add_argument("--latency-questions", type=int, required=True)
    args = parser.parse_args(sys.argv[2:])
    print(json.dumps(measure(Path(args.index_dir), args.engine, args.corpus, args.latency_questions)))


if __name__ == "__main__":
    measure_main() if sys.argv[1:2] == ["measure"] else main()
