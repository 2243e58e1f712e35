"""``openqa serve``'s replies and who asks for them: a reply is validated and encoded by the job
that made it, on a worker thread, never on the event loop (a run's 20,000 questions or an answer
with 200 evidence paragraphs would hold every other request there); a large read of the results
page, its first listing and an answer returning many paragraphs are heavy jobs (capped per
client); the listing re-reads only the records changed on disk; and a client is its address, not
what an ``X-Forwarded-For`` header claims. Nothing here is timed: the tests look at which thread
did the work and how each job was weighed."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from starlette import responses

from openqa.evaluate import browse as browse_module
from openqa.serve.app import create_app
from openqa.serve.routes import peer
from openqa.serve.transport import server_config
from tests.helpers import wait_until, write_run
from tests.servers import EN, call, pool_weights, running, tiny_engines


@pytest.fixture()
def results_site(tmp_path):
    """The tiny site's engines and a results folder with a small run and a large one."""
    folder = tmp_path / "results"
    folder.mkdir()
    write_run(folder, "small", set(range(0, 10, 2)), n=10)
    write_run(folder, "large", set(range(0, 6_000, 2)), n=6_000)  # over results.HEAVY_BYTES
    engines = tiny_engines(tmp_path / "site", ["ir-custom"])
    yield folder, engines
    engines.close(0)



def test_replies_are_encoded_on_a_worker_never_on_the_event_loop(results_site, monkeypatch):
    folder, engines = results_site
    encoders: list[str] = []
    real = responses.Response.__init__

    def made(self: responses.Response, content: Any = None, status_code: int = 200, *args: Any, **kwargs: Any) -> None:
        real(self, content, status_code, *args, **kwargs)
        if status_code == 200 and self.media_type == "application/json":
            encoders.append(threading.current_thread().name)

    monkeypatch.setattr(responses.Response, "__init__", made)
    paths: list[tuple[str, Any]] = [
        ("/v1/answer", {"question": EN["question"], "options": EN["options"], "evidence": 5}),
        ("/v1/search", {"query": "cell wall synthesis", "k": 3}),
        ("/v1/results", None), ("/v1/results/large.json", None), ("/v1/results/large.json/curves", None),
        ("/v1/compare?runs=small.json,large.json", None),
    ]
    with running(create_app(engines, results=folder)) as url:
        for path, body in paths:
            status, data = call(url, path, body)
            assert status == 200, (path, data)
    assert len(encoders) == len(paths) and all(name.startswith("openqa-score") for name in encoders), encoders


def test_large_reads_first_listings_and_answers_with_many_paragraphs_are_heavy(results_site, monkeypatch):
    folder, engines = results_site
    heavy = pool_weights(monkeypatch, engines)
    asked: list[tuple[str, Any, bool]] = [
        ("/v1/results", None, True), ("/v1/results", None, False),  # the first listing reads every record
        ("/v1/results/large.json", None, True), ("/v1/results/large.json/curves", None, True),
        ("/v1/results/small.json", None, False), ("/v1/results/small.json/curves", None, False),
        ("/v1/answer", {"question": EN["question"], "options": EN["options"], "evidence": 3}, False),
        ("/v1/answer", {"question": EN["question"], "options": EN["options"], "evidence": 20}, True),
    ]
    with running(create_app(engines, results=folder)) as url:
        for path, body, _ in asked:
            assert call(url, path, body)[0] == 200, path
    assert heavy == [weight for _, _, weight in asked]


