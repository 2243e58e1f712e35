"""``openqa serve``: a JSON API (versioned under ``/v1``) and a web page over the functions below.

Each endpoint parses a request, calls one function (``parse_block``, ``make_question``, the
``Engines`` that hold the opened methods) and returns its record. Bad input gets a 4xx status and
a one-line JSON error, ``{"error": "..."}``, never a traceback: 400 for what ``openqa answer``
refuses (empty question, fewer than two options, a repeated letter), for an unknown method or
language and for a body that is empty, not JSON, not UTF-8, holds a lone surrogate, is nested too
deeply or holds a number too long to read; 403 for a
Host header that does not name this server (DNS rebinding); 404 for a method this server does
not offer (the message names the ``openqa index`` command that builds its index) or a path it
does not have, 405 for an HTTP method a path does not take (whatever the body); 408 for a body
that does not arrive in time; 413 for a question over its method's size limit or an oversized
body; 422 for a request of the wrong shape (types are strict: ``"5"`` is no number); 503 for a
request over its method's time limit, whose index is being rebuilt, or in flight when the server
stops. The event loop only moves bytes: parsing and scoring run in
threads. The API docs at ``/docs`` load Swagger UI from the package ``fastapi-offline``, so they
work without a network, as does the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import signal
import socket
import threading
import time
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, cast

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openqa import __version__
from openqa.data import Question
from openqa.data.pasted import MAX_CHARS, MAX_OPTIONS, TooLongError, make_question, parse_block
from openqa.errors import OpenQAError
from openqa.methods import Request as MethodRequest
from openqa.serve.engines import CLOSE_SECONDS, DEFAULT_LIMITS, Engines, RequestError, limits, overtime, size, stopping
from openqa.serve.examples import examples
from openqa.workspace import Context

if TYPE_CHECKING:
    import uvicorn

STATIC = Path(__file__).parent / "static"
#: The most paragraphs per option a request may ask for, and the largest top-N it may set.
MAX_EVIDENCE = 20
MAX_TOP_N = 100
#: The most paragraphs ``POST /v1/search`` returns.
MAX_SEARCH_K = 100
#: Request bodies over this many bytes are refused (413) unread: a question at ``MAX_CHARS`` with
#: every character JSON-escaped as ``\\uXXXX`` (6 bytes) still fits.
MAX_BODY = 6 * MAX_CHARS + 16 * 1024
#: Seconds a request body may take to arrive in full (a client trickling bytes gets a 408).
BODY_SECONDS = 20.0
#: How often a request waiting for its answer looks whether its client is still there (seconds).
POLL_SECONDS = 0.2
#: Seconds the server waits for requests still arriving after Ctrl-C, SIGTERM or SIGHUP before answering
#: them with a 503 (requests being scored get theirs within ``POLL_SECONDS``): with ``FLUSH_SECONDS``
#: and ``CLOSE_SECONDS`` for a job stuck between checkpoints, the server is gone within 4 s, leaving a
#: loaded machine a second of the 5 s promised.
GRACE_SECONDS = 2
#: Seconds a stopping server keeps a connection between requests open for a request its client may be
#: sending (answered with a 503, where closing the socket over its bytes would reset it): within the grace.
IDLE_SECONDS = 1.0
#: Seconds the requests a stopping server cut off after the grace period have to write their 503s.
FLUSH_SECONDS = 0.2
#: The signals that stop the server (SIGHUP: its terminal closed).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Seconds a client may take to send a request's line and headers (a trickle is cut off).
HEADER_SECONDS = 10.0
#: Option letters, as ``openqa answer`` takes them (A-J).
LETTERS = "ABCDEFGHIJ"[:MAX_OPTIONS]
#: Host names every server answers to when bound to loopback.
LOOPBACK = ("localhost", "127.0.0.1", "::1")
#: Where ``fastapi-offline`` serves the docs' scripts and styles.
OFFLINE_DOCS = "/static-offline-docs"
#: A page that may load only from this server (inline code and blob workers included, as ReDoc needs).
SAME_ORIGIN = "default-src 'self' 'unsafe-inline' data: blob:"
#: CSS hiding the ReDoc bundle's remote logo.
NO_LOGO = 'img[src^="http"] { display: none; }'
#: Wording of ``openqa answer``'s messages that names its flags, as a web client reads it.
WEB_WORDS = {" (or --option A=text)": ""}


class AnswerRequest(BaseModel):
    """A question to solve: its text, its options, and optionally the method, language, top-N
    and how many evidence paragraphs to return per option."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{
        "question": "A sexually active man has septic arthritis of the knee. Which drug blocks cell wall synthesis?",
        "options": {"A": "Gentamicin", "B": "Ciprofloxacin", "C": "Ceftriaxone", "D": "Trimethoprim"},
        "method": "ir-custom", "lang": "en", "evidence": 3,
    }]})

    question: str = Field(description=f"the question text (with the options: at most {MAX_CHARS} characters)")
    options: dict[str, str] = Field(description=f"letter -> option text, 2 to {MAX_OPTIONS} (letters A-{LETTERS[-1]})")
    method: str | None = Field(None, description="option scorer (default: the server's first; see GET /v1/methods)")
    lang: str | None = Field(None, description="corpus language, en or zh (default: the server's first)")
    top_n: int | None = Field(None, ge=1, le=MAX_TOP_N, description="paragraphs per option to aggregate (default: dev-tuned)")
    evidence: int = Field(3, ge=0, le=MAX_EVIDENCE, description="evidence paragraphs returned per option (at most top-N)")
    min_confidence: float | None = Field(None, ge=0, le=1, description="abstain (prediction null, with the best guess in "
                                         "`confidence`) when the chosen option's probability is below this")


