"""Load test of ``openqa serve`` on loopback; writes eval/results/benchmarks/bench-serve.json.

Starts ``openqa serve --lang en --method ir-custom`` as its own process on a free loopback port,
then runs ``--clients`` concurrent clients (threads, each with one keep-alive connection from a
loopback address of its own, 127.0.0.2, 127.0.0.3, ...: separate clients to the server, which caps
one client's requests in flight), each sending ``--requests`` ``POST /v1/answer`` requests in turn: the US test questions, client ``c``'s
request ``r`` asking question ``(c * requests + r) mod n``, so 20 x 200 requests ask all 1,273
questions (most of them three or four times). It records requests per second, latency
percentiles (client side, from sending the request to having read the whole answer), errors,
whether repeated questions always got the same prediction, and the accuracy of the served
predictions over the questions asked. Bounded: every request has a timeout, the clients stop at
``--deadline`` seconds, and the server is stopped at the end.

The served predictions differ slightly from ``openqa eval``'s on the same questions: a request
scores one question, so IR-Custom's average query length (avgQL) is that question's, where
``eval`` fits it over the whole split; and ties break with the question id ``interactive``.

    python scripts/benchmarks/bench_serve.py           # needs OPENQA_DATA (or ../shared/medqa/data_clean)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import data_dir, record_path, stop_process, write_record
from openqa import Question, load_questions

OPENQA = str(Path(sys.executable).with_name("openqa"))
#: The issue's targets for ir-custom on a 2-core machine.
TARGETS = {"errors": 0, "p95_ms": 300}
#: Seconds to wait for the server to open its index and start listening.
START_TIMEOUT = 120
#: Seconds one request may take before it counts as an error.
REQUEST_TIMEOUT = 30


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post(connection: HTTPConnection, body: bytes) -> tuple[int, dict[str, Any]]:
    """One ``POST /v1/answer`` on a kept-alive connection: its status and JSON."""
    connection.request("POST", "/v1/answer", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def wait_until_up(port: int, server: subprocess.Popen) -> None:
    """Return once ``GET /v1/health`` answers; fail if the server exits or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"openqa serve exited with {server.returncode} before answering")
        try:
            connection = HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/v1/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"openqa serve did not answer within {START_TIMEOUT} s")


