"""Fault benchmark of ``openqa serve`` on loopback; writes eval/results/benchmarks/bench-serve-faults.json.

Starts ``openqa serve --lang en,zh --method ir-custom,pmi --results FOLDER`` as its own process on a
free loopback port over a scratch index folder (the English custom index copied from yours, so it can
be rebuilt and deleted under the server; the others linked read-only), the real MedQA data folder and
a scratch results folder (three runs of the US test questions, two runs of 25,000 made-up questions,
faulty runs, a link out of the folder, a record whose predictions link out, and a run name found both
directly inside and in a subfolder). While a probe sends ``GET /v1/health`` every 50 ms, it runs
hostile and unlucky cases one at a time:

* oversized (bodies over the limit, announced or streamed; questions over a method's size limit),
* a 136 KB paste whose line once made the parser quadratic, malformed bodies (empty, form-encoded,
  lone surrogate, not UTF-8, wrong types, a repeated key, deep nesting, a 5,000-digit number, loose
  types), a wrong route or method with a bad body, HEAD requests, a foreign Host header, pages that
  must load nothing remote, examples in a stable order,
* slow (a body trickled a byte at a time; request heads trickled or never sent; the largest Chinese
  PMI questions allowed, four at once), disconnecting (clients that send a large question and hang
  up, at once or after 0.5 s: the server's CPU must be idle again),
* concurrent (20 clients asking English and Chinese questions with both methods at once), fairness
  (English answers while 12 heavy Chinese requests within the limits run: p50, p95), and the
  English index rebuilt, then deleted, then rebuilt again under that load,
* clients (each a loopback address: the server shares heavy work per client and language): a
  second client's heavy requests beside one looping in-limit Chinese PMI questions, heavy
  questions in both languages, or 19,900-character searches (target: each answered within 2 s),
  English answers meanwhile and while 12 clients loop such searches (target: p95 under 1 s), and a
  looping client's own English heavy questions beside its queued Chinese ones,
* the results endpoints (``--results``): the listing and the page, each run's questions and curves,
  comparisons, a run longer than a listing (said to be cut), hostile run names and faulty runs on
  every endpoint, compare refusals (past 8 runs, a run twice, one run 400 times), HEAD and other
  methods; a run name found twice (directly inside and in ``runs/us``) listed by folder and name and
  each opened as its own run; a record whose predictions file links out of the folder not offered for
  opening and refused in one line; run names with ``..``, an absolute path or a hidden part refused
  (400) on every endpoint; a client's jobs in flight capped (a 429 past it, for results and for
  answers); long comparisons whose clients leave; English answers beside a client looping long
  comparisons and beside one keeping four costly 1,960-character Chinese PMI questions in flight (work weighed by
  its cost, not its characters), beside one keeping 8 reads of a 25,000-question run and the listing
  in flight, and beside one keeping 8 answers of 200 evidence paragraphs in flight (target: p95 under
  0.2 s each), a second client's comparisons beside long ones, and one address past its cap however
  its requests' ``X-Forwarded-For`` headers name other clients,
* the process: a second server on the same port; SIGTERM, SIGHUP and a second Ctrl-C, each with a
  slow-body client connected and (SIGTERM, SIGHUP, three Ctrl-C) with heavy requests in flight;
  SIGTERM and a second Ctrl-C with two in-process llama.cpp prompts running (gone within 5 s, no crash);
  SIGTERM, Ctrl-C and SIGHUP while clients keep asking (heavy Chinese, English on kept-alive
  connections, a slow body, and 12 clients opening a connection per request): every request the
  server received answered, none reset (a new connection after it stopped listening is refused);
  SIGTERM and Ctrl-C during long comparisons; ``--client-header`` telling users behind one address
  apart (a light user beside a heavy one, a greedy one capped), the last of several values counting
  (a client's own header line before the one a proxy appends, or a comma-joined value, escapes no
  cap), and refused when it is no header name; an ``--endpoint`` with a query-string token refused at
  start in one line that does not show it;
  ``--ensemble bank`` with an English ``--bank`` file in a private folder (every offer of both
  languages available, the folder shown to no client, the ensemble's answer with its solved
  questions) and ``--method ensemble --model`` refused rather than the model dropped.

Counted per case and in total: requests, statuses, 5xx answers that the case did not expect (a 503
is expected only where a time limit, a rebuild or a stop is the point), the longest health-probe
stall while the case ran (target under 1 s), tracebacks and 500s in the server's log (target 0),
English p95 under the heavy Chinese load and beside the heavy clients (target under 1 s), the
slowest of a second client's heavy requests (target under 2 s), the longest stop under load
(target under 5 s) and the requests reset by a stop (target 0). Then served answers are compared
with ``openqa answer --json`` on the same questions (prediction and every option's score; target: 0
differ), also after the index was rebuilt. Every loop is bounded and every request has a timeout.

    python scripts/benchmarks/bench_serve_faults.py                 # needs the MedQA data and OPENQA_INDEXES (en, zh: custom, pmi)
    python scripts/benchmarks/bench_serve_faults.py --compare 8     # fewer `openqa answer` runs
    python scripts/benchmarks/bench_serve_faults.py --note "..."    # what else ran on the machine, for the record
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from bench_llm import packaged_gguf
from bench_serve import OPENQA, busy, free_port, wait_until_up

from benchlib import data_dir, record_path, stop_process, write_record
from openqa import Question, load_questions

RESULT = record_path("bench-serve-faults.json")
TARGETS = {"unexpected_5xx": 0, "tracebacks": 0, "health_stall_s": 1.0, "answers_differing": 0,
           "english_p95_under_zh_load_s": 1.0, "stop_under_load_s": 5.0, "logged_500": 0,
           "second_client_heavy_max_s": 2.0, "english_p95_beside_heavy_clients_s": 1.0, "resets_in_flight": 0,
           "english_p95_beside_run_reads_s": 0.2, "english_p95_beside_large_answers_s": 0.2}
#: Seconds one request may take before it counts as hung.
REQUEST_TIMEOUT = 60
METHODS = ("ir-custom", "pmi")
DATASETS = {"en": "us", "zh": "mainland"}


@dataclass
class Case:
    """One hostile or unlucky case: what it sent, what came back, how health fared meanwhile."""

    name: str
    category: str
    expected: set[int]
    statuses: list[int | str] = field(default_factory=list)
    stall_s: float = 0.0
    seconds: float = 0.0
    note: str = ""

    def record(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for status in self.statuses:
            counts[str(status)] = counts.get(str(status), 0) + 1
        unexpected = [s for s in self.statuses if s not in self.expected]
        return {"case": self.name, "category": self.category, "requests": len(self.statuses), "statuses": counts,
                "expected": sorted(self.expected, key=str), "unexpected": len(unexpected),
                "unexpected_5xx": sum(isinstance(s, int) and s >= 500 and s not in self.expected for s in self.statuses),
                "health_stall_s": round(self.stall_s, 3), "seconds": round(self.seconds, 2),
                **({"note": self.note} if self.note else {})}


class Probe(threading.Thread):
    """``GET /v1/health`` every 50 ms on its own connection, recording (sent at, seconds taken)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.samples, self.stop = port, [], threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                connection = HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
                connection.request("GET", "/v1/health")
                connection.getresponse().read()
                connection.close()
            except OSError:
                pass
            self.samples.append((sent, time.monotonic() - sent))
            self.stop.wait(0.05)

    def longest(self, start: float, end: float) -> float:
        """The longest probe sent in [start, end], counting one still out as its time so far."""
        taken = [t for sent, t in self.samples if start <= sent <= end]
        return max(taken, default=0.0)


def request(port: int, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
            source: str = "127.0.0.1", decode: bool = True) -> tuple[int, dict[str, Any] | bytes]:
    """One request on a new connection from the loopback address ``source`` (another address of
    127.0.0.0/8 is another client to the server): its status and JSON (or raw bytes, and always
    without ``decode``: a load's client that only counts statuses does not decode megabytes of JSON
    in the process whose other threads time the light client)."""
    connection = HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT, source_address=(source, 0))
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        raw = response.read()
        if not decode:
            return response.status, raw
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw
    finally:
        connection.close()


def spread(n: int) -> str:
    """The loopback address of the ``n``-th of many clients sent at once (127.0.0.100 on): each its own
    client to the server, which caps one client's requests in flight."""
    return f"127.0.0.{100 + n}"


def answer_body(question: Question | SimpleNamespace, method: str, lang: str) -> bytes:
    return json.dumps({"question": question.question, "options": question.options, "method": method,
                       "lang": lang}).encode()


def heavy_bodies(zh: list[Question], big_zh: list[SimpleNamespace]) -> list[bytes]:
    """Heavy Chinese requests within the limits: 8 ir-custom of 10,000 characters with top_n 100, 4 PMI at its limit."""
    text = "".join(q.question for q in zh[:400])
    custom = [json.dumps({"question": text[i * 300:i * 300 + 9_000], "options": {k: v * 40 for k, v in zh[i].options.items()},
                          "method": "ir-custom", "lang": "zh", "top_n": 100}).encode() for i in range(8)]
    return custom + [answer_body(question, "pmi", "zh") for question in big_zh]


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (Linux ``/proc``)."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def raw_exchange(port: int, data: bytes, trickle: float = 0.0, hang_up: bool = False, linger: float = 0.0) -> int | str:
    """Send raw bytes (one a ``trickle`` seconds apart, if given); the status, or what happened
    (hanging up ``linger`` seconds after sending, if asked to)."""
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT) as sock:
        if trickle:
            head, body = data.split(b"\r\n\r\n", 1)
            sock.sendall(head + b"\r\n\r\n")
            deadline = time.monotonic() + 3
            for byte in body[: int(3 / trickle)]:
                if time.monotonic() > deadline:
                    break
                sock.sendall(bytes([byte]))
                time.sleep(trickle)
        else:
            sock.sendall(data)
        if hang_up:
            time.sleep(linger)
            return "hung up"
        reply = sock.recv(200)
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else "no reply"


