"""Where the CPU time of the LLM part goes, with prompt reuse on: one ``openqa eval --method llm``
slice with a GGUF model (llama.cpp in process, one thread) run under ``cProfile``, its time split
into llama.cpp's work (the prompts and letters; loading the model at the first prompt) and openqa's
own per-question work (building prompts, tokenizing them for the reuse plan, the reply cache), and
the tokenizer read once at open (then, unprofiled, read from the GGUF file against its kept copy). Writes
eval/results/benchmarks/profile-llm-cpu.json.

The record says how far removing openqa's own per-question work could take a run (the scoring time
over the scoring time without it) and how far reuse can take llama.cpp's prompt work at most (all
prompt tokens over those computed), which together bound what prompt reuse alone can reach.
``cProfile`` slows Python code, not llama.cpp's, so openqa's shares are upper bounds.

    python scripts/benchmarks/profile_llm_cpu.py --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --limit 16
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib

from bench_llm_cpu import eval_command

from benchlib import command_line, data_dir, write_record

#: Each part of the time: the functions (file ending, name) whose cumulative time it is, and whether
#: it is counted by the function's own time only (``tottime``: llama.cpp's calls, which the profiler
#: cannot see into, are counted in their caller's own time).
PARTS: dict[str, tuple[list[tuple[str, str]], bool]] = {
    "scoring": ([("openqa/llm/scorer.py", "score")], False),
    "llama.cpp prompts and letters": ([("openqa/llm/prefix.py", "ask")], False),
    "llama.cpp loading the model (first prompt)": ([("openqa/llm/llamacpp.py", "_ask")], True),
    "openqa building prompts": ([("openqa/llm/scorer.py", "_prompts")], False),
    "openqa tokenizing prompts (the reuse plan)": ([("openqa/llm/llamacpp.py", "prompt_ids")], False),
    "openqa reply cache": ([("openqa/llm/cache.py", "get"), ("openqa/llm/cache.py", "put")], False),
    "reading the tokenizer from the GGUF file (once, at open)": ([("openqa/llm/llamacpp.py", "_tokenizer")], False),
}
#: The parts that are openqa's own work per question.
OURS = ("openqa building prompts", "openqa tokenizing prompts (the reuse plan)", "openqa reply cache")


def seconds(stats: pstats.Stats, functions: list[tuple[str, str]], own: bool) -> float:
    """The summed cumulative (or own, ``own``) seconds of ``functions`` in ``stats``."""
    total = 0.0
    for (file, _, name), (_, _, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        if any(file.endswith(ending) and name == wanted for ending, wanted in functions):
            total += tottime if own else cumtime
    return total


def tokenizer_seconds(model: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds to read the GGUF file's tokenizer through transformers (what every start paid before
    the tokenizer was kept) and to read its kept copy (the newest in the user's cache folder: the
    one the profiled run read or wrote), unprofiled and alternated over ``rounds``."""
    from transformers import AutoTokenizer

    # the kept copy the profiled run read or wrote: the newest in this user's cache folder
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "openqa" / "tokenizers"
    kept = max(cache.glob("gguf-*"), key=lambda folder: folder.stat().st_mtime, default=None)
    ways: dict[str, Callable[[], Any]] = {
        "from the GGUF file": lambda: AutoTokenizer.from_pretrained(str(model.parent), gguf_file=model.name),
        "kept copy": lambda: AutoTokenizer.from_pretrained(str(kept))}
    if kept is None or not kept.is_dir():
        del ways["kept copy"]
    out: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(rounds):
        for way, read in ways.items():
            start = time.perf_counter()
            read()
            out[way].append(round(time.perf_counter() - start, 2))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a .gguf file")
    parser.add_argument("--dataset", default="mainland", help="dataset (default: mainland)")
    parser.add_argument("--split", default="dev", help="split (default: dev)")
    parser.add_argument("--limit", type=int, default=16, help="questions (default: 16)")
    parser.add_argument("--evidence", default="none", help="evidence of the LLM part (default: none, as bench_llm_cpu.py)")
    parser.add_argument("--output", type=Path, default=None, help="record path (default: eval/results/benchmarks/profile-llm-cpu.json)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="openqa-profile-") as work:
        # the pass bench_llm_cpu.py times as reuse (one thread), with an empty reply cache
        command = eval_command(argparse.Namespace(**vars(args), index_dir=None), ["--threads", "1", "--data-dir", str(data_dir())],
                               Path(work) / "cache", Path(work) / "results", 0, args.limit)
        profiled = Path(work) / "profile.out"
        load = os.getloadavg()[0]
        start = time.perf_counter()  # the command as a user runs it, under cProfile, in a process of its own
        done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profiled), *command[1:]],
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"profile_llm_cpu: openqa eval failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
        stats = pstats.Stats(str(profiled))
    summary = json.loads(done.stdout)
    parts = {name: round(seconds(stats, functions, own), 3) for name, (functions, own) in PARTS.items()}
    n, scoring = summary["n"], parts["scoring"]
    ours = sum(parts[name] for name in OURS)
    tokens = summary["tokens"]
    record: dict[str, Any] = {
        "dataset": args.dataset, "split": args.split, "method": "llm", "n": n, "accuracy": summary["accuracy"],
        "model": Path(args.model).name, "evidence": args.evidence,
        "benchmark": "where the LLM part's CPU time goes with prompt reuse on (cProfile over one openqa eval slice)",
        "seconds_profiled": parts, "wall_seconds": round(wall, 1),
        "load_average_before_after": [round(load, 2), round(os.getloadavg()[0], 2)],
        "per_question_ms": {name: round(1000 * value / n, 1) for name, value in parts.items()
                            if name != "reading the tokenizer from the GGUF file (once, at open)"},
        "tokenizer_read_seconds": tokenizer_seconds(Path(args.model).resolve(), 2),
        "openqa_share_of_scoring": round(ours / scoring, 4),
        "speedup_if_openqa_work_were_free": round(scoring / (scoring - ours), 3),
        "tokens": tokens,
        "prompt_speedup_bound_of_reuse": round(tokens["prompt"] / max(1, tokens["prompt"] - tokens.get("reused", 0)), 3),
        "settings": summary["settings"]["sources"] | {"runs_on": summary["settings"]["runs_on"]},
        "notes": "cProfile slows Python code (openqa's, transformers') and not llama.cpp's, so openqa's shares are upper "
                 "bounds. speedup_if_openqa_work_were_free: scoring time over scoring time less openqa's own per-question "
                 "work. prompt_speedup_bound_of_reuse: all prompt tokens over those llama.cpp computed, what reuse could "
                 "give if prompt tokens were all of llama.cpp's time (its per-request work and the letters are not).",
    }
    name, folder = ("profile-llm-cpu.json", None) if args.output is None else (args.output.name, args.output.parent)
    path = write_record(name, record, command_line("scripts/benchmarks/profile_llm_cpu.py", sys.argv[1:]), folder)
    print(json.dumps({k: record[k] for k in ("per_question_ms", "openqa_share_of_scoring", "speedup_if_openqa_work_were_free",
                                             "prompt_speedup_bound_of_reuse")}), "->", path)


if __name__ == "__main__":
    main()
