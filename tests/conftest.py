"""Shared pytest fixtures. The helpers they build on are in ``tests/helpers.py`` (data, the console
script, waits) and ``tests/servers.py`` (``openqa serve``); no test module imports another.

Tests that start processes (the console script, a server, a browser, pip) carry the ``spawns``
marker (on each such test); ``pytest -m "not spawns"`` runs the in-process tests alone."""

import os
import signal
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.helpers import HANG_S, make_data_dir, run


@pytest.fixture(scope="session")
def medqa_dir() -> Path:
    """The shared MedQA data_clean folder (OPENQA_DATA, else ../shared/medqa/data_clean); skips when absent."""
    env = os.environ.get("OPENQA_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "medqa" / "data_clean"
    if not path.is_dir():
        pytest.skip(f"MedQA data not found at {path} (set OPENQA_DATA)")
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A tiny site whose English custom index ``openqa index`` built: (root, data, indexes); its
    location flags are ``helpers.loc(built)``."""
    root = tmp_path_factory.mktemp("cli")
    data = make_data_dir(root)
    indexes = root / "indexes"
    result = run("index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes))
    assert result.returncode == 0, result.stderr
    return root, data, indexes


@pytest.fixture(scope="module")
def indexed(tmp_path_factory) -> list[str]:
    """Location flags of a data folder and its custom index, built in this process."""
    from openqa.cli import main

    root = tmp_path_factory.mktemp("indexed")
    data, indexes = make_data_dir(root), root / "indexes"
    assert main(["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes)]) == 0
    return ["--data-dir", str(data), "--index-dir", str(indexes)]


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in this process, however the test run was started (a run
    started in the background by a script ignores SIGINT)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def openqa_serve() -> Iterator[Callable[..., tuple[subprocess.Popen, str]]]:
    """Start ``openqa serve`` as a process: ``openqa_serve(*args, cwd=..., command=...)`` returns the
    process and its URL once ``/v1/health`` answers (``servers.start_serve``); any still running at
    the end of the test is killed."""
    from tests.servers import start_serve

    started: list[subprocess.Popen] = []

    def start(*args: str, **kwargs) -> tuple[subprocess.Popen, str]:
        process, url = start_serve(*args, **kwargs)
        started.append(process)
        return process, url

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=HANG_S)