def test_a_read_of_an_unchanged_run_is_sent_as_kept_a_light_job_and_a_changed_run_is_read_again(results_site, monkeypatch):
    folder, engines = results_site
    heavy = pool_weights(monkeypatch, engines)
    reads: list[str] = []
    real = browse_module.question_rows

    def counted(top: Path, name: str) -> Any:
        reads.append(name)
        return real(top, name)

    monkeypatch.setattr(browse_module, "question_rows", counted)
    with running(create_app(engines, results=folder)) as url:
        first = [call(url, path, None) for path in ("/v1/results/large.json", "/v1/results/large.json/curves")]
        again = [call(url, path, None) for path in ("/v1/results/large.json", "/v1/results/large.json/curves")]
        assert first == again and [status for status, _ in first] == [200, 200]
        assert reads == ["large.json", "large.json"] and heavy == [True, True, False, False]
        assert call(url, "/v1/results/large", None)[1]["run"] == "large"  # the run as asked, not another name's reply
        write_run(folder, "large", set(range(1, 6_000, 2)), n=6_000)  # the same size, other answers
        status, changed = call(url, "/v1/results/large.json", None)
    assert status == 200 and changed["questions"][0]["correct"] is False and first[0][1]["questions"][0]["correct"] is True
    assert reads[-1] == "large.json" and heavy[-1] is True


def record(folder: Path, name: str, accuracy: float) -> Path:
    """An eval record the listing shows (its predictions beside it)."""
    path = write_run(folder, name, {0}, n=10)
    path.write_text(json.dumps({**json.loads(path.read_text()), "accuracy": accuracy, "result_files": {}}))
    return path


def test_the_listing_rereads_only_the_records_changed_on_disk(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    (folder / "sub").mkdir(parents=True)
    paths = [record(folder, f"r{i}", 10.0) for i in range(3)] + [record(folder / "sub", "s", 20.0)]
    read: list[str] = []
    real = browse_module.run_row

    def counted(path: Path, top: Path) -> Any:
        read.append(path.name)
        return real(path, top)

    monkeypatch.setattr(browse_module, "run_row", counted)
    cache = browse_module.RunCache()
    assert not cache.has_listed(folder)
    first = browse_module.list_runs(folder, cache)
    assert sorted(read) == ["r0.json", "r1.json", "r2.json", "s.json"] and cache.has_listed(folder)
    read.clear()
    assert browse_module.list_runs(folder, cache) == first and read == []
    paths[1].write_text(paths[1].read_text().replace('"accuracy": 10.0', '"accuracy": 55.5'))  # another size
    paths[3].unlink()
    rows = browse_module.list_runs(folder, cache)
    assert read == ["r1.json"]
    assert [(row["run"], row["accuracy"]) for row in rows] == [("r0.json", 10.0), ("r1.json", 55.5), ("r2.json", 10.0)]
    assert rows == browse_module.list_runs(folder)  # the same as without a cache


def test_a_client_is_its_address_whatever_x_forwarded_for_says():
    app = FastAPI()

    @app.get("/who")
    async def who(request: Request) -> dict[str, str]:
        return {"client": peer(request)}

    server = uvicorn.Server(server_config(app))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "the server started", alive=thread.is_alive, every=0.02)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
            status, data = call(url, "/who", headers={header: "10.1.2.3"})
            assert status == 200 and data == {"client": "127.0.0.1"}, header
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_a_reply_encoded_in_pieces_is_the_bytes_one_dumps_makes():
    """``encoded`` writes a large reply a row at a time (other threads take the interpreter lock
    between rows) and gives the very bytes ``JSONResponse`` would: compact, UTF-8, NaN refused."""
    import math

    from fastapi.responses import JSONResponse

    from openqa.serve.schemas import encoded

    rows = [{"qid": f"q{i}", "probabilities": {"A": 0.25, "B": 0.75}, "question": "é✓" * i} for i in range(50)]
    for value in ({"run": "r", "questions": rows, "cut": False, "nested": {"x": [1, (2, 3), None]}, "keys": {1: "int"}},
                  [], {}, "text", 3.5, None):
        assert encoded(value).body == JSONResponse(value).body, value
    for bad in ({"questions": [{"confidence": math.nan}]}, [math.inf]):
        with pytest.raises(ValueError):
            encoded(bad)
