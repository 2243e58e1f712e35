"""Every model reply kept on disk, keyed by model, prompt and sampling, so that a rerun makes no
model calls and an interrupted run resumes where it stopped (SQLite: each reply is committed as it
arrives, and a killed process never leaves a half-written entry)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, cast

from openqa import arguments as arg
from openqa.errors import OpenQAError, UsageError

CACHE_FILE = "replies.sqlite"


def reply_key(model: dict[str, Any], messages: list[dict[str, str]], request: dict[str, Any]) -> str:
    """SHA-256 of the model's identity, the messages and the request (scoring, sampling, reply length)."""
    blob = json.dumps({"model": model, "messages": messages, "request": request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ReplyCache:
    """Replies by key in ``folder/replies.sqlite``; safe to use from several threads. Keys are text
    (``reply_key``), replies JSON objects; anything else, and a cache used after ``close()``, is
    refused in one line.

    :param folder: the cache's folder (made if missing).
    :raises OpenQAError: on a folder that cannot be written or a file that is not a reply cache (one line)."""

    def __init__(self, folder: str | Path) -> None:
        given = arg.path("folder", folder)
        if given is None:
            raise UsageError("folder must name the reply cache's folder, not None")
        self.path = given / CACHE_FILE
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # cannot open or write it
                raise OpenQAError(f"cannot use the reply cache {self.path} ({exc}); give a writable --cache-dir") from None
            raise OpenQAError(f"{self.path} is not a reply cache ({exc}): move it away (the replies are asked again) "
                              "or give another --cache-dir") from None
        except OSError as exc:
            raise OpenQAError(f"cannot use the reply cache {self.path} ({exc.strerror or exc}); give a writable --cache-dir") from None
        self._lock = threading.Lock()

    def _execute(self, sql: str, parameters: tuple[str, ...] = ()) -> Any:
        """``sql`` run under the lock: its first row (None when none), or a one-line error when the
        cache is closed or its file cannot be read or written."""
        with self._lock:
            try:
                return self._db.execute(sql, parameters).fetchone()
            except sqlite3.ProgrammingError as exc:  # closed: sqlite3 says "Cannot operate on a closed database"
                raise OpenQAError(f"the reply cache {self.path} cannot be used ({exc}); open it again") from None
            except sqlite3.DatabaseError as exc:
                raise OpenQAError(f"cannot use the reply cache {self.path} ({exc}); give a writable --cache-dir") from None

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached reply under ``key``, or None."""
        row = self._execute("SELECT reply FROM replies WHERE key = ?", (_key(key),))
        if row is None:
            return None
        try:
            reply = json.loads(row[0])
        except (TypeError, ValueError):
            reply = None
        if not isinstance(reply, dict):
            raise OpenQAError(f"the reply cache {self.path} holds a damaged reply under {key[:80]!r}: move the cache away "
                              "(the replies are asked again)")
        return reply

    def put(self, key: str, reply: dict[str, Any]) -> None:
        """Keep ``reply`` (a JSON object) under ``key`` (committed at once)."""
        self._execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (_key(key), _json_object(reply)))

    def close(self) -> None:
        """Close the cache's file (later calls are refused in one line); closing twice does nothing."""
        with self._lock:
            self._db.close()

    def __len__(self) -> int:
        return cast(int, self._execute("SELECT COUNT(*) FROM replies")[0])


def _key(key: Any) -> str:
    """A cache key: text that SQLite can store (UTF-8, so no lone surrogate)."""
    arg.text("key", key)
    if not arg.encodable(key):
        raise UsageError(f"key must be UTF-8 text, not {arg.shown(key)}")
    return cast(str, key)


def _json_object(reply: Any) -> str:
    """``reply`` as JSON text, refused in one line unless it is a JSON object of UTF-8 text."""
    if not isinstance(reply, dict):
        raise UsageError(f"reply must be a dict (a JSON object), not {type(reply).__name__}")
    try:
        blob = json.dumps(reply, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UsageError(f"reply must hold only JSON values (text, finite numbers, lists, dicts): {arg.shown(exc)}") from None
    if not arg.encodable(blob):
        raise UsageError("reply must hold UTF-8 text (it holds a lone surrogate)")
    return blob
