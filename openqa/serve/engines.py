"""The methods a server offers, each opened once, and the one thread per language that uses them.

Every index is opened once at start-up and shared by all requests. Engines keep per-query state
(IR-Custom fits its average query length to each question's option queries; the Lucene engine of
ir-es calls into a JVM, whose threads must be attached), so all the work of one language runs in
that language's own worker thread, one question at a time: no request sees another's state, the
JVM sees one long-lived thread, and English and Chinese questions are solved in parallel. A
request's ``top_n`` builds a new scorer over the already-open index (``open_method`` over a
context that hands back the open index), never a reload.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

from openqa.answer import no_match_message
from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.languages import LANGS
from openqa.methods import METHODS, Opened, Overrides, Request, open_method
from openqa.pipeline import answer_record
from openqa.retrieval.base import Index, SearchEngine
from openqa.workspace import Context, Exam

#: ``--method all``: every registered method (a missing index that builds in seconds is built first,
#: as ``openqa answer`` does; one that takes longer is reported with the command that builds it).
ALL = "all"
#: How the CLI's flag for a per-request setting is named in the API (settings sources name their flag).
REQUEST_FIELDS = {"--top-n": "request top_n", "--lang": "lang"}


class RequestError(OpenQAError):
    """A request the server refuses, with the HTTP status that says why (a one-line message)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class _OpenOnce(Context):
    """A context that opens each index once and hands the same open index to every later scorer."""

    opened: dict[tuple[str, str], Index] = field(default_factory=dict, compare=False)

    def open(self, lang: str, engine: str) -> Index:
        if (lang, engine) not in self.opened:
            self.opened[lang, engine] = super().open(lang, engine)
        return self.opened[lang, engine]


@dataclass(frozen=True)
class Offer:
    """One method in one language: opened with its dev-tuned settings, or why it cannot be."""

    method: str
    lang: str
    opened: Opened | None = None
    error: str | None = None

    def describe(self) -> dict[str, Any]:
        """What ``GET /v1/methods`` says of it: its index and settings, or the error naming the
        ``openqa index`` command that builds the missing index."""
        if self.opened is None:
            return {"method": self.method, "lang": self.lang, "available": False, "error": self.error}
        m = self.opened.index.manifest
        index = {"engine": m.get("engine"), "books": m.get("books"), "paragraphs": m.get("paragraphs"),
                 "built_at": m.get("built_at")}
        return {"method": self.method, "lang": self.lang, "available": True, "index": index,
                "settings": relabel(self.opened.settings)}


def relabel(value: Any) -> Any:
    """Settings (nested, as a record holds them) whose sources name the request's fields where
    they name the CLI's flags."""
    if isinstance(value, dict):
        return {key: relabel(item) for key, item in value.items()}
    if isinstance(value, str):
        for flag, name in REQUEST_FIELDS.items():
            value = value.replace(flag, name)
    return value


def pick(items: list[str], known: tuple[str, ...], what: str) -> list[str]:
    """Items of a comma-separated flag, stripped and once each, each one of ``known`` (one-line error otherwise)."""
    chosen = list(dict.fromkeys(item.strip() for item in items if item.strip()))
    unknown = [item for item in chosen if item not in known] or ([] if chosen else [",".join(items)])
    if unknown:
        raise OpenQAError(f"unknown {what} {unknown[0]!r}: choose from {', '.join(known)}")
    return chosen


class Engines:
    """The methods a server offers per language, opened once, and a worker thread per language."""

    def __init__(self, ctx: Context, langs: list[str], methods: list[str]) -> None:
        """Open every method in every language (``methods`` may be ``["all"]``); one that cannot be
        opened is kept with its error, so requests for it say which command builds its index."""
        self.ctx = _OpenOnce(**{f.name: getattr(ctx, f.name) for f in fields(Context)})
        self.langs = pick(langs, LANGS, "language")
        self.methods = list(METHODS) if methods == [ALL] else pick(methods, tuple(METHODS), "method")
        self.workers = {lang: ThreadPoolExecutor(1, thread_name_prefix=f"openqa-{lang}") for lang in self.langs}
        self.offers = {
            (lang, name): self.workers[lang].submit(self._open, name, lang).result()
            for lang in self.langs
            for name in self.methods
        }
        if not any(offer.opened for offer in self.offers.values()):
            first = next(iter(self.offers.values()))
            raise OpenQAError(f"nothing to serve: {first.error}")

    def _open(self, name: str, lang: str) -> Offer:
        """Open one method (in the language's worker thread) and read its paragraphs now, so that
        the first request does not pay for it."""
        try:
            opened = open_method(self.ctx, name, Exam.resolve(lang=lang))
        except OpenQAError as exc:
            return Offer(name, lang, error=str(exc))
        if isinstance(opened.index, SearchEngine):  # PMI's positional index keeps no paragraphs
            opened.index.paragraphs[0]  # reads the paragraph store
        opened.index.tokenizer.prepare_query("")  # loads the Chinese script converter
        return Offer(name, lang, opened)

    def offer(self, method: str | None, lang: str | None) -> Offer:
        """The opened method a request asks for (default: the first of each list), or a one-line
        error: 400 for a name openqa does not know, 404 for one this server does not offer."""
        method, lang = method or self.methods[0], lang or self.langs[0]
        if lang not in LANGS:
            raise RequestError(f"unknown language {lang!r}: choose one of {', '.join(self.langs)}")
        if method not in METHODS:
            raise RequestError(f"unknown method {method!r}: choose one of {', '.join(self.methods)}")
        offer = self.offers.get((lang, method))
        if offer is None:
            raise RequestError(f"{method} ({lang}) is not served here: start the server with "
                               f"--method {method} --lang {lang}", 404)
        if offer.opened is None:
            raise RequestError(f"{method} ({lang}) is not available: {offer.error}", 404)
        return offer

    def answer(self, question: Question, method: str | None, lang: str | None, top_n: int | None,
               evidence: int) -> Future[dict[str, Any]]:
        """Solve ``question`` in its language's worker thread: the record of ``answer_record`` with
        the method and language used; ``top_n`` replaces the tuned top-N over the open index."""
        offer = self.offer(method, lang)

        def work() -> dict[str, Any]:
            opened = offer.opened if top_n is None else open_method(
                self.ctx, offer.method, Exam.resolve(lang=offer.lang), Request(Overrides(top_n=top_n)))
            record = answer_record(opened, question, evidence)
            message = None if record["matched"] else no_match_message(offer.lang, switch='"lang": "{}"')
            return {**record, "message": message, "method": offer.method, "lang": offer.lang,
                    "settings": relabel(record["settings"])}

        return self.workers[offer.lang].submit(work)

    def describe(self) -> list[dict[str, Any]]:
        """Every method in every language served, available or not."""
        return [offer.describe() for offer in self.offers.values()]

    def close(self) -> None:
        """Stop the worker threads (after the requests in flight)."""
        for worker in self.workers.values():
            worker.shutdown()
