"""The methods a server offers, each opened once, the worker threads that use them, and the checks
that keep a request from stalling the others or reading an index that changed on disk.

Every index is opened once at start-up and shared by all requests. Scorers and engines take
their query settings per call, so one opened index serves many threads: questions are scored on
a pool of ``WORKERS`` threads shared fairly (``openqa.serve.workers``: a queue per client, language
and weight, served in turn; heavy requests, those their method estimates at over ``HEAVY_SECONDS``
from the work they are (``Method.estimate``), hold at most ``HEAVY_SHARE`` workers, one client's
all but one of them; one client has at most ``CLIENT_JOBS`` jobs in flight). A method whose engine
calls into a JVM (ir-es over Lucene, whose threads must be attached) keeps one long-lived thread of
its own, and so does an LLM run in process (it answers one prompt at a time: its queue must not hold
the pool's threads). A model is opened once for every language served.

Limits: each method has a size limit (characters of question and options) and a time limit per
request (waiting and working); so do the other jobs run here (searches, the results page's
reading and comparing). A request that goes over its time, whose client disconnects, or
that is in flight when the server stops is abandoned: a job still queued never starts; one already
scoring stops at its scorer's next cancellation checkpoint (``openqa.cancel``: between options or
batches).

An index rebuilt or deleted while serving is noticed by its manifest's stamp (inode, size and
modification time of ``manifest.json``: one ``stat`` per index per request). The next request
reopens it (the methods over it are swapped in whole), or gets a 503 naming the rebuild when it
cannot be opened yet; an answer whose index changed while it was scored is thrown away and
scored again, so no answer mixes old and new files. A request's ``top_n`` builds a new scorer
over the already-open index (``open_method`` over a context that hands back the open index).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Hashable, TypeVar, cast

from openqa.answer import language_note, no_match_message
from openqa.api import search_hits
from openqa.cancel import cancellable, checkpoint
from openqa.data import Question, load_questions
from openqa.data.pasted import clean_text
from openqa.errors import IndexDamagedError, IndexMissingError, OpenQAError
from openqa.languages import LANGS
from openqa.methods import METHODS, Limits, Opened, Overrides, Request, open_method
from openqa.methods.bank import banks_by_language
from openqa.methods.base import SEARCH_COST, SEARCH_LIMITS, query_terms
from openqa.methods.ensemble import EnsembleMethod, model_parts
from openqa.pipeline import answer_record
from openqa.retrieval.base import Index
from openqa.retrieval.manifest import MANIFEST
from openqa.retrieval.registry import ENGINES, engine_class, index_folder, open_index
from openqa.serve.examples import measured_accuracy
from openqa.serve.public import Public, in_request_words
from openqa.serve.workers import FairPool, JobCap, TooManyJobs
from openqa.workspace import Context, Exam, OpenOnce

T = TypeVar("T")

#: ``--method all``: every registered method (a missing index that builds in seconds is built first,
#: as ``openqa answer`` does; one that takes longer is reported with the command that builds it).
ALL = "all"
#: Threads scoring questions (beside the JVM's own thread): more than the cores, so a few large questions
#: cannot hold every thread while small ones wait.
WORKERS = max(4, min(16, 2 * (os.cpu_count() or 2)))
#: How many of the workers heavy requests may hold together (the rest are kept for short ones): half of them,
#: so at least two: one client's heavy requests hold all but one (``FairPool.client_share``), and another
#: client's heavy request starts beside them at once.
HEAVY_SHARE = WORKERS // 2
#: A request asking for more paragraphs per option than this is heavy.
HEAVY_TOP_N = 20
#: A request whose answer returns more evidence paragraphs than this (per option, times its options) is
#: heavy: building and sending such a reply (10 options of 20 paragraphs: 200 KB) takes longer than scoring.
HEAVY_EVIDENCE = 40
#: The most jobs one client may have in flight (queued or running): twice the workers, so a client
#: alone can keep every worker busy with as many waiting; past it, a request is refused with a 429.
CLIENT_JOBS = 2 * WORKERS
#: Seconds ``Engines.close`` waits for the jobs in flight to reach a checkpoint and stop.
CLOSE_SECONDS = 1.0


def limits(method: str) -> Limits:
    """The per-request limits of ``method`` (``Method.limits``)."""
    return METHODS[method].limits


def size(question: Question) -> int:
    """Characters of a question and its options together (what the limits count)."""
    return len(question.question) + sum(map(len, question.options.values()))


class RequestError(OpenQAError):
    """A request the server refuses, with the HTTP status that says why (a one-line message)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class Abandoned(Exception):
    """The request of a job went away (its client disconnected or its time ran out)."""


