"""``openqa serve`` under hostile and unlucky use: a real uvicorn server on a free loopback port
(``tests.servers.running``) over tiny indexes built here. No request may stall the others (per-
method size and time limits, a pool of workers, jobs of gone clients never start), an index
rebuilt or deleted under the server is noticed (reopened, or a 503 naming the rebuild, never a
mix of old and new files), bad bodies and hosts get one-line JSON errors, and the process stops
as asked (second Ctrl-C, SIGTERM with a slow client, a port already taken). Slowness is faked by
scoring that waits at a gate the test opens, or passes cancellation checkpoints until stopped; the
tests wait for events (a job began, a job ended, a line was logged), never for a while."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from http.client import HTTPConnection
from pathlib import Path
from typing import Any, Callable

import pytest

from openqa.answer import solve
from openqa.cancel import cancellable, checkpoint
from openqa.config import Settings
from openqa.data.pasted import make_question
from openqa.errors import IndexDamagedError
from openqa.evaluate import browse as browse_module
from openqa.evaluate import compare as compare_module
from openqa.evaluate import metrics as metrics_module
from openqa.methods import METHODS, Cost, Limits, Overrides, Rate, Request
from openqa.methods import base as methods_base
from openqa.pipeline import Context
from openqa.retrieval.registry import build_index
from openqa.serve import engines as engines_module
from openqa.serve import results as results_module
from openqa.serve.app import create_app
from openqa.serve.engines import Engines
from openqa.serve.transport import header_timed
from tests.helpers import HANG_S, OPENQA, Started, wait_until, write_run
from tests.servers import (
    EN,
    TOP1,
    ZH_BLOCK,
    StderrWatch,
    ask,
    call,
    gated_scoring,
    port_of,
    running,
    slow_body_client,
    tiny_engines,
    tiny_site,
    trickled_head_cut_off,
)


@pytest.fixture()
def site(tmp_path):
    """A fresh tiny site (data and indexes) with ir-custom and pmi served in both languages."""
    data, indexes = tiny_site(tmp_path)
    settings = Settings.resolve(data_dir=data, index_dir=indexes, settings_dir=tmp_path / "tuned")
    engines = Engines(Context(settings), ["en", "zh"], ["ir-custom", "pmi"])
    with running(create_app(engines)) as url:
        yield url, engines, data, indexes
    engines.close(0)


def test_a_long_paste_is_parsed_quickly_and_refused_by_size(site):
    url = site[0]
    block = "Which drug?\nA: x" + " " * 100_000 + "y\nB: Heparin"  # minutes with the old pattern: past call's timeout
    status, data = call(url, "/v1/parse", {"text": block})
    assert status == 413 and "question too long" in data["error"]


def test_each_method_has_a_size_limit_named_in_a_413(site):
    url = site[0]
    body = {"question": "x " * 3500, "options": {"A": "Aspirin", "B": "Heparin"}, "method": "pmi"}
    status, data = call(url, "/v1/answer", body)
    assert status == 413 and "question too long for pmi" in data["error"] and "at most 6000" in data["error"]
    status, answer = call(url, "/v1/answer", {**body, "method": "ir-custom"})
    assert status == 200, answer
    status, methods = call(url, "/v1/methods")
    assert {o["method"]: o["limits"]["max_chars"] for o in methods["served"]} == {"ir-custom": 20000, "pmi": 6000}


def test_a_slow_request_gets_a_503_naming_its_time_limit_while_others_are_answered(site, monkeypatch):
    url = site[0]
    monkeypatch.setitem(METHODS, "ir-custom", replace(METHODS["ir-custom"], limits=Limits(20_000, 1.0)))
    started, gate = Started(), threading.Event()
    gated_scoring(monkeypatch, started, gate, only="SLOW")
    slow = {"question": "SLOW which drug?", "options": EN["options"]}
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(call(url, "/v1/answer", slow)))
    thread.start()
    try:
        started.wait_for("SLOW which drug?")
        assert call(url, "/v1/health")[0] == 200  # while the slow one is held: the event loop is free
        status, zh = call(url, "/v1/parse", {"text": ZH_BLOCK})
        assert ask(url, zh, lang="zh", **TOP1)["prediction"] == "B"  # another index: not queued behind the slow one
        thread.join(timeout=HANG_S)
        status, error = results[0]
        assert status == 503 and "within its limit of 1 s per request" in error["error"]
    finally:
        gate.set()
        thread.join(timeout=HANG_S)


def ask_and_leave(url: str, question: str, leave_when: Callable[[], object]) -> None:
    """Ask ``question`` (with the English options) and hang up once ``leave_when()`` is true."""
    connection = HTTPConnection(url.removeprefix("http://"), timeout=HANG_S)
    body = json.dumps({"question": question, "options": EN["options"]})
    connection.request("POST", "/v1/answer", body=body, headers={"Content-Type": "application/json"})
    wait_until(leave_when, f"the moment to hang up on {question!r}")
    connection.sock.shutdown(socket.SHUT_RDWR)
    connection.close()


def submissions(monkeypatch, engines: Engines) -> list[Future]:
    """The futures of the jobs submitted to ``engines``' pool from now on, in order."""
    futures: list[Future] = []
    real = engines.pool.submit

    def submit(*args: Any) -> Future:
        futures.append(real(*args))
        return futures[-1]

    monkeypatch.setattr(engines.pool, "submit", submit)
    return futures