class ParseRequest(BaseModel):
    """A pasted block: the question, then its options one per line (``A: ...``, ``（A）...``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: str = Field(description="question lines, then option lines A, B, ... last (as `openqa answer` reads them)")


class ParsedQuestion(BaseModel):
    """A pasted block as the question and options of an ``AnswerRequest``."""

    question: str
    options: dict[str, str]


class Evidence(BaseModel):
    """One evidence paragraph; ``spans`` are the ``[start, end)`` character spans of its words
    that match the option's query (``text[start:end]``)."""

    id: str
    book: str
    score: float
    text: str
    spans: list[tuple[int, int]]


class RankedOption(BaseModel):
    """An option with its score (null: no evidence), its probability (the method's calibration,
    ``openqa tune``) and its best evidence paragraphs."""

    letter: str
    text: str
    score: float | None
    probability: float | None = None
    evidence: list[Evidence]


class Confidence(BaseModel):
    """How sure the answer is: the chosen option's probability, what that meant on the exam's dev
    split, which calibration gave it, and whether openqa abstained below ``min_confidence`` (then
    ``best_guess`` is the option it would have chosen)."""

    probability: float | None
    meaning: str
    calibration: str
    min_confidence: float | None
    abstained: bool
    best_guess: str | None = None


class Answer(BaseModel):
    """The options best first, the prediction (null with a ``message`` when no word of the question
    is in the index), the letters tied with it, and the settings used with each one's source; an
    LLM reader adds its ``details``: the raw reply, the letter read from it, its letter probabilities
    and the cited paragraph ids."""

    question: str
    prediction: str | None
    tied: list[str]
    matched: bool
    message: str | None
    method: str
    lang: str
    settings: dict[str, Any]
    options: list[RankedOption]
    confidence: Confidence | None = None
    details: dict[str, Any] | None = None