class Client(threading.Thread):
    """Sends its share of the requests one after another on one connection from ``address``, timing each."""

    def __init__(self, port: int, address: str, bodies: list[tuple[int, bytes]], stop_at: float) -> None:
        super().__init__(daemon=True)
        self.port, self.address, self.bodies, self.stop_at = port, address, bodies, stop_at
        self.latencies: list[float] = []
        self.predictions: list[tuple[int, str | None]] = []
        self.errors: list[str] = []

    def connect(self) -> HTTPConnection:
        return HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT, source_address=(self.address, 0))

    def run(self) -> None:
        connection = self.connect()
        for number, body in self.bodies:
            if time.monotonic() > self.stop_at:
                self.errors.append("not sent: the deadline passed")
                continue
            start = time.perf_counter()
            try:
                status, data = post(connection, body)
            except (OSError, ValueError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                connection = self.connect()
                continue
            self.latencies.append(time.perf_counter() - start)
            if status != 200:
                self.errors.append(f"{status}: {data.get('error')}")
                continue
            self.predictions.append((number, data["prediction"]))


def busy(load: float) -> str:
    """What the 1-minute load average before the run says of other work on the machine."""
    if load < 0.5:
        return f"the machine was idle before the run (load average {load:.2f})"
    return f"the machine was busy with other work: load average {load:.2f} before the run"


def request_body(question: Question, evidence: int) -> bytes:
    """What a client of the API sends for one question."""
    return json.dumps({"question": question.question, "options": question.options, "method": "ir-custom",
                       "lang": "en", "evidence": evidence}).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients (default: 20)")
    parser.add_argument("--requests", type=int, default=200, help="requests per client (default: 200)")
    parser.add_argument("--evidence", type=int, default=3, help="evidence paragraphs asked per option (default: 3, the API's)")
    parser.add_argument("--deadline", type=float, default=600, help="seconds after which clients stop sending (default: 600)")
    parser.add_argument("--index-dir", help="index folder of the server (default: its own default, ./indexes)")
    parser.add_argument("--output", type=Path, default=record_path("bench-serve.json"),
                        help="result file (default: eval/results/benchmarks/bench-serve.json)")
    parser.add_argument("--note", default="", help="what else ran on the machine meanwhile, said in the record's notes")
    args = parser.parse_args()

    data = data_dir()
    questions = load_questions("us", "test", data)
    port = free_port()
    serve = [OPENQA, "serve", "--lang", "en", "--method", "ir-custom", "--port", str(port),
             *(["--index-dir", args.index_dir] if args.index_dir else [])]
    load_before = os.getloadavg()
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(serve, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_up(port, server)
            warm = HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
            for question in questions[:20]:  # first requests pay for caches; not timed
                post(warm, request_body(question, args.evidence))
            per_client = [
                [(n % len(questions), request_body(questions[n % len(questions)], args.evidence))
                 for n in range(c * args.requests, (c + 1) * args.requests)]
                for c in range(args.clients)
            ]
            clients = [Client(port, f"127.0.0.{2 + c}", bodies, time.monotonic() + args.deadline)
                       for c, bodies in enumerate(per_client)]
            start = time.perf_counter()
            for client in clients:
                client.start()
            for client in clients:
                client.join()
            wall = time.perf_counter() - start
        finally:
            stop_process(server, signal.SIGINT, 30)
    load_after = os.getloadavg()

    latencies = np.array([t for c in clients for t in c.latencies]) * 1000
    errors = [e for c in clients for e in c.errors]
    served: dict[int, set[str | None]] = {}
    for client in clients:
        for number, prediction in client.predictions:
            served.setdefault(number, set()).add(prediction)
    correct = sum(questions[n].answer_idx in predictions for n, predictions in served.items() if len(predictions) == 1)
    total = args.clients * args.requests
    figures = {
        "requests": total,
        "errors": len(errors),
        "requests_per_s": round(len(latencies) / wall, 1),
        "wall_s": round(wall, 2),
        **{f"p{q}_ms": round(float(np.percentile(latencies, q)), 1) for q in (50, 95, 99)},
        "mean_ms": round(float(latencies.mean()), 1),
        "max_ms": round(float(latencies.max()), 1),
    }
    record = {
        "dataset": "us",
        "split": "test",
        "method": "ir-custom (openqa serve load test)",
        "n": len(served),
        "accuracy": round(100 * correct / len(served), 2),
        "inconsistent_predictions": sum(len(p) > 1 for p in served.values()),
        "clients": args.clients,
        "requests_per_client": args.requests,
        "evidence_per_option": args.evidence,
        "figures": figures,
        "targets": TARGETS,
        "met": {"errors": figures["errors"] <= TARGETS["errors"], "p95_ms": figures["p95_ms"] <= TARGETS["p95_ms"]},
        "first_errors": errors[:5],
        "server": " ".join(["openqa", *serve[1:]]),
        "load_average_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "notes": f"clients and server share this machine's {os.cpu_count()} cores (clients are threads of this "
                 f"script); {busy(load_before[0])}{'; ' + args.note if args.note else ''}. Served predictions score "
                 "one question per request (avgQL of that question; ties broken with the question id 'interactive'), "
                 "so accuracy differs slightly from openqa eval's.",
        "data": str(data),
    }
    out = write_record(args.output.name, record, " ".join(["python", "scripts/benchmarks/bench_serve.py", *sys.argv[1:]]),
                       args.output.parent)
    print(json.dumps({**figures, "accuracy": record["accuracy"], "n": record["n"]}), "->", out)


if __name__ == "__main__":
    main()