def test_a_job_whose_client_went_away_never_starts(site, monkeypatch):
    url, engines = site[0], site[1]
    started, gate = Started(), threading.Event()
    gated_scoring(monkeypatch, started, gate)
    futures = submissions(monkeypatch, engines)
    busy = [threading.Thread(target=call, args=(url, "/v1/answer", {"question": f"BUSY {n} drug?", "options": EN["options"]}))
            for n in range(engines_module.WORKERS)]
    try:
        for thread in busy:
            thread.start()
        started.wait_count(engines_module.WORKERS)  # every worker is held
        ask_and_leave(url, "GONE drug?", lambda: len(futures) > engines_module.WORKERS)  # hung up once queued
        gone = futures[engines_module.WORKERS]
        wait_until(gone.cancelled, "the job of the client that left was cancelled")
    finally:
        gate.set()
        for thread in busy:
            thread.join(timeout=HANG_S)
    assert gone.cancelled() and len(started.names) == engines_module.WORKERS and "GONE drug?" not in started.names


def test_concurrent_requests_across_indexes_run_in_parallel(site, monkeypatch):
    url = site[0]
    started, gate = Started(), threading.Event()
    gated_scoring(monkeypatch, started, gate)
    status, zh = call(url, "/v1/parse", {"text": ZH_BLOCK})
    jobs = [(EN, {"lang": "en"}), (zh, {"lang": "zh"}), (EN, {"lang": "en", "method": "pmi"})]
    results: list[Any] = []
    threads = [threading.Thread(target=lambda q=q, extra=extra: results.append(
        call(url, "/v1/answer", {"question": q["question"], "options": q["options"], **extra}))) for q, extra in jobs]
    try:
        for thread in threads:
            thread.start()
        started.wait_count(len(jobs))  # all three held at once: one at a time, the second would wait for the gate
    finally:
        gate.set()
        for thread in threads:
            thread.join(timeout=HANG_S)
    assert [status for status, _ in results] == [200] * len(jobs), results


def add_book(data: Path) -> None:
    (data / "textbooks" / "en" / "Pharm.txt").write_text(
        "Ceftriaxone is a third generation cephalosporin that inhibits bacterial cell wall synthesis.\n")


def test_an_index_rebuilt_under_the_server_is_reopened(site):
    url, engines, data, indexes = site
    assert ask(url, EN, **TOP1)["prediction"] == "C"
    add_book(data)
    build_index(data, indexes, "en", "custom")
    health = call(url, "/v1/health")[1]
    assert health["status"] == "changed" and any("ir-custom (en): index rebuilt" in c for c in health["changed"])
    answer = ask(url, EN, evidence=3, top_n=3)
    assert answer["prediction"] == "C"
    books = {p["book"] for option in answer["options"] for p in option["evidence"]}
    assert "Pharm" in books
    health = call(url, "/v1/health")[1]
    assert health["status"] == "ok" and health["reloads"][-1]["ok"] and health["reloads"][-1]["indexes"] == "en-custom", json.dumps(health)
    served = {(o["method"], o["lang"]): o for o in call(url, "/v1/methods")[1]["served"]}
    assert served["ir-custom", "en"]["index"]["books"] == ["Cardio", "Micro", "Pharm"]


def test_a_deleted_index_is_a_503_until_it_is_rebuilt(site):
    url, engines, data, indexes = site
    import shutil

    shutil.rmtree(indexes / "en-custom")
    status, error = call(url, "/v1/answer", {"question": EN["question"], "options": EN["options"]})
    assert status == 503 and "en-custom index of ir-custom (en) was deleted or is being rebuilt" in error["error"]
    assert "openqa index --lang en --engine custom" in error["error"] and str(indexes) not in error["error"]
    health = call(url, "/v1/health")[1]
    assert health["status"] == "changed" and "deleted or being rebuilt" in health["changed"][0]
    assert ask(url, EN, lang="en", method="pmi")["method"] == "pmi"  # the other indexes still serve
    build_index(data, indexes, "en", "custom")
    assert ask(url, EN, **TOP1)["prediction"] == "C"


