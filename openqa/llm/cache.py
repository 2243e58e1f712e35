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

from openqa.errors import OpenQAError

CACHE_FILE = "replies.sqlite"


def reply_key(model: dict[str, Any], messages: list[dict[str, str]], request: dict[str, Any]) -> str:
    """SHA-256 of the model's identity, the messages and the request (scoring, sampling, reply length)."""
    blob = json.dumps({"model": model, "messages": messages, "request": request}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ReplyCache:
    """Replies by key in ``folder/replies.sqlite``; safe to use from several threads.

    :param folder: the cache's folder (made if missing).
    :raises OpenQAError: on a folder that cannot be written or a file that is not a reply cache (one line)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / CACHE_FILE
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
            raise OpenQAError(f"cannot use the reply cache {self.path} ({exc}); give a writable --cache-dir") from None
        self._lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        """The cached reply under ``key``, or None."""
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, reply: dict[str, Any]) -> None:
        """Keep ``reply`` under ``key`` (committed at once)."""
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (key, json.dumps(reply, ensure_ascii=False)))

    def __len__(self) -> int:
        with self._lock:
            return cast(int, self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0])
