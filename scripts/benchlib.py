"""What the benchmark scripts share: where the MedQA data is, and how a record is written.

Every script finds the data the same way (``OPENQA_DATA``, else ``shared/medqa/data_clean`` beside
this repository, never relative to the working folder) and writes its record through
``write_record``: atomically, under ``eval/results/`` of this repository, in the folder its name
belongs in (``record_folder``: ``benchmarks/``, ``runs/<exam>/``, ``studies/``...), with the command, time
and machine, and with no absolute path of this machine in it (the data folder is written
``$OPENQA_DATA``, this repository ``.``, the temporary folder ``$TMPDIR``), so records can be shared.

Scripts live in ``scripts/<kind>/`` and import it as ``from benchlib import ...`` after putting
``scripts/`` first on the import path (``sys.path.insert(0, ...parents[1])``, the first lines of each).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from openqa import record_folder, run_record

REPO = Path(__file__).resolve().parents[1]
#: The repository's results tree; each record in the folder ``record_folder`` gives its name.
RESULTS = REPO / "eval" / "results"
#: The MedQA data beside this repository, when OPENQA_DATA is not set.
SHARED_DATA = REPO.parent / "shared" / "medqa" / "data_clean"


def data_dir() -> Path:
    """The MedQA ``data_clean`` folder (``OPENQA_DATA``, else the shared one beside this repository);
    exits with a one-line message when it is not there. Sets ``OPENQA_DATA`` for child commands."""
    path = Path(os.environ.get("OPENQA_DATA") or SHARED_DATA).resolve()
    if not path.is_dir():
        raise SystemExit(f"MedQA data not found at {path}: set OPENQA_DATA to a data_clean folder")
    os.environ["OPENQA_DATA"] = str(path)
    return path


def placeholders() -> dict[str, str]:
    """Absolute folders of this machine and the names a shared record gives them, longest first."""
    folders = {str(Path(tempfile.gettempdir()).resolve()): "$TMPDIR", str(REPO): ".",
               str(Path(sysconfig.get_paths()["purelib"]).resolve()): "<site-packages>"}
    for variable in ("OPENQA_DATA", "OPENQA_INDEXES"):
        if os.environ.get(variable):
            folders[str(Path(os.environ[variable]).resolve())] = f"${variable}"
    folders[str(Path.home())] = "~"
    return dict(sorted(folders.items(), key=lambda item: -len(item[0])))


#: A user or password in a URL (``scheme://user:password@host``), as records made before openqa refused
#: them may carry in an ``--endpoint``.
CREDENTIALS = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]*@")


def shareable(value: Any, names: dict[str, str] | None = None) -> Any:
    """``value`` (nested as JSON) with every absolute path of this machine written by its placeholder,
    and every URL without its user and password (a credential is never written)."""
    names = placeholders() if names is None else names
    if isinstance(value, dict):
        return {key: shareable(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [shareable(item, names) for item in value]
    if isinstance(value, str):
        for folder, name in names.items():
            value = value.replace(folder, name)
        value = CREDENTIALS.sub(r"\1", value)
    return value


def command_line(script: str, argv: list[str], folders: tuple[str, ...] = ("--cache-dir", "--index-dir", "--data-dir")) -> str:
    """The command that ran ``script`` with ``argv``, the values of the ``folders`` flags (where this
    machine keeps things; they change no figure) written as ``FOLDER``."""
    words = ["python", script]
    for i, word in enumerate(argv):
        flag = word.split("=")[0]
        if i > 0 and argv[i - 1] in folders:
            word = "FOLDER"
        elif "=" in word and flag in folders:
            word = f"{flag}=FOLDER"
        words.append(word)
    return " ".join(words)


def record_path(name: str, results: Path = RESULTS) -> Path:
    """Where the repository keeps the record (or figure, report) named ``name``: under ``eval/results/``
    (or the results tree ``results``) in the folder its name belongs in (``openqa.record_folder``; e.g.
    ``bench-core.json`` in ``benchmarks/``, ``us-test-ir-custom.json`` in ``runs/us/``); one still directly
    inside it (written there by ``openqa eval --output eval/results``, not yet moved) is found there."""
    flat = results / name
    return flat if flat.exists() else results / record_folder(name) / name


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it, renamed into place: an
    interruption leaves the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_record(name: str, record: dict[str, Any], command: str, folder: Path | None = None) -> Path:
    """Write ``record`` (with the command, time and machine of this run) as ``folder/name``
    atomically, with no absolute path of this machine; return its path. ``folder`` defaults to the
    one of the repository's results tree where ``name`` belongs (``record_path``)."""
    folder = RESULTS / record_folder(name) if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    write_atomic(path, json.dumps(shareable({**record, **run_record(command)}), indent=2, ensure_ascii=False) + "\n")
    return path


