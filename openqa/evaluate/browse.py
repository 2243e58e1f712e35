"""A folder of evaluation records as something to browse: every run with its headline figures, a
run's questions with what it answered, and the comparison of runs (``openqa.evaluate.compare``).

``openqa serve --results DIR`` shows these on its results page and ``openqa.api.browse_results``
returns them. The records directly inside the folder are read and those in its subfolders (a tree
laid out by kind, as the repository's ``eval/results``: ``runs/us/``, ``benchmarks/``...; hidden
folders and links to folders left out, at most ``MAX_DEPTH`` deep); each run is listed with its
folder (relative to the results folder: ``runs/us``, or empty directly inside). A run is named by its
file name alone, wherever its folder (a name found twice is the one directly inside, else the first
by path), or by its folder and name (``runs/us/NAME``): that file alone. A name with ``..``, an
absolute path or a hidden part is refused in one line.
Nothing outside the folder is reachable (a link whose target is outside it is neither listed nor
read). A record that cannot be read (half-written, malformed, a figure that is no number) is listed with its reason and
never stops the listing; JSON files that are not eval records (benchmarks, settings) are left out.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from openqa import arguments as arg
from openqa.cancel import checkpoint
from openqa.data import dataset_spec
from openqa.errors import DataError, OpenQAError, UsageError
from openqa.evaluate.calibration import curves
from openqa.evaluate.compare import PREDICTIONS, SHIPPED, prediction_rows, run_paths
from openqa.jsonl import decode

#: The largest record read (a larger one is listed as unreadable).
MAX_RECORD_BYTES = 1 << 24
#: The most questions a run's listing returns (``GET /v1/results/RUN`` says when a run has more).
MAX_QUESTIONS = 20_000
#: How deep below the results folder records are looked for (``runs/us/`` is 2 deep).
MAX_DEPTH = 4


def _eval_record(record: Any) -> bool:
    """Whether a JSON value is an eval record (``openqa eval``'s summary)."""
    return (isinstance(record, dict) and all(k in record for k in ("dataset", "split", "method", "n"))
            and isinstance(record.get("accuracy"), (int, float)) and not isinstance(record.get("accuracy"), bool)
            and "result_files" in record)


def finite(value: Any) -> bool:
    """Whether ``value`` is a number JSON can send (not a boolean, NaN or infinite)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _figure(value: Any, optional: bool, pair: bool = False) -> bool:
    """Whether a record's figure is what the page draws: a finite number (``pair``: a list of two),
    or None when ``optional``."""
    if value is None:
        return optional
    return isinstance(value, list) and len(value) == 2 and all(map(finite, value)) if pair else finite(value)


def decode_safe(value: Any) -> str:
    """A figure as the reason of an unreadable run shows it (short, one line)."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def within(top: Path, path: Path) -> bool:
    """Whether ``path``, its links followed, is inside the resolved folder ``top``."""
    try:
        where = path.resolve()
    except (OSError, RuntimeError):  # a loop of links
        return False
    return where == top or top in where.parents


def run_row(path: Path, top: Path) -> dict[str, Any] | None:
    """One run's headline: dataset, split, method, questions, accuracy with its interval, ECE,
    accuracy of the 20% most confident, date and openqa version; ``unreadable`` with the reason
    when the file cannot be read; None for a JSON file that is no eval record. ``questions`` says
    whether its predictions can be opened: a plain file inside ``top`` (the resolved results
    folder), never one a link takes out of it."""
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            return {"run": path.name, "unreadable": f"larger than {MAX_RECORD_BYTES:,} bytes"}
        record = decode(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, not JSON
        return {"run": path.name, "unreadable": f"{type(exc).__name__}: {exc}"}
    if not _eval_record(record):
        return None
    confidence = record.get("confidence") if isinstance(record.get("confidence"), dict) else {}
    at20 = (confidence.get("accuracy_at_coverage") or {}).get("20") or {}
    if not isinstance(at20, dict):
        at20 = {}
    figures = {"accuracy": record["accuracy"], "ci95": record.get("ci95"), "ece": confidence.get("ece"),
               "accuracy_at_20": at20.get("accuracy")}
    wrong = next((key for key, value in figures.items() if not _figure(value, key != "accuracy", key == "ci95")), None)
    if wrong is not None:
        return {"run": path.name, "unreadable": f"its {wrong} is not a number: {decode_safe(figures[wrong])}"}
    _, predictions = run_paths(path)
    try:
        lang: str | None = dataset_spec(str(record["dataset"])).lang
    except OpenQAError:  # a dataset of the user's own: the page cannot re-ask its questions
        lang = None
    row = {"run": path.name, "lang": lang, "dataset": record["dataset"], "split": record["split"], "method": record["method"],
           "variant": record.get("variant"), "n": record["n"], **figures, "date": record.get("date"),
           "openqa_version": record.get("openqa_version"),
           "questions": predictions.is_file() and within(top, predictions)}
    try:
        json.dumps(row, allow_nan=False)  # what a client is sent: no NaN or infinity anywhere
    except ValueError:
        return {"run": path.name, "unreadable": "a value that is not a number (NaN or infinite)"}
    return row


def folders(folder: Path) -> Iterator[Path]:
    """``folder``, then its subfolders by path, down to ``MAX_DEPTH`` (hidden ones and links to folders left out)."""
    top = Path(folder)
    for where, subfolders, _ in os.walk(top):
        depth = len(Path(where).relative_to(top).parts)
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".")) if depth < MAX_DEPTH else []
        yield Path(where)


