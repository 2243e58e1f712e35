"""``openqa serve`` end to end: a real uvicorn server on a free loopback port over tiny English and
Chinese indexes built here, asked over HTTP as any client would (answers, evidence spans, the
parse rules of ``openqa answer``, every refusal, concurrency, the page and the docs offline)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from typing import Any, Iterator

import pytest

from openqa.data.pasted import MAX_CHARS, parse_block
from openqa.errors import OpenQAError
from openqa.retrieval.custom_bm25 import CustomBM25
from openqa.serve.app import create_app
from openqa.serve.engines import CLIENT_JOBS, Engines
from openqa.serve.guard import MAX_BODY
from openqa.text.tokenize import DEFAULT_CONFIGS, make_tokenizer
from tests.helpers import OPENQA, QUESTIONS
from tests.servers import EN, TOP1, ZH_BLOCK, ask, call, running, tiny_engines, tiny_site


@pytest.fixture(scope="module")
def engines(tmp_path_factory) -> Iterator[Engines]:
    """ir-custom in both languages; dense asked for but never built (its requests say how to build it)."""
    opened = tiny_engines(tmp_path_factory.mktemp("serve"), ["ir-custom", "dense"])
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def url(engines) -> Iterator[str]:
    with running(create_app(engines)) as base:
        yield base


def test_answer_ranks_options_with_evidence_and_settings(url):
    data = ask(url, EN, evidence=2, **TOP1)
    assert data["prediction"] == "C" and data["matched"] and data["message"] is None
    scores = [option["score"] for option in data["options"]]
    assert scores == sorted(scores, reverse=True) and data["options"][0]["letter"] == "C"
    best = data["options"][0]["evidence"]
    assert len(best) == 1 and best[0]["book"] == "Micro" and best[0]["id"].startswith("Micro:")
    assert "Ceftriaxone" in best[0]["text"]
    assert data["settings"]["top_n"] == 1 and data["settings"]["sources"]["top_n"] == "request top_n"
    assert data["settings"]["sources"]["aggregate"].startswith("shipped with openqa")
    assert (data["method"], data["lang"]) == ("ir-custom", "en")


def test_evidence_spans_point_at_matched_words(url):
    tokenizer = make_tokenizer(DEFAULT_CONFIGS["en"])
    data = ask(url, QUESTIONS[1], evidence=3, top_n=3)
    for option in data["options"]:
        terms = set(tokenizer.tokenize(f"{QUESTIONS[1]['question']} {option['text']}"))
        for paragraph in option["evidence"]:
            words = [paragraph["text"][start:end] for start, end in paragraph["spans"]]
            assert words and all(set(tokenizer.tokenize(word)) & terms for word in words)
    aspirin = next(option for option in data["options"] if option["letter"] == "A")
    paragraph = next(p for p in aspirin["evidence"] if p["text"].startswith("Aspirin"))
    marked = [paragraph["text"][start:end] for start, end in paragraph["spans"]]
    assert "cyclooxygenase" in marked and "Aspirin" in marked and "irreversibly" not in marked


def test_chinese_is_parsed_answered_and_marked(url):
    status, request = call(url, "/v1/parse", {"text": ZH_BLOCK})
    assert status == 200 and request == {"question": "哪种药物抑制细菌细胞壁合成?",  # NFKC, as the corpus
                                         "options": {"A": "阿司匹林", "B": "头孢曲松", "C": "庆大霉素"}}
    data = ask(url, request, lang="zh", **TOP1)
    assert data["prediction"] == "B" and data["lang"] == "zh"
    assert data["settings"]["exam"] == "mcmle"
    paragraph = data["options"][0]["evidence"][0]  # 头孢曲松抑制细菌细胞壁合成，用于治疗淋球菌性关节炎。
    words = [paragraph["text"][start:end] for start, end in paragraph["spans"]]
    assert words == ["头孢曲松", "抑制", "细菌", "细胞壁", "合成"]  # the query's words, whole; not 用于, 治疗...
    traditional = ask(url, {"question": "哪種藥物抑制細菌細胞壁合成？", "options": request["options"]}, lang="zh", **TOP1)
    assert traditional["prediction"] == "B" and traditional["options"][0]["evidence"][0]["spans"]


def test_a_question_in_another_language_gets_no_prediction(url):
    status, request = call(url, "/v1/parse", {"text": ZH_BLOCK})
    data = ask(url, request, lang="en")
    assert data["prediction"] is None and not data["matched"]
    assert '"lang": "zh"' in data["message"] and "\n" not in data["message"]


@pytest.mark.parametrize("block", [
    "Which drug?\nA: Aspirin\nB: Heparin",
    "A man with\n\nE. coli sepsis. Which drug?\n\n(A) Ceftriaxone\n(B) Gentamicin\n",
    "\ufeffWhich drug?\r\nA. Aspirin\r\nB. Heparin\r\nC. Statin",
    "患者发热，最可能的诊断是\n（A）感冒\n（B）肺炎",
    "Which drug?\nA: Aspirin",
    "Which drug?\nA: Aspirin\nB: Heparin\nA: Statin",
    "Which drug?\nA: Aspirin\nB: Heparin\nMore text after the options.",
    "",
])
def test_parse_follows_the_rules_of_openqa_answer(url, block):
    status, data = call(url, "/v1/parse", {"text": block})
    try:
        question = parse_block(block)
    except OpenQAError as exc:
        assert (status, data) == (400, {"error": str(exc).replace(" (or --option A=text)", "")})
        assert "--" not in data["error"]  # a web client has no flags
    else:
        assert (status, data) == (200, {"question": question.question, "options": question.options})


OK_OPTIONS = {"A": "Aspirin", "B": "Heparin"}
REPEATED = b'{"question": "Which drug?", "options": {"A": "Aspirin", "A": "Heparin"}}'
TOO_LONG = {"question": "x" * MAX_CHARS, "options": OK_OPTIONS}


@pytest.mark.parametrize("path, body, status, message", [
    ("/v1/answer", {"question": " ", "options": OK_OPTIONS}, 400, "empty question"),
    ("/v1/answer", {"question": "Why?", "options": {"A": "Aspirin"}}, 400, "at least two options"),
    ("/v1/answer", REPEATED, 400, "option A is given twice"),
    ("/v1/answer", {"question": "Why?", "options": {"A": "Aspirin", "a": "Heparin"}}, 400, "option A is given twice"),
    ("/v1/answer", {"question": "Why?", "options": {"A": "Aspirin", "Z": "Heparin"}}, 400, "option letters are A to J"),
    ("/v1/answer", {"question": "Why?", "options": {"A": "Aspirin", "B": " "}}, 400, "option B is empty"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "method": "magic"}, 400, "unknown method 'magic'"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "lang": "fr"}, 400, "unknown language 'fr'"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "method": "pmi"}, 404, "--method pmi"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "method": "dense"}, 404,
     "openqa index --lang en --engine dense"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "top_n": 0}, 422, "top_n: Input should be greater"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "evidence": -1}, 422, "evidence: Input should be greater"),
    ("/v1/answer", {"question": "Why?", "options": OK_OPTIONS, "topn": 3}, 422, "topn: Extra inputs are not permitted"),
    ("/v1/answer", {"options": OK_OPTIONS}, 422, "question: Field required"),
    ("/v1/answer", {"question": "Why?", "options": ["Aspirin", "Heparin"]}, 422, "options: Input should be a valid dictionary"),
    ("/v1/answer", b'{"question": "Why?", "options": {', 400, "not valid JSON"),
    ("/v1/answer", TOO_LONG, 413, f"question too long: {MAX_CHARS + 14} characters (at most {MAX_CHARS})"),
    ("/v1/parse", {"text": "x" * MAX_CHARS + "\nA: Aspirin\nB: Heparin"}, 413, "question too long"),
    ("/v1/parse", {"txt": "Why?"}, 422, "text: Field required"),
    ("/v1/nothing", None, 404, "no such page: GET /v1/nothing"),
    ("/v1/answer", None, 405, "GET is not allowed on /v1/answer"),
])
def test_bad_input_gets_a_one_line_json_error(url, path, body, status, message):
    got, data = call(url, path, raw=body) if isinstance(body, bytes) else call(url, path, body)
    assert got == status and list(data) == ["error"], data
    assert message in data["error"] and "\n" not in data["error"] and "Traceback" not in data["error"]


def test_a_failure_inside_is_a_one_line_500_not_a_traceback(url, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom\nwith a second line")

    monkeypatch.setattr("openqa.serve.engines.answer_record", broken)
    status, data = call(url, "/v1/answer", {"question": "Why?", "options": OK_OPTIONS})
    assert (status, data) == (500, {"error": "internal error (RuntimeError); the server's log has the details"})


def refused_body(url: str, send: Any) -> tuple[int, dict[str, Any]]:
    """The answer to a POST whose headers and body ``send(connection)`` writes."""
    connection = HTTPConnection(url.removeprefix("http://"), timeout=30)
    connection.putrequest("POST", "/v1/answer")
    connection.putheader("Content-Type", "application/json")
    send(connection)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_an_oversized_body_is_refused_unread(url):
    def announce(connection: HTTPConnection) -> None:  # says how large; the body is never sent
        connection.putheader("Content-Length", str(MAX_BODY + 1))
        connection.endheaders()

    def stream(connection: HTTPConnection) -> None:  # no length given: the limit is counted as it comes
        connection.putheader("Transfer-Encoding", "chunked")
        connection.endheaders()
        for size in (MAX_BODY, 1):
            connection.send(b"%x\r\n%s\r\n" % (size, b" " * size))
        connection.send(b"0\r\n\r\n")

    for send in (announce, stream):
        assert refused_body(url, send) == (413, {"error": f"request body too large (at most {MAX_BODY} bytes)"})


def test_methods_and_health_say_what_is_served(url):
    status, data = call(url, "/v1/methods")
    assert status == 200 and data["languages"] == ["en", "zh"] and data["methods"] == ["ir-custom", "dense"]
    served = {(offer["method"], offer["lang"]): offer for offer in data["served"]}
    assert served["ir-custom", "en"]["available"] and served["ir-custom", "en"]["index"]["books"] == ["Cardio", "Micro"]
    assert served["ir-custom", "zh"]["settings"]["exam"] == "mcmle"
    assert not served["dense", "zh"]["available"] and "openqa index --lang zh --engine dense" in served["dense", "zh"]["error"]
    assert data["limits"]["max_chars"] == MAX_CHARS
    assert call(url, "/v1/health") == (200, {"status": "ok", "version": "0.1.0", "available": 2, "served": 4,
                                             "changed": [], "reloads": []})
    assert "<index folder>/zh-dense" in served["dense", "zh"]["error"] and "/tmp" not in json.dumps(data)


def test_top_n_per_request_reuses_the_open_index(url, engines, monkeypatch):
    def no_reload(*args, **kwargs):
        raise AssertionError("an index was loaded again")

    monkeypatch.setattr(CustomBM25, "load", no_reload)
    for top_n in (1, 2, 5):
        data = ask(url, EN, top_n=top_n, evidence=5)
        assert data["settings"]["top_n"] == top_n and len(data["options"][0]["evidence"]) <= top_n
    assert sorted(engines.ctx.opened) == [("en", "custom"), ("zh", "custom")]


def test_concurrent_requests_get_the_answers_of_sequential_ones(url):
    status, zh = call(url, "/v1/parse", {"text": ZH_BLOCK})
    requests = [
        {"question": q["question"], "options": q["options"], "lang": lang, "top_n": top_n}
        for q, lang in ((QUESTIONS[0], "en"), (QUESTIONS[1], "en"), (zh, "zh"))
        for top_n in (None, 1, 2, 3)
    ] * 3
    alone = [call(url, "/v1/answer", r) for r in requests]
    with ThreadPoolExecutor(min(12, CLIENT_JOBS)) as pool:  # all one client may have in flight
        together = list(pool.map(lambda r: call(url, "/v1/answer", r), requests))
    assert together == alone and all(status == 200 for status, _ in alone)


def test_the_page_and_the_api_docs_work_offline(url):
    page = urllib.request.urlopen(url + "/", timeout=10).read().decode()
    assert 'id="text"' in page and 'src="static/app.js"' in page
    for name in ("common.js", "app.js", "style.css"):
        with urllib.request.urlopen(f"{url}/static/{name}", timeout=10) as response:
            assert response.status == 200
            page += response.read().decode()
    docs = urllib.request.urlopen(url + "/docs", timeout=10).read().decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', docs)
    assert assets and all(a.startswith("/") for a in assets) and "https://" not in page + docs
    for asset in assets:
        assert urllib.request.urlopen(url + asset, timeout=10).status == 200
    spec = json.loads(urllib.request.urlopen(url + "/openapi.json", timeout=10).read())
    assert {"/v1/answer", "/v1/parse", "/v1/methods", "/v1/health"} <= set(spec["paths"])


@pytest.mark.spawns
def test_openqa_serve_starts_answers_and_stops_on_ctrl_c(tmp_path, openqa_serve):
    data, indexes = tiny_site(tmp_path)
    process, url = openqa_serve("--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes), cwd=tmp_path)
    try:
        assert call(url, "/v1/health")[1]["available"] == 1
        assert ask(url, EN, **TOP1)["prediction"] == "C"
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "ir-custom (en) ready" in err and f"{url}/docs" in err


@pytest.mark.spawns
@pytest.mark.parametrize("args, message", [
    (["--lang", "fr"], "unknown language 'fr'"),
    (["--method", "magic"], "unknown method 'magic'"),
    (["--method", "llm"], "--method llm needs --model"),
    (["--method", "reader"], "--method reader needs --model"),
    (["--method", "llm", "--model", "m", "--endpoint", "http://user:s3cret@127.0.0.1:9/v1"],
     "--endpoint http://127.0.0.1:9/v1 must not carry a user or password: give the key in $OPENQA_API_KEY"),
    (["--method", "llm", "--model", "m", "--endpoint", "http://127.0.0.1:9/v1?api_key=s3cret"],
     "--endpoint http://127.0.0.1:9/v1 must not carry a query string or fragment"),
    (["--port", "0"], "--port must be between 1 and 65535"),
])
def test_openqa_serve_refuses_bad_flags_in_one_line(tmp_path, args, message):
    result = subprocess.run([OPENQA, "serve", *args, "--index-dir", str(tmp_path)], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "OPENQA_DATA": str(tmp_path)})
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0 and message in result.stderr
    assert "s3cret" not in result.stderr + result.stdout  # no credential is shown, nor served


def test_clients_are_keyed_by_address_or_by_a_trusted_header():
    """Fair sharing keys clients by peer address; behind a proxy (``--client-header``) by the header it sets."""
    from types import SimpleNamespace

    from starlette.requests import Request as StarletteRequest

    from openqa.serve.app import check_client_header
    from openqa.serve.routes import CLIENT_KEY_CHARS, peer

    def request(header: str | None, *appended: str, **headers: str) -> StarletteRequest:
        app = SimpleNamespace(state=SimpleNamespace(client_header=header))
        return StarletteRequest({"type": "http", "client": ("10.0.0.7", 51234), "app": app,
                                 "headers": [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
                                 + [(b"x-client-id", v.encode()) for v in appended]})

    assert peer(request(None, X_Client_Id="alice")) == "10.0.0.7"  # not trusted unless the operator says so
    assert peer(request("X-Client-Id", X_Client_Id="alice")) == "X-Client-Id:alice"
    assert peer(request("X-Client-Id")) == "10.0.0.7"  # the proxy did not set it: the address
    assert peer(request("X-Client-Id", X_Client_Id="b" * 1000)) == "X-Client-Id:" + "b" * CLIENT_KEY_CHARS
    # a client's own line before the one a proxy adds, or before the value it appends to the line: the proxy's wins
    assert peer(request("X-Client-Id", "proxy-user", X_Client_Id="chosen-by-client")) == "X-Client-Id:proxy-user"
    assert peer(request("X-Client-Id", X_Client_Id="chosen-by-client, proxy-user")) == "X-Client-Id:proxy-user"
    check_client_header("X-Client-Id")
    with pytest.raises(OpenQAError, match="is not a header name"):
        check_client_header("X Client: id")
