"""Index manifests (settings, corpus checksum and fingerprint, the files written) and atomic index folders.

Every index folder holds ``manifest.json``. Loading compares it with what the caller expects and
refuses a mismatch, so results never silently come from an index built another way.

The manifest also records every file the build wrote, with its size and SHA-256, and
``read_manifest`` checks them, so a truncated, emptied, shuffled or half-copied index is refused
with the command that rebuilds it instead of a traceback or quietly worse results. Policy: every
file's size is checked on every open (a ``stat``); its SHA-256 too when the file is at most
``HASH_LIMIT`` bytes. SHA-256 runs at about 1.4 GB/s here (faster than blake2b on CPUs with SHA
instructions): hashing the English custom index (45 MB) takes some 33 ms, on top of the 25 ms
its opening took before (medians, 2 busy cores). Larger files (the Chinese custom index's
weights, a dense ``faiss.index``: over 100 MB each; a custom index of millions of paragraphs:
gigabytes) are only size-checked on open, by design: hashing them would cost seconds on every
open, and a memory-mapped index is otherwise not read until searched. They are left to their
loaders' own checks (an ``.npy`` header, the CRCs of an ``.npz``'s zip members) and to the
engines' count checks. Engines read their files inside ``loading``, which turns a parse failure
into the same one-line error, and compare counts (terms, paragraphs) across files with
``check_counts``.

Indexes built before files were recorded (no ``files`` key) still open, with the weaker check:
counts across files and parse failures are caught, a same-sized edit (a shuffled vocabulary) is not.

``atomic_folder`` builds in a scratch folder and swaps it in with two renames under a lock on
the parent folder, with Ctrl-C and SIGTERM held until both are done, so overlapping builds
serialise their swaps (the last to finish wins) and an interruption never lands between them. A
kill between the renames leaves the previous index hidden as ``.NAME.old-*``: the next open
or build renames it back. A build removes scratch folders that builds killed on this machine
left behind (their names carry host and process id); a live build's are never touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import time
import zipfile
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

from openqa import __version__
from openqa.errors import IndexDamagedError, IndexMismatchError, IndexMissingError, OpenQAError
from openqa.jsonl import decode
from openqa.signals import interrupts_held
from openqa.version import commit

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
#: Manifest key of the file records: relative path -> {"bytes": size, "sha256": hex digest}.
FILES = "files"
#: Files up to this size are hashed on every open; larger ones are only size-checked.
HASH_LIMIT = 64 << 20
#: What loaders raise on a damaged file: numpy, scipy, json and zip parse errors, a vanished file.
LOAD_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile)
#: How long a swap waits for another build's swap of the same index folder to finish.
LOCK_TIMEOUT_S = 60.0
#: Infixes of the hidden folders beside an index: a build in progress, a replaced index.
BUILDING, OLD = "building", "old"


def rebuild(build_hint: str | None) -> str:
    """How every refusal of an index ends: the command that rebuilds it."""
    return f"rebuild with `{build_hint or 'openqa index'}`"


def damaged(folder: Path, file: str, what: str, build_hint: str | None) -> IndexDamagedError:
    """The one-line error for an index whose ``file`` is ``what`` (missing, truncated, unparsable)."""
    return IndexDamagedError(f"index at {folder} is damaged: {file} {what}; {rebuild(build_hint)}")


def replaced(folder: Path) -> IndexMismatchError:
    """The one-line error for an index rebuilt (by another command) after it was opened: its files
    are sound but no longer the ones opened, so it says to open it again, not to rebuild (a rebuild
    with the corpus of the first opening would overwrite the new index)."""
    return IndexMismatchError(f"index at {folder} was rebuilt since it was opened: open it again (rerun the command, "
                              "restart the server)")


def mismatch(folder: Path, what: str, build_hint: str | None) -> IndexMismatchError:
    """The one-line error for an index built another way than asked (``what`` says how)."""
    return IndexMismatchError(f"index at {folder} {what}; {rebuild(build_hint)}")


def file_records(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file under ``folder`` except the manifest, by relative path."""
    return {
        path.relative_to(folder).as_posix(): {"bytes": path.stat().st_size, "sha256": sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path != folder / MANIFEST
    }


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` with the build time, package version and records of the files in
    ``folder`` added: call it last, when every other file of the index is written."""
    record = {**manifest, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "openqa": __version__,
              "commit": commit(),
              FILES: file_records(folder)}
    (folder / MANIFEST).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_manifest(folder: Path, build_hint: str) -> dict[str, Any]:
    """Read an index's manifest and check the files it records (see the module's policy).

    A missing index (after bringing back one a killed swap hid) says how to build it; a manifest
    that is not a JSON object, or a file missing or differing from its record, is damage.
    """
    folder = Path(folder)
    recover(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise IndexMissingError(f"no index at {folder}: build it with `{build_hint}`")
    try:
        manifest = decode(path.read_text(encoding="utf-8"))  # nesting too deep, a huge number: ValueError
    except ValueError as exc:  # UnicodeDecodeError too
        raise damaged(folder, MANIFEST, f"is not valid JSON ({exc})", build_hint) from None
    if not isinstance(manifest, dict):
        raise damaged(folder, MANIFEST, f"holds a JSON {type(manifest).__name__}, not an object", build_hint)
    verify_files(folder, manifest, build_hint)
    return manifest


def verify_files(folder: Path, manifest: dict[str, Any], build_hint: str) -> None:
    """Refuse an index whose files differ from the manifest's records: missing, another size, or
    (files up to ``HASH_LIMIT``) other bytes. A manifest without records (an older index) passes."""
    records = manifest.get(FILES)
    if records is None:
        return
    if not isinstance(records, dict):
        raise damaged(folder, MANIFEST, f"has a malformed {FILES!r} record", build_hint)
    for name, record in records.items():
        relative = PurePosixPath(name)
        if (relative.is_absolute() or ".." in relative.parts or not isinstance(record, dict)
                or not isinstance(record.get("bytes"), int) or not isinstance(record.get("sha256"), str)):
            raise damaged(folder, MANIFEST, f"has a malformed record for {name!r}", build_hint)
        path = folder / relative
        if not path.is_file():
            raise damaged(folder, name, "is missing", build_hint)
        size = path.stat().st_size
        if size != record["bytes"]:
            raise damaged(folder, name, f"has {size} bytes where {record['bytes']} were written", build_hint)
        if size <= HASH_LIMIT and sha256(path) != record["sha256"]:
            raise damaged(folder, name, "has changed since it was written (SHA-256 differs)", build_hint)


def corpus_fingerprint(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The fingerprint of the corpus an index holds, from its manifest: its language, name (a
    named corpus), books (name -> SHA-256; None for an index built before books were hashed) and
    the whole-corpus checksum. Tuned settings, calibrations and results carry it, so settings made
    on one corpus are told apart from another's. None for an index of no corpus (a closed-book LLM)."""
    checksum = manifest.get("corpus_checksum")
    if not isinstance(checksum, str) or checksum == "none":
        return None
    books = manifest.get("books")
    sums = manifest.get("book_sha256")
    sums = sums if isinstance(sums, dict) else {}
    return {"lang": manifest.get("lang"), **({"corpus": manifest["corpus"]} if manifest.get("corpus") else {}),
            "books": {str(b): sums.get(b) for b in books} if isinstance(books, list) else None,
            "checksum": checksum}


def check_manifest(manifest: dict[str, Any], expected: dict[str, Any], folder: Path, build_hint: str) -> None:
    """Refuse an index whose recorded settings differ from ``expected`` (only keys given)."""
    diffs = [
        f"{key}={manifest.get(key)!r} (asked for {value!r})"
        for key, value in expected.items()
        if manifest.get(key) != value
    ]
    if diffs:
        raise mismatch(folder, f"was built with other settings or corpus: {'; '.join(diffs)}", build_hint)


@contextmanager
def loading(folder: Path, file: str, build_hint: str | None, errors: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Read ``file`` of the index in ``folder`` inside this block: a parse failure (``LOAD_ERRORS``
    and the loader-specific ``errors``) becomes the one-line damaged-index error."""
    try:
        yield
    except (*LOAD_ERRORS, *errors) as exc:
        reason = " ".join(str(exc).split())  # some loaders' messages span lines
        raise damaged(folder, file, f"cannot be read ({type(exc).__name__}: {reason})", build_hint) from None


def check_counts(folder: Path, what: str, counts: dict[str, Any], build_hint: str | None) -> None:
    """Refuse an index whose files (and manifest) disagree on how many ``what`` it holds.

    ``counts`` maps each source (a file, the manifest) to the count it gives; None is unknown
    (a key an older manifest lacks).
    """
    known = {source: n for source, n in counts.items() if n is not None}
    first = next(iter(known.values()), None)
    if any(n != first for n in known.values()):
        listed = ", ".join(f"{source} {n!r}" for source, n in known.items())
        raise damaged(folder, f"{what} counts", f"disagree ({listed})", build_hint)


def require_words(terms: int) -> None:
    """Refuse to build an index of no terms (every word a stop word, a single letter or another
    script): it could answer nothing, and would be refused as damaged on every open."""
    if not terms:
        raise OpenQAError("the corpus has no indexable words (only stop words, single characters or another "
                          "language's script?): nothing to index")


@contextmanager
def atomic_folder(final: Path) -> Iterator[Path]:
    """Yield a scratch folder that replaces ``final`` only if the block completes.

    An interrupted or failed build removes its scratch folder and leaves the old index intact.
    Before building, a previous index hidden by a killed swap is brought back and scratch folders
    of dead builds are removed; the swap itself holds the parent folder's lock, so a build that
    finishes while another swaps waits for it and then replaces its index.
    """
    final = Path(final)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file or a dangling link in the way, no permission, a name too long
        dangling = isinstance(exc.filename, str) and os.path.islink(exc.filename) and not os.path.exists(exc.filename)
        what = f"{exc.filename} is a link to {os.readlink(exc.filename)}, which is not there" if dangling else exc.strerror or str(exc)
        raise OpenQAError(f"cannot make the index folder {final.parent} ({what}): name another") from None
    with folder_lock(final.parent):  # under the lock: another build's swap never shows its name half-renamed
        if final.exists() and not final.is_dir():  # it would be hidden by the swap and never removed
            raise OpenQAError(f"{final} is a file, not an index folder: move it away, then build again")
        if final.is_symlink() and not final.exists():
            raise OpenQAError(f"{final} is a symbolic link to {os.readlink(final)}, which does not exist: remove the link, "
                              "then build again")
        _tidy(final)
    scratch = _hidden(final, BUILDING, f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}")
    try:
        scratch.mkdir()  # inside the try: a Ctrl-C just after the folder appears removes it too
        yield scratch
        with folder_lock(final.parent), interrupts_held():  # a Ctrl-C between the renames waits for both
            retired = _hidden(final, OLD, str(time.time_ns()))
            if final.exists():
                final.rename(retired)
            scratch.rename(final)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    with interrupts_held():  # a Ctrl-C now would leave the old index's copy behind: it waits for the removal
        shutil.rmtree(retired, ignore_errors=True)


def recover(final: Path) -> None:
    """Bring back the index a swap hid as ``.NAME.old-*`` if it was killed before the index's
    new version took its name (a no-op, without locking, when ``final`` exists)."""
    final = Path(final)
    if final.exists() or not _siblings(final, OLD):
        return
    with folder_lock(final.parent):
        _restore(final)


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``folder`` (``flock`` on the folder itself, so no lock file is
    left behind; released if the process dies), waiting at most ``LOCK_TIMEOUT_S``."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        holder = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if holder is None:  # say at once who is waited for, and for how long at most
                    holder = lock_holder(folder)
                    log.warning(f"{folder} is locked by {holder}: waiting up to {LOCK_TIMEOUT_S:.0f} s for it")
                if time.monotonic() > deadline:
                    raise OpenQAError(
                        f"{folder} stayed locked by {holder} for {LOCK_TIMEOUT_S:.0f} s: "
                        "let it finish (or stop it) and try again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def lock_holder(folder: Path) -> str:
    """Who holds the ``flock`` of ``folder``: "process PID on HOST (its command line)" as Linux's
    ``/proc/locks`` tells, else "another process" (another system, or one whose lock is not listed)."""
    try:
        info = os.stat(folder)
        device = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            pids = [fields[fields.index(device) - 1] for fields in map(str.split, locks)
                    if device in fields and "FLOCK" in fields and "->" not in fields]
    except (OSError, ValueError):
        pids = []
    if not pids or not pids[0].isdigit():
        return "another process"
    try:
        with open(f"/proc/{pids[0]}/cmdline", "rb") as handle:
            args = [Path(a).name if i == 0 else a for i, a in enumerate(handle.read().decode(errors="replace").split("\0")[:-1])]
    except OSError:
        args = []
    command = f" ({' '.join(' '.join(args).split())[:120]})" if args else ""  # one line, even for `python -c` code
    return f"process {pids[0]} on {socket.gethostname()}{command}"


def _hidden(final: Path, kind: str, suffix: str) -> Path:
    """The hidden sibling ``.NAME.<kind>-<suffix>`` of an index folder."""
    return final.with_name(f".{final.name}.{kind}-{suffix}")


def _siblings(final: Path, kind: str) -> list[tuple[Path, str]]:
    """Hidden ``kind`` folders beside ``final``, with their suffixes (none if the parent is missing)."""
    prefix = f".{final.name}.{kind}-"
    try:
        entries = list(final.parent.iterdir())
    except FileNotFoundError:
        return []
    return [(path, path.name[len(prefix):]) for path in entries if path.name.startswith(prefix) and path.is_dir()]


def _restore(final: Path) -> None:
    """With the lock held: if ``final`` is missing, rename the newest retired copy holding a
    manifest back to it."""
    if final.exists():
        return
    complete = [(int(suffix), path) for path, suffix in _siblings(final, OLD)
                if suffix.isdigit() and (path / MANIFEST).is_file()]
    if complete:
        max(complete)[1].rename(final)


def _tidy(final: Path) -> None:
    """With the lock held: restore a hidden index, then remove retired copies (once ``final``
    exists nothing is mid-swap) and scratch folders whose builder on this host has died."""
    _restore(final)
    if final.exists():
        for path, _ in _siblings(final, OLD):
            shutil.rmtree(path, ignore_errors=True)
    for path, suffix in _siblings(final, BUILDING):
        if not _builder_alive(suffix):
            shutil.rmtree(path, ignore_errors=True)


def _builder_alive(suffix: str) -> bool:
    """Whether the build owning a scratch folder named ``...building-<host>-<pid>-<ns>`` may still
    run: only a process of this host that no longer exists counts as dead (names from before
    host and pid were recorded, or from other hosts, are left alone)."""
    parts = suffix.rsplit("-", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname() or not parts[1].isdigit():
        return True
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True
