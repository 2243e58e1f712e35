"""``openqa serve`` under load: heavy capacity shared per client and language, requests weighed by
their method's cost model (not their characters), a cap on one client's jobs in flight, and a stop
with requests in flight. Slowness is faked (scoring or searching that waits for the test to release it,
passing cancellation checkpoints meanwhile) and every assertion is about order and outcome (which
job started, which request was answered with what), never about how long something took, so a
loaded machine only makes these tests slower."""

from __future__ import annotations

import asyncio
import errno
import json
import select
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from openqa.cancel import checkpoint
from openqa.config import Settings
from openqa.data.pasted import make_question
from openqa.methods import METHODS, Cost, Rate
from openqa.methods import base as methods_base
from openqa.methods.base import IR_COST, PMI_COST, SEARCH_COST
from openqa.pipeline import Context
from openqa.serve import engines as engines_module
from openqa.serve import transport
from openqa.serve.app import create_app
from openqa.serve.engines import Engines
from openqa.serve.transport import admit, header_timed
from openqa.serve.workers import FairPool, JobCap, TooManyJobs
from tests.helpers import HANG_S, Started, gated, wait_until

#: A MedQA-sized Chinese question (the tiny site's), as ``make_question`` takes it.
ZH_QUESTION = ("哪种药物抑制细菌细胞壁合成？", {"A": "阿司匹林", "B": "头孢曲松", "C": "庆大霉素"})
from tests.servers import EN, TOP1, call, pool_weights, port_of, read_by_server, serving, tiny_engines, tiny_site


def test_one_client_leaves_a_heavy_worker_to_the_others_and_short_jobs_never_wait():
    pool = FairPool(4, "test", heavy_share=2)
    started, gates = Started(), {}
    try:
        looping = [pool.submit("A", "zh", True, gated(started, gates, f"a{n}")) for n in range(3)]
        started.wait_for("a0")
        own = pool.submit("A", "en", True, gated(started, gates, "a-en"))
        other = pool.submit("B", "en", True, gated(started, gates, "b0"))
        started.wait_for("b0")  # while a0 runs: client A holds one heavy worker, not both, in any language
        third = pool.submit("C", "zh", True, gated(started, gates, "c0"))
        short = pool.submit("A", "zh", False, gated(started, gates, "a-short"))
        started.wait_for("a-short")  # the heavy jobs queued before it in its client and language do not hold it
        assert started.names == ["a0", "b0", "a-short"]  # a1, a-en (A's share) and c0 (the heavy share) wait
        gates["a0"].set()
        started.wait_for("a1")  # A's next turn: its Chinese queue was there before C's
        gates["b0"].set()
        started.wait_for("c0")  # not A's: it holds its share again
        gates["a1"].set()
        started.wait_for("a-en")  # A's English takes its turn before A's third Chinese job
        assert started.names == ["a0", "b0", "a-short", "a1", "c0", "a-en"]
        for gate in gates.values():
            gate.set()
        assert [f.result(HANG_S) for f in looping] == ["a0", "a1", "a2"]
        assert [f.result(HANG_S) for f in (own, other, third, short)] == ["a-en", "b0", "c0", "a-short"]
    finally:
        for gate in gates.values():
            gate.set()
        pool.shutdown(1.0)


def test_a_pool_of_one_worker_runs_heavy_jobs_one_client_after_another():
    pool = FairPool(1, "test", heavy_share=1)
    started, gates = Started(), {}
    try:
        assert pool.client_share == 1
        first = [pool.submit("A", "zh", True, gated(started, gates, f"a{n}")) for n in range(2)]
        started.wait_for("a0")
        second = pool.submit("B", "zh", True, gated(started, gates, "b0"))
        gates["a0"].set()
        started.wait_for("a1")  # queued first
        gates["a1"].set()
        started.wait_for("b0")
        gates["b0"].set()
        assert [f.result(HANG_S) for f in (*first, second)] == ["a0", "a1", "b0"]
    finally:
        for gate in gates.values():
            gate.set()
        pool.shutdown(1.0)