class SearchRequest(BaseModel):
    """A free-text query for the paragraphs of one served index (as ``openqa search``)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"query": "drug that blocks bacterial cell wall synthesis", "lang": "en", "engine": "custom", "k": 5}]})

    query: str = Field(description=f"the text to search for (at most {MAX_CHARS} characters)")
    lang: str | None = Field(None, description="corpus language, en or zh (default: the server's first)")
    engine: str = Field("custom", description="index to search: one a served method reads (custom, lucene, elasticsearch, dense)")
    k: int = Field(10, ge=1, le=MAX_SEARCH_K, description="paragraphs to return, best first")


class SearchHit(BaseModel):
    """A retrieved paragraph and its rank (1 = best)."""

    id: str
    book: str
    score: float
    text: str
    rank: int


class SearchResponse(BaseModel):
    """The ranked paragraphs of a query, with the index they come from."""

    query: str
    lang: str
    engine: str
    hits: list[SearchHit]


class Error(BaseModel):
    """What every refused request gets: one line."""

    error: str


ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Error} for code in (400, 403, 404, 408, 413, 422, 503)}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


def _checked(build: Callable[..., Question], *args: Any) -> Question:
    """A question from ``make_question`` or ``parse_block``, whose refusals become request errors
    worded for a web client."""
    try:
        return build(*args)
    except OpenQAError as exc:
        message = str(exc)
        for cli, web in WEB_WORDS.items():
            message = message.replace(cli, web)
        raise RequestError(message, 413 if isinstance(exc, TooLongError) else 400) from None


def _lettered(options: dict[str, str]) -> dict[str, str]:
    """Option letters upper-cased, each one of A-J and given once (as ``openqa answer --option``)."""
    out: dict[str, str] = {}
    for key, text in options.items():
        letter = key.strip().upper()
        if len(letter) != 1 or letter not in LETTERS:
            raise RequestError(f"option letters are A to {LETTERS[-1]}, not {key!r}")
        if letter in out:
            raise RequestError(f"option {letter} is given twice")
        out[letter] = text
    return out


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refusing a key given twice (a parser would keep the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RequestError(f"option {key} is given twice" if len(key) == 1 else f"{key!r} is given twice")
        out[key] = value
    return out


def check_json(body: bytes) -> None:
    """Refuse (400) a body that is empty, not UTF-8, not JSON, gives a key twice or holds a lone
    surrogate (``"\\ud800"`` parses, but is no character and cannot be written back as UTF-8)."""
    if not body.strip():
        raise RequestError('empty request body: send a JSON object, such as {"text": "..."} or {"question": "...", "options": {...}}')
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"the request body is not UTF-8 (byte {exc.start})") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise RequestError(f"the request body is not valid JSON ({exc.msg} at character {exc.pos}); "
                           "send a JSON object with Content-Type: application/json") from None
    except RecursionError:
        raise RequestError("the request body is nested too deeply: send a JSON object of strings and numbers") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        raise RequestError(f"the request body holds a number too long to read ({exc})") from None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(f"the request holds a lone surrogate ({exc.object[exc.start:exc.end]!r}): "
                           "text must be valid Unicode") from None


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """The first problem of a request of the wrong shape, on one line (400 for a body that is not JSON)."""
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return 400, f"the request body is not valid JSON ({first.get('ctx', {}).get('error', first['msg'])})"
    where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
    return 422, f"{where}: {first['msg']}"


def host_name(header: str) -> str:
    """The name in a Host header, without port, brackets or trailing dot, lower-cased."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    name = header.rsplit(":", 1)[0] if header.count(":") == 1 else header
    return name.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class Guard:
    """ASGI middleware in front of the app: refuses a Host header that names no address of this
    server (403: a page elsewhere whose name was rebound to this address must not reach the API),
    answers HEAD as GET without the body, and reads a request body before the app sees it, refusing
    one over ``limit`` bytes (413: at once when its Content-Length says so, else as soon as the bytes
    received pass it), one that does not arrive within ``BODY_SECONDS`` (408) and, for a ``/v1``
    route that takes a POST, one that is not a JSON text (``check_json``; any other path or method
    gets the router's 404 or 405, whatever its body). A JSON body is handed on labelled as JSON, so
    a client that sent JSON as a form (``curl -d``) is understood. Once the server is ``stopping``,
    every answer says ``Connection: close``: a kept-alive client then sends its next request on a new
    connection (refused once the server has stopped listening) instead of on one the server is
    about to close (which its request would find reset)."""

    def __init__(self, app: ASGIApp, limit: int, hosts: Iterable[str], any_ip: bool, router: Router,
                 stopping: threading.Event) -> None:
        self.app = app
        self.limit = limit
        self.hosts = {host_name(host) for host in hosts}
        self.any_ip = any_ip
        self.router = router
        self.stopping = stopping

    def routed(self, scope: Scope) -> bool:
        """Whether a route of the app takes this path with this method."""
        return any(route.matches(scope)[0] is Match.FULL for route in self.router.routes)

    def host_allowed(self, header: str | None) -> bool:
        if header is None:
            return True  # HTTP/1.0 without a Host: no browser sends that
        name = host_name(header)
        return name in self.hosts or (self.any_ip and _is_ip(name))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            if message["type"] == "http.response.start" and self.stopping.is_set():
                message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
            await send(message)

        try:
            await self.guarded(scope, receive, sending)
        except asyncio.CancelledError:  # the server stops (its grace period is over): a 503, no traceback
            if not started:
                await _error(503, str(stopping()))(scope, receive, sending)
        return None

    async def guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not self.host_allowed(host):
            names = ", ".join(sorted(self.hosts))
            return await _error(403, f"host {host!r} is not served here: this server answers to {names}"
                                     " (its operator can add names with --allow-host)")(scope, receive, send)
        if "content-length" in headers and "transfer-encoding" in headers:
            # which one frames the body is ambiguous (request smuggling): refuse, and close the connection
            refused = _error(400, "a request may not give both Content-Length and Transfer-Encoding")
            refused.headers["connection"] = "close"
            return await refused(scope, receive, send)
        if scope["method"] == "HEAD":
            scope, send = {**scope, "method": "GET"}, _without_body(send)
        if scope["method"] in ("GET", "HEAD", "OPTIONS") or not self.routed(scope):
            return await self.app(scope, receive, send)
        try:
            body = await asyncio.wait_for(self.read(headers, receive), BODY_SECONDS)
            if body is None:
                return None  # the client went away
            if scope["path"].startswith("/v1/"):
                check_json(body)
                scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k != b"content-type"]
                         + [(b"content-type", b"application/json")]}
        except asyncio.TimeoutError:
            return await _error(408, f"the request body did not arrive within {BODY_SECONDS:g} s")(scope, receive, send)
        except RequestError as exc:
            return await _error(exc.status, str(exc))(scope, receive, send)
        received = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            return received.pop() if received else await receive()

        return await self.app(scope, replay, send)

    async def read(self, headers: Headers, receive: Receive) -> bytes | None:
        """The whole body (None if the client disconnected), or a 413 past ``limit`` bytes."""
        too_large = RequestError(f"request body too large (at most {self.limit} bytes)", 413)
        length = headers.get("content-length", "0")
        if length.isdigit() and int(length) > self.limit:
            raise too_large
        chunks: list[bytes] = []
        size, message = 0, cast(Message, {"more_body": True})
        while message.get("more_body"):
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                raise too_large
        return b"".join(chunks)