def test_an_index_swapped_while_scoring_is_scored_again_never_mixed(site, monkeypatch):
    url, engines, data, indexes = site
    real = engines_module.answer_record
    swapped: list[bool] = []

    def swap_then_score(opened, question, evidence, min_confidence=None):
        if not swapped:  # the first scoring reads the old index while the new one is swapped in
            swapped.append(True)
            add_book(data)
            build_index(data, indexes, "en", "custom")
        return real(opened, question, evidence, min_confidence)

    monkeypatch.setattr(engines_module, "answer_record", swap_then_score)
    answer = ask(url, EN, evidence=3, top_n=3)
    assert "Pharm" in {p["book"] for option in answer["options"] for p in option["evidence"]}
    assert engines.reloads[-1]["ok"]


def test_an_index_deleted_while_scoring_is_a_503_not_a_damaged_400(site, monkeypatch):
    url, engines, data, indexes = site
    import shutil

    def delete_then_fail(opened, question, evidence, min_confidence=None):  # what a file read finds once the folder is gone
        shutil.rmtree(indexes / "en-custom", ignore_errors=True)
        raise IndexDamagedError("index at <folder> is damaged: paragraphs.jsonl is missing")

    monkeypatch.setattr(engines_module, "answer_record", delete_then_fail)
    status, error = call(url, "/v1/answer", {"question": EN["question"], "options": EN["options"]})
    assert status == 503 and "was deleted or is being rebuilt" in error["error"]


def test_an_index_file_gone_under_a_manifest_is_a_503_and_recovers(site, monkeypatch):
    url, engines, data, indexes = site
    real = engines_module.answer_record
    store = indexes / "en-custom" / "paragraphs.jsonl"
    kept = store.read_bytes()

    def lose_the_store(opened, question, evidence, min_confidence=None):  # a deletion under way that has not reached the manifest
        store.unlink(missing_ok=True)
        raise IndexDamagedError("index at <folder> is damaged: paragraphs.jsonl is missing")

    monkeypatch.setattr(engines_module, "answer_record", lose_the_store)
    status, error = call(url, "/v1/answer", {"question": EN["question"], "options": EN["options"]})
    assert status == 503 and "changed on disk and cannot be opened" in error["error"]
    monkeypatch.setattr(engines_module, "answer_record", real)
    store.write_bytes(kept)  # the file is back: the index reopens
    assert ask(url, EN, **TOP1)["prediction"] == "C"


SURROGATE = b'{"question": "Why \\ud800?", "options": {"A": "Aspirin", "B": "Heparin"}}'


@pytest.mark.parametrize("body, content_type, status, message", [
    (b"", "application/json", 400, "empty request body"),
    (b"question=Why&options=A", "application/x-www-form-urlencoded", 400, "not valid JSON"),
    (SURROGATE, "application/json", 400, "lone surrogate"),
    (b'{"text": "\xff\xfe"}', "application/json", 400, "not UTF-8"),
    (b'{"question": 5, "options": {"A": "x", "B": "y"}}', "application/json", 422, "question: Input should be a valid string"),
    (b'{"question": "Why?", "options": {"A": 1, "B": "y"}}', "application/json", 422, "options.A: Input should be a valid string"),
    (b'["Why?"]', "application/json", 422, "Input should be a valid dictionary"),
    (b'null', "application/json", 422, "Input should be a valid dictionary"),
    (b'{"question": "Why?", "options": {"A": "x", "B": "y"}, "top_n": "many"}', "application/json", 422, "top_n"),
])
def test_malformed_bodies_get_a_json_4xx_never_a_500(site, body, content_type, status, message):
    url = site[0]
    connection = HTTPConnection(url.removeprefix("http://"), timeout=30)
    connection.request("POST", "/v1/answer", body=body, headers={"Content-Type": content_type})
    response = connection.getresponse()
    data = json.loads(response.read())
    assert response.status == status and list(data) == ["error"] and message in data["error"], data