Stamp = tuple[int, int, int] | None


def stamp(folder: Path) -> Stamp:
    """Inode, size and modification time of an index's manifest (None: no manifest): a rebuild
    swaps in a new folder with a new manifest, a deletion removes it."""
    try:
        info = os.stat(folder / MANIFEST)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


@dataclass(frozen=True)
class _OpenOnce(OpenOnce):
    """A context that opens each index once (``OpenOnce``) and makes each shared thing once; after
    start-up (``build_missing`` off) a missing index is an error, never built inside a request."""

    made: dict[Hashable, Any] = field(default_factory=dict, compare=False)
    build_missing: bool = True

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        if key not in self.made:  # offers are opened one at a time (at start-up, then under the reload lock)
            self.made[key] = make()
        return cast(T, self.made[key])

    def open(self, lang: str, engine: str) -> Index:
        if self.build_missing or (lang, engine) in self.opened:
            return super().open(lang, engine)
        s = self.settings
        self.opened[lang, engine] = open_index(s.index_dir, lang, engine, self.tokenizer(lang, engine),
                                               s.data_dir, self.options, self.corpus)
        return self.opened[lang, engine]


@dataclass(frozen=True)
class Offer:
    """One method in one language: opened with its dev-tuned settings, or why it cannot be; the
    stamps of its indexes' manifests when it was opened."""

    method: str
    lang: str
    stamps: dict[tuple[str, str], Stamp]
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
                "settings": in_request_words(self.opened.settings)}


def pick(items: list[str], known: tuple[str, ...], what: str) -> list[str]:
    """Items of a comma-separated flag, stripped and once each, each one of ``known`` (one-line error otherwise)."""
    chosen = list(dict.fromkeys(item.strip() for item in items if item.strip()))
    unknown = [item for item in chosen if item not in known] or ([] if chosen else [",".join(items)])
    if unknown:
        raise OpenQAError(f"unknown {what} {unknown[0]!r}: choose from {', '.join(known)}")
    return chosen


def overtime(what: str, seconds: float) -> RequestError:
    """The 503 of a request (``what``) over its time limit of ``seconds``."""
    return RequestError(f"{what} did not answer within its limit of {seconds:g} s per request "
                        "(the server is busy or the request is large); try again", 503)


def stopping() -> RequestError:
    """The 503 of a request in flight when the server stops."""
    return RequestError("the server is stopping: this request was not finished; try again once it is back", 503)


