"""The JSON API under ``/v1``: each endpoint parses a request, calls one function (``parse_block``,
``make_question``, the ``Engines`` that hold the opened methods) and returns its record; parsing and
scoring run in threads, and so do validating and encoding a reply (``encoded``), so the event loop
only moves bytes."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from functools import partial
from typing import Any, Callable, TypeVar

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from openqa import __version__
from openqa.data import Question
from openqa.data.pasted import MAX_CHARS, MAX_OPTIONS, TooLongError, make_question, parse_block
from openqa.errors import OpenQAError
from openqa.methods.base import SEARCH_LIMITS
from openqa.serve.engines import Engines, RequestError, limits, overtime, size, stopping
from openqa.serve.examples import examples
from openqa.serve.guard import BODY_SECONDS, MAX_BODY
from openqa.serve.schemas import (
    ERRORS,
    LETTERS,
    MAX_EVIDENCE,
    MAX_TOP_N,
    Answer,
    AnswerRequest,
    ParsedQuestion,
    ParseRequest,
    SearchRequest,
    SearchResponse,
    encoded,
)
from openqa.serve.transport import HEADER_SECONDS

T = TypeVar("T")

#: How much of a trusted client header keys a client (a longer value is cut: it names, it does not carry).
CLIENT_KEY_CHARS = 200
#: How often a request waiting for its answer looks whether its client is still there (seconds).
POLL_SECONDS = 0.2
#: Wording of ``openqa answer``'s messages that names its flags, as a web client reads it.
WEB_WORDS = {" (or --option A=text)": ""}


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


def peer(request: Request) -> str:
    """Who sent ``request``, as the worker pool shares its threads among clients: the peer's address
    (its port is left out: one client opening many connections is still one client), or, when the
    server was told to trust one (``serve --client-header``), the value of that header as a reverse
    proxy sets it (every user behind one proxy shares its address; two addresses of one machine
    would count as two clients). Of several values (header lines, or one line's comma-separated
    list) the last is the proxy's: a proxy that adds the header appends it after any the client
    sent. A request without the header is keyed by its address."""
    header = getattr(request.app.state, "client_header", None)
    lines = request.headers.getlist(header) if header else []
    given = lines[-1].rsplit(",", 1)[-1].strip() if lines else None
    if given:
        return f"{header}:{given[:CLIENT_KEY_CHARS]}"
    return request.client.host if request.client else ""


async def answered(future: Future[T], abandoned: threading.Event, request: Request, deadline: float, what: str,
                   seconds: float, stopped: threading.Event) -> T:
    """The result of a job (``Engines.submit``), waited for without blocking the event loop; a 503
    past the ``deadline`` (naming the limit of ``seconds``) or once the server stops (``stopped``), a
    499 once the client has disconnected. However the wait ends, the job is abandoned: one still
    queued never starts, one running stops at its next checkpoint."""
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
                raise overtime(what, seconds)
    finally:
        waiting.cancel()  # a job that ends later sets no result here
        abandoned.set()
        future.cancel()


async def on_pool(engines: Engines, request: Request, work: Callable[[], T], what: str, seconds: float, lane: str,
                  heavy: bool) -> T:
    """``work`` run as the client's job on the engines' pool (``Engines.submit``) within its time limit
    of ``seconds``, and its result (or the refusal that stopped it)."""
    deadline = time.monotonic() + seconds
    abandoned = threading.Event()
    future = engines.submit(work, what, seconds, peer(request), lane, heavy, abandoned, deadline)
    return await answered(future, abandoned, request, deadline, what, seconds, engines.stopping)


def add_api(app: FastAPI, engines: Engines) -> None:
    """The ``/v1`` endpoints over ``engines`` (opened methods) on ``app``: health, methods, examples,
    parse, answer and search."""
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
                       "max_evidence": MAX_EVIDENCE, "max_body_bytes": MAX_BODY, "max_in_flight": engines.jobs.cap,
                       "body_seconds": BODY_SECONDS, "header_seconds": HEADER_SECONDS},
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
    async def answer(body: AnswerRequest, request: Request) -> Response:
        method, lang = engines.offer(body.method, body.lang)
        limit = limits(method)
        deadline = time.monotonic() + limit.seconds
        question = await run_in_threadpool(_checked, make_question, body.question, _lettered(body.options))
        if size(question) > limit.max_chars:
            raise RequestError(f"question too long for {method}: {size(question)} characters with its options "
                               f"(at most {limit.max_chars} per request)", 413)
        abandoned = threading.Event()
        future: Future[Response] = await run_in_threadpool(engines.answer, question, method, lang, body.top_n, body.evidence, abandoned,
                                         deadline, body.min_confidence, peer(request),  # weighing it reads its terms
                                         partial(encoded, model=Answer))
        return await answered(future, abandoned, request, deadline, f"{method} ({lang})", limit.seconds, engines.stopping)

    @app.post("/v1/search", response_model=SearchResponse, responses=ERRORS,
              summary="Ranked paragraphs of a served index for a free-text query (retrieval alone)")
    async def search(body: SearchRequest, request: Request) -> Response:
        if len(body.query) > MAX_CHARS:
            raise RequestError(f"query too long: {len(body.query)} characters (at most {MAX_CHARS})", 413)
        deadline = time.monotonic() + SEARCH_LIMITS.seconds
        abandoned = threading.Event()
        future: Future[Response] = await run_in_threadpool(engines.search, body.query, body.lang, body.engine, body.k, peer(request),
                                         abandoned, deadline, partial(encoded, model=SearchResponse))
        return await answered(future, abandoned, request, deadline, f"search ({body.engine})", SEARCH_LIMITS.seconds,
                              engines.stopping)

