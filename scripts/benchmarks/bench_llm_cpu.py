"""The LLM part on the CPU: questions per second of ``openqa eval --method llm`` with a GGUF model
(llama.cpp in process), closed book by default, under llama.cpp settings that leave the letter
probabilities as they were. Writes eval/results/benchmarks/bench-llm-cpu.json.

Settings (``--settings``, each a pass of ``openqa eval`` run as a user runs it, in a process of its
own, with an empty reply cache so that every question asks the model):

- ``baseline``: as openqa ran before: one llama.cpp thread, every prompt from an empty cache
  (``--no-prompt-reuse``);
- ``reuse``: the default now: one thread, a prompt reusing the rows of the previous one where they
  give a cold run's bits (``openqa.llm.prefix``);
- ``threads2``, ``reuse-threads2``: the same with two llama.cpp threads (``--threads 2``);
- ``reuse-concurrency2``: two copies of the model in one process, one thread each (``--concurrency 2``);
- ``processes2``, ``reuse-processes2``: two processes of one thread each over the two halves of the
  questions (``--offset``), run at once (how docs/llm.md ran two cores before): questions per second
  is all questions over the slower half's time.

``--load-modes`` also times loading the model (``xllamacpp.Server``) with llama.cpp's load modes
(mmap, read into memory, mmap and mlock), alternated; the numbers do not depend on it.

The settings are alternated over ``--rounds`` rounds (the order reversed every other round).
Questions per second is openqa's own (questions over the scoring time, which includes loading the
model at the first question). Every pass's letter probabilities are compared per question with
the first baseline pass at full precision (read from its reply cache). Each pass can run under a
wrapper (``--wrap``, e.g. a script that pauses other work on the machine and lets one benchmark
run at a time), which is given the pass alone: the script calls itself with ``--pass``.

    python scripts/benchmarks/bench_llm_cpu.py --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --limit 100 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from bench_llm import shown_argv

from benchlib import command_line, data_dir, write_record

#: Each setting: the flags of ``openqa eval`` it adds, and how many processes share the questions.
SETTINGS: dict[str, tuple[list[str], int]] = {
    "baseline": (["--threads", "1", "--no-prompt-reuse"], 1),
    "reuse": (["--threads", "1"], 1),
    "threads2": (["--threads", "2", "--no-prompt-reuse"], 1),
    "reuse-threads2": (["--threads", "2"], 1),
    "reuse-concurrency2": (["--threads", "1", "--concurrency", "2"], 1),
    "processes2": (["--threads", "1", "--no-prompt-reuse"], 2),
    "reuse-processes2": (["--threads", "1"], 2),
}
#: llama.cpp's load modes timed by ``--load-modes``: what each is, and its name in ``xllamacpp.llama_load_mode``.
LOAD_MODES = {"mmap (llama.cpp's default)": "LLAMA_LOAD_MODE_AUTO", "read into memory": "LLAMA_LOAD_MODE_NONE",
              "mmap and mlock": "LLAMA_LOAD_MODE_MMAP_MLOCK"}
#: What the record says each setting is.
MEANING = {
    "baseline": "openqa before: 1 llama.cpp thread, every prompt from an empty cache (--no-prompt-reuse)",
    "reuse": "the default now: 1 thread, a prompt reuses the previous prompt's rows where they give a cold run's bits",
    "threads2": "2 llama.cpp threads, every prompt from an empty cache",
    "reuse-threads2": "2 threads, with reuse",
    "reuse-concurrency2": "2 copies of the model in one process (--concurrency 2), 1 thread each, with reuse",
    "processes2": "2 processes of 1 thread each over the two halves of the questions at once, every prompt from an empty cache",
    "reuse-processes2": "2 processes of 1 thread each over the two halves of the questions at once, with reuse",
}


def eval_command(args: argparse.Namespace, flags: list[str], cache: Path, results: Path, offset: int, limit: int) -> list[str]:
    """``openqa eval`` of one process of a pass."""
    return [sys.executable, "-m", "openqa.cli", "eval", "--dataset", args.dataset, "--split", args.split, "--method", "llm",
            "--model", args.model, "--evidence", args.evidence, "--offset", str(offset), "--limit", str(limit),
            "--cache-dir", str(cache), "--output", str(results), "--json", *flags,
            *(["--index-dir", args.index_dir] if args.index_dir else [])]


def run_pass(args: argparse.Namespace) -> None:
    """One pass of setting ``args.run_pass`` (round ``args.round``): its ``openqa eval`` processes at
    once, each with an empty reply cache; appends what they said to the work folder's passes file."""
    flags, processes = SETTINGS[args.run_pass]
    work = Path(args.work)
    tag = f"{args.run_pass}-{args.round}"
    share = -(-args.limit // processes)
    procs = []
    for part in range(processes):
        offset, limit = part * share, min(share, args.limit - part * share)
        command = eval_command(args, flags, work / "caches" / f"{tag}-{part}", work / "results" / f"{tag}-{part}", offset, limit)
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    summaries = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"bench_llm_cpu: {tag}: openqa eval failed: {err.strip().splitlines()[-1:]}")
        summaries.append(json.loads(out))
    with open(work / "passes.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"setting": args.run_pass, "round": args.round, "load": os.getloadavg(), "summaries": [
            {k: s[k] for k in ("n", "accuracy", "seconds", "questions_per_second", "model_calls", "cached_replies", "tokens",
                               "model_reported_seconds")} | {"runs_on": s["settings"]["runs_on"],
                                                           "prompt_cache": s["settings"]["prompt_cache"]}
            for s in summaries]}) + "\n")