def print_notes() -> None:
    """Print openqa's one-line notes (work done on the script's behalf, such as a quick index built
    first: the API logs them to the ``openqa`` logger) as ``note: ...`` lines on standard output."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("note: %(message)s"))
    logger = logging.getLogger("openqa")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def alternate(engines: dict[str, Callable[[], Any]], rounds: int) -> tuple[dict[str, list[float]], dict[str, Any], str]:
    """Run each engine once to warm it (compile numba code, fill caches), then ``rounds`` rounds of
    every engine in turn, so that all see the same load: each one's seconds per round, its last
    result, and the load average before and after the rounds."""
    for run in engines.values():
        run()
    before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    seconds: dict[str, list[float]] = {name: [] for name in engines}
    last: dict[str, Any] = {}
    for _ in range(rounds):
        for name, run in engines.items():
            start = time.perf_counter()
            last[name] = run()
            seconds[name].append(round(time.perf_counter() - start, 4))
    after = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return seconds, last, f"load average (1, 5, 15 min) {before} before the rounds, {after} after"


def rates(seconds: dict[str, list[float]], counts: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Items per second per variant from ``alternate``'s seconds and each variant's item count: the
    median, min and max over its rounds, and the rounds' seconds."""
    return {name: {"n": counts[name], "median": round(counts[name] / statistics.median(s), 1), "min": round(counts[name] / max(s), 1),
                   "max": round(counts[name] / min(s), 1), "seconds": s} for name, s in seconds.items()}


def modes(seconds: list[float], gap: float = 1.25, least: int = 2) -> list[list[int]]:
    """The rounds of one engine split by speed: two modes (fast rounds, then slow ones, as round
    indexes) where its sorted seconds jump by at least ``gap`` times between two neighbours with at
    least ``least`` rounds on each side (bm25s alternates between two speeds round by round; one
    slow round is an outlier, not a mode), else one mode of every round."""
    order = sorted(range(len(seconds)), key=seconds.__getitem__)
    jumps = [(seconds[order[i + 1]] / max(seconds[order[i]], 1e-12), i) for i in range(least - 1, len(order) - least)]
    largest, at = max(jumps, default=(1.0, 0))
    if largest < gap:
        return [sorted(order)]
    return [sorted(order[: at + 1]), sorted(order[at + 1:])]


def matched_ratios(faster: list[float], slower: list[float]) -> list[float]:
    """Round by round, how many times faster one engine is than another: ``slower[i] / faster[i]``
    for the seconds of the same round of ``alternate`` (run one beside the other, under the same load)."""
    return [round(b / max(a, 1e-12), 3) for a, b in zip(faster, slower)]


def file_sha256(path: Path) -> str:
    """The SHA-256 of a (large) file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def stop_process(process: subprocess.Popen[Any], signum: int, timeout: float) -> None:
    """Send ``signum`` to a server a benchmark started, wait up to ``timeout`` seconds for it to
    stop, and kill it if it has not: no benchmark leaves a process behind."""
    process.send_signal(signum)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