def raw_post(body: bytes, *lines: str) -> bytes:
    """A ``POST /v1/answer`` of ``body`` as raw bytes (for ``raw_exchange``), with the header ``lines``
    added as given (``Name: value``: a header may come twice, which ``request`` cannot send)."""
    extra = "".join(f"{line}\r\n" for line in lines).encode()
    return (b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%sContent-Length: %d"
            b"\r\n\r\n%s" % (extra, len(body), body))


def past_cap(port: int, send: Callable[[int], int | str], extra: int = 4) -> tuple[int, list[int | str]]:
    """``send(n)`` for as many ``n`` as one client's cap on jobs in flight (``/v1/methods``) and
    ``extra`` more, all at once: the cap and the outcomes."""
    methods = request(port, "GET", "/v1/methods")[1]
    cap = int(methods["limits"]["max_in_flight"]) if isinstance(methods, dict) else 0
    with ThreadPoolExecutor(cap + extra) as pool:
        return cap, list(pool.map(send, range(cap + extra)))


#: Outcomes of a request that count as reset: the server closed or reset the connection instead of answering.
RESETS = ("ConnectionResetError", "RemoteDisconnected", "BrokenPipeError", "IncompleteRead", "BadStatusLine")


class Looper:
    """``threads`` clients from the loopback address ``source`` sending ``bodies`` to ``path`` in turn
    until stopped (a ``with`` block), each on a new connection per request or on one kept-alive
    connection (``keep``); the outcome of every request (its status, or the name of the error that
    ended the thread: ``refused`` once the server no longer listens) and each answered one's seconds."""

    def __init__(self, port: int, source: str, bodies: list[bytes], threads: int, path: str = "/v1/answer",
                 keep: bool = False, headers: dict[str, str] | None = None, paths: list[str] | None = None) -> None:
        self.port, self.source, self.bodies, self.path, self.keep = port, source, bodies, path, keep
        self.headers, self.paths = headers or {}, paths  # ``paths``: GET these in turn instead of posting ``bodies``
        self.outcomes: list[int | str] = []
        self.seconds: list[float] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(k,), daemon=True) for k in range(threads)]

    def __enter__(self) -> Looper:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=REQUEST_TIMEOUT)

    def run(self, k: int) -> None:
        connection = HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT, source_address=(self.source, 0))
        for n in range(100_000):  # bounded: until stopped
            if self.stop.is_set():
                break
            body = self.bodies[(k * 7 + n) % len(self.bodies)] if self.bodies else None
            sent = time.monotonic()
            try:
                if self.keep:
                    connection.request("POST", self.path, body, {"Content-Type": "application/json", **self.headers})
                    response = connection.getresponse()
                    response.read()
                    status = response.status
                elif self.paths:
                    status = request(self.port, "GET", self.paths[(k * 7 + n) % len(self.paths)], headers=self.headers,
                                     source=self.source, decode=False)[0]
                else:
                    status = request(self.port, "POST", self.path, body, headers=self.headers, source=self.source, decode=False)[0]
            except ConnectionRefusedError:
                self.outcomes.append("refused")
                break
            except (OSError, HTTPException) as exc:
                self.outcomes.append(type(exc).__name__)
                break
            self.seconds.append(time.monotonic() - sent)
            self.outcomes.append(status)
        connection.close()


