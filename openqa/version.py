"""Which openqa made a record: the package version and, when it runs from a git checkout, the
commit (every record, index manifest and benchmark carries both, so a figure can be traced to code)."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=1)
def commit() -> str | None:
    """The commit of the git checkout openqa runs from (``+dirty`` when its files differ from it),
    or None for an installed openqa (or where git is missing)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "openqa"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def version_record() -> dict[str, Any]:
    """Which openqa wrote a record: its version and, run from a checkout, the commit."""
    from openqa import __version__

    return {"openqa_version": __version__, "commit": commit()}