def test_json_sent_as_a_form_is_understood(site):
    url = site[0]
    body = json.dumps({"question": EN["question"], "options": EN["options"], **TOP1}).encode()
    connection = HTTPConnection(url.removeprefix("http://"), timeout=30)
    connection.request("POST", "/v1/answer", body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    assert response.status == 200 and json.loads(response.read())["prediction"] == "C"


@pytest.mark.parametrize("path", ["/", "/v1/health", "/v1/methods", "/static/app.js", "/docs"])
def test_head_works_where_get_does(site, path):
    connection = HTTPConnection(site[0].removeprefix("http://"), timeout=30)
    connection.request("HEAD", path)
    response = connection.getresponse()
    assert response.status == 200 and response.read() == b"" and int(response.getheader("content-length")) > 0


def test_head_where_get_does_not_work_is_a_bodiless_405(site):
    connection = HTTPConnection(site[0].removeprefix("http://"), timeout=30)
    connection.request("HEAD", "/v1/answer")
    response = connection.getresponse()
    assert response.status == 405 and response.read() == b""
    connection = HTTPConnection(site[0].removeprefix("http://"), timeout=30)
    connection.request("GET", "/v1/answer")
    assert json.loads(connection.getresponse().read()) == {"error": "GET is not allowed on /v1/answer"}


@pytest.mark.parametrize("name, status", [("evil.example", 403), ("localhost", 200), ("[::1]", 200)])
def test_a_foreign_host_header_is_refused(site, name, status):
    url = site[0]
    host = f"{name}:{port_of(url)}"
    got, data = call(url, "/v1/health", headers={"Host": host})
    assert got == status, (host, data)
    if status == 403:
        assert list(data) == ["error"] and f"host '{host}'" in data["error"], data
    else:
        assert data["status"] == "ok", data


def test_allowed_names_and_wildcard_addresses(site):
    engines = site[1]
    with running(create_app(engines, ["127.0.0.1", "qa.lab"], any_ip=True)) as url:
        port = url.rsplit(":", 1)[1]
        for host, status in (("qa.lab", 200), ("192.168.1.9", 200), ("evil.example", 403)):
            request = urllib.request.Request(url + "/v1/health", headers={"Host": f"{host}:{port}"})
            try:
                got = urllib.request.urlopen(request, timeout=30).status
            except urllib.error.HTTPError as error:
                got = error.code
            assert got == status, host


# -- the process: ports, signals, slow clients -------------------------------------------------


def test_the_limits_of_a_request_are_named_in_methods(site):
    """What a client may send and how long it may take to send it, as the server enforces it (a client,
    such as scripts/benchmarks/bench_serve_faults.py, reads them there instead of guessing)."""
    from openqa.serve.guard import BODY_SECONDS, MAX_BODY
    from openqa.serve.transport import HEADER_SECONDS

    limits = call(site[0], "/v1/methods")[1]["limits"]
    assert (limits["max_body_bytes"], limits["body_seconds"], limits["header_seconds"]) == (MAX_BODY, BODY_SECONDS, HEADER_SECONDS)


@pytest.mark.spawns
def test_a_second_serve_on_a_busy_port_fails_before_printing_a_url(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([OPENQA, "serve", "--lang", "en", "--port", str(port), "--index-dir", str(tmp_path)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "http://" not in result.stderr + result.stdout
    assert result.stderr.startswith(f"openqa: error: cannot listen on 127.0.0.1:{port}") and result.stderr.count("\n") == 1


def start_site(tmp_path: Path, openqa_serve) -> tuple[subprocess.Popen, int]:
    """``openqa serve`` of the English custom index of a tiny site, up: the process and its port."""
    data, indexes = tiny_site(tmp_path)
    process, url = openqa_serve("--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes), cwd=tmp_path)
    return process, port_of(url)


@pytest.mark.spawns
def test_sigterm_stops_the_server_despite_a_slow_body_client(tmp_path, openqa_serve):
    process, port = start_site(tmp_path, openqa_serve)
    client = slow_body_client(port)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=HANG_S)  # the grace period is 2 s
    client.close()
    assert process.returncode == 0 and "Traceback" not in err
    # the client cut off after the grace period gets its 503, said as such: uvicorn's "ERROR: Cancel 1
    # running task(s), timeout graceful shutdown exceeded" used to end every such (graceful) stop
    assert "ERROR" not in err and "1 request(s) still open 2 s after the stop began: answered 503 (the server stops)" in err, err


@pytest.mark.spawns
def test_a_second_ctrl_c_stops_at_once_with_exit_130(tmp_path, openqa_serve):
    process, port = start_site(tmp_path, openqa_serve)
    stderr = StderrWatch(process)
    client = slow_body_client(port)  # keeps the first Ctrl-C waiting for it
    process.send_signal(signal.SIGINT)
    stderr.wait_for("Waiting for connections to close")  # the first Ctrl-C waits for the slow client
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    process.wait(timeout=HANG_S)
    client.close()
    err = stderr.text()
    assert process.returncode == 130 and err.rstrip().endswith("openqa: interrupted") and "Traceback" not in err


def test_no_absolute_path_reaches_a_client(site, tmp_path):
    url, engines, data, indexes = site
    tuned = tmp_path / "tuned"
    tuned.mkdir(exist_ok=True)
    (tuned / "ir-custom-us.json").write_text(json.dumps({"chosen": {"top_n": 1, "aggregate": "sum", "query": "full"}}))
    answer = ask(url, EN, top_n=2)  # a request's top-N re-reads the settings: yours now
    sources = json.dumps(answer["settings"]["sources"])
    assert "your openqa tune" in sources and str(tmp_path) not in json.dumps(answer)
    for path in ("/v1/methods", "/v1/health", "/v1/examples"):
        assert str(tmp_path) not in json.dumps(call(url, path)[1])


@pytest.mark.spawns
def test_examples_come_from_the_data_folder_by_a_stated_rule(site, monkeypatch):
    url, engines, data, indexes = site
    monkeypatch.delenv("OPENQA_DATA", raising=False)
    status, en = call(url, "/v1/examples?lang=en")
    assert status == 200 and en["rule"].startswith("the first 5 questions of the MedQA US test split, in file order")
    assert [(q["id"], q["answer"]) for q in en["questions"]] == [("us-test-1", "C"), ("us-test-2", "A")]
    assert en["questions"][0]["options"] == EN["options"]
    status, zh = call(url, "/v1/examples?lang=zh")  # the tiny data folder has no Mainland questions
    assert status == 200 and zh["questions"] == [] and "no readable MedQA Mainland (MCMLE) test split" in zh["note"]
    assert call(url, "/v1/examples?lang=fr")[0] == 400
    settings = Settings.resolve(data_dir=None, index_dir=indexes, settings_dir=indexes / "none")
    bare = Engines(Context(settings), ["en"], ["ir-custom"])
    try:
        with running(create_app(bare)) as other:
            assert call(other, "/v1/examples?lang=en")[1]["note"] == "the server was started without a MedQA data folder"
    finally:
        bare.close()


# -- fairness, cancellation and stopping ---------------------------------------------------------


class Checkpointed:
    """Scoring of questions containing ``only`` made to take ``seconds`` in small steps, each after a
    cancellation checkpoint (as a scorer's options or batches): the steps taken, the jobs begun, and
    how each ended ("stopped" at a checkpoint, or "finished" its steps), set as it ends."""

    def __init__(self, monkeypatch, seconds: float, only: str) -> None:
        self.steps: list[str] = []
        self.begun: list[str] = []
        self.endings: list[str] = []
        self.ended = threading.Event()
        self.most = int(seconds / 0.05)
        real = engines_module.answer_record

        def slow(opened, question, evidence, min_confidence=None):
            if only in question.question:
                self.begun.append(question.question)
                try:
                    for _ in range(self.most):
                        checkpoint()
                        self.steps.append(question.question)
                        time.sleep(0.05)  # the fake's pace
                except BaseException:
                    self.endings.append("stopped")
                    raise
                else:
                    self.endings.append("finished")
                finally:
                    self.ended.set()
            return real(opened, question, evidence, min_confidence)

        monkeypatch.setattr(engines_module, "answer_record", slow)


def test_a_checkpoint_stops_a_scorer_and_does_nothing_outside_a_cancellable_block(site):
    url, engines, _, _ = site
    opened = engines.offers["en", "pmi"].opened
    question = make_question(EN["question"], EN["options"])
    assert solve(opened.scorer, question).prediction()  # no check set: scores as ever

    def cancelled() -> None:
        raise RuntimeError("cancelled")

    with cancellable(cancelled), pytest.raises(RuntimeError, match="cancelled"):
        solve(opened.scorer, question)
    with cancellable(cancelled), pytest.raises(RuntimeError, match="cancelled"):
        solve(engines.offers["en", "ir-custom"].opened.scorer, question)


def test_a_job_over_its_time_stops_scoring_at_its_next_checkpoint(site, monkeypatch):
    url = site[0]
    monkeypatch.setitem(METHODS, "ir-custom", replace(METHODS["ir-custom"], limits=Limits(20_000, 1.0)))
    scoring = Checkpointed(monkeypatch, HANG_S, only="LONG")
    status, error = call(url, "/v1/answer", {"question": "LONG which drug?", "options": EN["options"]})
    assert status == 503 and "within its limit of 1 s" in error["error"]
    assert scoring.ended.wait(HANG_S) and scoring.endings == ["stopped"]  # at a checkpoint, long before its steps ran out
    assert len(scoring.steps) < scoring.most


def test_a_job_whose_client_left_stops_scoring(site, monkeypatch):
    url = site[0]
    scoring = Checkpointed(monkeypatch, HANG_S, only="LEFT")
    ask_and_leave(url, "LEFT which drug?", lambda: scoring.steps)  # hung up once it scores
    assert scoring.ended.wait(HANG_S) and scoring.endings == ["stopped"] and 0 < len(scoring.steps) < scoring.most


def test_short_requests_never_wait_behind_heavy_ones(site, monkeypatch):
    url, engines = site[0], site[1]
    monkeypatch.setitem(METHODS, "ir-custom", replace(METHODS["ir-custom"], limits=Limits(20_000, HANG_S),
                                                      cost=Cost((Rate("en", 0.0, 1.0),))))  # a second per query term:
    monkeypatch.setattr(methods_base, "HEAVY_SECONDS", 150.0)  # heavy from 150 (the heavy question's queries have 240)
    scoring = Checkpointed(monkeypatch, HANG_S, only="HEAVY")
    heavy = {"question": "HEAVY which drug? " + "cell wall " * 40, "options": EN["options"], "lang": "en"}
    clients = [threading.Thread(target=call, args=(url, "/v1/answer", heavy))  # all one client may have in flight but one
               for _ in range(engines_module.CLIENT_JOBS - 1)]
    try:
        for client in clients:
            client.start()
        holding = engines.pool.client_share  # what one client's heavy requests may hold of the pool
        wait_until(lambda: len(scoring.begun) >= holding, "the heavy requests held their share of the pool")
        answer = ask(url, EN, **TOP1)  # while every heavy one still scores: it did not wait behind them
        assert answer["prediction"] == "C" and not scoring.ended.is_set()
        assert len(scoring.begun) == holding and len(set(scoring.steps)) == 1  # the others queue
    finally:
        engines.stop()  # the heavy ones stop at their next checkpoint
        for client in clients:
            client.join(timeout=HANG_S)


def test_stopping_answers_requests_in_flight_with_a_503_and_stops_their_jobs(site, monkeypatch):
    url, engines, _, _ = site
    scoring = Checkpointed(monkeypatch, HANG_S, only="FLIGHT")
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(
        call(url, "/v1/answer", {"question": "FLIGHT which drug?", "options": EN["options"]})))
    thread.start()
    wait_until(lambda: scoring.steps, "the job in flight scores")
    engines.stop()
    thread.join(timeout=HANG_S)
    assert not thread.is_alive()
    status, error = results[0]
    assert status == 503 and "the server is stopping" in error["error"]
    assert scoring.ended.wait(HANG_S) and scoring.endings == ["stopped"]
    assert call(url, "/v1/answer", {"question": "Which drug?", "options": EN["options"]})[0] == 503


@pytest.mark.parametrize("body", [
    b'{"question": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"question": "Why?", "options": {"A": "x", "B": "y"}, "top_n": ' + b"9" * 5000 + b"}",
])
@pytest.mark.parametrize("path", ["/v1/answer", "/v1/parse"])
def test_deep_nesting_and_huge_numbers_are_a_400(site, body, path):
    status, error = call(site[0], path, raw=body)
    assert status == 400 and ("nested too deeply" in error["error"] or "number too long" in error["error"])


@pytest.mark.parametrize("method, path, status", [
    ("POST", "/v1/nothing", 404), ("POST", "/nothing", 404), ("PUT", "/v1/answer", 405), ("DELETE", "/v1/parse", 405),
])
def test_a_wrong_route_or_method_with_a_bad_body_is_a_404_or_405(site, method, path, status):
    request = urllib.request.Request(site[0] + path, data=b"{not json", method=method,
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    assert caught.value.code == status


@pytest.mark.parametrize("field, value", [("top_n", "5"), ("top_n", True), ("evidence", 5.0), ("question", 5),
                                          ("method", 1)])
def test_fields_of_the_wrong_type_are_refused_not_converted(site, field, value):
    status, error = call(site[0], "/v1/answer", {"question": "Why?", "options": EN["options"], field: value})
    assert status == 422 and error["error"].startswith(field)


def test_a_deleted_index_is_refused_without_reopening_it(site, monkeypatch):
    url, engines, _, indexes = site
    import shutil

    opened: list[str] = []
    real = engines._open
    monkeypatch.setattr(engines, "_open", lambda *args: opened.append(args) or real(*args))
    shutil.rmtree(indexes / "en-custom")
    for _ in range(3):
        assert call(url, "/v1/answer", {"question": EN["question"], "options": EN["options"]})[0] == 503
    assert opened == []


def test_a_trickled_request_head_is_cut_off(tmp_path):
    data, indexes = tiny_site(tmp_path)
    settings = Settings.resolve(data_dir=data, index_dir=indexes, settings_dir=tmp_path / "tuned")
    engines = Engines(Context(settings), ["en"], ["ir-custom"])
    try:
        with running(create_app(engines), http=header_timed(1.0)) as url:
            assert trickled_head_cut_off(port_of(url), every=0.1, most=100)  # 10 s of header bytes; 1 s allowed
            assert call(url, "/v1/health")[0] == 200  # a request whose head arrives at once is served
    finally:
        engines.close(0)


@pytest.mark.spawns
def test_sighup_stops_the_server_like_sigterm(tmp_path, openqa_serve):
    process, _ = start_site(tmp_path, openqa_serve)
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=HANG_S)
    assert process.returncode == 0 and "Traceback" not in err


def test_redoc_loads_nothing_from_elsewhere(site):
    url = site[0]
    with urllib.request.urlopen(url + "/redoc", timeout=30) as response:
        page, policy = response.read().decode(), response.headers["Content-Security-Policy"]
    assert policy.startswith("default-src 'self'") and "http" not in policy
    assert 'src="/static-offline-docs/redoc.standalone.js"' in page and "cdn" not in page.lower()
    with urllib.request.urlopen(url + "/static-offline-docs/redoc.standalone.js", timeout=30) as response:
        assert response.status == 200


def test_the_accuracy_line_is_left_out_when_the_operator_changed_the_settings(tmp_path):
    tuned = tiny_engines(tmp_path / "tuned", ["ir-custom"])
    own = tiny_engines(tmp_path / "own", ["ir-custom"], Request(Overrides(top_n=3)))
    try:
        assert tuned.accuracy["en", "ir-custom"]["record"] == "eval/results/runs/us/us-test-ir-custom.json"
        assert own.accuracy["en", "ir-custom"] is None  # measured with top_n 10, served with 3
    finally:
        tuned.close(0)
        own.close(0)


def test_the_page_without_javascript_says_so_and_cannot_submit(site):
    with urllib.request.urlopen(site[0] + "/", timeout=30) as response:
        page = response.read().decode()
    assert "<noscript>" in page and "needs JavaScript" in page.replace("\n      ", " ")
    assert '<button type="submit" id="solve" disabled>' in page  # the script turns it on


def test_a_request_with_two_body_framings_is_refused_and_its_connection_closed(tmp_path):
    """Content-Length with Transfer-Encoding (request smuggling): one 400, then the connection closes,
    so the request hidden in the body is never served."""
    from openqa.serve.engines import limits

    assert limits("ensemble").max_chars == limits("pmi").max_chars  # its PMI part's cap: never a request that cannot finish
    engines = tiny_engines(tmp_path, ["ir-custom"])
    try:
        with running(create_app(engines)) as url:
            hidden = b"0\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            head = (b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(hidden))
            with socket.create_connection(("127.0.0.1", port_of(url)), timeout=HANG_S) as client:
                client.sendall(head + hidden)
                received = b""
                while True:  # until the server closes the connection (a recv past HANG_S fails the test)
                    chunk = client.recv(65536)
                    if not chunk:
                        break  # closed by the server
                    received += chunk
            assert received.startswith(b"HTTP/1.1 400") and received.count(b"HTTP/1.1 ") == 1
            assert b"both Content-Length and Transfer-Encoding" in received
    finally:
        engines.close()


# -- the results endpoints: on the pool, within their time limit, stopped when no longer wanted ---


@pytest.fixture()
def results_site(tmp_path):
    """A results folder of two runs of 2,000 questions (written by hand) and the tiny site's engines
    (each test serves them, after making its fakes)."""
    folder = tmp_path / "results"
    folder.mkdir()
    write_run(folder, "a", set(range(0, 2_000, 2)), n=2_000)
    write_run(folder, "b", set(range(0, 2_000, 3)), n=2_000)
    engines = tiny_engines(tmp_path / "site", ["ir-custom"])
    yield folder, engines
    engines.close(0)


class Bootstrapping:
    """Comparisons made to draw a billion bootstrap resamples (in chunks, with a cancellation
    checkpoint between them: they never finish on their own): whether the real bootstrap began, and
    how it ended ("stopped" at a checkpoint, or "finished")."""

    def __init__(self, monkeypatch) -> None:
        self.begun, self.ended = threading.Event(), threading.Event()
        self.endings: list[str] = []
        real = compare_module.paired_difference
        monkeypatch.setattr(metrics_module, "BOOTSTRAP_ROUNDS", 10**9)

        def drawing(*args: Any) -> Any:
            self.begun.set()
            try:
                result = real(*args)
            except BaseException:
                self.endings.append("stopped")
                raise
            finally:
                self.ended.set()
            self.endings.append("finished")
            return result

        monkeypatch.setattr(compare_module, "paired_difference", drawing)


def test_a_comparison_past_its_time_limit_gets_a_503_and_stops_at_a_bootstrap_checkpoint(results_site, monkeypatch):
    folder, engines = results_site
    monkeypatch.setattr(results_module, "RESULTS_SECONDS", 1.0)
    drawing = Bootstrapping(monkeypatch)
    with running(create_app(engines, results=folder)) as url:
        status, error = call(url, "/v1/compare?runs=a.json,b.json")
    assert status == 503 and "the comparison did not answer within its limit of 1 s per request" in error["error"]
    assert drawing.ended.wait(HANG_S) and drawing.endings == ["stopped"]


def test_a_comparison_in_flight_when_the_server_stops_gets_a_503_and_stops(results_site, monkeypatch):
    folder, engines = results_site
    drawing = Bootstrapping(monkeypatch)
    with running(create_app(engines, results=folder)) as url:
        asked = ThreadPoolExecutor(1).submit(call, url, "/v1/compare?runs=a.json,b.json")
        assert drawing.begun.wait(HANG_S)
        engines.stop()
        status, error = asked.result(HANG_S)
    assert status == 503 and "the server is stopping" in error["error"]
    assert drawing.ended.wait(HANG_S) and drawing.endings == ["stopped"]


def test_a_comparison_whose_client_left_stops(results_site, monkeypatch):
    folder, engines = results_site
    drawing = Bootstrapping(monkeypatch)
    with running(create_app(engines, results=folder)) as url:
        connection = HTTPConnection(url.removeprefix("http://"), timeout=HANG_S)
        connection.request("GET", "/v1/compare?runs=a.json,b.json")
        assert drawing.begun.wait(HANG_S)
        connection.sock.shutdown(socket.SHUT_RDWR)
        connection.close()
        assert drawing.ended.wait(HANG_S) and drawing.endings == ["stopped"]


class Looping:
    """A stand-in for a function that runs until it is stopped at a cancellation checkpoint (as a
    long read of prediction rows does): whether it began, and how it ended."""

    def __init__(self) -> None:
        self.begun, self.ended = threading.Event(), threading.Event()
        self.endings: list[str] = []

    def __call__(self, *args: Any) -> None:
        self.begun.set()
        try:
            for _ in range(int(HANG_S / 0.01)):
                checkpoint()
                time.sleep(0.01)  # the fake's pace
            self.endings.append("finished")
        except BaseException:
            self.endings.append("stopped")
            raise
        finally:
            self.ended.set()


@pytest.mark.parametrize("path, module, name", [
    ("/v1/results", browse_module, "list_runs"),
    ("/v1/results/a.json", browse_module, "run_questions"),
    ("/v1/results/a.json/curves", browse_module, "run_curves"),
    ("/v1/compare?runs=a.json,b.json", compare_module, "compare_runs"),
])
def test_every_results_endpoint_runs_on_the_pool_within_its_time_limit(results_site, monkeypatch, path, module, name):
    folder, engines = results_site
    monkeypatch.setattr(results_module, "RESULTS_SECONDS", 1.0)
    looping = Looping()
    monkeypatch.setattr(module, name, looping)  # before the app is made: it takes the functions then
    futures = submissions(monkeypatch, engines)
    with running(create_app(engines, results=folder)) as url:
        status, error = call(url, path)
    assert status == 503 and "within its limit of 1 s per request" in error["error"]
    assert looping.ended.wait(HANG_S) and looping.endings == ["stopped"] and len(futures) == 1


#: ``openqa serve`` whose comparisons draw a billion bootstrap resamples (they never end on their own,
#: but pass a cancellation checkpoint between chunks), writing a line to the file named by its first
#: argument when the bootstrap begins.
SLOW_COMPARE = """
import sys
from openqa.cli import main
from openqa.evaluate import compare, metrics

marks, real = sys.argv.pop(1), compare.paired_difference
metrics.BOOTSTRAP_ROUNDS = 10**9

def drawing(*args):
    with open(marks, "a") as out:
        out.write("bootstrap\\n")
    return real(*args)

compare.paired_difference = drawing
sys.exit(main())
"""


@pytest.mark.spawns
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_during_a_comparison_answers_it_and_ends_the_server(tmp_path, sig, openqa_serve):
    folder = tmp_path / "results"
    folder.mkdir()
    write_run(folder, "a", set(range(0, 2_000, 2)), n=2_000)
    write_run(folder, "b", set(range(0, 2_000, 3)), n=2_000)
    data, indexes = tiny_site(tmp_path)
    marks = tmp_path / "begun.txt"
    server, url = openqa_serve("--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes), "--results",
                               str(folder), cwd=tmp_path, command=(sys.executable, "-c", SLOW_COMPARE, str(marks)))
    asked = ThreadPoolExecutor(1).submit(call, url, "/v1/compare?runs=a.json,b.json")
    wait_until(marks.exists, "the comparison draws its bootstrap", alive=lambda: server.poll() is None)
    server.send_signal(sig)
    out, err = server.communicate(timeout=HANG_S)  # before, the comparison held a thread the server waited for
    status, error = asked.result(HANG_S)
    assert server.returncode == 0 and "Traceback" not in err, err
    assert status == 503 and "the server is stopping" in error["error"]