def percentile(seconds: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``seconds`` (None when empty), rounded to the millisecond."""
    ordered = sorted(seconds)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 3) if ordered else None


def timed_one_by_one(port: int, bodies: list[bytes], source: str, path: str = "/v1/answer",
                     pause: float = 0.3) -> tuple[list[int | str], list[float]]:
    """``bodies`` sent one after another from ``source``, ``pause`` seconds apart: statuses and seconds."""
    statuses: list[int | str] = []
    seconds = []
    for body in bodies:
        sent = time.monotonic()
        statuses.append(request(port, "POST", path, body, source=source)[0])
        seconds.append(time.monotonic() - sent)
        time.sleep(pause)
    return statuses, seconds


class Bench:
    """The server under test, its probe, the questions, and the cases run so far."""

    def __init__(self, port: int, index_dir: Path, data_dir: Path, probe: Probe, pid: int, results: Path) -> None:
        self.port, self.index_dir, self.data_dir, self.probe, self.pid = port, index_dir, data_dir, probe, pid
        self.results = results  # the folder of eval runs the server shows (--results)
        self.fair: dict[str, Any] = {}
        self.figures: dict[str, Any] = {}
        self.stops: list[float] = []
        self.resets = 0
        self.questions = {lang: load_questions(dataset, "test", data_dir) for lang, dataset in DATASETS.items()}
        self.cases: list[Case] = []
        #: Run only the cases whose name holds one of these (a driver checking some cases alone); empty: every case.
        self.only: tuple[str, ...] = ()

    def wanted(self, name: str) -> bool:
        return not self.only or any(part in name for part in self.only)

    def case(self, name: str, category: str, expected: set[int], run: Callable[[Case], None]) -> None:
        if not self.wanted(name):
            return
        case = Case(name, category, expected)
        start = time.monotonic()
        try:
            run(case)
        except Exception as exc:  # a client-side failure is a finding, not a crash of the benchmark
            case.statuses.append(f"client error: {type(exc).__name__}")
        case.seconds = time.monotonic() - start
        time.sleep(0.2)  # the last probes of the case come back
        case.stall_s = self.probe.longest(start, time.monotonic())
        self.cases.append(case)
        print(f"{name}: {case.record()['statuses']} stall {case.stall_s:.3f} s", flush=True)

    def post(self, case: Case, path: str, body: bytes, content_type: str = "application/json") -> dict[str, Any] | bytes:
        status, data = request(self.port, "POST", path, body, {"Content-Type": content_type})
        case.statuses.append(status)
        return data

    def many(self, case: Case, bodies: list[bytes], workers: int) -> list[tuple[int, Any]]:
        """``bodies`` answered by ``workers`` clients at once (each body from a loopback address of its
        worker's: separate clients, as the server caps one client's requests in flight)."""
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(lambda n_b: request(self.port, "POST", "/v1/answer", n_b[1], source=spread(n_b[0] % workers)),
                                    enumerate(bodies)))
        case.statuses += [status for status, _ in results]
        return results


def hostile_cases(bench: Bench) -> None:
    port, en, zh = bench.port, bench.questions["en"], bench.questions["zh"]
    limits = request(port, "GET", "/v1/methods")[1]["limits"]  # what the server enforces: body size, head and body times
    max_body = limits["max_body_bytes"]
    q = en[0]
    ok = {"question": q.question, "options": q.options}

    def oversized(case: Case) -> None:
        case.statuses.append(raw_exchange(port, b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                                b"application/json\r\nContent-Length: %d\r\n\r\n" % (max_body + 1)))
        chunk = b" " * (max_body + 1)
        case.statuses.append(raw_exchange(port, b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked"
                                                b"\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk)))
        bench.post(case, "/v1/answer", json.dumps({**ok, "question": "x " * 10_001}).encode())
        bench.post(case, "/v1/answer", json.dumps({**ok, "question": "肺" * 6_001, "method": "pmi", "lang": "zh"}).encode())

    bench.case("oversized bodies and questions", "oversized", {413}, oversized)

    def long_paste(case: Case) -> None:
        line = "A: x" + " " * 136_000 + "y"
        bench.post(case, "/v1/parse", json.dumps({"text": f"Which drug?\n{line}\nB: Heparin"}).encode())
        bench.post(case, "/v1/parse", json.dumps({"text": "Which drug?\nA: x" + " " * 19_000 + "y\nB: Heparin"}).encode())

    bench.case("136 KB paste with a long space run (once quadratic)", "oversized", {200, 413}, long_paste)

    malformed = [
        (b"", "application/json"), (b"question=Why&options=A", "application/x-www-form-urlencoded"),
        (b'{"question": "Why \\ud800?", "options": {"A": "x", "B": "y"}}', "application/json"),
        (b'{"question": "\xff\xfe", "options": {"A": "x", "B": "y"}}', "application/json"),
        (b'{"question": 5, "options": {"A": "x", "B": "y"}}', "application/json"),
        (b'{"question": "Why?", "options": ["x", "y"]}', "application/json"),
        (b'{"question": "Why?", "options": {"A": "x", "B": "y"}, "top_n": "many"}', "application/json"),
        (b'{"question": "Why?", "options": {"A": "x", "A": "y"}}', "application/json"),
        (b'["Why?"]', "application/json"), (b"null", "application/json"), (b'{"question": "Why?", "options": {',
                                                                            "application/json"),
        (b'{"question": "Why?", "options": {"A": "x", "B": "y"}, "lang": "fr"}', "application/json"),
    ]

    def malformed_bodies(case: Case) -> None:
        for body, content_type in malformed:
            bench.post(case, "/v1/answer", body, content_type)
        bench.post(case, "/v1/parse", b'{"text": "\\udfff"}')

    bench.case("malformed bodies (empty, form, lone surrogate, not UTF-8, wrong types, repeated key)", "malformed",
               {400, 422}, malformed_bodies)

    def head(case: Case) -> None:
        for path in ("/", "/v1/health", "/v1/methods", "/static/app.js"):
            status, body = request(port, "HEAD", path)
            case.statuses.append(status if body in (b"", {}) else "body sent")

    bench.case("HEAD where GET works", "malformed", {200}, head)

    def foreign_host(case: Case) -> None:
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example"):
            case.statuses.append(request(port, "GET", "/v1/health", headers={"Host": host})[0])

    bench.case("foreign Host header (DNS rebinding)", "malformed", {403}, foreign_host)

    def paths(case: Case) -> None:
        status, data = request(port, "GET", "/v1/methods")
        text = json.dumps(data)
        case.statuses.append(status if str(bench.index_dir) not in text and str(bench.data_dir) not in text else "path leaked")

    bench.case("no absolute paths in /v1/methods", "malformed", {200}, paths)

    def trickle(case: Case) -> None:
        body = json.dumps(ok).encode()
        case.statuses.append(raw_exchange(port, raw_post(body), trickle=0.1, hang_up=True))

    bench.case("slow body: a byte every 0.1 s for 3 s, then gone", "slow", {"hung up"}, trickle)

    def slow_body_408(case: Case) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT) as sock:
            sock.sendall(b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{")
            reply = sock.recv(200)
        case.statuses.append(int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else "no reply")

    bench.case(f"slow body that never ends (answered 408 after {limits['body_seconds']:g} s)", "slow", {408}, slow_body_408)

    big_zh = [SimpleNamespace(question="".join(x.question for x in zh[i * 40:(i + 1) * 40])[:5_000],
                              options={k: v * 20 for k, v in zh[i].options.items()}) for i in range(4)]

    def largest_pmi(case: Case) -> None:
        bench.many(case, [answer_body(question, "pmi", "zh") for question in big_zh], 4)

    bench.case("slow: four Chinese PMI questions at the size limit at once", "slow", {200, 503}, largest_pmi)

    def disconnecting(case: Case) -> None:
        for question in big_zh:
            case.statuses.append(raw_exchange(port, raw_post(answer_body(question, "pmi", "zh")), hang_up=True))
        time.sleep(1)
        case.statuses.append(request(port, "POST", "/v1/answer", answer_body(zh[0], "pmi", "zh"))[0])

    bench.case("disconnecting: four large PMI questions, clients hang up", "disconnecting", {"hung up", 200}, disconnecting)

    def deep_and_huge(case: Case) -> None:
        for path in ("/v1/answer", "/v1/parse"):
            bench.post(case, path, b'{"question": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")
            bench.post(case, path, b'{"question": "Why?", "options": {"A": "x", "B": "y"}, "top_n": ' + b"9" * 5000 + b"}")

    bench.case("deeply nested JSON and a 5,000-digit number (answer, parse)", "malformed", {400}, deep_and_huge)

    def wrong_route(case: Case) -> None:
        for method, path in (("POST", "/v1/nothing"), ("POST", "/nothing"), ("PUT", "/v1/answer"), ("DELETE", "/v1/parse"),
                             ("POST", "/v1/health")):
            case.statuses.append(request(port, method, path, b"{not json")[0])

    bench.case("wrong route or method with a bad body", "malformed", {404, 405}, wrong_route)

    def loose_types(case: Case) -> None:
        for field_, value in (("top_n", "5"), ("top_n", True), ("evidence", 5.0), ("lang", 1)):
            bench.post(case, "/v1/answer", json.dumps({**ok, field_: value}).encode())

    bench.case('loose types ("top_n": "5", true, "evidence": 5.0) refused, not converted', "malformed", {422}, loose_types)

    def offline_pages(case: Case) -> None:
        for path in ("/redoc", "/docs", "/"):
            status, body = request(port, "GET", path)
            text = body.decode(errors="replace") if isinstance(body, bytes) else json.dumps(body)
            remote = [part for part in text.split('"') if part.startswith(("http://", "https://", "//"))]
            case.statuses.append(status if not remote else f"remote {remote[0][:60]}")
        page = request(port, "GET", "/")[1]
        if b"<noscript>" not in page or b'id="solve" disabled' not in page:
            case.statuses.append("page without a noscript message or with Solve on")

    bench.case("/redoc, /docs and the page load nothing remote; the page says it needs JavaScript", "malformed", {200},
               offline_pages)

    def same_examples(case: Case) -> None:
        seen = {json.dumps(request(port, "GET", f"/v1/examples?lang={lang}")[1]) for lang in ("en", "zh", "en", "zh")}
        case.statuses.append(200 if len(seen) == 2 else "examples differ between loads")

    bench.case("examples in the same order on every load", "malformed", {200}, same_examples)

    def trickled_heads(case: Case) -> None:
        socks = [socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT) for _ in range(50)]
        started = time.monotonic()
        for sock in socks[1::2]:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nX-Slow: ")
        open_ = set(range(len(socks)))
        while open_ and time.monotonic() - started < limits["header_seconds"] + 5:
            for k in list(open_):
                try:
                    if k % 2:
                        socks[k].sendall(b"x")
                    gone = socks[k].recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    open_.discard(k)
            time.sleep(0.5)
        case.statuses += ["closed"] * (len(socks) - len(open_)) + ["still open"] * len(open_)
        case.note = f"50 sockets (25 trickling a header byte every 0.5 s, 25 silent): closed within {time.monotonic() - started:.1f} s"
        for sock in socks:
            sock.close()

    bench.case(f"trickled and silent request heads cut off ({limits['header_seconds']:g} s)", "slow", {"closed"}, trickled_heads)

    def concurrent(case: Case) -> None:
        bodies = [answer_body(qs[n], method, lang) for n in range(25) for lang, qs in bench.questions.items()
                  for method in METHODS]
        alone = {b: request(port, "POST", "/v1/answer", b) for b in bodies[:20]}
        together = bench.many(case, bodies * 2, 20)
        differ = sum(result != alone[b] for b, result in zip(bodies * 2, together, strict=True) if b in alone)
        case.note = f"{len(bodies) * 2} requests by 20 clients; {differ} of those also asked alone answered differently"
        if differ:
            case.statuses.append("differs from alone")

    bench.case("concurrent: 20 clients, en and zh, ir-custom and pmi", "concurrent", {200}, concurrent)

    heavy = heavy_bodies(zh, big_zh)

    def fair(case: Case) -> None:
        stop, latencies = threading.Event(), []

        def english(k: int) -> None:
            for n in range(100_000):  # bounded: until the heavy requests are answered
                if stop.is_set():
                    return
                sent = time.monotonic()
                status, _ = request(port, "POST", "/v1/answer", answer_body(en[(k * 50 + n) % len(en)], "ir-custom", "en"),
                                    source=f"127.0.0.{60 + k}")
                latencies.append(time.monotonic() - sent)
                if status != 200:
                    case.statuses.append(f"en {status}")

        clients = [threading.Thread(target=english, args=(k,), daemon=True) for k in range(2)]
        with ThreadPoolExecutor(len(heavy)) as pool:
            answers = pool.map(lambda n_b: request(port, "POST", "/v1/answer", n_b[1], source=spread(n_b[0]))[0], enumerate(heavy))
            time.sleep(0.5)
            for client in clients:
                client.start()
            case.statuses += list(answers)
        stop.set()
        for client in clients:
            client.join(timeout=REQUEST_TIMEOUT)
        ordered = sorted(latencies)
        bench.fair = {"english_requests": len(ordered), "english_p50_s": round(ordered[len(ordered) // 2], 3),
                      "english_p95_s": round(ordered[int(len(ordered) * 0.95)], 3), "english_max_s": round(ordered[-1], 3)}
        case.note = (f"{len(heavy)} heavy zh requests (8 ir-custom of 10,000 characters with top_n 100, 4 PMI at its size "
                     f"limit) beside 2 English ir-custom clients: {bench.fair}")

    bench.case("fair: English answers while heavy Chinese requests run", "fairness", {200, 503}, fair)

    def left_early(case: Case) -> None:
        for body in heavy[:4]:
            case.statuses.append(raw_exchange(port, raw_post(body), hang_up=True, linger=0.5))
        time.sleep(1.5)
        before = cpu_seconds(bench.pid)
        time.sleep(3)
        busy = cpu_seconds(bench.pid) - before
        case.note = f"server CPU from 1.5 s to 4.5 s after the clients left: {busy:.2f} s"
        case.statuses.append("idle" if busy < 0.5 else f"busy {busy:.1f} s")

    bench.case("four heavy requests whose clients leave at 0.5 s: the work stops", "disconnecting", {"hung up", "idle"},
               left_early)


def with_top_n(body: bytes, top_n: int) -> bytes:
    """An answer request's body asking for ``top_n`` paragraphs per option (over 20: heavy)."""
    return json.dumps({**json.loads(body), "top_n": top_n}).encode()


def client_cases(bench: Bench) -> None:
    """Heavy capacity shared per client and language: a second client's heavy requests and English
    answers beside one client looping heavy work (clients are loopback addresses: 127.0.0.1 loops,
    127.0.0.2 is the second client, 127.0.0.3 asks English questions)."""
    port, en, zh = bench.port, bench.questions["en"], bench.questions["zh"]
    text = "".join(q.question for q in zh[:300])
    pmi = [json.dumps({"question": text[n * 120:n * 120 + 2_500 + 500 * (n % 5)], "options": zh[n].options,
                       "method": "pmi", "lang": "zh"}).encode() for n in range(20)]  # in-limit heavy PMI: 2,500-4,500 chars
    english = [answer_body(q, "ir-custom", "en") for q in en[:50]]
    second = [with_top_n(answer_body(en[n], "ir-custom", "en") if n % 2 else answer_body(zh[n], "ir-custom", "zh"), 50)
              for n in range(10)]
    en_text = " ".join(q.question for q in en[:200])
    searches = [json.dumps({"query": en_text[n * 50:n * 50 + 19_900], "lang": "en", "k": 10}).encode() for n in range(12)]

    def beside(case: Case, looping: list[Looper], asked: list[bytes], path: str, key: str) -> None:
        """``looping`` running, ``asked`` sent one by one by the second client, English asked meanwhile."""
        with contextlib.ExitStack() as stack:
            for looper in looping:
                stack.enter_context(looper)
            asking = stack.enter_context(Looper(port, "127.0.0.3", english, 2))
            time.sleep(2)  # the looping clients' heavy jobs hold what they may
            statuses, seconds = timed_one_by_one(port, asked, "127.0.0.2", path)
        for looper in looping:
            case.statuses += looper.outcomes
        case.statuses += [s if s == 200 else f"second client {s}" for s in statuses]
        case.statuses += [s if s == 200 else f"English {s}" for s in asking.outcomes]
        bench.figures[key] = round(max(seconds), 3)
        bench.figures[f"english_p95_{key.removesuffix('_max_s')}_s"] = percentile(asking.seconds, 0.95)
        loops = sum(len(looper.seconds) for looper in looping)
        case.note = (f"second client: max {max(seconds):.2f} s, median {sorted(seconds)[len(seconds) // 2]:.2f} s over "
                     f"{len(seconds)}; looping client(s) answered {loops} (median "
                     f"{percentile([t for looper in looping for t in looper.seconds], 0.5)} s); English p95 "
                     f"{percentile(asking.seconds, 0.95)} s over {len(asking.seconds)}")

    bench.case("a second client's heavy requests (en, zh; top_n 50) beside one looping in-limit zh PMI on 4 connections",
               "fairness", {200, 503},
               lambda case: beside(case, [Looper(port, "127.0.0.1", pmi, 4)], second, "/v1/answer",
                                   "second_client_heavy_max_s"))
    bench.case("a second client's heavy requests beside one looping heavy questions in both languages", "fairness", {200, 503},
               lambda case: beside(case, [Looper(port, "127.0.0.1", pmi, 2),
                                          Looper(port, "127.0.0.1", [with_top_n(b, 100) for b in english], 2)],
                                   second, "/v1/answer", "second_client_heavy_two_languages_max_s"))
    bench.case("a second client's 19,900-character searches beside one looping them on 4 connections", "fairness", {200, 503},
               lambda case: beside(case, [Looper(port, "127.0.0.1", searches, 4, "/v1/search")], searches[:6], "/v1/search",
                                   "second_client_search_max_s"))

    def heavy_searches(case: Case) -> None:
        looping = [Looper(port, f"127.0.0.{10 + n}", searches[n:] + searches[:n], 1, "/v1/search") for n in range(12)]
        with contextlib.ExitStack() as stack:
            for looper in looping:
                stack.enter_context(looper)
            asking = stack.enter_context(Looper(port, "127.0.0.3", english, 2))
            time.sleep(8)
        for looper in looping:
            case.statuses += looper.outcomes
        case.statuses += [s if s == 200 else f"English {s}" for s in asking.outcomes]
        bench.figures["english_p95_under_heavy_searches_s"] = percentile(asking.seconds, 0.95)
        case.note = (f"12 clients looping 19,900-character searches for 8 s ({sum(len(x.seconds) for x in looping)} "
                     f"answered); English p50 {percentile(asking.seconds, 0.5)} s, p95 {percentile(asking.seconds, 0.95)} s "
                     f"over {len(asking.seconds)}")

    bench.case("English answers while 12 clients loop 19,900-character searches", "fairness", {200, 503}, heavy_searches)

    def own_turns(case: Case) -> None:
        own = [with_top_n(answer_body(q, "ir-custom", "en"), 50) for q in en[:5]]
        with Looper(port, "127.0.0.1", pmi, 4) as looping:
            time.sleep(2)
            statuses, seconds = timed_one_by_one(port, own, "127.0.0.1")
        case.statuses += looping.outcomes + [s if s == 200 else f"own English {s}" for s in statuses]
        bench.figures["own_english_heavy_beside_own_zh_max_s"] = round(max(seconds), 3)
        case.note = (f"its English heavy questions: max {max(seconds):.2f} s (a turn beside its queued Chinese ones, "
                     f"whose median was {percentile(looping.seconds, 0.5)} s)")

    bench.case("a looping client's own heavy English takes turns with its queued heavy Chinese", "fairness", {200, 503},
               own_turns)


#: Questions in each of the long runs (past the 20,000 a run's listing holds): comparing two takes seconds.
LONG_RUN = 25_000


def write_run(folder: Path, name: str, questions: list[Any], seed: int, record: dict[str, Any] | None = None) -> None:
    """A run as ``openqa eval`` writes it (its record, naming its predictions file by digest in
    ``result_files``, and the predictions), of seeded random probabilities: over ``questions`` (real
    ones: matched by content, their texts shown) or, given a number, that many made-up questions."""
    rng = random.Random(seed)
    items = questions if isinstance(questions, list) else [SimpleNamespace(qid=f"long-{i}", digest=lambda i=i: f"d{i}",
                                                                            answer_idx="ABCD"[i % 4]) for i in range(questions)]
    rows = []
    for question in items:
        weights = [rng.random() for _ in range(4)]
        probabilities = {letter: round(w / sum(weights), 4) for letter, w in zip("ABCD", weights, strict=True)}
        prediction = max(probabilities, key=probabilities.__getitem__)
        rows.append({"qid": question.qid, "digest": question.digest(), "prediction": prediction, "answer": question.answer_idx,
                     "correct": prediction == question.answer_idx, "confidence": probabilities[prediction],
                     "probabilities": probabilities})
    predictions = "".join(json.dumps(row) + "\n" for row in rows)
    (folder / f"{name}.predictions.jsonl").write_text(predictions)
    right = sum(row["correct"] for row in rows)
    files = {f"{name}.predictions.jsonl": hashlib.sha256(predictions.encode()).hexdigest()}
    (folder / f"{name}.json").write_text(json.dumps({"dataset": "us", "split": "test", "method": name, "n": len(rows),
                                                     "accuracy": round(100 * right / len(rows), 2), "result_files": files,
                                                     **(record or {})}))


#: What the qids of the predictions outside the results folder start with: no reply may hold it.
OUTSIDE = "outside-"


def results_folder(folder: Path, outside: Path, questions: list[Question]) -> None:
    """The folder ``openqa serve --results`` reads: three runs of the US test questions, two long runs of
    made-up questions, faulty ones (a NaN confidence, rows that are no JSON, a NaN accuracy, a record
    without its predictions, a run linked from ``outside`` the folder, a record inside whose predictions
    file links out), and ``twice.json`` directly inside (30 questions), in ``runs/us`` (20) and in a
    hidden folder."""
    for n, name in enumerate(("us-test-a", "us-test-b", "us-test-c")):
        write_run(folder, name, questions, n)
    write_run(folder, "long-a", LONG_RUN, 10)
    write_run(folder, "long-b", LONG_RUN, 11)
    write_run(folder, "nan-confidence", questions[:20], 20)
    lines = (folder / "nan-confidence.predictions.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"confidence": ', '"confidence": NaN, "was": ')
    (folder / "nan-confidence.predictions.jsonl").write_text("\n".join(lines) + "\n")
    write_run(folder, "bad-rows", questions[:20], 21)
    (folder / "bad-rows.predictions.jsonl").write_text("no json here\n")
    write_run(folder, "nan-accuracy", questions[:20], 22, {"accuracy": float("nan")})
    write_run(folder, "half-written", questions[:20], 23)
    (folder / "half-written.predictions.jsonl").unlink()
    write_run(outside, "secret", questions[:20], 24)
    for suffix in (".json", ".predictions.jsonl"):
        (folder / f"link-out{suffix}").symlink_to(outside / f"secret{suffix}")
    write_run(outside, "elsewhere", [SimpleNamespace(qid=f"{OUTSIDE}{i}", digest=lambda i=i: f"o{i}", answer_idx="A")
                                     for i in range(20)], 25)
    write_run(folder, "half-link", questions[:20], 26)
    (folder / "half-link.predictions.jsonl").unlink()
    (folder / "half-link.predictions.jsonl").symlink_to(outside / "elsewhere.predictions.jsonl")
    for where, n, seed in (("", 30, 27), ("runs/us", 20, 28), (".hidden", 20, 29)):
        (folder / where).mkdir(parents=True, exist_ok=True)
        write_run(folder / where, "twice", questions[:n], seed, {"method": f"twice in {where or 'the folder'}"})


def results_cases(bench: Bench) -> None:
    """Every endpoint of ``openqa serve --results``: the listing, a run's questions and curves, the
    comparison, with hostile names (escaping the folder: refused) and faulty runs, a run longer than a
    listing, a run name found in two folders, a record whose predictions link out; one client's jobs in
    flight capped (429); comparisons whose clients leave; and light clients beside comparisons and
    beside costly Chinese PMI questions (work weighed by cost, not characters)."""
    port, folder = bench.port, bench.results
    readable = ["us-test-a.json", "us-test-b.json", "us-test-c.json", "long-a.json", "long-b.json"]
    long_compare = "/v1/compare?runs=long-a.json,long-b.json"
    english = [answer_body(q, "ir-custom", "en") for q in bench.questions["en"][:50]]

    def get(case: Case, path: str, check: Callable[[Any], bool] = lambda data: True, source: str = "127.0.0.1") -> Any:
        status, data = request(port, "GET", path, source=source)
        case.statuses.append(status if status != 200 or check(data) else f"{path}: not as expected")
        if isinstance(data, dict) and (str(folder) in json.dumps(data) or str(folder.resolve()) in json.dumps(data)):
            case.statuses.append(f"{path}: an absolute path")
        return data

    def listing(case: Case) -> None:
        get(case, "/results", lambda page: b"<html" in page)
        runs = {row["run"]: row for row in get(case, "/v1/results")["runs"]}
        unreadable = {name for name, row in runs.items() if "unreadable" in row}
        if (set(readable) - set(runs) or unreadable != {"nan-accuracy.json"} or runs["half-written.json"]["questions"]
                or "link-out.json" in runs):
            case.statuses.append(f"listed {sorted(runs)}, unreadable {sorted(unreadable)}")
        case.note = (f"{len(runs)} runs listed, {len(unreadable)} unreadable with its reason (a NaN accuracy), the one without "
                     "its predictions listed without questions to open; the link out of the folder not listed")

    bench.case("results: the listing (and the page), an unreadable run with its reason, links out left out", "results", {200}, listing)

    def questions(case: Case) -> None:
        for name in readable[:3]:
            get(case, f"/v1/results/{name}", lambda data: len(data["questions"]) == 1273 and data["questions"][0]["question"]
                and not data["cut"])
            get(case, f"/v1/results/{name}/curves", lambda data: data["n"] == 1273 and len(data["reliability"]) > 0)

    bench.case("results: each run's questions (with their text) and curves", "results", {200}, questions)

    def long_run(case: Case) -> None:
        get(case, "/v1/results/long-a.json", lambda data: len(data["questions"]) == 20_000 and data["cut"] and data["most"] == 20_000)
        get(case, "/v1/results/long-a.json/curves", lambda data: data["n"] == LONG_RUN)

    bench.case(f"results: a run of {LONG_RUN:,} questions: 20,000 listed and said to be cut, its curves of all", "results", {200}, long_run)

    def comparisons(case: Case) -> None:
        get(case, "/v1/compare?runs=us-test-a.json,us-test-b.json", lambda data: data["common_questions"] == 1273)
        get(case, "/v1/compare?runs=us-test-a.json,us-test-b.json,us-test-c.json", lambda data: len(data["pairs"]) == 2)
        started = time.monotonic()
        get(case, long_compare, lambda data: data["common_questions"] == LONG_RUN)
        case.note = f"two runs of {LONG_RUN:,} questions compared in {time.monotonic() - started:.1f} s"

    bench.case("results: comparisons of two and three runs, and of two long runs", "results", {200}, comparisons)

    hostile = ["r" * 300 + ".json", "..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", ".hidden.json", "link-out.json", "nope.json",
               "half-written.json", "us-test-a.json%00.json", "%E2%80%AE.json"]

    def hostile_names(case: Case) -> None:
        for name in hostile:
            for path in (f"/v1/results/{name}", f"/v1/results/{name}/curves", f"/v1/compare?runs=us-test-a.json,{name}"):
                get(case, path)

    bench.case("results: hostile run names on every endpoint (300 characters, ../, absolute, hidden, a link out, NUL)", "results",
               {400, 404}, hostile_names)

    def endpoints(name: str) -> tuple[str, str, str]:
        """The run ``name``'s questions, its curves and its comparison with another run (``name`` as a URL sends it)."""
        return f"/v1/results/{name}", f"/v1/results/{name}/curves", f"/v1/compare?runs=us-test-a.json,{name}"

    def refused(case: Case, path: str, says: str = "") -> None:
        """``GET path``: its status where the reply is an error of one line (saying ``says``) that shows
        neither the folder's absolute path nor anything of the predictions outside it, else what it showed."""
        status, data = request(port, "GET", path)
        error = data.get("error") if isinstance(data, dict) else None
        shown = json.dumps(data) if isinstance(data, dict) else data.decode(errors="replace")
        leaked = OUTSIDE in shown or str(folder) in shown or str(folder.resolve()) in shown
        one_line = isinstance(error, str) and "\n" not in error and says in error
        case.statuses.append(status if one_line and not leaked else f"{status}: {shown[:80]}")

    def faulty(case: Case) -> None:
        for name in ("nan-confidence.json", "bad-rows.json"):
            for path in endpoints(name):
                refused(case, path, name.split(".")[0])

    bench.case("results: faulty runs (a NaN confidence, rows that are no JSON) refused in one line naming them", "results", {400}, faulty)

    def twice(case: Case) -> Any:
        """The listing's rows of ``twice.json``, each as (folder, method, questions)."""
        return sorted((row.get("folder"), row.get("method"), row.get("n")) for row in get(case, "/v1/results")["runs"]
                      if row["run"] == "twice.json")

    def same_name_listed(case: Case) -> None:
        rows = twice(case)
        if rows != [("", "twice in the folder", 30), ("runs/us", "twice in runs/us", 20)]:
            case.statuses.append(f"twice.json listed as {rows}")
        case.note = f"twice.json listed as {rows} (the one in a hidden folder left out)"

    bench.case("results: one run name directly inside and in runs/us: two rows, by folder and name", "results", {200},
               same_name_listed)

    def of(n: int, key: str) -> Callable[[Any], bool]:
        """Whether a reply is of ``n`` questions: its ``key`` lists them (``questions``) or counts them (``n``)."""
        return lambda data: (len(data[key]) if isinstance(data[key], list) else data[key]) == n

    def same_name_opened(case: Case) -> None:
        for name, n in (("twice.json", 30), ("twice", 30), ("runs/us/twice.json", 20), ("runs%2Fus%2Ftwice.json", 20),
                        ("runs/us/twice", 20)):  # the page sends its folder and name URL-encoded
            get(case, f"/v1/results/{name}", of(n, "questions"))
            get(case, f"/v1/results/{name}/curves", of(n, "n"))
        get(case, "/v1/compare?runs=twice.json,runs/us/twice.json",
            lambda data: data["common_questions"] == 20 and len(data["pairs"]) == 1)

    bench.case("results: one run name in two folders: each opened as its own run (runs/us/NAME), and compared", "results", {200},
               same_name_opened)

    def predictions_out(case: Case) -> None:
        rows = [row for row in get(case, "/v1/results")["runs"] if row["run"] == "half-link.json"]
        if any(row.get("questions") for row in rows):
            case.statuses.append("offered for opening: its predictions link out of the folder")
        for path in endpoints("half-link.json"):
            refused(case, path)
        case.note = f"listed as {[{k: row.get(k) for k in ('run', 'questions', 'unreadable')} for row in rows]}"

    bench.case("results: a record whose predictions link out of the folder: not offered, refused in one line, nothing outside read",
               "results", {200, 400, 404}, predictions_out)

    escaping = [f"../{folder.name}/us-test-a.json", "runs/../twice.json", "runs/us/../../us-test-a.json",
                str(folder.resolve() / "us-test-a.json"), ".hidden/twice.json", "runs/.hidden/twice.json", "runs/us/.twice.json"]

    def escaping_names(case: Case) -> None:
        for name in escaping:
            for path in {*endpoints(quote(name, safe="/")), *endpoints(quote(name, safe=""))}:
                refused(case, path)

    bench.case("results: run names with '..', an absolute path or a hidden part refused (400) on run, curves and compare", "results",
               {400}, escaping_names)

    def compare_refusals(case: Case) -> None:
        started = time.monotonic()
        for runs in (",".join(f"us-test-{x}.json" for x in "abcabcabc"), "us-test-a.json,us-test-a.json",
                     "us-test-a.json,us-test-a", ",".join(["long-a.json"] * 400), "", ",", "us-test-a.json"):
            get(case, f"/v1/compare?runs={runs}")
        case.note = f"7 refusals in {time.monotonic() - started:.2f} s (a 4.8 KB URL of one run 400 times used to hold a core 31-36 s)"

    bench.case("results: compare refusals (9 runs, a run twice, one run 400 times, none, one)", "results", {400}, compare_refusals)

    def methods(case: Case) -> None:
        for method, path in (("HEAD", "/v1/results"), ("HEAD", "/results"), ("POST", "/v1/results"), ("DELETE", "/v1/compare"),
                             ("PUT", "/v1/results/us-test-a.json")):
            status, body = request(port, method, path)
            case.statuses.append(status if method != "HEAD" or body in (b"", {}) else "HEAD with a body")

    bench.case("results: HEAD where GET works, other methods refused", "results", {200, 405}, methods)

    def capped(send: Callable[[int], int | str], what: str) -> Callable[[Case], None]:
        def run(case: Case) -> None:
            cap, statuses = past_cap(port, send)
            case.statuses += statuses
            if 429 not in statuses:
                case.statuses.append("no request refused past the cap")
            case.note = f"{cap + 4} {what} at once from one client whose cap is {cap} jobs in flight: {sorted(statuses, key=str)}"
        return run

    # comparisons, not a run's curves: those are sent as kept after the first read, each done before the next is sent
    bench.case("a client's jobs in flight capped: comparisons of two long runs past its cap get a 429", "clients", {200, 429, 503},
               capped(lambda _: request(port, "GET", long_compare, source="127.0.0.9")[0], "comparisons of two long runs"))
    big_pmi = heavy_bodies(bench.questions["zh"], [])[:4]
    bench.case("a client's jobs in flight capped: heavy Chinese questions past its cap get a 429", "clients", {200, 429, 503},
               capped(lambda n: request(port, "POST", "/v1/answer", big_pmi[n % 4], source="127.0.0.10")[0], "heavy Chinese questions"))

    def left(case: Case) -> None:
        head = b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % long_compare.encode()
        for _ in range(4):
            case.statuses.append(raw_exchange(port, head, hang_up=True, linger=0.5))
        time.sleep(1.5)
        before = cpu_seconds(bench.pid)
        time.sleep(3)
        busy_s = cpu_seconds(bench.pid) - before
        case.note = f"server CPU from 1.5 s to 4.5 s after the clients left: {busy_s:.2f} s"
        case.statuses.append("idle" if busy_s < 0.5 else f"busy {busy_s:.1f} s")

    bench.case("four long comparisons whose clients leave at 0.5 s: the work stops", "disconnecting", {"hung up", "idle"}, left)

    def english_beside(case: Case, looper: Looper, figure: str, what: str) -> None:
        """English asked by a light client for 10 s while ``looper`` keeps its load up; its p95 as ``figure``."""
        with looper as looping:
            asking = Looper(port, "127.0.0.3", english, 2)
            with asking:
                time.sleep(10)
        case.statuses += looping.outcomes + [s if s == 200 else f"English {s}" for s in asking.outcomes]
        bench.figures[figure] = percentile(asking.seconds, 0.95)
        case.note = (f"{what} ({len(looping.seconds)} answered, median {percentile(looping.seconds, 0.5)} s); English p50 "
                     f"{percentile(asking.seconds, 0.5)} s, p95 {percentile(asking.seconds, 0.95)} s over {len(asking.seconds)}")

    def beside_comparisons(case: Case) -> None:
        english_beside(case, Looper(port, "127.0.0.7", [], 4, paths=[long_compare, "/v1/results/long-a.json/curves"]),
                       "english_p95_beside_comparisons_s", "one client looping long comparisons and curves on 4 connections")

    bench.case("English answers beside a client looping long comparisons", "fairness", {200, 429, 503}, beside_comparisons)

    zh = bench.questions["zh"]
    text = "".join(q.question for q in zh[:100])
    costly = [json.dumps({"question": text[n * 50:n * 50 + 1_000], "method": "pmi", "lang": "zh",
                          "options": {letter: (text[n * 70 + k * 240:n * 70 + (k + 1) * 240]) for k, letter in enumerate("ABCD")}},
                         ensure_ascii=False).encode() for n in range(8)]  # 1,960 characters: under the old 2,000 heavy mark

    def beside_costly(case: Case) -> None:
        english_beside(case, Looper(port, "127.0.0.8", costly, 4), "english_p95_beside_costly_pmi_s",
                       "one client keeping four 1,960-character Chinese PMI questions (four 240-character options) in flight")

    bench.case("English answers beside a client keeping four costly Chinese PMI questions in flight (weighed by cost)", "fairness",
               {200, 503}, beside_costly)

    def beside_run_reads(case: Case) -> None:
        english_beside(case, Looper(port, "127.0.0.11", [], 8, paths=["/v1/results/long-a.json", "/v1/results"]),
                       "english_p95_beside_run_reads_s", f"one client keeping 8 reads of a {LONG_RUN:,}-question run's "
                       "questions and the listing in flight (the first read heavy by size, encoded on the workers; "
                       "the later ones of the unchanged run sent as kept)")

    bench.case(f"English answers beside a client keeping 8 reads of a {LONG_RUN:,}-question run in flight", "fairness",
               {200, 429, 503}, beside_run_reads)

    en = bench.questions["en"]
    large = [json.dumps({"question": en[n].question, "evidence": 20, "top_n": 20, "method": "ir-custom", "lang": "en",
                         "options": {letter: (q.question * 2)[:300] for letter, q in zip("ABCDEFGHIJ", en[n + 1:n + 11])}}).encode()
             for n in range(8)]  # 10 options of 300 characters, 20 paragraphs each: 200 a reply

    def beside_large_answers(case: Case) -> None:
        english_beside(case, Looper(port, "127.0.0.12", large, 8), "english_p95_beside_large_answers_s",
                       "one client keeping 8 answers of 10 options of 300 characters with 20 evidence paragraphs each in flight "
                       "(200 paragraphs a reply: heavy, encoded on the workers)")

    bench.case("English answers beside a client keeping 8 answers with 200 evidence paragraphs in flight", "fairness",
               {200, 429, 503}, beside_large_answers)

    def forwarded_for(case: Case) -> None:
        cap, statuses = past_cap(port, lambda n: request(port, "POST", "/v1/answer", big_pmi[n % 4],
                                                         {"X-Forwarded-For": f"10.{n}.{n}.{n}"}, source="127.0.0.13")[0])
        case.statuses += statuses
        if 429 not in statuses:
            case.statuses.append("no request refused past the cap: X-Forwarded-For chose the client")
        case.note = f"{cap + 4} heavy requests from one address, each naming another X-Forwarded-For: {sorted(statuses, key=str)}"

    bench.case("X-Forwarded-For from loopback picks no client key: one address past its cap gets a 429", "clients",
               {200, 429, 503}, forwarded_for)

    def second_compare(case: Case) -> None:
        short = ["/v1/compare?runs=us-test-a.json,us-test-b.json", "/v1/compare?runs=us-test-b.json,us-test-c.json"]
        with Looper(port, "127.0.0.7", [], 4, paths=[long_compare]):
            time.sleep(2)
            seconds = []
            for path in short * 2:
                sent = time.monotonic()
                status = request(port, "GET", path, source="127.0.0.2")[0]
                seconds.append(time.monotonic() - sent)
                case.statuses.append(status if status == 200 else f"second client {status}")
        bench.figures["compare_beside_long_comparisons_max_s"] = round(max(seconds), 3)
        case.note = (f"a second client's comparisons of 1,273 questions: max {max(seconds):.2f} s beside one looping long comparisons "
                     "(a comparison is no answer: not held to the 2 s of a second client's heavy answers; both share the "
                     "server's one Python process with the long ones)")

    bench.case("a second client's comparisons beside one looping long comparisons", "fairness", {200, 429, 503}, second_compare)


def swap_cases(bench: Bench, env: dict[str, str]) -> None:
    """The English custom index rebuilt, deleted and rebuilt again while clients ask questions."""
    port, en = bench.port, bench.questions["en"]
    bodies = [answer_body(en[n], "ir-custom", "en") for n in range(40)]

    def under_load(case: Case, action: Callable[[], None]) -> None:
        stop, statuses, errors = threading.Event(), [], []

        def client(k: int) -> None:
            deadline = time.monotonic() + 600
            for n in range(100_000):  # bounded: until the action is done (or 10 minutes)
                if stop.is_set() or time.monotonic() > deadline:
                    return
                status, data = request(port, "POST", "/v1/answer", bodies[(k * 7 + n) % len(bodies)])
                statuses.append(status)
                if status not in case.expected and isinstance(data, dict) and len(errors) < 3:
                    errors.append(f"{status}: {data.get('error')}")

        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(6)]
        for thread in threads:
            thread.start()
        try:
            action()
            time.sleep(1)
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=REQUEST_TIMEOUT)
        case.statuses += statuses
        if errors:
            case.note = "; ".join(filter(None, [case.note, f"first unexpected: {' | '.join(errors)}"]))

    def rebuild() -> None:
        subprocess.run([OPENQA, "index", "--lang", "en", "--engine", "custom", "--index-dir", str(bench.index_dir)],
                       env=env, check=True, capture_output=True, timeout=600)

    def rebuilt(case: Case) -> None:
        under_load(case, rebuild)
        reloads = request(port, "GET", "/v1/health")[1].get("reloads", [])
        case.note = f"reloads seen by /v1/health: {[(r['method'], r['lang'], r['ok']) for r in reloads]}"

    bench.case("index swapped under load: openqa index --lang en rebuilds it", "index swapped", {200}, rebuilt)

    def deleted(case: Case) -> None:
        def delete() -> None:
            shutil.rmtree(bench.index_dir / "en-custom")
            time.sleep(1)
            status, data = request(port, "GET", "/v1/health")
            case.note = f"health while deleted: {data.get('status')}: {'; '.join(data.get('changed', []))}"
        under_load(case, delete)

    bench.case("index deleted under load (503 naming the rebuild)", "index swapped", {200, 503}, deleted)

    def while_deleted(case: Case) -> None:
        took, error = [], {}
        for n in range(20):
            sent = time.monotonic()
            status, error = request(port, "POST", "/v1/answer", bodies[n])
            took.append(time.monotonic() - sent)
            case.statuses += [status, request(port, "POST", "/v1/answer", answer_body(bench.questions["zh"][n], "ir-custom", "zh"))[0]]
        changed = request(port, "GET", "/v1/health")[1].get("changed", [])
        named = "openqa index --lang en --engine custom" in str(error) and changed and all("en-custom" in c for c in changed)
        case.note = f"503 for en-custom: median {sorted(took)[len(took) // 2] * 1000:.0f} ms; {str(error)[:160]}"
        if not named:
            case.statuses.append("index or rebuild not named")

    bench.case("while deleted: quick 503s naming the index and its rebuild, zh still answered", "index swapped", {200, 503},
               while_deleted)

    def back(case: Case) -> None:
        rebuild()
        case.statuses.append(request(port, "POST", "/v1/answer", bodies[0])[0])

    bench.case("index rebuilt after deletion: answered again", "index swapped", {200}, back)


