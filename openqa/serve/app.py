"""``openqa serve``: a JSON API (versioned under ``/v1``) and a web page over the functions below.

Each endpoint parses a request, calls one function (``parse_block``, ``make_question``, the
``Engines`` that hold the opened methods) and returns its record. Bad input gets a 4xx status and
a one-line JSON error, ``{"error": "..."}``, never a traceback: 400 for what ``openqa answer``
refuses (empty question, fewer than two options, a repeated letter) and for an unknown method or
language, 404 for a method this server does not offer (the message names the ``openqa index``
command that builds its index), 413 for a question over the size limit or an oversized body, 422
for a request of the wrong shape. The API docs at ``/docs`` load Swagger UI from the package
``fastapi-offline``, so they work without a network, as does the page.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Callable

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openqa import __version__
from openqa.data import Question
from openqa.data.pasted import MAX_CHARS, MAX_OPTIONS, TooLongError, make_question, parse_block
from openqa.errors import OpenQAError
from openqa.workspace import Context
from openqa.serve.engines import Engines, RequestError

STATIC = Path(__file__).parent / "static"
#: The most paragraphs per option a request may ask for, and the largest top-N it may set.
MAX_EVIDENCE = 20
MAX_TOP_N = 100
#: Request bodies over this many bytes are refused (413) unread: a question at ``MAX_CHARS`` with
#: every character JSON-escaped as ``\\uXXXX`` (6 bytes) still fits.
MAX_BODY = 6 * MAX_CHARS + 16 * 1024
#: Option letters, as ``openqa answer`` takes them (A-J).
LETTERS = "ABCDEFGHIJ"[:MAX_OPTIONS]


class AnswerRequest(BaseModel):
    """A question to solve: its text, its options, and optionally the method, language, top-N
    and how many evidence paragraphs to return per option."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
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


class ParseRequest(BaseModel):
    """A pasted block: the question, then its options one per line (``A: ...``, ``（A）...``)."""

    model_config = ConfigDict(extra="forbid")
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
    """An option with its score (null: no evidence) and its best evidence paragraphs."""

    letter: str
    text: str
    score: float | None
    evidence: list[Evidence]


class Answer(BaseModel):
    """The options best first, the prediction (null with a ``message`` when no word of the question
    is in the index), the letters tied with it, and the settings used with each one's source."""

    question: str
    prediction: str | None
    tied: list[str]
    matched: bool
    message: str | None
    method: str
    lang: str
    settings: dict[str, Any]
    options: list[RankedOption]


class Error(BaseModel):
    """What every refused request gets: one line."""

    error: str


ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": Error} for code in (400, 404, 413, 422)}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


def _checked(build: Callable[..., Question], *args: Any) -> Question:
    """A question from ``make_question`` or ``parse_block``, whose refusals become request errors."""
    try:
        return build(*args)
    except OpenQAError as exc:
        raise RequestError(str(exc), 413 if isinstance(exc, TooLongError) else 400) from None


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


async def no_repeated_keys(request: Request) -> None:
    """Refuse a body that gives a key twice, such as an option letter."""
    json.loads(await request.body(), object_pairs_hook=_unique_keys)


def _validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """The first problem of a request of the wrong shape, on one line (400 for a body that is not JSON)."""
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return 400, f"the request body is not valid JSON ({first.get('ctx', {}).get('error', first['msg'])})"
    where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
    return 422, f"{where}: {first['msg']}"


class BodyLimit:
    """ASGI middleware that refuses a request body over ``limit`` bytes with a one-line JSON 413
    before the app parses it: at once when its Content-Length says so, else as soon as the bytes
    received pass the limit (a body within it is handed on as received)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = _error(413, f"request body too large (at most {self.limit} bytes)")
        length = Headers(scope=scope).get("content-length", "0")
        if length.isdigit() and int(length) > self.limit:
            return await too_large(scope, receive, send)
        body, message = b"", {"more_body": True}
        while message.get("more_body"):
            message = await receive()
            body += message.get("body", b"")
            if len(body) > self.limit:
                return await too_large(scope, receive, send)
        if message["type"] == "http.disconnect":
            return None
        received = [{"type": "http.request", "body": body, "more_body": False}]

        async def replay() -> Message:
            return received.pop() if received else await receive()

        return await self.app(scope, replay, send)


def create_app(engines: Engines) -> FastAPI:
    """The API and the page over ``engines`` (opened methods)."""
    app = FastAPIOffline(
        title="openqa", version=__version__,
        description="Solve medical licensing exam questions with evidence from the MedQA textbooks. "
                    "No authentication: bind to 127.0.0.1 (the default) unless you mean to share it.",
        swagger_ui_parameters={"validatorUrl": None},
    )

    app.add_middleware(BodyLimit, limit=MAX_BODY)

    @app.exception_handler(OpenQAError)
    async def _refused(request: Request, exc: OpenQAError) -> JSONResponse:
        return _error(getattr(exc, "status", 400), str(exc))

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

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/v1/health", summary="Whether the server is up and how many methods it serves")
    async def health() -> dict[str, Any]:
        served = engines.describe()
        return {"status": "ok", "version": __version__,
                "available": sum(offer["available"] for offer in served), "served": len(served)}

    @app.get("/v1/methods", summary="Methods and languages served, each with its index and settings or why it is not available")
    async def methods() -> dict[str, Any]:
        return {
            "languages": engines.langs, "methods": engines.methods,
            "default": {"method": engines.methods[0], "lang": engines.langs[0]},
            "served": engines.describe(),
            "limits": {"max_chars": MAX_CHARS, "max_options": MAX_OPTIONS, "max_top_n": MAX_TOP_N,
                       "max_evidence": MAX_EVIDENCE, "max_body_bytes": MAX_BODY},
        }

    @app.post("/v1/parse", response_model=ParsedQuestion, responses=ERRORS,
              summary="Turn a pasted question (question lines, then option lines) into an answer request")
    async def parse(body: ParseRequest) -> ParsedQuestion:
        question = _checked(parse_block, body.text)
        return ParsedQuestion(question=question.question, options=question.options)

    @app.post("/v1/answer", response_model=Answer, responses=ERRORS, dependencies=[Depends(no_repeated_keys)],
              summary="Rank a question's options, with evidence paragraphs and the spans of their matched words")
    async def answer(body: AnswerRequest) -> dict[str, Any]:
        question = _checked(make_question, body.question, _lettered(body.options))
        return await asyncio.wrap_future(engines.answer(question, body.method, body.lang, body.top_n, body.evidence))

    return app


def serve(ctx: Context, langs: list[str], methods: list[str], host: str, port: int) -> None:
    """Open the methods once, then serve the page and the API on ``host:port`` until Ctrl-C."""
    import uvicorn

    engines = Engines(ctx, langs, methods)
    for offer in engines.describe():
        state = "ready" if offer["available"] else f"not available: {offer['error']}"
        ctx.notify(f"{offer['method']} ({offer['lang']}) {state}")
    ctx.notify(f"page at http://{host}:{port}/ and API docs at http://{host}:{port}/docs"
               + ("" if host in ("127.0.0.1", "localhost", "::1") else "; no authentication: anyone who reaches this address can use it"))
    try:
        uvicorn.run(create_app(engines), host=host, port=port, log_level="info")
    finally:
        engines.close()