#: What tells a file's versions apart: inode, size and modification time (None: no such file).
FileStamp = tuple[int, int, int] | None


def file_stamp(path: Path) -> FileStamp:
    """``path``'s inode, size and modification time, its links followed (None when it cannot be read)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns


class RunCache:
    """The headlines already read (``run_row``), each kept while its record and its predictions file
    are unchanged on disk (their inode, size and modification time): a listing through it stats
    every record but re-reads only those that changed, so a folder of thousands of records is
    listed again in a fraction of the first listing's time. Safe to share between threads."""

    def __init__(self) -> None:
        self._rows: dict[Path, tuple[tuple[FileStamp, FileStamp], dict[str, Any] | None]] = {}
        self._listed: set[Path] = set()
        self._lock = threading.Lock()

    def row(self, path: Path, top: Path) -> dict[str, Any] | None:
        """``run_row(path, top)``, read again only when the record or its predictions file changed."""
        key = (file_stamp(path), file_stamp(run_paths(path)[1]))
        with self._lock:
            kept = self._rows.get(path)
        if kept is not None and kept[0] == key and key[0] is not None:
            return kept[1]
        row = run_row(path, top)
        with self._lock:
            self._rows[path] = (key, row)
        return row

    def listed(self, folder: Path, paths: list[Path]) -> None:
        """Note that ``folder`` was listed in full as ``paths``: rows of records gone are forgotten."""
        keep = set(paths)
        with self._lock:
            self._listed.add(Path(folder).absolute())
            for path in [p for p in self._rows if p not in keep and Path(folder) in p.parents]:
                del self._rows[path]

    def has_listed(self, folder: Path) -> bool:
        """Whether ``folder`` was listed through this cache before (a listing now re-reads only what changed)."""
        with self._lock:
            return Path(folder).absolute() in self._listed


def resolved_folder(folder: Path) -> Path:
    """``folder`` with its links followed, or a one-line error (a loop of links, a name too long)."""
    try:
        return folder.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python 3.11's "Symlink loop"
        raise DataError(f"results folder {folder} cannot be read ({arg.shown(exc, 120)})") from None