def peer(request: Request) -> str:
    """Who sent ``request``, as the worker pool shares its threads among clients: the peer's address
    (its port is left out: one client opening many connections is still one client)."""
    return request.client.host if request.client else ""


def _without_body(send: Send) -> Send:
    """``send`` for a HEAD request: the GET's status and headers, no body bytes."""

    async def head(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return head


async def _answered(future: Future[dict[str, Any]], request: Request, deadline: float, what: str,
                    stopped: threading.Event) -> dict[str, Any]:
    """The result of a scoring job, waited for without blocking the event loop; a 503 past the
    deadline or once the server stops (``stopped``), a 499 once the client has disconnected (the
    job is then abandoned by the caller)."""
    waiting = asyncio.wrap_future(future)
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=POLL_SECONDS)
            if done:
                return waiting.result()
            if await request.is_disconnected():
                raise RequestError("the client closed the connection", 499)
            if stopped.is_set():
                raise stopping()
            if time.monotonic() > deadline:
                raise overtime(what)
    finally:
        waiting.cancel()  # a job that ends later sets no result here


def create_app(engines: Engines, hosts: Iterable[str] = LOOPBACK, any_ip: bool = False, results: Path | None = None) -> FastAPI:
    """The API and the page over ``engines`` (opened methods), answering requests whose Host header
    names one of ``hosts`` (or, with ``any_ip``, any IP address); with ``results``, also the
    read-only results page over that folder of eval records (``openqa.evaluate.browse``)."""
    app = FastAPIOffline(
        title="openqa", version=__version__,
        description="Solve medical licensing exam questions with evidence from the MedQA textbooks. "
                    "No authentication: bind to 127.0.0.1 (the default) unless you mean to share it.",
        swagger_ui_parameters={"validatorUrl": None}, redoc_url=None,
    )

    app.add_middleware(Guard, limit=MAX_BODY, hosts=hosts, any_ip=any_ip, router=app.router, stopping=engines.stopping)

    @app.exception_handler(OpenQAError)
    async def _refused(request: Request, exc: OpenQAError) -> JSONResponse:
        return _error(getattr(exc, "status", 400), engines.public(str(exc)))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(*_validation_message(exc))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        messages = {404: f"no such page: {request.method} {request.url.path}",
                    405: f"{request.method} is not allowed on {request.url.path}"}
        return _error(exc.status_code, messages.get(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def _crashed(request: Request, exc: Exception) -> JSONResponse:  # uvicorn logs the traceback
        return _error(500, f"internal error ({type(exc).__name__}); the server's log has the details")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        """ReDoc from ``fastapi-offline``'s files, told by its Content-Security-Policy to load nothing
        from elsewhere (its bundle would fetch the Redocly logo from a CDN; that image is hidden)."""
        root = request.scope.get("root_path", "")
        page = get_redoc_html(openapi_url=f"{root}{app.openapi_url}", title="openqa - ReDoc", with_google_fonts=False,
                              redoc_js_url=f"{root}{OFFLINE_DOCS}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{OFFLINE_DOCS}/favicon.png")
        html = bytes(page.body).decode().replace("</head>", f"<style>{NO_LOGO}</style></head>", 1)
        return HTMLResponse(html, headers={"Content-Security-Policy": SAME_ORIGIN})

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    if results is not None:
        add_results(app, Path(results), engines)

    @app.get("/v1/health", summary="Whether the server is up, how many methods it serves, and indexes changed on disk")
    async def health() -> dict[str, Any]:
        served = await run_in_threadpool(engines.describe)
        changed = [f"{o['method']} ({o['lang']}): {o['changed']}" for o in served if "changed" in o]
        return {"status": "ok" if not changed else "changed", "version": __version__,
                "available": sum(offer["available"] for offer in served), "served": len(served),
                "changed": changed, "reloads": engines.reloads[-5:]}

    @app.get("/v1/methods", summary="Methods and languages served, each with its index, settings and limits or why it is not available")
    async def methods() -> dict[str, Any]:
        return {
            "languages": engines.langs, "methods": engines.methods,
            "default": {"method": engines.methods[0], "lang": engines.langs[0]},
            "served": await run_in_threadpool(engines.describe),
            "limits": {"max_chars": MAX_CHARS, "max_options": MAX_OPTIONS, "max_top_n": MAX_TOP_N,
                       "max_evidence": MAX_EVIDENCE, "max_body_bytes": MAX_BODY},
        }

    @app.get("/v1/examples", summary="Real MedQA questions with their answer keys, chosen by a stated rule (none without a data folder)")
    async def example_questions(lang: str | None = None) -> dict[str, Any]:
        lang = lang or engines.langs[0]
        if lang not in engines.langs:
            raise RequestError(f"unknown language {lang!r}: choose one of {', '.join(engines.langs)}")
        return await run_in_threadpool(examples, engines.ctx.settings.data_dir, lang)

    @app.post("/v1/parse", response_model=ParsedQuestion, responses=ERRORS,
              summary="Turn a pasted question (question lines, then option lines) into an answer request")
    async def parse(body: ParseRequest) -> ParsedQuestion:
        question = await run_in_threadpool(_checked, parse_block, body.text)
        return ParsedQuestion(question=question.question, options=question.options)

    @app.post("/v1/answer", response_model=Answer, responses=ERRORS,
              summary="Rank a question's options, with evidence paragraphs and the spans of their matched words")
    async def answer(body: AnswerRequest, request: Request) -> dict[str, Any]:
        method, lang = engines.offer(body.method, body.lang)
        limit = limits(method)
        deadline = time.monotonic() + limit.seconds
        question = await run_in_threadpool(_checked, make_question, body.question, _lettered(body.options))
        if size(question) > limit.max_chars:
            raise RequestError(f"question too long for {method}: {size(question)} characters with its options "
                               f"(at most {limit.max_chars} per request)", 413)
        abandoned = threading.Event()
        future = engines.answer(question, method, lang, body.top_n, body.evidence, abandoned, deadline, body.min_confidence,
                                peer(request))
        try:
            return await _answered(future, request, deadline, f"{method} ({lang})", engines.stopping)
        finally:
            abandoned.set()  # a job still queued or waiting for its index never starts
            future.cancel()

    @app.post("/v1/search", response_model=SearchResponse, responses=ERRORS,
              summary="Ranked paragraphs of a served index for a free-text query (retrieval alone)")
    async def search(body: SearchRequest, request: Request) -> dict[str, Any]:
        if len(body.query) > MAX_CHARS:
            raise RequestError(f"query too long: {len(body.query)} characters (at most {MAX_CHARS})", 413)
        deadline = time.monotonic() + DEFAULT_LIMITS.seconds
        future = engines.search(body.query, body.lang, body.engine, body.k, peer(request))
        try:
            return await _answered(future, request, deadline, f"search ({body.engine})", engines.stopping)
        finally:
            future.cancel()

    return app


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port``, or a one-line error when the port is taken (before any
    index is opened or any address printed)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise OpenQAError(f"cannot listen on {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT by a stopped server
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise OpenQAError(f"cannot listen on {host}:{port}: {exc.strerror} (another server there? "
                          "stop it or choose another --port)") from None
    return sock


def header_timed(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (h11) that closes a connection whose request line and headers have not
    all arrived ``seconds`` after it opened or after the request's first byte (uvicorn times out an
    idle kept-alive connection, not a trickled head, so each such client would hold a socket for ever).
    When the server stops, a connection between requests is closed ``IDLE_SECONDS`` later, not at
    once: a request its client has just sent (not read yet) is answered, where closing the socket
    over its unread bytes would reset it."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimed(H11Protocol):
        timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self.start_timer()

        def start_timer(self) -> None:
            if self.timer is None:
                self.timer = self.loop.call_later(seconds, self.head_late)

        def stop_timer(self) -> None:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None

        def data_received(self, data: bytes) -> None:
            before = self.cycle
            if before is None or before.response_complete:  # these bytes begin a request's head
                self.start_timer()
            super().data_received(data)
            if self.cycle is not before:  # its head arrived in full
                self.stop_timer()

        def shutdown(self) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self.loop.call_later(IDLE_SECONDS, self.stop_when_idle)
            else:
                super().shutdown()

        def stop_when_idle(self) -> None:
            """uvicorn's shutdown of this connection: closed if no request came meanwhile, else after
            answering the one that came."""
            if not self.transport.is_closing():
                super().shutdown()

        def head_late(self) -> None:
            self.timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self.stop_timer()
            super().connection_lost(exc)

    return HeaderTimed


class _Server:
    """uvicorn's server whose first Ctrl-C, SIGTERM or SIGHUP stops it gracefully and whose second
    one stops it at once; the signals are not raised again after the stop, so the caller decides the
    exit status (``forced``). The first signal calls ``on_stop`` (the jobs in flight stop at their
    next checkpoint and their requests get a 503 saying the server stops); a client still sending
    its request after ``GRACE_SECONDS`` gets that 503 too.

    Every request the server has received is answered: the connections still waiting in the
    listening socket's queue are taken over before it closes (closing it would reset them), and
    the 503s of the requests cut off after the grace period are written before the server returns."""

    def __init__(self, app: FastAPI, on_stop: Callable[[], None]) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            @contextlib.contextmanager
            def capture_signals(self) -> Iterator[None]:
                originals = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
                try:
                    yield
                finally:
                    for sig, handler in originals.items():
                        signal.signal(sig, handler)

            def handle_exit(self, sig: int, frame: Any) -> None:
                self.force_exit = self.should_exit
                self.should_exit = True
                on_stop()

            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                if not self.force_exit:
                    await admit(self, sockets or [])
                await super().shutdown(sockets)
                if self.server_state.tasks and not self.force_exit:  # the cut-off requests write their 503s
                    await asyncio.wait(set(self.server_state.tasks), timeout=FLUSH_SECONDS)

        self.server = Server(uvicorn.Config(app, log_level="info", lifespan="off", timeout_graceful_shutdown=GRACE_SECONDS,
                                            http=header_timed(HEADER_SECONDS)))

    def run(self, sock: socket.socket) -> bool:
        """Serve on ``sock`` until stopped; whether the stop was forced (a second signal)."""
        self.server.run(sockets=[sock])
        return self.server.force_exit


async def admit(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
    """Stop listening on ``sockets`` (uvicorn's started ``server`` over them), first taking over the
    connections still waiting in their queues (closing a listening socket resets those: their
    clients, who had sent a request, would get no answer). The server's protocol
    (``header_timed``) gives them a moment to send their requests before it closes them."""
    loop = asyncio.get_running_loop()
    waiting = []
    for sock in sockets:
        loop.remove_reader(sock.fileno())  # the loop accepts no more from it: what waits is taken here
        waiting += _accepted(sock)
    for listening in server.servers:
        listening.close()
    make = cast(Callable[..., asyncio.Protocol], server.config.http_protocol_class)  # as uvicorn makes its protocols
    protocol = partial(make, config=server.config, server_state=server.server_state, app_state=server.lifespan.state)
    for conn in waiting:
        await loop.connect_accepted_socket(protocol, conn)


def _accepted(sock: socket.socket) -> list[socket.socket]:
    """The connections waiting in the queue of the listening ``sock`` (non-blocking), accepted."""
    out: list[socket.socket] = []
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:  # none left (BlockingIOError), or the socket is gone
            return out
        conn.setblocking(False)
        out.append(conn)


def add_results(app: FastAPI, folder: Path, engines: Engines) -> None:
    """The results page (``/results``) and its JSON: the runs of ``folder``, a run's questions (with
    their text where the data folder has the run's dataset), and the comparison of runs."""
    from openqa.evaluate.browse import inside, list_runs, run_curves, run_questions, run_row
    from openqa.evaluate.compare import compare_runs
    from openqa.pipeline import compare_lookup

    lookup = compare_lookup(engines.ctx.settings)

    @app.get("/results", include_in_schema=False)
    async def results_page() -> FileResponse:
        return FileResponse(STATIC / "results.html")

    @app.get("/v1/results", summary="Every eval run of the results folder (unreadable ones with their reason)")
    def runs() -> dict[str, Any]:
        return {"folder": folder.name, "runs": list_runs(folder)}

    @app.get("/v1/results/{run}", summary="A run's questions: prediction, answer, probabilities, and the question's text where known")
    def questions(run: str) -> dict[str, Any]:
        rows = run_questions(folder, run)  # the name is checked there: a plain file of the folder or its subfolders
        try:
            summary: Path | None = inside(folder, run, ".json")
        except OpenQAError:
            summary = None
        record = run_row(summary) if summary is not None else None  # that run's record alone, not the whole folder's
        texts = engines.question_texts(record["dataset"], record["split"]) if record and "dataset" in record else {}
        return {"run": run, "questions": [{**row, **texts.get(str(row["qid"]), {})} for row in rows]}

    @app.get("/v1/results/{run}/curves", summary="A run's risk-coverage curve and reliability diagram, from its predictions")
    def run_curve(run: str) -> dict[str, Any]:
        return run_curves(folder, run)

    @app.get("/v1/compare", summary="Runs compared question by question (as openqa compare): ?runs=A,B[,C...]")
    def compare(runs: str) -> dict[str, Any]:
        return compare_runs([inside(folder, name, ".json") for name in runs.split(",")], lookup)


def serve(ctx: Context, langs: list[str], methods: list[str], host: str, port: int,
          allow_hosts: list[str] | None = None, request: MethodRequest = MethodRequest(), results: Path | None = None) -> None:
    """Open the methods once, then serve the page and the API on ``host:port`` until Ctrl-C (a
    second Ctrl-C stops at once and raises ``KeyboardInterrupt``). Requests must name this server
    in their Host header: ``host`` (any IP address when it is a wildcard), loopback names when it
    is loopback, or one of ``allow_hosts``. ``request`` gives the methods what they need beyond
    an index (the LLM reader's model and settings)."""
    sock = listen(host, port)
    wildcard = host in ("0.0.0.0", "::", "")
    hosts = [host, *(LOOPBACK if wildcard or host in LOOPBACK else ()), *(allow_hosts or [])]
    forced = False
    with sock:
        engines = Engines(ctx, langs, methods, request)
        try:
            for offer in engines.describe():
                state = "ready" if offer["available"] else f"not available: {offer['error']}"
                ctx.notify(f"{offer['method']} ({offer['lang']}) {state}")
            shown = f"[{host}]" if ":" in host else host
            ctx.notify(f"page at http://{shown}:{port}/ and API docs at http://{shown}:{port}/docs"
                       + ("" if host in LOOPBACK else "; no authentication: anyone who reaches this address can use it"))
            if results is not None:
                ctx.notify(f"results of {results} at http://{shown}:{port}/results")
            forced = _Server(create_app(engines, hosts, any_ip=wildcard, results=results), engines.stop).run(sock)
        finally:
            engines.close(0.0 if forced else CLOSE_SECONDS)
    if forced:
        raise KeyboardInterrupt
