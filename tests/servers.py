"""What the tests of ``openqa serve`` share: a tiny English and Chinese site with its engines, the
app served by uvicorn in a thread on a free loopback port, the console script's server started as
a process and waited for through ``/v1/health``, and requests as any client makes them. Fixtures
built on these live in ``tests/conftest.py``."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import uvicorn

from openqa.config import Settings
from openqa.methods import Request
from openqa.pipeline import Context
from openqa.retrieval.registry import build_index
from openqa.serve import engines as engines_module
from openqa.serve.engines import Engines
from tests.helpers import HANG_S, OPENQA, QUESTIONS, Started, default_sigint, free_port, make_data_dir, wait_until

#: A tiny Chinese book (the zh corpus folder), one paragraph a line.
ZH_BOOK = [
    "阿司匹林不可逆地抑制环氧合酶，减少心肌梗死后的死亡率。",
    "头孢曲松抑制细菌细胞壁合成，用于治疗淋球菌性关节炎。",
    "庆大霉素是一种氨基糖苷类抗生素，抑制细菌核糖体亚基。",
]
ZH_BLOCK = "哪种药物抑制细菌细胞壁合成？\nA、阿司匹林\nB、头孢曲松\nC、庆大霉素\n"
EN = QUESTIONS[0]
#: On six paragraphs a sum over many hits mostly counts question words: judge by the best hit.
TOP1 = {"top_n": 1}


def tiny_site(root: Path) -> tuple[Path, Path]:
    """A MedQA-shaped data folder with two English books and one Chinese book, and their custom indexes."""
    data = make_data_dir(root)
    zh = data / "textbooks" / "zh_paragraph"
    zh.mkdir(parents=True)
    (zh / "药理学.txt").write_text("\n".join(ZH_BOOK) + "\n", encoding="utf-8")
    indexes = root / "indexes"
    for lang in ("en", "zh"):
        build_index(data, indexes, lang, "custom")
    return data, indexes


def tiny_engines(root: Path, methods: list[str], request: Request = Request()) -> Engines:
    """English and Chinese engines over the tiny site (your tuned settings and results of the repo
    never leak in; the shipped ones do)."""
    data, indexes = tiny_site(root)
    settings = Settings.resolve(data_dir=data, index_dir=indexes, settings_dir=root / "tuned", results_dir=root / "results")
    return Engines(Context(settings), ["en", "zh"], methods, request)


@contextmanager
def serving(app: Any, http: Any = "auto") -> Iterator[tuple[str, uvicorn.Server, socket.socket]]:
    """``app`` served by uvicorn (its HTTP protocol ``http``) in a thread on a free loopback port: its
    URL, server and listening socket; stopped after."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, http=http))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the server started", alive=thread.is_alive, every=0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", server, sock
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def running(app: Any, http: Any = "auto") -> Iterator[str]:
    """Serve ``app`` as ``serving`` does; yield its base URL."""
    with serving(app, http) as (url, _, _):
        yield url


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def call(url: str, path: str, body: Any = None, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """The status and JSON of a GET (no body) or a POST of ``body`` as JSON (or ``raw`` bytes)."""
    data = raw if raw is not None else None if body is None else json.dumps(body, ensure_ascii=False).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ask(url: str, question: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The answer to ``question`` (its text and options) with the request fields ``extra``; must be a 200."""
    status, data = call(url, "/v1/answer", {"question": question["question"], "options": question["options"], **extra})
    assert status == 200, data
    return data


def healthy(url: str) -> bool:
    """Whether ``GET /v1/health`` at ``url`` answers 200 (False while nothing listens yet)."""
    try:
        return call(url, "/v1/health")[0] == 200
    except (urllib.error.URLError, ConnectionError):
        return False


def start_serve(*args: str, cwd: Path, command: tuple[str, ...] = (OPENQA,)) -> tuple[subprocess.Popen, str]:
    """``openqa serve ARGS --port PORT`` (or ``COMMAND serve ...``) started in ``cwd`` on a free port,
    with Ctrl-C at its default action, returned once ``/v1/health`` answers: the process and its URL.
    The caller stops it (the ``openqa_serve`` fixture does)."""
    port = free_port()
    process = subprocess.Popen([*command, "serve", *args, "--port", str(port)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=cwd, preexec_fn=default_sigint)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: healthy(url), "openqa serve answered /v1/health", alive=lambda: process.poll() is None, every=0.1)
    except AssertionError:
        process.kill()
        _, err = process.communicate(timeout=HANG_S)
        raise AssertionError(f"openqa serve did not start: {err[-2000:]}") from None
    return process, url


def gated_scoring(monkeypatch, started: Started, gate: threading.Event, only: str | None = None) -> None:
    """Make scoring (of questions containing ``only``, if given) record that it began in ``started``,
    then wait until ``gate`` is opened: a fake whose slowness is its gate."""
    real = engines_module.answer_record

    def held(opened, question, evidence, min_confidence=None):
        if only is None or only in question.question:
            started.add(question.question)
            assert gate.wait(HANG_S)
        return real(opened, question, evidence, min_confidence)

    monkeypatch.setattr(engines_module, "answer_record", held)


def read_by_server(client: socket.socket) -> bool:
    """Whether the server has read every byte that ``client`` (a loopback TCP connection) sent: the
    receive queue of the server's end, as Linux shows it in /proc/net/tcp, is empty."""
    here, there = client.getsockname()[1], client.getpeername()[1]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == there and int(fields[2].split(":")[1], 16) == here:
            return int(fields[4].split(":")[1], 16) == 0
    return False


def slow_body_client(port: int) -> socket.socket:
    """A client that announces a body and sends one byte of it; returned once the server has read it."""
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    client.sendall(b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 1000\r\n\r\n{")
    wait_until(lambda: read_by_server(client), "the server read the slow client's first byte")
    return client


def trickled_head_cut_off(port: int, every: float = 0.1, most: int = 100) -> bool:
    """A client that sends a request line, then one header byte every ``every`` seconds (a fake slow
    client: its pace is its gate) for at most ``most`` bytes: whether the server cut it off first."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\n")
        for _ in range(most):
            try:
                sock.sendall(b"X")
            except OSError:
                return True
            time.sleep(every)
            if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                return True
    return False


class StderrWatch:
    """What a process writes to its standard error, read as it comes (a thread), so that a test can
    wait for a line before acting; ``text()`` once the process has ended."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self.thread.start()

    def _read(self, process: subprocess.Popen) -> None:
        for line in process.stderr:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()

    def wait_for(self, text: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: any(text in line for line in self.lines), HANG_S), "".join(self.lines)

    def text(self) -> str:
        self.thread.join(HANG_S)
        return "".join(self.lines)


def pool_weights(monkeypatch: Any, engines: Any) -> list[bool]:
    """Whether each job submitted to ``engines``' pool from now on was weighed heavy, in order."""
    heavy: list[bool] = []
    real = engines.pool.submit

    def submit(client: Any, lane: Any, is_heavy: bool, run: Any) -> Any:
        heavy.append(is_heavy)
        return real(client, lane, is_heavy, run)

    monkeypatch.setattr(engines.pool, "submit", submit)
    return heavy