class Engines:
    """The methods a server offers per language, opened once, and the worker threads that use them."""

    def __init__(self, ctx: Context, langs: list[str], methods: list[str], request: Request = Request()) -> None:
        """Open every method in every language (``methods`` may be ``["all"]``: every method that
        ``request`` gives what it needs) with ``request`` (the LLM reader's settings); one that
        cannot be opened is kept with its error, so requests for it say which command builds its index."""
        self.ctx = _OpenOnce(**{f.name: getattr(ctx, f.name) for f in fields(Context)})
        self.public = Public(ctx, [*request.banks, *(f for f in (request.model, request.llm and request.llm.model) if f)])
        self.request = request
        self.langs = pick(langs, LANGS, "language")
        self.methods = [n for n, m in METHODS.items() if m.ready(request)] if methods == [ALL] else pick(methods, tuple(METHODS), "method")
        if request.ensemble is not None and not any(METHODS[name].fuses_parts for name in self.methods):
            raise OpenQAError(f"--ensemble {request.ensemble} names a fitted ensemble: serve it with --method ensemble")
        self.banks = banks_by_language(request.banks, self.langs)
        self._requests: dict[tuple[str, str], Request] = {}
        for name in self.methods:
            for lang in self.langs:
                METHODS[name].require(self._request_for(name, lang))
        self.jobs = JobCap(CLIENT_JOBS)  # one client's jobs in flight, in all three pools together
        self.pool = FairPool(WORKERS, "openqa-score", HEAVY_SHARE, self.jobs)
        self.jvm = FairPool(1, "openqa-jvm", 1, self.jobs)
        self.alone = FairPool(1, "openqa-model", 1, self.jobs)
        self.stopping = threading.Event()
        self._reload = {(lang, name): threading.Lock() for lang in self.langs for name in self.methods}
        self.reloads: list[dict[str, Any]] = []
        self.offers: dict[tuple[str, str], Offer] = {
            (lang, name): self._worker(name, lang).submit("", (lang, name), False, partial(self._open, name, lang)).result()
            for lang in self.langs
            for name in self.methods
        }
        self.ctx = replace(self.ctx, build_missing=False)  # shares the cache of open indexes
        self.accuracy = {key: measured_accuracy(ctx.settings, key[1], key[0], ctx.corpus,
                                                offer.opened.settings if offer.opened else None)
                         for key, offer in self.offers.items()}
        if not any(offer.opened for offer in self.offers.values()):
            first = next(iter(self.offers.values()))
            raise OpenQAError(f"nothing to serve: {first.error}")

    def _worker(self, method: str, lang: str) -> FairPool:
        """The JVM's thread for a method over a JVM engine; the model's thread for a model in process
        (its requests wait there, never on the pool's threads, and one whose client left never
        starts); else the pool."""
        m = METHODS[method]
        if any(engine_class(engine).in_jvm for _, engine in m.reads(lang, self.request)):  # on one long-lived thread
            return self.jvm
        return self.alone if m.one_at_a_time(self.request) else self.pool

    def _folder(self, key: tuple[str, str]) -> Path:
        return index_folder(self.ctx.settings.index_dir, *key, self.ctx.corpus)

    def _uses(self, name: str, lang: str, request: Request) -> tuple[bool, bool]:
        """Whether ``name`` opened in ``lang`` with ``request`` runs the named model, and whether it
        reads the bank (an ensemble: by its fitted parts; both when it has none fitted, whose
        opening then says so)."""
        m = METHODS[name]
        if not isinstance(m, EnsembleMethod):
            return m.takes_llm(True), m.uses_bank(request)
        try:
            parts = m.fitted(self.ctx, Exam.resolve(lang=lang), request)[0].parts
        except OpenQAError:
            return True, True
        part = Request(llm=request.llm)
        return bool(model_parts(parts)), any(METHODS[label.partition(":")[0]].uses_bank(part)
                                             for label in parts if label.partition(":")[0] in METHODS)

    def _request_for(self, name: str, lang: str) -> Request:
        """What ``name`` in ``lang`` is opened with: the server's request with that language's
        ``--bank`` files alone (``banks_by_language``) and ``--ensemble`` for the ensemble alone. The
        model and the bank files go to the methods that use them where another served method does
        (``--method llm,ensemble --model M`` runs the model in llm, not in an ensemble fitted
        without it); a method served alone is given them, and refuses what it cannot use."""
        if (name, lang) in self._requests:
            return self._requests[name, lang]
        request = replace(self.request, banks=self.banks[lang])
        if not METHODS[name].fuses_parts:
            request = replace(request, ensemble=None)
        model, bank = self._uses(name, lang, request)
        others = [self._uses(other, lang, replace(request, ensemble=None)) for other in self.methods if other != name]
        if request.llm is not None and not model and any(uses[0] for uses in others):
            request = replace(request, llm=None)
        if request.banks and not bank and any(uses[1] for uses in others):
            request = replace(request, banks=(), allow_bank_overlap=False)
        self._requests[name, lang] = request  # (a request's top_n asks again: the fitted parts are read once)
        return request

    def _stamps(self, method: str, lang: str) -> dict[tuple[str, str], Stamp]:
        return {key: stamp(self._folder(key)) for key in METHODS[method].reads(lang, self.request)}

    def _open(self, name: str, lang: str) -> Offer:
        """Open one method (in its worker thread) and read its paragraphs now, so that the first
        request does not pay for it. The stamps are taken first, so a change while opening is seen
        later (but for an index that was missing, which the opening built)."""
        stamps = self._stamps(name, lang)
        try:
            opened = open_method(self.ctx, name, Exam.resolve(lang=lang), self._request_for(name, lang))
        except OpenQAError as exc:
            return Offer(name, lang, stamps, error=self.public(str(exc)))
        opened.index.warm()
        built = {key: stamp(self._folder(key)) for key, was in stamps.items() if was is None}  # built first, at start-up
        return Offer(name, lang, {**stamps, **built}, opened)

    def changed(self, offer: Offer) -> list[tuple[str, str]]:
        """The indexes of ``offer`` whose manifest changed on disk (rebuilt, deleted, or built since)."""
        return [key for key, was in offer.stamps.items() if stamp(self._folder(key)) != was]

    def _names(self, keys: list[tuple[str, str]]) -> str:
        """The folder names of indexes (a named corpus's own, not the textbooks')."""
        return ", ".join(self._folder(key).name for key in keys)

    def _fresh(self, method: str, lang: str, failed: Offer | None = None) -> Offer:
        """The offer for ``method``/``lang``, reopened first if one of its indexes changed on disk
        (or it is still ``failed``, an offer a file of which could not be read; in the calling
        worker thread; reloads of one offer take turns, others go on). An index without a manifest
        (deleted, or a rebuild not yet swapped in) is a 503 at once, without trying to open it; one
        that cannot be opened is a 503 naming the rebuild. The offer is swapped in whole, never half-updated."""
        offer = self.offers[lang, method]
        if offer is not failed and not self.changed(offer):
            if offer.opened is None:
                raise RequestError(f"{method} ({lang}) is not available: {offer.error}", 404)
            return offer
        gone = [key for key in offer.stamps if stamp(self._folder(key)) is None]
        if gone:
            raise RequestError(f"the {self._names(gone)} index of {method} ({lang}) was deleted or is being rebuilt since "
                               f"the server opened it; try again once the rebuild has finished ({self._rebuild(gone)})", 503)
        with self._reload[lang, method]:
            offer = self.offers[lang, method]
            changed = self.changed(offer) or (list(offer.stamps) if failed is offer else [])
            if not changed:  # another request reopened it meanwhile
                return offer
            for key in changed:
                self.ctx.opened.pop(key, None)
            offer = self._open(method, lang)
            if offer.opened is not None:
                self.offers[lang, method] = offer
            names = self._names(changed)
            self.reloads.append({"method": method, "lang": lang, "indexes": names, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                 "ok": offer.opened is not None, **({"error": offer.error} if offer.error else {})})
            del self.reloads[:-20]
        if offer.opened is None:
            missing = any(stamp(self._folder(key)) is None for key in changed)
            what = "was deleted or is being rebuilt" if missing else "changed on disk and cannot be opened"
            raise RequestError(f"the {names} index of {method} ({lang}) {what} since the server opened it: "
                               f"{offer.error}; try again once the rebuild has finished", 503)
        return offer

    def _rebuild(self, keys: list[tuple[str, str]]) -> str:
        """The commands that build ``keys`` (over the server's named corpus, if any)."""
        corpus = f" --corpus <its source> --name {self.ctx.corpus}" if self.ctx.corpus else ""
        return "; ".join(f"openqa index --lang {lang} --engine {engine}{corpus}" for lang, engine in keys)

    def offer(self, method: str | None, lang: str | None) -> tuple[str, str]:
        """The method and language a request asks for (default: the first of each list), or a one-line
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
        if offer.opened is None and not self.changed(offer):
            raise RequestError(f"{method} ({lang}) is not available: {offer.error}", 404)
        return method, lang

    def submit(self, work: Callable[[], T], what: str, seconds: float, client: Hashable, lane: Hashable, heavy: bool,
               abandoned: threading.Event, deadline: float, worker: FairPool | None = None) -> Future[T]:
        """Queue ``work`` (``what``, with a time limit of ``seconds``) on ``worker`` (default: the pool)
        as ``client``'s in ``lane``, heavy or not. It runs with a cancellation check
        (``openqa.cancel``): it never starts, or stops at its next checkpoint, once ``abandoned`` is set
        (its client left), the server stops (a 503 saying so), or ``deadline`` (``time.monotonic``)
        has passed (a 503 naming the limit). A 429 when ``client`` already has ``CLIENT_JOBS`` in flight."""
        if self.stopping.is_set():
            raise stopping()

        def check() -> None:
            if abandoned.is_set():
                raise Abandoned
            if self.stopping.is_set():
                raise stopping()
            if time.monotonic() > deadline:
                raise overtime(what, seconds)

        def run() -> T:
            with cancellable(check):
                checkpoint()  # a job whose request went away while it waited never starts
                return work()

        try:
            return (worker or self.pool).submit(client, lane, heavy, run)
        except TooManyJobs as exc:
            raise RequestError(str(exc), 429) from None

    def answer(self, question: Question, method: str | None = None, lang: str | None = None, top_n: int | None = None,
               evidence: int = 3, abandoned: threading.Event | None = None, deadline: float | None = None,
               min_confidence: float | None = None, client: Hashable = "",
               reply: Callable[[dict[str, Any]], Any] = dict) -> Future[Any]:
        """Solve ``question`` on a worker thread: the record of ``answer_record`` with the method and
        language used (default: the first served), as ``reply`` makes it (the server's encodes it there,
        off the event loop); ``top_n`` replaces the tuned top-N over the open
        index. The job waits in the queue of its ``client`` (whoever asks: the server gives the peer
        address), language and weight (heavy: estimated by its method at over ``HEAVY_SECONDS``,
        asking for over ``HEAVY_TOP_N`` paragraphs, or returning over ``HEAVY_EVIDENCE``), and stops
        (before scoring, or at the scorer's next checkpoint) once ``abandoned`` is set, the server
        stops, or ``deadline`` (``time.monotonic``; default: the method's time limit from now) has
        passed; below ``min_confidence`` the answer abstains."""
        method, lang = self.offer(method, lang)
        if top_n is not None and not METHODS[method].takes("top_n"):
            raise RequestError(f"top_n does not apply to {method}: leave it out (the server's settings choose its evidence)")
        seconds = limits(method).seconds
        what = f"{method} ({lang})"
        current = self.offers[lang, method].opened
        heavy = (current is None or METHODS[method].estimate(current, question, lang).heavy  # an offer being reopened is heavy
                 or (top_n or 0) > HEAVY_TOP_N or evidence * len(question.options) > HEAVY_EVIDENCE)

        def attempts() -> Any:
            failed: Offer | None = None
            failure = "it kept changing"
            for _ in range(3):  # an index swapped while scoring: score again on the new one
                checkpoint()
                offer = self._fresh(method, lang, failed)
                try:
                    opened = offer.opened if top_n is None else self._with_top_n(method, lang, top_n)
                    assert opened is not None  # _fresh refuses an offer that is not open
                    record = answer_record(opened, question, evidence, min_confidence)
                except (IndexDamagedError, IndexMissingError) as exc:  # a file went away under the open index
                    failed, failure = offer, self.public(str(exc))  # (a deletion may remove the manifest last)
                    continue
                if not self.changed(offer):
                    switch = '"lang": "{}"'
                    message = (language_note(question, lang, switch) or None) if record["matched"] else no_match_message(lang, switch, [question])
                    return reply({**record, "message": message, "method": method, "lang": lang,
                                  "settings": self.public(in_request_words(record["settings"]))})
            raise RequestError(f"the index of {what} cannot be read now ({failure}); try again once a rebuild "
                               "has finished", 503)

        return self.submit(attempts, what, seconds, client, lang, heavy, abandoned or threading.Event(),
                           deadline if deadline is not None else time.monotonic() + seconds, self._worker(method, lang))

    def search(self, query: str, lang: str | None, engine: str, k: int, client: Hashable = "",
               abandoned: threading.Event | None = None, deadline: float | None = None,
               reply: Callable[[dict[str, Any]], Any] = dict) -> Future[Any]:
        """The top ``k`` paragraphs of the ``lang``/``engine`` index for ``query`` (``openqa.api.search_hits``)
        as ``reply`` makes them (as ``answer``'s), on the worker of a served method that reads that
        index (reopened first if it changed on disk),
        queued and stopped as ``answer`` queues and stops a question of ``client`` (heavy: estimated at
        over ``HEAVY_SECONDS`` by ``SEARCH_COST``)."""
        lang = lang or self.langs[0]
        if lang not in self.langs:
            raise RequestError(f"unknown language {lang!r}: this server serves {', '.join(self.langs)}", 400)
        if engine not in ENGINES:
            raise RequestError(f"unknown engine {engine!r}: choose one of {', '.join(ENGINES)}", 400)
        query = clean_text(query)  # normalized as /v1/answer normalizes a question
        if not query.strip():
            raise RequestError("empty query: give the text to search for", 400)
        reading = [m for m in self.methods if (lang, engine) in METHODS[m].reads(lang, self.request)
                   and (lang, m) in self.offers]
        if not reading:
            raise RequestError(f"no {engine} ({lang}) index is served here: start the server with a method that "
                               f"reads it (--lang {lang}, e.g. --method ir-custom for custom)", 404)

        def work() -> Any:
            self._fresh(reading[0], lang)
            hits = search_hits(self.ctx.opened[lang, engine], [query], k)[0]
            return reply({"query": query, "lang": lang, "engine": engine, "hits": [h.to_dict() for h in hits]})

        index = self.ctx.opened.get((lang, engine))
        heavy = index is None or SEARCH_COST.estimate(lang, query_terms(index, [query])).heavy
        seconds = SEARCH_LIMITS.seconds
        return self.submit(work, f"search ({engine})", seconds, client, lang, heavy, abandoned or threading.Event(),
                           deadline if deadline is not None else time.monotonic() + seconds, self._worker(reading[0], lang))

    def _with_top_n(self, method: str, lang: str, top_n: int) -> Opened:
        """The method with the request's top-N over its open index (a 503 if that index just went away)."""
        try:
            return open_method(self.ctx, method, Exam.resolve(lang=lang),
                               replace(self._request_for(method, lang), overrides=Overrides(top_n=top_n)))
        except OpenQAError as exc:
            raise RequestError(f"{method} ({lang}) cannot be opened now: {self.public(str(exc))}", 503) from None

    def describe(self) -> list[dict[str, Any]]:
        """Every method in every language served, available or not, with its limits and whether its
        index changed on disk since it was opened (it is reopened on the next request)."""
        out = []
        for offer in self.offers.values():
            record = {**offer.describe(), "limits": {"max_chars": limits(offer.method).max_chars,
                                                     "seconds": limits(offer.method).seconds},
                      "accuracy": self.accuracy[offer.lang, offer.method]}
            changed = self.changed(offer)
            if changed:
                gone = [key for key in changed if stamp(self._folder(key)) is None]
                record["changed"] = (f"index {self._names(gone)} deleted or being rebuilt" if gone else
                                     "index rebuilt since opened: reopened on the next request")
            out.append(record)
        return out

    def question_texts(self, dataset: str, split: str) -> dict[str, dict[str, Any]]:
        """A dataset split's questions by id (text and options), for the results page; none when the
        data folder lacks them (the page then shows ids only)."""
        key = ("question texts", dataset, split)

        def load() -> dict[str, dict[str, Any]]:
            try:
                questions = load_questions(dataset, split, self.ctx.settings.require_data_dir())
            except OpenQAError:
                return {}
            return {q.qid: {"question": q.question, "options": q.options} for q in questions}

        return self.ctx.shared(key, load)

    def stop(self) -> None:
        """Tell the jobs in flight to stop (each at its next checkpoint, answered with a 503 naming the
        stop) and refuse new ones the same way."""
        self.stopping.set()

    def close(self, wait_s: float = CLOSE_SECONDS) -> None:
        """Stop: drop the queued jobs, tell the running ones to stop, and wait up to ``wait_s``
        seconds for them (the worker threads are daemons: one still in a long step never holds the process)."""
        self.stop()
        deadline = time.monotonic() + wait_s
        for worker in (self.pool, self.jvm, self.alone):
            worker.shutdown(max(0.0, deadline - time.monotonic()))
