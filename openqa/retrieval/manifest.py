"""Index manifests (settings + corpus checksum) and atomic index folders.

Every index folder holds ``manifest.json``. Loading compares it with what the caller expects and
refuses a mismatch, so results never silently come from an index built another way.
"""

from __future__ import annotations

import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from openqa import __version__
from openqa.errors import IndexMismatchError, IndexMissingError, OpenQAError

MANIFEST = "manifest.json"


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` with the build time and package version added."""
    record = {**manifest, "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "openqa": __version__}
    (folder / MANIFEST).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def read_manifest(folder: Path, build_hint: str) -> dict[str, Any]:
    """Read an index's manifest; a missing or unreadable one says how to build the index."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise IndexMissingError(f"no index at {folder}: build it with `{build_hint}`")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise OpenQAError(f"{path}: unreadable manifest ({exc}); rebuild with `{build_hint}`") from None


def check_manifest(manifest: dict[str, Any], expected: dict[str, Any], folder: Path, build_hint: str) -> None:
    """Refuse an index whose recorded settings differ from ``expected`` (only keys given)."""
    diffs = [
        f"{key}={manifest.get(key)!r} (asked for {value!r})"
        for key, value in expected.items()
        if manifest.get(key) != value
    ]
    if diffs:
        raise IndexMismatchError(
            f"index at {folder} was built with other settings or corpus: {'; '.join(diffs)}; "
            f"rebuild with `{build_hint}`"
        )


@contextmanager
def atomic_folder(final: Path) -> Iterator[Path]:
    """Yield a scratch folder that replaces ``final`` only if the block completes.

    An interrupted or failed build removes its scratch folder and leaves the old index intact.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = final.with_name(f".{final.name}.building-{time.time_ns()}")
    scratch.mkdir()
    try:
        yield scratch
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    retired = final.with_name(f".{final.name}.old-{time.time_ns()}")
    if final.exists():
        final.rename(retired)
    scratch.rename(final)
    shutil.rmtree(retired, ignore_errors=True)