def test_the_pool_serves_lanes_in_turn_and_drops_cancelled_jobs():
    pool = FairPool(2, "test", heavy_share=1)
    started, gates = Started(), {}
    try:
        first = [pool.submit("a", "en", True, gated(started, gates, f"a{n}")) for n in range(3)]
        started.wait_for("a0")
        gone = pool.submit("b", "en", False, gated(started, gates, "b-gone"))
        gone.cancel()
        light = pool.submit("b", "en", False, gated(started, gates, "b1"))
        started.wait_for("b1")  # one heavy job at a time: the other worker took the light lane's next live job
        assert started.names == ["a0", "b1"] and gone.cancelled()
        for gate in gates.values():
            gate.set()
        assert [f.result(HANG_S) for f in first] == ["a0", "a1", "a2"] and light.result(HANG_S) == "b1"
        assert "b-gone" not in started.names
    finally:
        for gate in gates.values():
            gate.set()
        pool.shutdown(1.0)


def test_a_clients_jobs_in_flight_are_capped_across_pools_until_they_end_or_are_cancelled():
    cap = JobCap(3)
    pool, other = FairPool(2, "test", heavy_share=1, cap=cap), FairPool(1, "test-other", heavy_share=1, cap=cap)
    started, gates = Started(), {}
    try:
        first = [pool.submit("a", "en", False, gated(started, gates, f"a{n}")) for n in range(2)]
        queued = other.submit("a", "zh", False, gated(started, gates, "a-other"))  # the cap counts every pool it shares
        started.wait_count(2)
        with pytest.raises(TooManyJobs, match="at most 3 at once"):
            pool.submit("a", "en", False, gated(started, gates, "a-over"))
        assert pool.submit("b", "en", False, gated(started, gates, "b0"))  # another client is not held by a's cap
        assert cap.in_flight("a") == 3
        gates["a0"].set()
        assert first[0].result(HANG_S) == "a0"
        wait_until(lambda: cap.in_flight("a") == 2, "a job that ended left the cap")  # its done callback ran
        more = pool.submit("a", "en", False, gated(started, gates, "a3"))
        for gate in gates.values():
            gate.set()
        assert [f.result(HANG_S) for f in (first[1], queued, more)] == ["a1", "a-other", "a3"]
        wait_until(lambda: cap.in_flight("a") == 0, "every job of a ended")
    finally:
        for gate in gates.values():
            gate.set()
        pool.shutdown(1.0)
        other.shutdown(1.0)


def test_a_queued_job_cancelled_leaves_the_cap_at_once():
    cap = JobCap(2)
    pool = FairPool(1, "test", heavy_share=1, cap=cap)
    started, gates = Started(), {}
    try:
        running = pool.submit("a", "en", False, gated(started, gates, "a0"))
        started.wait_for("a0")
        queued = pool.submit("a", "en", False, gated(started, gates, "a1"))
        assert cap.in_flight("a") == 2 and queued.cancel() and cap.in_flight("a") == 1  # its client left
        again = pool.submit("a", "en", False, gated(started, gates, "a2"))
        for gate in gates.values():
            gate.set()
        assert (running.result(HANG_S), again.result(HANG_S)) == ("a0", "a2") and "a1" not in started.names
    finally:
        for gate in gates.values():
            gate.set()
        pool.shutdown(1.0)


# -- through HTTP: clients told apart by their address ------------------------------------------


@pytest.fixture()
def site(tmp_path) -> Iterator[tuple[str, Engines]]:
    """ir-custom in both languages over the tiny site, served on 127.0.0.1 (clients come from
    other loopback addresses: 127.0.0.2, 127.0.0.3, ... are other machines to the server)."""
    data, indexes = tiny_site(tmp_path)
    settings = Settings.resolve(data_dir=data, index_dir=indexes, settings_dir=tmp_path / "tuned")
    engines = Engines(Context(settings), ["en", "zh"], ["ir-custom"])
    with serving(create_app(engines)) as (url, _, _):
        yield url, engines
    engines.close(0)


