"""The files an evaluation leaves: a JSON summary, per-question predictions and a Markdown report,
written so that an interruption never leaves one half-written; and the provenance every record
carries (command, date, machine, peak memory, the openqa version and, run from a checkout, its commit)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import platform
import re
import resource
import secrets
import stat
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from openqa.data.questions import DATASETS
from openqa.errors import OpenQAError
from openqa.signals import StoppedAfterWriting, interrupts_held
from openqa.version import version_record

#: The folder of a results tree (the repository's ``eval/results``) where each exam's runs are kept, by exam.
EXAM_FOLDERS = {"usmle": "us", "mcmle": "mainland", "twmle": "taiwan"}
#: Records that are no run of one dataset, by how their name starts, and their folder.
KIND_FOLDERS = (("bench-", "benchmarks"), ("compare-", "comparisons"), ("train-", "training"))
#: Where every other record goes (studies: one-off analyses, checks, corpus statistics).
STUDIES = "studies"


def record_folder(name: str) -> str:
    """The folder of a results tree, relative to it, where the record (or figure, report) named
    ``name`` belongs, by its name alone: ``bench-*`` in ``benchmarks``, ``compare-*`` in
    ``comparisons``, ``train-*`` in ``training``; a dataset's run (``<dataset>-<split>-...``, its
    retrieval report ``retrieval-<dataset>-...`` too) in ``runs/<exam>``: ``runs/us``,
    ``runs/mainland`` or ``runs/taiwan``; anything else in ``studies``. ``eval/results`` of the
    repository is laid out this way; ``openqa eval`` itself writes into the folder it is given."""
    if not isinstance(name, str):
        raise OpenQAError(f"record_folder takes a record's file name, not {type(name).__name__}")
    for start, folder in KIND_FOLDERS:
        if name.startswith(start):
            return folder
    stem = name.removeprefix("retrieval-")
    datasets = sorted((spec for spec in DATASETS.values() if stem.startswith(spec.name + "-")), key=lambda spec: -len(spec.name))
    if datasets:
        return f"runs/{EXAM_FOLDERS.get(datasets[0].exam, datasets[0].exam)}"
    return STUDIES


def find_record(root: Path, name: str) -> Path:
    """Where the record named ``name`` is in the results tree ``root``: directly inside it when it
    is there (a flat folder, as ``openqa eval`` writes one), else in its ``record_folder``."""
    flat = Path(root) / name
    return flat if flat.exists() else Path(root) / record_folder(name) / name


def run_record(command: str | None = None) -> dict[str, Any]:
    """How a result was produced: the command, time, machine, peak memory and openqa version.

    :param command: the command line that reproduces the result (default: ``openqa`` and this
        process's arguments).
    :raises OpenQAError: on a command that is not text (one line)."""
    from openqa import arguments as arg

    command = arg.optional_text("command", command)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        **version_record(),
        "command": command or " ".join(["openqa", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "peak_memory_mb": round(peak_kb / 1024, 1),
    }


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write a file so that an interruption never leaves it half-written (see ``write_all_or_none``)."""
    write_all_or_none({Path(path): text})


def write_all_or_none(files: dict[Path, str | bytes]) -> None:
    """Write several files so that each keeps its old content or all get their new one.

    Each text goes to a hidden ``.<unique>.NAME.tmp`` first (its own, so that runs writing the same
    names at once never share one); if any write fails (Ctrl-C, a full disk) every
    temporary file is removed and the old files stay. Then the temporary files take their names in
    a few renames during which Ctrl-C and SIGTERM are held and delivered once all are done: an
    interruption leaves all old or all new files and no temporary one. (Only a SIGKILL inside those
    microseconds can mix them; ``read_result_set`` detects that.) A stop delivered then is raised as
    ``StoppedAfterWriting``, which says that the new files are in place.
    """
    temps: dict[Path, Path] = {}
    placed = False
    try:
        for path, text in files.items():
            temps[path] = _temporary(path)
            if isinstance(text, bytes):
                temps[path].write_bytes(text)
            else:
                temps[path].write_text(text, encoding="utf-8")
        with interrupts_held():
            for path, tmp in temps.items():
                tmp.replace(path)
            placed = True
    except BaseException as exc:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
        if placed and isinstance(exc, KeyboardInterrupt):  # delivered by interrupts_held, all names taken
            raise StoppedAfterWriting(tuple(files)) from None
        raise


#: A path naming one of this process's open files: ``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``...
_STREAM = re.compile(r"/dev/(?P<name>stdin|stdout|stderr)|/dev/fd/(?P<fd>\d+)|/proc/(?P<pid>self|thread-self|\d+)"
                     r"(?:/task/\d+)?/fd/(?P<pfd>\d+)")


def stream_fd(path: Path) -> int | None:
    """The file descriptor of this process that ``path`` names (``/dev/stdout``, ``/proc/self/fd/1``,
    or a link to one of them), else None: what it names is written through that descriptor, never
    replaced, even where standard output is redirected to a regular file."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit of links followed
        match = _STREAM.fullmatch(current)
        if match:
            if match["pid"] not in (None, "self", "thread-self") and int(match["pid"]) != os.getpid():
                return None
            fd = match["fd"] or match["pfd"]
            return int(fd) if fd is not None else ("stdin", "stdout", "stderr").index(match["name"])
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return None


def output_target(path: Path) -> tuple[Path, bool]:
    """Where an output the user named is written and whether it is a regular file (or a new one,
    written atomically) rather than a device, FIFO or one of this process's open files such as
    ``/dev/stdout`` (written through: never replaced); a symlink is followed to what it names; a
    folder is refused in one line. Checked before the work starts."""
    if stream_fd(path) is not None:
        return path, False
    try:
        target = path.resolve() if path.is_symlink() else path
    except RuntimeError:  # Python 3.11's "Symlink loop"
        raise OpenQAError(f"cannot write {path} (a loop of symbolic links)") from None
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target, True
    except OSError as exc:
        raise OpenQAError(f"cannot write {path} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise OpenQAError(f"{path} is a folder: name a file to write")
    return target, stat.S_ISREG(mode)


def write_output(path: Path, text: str, metadata: str | None = None) -> Path:
    """Write ``text`` to the output ``path`` a user named (see ``output_target``), with ``metadata``
    beside a regular file as ``<name>.json`` (written with it, all or none); return where it went."""
    target, regular = output_target(path)
    try:
        fd = stream_fd(target)
        if fd is not None:  # its own offset and mode (a >> redirection appends): never truncated or renamed over
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            with open(os.dup(fd), "w", encoding="utf-8") as out:
                out.write(text)
            return target
        if not regular:  # a device or a FIFO: a FIFO no program reads is refused, never waited on
            try:
                fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ENXIO:
                    raise OpenQAError(f"cannot write {path}: it is a FIFO no program reads") from None
                raise
            os.set_blocking(fd, True)
            with open(fd, "w", encoding="utf-8") as out:
                out.write(text)
            return target
        write_all_or_none({target: text, **({target.with_name(target.name + ".json"): metadata} if metadata else {})})
    except OSError as exc:
        raise OpenQAError(f"cannot write {path} ({exc.strerror or exc})") from None
    return target


def _temporary(path: Path) -> Path:
    """The hidden temporary name of ``path`` for this write, ``.<pid>-<random>.NAME.tmp``: no other
    process or call writing ``path`` at the same time has it."""
    return path.with_name(f".{os.getpid()}-{secrets.token_hex(6)}.{path.name}.tmp")


def ensure_writable(folder: Path, flag: str = "--output", create: bool = True) -> Path:
    """Check, before any long work is done, that files can be written in ``folder`` (created here
    unless ``create`` is False: then its nearest existing parent is checked, and nothing is left
    behind if the work fails early)."""
    folder = Path(folder).absolute()
    where = folder
    while not create and not where.exists() and where != where.parent:
        where = where.parent
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        probe = where / f".openqa-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise OpenQAError(f"cannot write results to {folder} ({exc.strerror or exc}); give a writable {flag}") from None
    return folder


def result_stem(*parts: str, variant: str | None = None, limit: int | None = None) -> str:
    """The file name (without suffix) of a result, e.g. ``us-test-ir-custom``: every choice that
    changes the figure is in it, so that two different runs never overwrite each other."""
    stem = "-".join(parts)
    if variant:
        stem += f"-{variant}"
    if limit:
        stem += f"-limit{limit}"
    return stem


#: Settings that say how or where a run was computed (the server an LLM's model was reached at) or
#: where a setting came from, not what it computed, and the probabilities fitted on dev (a rerun
#: after ``openqa tune`` refits them; its answers are the same): a rerun may differ in them and
#: still replace its own record (``refuse_replacing``).
HOW_ONLY = ("sources", "cache", "runs_on", "prompt_cache", "endpoint", "probabilities")


def _what(value: Any) -> Any:
    """``value`` without the ``HOW_ONLY`` entries of its dicts, at any depth."""
    if isinstance(value, dict):
        return {k: _what(v) for k, v in value.items() if k not in HOW_ONLY}
    if isinstance(value, list):
        return [_what(v) for v in value]
    return value


def refuse_replacing(path: Path, identity: dict[str, Any]) -> None:
    """Refuse in one line, before any work, a run that would replace the record at ``path`` written
    with other settings (``identity``: the dataset, split, method, data, corpus, slice and settings
    of the run about to be made; entries either record lacks are not compared, so a record of an
    older openqa can still be replaced by its own rerun). A record that cannot be read is no run's."""
    try:
        old = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    found = _difference(_what(old), _what(json.loads(json.dumps(identity, default=str))))
    if found is not None:
        key, before, after = found
        raise OpenQAError(f"{Path(path).name} holds a run with another {key} ({_short(before)}; this run: {_short(after)}): "
                          "give another --output, or remove that record (and the files beside it) to replace it")


def _difference(old: Any, new: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """The first entry (a dotted key) in which ``new`` differs from ``old``, comparing only the
    entries both dicts hold, at every depth; None where they agree."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in new:
            if key in old and (found := _difference(old[key], new[key], f"{where}.{key}".lstrip("."))) is not None:
                return found
        return None
    return None if old == new else (where, old, new)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


@contextmanager
def result_lock(out_dir: Path, stem: str) -> Iterator[None]:
    """Hold the lock of the result named ``stem`` in ``out_dir`` (``flock`` of a hidden
    ``.STEM.lock`` beside it, released if the process dies, removed when done) while a run makes
    it: a second run of the same name is refused at once, in one line naming the holder, instead
    of both saying they wrote it while the last one wins."""
    from openqa.retrieval.manifest import lock_holder

    lock = Path(out_dir) / f".{stem}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OpenQAError(f"cannot write results to {out_dir} ({exc.strerror or exc}); give a writable --output") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock_holder(lock)
            os.close(fd)
            raise OpenQAError(f"{stem} is being written in {out_dir} by {holder}: let it finish, or give another --output") from None
        try:
            if os.stat(lock).st_ino == os.fstat(fd).st_ino:
                break  # the lock file that is there: ours
        except FileNotFoundError:
            pass
        os.close(fd)  # the last holder removed the file it locked: lock the one there now
    try:
        yield
    finally:
        try:
            os.unlink(lock)  # while still held: whoever opened it before must find it gone and retry
        except OSError:
            pass
        os.close(fd)


def _digest(content: str | bytes) -> str:
    return hashlib.sha256(content.encode("utf-8") if isinstance(content, str) else content).hexdigest()


def _file_digest(path: Path) -> str | None:
    """SHA-256 of a regular file read a block at a time (None when it cannot be read: no FIFO is waited on)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # checked before open(): it refuses a folder's descriptor itself
        os.close(fd)
        return None
    with open(fd, "rb") as handle:
        try:
            return hashlib.file_digest(handle, "sha256").hexdigest()
        except OSError:
            return None


def write_results(summary: dict[str, Any], rows: list[dict[str, Any]], out_dir: Path, figure: bytes | None = None,
                  ) -> tuple[Path, list[str]]:
    """Write ``<stem>.predictions.jsonl``, ``<stem>.md``, the risk-coverage ``figure`` (PNG, when
    given) and the ``<stem>.json`` summary, all or none (``write_all_or_none``); the summary, renamed
    last, records the checksum of the others, so a set that a SIGKILL mixed is still detected by
    ``read_result_set``. Return the JSON path and the names of the files written beside it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = result_stem(summary["dataset"], summary["split"], summary["method"], variant=summary.get("variant"),
                       limit=summary.get("limit"))
    predictions = "".join(json.dumps(r) + "\n" for r in rows)
    lo, hi = summary["ci95"]
    report = (
        f"# {summary['method']} on {summary['dataset']} {summary['split']}\n\n"
        f"| n | correct | accuracy | 95% CI | tied best | seconds |\n|---|---|---|---|---|---|\n"
        f"| {summary['n']} | {summary['correct']} | {summary['accuracy']:.2f} | {lo:.2f}-{hi:.2f} "
        f"| {summary['ties']['tie_rate']:.2f}% | {summary['seconds']:.2f} |\n\n"
        + confidence_markdown(summary)
        + f"Command: `{summary['command']}`  \nDate: {summary['date']}  \n"
        f"Settings: `{json.dumps(summary.get('settings', {}))}`  \nCorpus: {summary.get('corpus', '')}\n"
    )
    if "model_calls" in summary or summary.get("parse_failures"):  # a reader that may give no answer (an LLM)
        report += (f"\nParse failures (no letter read; counted wrong): {summary.get('parse_failures', 0)}  \n"
                   f"Model calls: {summary.get('model_calls', 0)}  \nCached replies: {summary.get('cached_replies', 0)}\n")
    files: dict[str, str | bytes] = {f"{stem}.predictions.jsonl": predictions, f"{stem}.md": report}
    if figure is not None:
        files[f"{stem}.risk-coverage.png"] = figure
    record = {**summary, "result_files": {name: _digest(content) for name, content in files.items()}}
    path = out_dir / f"{stem}.json"
    write_all_or_none({**{out_dir / name: content for name, content in files.items()},
                       path: json.dumps(record, indent=2, ensure_ascii=False) + "\n"})
    return path, sorted(files)


def confidence_markdown(summary: dict[str, Any]) -> str:
    """The report's confidence section: how well the probabilities rank the answers (and, for an
    ensemble, its parts and the paired comparison with its best part)."""
    rows = {summary["method"]: summary.get("confidence")} | summary.get("parts", {})
    rows = {name: c for name, c in rows.items() if c}
    if not rows:
        return ""
    coverages = list(next(iter(rows.values()))["accuracy_at_coverage"])
    lines = [
        "## Confidence\n",
        f"Probabilities: {summary['settings'].get('probabilities', 'uncalibrated')} "
        f"({summary['settings'].get('sources', {}).get('probabilities', '')}). "
        f"ECE over {next(iter(rows.values()))['ece_binning']}; accuracy at a coverage: the most confident share of the questions; "
        "ECE if calibrated: the median (and central 95%) ECE of a perfectly calibrated method with the same confidences "
        "on as many questions.\n",
        "| method | accuracy | ECE | ECE if calibrated | Brier | log-lik. | AURC | " + " | ".join(f"acc@{c}% (95% CI)" for c in coverages) + " |",
        "|---|" + "---|" * (6 + len(coverages)),
    ]
    for name, c in rows.items():
        at = " | ".join(f"{a['accuracy']:.1f} ({a['ci95'][0]:.1f}-{a['ci95'][1]:.1f})" for a in c["accuracy_at_coverage"].values())
        accuracy = c.get("accuracy", summary["accuracy"])
        floor = c.get("ece_if_calibrated")  # none in a record made before it was reported
        calibrated = f"{floor['median']:.4f} ({floor['ci95'][0]:.4f}-{floor['ci95'][1]:.4f})" if floor else "-"
        lines.append(f"| {name} | {accuracy:.2f} | {c['ece']:.4f} | {calibrated} | {c['brier']:.4f} | {c['log_likelihood']:.4f} | {c['aurc']:.4f} | {at} |")
    versus = summary.get("versus_best_part")
    if versus:
        lo, hi = versus["ci95"]
        lines.append(f"\n{summary['method']} - {versus['part']} (best part on dev): {versus['difference']:+.2f} points, "
                     f"95% CI {lo:+.2f} to {hi:+.2f} ({versus['interval']}).")
    base = summary.get("versus_baseline")
    if base:
        lo, hi = base["ci95"]
        lines.append(f"\n{summary['method']} - {base['method']} ({base['accuracy']:.2f}%): {base['difference']:+.2f} points, "
                     f"95% CI {lo:+.2f} to {hi:+.2f}.")
    return "\n".join(lines) + "\n\n"


def not_an_eval_record(value: Any) -> str | None:
    """Why a JSON value is not an eval record ``openqa eval`` wrote (``write_results``), in a few words,
    or None when it is one: a dataset, split and method by name, and the digests of the files written
    with it by their plain names (``result_files``, never empty). ``{}``, ``{"result_files": {}}``,
    a comparison's record (``openqa compare``, which names no files) and other JSON are not, so
    that neither ``read_result_set`` nor ``compare`` takes them for a run."""
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    unnamed = next((field for field in ("dataset", "split", "method") if not isinstance(value.get(field), str)), None)
    if unnamed is not None:
        return f"its {unnamed} is not a name" if unnamed in value else f"no {unnamed}"
    files = value.get("result_files")
    if not isinstance(files, dict) or not files:
        return "no result_files: the files an eval writes with its record, by digest"
    if not all(isinstance(n, str) and isinstance(d, str) and n and Path(n).name == n for n, d in files.items()):
        return "its result_files are not file names with digests"
    return None


#: The largest result summary ``read_result_set`` reads (openqa writes some kilobytes; the predictions are beside it).
MAX_SUMMARY_BYTES = 64 * 1024 * 1024


def _eval_record_at(path: Path) -> dict[str, Any] | None:
    """The eval record ``path`` holds, or None where it holds none or cannot be read as one."""
    from openqa.jsonl import read_small

    try:
        record = json.loads(read_small(path, MAX_SUMMARY_BYTES, "a result summary").decode("utf-8"))
    except (OpenQAError, ValueError, RecursionError):
        return None
    return record if not_an_eval_record(record) is None else None


def refuse_run_files(written: list[Path], output: Path) -> None:
    """Refuse, in one line before any work, an ``--output`` whose files ``written`` (the output and
    what goes beside it) would replace an eval record or a file one names in its folder (its report,
    predictions or figure): that run would no longer pass ``read_result_set``, and a record would be
    lost for a comparison. Other files, such as the previous output of the same command, may be replaced."""
    for path in written:
        if not path.is_file():
            continue
        if _eval_record_at(path) is not None:
            raise OpenQAError(f"--output {output} would replace {path}, the record of an eval run: name another file")
        for record in sorted(path.parent.glob("*.json")):
            found = _eval_record_at(record)
            if found is not None and path.name in found["result_files"]:
                raise OpenQAError(f"--output {output} would replace {path}, a file of the eval run {record.name}: "
                                  "name another file")


def read_result_set(path: str | Path) -> dict[str, Any]:
    """A result summary, refused unless the prediction and report files beside it are the ones it was
    written with (a run killed between its writes leaves a newer file beside an older summary).

    :param path: the summary's JSON file (``openqa eval`` writes it with the files it names).
    :returns: the summary, as written.
    :raises OpenQAError: on a path that is not a readable summary, or files beside it from another run (one line)."""
    from openqa import arguments as arg
    from openqa.jsonl import read_small

    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise OpenQAError(f"path must name a result summary (a .json file), not {arg.shown(path)}")
    checked = arg.path("path", path)
    assert checked is not None  # refused above
    path = checked
    shown = arg.named(path)
    try:
        summary = json.loads(read_small(path, MAX_SUMMARY_BYTES, "a result summary").decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise OpenQAError(f"{shown}: unreadable result summary ({arg.shown(exc, 200)})") from None
    why = not_an_eval_record(summary)
    if why is not None:
        raise OpenQAError(f"{shown}: not a result summary openqa wrote ({why})")
    for name, digest in summary["result_files"].items():
        other = path.with_name(name)
        if not other.is_file() or _file_digest(other) != digest:
            raise OpenQAError(f"{arg.named(other)}: missing or from another run than {arg.named(path.name)}; "
                              f"rerun: {arg.named(summary.get('command'))}")
    result: dict[str, Any] = summary
    return result
