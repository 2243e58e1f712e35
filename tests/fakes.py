"""Stand-ins the engine tests share: a tiny corpus as paragraphs, a deterministic bag-of-words
encoder for the dense engine, and the Elasticsearch-compatible emulator ``noida-db`` started on a
free loopback port."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess

import numpy as np
import pytest

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.retrieval.base import EngineOptions
from openqa.retrieval.elastic import ElasticBM25, connect
from openqa.retrieval.encoders import Encoder
from openqa.text.tokenize import EnglishTokenizer
from tests.helpers import BOOKS, free_port, wait_until

PARAGRAPHS = [Paragraph(f"{book}:{i}", book, t) for book, texts in BOOKS.items() for i, t in enumerate(texts)]
CORPUS = {"lang": "en", "corpus_checksum": "abc"}


class BagOfWordsEncoder(Encoder):
    """Deterministic: each word hashes to one of ``dim`` buckets; vectors are unit-normalised."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        for w in EnglishTokenizer().tokenize(text):
            v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1
        return v / max(np.linalg.norm(v), 1e-9)

    def encode_queries(self, texts):
        return np.stack([self._vec(t) for t in texts])

    def encode_passages(self, texts, batch_size=64):
        self.calls += 1
        return np.stack([self._vec(t) for t in texts])

    def config(self):
        return {"backend": "fake", "model": "bag-of-words", "dim": self.dim}


def start_emulator(data_dir) -> tuple[subprocess.Popen, str]:
    """Start a noida-db server on a free loopback port and wait until it answers (skips when absent)."""
    exe = shutil.which("noida-db") or os.path.join(os.path.dirname(os.sys.executable), "noida-db")
    if not os.path.exists(exe):
        pytest.skip("noida-db (ES emulator) not installed")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "start", "--only", "elasticsearch", "--elasticsearch-port", str(port), "--data-dir", str(data_dir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,  # its own process group
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url), "noida-db answered", seconds=30, every=0.3, alive=lambda: proc.poll() is None)
    except AssertionError:
        stop_emulator(proc, signal.SIGKILL)
        pytest.skip("noida-db did not start")
    return proc, url


def answers(url: str) -> bool:
    try:
        connect(url)
    except OpenQAError:
        return False
    return True


def stop_emulator(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Stop the launcher and the server it started (its own process group)."""
    os.killpg(proc.pid, sig)
    proc.wait(timeout=10)


def roundtrip(url: str, folder) -> ElasticBM25:
    ElasticBM25.build(folder, PARAGRAPHS, EnglishTokenizer(), {"lang": "en", "corpus_checksum": "abc"}, EngineOptions(connection=url))
    return ElasticBM25.load(folder, {"corpus_checksum": "abc"}, "hint")
