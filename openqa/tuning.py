"""Dev tuning and the settings store: the grids ``openqa tune`` searches, and where a method's
dev-tuned choice is found.

A method's tuned settings are data of the method, like the paper's Table B.13: the choices made on
this project's dev runs ship inside the package (``openqa/tuned/<method>-<dataset>.json``), and a
user's own ``openqa tune`` writes to their settings folder (``--settings-dir``, ``$OPENQA_SETTINGS``,
default ``tuned/`` beside the index folder), which overrides the shipped choice. Nothing is looked up
relative to the working folder, so an installed openqa gives the same figure from anywhere.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, replace
from importlib import resources
from itertools import product
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from openqa.config import OptionSource
from openqa.corpus.sources import corpus_tag
from openqa.data import QUESTION_FILE, Question
from openqa.errors import OpenQAError
from openqa.evaluate.calibration import IN_SAMPLE, Calibration, confidence_report
from openqa.evaluate.metrics import summarise
from openqa.evaluate.results import run_record, write_all_or_none
from openqa.jsonl import decode, readable
from openqa.retrieval.hybrid import Fusion
from openqa.retrieval.manifest import folder_lock
from openqa.scorers.base import OptionScorer, OptionScores
from openqa.scorers.hybrid import HybridScorer, fuse_options
from openqa.scorers.ir import AGGREGATES, IRScorer, IRSettings, scores_from_hits

#: The dev grid of ``openqa tune`` for IR scorers.
TOP_N_GRID = (1, 2, 3, 5, 10, 20, 30, 50)


def tune_ir(
    make: Callable[[IRSettings], IRScorer], questions: Sequence[Question], query_modes: Sequence[str]
) -> tuple[IRSettings, list[dict[str, Any]]]:
    """Grid-search top-N, aggregate and query mode on ``questions`` (dev); best accuracy wins.

    Each query mode first measures the engine's fixed query-side quantities on these questions'
    queries (IR-Custom's avgQL), which the mode's rows record and every later search with them
    uses; it then retrieves once, as deep as the grid goes, and every (top-N, aggregate) is scored
    from those hits. Ties between settings go to the smaller N, then the grid order, so the choice
    is stable.
    """
    table: list[dict[str, Any]] = []
    for mode in query_modes:
        measured = make(IRSettings(query=mode)).query_statistics(questions, mode)
        hits = make(IRSettings(query=mode, **measured)).retrieve(questions, max(TOP_N_GRID), query=mode)
        for top_n, how in product(TOP_N_GRID, AGGREGATES):
            summary = summarise(scores_from_hits(questions, hits, top_n, how))
            table.append({**asdict(IRSettings(top_n, how, mode, **measured)), **summary})
    best = max(table, key=lambda row: (row["accuracy"], -row["top_n"]))
    return IRSettings(**{k: best[k] for k in asdict(IRSettings())}), table


#: Fusions ``openqa tune`` tries for the hybrid method: RRF, and weighted sums (weight on IR-Custom).
FUSION_GRID = (("rrf", 0.5), *(("weighted", w) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)))


def tune_fusion(scorer: HybridScorer, questions: Sequence[Question]) -> tuple[IRSettings, list[dict[str, Any]]]:
    """Every fusion of ``FUSION_GRID`` over the parts' option scores (each part scored once)."""
    first, second = scorer.part_scores(questions)
    table = []
    for kind, weight in FUSION_GRID:
        fused = [fuse_options(a, b, Fusion(kind, weight)) for a, b in zip(first, second)]
        table.append({**asdict(replace(scorer.settings, fusion=kind, weight=weight)), **summarise(fused)})
    best = max(table, key=lambda row: row["accuracy"])
    return IRSettings(**{k: best[k] for k in asdict(IRSettings())}), table


def tune_query_mode(
    make: Callable[[IRSettings], OptionScorer], questions: Sequence[Question], query_modes: Sequence[str]
) -> tuple[IRSettings, list[dict[str, Any]]]:
    """For scorers without top-N (PMI): pick the query mode with the best dev accuracy."""
    table = []
    for mode in query_modes:
        settings = IRSettings(query=mode)
        table.append({**asdict(settings), **summarise(make(settings).score(questions))})
    best = max(table, key=lambda row: row["accuracy"])
    return IRSettings(query=best["query"]), table


#: The sources of settings given as options, which override tuned ones, by setting name.
FLAGS = {key: OptionSource(key) for key in ("top_n", "aggregate", "query")}
#: How a source names a setting's default where it says more than "default".
DEFAULT_SOURCES = {"avg_ql": "not tuned: each query's own length (run openqa tune to measure it on dev)"}


def shipped_folder() -> Path:
    """The package folder of the dev-tuned choices shipped with openqa."""
    return Path(str(resources.files("openqa") / "tuned"))


def _suffix(kind: str) -> str:
    """How a record file of ``kind`` ends (settings: none; e.g. ``calibration``)."""
    return f".{kind}.json" if kind else ".json"


def tuned_path(method: str, dataset: str, settings_dir: Path, corpus: str | None = None, kind: str = "") -> Path:
    """Where ``openqa tune`` writes its record of ``kind`` for ``method`` on ``dataset`` (over the
    named ``corpus``): the first place ``tuned_file`` looks."""
    return Path(settings_dir) / f"{method}-{dataset}{corpus_tag(corpus)}{_suffix(kind)}"


#: Settings records a tune opens its method with before they are written (final path: staged copy).
_STAGED: ContextVar[dict[Path, Path] | None] = ContextVar("openqa_staged_settings", default=None)


@contextmanager
def staged(path: Path, data: bytes) -> Iterator[None]:
    """Within this block (in this thread), ``tuned_file`` finds ``data`` as the record at ``path``
    (from a hidden copy beside it, removed after): a tune opens its method with the settings it
    chose before writing them, so they are written with their calibration or not at all."""
    copy = path.with_name(f".{os.getpid()}-{secrets.token_hex(6)}.{path.name}.staged")
    path.parent.mkdir(parents=True, exist_ok=True)
    token = _STAGED.set({**(_STAGED.get() or {}), Path(path): copy})
    try:
        copy.write_bytes(data)
        yield
    finally:
        _STAGED.reset(token)
        copy.unlink(missing_ok=True)


@contextmanager
def pair_lock(method: str, dataset: str, settings_dir: Path, corpus: str | None = None) -> Iterator[None]:
    """Hold the lock of the settings and calibration pair of ``method`` on ``dataset``: a hidden
    ``.NAME.lock`` file beside them, locked as an index folder is while it is built (``flock``,
    released if the process dies; another tune of the pair waits, then is refused in one line)."""
    lock = tuned_path(method, dataset, settings_dir, corpus, "lock")
    lock = lock.with_name(f".{lock.name.removesuffix('.json')}")
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.touch(exist_ok=True)
    with folder_lock(lock):
        yield


def tuned_file(method: str, dataset: str, settings_dir: Path, corpus: str | None = None, kind: str = "",
               ) -> tuple[Path | None, str]:
    """The record ``openqa tune`` made for ``method`` on ``dataset`` (its settings; with ``kind``
    ``calibration``, its probabilities), and how to name where it came from: over a named
    ``corpus``, the user's own tune with ``--corpus`` first; then the user's own (in
    ``settings_dir``) before the shipped one (a corpus not tuned for takes the dataset's)."""
    suffix = _suffix(kind)
    name = f"{method}-{dataset}{suffix}"
    staging = _STAGED.get() or {}
    for user in dict.fromkeys((Path(settings_dir) / f"{method}-{dataset}{corpus_tag(corpus)}{suffix}", Path(settings_dir) / name)):
        if user in staging:
            return staging[user], f"your openqa tune: {user.parent.name}/{user.name}"
        if user.is_file():
            return user, f"your openqa tune: {user.parent.name}/{user.name}"  # no machine path in a record
    shipped = shipped_folder() / name
    if shipped.is_file():
        return shipped, f"shipped with openqa: openqa/tuned/{name}"
    return None, "defaults (not tuned)"


def _read_record(path: Path) -> dict[str, Any]:
    """A settings record whose choice makes ``IRSettings``; refused in one line otherwise."""
    record = read_json_record(path, "tuning record")
    try:
        IRSettings(**record["chosen"])
    except (ValueError, KeyError, TypeError, OpenQAError) as exc:
        raise OpenQAError(f"{path}: unreadable tuning record ({type(exc).__name__}: {exc}); rerun `openqa tune`") from None
    return record


def resolve_settings(
    method: str, dataset: str, settings_dir: Path, flags: dict[str, Any], corpus: str | None = None
) -> tuple[IRSettings, dict[str, str]]:
    """A method's settings for ``dataset`` (over the named ``corpus``, see ``tuned_file``) and where
    each came from: a flag, the tuned record (user's, else shipped), or the default.

    With ``query`` given, top-N and aggregate come from the best dev row of the recorded grid for
    that query mode (ties to the smaller N, as in tuning).
    """
    flags = {k: v for k, v in flags.items() if v is not None}
    path, where = tuned_file(method, dataset, settings_dir, corpus)
    tuned: dict[str, Any] = {}
    if path is not None:
        record = _read_record(path)
        tuned = dict(record["chosen"])
        if "query" in flags and flags["query"] != tuned.get("query"):
            rows = [r for r in record.get("grid", []) if r.get("query") == flags["query"] and "top_n" in r]
            best = max(rows, key=lambda r: (r["accuracy"], -r["top_n"]), default=None)
            if best:
                tuned = {k: best[k] for k in asdict(IRSettings()) if k in best}
                where += f" (best dev row for query {flags['query']!r})"
            else:  # keep what does not depend on the query mode (a hybrid's fusion)
                tuned = {k: v for k, v in tuned.items() if k not in FLAGS}
                where += f" (query {flags['query']!r} not tuned)"
    values = {**asdict(IRSettings()), **tuned, **flags}
    sources = {
        key: FLAGS[key] if key in flags else where if tuned.get(key) is not None else DEFAULT_SOURCES.get(key, "default")
        for key in asdict(IRSettings())
    }
    return IRSettings(**values), sources


def record_file(record: dict[str, Any], settings_dir: Path, kind: str = "") -> tuple[Path, bytes]:
    """Where a tuning record (with ``kind``, e.g. ``calibration``, the record of that kind) goes,
    where ``tuned_file`` finds it first (over the record's corpus, if named), and its bytes."""
    path = tuned_path(record["method"], record["dataset"], settings_dir, record.get("corpus"), kind)
    return path, (readable(record) + "\n").encode("utf-8")


def save_tuned(record: dict[str, Any], settings_dir: Path, kind: str = "") -> Path:
    """Write a tuning record (with ``kind``, e.g. ``calibration``, the record of that kind) where
    ``tuned_file`` finds it first (over the record's corpus, if named); return its path."""
    return save_records({kind: record}, settings_dir)[kind]


def save_records(records: dict[str, dict[str, Any]], settings_dir: Path) -> dict[str, Path]:
    """Write tuning records (by kind: "" the settings, ``calibration``...) in one write, all or
    none (an interruption leaves the old pair); return their paths."""
    files = {kind: record_file(record, settings_dir, kind) for kind, record in records.items()}
    Path(settings_dir).mkdir(parents=True, exist_ok=True)
    write_all_or_none(dict(files.values()))
    return {kind: path for kind, (path, _) in files.items()}


#: The sha256 of each settings-store record's bytes as first read within one opening of a method
#: (``reading_once``), by path: what its calibration is checked against.
_READ: ContextVar[dict[str, str] | None] = ContextVar("openqa_records_read", default=None)


@contextmanager
def reading_once() -> Iterator[None]:
    """Within it (one opening of a method and its parts), each record of the settings store is
    remembered by the digest of the bytes first read, so a calibration is checked against the
    settings this opening uses, never the file as ``tune`` may have replaced it since (which would
    pass a new calibration with old settings). Nested uses share the outermost one's memory."""
    token = _READ.set({}) if _READ.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _READ.reset(token)


def read_json_record(path: Path, what: str) -> dict[str, Any]:
    """A JSON record of the settings store, refused in one line when it cannot be read (inside
    ``reading_once``, the digest of its bytes is remembered)."""
    try:
        data = path.read_bytes()
        record = decode(data.decode("utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not JSON, not UTF-8, nested too deep, a key repeated
        raise OpenQAError(f"{path}: unreadable {what} ({type(exc).__name__}: {exc}); rerun `openqa tune`") from None
    if not isinstance(record, dict):
        raise OpenQAError(f"{path}: unreadable {what} (not a JSON object); rerun `openqa tune`")
    read = _READ.get()
    if read is not None:
        read.setdefault(str(Path(path).absolute()), hashlib.sha256(data).hexdigest())
    return record


def load_calibration(key: str, dataset: str, settings_dir: Path, corpus: str | None = None) -> Calibration | None:
    """The calibration ``openqa tune`` fitted for the method ``key`` on ``dataset`` dev (yours, else
    shipped; see ``tuned_file``), or None when there is none."""
    path, where = tuned_file(key, dataset, settings_dir, corpus, kind="calibration")
    if path is None:
        return None
    record = read_json_record(path, "calibration record")
    settings, _ = tuned_file(key, dataset, settings_dir, corpus)
    fitted_with = record.get("settings_sha256")
    used = (_READ.get() or {}).get(str(settings.absolute())) if settings is not None else None
    if fitted_with and settings is not None and settings.parent == path.parent and (used or file_digest(settings)) != fitted_with:
        raise OpenQAError(f"{path} was fitted with other settings than {settings.name} holds (an interrupted or failed "
                          f"openqa tune?): rerun openqa tune --method {key} --dataset {dataset}")
    try:
        return Calibration.from_dict(record.get("calibration", {}), where)
    except OpenQAError as exc:
        raise OpenQAError(f"{path}: {exc}; rerun `openqa tune`") from None


#: Record key of the corpus fingerprint (``retrieval.manifest.corpus_fingerprint``) of the index a
#: settings, calibration or result record was made over.
FINGERPRINT = "corpus_fingerprint"


def recorded_corpus(path: Path) -> dict[str, Any] | None:
    """The corpus fingerprint a settings or calibration record carries (None: made before
    fingerprints were recorded, or unreadable here: reading the record itself says so)."""
    try:
        fingerprint = read_json_record(path, "tuning record").get(FINGERPRINT)
    except OpenQAError:
        return None
    return fingerprint if isinstance(fingerprint, dict) else None


def _count(books: dict[str, Any]) -> str:
    return f"{len(books)} book{'s' if len(books) != 1 else ''}"


def corpus_difference(tuned: dict[str, Any] | None, here: dict[str, Any] | None) -> str | None:
    """How the corpus settings were tuned on differs from the one an index holds, in words
    ("tuned on 11 books; this corpus has 12"), or None when they are the same or either is unknown."""
    if not tuned or not here or tuned.get("checksum") == here.get("checksum"):
        return None
    before, now = tuned.get("books"), here.get("books")
    if not isinstance(before, dict) or not isinstance(now, dict):
        what = f"corpus {here['corpus']!r}" if here.get("corpus") else "another corpus"
        return f"tuned on {_count(before) if isinstance(before, dict) else 'another corpus'}; this index holds {what}"
    if len(before) != len(now):
        return f"tuned on {_count(before)}; this corpus has {len(now)}"
    other = sum(1 for name, digest in now.items()
                if name not in before or (digest and before[name] and digest != before[name]))
    return (f"tuned on {_count(before)}; this corpus has {len(now)}, "
            + (f"{other} of them different" if other else "with other contents"))


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes: a settings record's (what its calibration was fitted with), an
    ensemble part's predictions file (what a record says it read)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def calibrate(results: Sequence[OptionScores], scale: str, key: str, dataset: str, corpus: str | None,
              settings: dict[str, Any], fitted_on: str = IN_SAMPLE, settings_bytes: bytes | None = None,
              fingerprint: dict[str, Any] | None = None, questions: dict[str, str] | None = None,
              label: str | None = None) -> tuple[Calibration, dict[str, Any]]:
    """Fit the probabilities of the method ``key`` on its ``dataset`` dev ``results`` (which ones
    ``fitted_on`` says) and their record, with how well they rank those answers and the digest of the
    settings record's bytes they were fitted with (``settings_bytes``: a pair that no longer matches
    is refused when read) and the ``fingerprint`` of the corpus they were fitted over (``save_tuned``
    writes it where ``load_calibration`` finds it first). Fitted on a user's question file instead
    of dev, the record names it (``questions``: its name and SHA-256) and the calibration's
    sentences call it ``label``; it is still filed under ``dataset``, whose settings it replaces."""
    calibration = Calibration.fit(results, scale, label or dataset, {k: v for k, v in settings.items() if k != "sources"}, fitted_on)
    record = {"method": key, "dataset": dataset, "split": QUESTION_FILE if questions else "dev",
              **({"questions": questions} if questions else {}), "corpus": corpus, "calibration": calibration.to_dict(),
              "dev": {"n": len(results), **confidence_report(results, [calibration.probabilities(r) for r in results])},
              **({"settings_sha256": hashlib.sha256(settings_bytes).hexdigest()} if settings_bytes is not None else {}),
              **({FINGERPRINT: fingerprint} if fingerprint else {}),
              **run_record()}
    return calibration, record