def list_runs(folder: Path, cache: RunCache | None = None) -> list[dict[str, Any]]:
    """Every eval record inside ``folder`` or its subfolders, by name (see ``run_row``); with
    ``cache``, only the records changed since it last read them are read again."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(f"results folder not found: {folder}")
    top = resolved_folder(folder)
    paths = sorted((path for where in folders(folder) for path in where.glob("*.json") if path.is_file() and within(top, path)),
                   key=lambda path: (path.name, len(path.parts), path))
    rows = []
    for path in paths:
        checkpoint()  # a server's listing stops here once it is no longer wanted
        row = cache.row(path, top) if cache is not None else run_row(path, top)
        if row is not None:
            rows.append({**row, "folder": path.parent.relative_to(folder).as_posix().removeprefix(".")})
    if cache is not None:
        cache.listed(folder, paths)
    return rows


def run_name(name: Any) -> tuple[str, str]:
    """A run's name as given (``NAME``, ``NAME.json`` or ``FOLDER/NAME``: its folder under the results
    folder, as the listing shows it) split into that folder ("" for none) and the file name without
    ``.json``; refused in one line for anything else (``..``, an absolute path, a hidden part, a
    backslash or NUL, a folder deeper than ``MAX_DEPTH``)."""
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or any(not part or part.startswith(".") for part in parts) or "\\" in name or "\0" in name
            or len(parts) > MAX_DEPTH + 1):
        raise UsageError(f"no run named {arg.shown(name)} here: give a run's name, or its folder in the results folder "
                         "and its name (runs/us/NAME), with no '..', leading '/' or hidden part")
    return "/".join(parts[:-1]), parts[-1].removesuffix(".json")


def inside(folder: Path, name: str, suffix: str) -> Path:
    """The file ``name`` + ``suffix`` inside ``folder``: for a name with a folder (``runs/us/NAME``)
    that file alone, for a plain name the one directly inside, else in the first of its subfolders
    that holds it; refused for any other name (``run_name``) and for a link out of the folder."""
    sub, stem = run_name(name)
    top = resolved_folder(Path(folder))
    for where in [Path(folder) / sub] if sub else folders(Path(folder)):
        path = where / f"{stem}{suffix}"
        try:
            found = path.is_file()
        except OSError:  # a name too long for the file system, ...
            found = False
        if found and within(top, path):  # a link out of the folder is never followed
            return path
    raise UsageError(f"no run named {arg.shown(name)} here")


def predictions_file(folder: Path, name: str) -> Path:
    """The predictions file of the run ``name`` inside ``folder`` (its own, else a repository's
    shipped, compressed copy); refused in one line when it has none."""
    try:
        return inside(folder, name, PREDICTIONS)
    except UsageError:  # a repository's shipped copy, where the predictions themselves are not kept
        return inside(folder, name, SHIPPED)


def question_rows(folder: Path, name: str) -> Iterator[dict[str, Any]]:
    """Every question of a run as its predictions file holds it: id, prediction, answer, whether
    right, confidence, each option's probability, whether it abstained, the evidence ids it read."""
    path = predictions_file(folder, name)
    for _, row in prediction_rows(path):
        numbers = [row.get("confidence"), *(row["probabilities"].values() if isinstance(row.get("probabilities"), dict) else ())]
        if any(isinstance(x, float) and not math.isfinite(x) for x in numbers):
            raise DataError(f"{name}: question {row.get('qid')!r} has a confidence or probability that is not a number: "
                            "rerun openqa eval")
        yield {key: row.get(key) for key in ("qid", "digest", "prediction", "answer", "correct", "confidence",
                                             "probabilities", "abstained", "tied", "evidence_ids")}


def run_questions(folder: Path, name: str, most: int = MAX_QUESTIONS) -> list[dict[str, Any]]:
    """A run's first ``most`` questions (``question_rows``): a listing of a bounded size."""
    return list(itertools.islice(question_rows(folder, name), most))


def run_curves(folder: Path, name: str) -> dict[str, Any]:
    """A run's risk-coverage curve and reliability diagram from its predictions (``calibration.curves``),
    with the accuracy of guessing (from each question's number of options): what the results page
    draws, one line per run, over all its questions."""
    confidences, right, options = [], [], []
    for row in question_rows(folder, name):
        if row.get("confidence") is not None and not finite(row["confidence"]):
            raise DataError(f"{name}: question {row.get('qid')!r} has a confidence that is not a number: rerun openqa eval")
        confidences.append(float(row.get("confidence") or 0.0))
        right.append(bool(row.get("correct")))
        if isinstance(row.get("probabilities"), dict) and row["probabilities"]:
            options.append(len(row["probabilities"]))
    confidence, correct = np.array(confidences), np.array(right)
    chance = round(100 * float(np.mean([1 / k for k in options])), 2) if options else None
    return {"run": name, "chance": chance, **curves(confidence, correct)}
