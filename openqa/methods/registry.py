"""The registry of methods by name, and opening one: its scorer over its index with the
probabilities fitted on dev."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from openqa.config import DEFAULT_METHOD as DEFAULT_METHOD  # the default method, named beside the registry
from openqa.errors import OpenQAError, UsageError
from openqa.evaluate.calibration import (
    uncalibrated,
)
from openqa.extras import needs
from openqa.methods.base import FIRST_PART_KEYS, Method, Opened, Overrides, Request, refuse_bank_flags
from openqa.retrieval.manifest import corpus_fingerprint
from openqa.retrieval.registry import engine_class
from openqa.scorers.ir import IRScorer
from openqa.tuning import (
    corpus_difference,
    load_calibration,
    reading_once,
    recorded_corpus,
    tuned_file,
)
from openqa.workspace import Context, Exam

#: Every method by name (filled by ``openqa.methods``, which registers each entry).
METHODS: dict[str, Method] = {}


def register(*methods: Method) -> None:
    """Add ``methods`` to ``METHODS`` under their names."""
    for m in methods:
        METHODS[m.name] = m


def method(name: str) -> Method:
    """The method registered under ``name``, or an error listing the known ones."""
    if name not in METHODS:
        raise UsageError(f"unknown method {name!r}: choose one of {', '.join(METHODS)}")
    return METHODS[name]


def calibration_key(name: str, request: Request = Request()) -> str:
    """What a method's calibration is filed under: its name, and what sets a run of it apart (an
    LLM's model and settings, a reader's checkpoint), since each of those has probabilities of its own."""
    return "-".join([name, *method(name).variant(request)])


#: How the corpus differs from the one settings were tuned on, for each record found so while a
#: method and its parts are opened (None outside an opening; each thread opens its own).
_DIFFERENCES: ContextVar[list[str] | None] = ContextVar("corpus_differences", default=None)


def open_method(ctx: Context, name: str, target: Exam, request: Request = Request(), calibrated: bool = True) -> Opened:
    """The method ``name`` opened for ``target`` (see ``Method.open``), with the probabilities
    fitted on ``target.dataset`` dev (``openqa tune``; temperature 1 when none is found, which its
    settings say); refused in one line when ``request`` lacks what it needs (``Method.needs``).
    ``calibrated`` False leaves the probabilities out (temperature 1): for ``openqa tune``, which is
    about to fit them, and whose new settings no longer match the calibration it replaces.

    Settings and calibrations tuned on another corpus than the opened index holds (their corpus
    fingerprints differ) are used as they are, their sources say so, and the context is told once
    (``Context.notify_once``) by the outermost opening (a fused method's or an ensemble's, not each part's)."""
    token = _DIFFERENCES.set([]) if _DIFFERENCES.get() is None else None
    try:
        with reading_once():  # the calibration is checked against the settings bytes this opening read
            opened = _open_method(ctx, name, target, request, calibrated)
        if token is not None and not opened.scorer.banks():  # an ensemble knows its parts once opened
            refuse_bank_flags(request, name)
        differences = _DIFFERENCES.get()
        if token is not None and differences:
            parts = " (its parts first)" if opened.parts or method(name).parts else ""
            ctx.notify_once(f"settings {differences[0]}: {retune_hint(ctx, name, target, parts)}")
        return opened
    finally:
        if token is not None:
            _DIFFERENCES.reset(token)


def retune_hint(ctx: Context, name: str, target: Exam, parts: str = "") -> str:
    """How to tune ``name`` (``parts``: what to tune first) again for ``target`` over the context's
    corpus: a named corpus of the user's on questions they hold the answers of (``--questions``,
    filed where this run looks), the textbooks on the exam's dev split."""
    if not ctx.corpus:
        return f"run openqa tune --method {name} --dataset {target.dataset}{parts} to retune"
    exam = "" if target.dataset == Exam.resolve(lang=target.lang).dataset else f" --exam {target.dataset}"
    return (f"retune on questions you hold the answers of: openqa tune --method {name} --questions FILE "
            f"--lang {target.lang}{exam} --corpus {ctx.corpus}{parts}")


def _open_method(ctx: Context, name: str, target: Exam, request: Request, calibrated: bool) -> Opened:
    m = method(name)
    m.require(request)
    if (request.predictions or request.ensemble) and not m.fuses_parts:
        raise UsageError(f"--predictions and --ensemble apply to --method ensemble, not {name}")
    engine = request.engine or m.engine
    with needs(f"method {name}", m.extra or (engine_class(engine).extra if engine else None)):
        opened = m.open(ctx, target, request)
    if not calibrated:
        return corpus_checked(ctx, name, target, request, opened, calibrated)
    calibration = load_calibration(calibration_key(name, request), target.dataset, ctx.settings.tuned_dir(), ctx.corpus)
    if calibration is None:
        calibration = uncalibrated(opened.scorer.scale)
        where = f"none fitted for {target.dataset}: temperature 1 (run openqa tune --method {name} --dataset {target.dataset})"
    else:
        differ = {k: v for k, v in calibration.settings.items() if k in FIRST_PART_KEYS and opened.settings.get(k) != v}
        where = calibration.source + (f" (fitted with {', '.join(f'{k} {v}' for k, v in differ.items())})" if differ else "")
    settings = {**opened.settings, "probabilities": calibration.describe() if calibration.n else "uncalibrated",
                "sources": {**opened.settings["sources"], "probabilities": where}}
    return corpus_checked(ctx, name, target, request, replace(opened, settings=settings, calibration=calibration), calibrated)


def corpus_checked(ctx: Context, name: str, target: Exam, request: Request, opened: Opened, calibrated: bool) -> Opened:
    """``opened`` with the sources of its settings (and calibration) tuned on another corpus than
    its index holds saying so ("..., tuned on 11 books; this corpus has 12"), each difference
    noted for ``open_method``."""
    here = corpus_fingerprint(opened.index.manifest)
    if here is None:
        return opened
    tuned_dir, key = ctx.settings.tuned_dir(), calibration_key(name, request)
    records = [tuned_file(k, target.dataset, tuned_dir, ctx.corpus) for k in dict.fromkeys((name, key))]
    if calibrated:
        records.append(tuned_file(key, target.dataset, tuned_dir, ctx.corpus, kind="calibration"))
    differ = {where: d for path, where in records
              if path is not None and (d := corpus_difference(recorded_corpus(path), here)) is not None}
    if not differ:
        return opened
    found = _DIFFERENCES.get()
    if found is not None:
        found.extend(differ.values())

    def said(source: Any) -> Any:
        if not isinstance(source, str):
            return source
        for where, difference in differ.items():
            if where in source:  # a source naming an option names no tuned file: it stays what it is
                source = source.replace(where, f"{where}, {difference}")
        return source

    sources = {k: said(v) for k, v in opened.settings.get("sources", {}).items()}
    return replace(opened, settings={**opened.settings, "sources": sources})


def open_retrieving(ctx: Context, name: str, target: Exam, query: str | None = None) -> Opened:
    """The method ``name`` opened to find evidence (dev-tuned; ``query`` overrides its query mode):
    its ``retriever`` searches each option's paragraphs; a method that retrieves none is refused."""
    if not method(name).retrieves:
        raise OpenQAError(f"{name} does not retrieve paragraphs; use one of "
                          f"{', '.join(n for n, m in METHODS.items() if m.retrieves)} as the retriever")
    return open_method(ctx, name, target, Request(Overrides(query=query)))


def open_retriever(ctx: Context, name: str, target: Exam, query: str | None = None) -> IRScorer:
    """An IR scorer (dev-tuned; ``query`` overrides its query mode) whose retrieval feeds a reader."""
    retriever = open_retrieving(ctx, name, target, query).retriever
    assert retriever is not None  # open_retrieving refuses a method that retrieves nothing
    return retriever