def compare_with_cli(bench: Bench, env: dict[str, str], per_lang_method: int) -> dict[str, Any]:
    """Served answers against ``openqa answer --json`` for the same questions: prediction and scores."""
    differing, compared, examples = 0, 0, []
    for lang, questions in bench.questions.items():
        for method in METHODS:
            for question in questions[:per_lang_method]:
                status, served = request(bench.port, "POST", "/v1/answer", answer_body(question, method, lang))
                cli = subprocess.run([OPENQA, "answer", "--json", "--lang", lang, "--method", method,
                                      "--index-dir", str(bench.index_dir), f"--question={question.question}",
                                      *[f"--option={k}={v}" for k, v in question.options.items()]],
                                     env=env, capture_output=True, text=True, timeout=600)
                compared += 1
                try:
                    expected = json.loads(cli.stdout)
                except ValueError:
                    expected = {"error": cli.stderr.strip()[-200:]}
                served = served if isinstance(served, dict) else {}
                same = status == 200 and expected.get("prediction") == served["prediction"] and \
                    [(o["letter"], o["score"]) for o in expected.get("options", [])] == \
                    [(o["letter"], o["score"]) for o in served["options"]]
                if not same:
                    differing += 1
                    examples.append({"lang": lang, "method": method, "qid": question.qid,
                                     "served": served.get("prediction") if status == 200 else status,
                                     "cli": expected.get("prediction", expected.get("error"))})
    return {"compared": compared, "differing": differing, "first_differing": examples[:5]}