def post(url: str, path: str, body: dict[str, Any], client: str) -> tuple[int, dict[str, Any]]:
    """POST ``body`` from the loopback address ``client``: the status and JSON."""
    host, port = url.removeprefix("http://").split(":")
    connection = HTTPConnection(host, int(port), timeout=HANG_S, source_address=(client, 0))
    try:
        connection.request("POST", path, json.dumps(body, ensure_ascii=False), {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def held(monkeypatch, target: str, marker: str, started: Started, release: threading.Event) -> None:
    """Make ``engines_module.<target>`` (``answer_record`` or ``search_hits``) hold each call whose
    question or query contains ``marker`` until ``release`` is set, passing a cancellation
    checkpoint every few milliseconds (as a scorer does between options), and record it in ``started``."""
    real = getattr(engines_module, target)

    def holding(*args: Any, **kwargs: Any) -> Any:
        text = args[1].question if target == "answer_record" else args[1][0]
        if marker in text:
            started.add(text)
            while not release.wait(0.01):
                checkpoint()
        return real(*args, **kwargs)

    monkeypatch.setattr(engines_module, target, holding)


def heavy_question(tag: str, lang: str = "en") -> dict[str, Any]:
    """A question heavy by its top-N (``HEAVY_TOP_N`` is 20), held while ``tag`` is held."""
    return {"question": f"{tag} {EN['question']}", "options": EN["options"], "lang": lang, "top_n": 50}


def answer_in_thread(url: str, body: dict[str, Any], client: str) -> Future[tuple[int, dict[str, Any]]]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(post, url, "/v1/answer", body, client)
    pool.shutdown(wait=False)
    return future


def test_a_second_clients_heavy_request_is_answered_beside_a_client_looping_heavy_ones(site, monkeypatch):
    url, engines = site
    started, release = Started(), threading.Event()
    held(monkeypatch, "answer_record", "LOOP", started, release)
    looping = [answer_in_thread(url, heavy_question(f"LOOP{n}", lang), "127.0.0.2") for n in range(4) for lang in ("en", "zh")]
    try:
        holding = min(len(looping), engines.pool.client_share)  # all the heavy share but one (one here: two cores)
        with started.changed:
            assert started.changed.wait_for(lambda: len(started.names) == holding, HANG_S)
        for lang in ("en", "zh"):  # a second client, either language, is answered while they hold
            status, answer = post(url, "/v1/answer", {**heavy_question("SECOND", lang), "top_n": 50}, "127.0.0.3")
            assert status == 200 and answer["lang"] == lang
            status, answer = post(url, "/v1/answer", {"question": EN["question"], "options": EN["options"], **TOP1},
                                  "127.0.0.4")
            assert status == 200 and answer["prediction"] == "C"
        assert len(started.names) == holding and not any(f.done() for f in looping)
    finally:
        release.set()
    assert all(f.result(HANG_S)[0] == 200 for f in looping)


def test_a_heavy_request_waits_behind_a_looping_client_when_it_is_the_same_client(site, monkeypatch):
    """The lanes are clients: the looping client's own further heavy question (same language) waits its turn."""
    url = site[0]
    started, release = Started(), threading.Event()
    held(monkeypatch, "answer_record", "LOOP", started, release)
    first = answer_in_thread(url, heavy_question("LOOP0"), "127.0.0.2")
    started.wait_for(f"LOOP0 {EN['question']}")
    second = answer_in_thread(url, heavy_question("LOOP1"), "127.0.0.2")
    status, _ = post(url, "/v1/answer", heavy_question("OTHER"), "127.0.0.3")  # another client passes it
    assert status == 200 and not second.done() and started.names == [f"LOOP0 {EN['question']}"]
    release.set()
    assert first.result(HANG_S)[0] == second.result(HANG_S)[0] == 200


def test_heavy_searches_share_as_heavy_answers_do_and_short_answers_pass_them(site, monkeypatch):
    url, engines = site
    monkeypatch.setattr(engines_module, "SEARCH_COST", Cost((Rate("en", 0.0, 1.0),)))  # a second per query term:
    monkeypatch.setattr(methods_base, "HEAVY_SECONDS", 30.0)  # heavy from 30 terms (the long query has 80)
    started, release = Started(), threading.Event()
    held(monkeypatch, "search_hits", "LONG", started, release)
    query = "LONG cell wall synthesis " * 20
    pool = ThreadPoolExecutor(6)
    searches = [pool.submit(post, url, "/v1/search", {"query": f"{query} {n}", "lang": "en"}, f"127.0.0.{2 + n}")
                for n in range(6)]
    try:
        holding = min(len(searches), engines.pool.heavy_share)
        with started.changed:
            assert started.changed.wait_for(lambda: len(started.names) == holding, HANG_S)
        for _ in range(3):  # English answers while every heavy worker is held by a long search
            status, answer = post(url, "/v1/answer", {"question": EN["question"], "options": EN["options"], **TOP1},
                                  "127.0.0.20")
            assert status == 200 and answer["prediction"] == "C"
        assert len(started.names) == holding  # the other searches wait their turn
    finally:
        release.set()
        pool.shutdown(wait=False)
    assert [f.result(HANG_S)[0] for f in searches] == [200] * 6


def test_a_client_past_its_cap_of_jobs_in_flight_gets_a_429_and_others_are_answered(site, monkeypatch):
    url, engines = site
    assert call(url, "/v1/methods")[1]["limits"]["max_in_flight"] == engines_module.CLIENT_JOBS == 2 * engines_module.WORKERS
    monkeypatch.setattr(engines.jobs, "cap", 2)
    started, release = Started(), threading.Event()
    held(monkeypatch, "answer_record", "HELD", started, release)
    holding = [answer_in_thread(url, {"question": f"HELD{n} {EN['question']}", "options": EN["options"]}, "127.0.0.2")
               for n in range(2)]
    try:
        started.wait_count(2)
        status, error = post(url, "/v1/answer", {"question": EN["question"], "options": EN["options"]}, "127.0.0.2")
        assert status == 429 and "at most 2 at once" in error["error"] and "\n" not in error["error"]
        status, error = post(url, "/v1/search", {"query": "cell wall"}, "127.0.0.2")  # searches count alike
        assert status == 429
        status, answer = post(url, "/v1/answer", {"question": EN["question"], "options": EN["options"], **TOP1}, "127.0.0.3")
        assert status == 200 and answer["prediction"] == "C"
    finally:
        release.set()
    assert [f.result(HANG_S)[0] for f in holding] == [200, 200]
    wait_until(lambda: engines.jobs.in_flight("127.0.0.2") == 0, "the held jobs left the cap")
    assert post(url, "/v1/answer", {"question": EN["question"], "options": EN["options"]}, "127.0.0.2")[0] == 200


def test_the_cost_model_counts_pmi_pairs_by_hand(tmp_path):
    engines = tiny_engines(tmp_path, ["ir-custom", "pmi"])
    try:
        # question 头孢曲松|抑制|细胞壁 (jieba's words): 3 words, 2 bigrams, 1 trigram, 1 skip-bigram = 7 n-grams;
        # options 阿司匹林 (1 n-gram) and 细胞壁|合成 (2 words, 1 bigram: 3): 7 x (1 + 3) = 28 pairs
        question = make_question("头孢曲松抑制细胞壁", {"A": "阿司匹林", "B": "细胞壁合成"})
        assert METHODS["pmi"].work_units(engines.offers["zh", "pmi"].opened, question, "zh") == 28
        # IR-Custom's Chinese index holds characters and their bigrams (none across the space between question
        # and option): its option queries have 9 + 8 + 4 + 3 = 24 and 9 + 8 + 5 + 4 = 26 terms
        assert METHODS["ir-custom"].work_units(engines.offers["zh", "ir-custom"].opened, question, "zh") == 24 + 26
    finally:
        engines.close(0)


def test_the_cost_coefficients_are_the_benchmarks_fits():
    """The coefficients in the code are those ``scripts/benchmarks/bench_costs.py`` fitted (its record)."""
    fits = json.loads((Path(__file__).resolve().parents[1] / "eval/results/benchmarks/bench-costs.json").read_text())["fits"]
    for cost, name in ((IR_COST, "ir_custom"), (PMI_COST, "pmi"), (SEARCH_COST, "search")):
        assert cost.rates == tuple(Rate(lang, fits[f"{name}_{lang}"]["fixed"], fits[f"{name}_{lang}"]["per_unit"])
                                   for lang in ("en", "zh"))
    assert METHODS["pmi"].cost == PMI_COST and METHODS["ir-custom"].cost == METHODS["bank"].cost == IR_COST



def test_work_is_weighed_by_its_estimated_cost_not_its_characters(tmp_path, monkeypatch):
    """The issue's case: a 1,960-character Chinese PMI question (1,000 characters and four options of
    240) took seconds, under the 2,000-character heavy mark of the time; by its cost it is heavy,
    while IR-Custom's work on the same text, and PMI's on a MedQA-sized question, are light."""
    engines = tiny_engines(tmp_path, ["ir-custom", "pmi"])
    try:
        heavy = pool_weights(monkeypatch, engines)
        text = "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(2_000))  # CJK characters, no word twice
        long = make_question(text[:1_000], {letter: text[1_000 + 240 * i: 1_240 + 240 * i] for i, letter in enumerate("ABCD")})
        short = make_question(*ZH_QUESTION)
        for question, method in ((long, "pmi"), (long, "ir-custom"), (short, "pmi")):
            engines.answer(question, method, "zh").result(HANG_S)
        assert heavy == [True, False, False]
        opened = engines.offers["zh", "pmi"].opened
        assert METHODS["pmi"].estimate(opened, long, "zh").heavy and not METHODS["pmi"].estimate(opened, short, "zh").heavy
    finally:
        engines.close(0)


# -- stopping ----------------------------------------------------------------------------------


def test_connections_waiting_to_be_accepted_are_answered_when_the_server_stops(site):
    """Closing a listening socket resets the connections in its queue; ``admit`` serves them first."""
    with serving(create_app(site[1])) as (_, server, sock):
        loop, address = server.servers[0].get_loop(), sock.getsockname()
        stopped_accepting = asyncio.run_coroutine_threadsafe(remove_reader(sock), loop)
        stopped_accepting.result(HANG_S)  # from now on connections wait in the listening queue
        waiting = [socket.create_connection(address, timeout=HANG_S) for _ in range(3)]
        for conn in waiting:
            conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        asyncio.run_coroutine_threadsafe(admit(server, [sock]), loop).result(HANG_S)
        for conn in waiting:
            assert conn.recv(100).startswith(b"HTTP/1.1 200 ")
            conn.close()
        with pytest.raises(ConnectionRefusedError):  # no longer listening
            socket.create_connection(address, timeout=HANG_S)


def test_a_client_that_connects_as_the_server_stops_listening_is_refused_not_reset():
    """A client whose handshake completes between the stopping server's last accept and the close of
    its listening socket is reset by the close, its request unanswered. ``_drained`` leaves the queue
    full of a connection of the server's own, so the kernel holds the client's handshake back, and
    once the socket is closed the client is refused: it knows its request was never received."""
    listening = transport.listen("127.0.0.1", 0)
    listening.setblocking(False)
    address = listening.getsockname()
    early = socket.create_connection(address, timeout=HANG_S)
    taken, plug = transport._drained(listening)
    assert len(taken) == 1 and plug is not None  # the early client taken over, the queue plugged
    late = socket.socket()
    late.setblocking(False)
    late.connect_ex(address)
    assert not select.select([], [late], [], 0.2)[1]  # no place in the queue: its handshake is held back
    listening.close()
    plug.close()
    assert select.select([], [late], [], HANG_S)[1]  # its next try meets a closed port
    assert late.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == errno.ECONNREFUSED
    for conn in (*taken, early, late):
        conn.close()


async def remove_reader(sock: socket.socket) -> None:
    asyncio.get_running_loop().remove_reader(sock.fileno())


def test_a_request_sent_on_an_idle_connection_as_the_server_stops_is_answered_not_reset(site, monkeypatch):
    """uvicorn closes a connection between requests at once when it stops: a request just sent on it
    would meet a reset. The server's protocol waits ``IDLE_SECONDS`` (here long enough for any
    machine), answers what comes (a 503 saying it stops, with Connection: close), then closes."""
    engines = site[1]
    monkeypatch.setattr(transport, "IDLE_SECONDS", HANG_S)
    with serving(create_app(engines), http=header_timed(HANG_S)) as (url, server, _):
        connection = HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=HANG_S)
        connection.request("GET", "/v1/health")
        assert connection.getresponse().read() and connection.sock is not None  # kept alive, now idle
        engines.stop()
        loop = server.servers[0].get_loop()
        asyncio.run_coroutine_threadsafe(shut_connections(server), loop).result(HANG_S)
        connection.request("POST", "/v1/answer", json.dumps({"question": EN["question"], "options": EN["options"]}),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 503 and b"the server is stopping" in response.read()
        assert response.getheader("connection") == "close"
        connection.close()


async def shut_connections(server: uvicorn.Server) -> None:
    """What uvicorn's shutdown does to every open connection."""
    for connection in list(server.server_state.connections):
        connection.shutdown()


#: ``openqa serve`` whose scoring of a question containing SLOW never ends on its own: it passes a
#: cancellation checkpoint every 10 ms and writes a line to the file named by its first argument
#: when it begins.
SLOW_SERVE = """
import sys, time
from openqa.cancel import checkpoint
from openqa.cli import main
from openqa.serve import engines

marks, real = sys.argv.pop(1), engines.answer_record

def slow(opened, question, *args):
    if "SLOW" in question.question:
        with open(marks, "a") as out:
            out.write(question.question + "\\n")
        while True:
            checkpoint()
            time.sleep(0.01)
    return real(opened, question, *args)

engines.answer_record = slow
sys.exit(main())
"""


@pytest.mark.spawns
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_under_load_answers_every_request_in_flight_and_resets_none(tmp_path, sig, openqa_serve):
    data, indexes = tiny_site(tmp_path)
    marks = tmp_path / "begun.txt"
    server, url = openqa_serve("--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes), cwd=tmp_path,
                               command=(sys.executable, "-c", SLOW_SERVE, str(marks)))
    port = port_of(url)
    slow_body = socket.create_connection(("127.0.0.1", port), timeout=HANG_S)  # a request still arriving
    slow_body.sendall(b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n{")
    pool = ThreadPoolExecutor(4)
    clients = [pool.submit(two_requests_on_one_connection, port, n) for n in range(4)]

    def all_scoring() -> bool:
        assert not any(c.done() for c in clients), "a slow request ended early"
        return len(marks.read_text().splitlines() if marks.exists() else []) >= 4

    wait_until(all_scoring, "every slow request is being scored", alive=lambda: server.poll() is None)
    wait_until(lambda: read_by_server(slow_body), "the server read the request still arriving")
    server.send_signal(sig)
    out, err = server.communicate(timeout=HANG_S)
    reply = slow_body.recv(200)
    slow_body.close()
    assert server.returncode == 0 and "Traceback" not in err, err
    assert reply.startswith(b"HTTP/1.1 503 ") and b"the server is stopping" in reply
    for client in clients:
        (status, error, closing), after = client.result(HANG_S)
        assert status == 503 and "the server is stopping" in error["error"] and closing == "close"
        assert after in ("503", "ConnectionRefusedError")  # on a new connection: answered, or refused once not listening


def two_requests_on_one_connection(port: int, n: int) -> tuple[tuple[int, dict[str, Any], str | None], str]:
    """A slow question (answered when the server stops: status, JSON, its Connection header), then
    another on the same kept-alive connection (what became of it: refused, reset, ...)."""
    connection = HTTPConnection("127.0.0.1", port, timeout=HANG_S)
    body = json.dumps({"question": f"SLOW {n} {EN['question']}", "options": EN["options"]})
    connection.request("POST", "/v1/answer", body, {"Content-Type": "application/json"})
    response = connection.getresponse()
    first = response.status, json.loads(response.read()), response.getheader("connection")
    try:
        connection.request("POST", "/v1/answer", body, {"Content-Type": "application/json"})
        after = str(connection.getresponse().status)
    except OSError as exc:
        after = type(exc).__name__
    finally:
        connection.close()
    return first, after
