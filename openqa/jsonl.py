"""JSON lines from files people give (question files, JSONL corpora), read so that no input ends in
a traceback or runs out of memory: lines are read one at a time up to a size limit, and what
``json`` raises besides its decoding error (nesting past the recursion limit, an integer of
thousands of digits) is reported like a decoding error."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from functools import partial
from pathlib import Path
from typing import Any, Iterator

from openqa.errors import DataError


def numbered_lines(path: Path, max_bytes: int, what: str) -> Iterator[tuple[int, bytes]]:
    """The raw lines of ``path`` with their numbers (from 1). A line over ``max_bytes`` (``/dev/zero``
    has one endless line) or a file that cannot be read is a ``DataError`` naming it as not ``what``.
    A FIFO that no program writes to reads as empty instead of waiting for a writer forever. A
    ``.gz`` file is read through gzip (a damaged one is a ``DataError`` too)."""
    if path.name.endswith(".gz"):
        yield from _gzip_lines(path, max_bytes, what)
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO waits for a writer unless non-blocking
        os.set_blocking(fd, True)  # then wait for what a writer sends, as usual
        with open(fd, "rb") as handle:
            for number, raw in enumerate(iter(partial(handle.readline, max_bytes + 1), b""), start=1):
                if len(raw) > max_bytes:
                    raise DataError(f"{path}:{number}: line longer than {max_bytes:,} bytes: not {what}")
                yield number, raw.removeprefix(BOM) if number == 1 else raw
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_small(path: Path, max_bytes: int, what: str) -> bytes:
    """The whole of ``path``, a regular file of at most ``max_bytes``, else a ``DataError`` naming it
    as not ``what``: a FIFO, a device (``/dev/zero``, ``/dev/urandom`` never end), a folder or a file
    too big is refused before it is read, so nothing waits for a writer or fills the memory."""
    import stat

    from openqa.arguments import named

    shown = named(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO would wait for a writer at the open itself
    except OSError as exc:
        raise DataError(f"{shown}: cannot read it as {what} ({exc.strerror or exc})") from None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode) or status.st_size > max_bytes:
        os.close(fd)
        why = "not a regular file" if not stat.S_ISREG(status.st_mode) else f"{status.st_size:,} bytes; one is at most {max_bytes:,}"
        raise DataError(f"{shown}: not {what} ({why})")
    with open(fd, "rb") as handle:
        try:
            data = handle.read(max_bytes + 1)  # the file may have grown since
        except OSError as exc:
            raise DataError(f"{shown}: cannot read it as {what} ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise DataError(f"{shown}: not {what} (over {max_bytes:,} bytes)")
    return data


def _gzip_lines(path: Path, max_bytes: int, what: str) -> Iterator[tuple[int, bytes]]:
    """``numbered_lines`` of a gzip-compressed file."""
    try:
        with gzip.open(path, "rb") as handle:
            for number, raw in enumerate(iter(partial(handle.readline, max_bytes + 1), b""), start=1):
                if len(raw) > max_bytes:
                    raise DataError(f"{path}:{number}: line longer than {max_bytes:,} bytes: not {what}")
                yield number, raw
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise DataError(f"{path}: cannot read as gzip ({exc}): not {what}") from None


#: The byte-order mark some editors put at the start of a UTF-8 file: never part of its first line.
BOM = b"\xef\xbb\xbf"


def has_lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a lone surrogate (``"\\ud800"``: an escape JSON allows
    that names no character, which UTF-8 cannot encode), anywhere inside it."""
    if isinstance(value, str):
        return any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(map(has_lone_surrogate, value))
    return False


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s ``object_pairs_hook``: an object, refused (ValueError) when a key repeats, since
    ``json`` would keep the last value and silently drop the others (an option, a question)."""
    record = dict(pairs)
    if len(record) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"key {key!r} repeated in one object")
            seen.add(key)
    return record


def text_line(where: str, raw: bytes) -> str:
    """A raw line as text without its line break, or a ``DataError`` at ``where`` (``file:line``)
    when it is not UTF-8."""
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def decode(line: str) -> Any:
    """One JSON value; a ValueError saying in a few words what is wrong with it otherwise (a key
    repeated in one object included)."""
    try:
        value = json.loads(line, object_pairs_hook=unique_keys)
        if "\\u" in line and has_lone_surrogate(value):  # only an escape can make one
            raise ValueError("a lone surrogate escape (\\ud800-\\udfff) names no character")
        return value
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:  # e.g. an integer past sys.get_int_max_str_digits()
        raise ValueError(str(exc).split(";")[0]) from None


def decode_at(where: str, line: str) -> Any:
    """``decode`` of a file's line, a ``DataError`` at ``where`` (``file:line``) when it is not JSON."""
    try:
        return decode(line)
    except ValueError as exc:
        raise DataError(f"{where}: not valid JSON ({exc})") from None


def readable(value: Any, indent: int = 2, level: int = 0) -> str:
    """``value`` as JSON for people and diffs: objects one key a line, indented, but a list of plain
    values (numbers, strings, booleans, null, or such lists: a calibration's thousands of dev
    confidences, its bins) on one line, as ``json.dumps`` would write it compactly."""
    if isinstance(value, dict) and value:
        inner = " " * (indent * (level + 1))
        items = ",\n".join(f"{inner}{json.dumps(str(k))}: {readable(v, indent, level + 1)}" for k, v in value.items())
        return "{\n" + items + "\n" + " " * (indent * level) + "}"
    if isinstance(value, list) and value and not _plain(value):
        inner = " " * (indent * (level + 1))
        return "[\n" + ",\n".join(inner + readable(v, indent, level + 1) for v in value) + "\n" + " " * (indent * level) + "]"
    return json.dumps(value)


def _plain(value: Any) -> bool:
    """Whether ``value`` holds no object: a scalar, or a list of plain values."""
    return not isinstance(value, dict) and (not isinstance(value, list) or all(_plain(v) for v in value))