def process_cases(bench: Bench, serve: list[str], env: dict[str, str], log: Path) -> list[Case]:
    """Cases of the process itself, each with a server of its own (but the busy-port one)."""
    cases = []

    def server_on(port: int, *flags: str) -> subprocess.Popen:
        """Another server like the one under test (with ``flags``), on ``port``, SIGINT at its default."""
        args = [*serve[:serve.index("--port") + 1], str(port), *serve[serve.index("--port") + 2:], *flags]
        with open(log, "a") as out:
            return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    @contextlib.contextmanager
    def served(*flags: str) -> Iterator[int]:
        """A server like the one under test with ``flags`` on a port of its own, up (its port), stopped after."""
        port = free_port()
        server = server_on(port, *flags)
        try:
            wait_until_up(port, server)
            yield port
        finally:
            stop_process(server, signal.SIGTERM, 60)

    def refused_at_start(*flags: str, says: str = "", hides: str = "", one_line: bool = False,
                         own_port: bool = False) -> Callable[[Case], None]:
        """``openqa serve`` as the one under test with ``flags`` added (a flag given again replaces it), on
        its busy port or (``own_port``: a refusal made once the port is bound, as the methods open) a free
        one: its exit status, where it printed no URL of its own (it never listened), said ``says``,
        showed ``hides`` nowhere and (``one_line``) wrote one line; its last line the note."""
        def run(case: Case) -> None:
            port = free_port() if own_port else int(serve[serve.index("--port") + 1])
            try:
                result = subprocess.run([*serve, *flags, "--port", str(port)], env=env, capture_output=True, text=True,
                                        timeout=300)
            except subprocess.TimeoutExpired:
                case.statuses.append("still serving after 300 s")
                return
            listening = f":{port}/"
            out, lines = result.stdout + result.stderr, result.stderr.strip().splitlines()
            case.statuses.append("printed a URL" if listening in out else f"showed {hides!r}" if hides and hides in out
                                 else f"no word of {says!r}" if says not in result.stderr
                                 else f"{len(lines)} lines" if one_line and (len(lines) != 1 or result.stdout.strip())
                                 else result.returncode)
            case.note = lines[-1] if lines else ""
        return run

    def stop(signals: list[int], slow_client: bool, load: bool = False, flags: tuple[str, ...] = (),
             bodies: list[bytes] | None = None) -> Callable[[Case], None]:
        """A stop by ``signals`` of a server with ``flags``, with a slow-body client connected and
        (``load``) ``bodies`` in flight (default: 6 heavy zh requests)."""
        in_flight = heavy if bodies is None else bodies

        def run(case: Case) -> None:
            port = free_port()
            server = server_on(port, *flags)
            try:
                wait_until_up(port, server)
                client = socket.create_connection(("127.0.0.1", port)) if slow_client else None
                if client:
                    client.sendall(b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{")
                    time.sleep(0.3)
                pool = ThreadPoolExecutor(len(in_flight))
                answers = [pool.submit(request, port, "POST", "/v1/answer", b, source=spread(n))
                           for n, b in enumerate(in_flight if load else [])]
                time.sleep(2 if load else 0)  # the heavy requests are being scored
                started = time.monotonic()
                for sig in signals:
                    server.send_signal(sig)
                    time.sleep(0.5)
                server.wait(timeout=60)
                took = time.monotonic() - started
                case.note = f"exited {server.returncode} {took:.1f} s after the first signal"
                case.statuses.append(server.returncode)
                if load:
                    bench.stops.append(took)
                    answered = []
                    for answer in answers:
                        try:
                            answered.append(answer.result(timeout=REQUEST_TIMEOUT)[0])
                        except OSError as exc:  # a request the stopped server never answered
                            answered.append(type(exc).__name__)
                    case.statuses += answered
                    case.note += f"; {len(in_flight)} requests in flight answered {answered}"
                pool.shutdown()
                if client:
                    client.close()
            except subprocess.TimeoutExpired:
                case.statuses.append("still running after 60 s")
            finally:
                server.kill()
        return run

    def mixed(sig: int, churn: int) -> Callable[[Case], None]:
        """A stop while clients keep asking: 4 heavy zh, 3 English on kept-alive connections, ``churn``
        English clients opening a connection per request, and a slow-body client. Every request the
        server received must be answered (200, or a 503 saying it stops); a new connection after it
        stopped listening is refused; none is reset."""
        def run(case: Case) -> None:
            port = free_port()
            english = [answer_body(q, "ir-custom", "en") for q in bench.questions["en"][:60]]
            server = server_on(port)
            try:
                wait_until_up(port, server)
                slow = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT)
                slow.sendall(b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{")
                kinds = {"heavy zh": [Looper(port, "127.0.0.1", heavy, 4)],
                         "kept-alive en": [Looper(port, "127.0.0.2", english, 3, keep=True)],
                         **({"en, a connection per request": [Looper(port, f"127.0.0.{30 + k}", english, 1) for k in range(churn)]}
                            if churn else {})}  # each churning client from an address of its own: clients, not one over its cap
                loopers = [looper for group in kinds.values() for looper in group]
                with contextlib.ExitStack() as stack:
                    for looper in loopers:
                        stack.enter_context(looper)
                    time.sleep(2)  # heavy requests are being scored, the others come and go
                    started = time.monotonic()
                    server.send_signal(sig)
                    server.wait(timeout=60)
                    took = time.monotonic() - started
                reply = slow.recv(200)
                slow.close()
                bench.stops.append(took)
                outcomes = [o for looper in loopers for o in looper.outcomes]
                slow_status = int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/") else "slow: no reply"
                case.statuses += [server.returncode, slow_status, *outcomes]
                resets = {kind: sum(o in RESETS for looper in group for o in looper.outcomes) for kind, group in kinds.items()}
                bench.resets += sum(resets.values())
                case.note = (f"exited {server.returncode} {took:.2f} s after the signal; {len(outcomes)} requests "
                             f"({sum(o == 503 for o in outcomes)} answered 503, {outcomes.count('refused')} refused "
                             f"after it stopped listening, reset: {resets}); slow-body client: {reply[:12]!r}")
            except subprocess.TimeoutExpired:
                case.statuses.append("still running after 60 s")
            finally:
                server.kill()
        return run

    def during_compare(sig: int) -> Callable[[Case], None]:
        """A stop while four clients wait for comparisons of two long runs (seconds each): the server
        is gone within 5 s and each comparison is answered (a 503 saying it stops)."""
        def run(case: Case) -> None:
            port = free_port()
            server = server_on(port)
            try:
                wait_until_up(port, server)
                with ThreadPoolExecutor(4) as pool:
                    asked = [pool.submit(request, port, "GET", "/v1/compare?runs=long-a.json,long-b.json", source=spread(n))
                             for n in range(4)]
                    time.sleep(2)  # the comparisons are reading and resampling
                    started = time.monotonic()
                    server.send_signal(sig)
                    server.wait(timeout=60)
                    took = time.monotonic() - started
                    answered = []
                    for future in asked:
                        try:
                            answered.append(future.result(timeout=REQUEST_TIMEOUT)[0])
                        except OSError as exc:
                            answered.append(type(exc).__name__)
                bench.stops.append(took)
                case.statuses += [server.returncode, *answered]
                case.note = f"exited {server.returncode} {took:.2f} s after the signal; comparisons in flight answered {answered}"
            except subprocess.TimeoutExpired:
                case.statuses.append("still running after 60 s")
            finally:
                server.kill()
        return run

    def behind_one_proxy(case: Case) -> None:
        """``--client-header X-Client-Id``: users behind one proxy (one address) told apart by the header it
        sets: a light user's English answers beside a heavy user's looping Chinese questions, and the
        heavy user's requests past its cap refused (429) while the light one is still answered."""
        with served("--client-header", "X-Client-Id") as port:
            english = [answer_body(q, "ir-custom", "en") for q in bench.questions["en"][:50]]
            with Looper(port, "127.0.0.1", heavy, 4, headers={"X-Client-Id": "heavy-user"}) as looping:
                asking = Looper(port, "127.0.0.1", english, 2, headers={"X-Client-Id": "light-user"})
                with asking:
                    time.sleep(8)
            cap, greedy = past_cap(port, lambda n: request(port, "POST", "/v1/answer", heavy[n % len(heavy)],
                                                           {"X-Client-Id": "greedy-user"})[0])
            case.statuses += looping.outcomes + [s if s == 200 else f"light user {s}" for s in asking.outcomes] + greedy
            if 429 not in greedy:
                case.statuses.append("no request of one user refused past its cap")
            bench.figures["english_p95_behind_one_proxy_s"] = percentile(asking.seconds, 0.95)
            case.note = (f"one address, two users: the light user's p95 {percentile(asking.seconds, 0.95)} s over "
                         f"{len(asking.seconds)} beside the heavy one's {len(looping.seconds)} answered; a third user's "
                         f"{cap + 4} heavy requests at once: {sorted(greedy, key=str)}")

    def last_value_counts(lines: Callable[[int], list[str]]) -> Callable[[Case], None]:
        """``--client-header X-Client-Id``: the cap and 8 more heavy requests at once from one address,
        request ``n`` with the header ``lines(n)``: a value of the client's own (another each time)
        before the proxy's ``proxy-user``. The last value counts: one client, refused (429) past its cap."""
        def run(case: Case) -> None:
            with served("--client-header", "X-Client-Id") as port:
                cap, statuses = past_cap(port, lambda n: raw_exchange(port, raw_post(heavy[n % len(heavy)], *lines(n))), 8)
            case.statuses += statuses
            if 429 not in statuses:
                case.statuses.append("no request refused past the cap: the client's own value chose the client")
            case.note = f"{cap + 8} heavy requests at once, headers as {lines(0)}: {sorted(statuses, key=str)}"
        return run

    def named_ensemble_and_bank(case: Case) -> None:
        """``--ensemble bank`` with an English ``--bank`` file in a private folder, both languages: the
        ensembles and banks of both are available, the folder reaches no client, and an answer of the
        ensemble shows its solved questions."""
        private = log.parent / "private-folder-of-the-operator"
        private.mkdir(exist_ok=True)
        bank = private / "course-en.jsonl"
        bank.write_text("".join(json.dumps({"question": q.question, "options": q.options, "answer_idx": q.answer_idx,
                                            "answer": q.options[q.answer_idx]}) + "\n" for q in bench.questions["en"][:20]))
        with served("--method", "ir-custom,bank,ensemble", "--ensemble", "bank", "--bank", str(bank)) as port:
            status, methods = request(port, "GET", "/v1/methods")
            case.statuses.append(status)
            offers = {(o["method"], o["lang"]): o for o in methods["served"]} if isinstance(methods, dict) else {}
            down = [f"{m} ({lang}): {o.get('error')}" for (m, lang), o in offers.items() if not o["available"]]
            case.statuses += [f"not available: {line}" for line in down]
            if str(private) in json.dumps(methods):
                case.statuses.append("the bank file's folder reached a client")
            q = bench.questions["en"][30]
            status, answer = request(port, "POST", "/v1/answer", answer_body(q, "ensemble", "en"))
            solved = isinstance(answer, dict) and bool((answer.get("details") or {}).get("solved_questions"))
            case.statuses.append(status if status != 200 or solved else "no solved questions in the ensemble's answer")
            case.note = f"{len(offers) - len(down)} of {len(offers)} offers available; bank sources (en): " \
                        f"{[src.get('file', src.get('split')) for src in offers.get(('bank', 'en'), {}).get('settings', {}).get('bank_sources', [])]}"

    heavy = heavy_bodies(bench.questions["zh"], [])[:6]
    # an in-process llama.cpp model writing long replies: a stop must not wait for its prompts, nor crash under them
    llm = ("--lang", "en", "--method", "llm", "--model", str(packaged_gguf()), "--evidence", "options", "--scoring", "generate",
           "--prompt", "cot", "--max-tokens", "512")
    prompts = [answer_body(q, "llm", "en") for q in bench.questions["en"][:2]]
    for name, run, expected in (
        ("--ensemble bank with an English --bank file: every offer of both languages available, its folder shown to no one",
         named_ensemble_and_bank, {200}),
        ("--method ensemble --model: refused (its ensemble has no llm part), never dropped",
         refused_at_start("--lang", "en", "--method", "ensemble", "--model", str(log.parent / "absent.gguf"),
                          says="llm part", own_port=True), {2}),
        ("SIGTERM during long comparisons: gone within 5 s, each answered", during_compare(signal.SIGTERM), {0, 200, 503}),
        ("Ctrl-C during long comparisons: gone within 5 s, each answered", during_compare(signal.SIGINT), {0, 200, 503}),
        ("--client-header: users behind one proxy told apart (a light one beside a heavy one; a greedy one capped)",
         behind_one_proxy, {200, 429, 503}),
        ("--client-header: a client's own header line before the one a proxy appends: the last counts (429s past one cap)",
         last_value_counts(lambda n: [f"X-Client-Id: own-{n}", "X-Client-Id: proxy-user"]), {200, 429, 503}),
        ("--client-header: a comma-joined value (the client's own, the proxy's): the last counts (429s past one cap)",
         last_value_counts(lambda n: [f"X-Client-Id: own-{n}, proxy-user"]), {200, 429, 503}),
        ("--client-header that is no header name: refused before listening", refused_at_start("--client-header", "X Client"), {2}),
        ("--endpoint with a query-string token: refused at start in one line, the token not shown",
         refused_at_start("--method", "ir-custom,llm", "--endpoint", "http://127.0.0.1:9/v1?token=qs-secret", "--model", "m",
                          says="query string", hides="qs-secret", one_line=True), {2}),
        ("a second openqa serve on the busy port fails before printing a URL", refused_at_start(), {2}),
        ("SIGTERM with a slow-body client connected", stop([signal.SIGTERM], True), {0}),
        ("a second Ctrl-C stops at once (exit 130)", stop([signal.SIGINT, signal.SIGINT], True), {130}),
        ("SIGHUP with a slow-body client connected (as SIGTERM)", stop([signal.SIGHUP], True), {0}),
        ("SIGTERM under load: 6 heavy zh requests in flight", stop([signal.SIGTERM], False, load=True), {0, 200, 503}),
        ("SIGHUP under load: 6 heavy zh requests in flight", stop([signal.SIGHUP], False, load=True), {0, 200, 503}),
        ("three Ctrl-C under load: exit 130 at the second", stop([signal.SIGINT] * 3, True, load=True),
         {130, 200, 503, "ConnectionResetError", "RemoteDisconnected"}),
        *[(f"SIGTERM with two in-process LLM prompts running ({n + 1} of 2): gone within 5 s, no crash",
           stop([signal.SIGTERM], False, load=True, flags=llm, bodies=prompts), {0, 200, 503}) for n in range(2)],
        *[(f"a second Ctrl-C with two in-process LLM prompts running ({n + 1} of 4): exit 130 at once, no crash",
           stop([signal.SIGINT] * 2, False, load=True, flags=llm, bodies=prompts),
           {130, 200, 503, "ConnectionResetError", "RemoteDisconnected"}) for n in range(4)],
        ("SIGTERM while clients keep asking (heavy zh, kept-alive en, slow body): none reset", mixed(signal.SIGTERM, 0),
         {0, 200, 503, "refused"}),
        ("Ctrl-C while clients keep asking (heavy zh, kept-alive en, slow body): none reset", mixed(signal.SIGINT, 0),
         {0, 200, 503, "refused"}),
        ("SIGHUP while clients keep asking (heavy zh, kept-alive en, slow body): none reset", mixed(signal.SIGHUP, 0),
         {0, 200, 503, "refused"}),
        ("SIGTERM while 12 more clients open a connection per request: none reset", mixed(signal.SIGTERM, 12),
         {0, 200, 503, "refused"}),
        ("Ctrl-C while 12 more clients open a connection per request: none reset", mixed(signal.SIGINT, 12),
         {0, 200, 503, "refused"}),
    ):
        if not bench.wanted(name):
            continue
        case = Case(name, "process", expected)
        start = time.monotonic()
        run(case)
        case.seconds = time.monotonic() - start
        cases.append(case)
        print(f"{name}: {case.record()['statuses']} {case.note}", flush=True)
    return cases


def scratch_indexes(source: Path, scratch: Path) -> None:
    """en-custom copied (it is rebuilt and deleted), the other indexes linked."""
    for lang in DATASETS:
        for engine in ("custom", "pmi"):
            name = f"{lang}-{engine}"
            if not (source / name / "manifest.json").is_file():
                raise SystemExit(f"no {name} index in {source}: build it with `openqa index --lang {lang} --engine {engine}`")
            if name == "en-custom":
                shutil.copytree(source / name, scratch / name)
            else:
                (scratch / name).symlink_to((source / name).resolve())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", type=int, default=6, help="questions per language and method compared with openqa answer (default: 6)")
    parser.add_argument("--output", type=Path, default=RESULT, help="result file")
    parser.add_argument("--note", default="", help="what else ran on the machine meanwhile, said in the record's notes")
    args = parser.parse_args()
    data = data_dir()
    load_before = os.getloadavg()[0]
    source = Path(os.environ.get("OPENQA_INDEXES", "indexes")).resolve()
    with tempfile.TemporaryDirectory(prefix="openqa-faults-") as tmp:
        scratch, log, results, outside = Path(tmp) / "indexes", Path(tmp) / "server.log", Path(tmp) / "results", Path(tmp) / "outside"
        for folder in (scratch, results, outside):
            folder.mkdir()
        scratch_indexes(source, scratch)
        results_folder(results, outside, load_questions("us", "test", data))
        env = {**os.environ, "OPENQA_DATA": str(data), "OPENQA_INDEXES": str(scratch)}
        port = free_port()
        serve = [OPENQA, "serve", "--lang", "en,zh", "--method", ",".join(METHODS), "--results", str(results), "--port", str(port)]
        started = time.time()
        with open(log, "w") as out:
            server = subprocess.Popen(serve, env=env, stdout=out, stderr=subprocess.STDOUT)
        probe = Probe(port)
        try:
            wait_until_up(port, server)
            probe.start()
            bench = Bench(port, scratch, data, probe, server.pid, results)
            hostile_cases(bench)
            client_cases(bench)
            results_cases(bench)
            before = compare_with_cli(bench, env, args.compare)
            swap_cases(bench, env)
            after = compare_with_cli(bench, env, max(1, args.compare // 2))
            process = process_cases(bench, serve, env, log)
        finally:
            probe.stop.set()
            stop_process(server, signal.SIGINT, 60)
        text = log.read_text(errors="replace")
    cases = [case.record() for case in bench.cases + process]
    totals = {
        "cases": len(cases),
        "requests": sum(c["requests"] for c in cases),
        "5xx": sum(int(s) >= 500 for c in cases for s, n in c["statuses"].items() for _ in range(n) if s.isdigit()),
        "unexpected_5xx": sum(c["unexpected_5xx"] for c in cases),
        "unexpected_outcomes": sum(c["unexpected"] for c in cases),
        "tracebacks": text.count("Traceback"),
        "health_stall_s": max(c["health_stall_s"] for c in cases),
        "answers_compared": before["compared"] + after["compared"],
        "answers_differing": before["differing"] + after["differing"],
        "server_exit": server.returncode,
        "logged_500": text.count(" 500 Internal Server Error"),
        "english_under_zh_load": bench.fair,
        "english_p95_under_zh_load_s": bench.fair.get("english_p95_s"),
        "stop_under_load_s": round(max(bench.stops, default=float("nan")), 2),
        "resets_in_flight": bench.resets,
        "second_client_heavy_max_s": max(v for k, v in bench.figures.items() if k.startswith("second_client")),
        "english_p95_beside_heavy_clients_s": max(v for k, v in bench.figures.items() if k.startswith("english_p95")),
        "english_p95_beside_run_reads_s": bench.figures.get("english_p95_beside_run_reads_s"),
        "english_p95_beside_large_answers_s": bench.figures.get("english_p95_beside_large_answers_s"),
        "clients": bench.figures,
    }
    record = {
        "dataset": "us+mainland", "split": "test", "method": "openqa serve fault benchmark (ir-custom, pmi)",
        "n": totals["cases"], "accuracy": None,
        "totals": totals, "targets": TARGETS,
        "met": {"unexpected_5xx": totals["unexpected_5xx"] <= 0, "tracebacks": totals["tracebacks"] <= 0,
                "health_stall_s": totals["health_stall_s"] < TARGETS["health_stall_s"],
                "answers_differing": totals["answers_differing"] <= 0,
                "english_p95_under_zh_load_s": (totals["english_p95_under_zh_load_s"] or 99) < TARGETS["english_p95_under_zh_load_s"],
                "stop_under_load_s": totals["stop_under_load_s"] < TARGETS["stop_under_load_s"],
                "logged_500": totals["logged_500"] <= 0,
                "second_client_heavy_max_s": totals["second_client_heavy_max_s"] < TARGETS["second_client_heavy_max_s"],
                "english_p95_beside_heavy_clients_s":
                    totals["english_p95_beside_heavy_clients_s"] < TARGETS["english_p95_beside_heavy_clients_s"],
                "resets_in_flight": totals["resets_in_flight"] <= 0,
                **{key: (totals[key] or 99) <= TARGETS[key] for key in ("english_p95_beside_run_reads_s",
                                                                         "english_p95_beside_large_answers_s")}},
        "cases": cases, "answers_before_swap": before, "answers_after_swap": after,
        "server": " ".join(["openqa", *serve[1:-2]]), "seconds": round(time.time() - started, 1),
        "notes": "5xx counts every 5xx answer; unexpected_5xx leaves out the 503s a case asks for (a time limit, an "
                 "index being rebuilt or deleted, the server stopping). health_stall_s: the longest GET /v1/health "
                 "while any case ran, the probe "
                 f"sharing this machine's {os.cpu_count()} cores with server and clients; {busy(load_before)}"
                 f"{'; ' + args.note if args.note else ''}. accuracy: not applicable.",
        "load_average_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "data": str(data),
    }
    path = write_record(args.output.name, record, " ".join(["python", "scripts/benchmarks/bench_serve_faults.py", *sys.argv[1:]]),
                        args.output.parent)
    print(json.dumps(totals), "->", path)


if __name__ == "__main__":
    main()
