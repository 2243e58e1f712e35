"""The shapes of the HTTP API's requests and answers (pydantic models: strict, no extra fields),
the limits a request may ask for, and the one-line error every refused request gets."""

from __future__ import annotations

import json
from typing import Any, Iterator

from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from openqa.data.pasted import MAX_CHARS, MAX_OPTIONS

#: The most paragraphs per option a request may ask for, and the largest top-N it may set.
MAX_EVIDENCE = 20
MAX_TOP_N = 100
#: The most paragraphs ``POST /v1/search`` returns.
MAX_SEARCH_K = 100
#: Option letters, as ``openqa answer`` takes them (A-J).
LETTERS = "ABCDEFGHIJ"[:MAX_OPTIONS]


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
    """The answer record (``openqa.answer.AnswerRecord``, what the API and ``openqa answer --json``
    give; a test keeps the two alike) with the server's ``message``, ``method`` and ``lang``: the options best first, the prediction (null with a ``message`` when no word of the question
    is in the index), the letters tied with it, and the settings used with each one's source; an
    LLM reader adds its ``details``: the raw reply, the letter read from it, its letter probabilities
    and the cited paragraph ids."""

    question: str
    prediction: str | None
    tied: list[str]
    matched: bool
    abstained: bool = Field(description="no answer could be read from a model's reply (counted wrong); abstaining below "
                                        "min_confidence is said in confidence")
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


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


def encoded(value: Any, model: type[BaseModel] | None = None) -> Response:
    """``value`` as the JSON reply a client gets (checked and shaped by ``model``, when given, as an
    endpoint's ``response_model`` would shape it), encoded now. Built in the worker thread whose job
    made ``value``: a dict returned by an endpoint is validated and encoded by FastAPI on the event
    loop, where a large reply (a run's 20,000 questions, an answer with 200 evidence paragraphs)
    would hold every other request for as long as it takes. Without a model it is encoded piece by
    piece (``json_pieces``): one ``json.dumps`` of a run's 20 MB of questions holds the interpreter
    lock for the whole of it, and the event loop and every other worker wait (light answers took
    2 s at p95 beside 8 such reads)."""
    if model is None:
        return Response("".join(json_pieces(value)).encode("utf-8"), media_type="application/json")
    return Response(model.model_validate(value).model_dump_json(), media_type="application/json")


def json_pieces(value: Any) -> Iterator[str]:
    """``value`` as the JSON text ``JSONResponse`` writes (compact, UTF-8 as is, NaN refused), in
    pieces: a dict entry by entry and a list item by item (each item in one piece: a run's question
    row), so each ``json.dumps`` is short and other threads take the interpreter lock between them."""
    if isinstance(value, list):
        yield "["
        for i, item in enumerate(value):
            yield ("," if i else "") + _dumps(item)
        yield "]"
    elif isinstance(value, dict) and all(isinstance(key, str) for key in value):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + _dumps(key) + ":"
            yield from json_pieces(item)
        yield "}"
    else:
        yield _dumps(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))