def load_once(model: str, mode: str) -> tuple[float, Any]:
    """Seconds to load ``model`` in llama.cpp (``xllamacpp.Server``, as openqa does at the first
    question) in load mode ``mode`` (a name of ``xllamacpp.llama_load_mode``), and the loaded model."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx, params.n_parallel, params.warmup, params.verbosity = 4096, 1, False, -1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 1
    params.load_mode = getattr(xllamacpp.llama_load_mode, mode)
    start = time.perf_counter()
    server = xllamacpp.Server(params)
    return time.perf_counter() - start, server


def time_loads(args: argparse.Namespace) -> None:
    """Seconds to load the model in each of ``LOAD_MODES``, alternated over three repeats, each in a
    process of its own, which exits without releasing it (releasing a model, or loading one after,
    sometimes hangs in llama.cpp); written to the work folder."""
    seconds: dict[str, list[float]] = {mode: [] for mode in LOAD_MODES}
    for _ in range(3):
        for mode, name in LOAD_MODES.items():
            done = subprocess.run([sys.executable, __file__, "--model", args.model, "--load-mode", name],
                                  capture_output=True, text=True, check=True)
            seconds[mode].append(float(done.stdout.split()[-1]))
    (Path(args.work) / "loads.json").write_text(json.dumps(seconds))


def replies(work: Path, setting: str, rnd: int) -> dict[str, dict[str, float]]:
    """The letter probabilities of every reply of one pass, by reply-cache key (full precision)."""
    out: dict[str, dict[str, float]] = {}
    for cache in sorted((work / "caches").glob(f"{setting}-{rnd}-*")):
        with sqlite3.connect(cache / "replies.sqlite") as db:
            out.update({key: json.loads(reply)["probs"] for key, reply in db.execute("SELECT key, reply FROM replies")})
    return out


def differences(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]) -> tuple[float, int]:
    """Between two passes over the same prompts: the largest difference of a letter probability, and
    the prompts whose most probable letter differs."""
    if a.keys() != b.keys():
        raise SystemExit("bench_llm_cpu: two passes asked different prompts")
    largest = max(abs(a[key][k] - b[key].get(k, 0.0)) for key in a for k in a[key].keys() | b[key].keys() if a[key] or b[key])
    letters = sum(max(a[key], key=a[key].__getitem__) != max(b[key], key=b[key].__getitem__) for key in a if a[key] and b[key])
    return largest, letters


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def report(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The record of the passes in the work folder."""
    work = Path(args.work)
    passes = [json.loads(line) for line in (work / "passes.jsonl").read_text().splitlines()]
    reference = replies(work, "baseline", min(p["round"] for p in passes if p["setting"] == "baseline"))
    # questions per second of each pass (setting, round)
    speed = {(p["setting"], p["round"]): sum(s["n"] for s in p["summaries"]) / max(s["seconds"] for s in p["summaries"])
             for p in passes}
    rows: dict[str, Any] = {}
    for name in names:
        mine = [p for p in passes if p["setting"] == name]
        compared = [differences(reference, replies(work, name, p["round"])) for p in mine]
        first = mine[0]["summaries"]
        rows[name] = {
            "meaning": MEANING[name], "flags": SETTINGS[name][0], "processes": SETTINGS[name][1],
            "runs_on": first[0]["runs_on"], "prompt_cache": first[0]["prompt_cache"],
            "questions_per_second": spread([speed[(name, p["round"])] for p in mine]), "passes": len(mine),
            # each round's questions per second over the same round's baseline's
            "speedup": spread([speed[(name, p["round"])] / speed[("baseline", p["round"])] for p in mine]),
            "model_calls": [sum(s["model_calls"] for s in p["summaries"]) for p in mine],
            "accuracy": sorted({round(sum(s["accuracy"] * s["n"] for s in p["summaries"]) / sum(s["n"] for s in p["summaries"]), 4)
                                for p in mine}),
            "tokens": {"prompt": sum(s["tokens"]["prompt"] for s in first),
                       "reused": sum(s["tokens"].get("reused", 0) for s in first)},
            "max_abs_probability_difference": max(largest for largest, _ in compared),
            "letters_differing": max(letters for _, letters in compared),
        }
    n = sum(s["n"] for s in passes[0]["summaries"])
    loads = work / "loads.json"
    load_seconds = {mode: spread(v) for mode, v in json.loads(loads.read_text()).items()} if loads.is_file() else None
    return {
        "dataset": args.dataset, "split": args.split, "method": "llm", "model": Path(args.model).name, "n": n,
        "accuracy": rows["baseline"]["accuracy"][0], "evidence": args.evidence, "rounds": args.rounds,
        "benchmark": "the LLM part on the CPU: questions per second under llama.cpp settings that keep the letter probabilities",
        "settings": rows,
        "target": {"speedup": 1.5, "max_abs_probability_difference": 1e-4, "letters_differing": 0,
                   "against": "baseline (each round's speedup against that round's baseline pass; the first baseline "
                              "pass is the reference for every pass's probabilities and letters)"},
        "model_load_seconds": load_seconds,
        "load_average": [p["load"] for p in passes],
        "note": "questions per second: openqa eval's own (questions over its scoring time, which includes loading the "
                "model at the first question); with two processes, all questions over the slower half's time. Each pass "
                "ran with an empty reply cache (model_calls = questions).",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="a .gguf file")
    p.add_argument("--dataset", default="mainland", help="dataset (default: mainland, MCMLE)")
    p.add_argument("--split", default="dev", help="split (default: dev)")
    p.add_argument("--limit", type=int, default=100, help="first N questions (default: 100)")
    p.add_argument("--evidence", default="none", help="evidence mode (default: none, closed book)")
    p.add_argument("--settings", default=",".join(SETTINGS), help=f"settings to run, comma-separated (default: all: {', '.join(SETTINGS)}; "
                   "baseline always runs)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every setting (default: 3)")
    p.add_argument("--load-modes", action="store_true", help="also time loading the model in llama.cpp's load modes")
    p.add_argument("--wrap", default="", help="a command each pass runs under (e.g. one that pauses other work)")
    p.add_argument("--index-dir", help="indexes (default: $OPENQA_INDEXES or ./indexes)")
    p.add_argument("--work", help="folder of the passes' caches and results; a rerun with it resumes (default: a temporary one)")
    p.add_argument("--pass", dest="run_pass", choices=[*SETTINGS, "load"], help=argparse.SUPPRESS)  # one pass: the script calls itself
    p.add_argument("--round", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--load-mode", help=argparse.SUPPRESS)  # time one load in this mode
    args = p.parse_args()
    data_dir()
    args.model = str(Path(args.model).resolve())
    if args.load_mode:
        seconds, _loaded = load_once(args.model, args.load_mode)
        print(seconds, flush=True)
        os._exit(0)  # not releasing the model (see time_loads)
    if args.run_pass == "load":
        time_loads(args)
        return
    if args.run_pass:
        run_pass(args)
        return
    names = ["baseline", *[n for n in args.settings.split(",") if n != "baseline"]]
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        raise SystemExit(f"bench_llm_cpu: unknown settings {unknown}: choose among {', '.join(SETTINGS)}")
    args.work = args.work or tempfile.mkdtemp(prefix="bench-llm-cpu-")
    own = sys.argv[1:] if "--work" in sys.argv[1:] else [*sys.argv[1:], "--work", args.work]
    passes = [(rnd, name) for rnd in range(1, args.rounds + 1) for name in (names if rnd % 2 else names[::-1])]
    done_file = Path(args.work) / "passes.jsonl"
    done = {(p["round"], p["setting"]) for p in map(json.loads, done_file.read_text().splitlines())} if done_file.is_file() else set()
    if (Path(args.work) / "loads.json").is_file():
        done.add((1, "load"))
    for rnd, name in [*passes, *([(1, "load")] if args.load_modes else [])]:
        if (rnd, name) in done:  # a rerun with the same --work resumes
            continue
        start = time.perf_counter()
        subprocess.run([*shlex.split(args.wrap), sys.executable, __file__, *own, "--pass", name, "--round", str(rnd)], check=True)
        print(f"round {rnd} {name}: {time.perf_counter() - start:.0f} s (with any wait for the wrapper)", flush=True)
    record = report(args, names)
    shown = shown_argv(sys.argv[1:])
    if args.wrap:
        shown[shown.index("--wrap") + 1] = Path(shlex.split(args.wrap)[0]).name
    path = write_record("bench-llm-cpu.json", record, command_line("scripts/benchmarks/bench_llm_cpu.py", shown,
                                                                   folders=("--index-dir", "--work")))
    for name, row in record["settings"].items():
        q = row["questions_per_second"]
        x = row["speedup"]
        print(f"{name:18} {q['median']:.3f} q/s ({q['min']:.3f}-{q['max']:.3f}), x{x['median']} ({x['min']}-{x['max']}), "
              f"largest probability difference {row['max_abs_probability_difference']:.2e}, "
              f"{row['letters_differing']} letters differ")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
