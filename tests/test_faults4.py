"""Faults, fourth round: an output path never replaces what is not a regular file, topics files read
as people write them, lone surrogates, ensemble parts and a tune that lands whole or not at all."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.helpers import site_env
from tests.test_calibration import run as run_env
from tests.test_cli import built, loc, run  # noqa: F401  (the tiny site's fixture)

TOPICS = "q1\tceftriaxone cell wall synthesis\nq2\taspirin cyclooxygenase\n"


def test_an_output_that_is_a_fifo_a_device_or_a_link_is_written_through(built, tmp_path):  # noqa: F811
    topics = tmp_path / "topics.tsv"
    topics.write_text(TOPICS)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so writing through does not wait
    done = run("search", "--topics", str(topics), "--output", str(fifo), "-k", "2", *loc(built))
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and b"q1 Q0 Micro:1 1 " in os.read(reader, 1 << 16)
    os.close(reader)
    device = tmp_path / "null"  # a character device made in the scratch folder: /dev/null's numbers
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    done = run("search", "--topics", str(topics), "--output", str(device), *loc(built))
    assert done.returncode == 0 and stat.S_ISCHR(os.stat(device).st_mode), done.stderr
    target, link = tmp_path / "real.trec", tmp_path / "link.trec"
    link.symlink_to(target)
    done = run("search", "--topics", str(topics), "--output", str(link), "-k", "1", *loc(built))
    assert done.returncode == 0 and link.is_symlink() and target.read_text().startswith("q1 Q0 Micro:1 1 ")
    assert json.loads((tmp_path / "real.trec.json").read_text())["params"]["kq"] == 0.4  # the settings beside the run
    for output, message in ((tmp_path, "is a folder: name a file to write"), (topics, "is the topics file itself")):
        done = run("search", "--topics", str(topics), "--output", str(output), *loc(built))
        assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1
    done = run("search", "--topics", str(topics), "--output", "-", "-k", "1", *loc(built))
    assert done.returncode == 0 and done.stdout.startswith("q1 Q0 Micro:1 1 ")
    done = run("search", "--topics", str(topics), "--json", *loc(built))
    assert done.returncode == 2 and "--topics writes a TREC run (leave out --json)" in done.stderr


@pytest.mark.parametrize("content, outcome", [
    ("\ufeffq1\taspirin\n", {"q1"}),  # a byte-order mark is not part of the first id
    ("qid\tquery\nq1\taspirin\n", {"q1"}),  # a header line is not a topic
    ('{"id": "q1", "text": "aspirin"}\nq2\tcell wall\n', "a line that is not a JSON object in a JSON-lines topics file"),
    ('{"id": "q1", "text": 5}\n', "the query of topic 'q1' is a JSON int, not text"),
    ('{"id": 1.5, "text": "aspirin"}\n', "the topic id 1.5 is a JSON float"),
    ('{"id": "q\\ud800", "text": "aspirin"}\n', "lone surrogate"),
])
def test_topics_files_as_people_write_them(built, tmp_path, content, outcome):  # noqa: F811
    topics = tmp_path / "topics.tsv"
    topics.write_text(content, encoding="utf-8")
    done = run("search", "--topics", str(topics), "-k", "1", *loc(built))
    if isinstance(outcome, set):
        assert done.returncode == 0 and {line.split()[0] for line in done.stdout.splitlines()} == outcome, done.stderr
    else:
        assert done.returncode == 2 and outcome in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_a_corpus_text_with_a_lone_surrogate_is_a_file_line_error(tmp_path):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "a", "title": "T", "text": "cell wall"}\n{"id": "b", "title": "T", "text": "x\\ud800y"}\n')
    done = run("index", "--lang", "en", "--corpus", str(corpus), "--index-dir", str(tmp_path / "ix"))
    assert done.returncode == 2 and "passages.jsonl:2: not valid JSON (a lone surrogate escape" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "ix" / "en-custom-passages").exists()


@pytest.mark.parametrize("parts, message", [
    ("", "--parts names no method"), (",", "--parts names no method"),
    ("ir-custom,pmi:top_n=3", "ensemble part 'pmi:top_n=3': pmi has no setting top_n"),
    ("ir-custom,pmi,ir-custom", "ensemble part 'ir-custom' is named twice in --parts"),  # once failed after the fit, blaming the record
])
def test_impossible_ensemble_parts_are_refused(built, parts, message):  # noqa: F811
    done = run("tune", "--method", "ensemble", "--dataset", "us", "--parts", parts, *loc(built),
               "--settings-dir", str(built[0] / "tuned-parts"))
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_a_failed_tune_leaves_its_old_settings_and_a_mismatched_pair_is_refused(tmp_path):
    env = site_env(tmp_path)
    assert run_env("tune", "--method", "ir-custom", "--dataset", "us", env=env).returncode == 0
    settings, calibration = tmp_path / "tuned" / "ir-custom-us.json", tmp_path / "tuned" / "ir-custom-us.calibration.json"
    before = settings.read_bytes(), calibration.read_bytes()
    calibration.chmod(0o444)  # the calibration cannot be replaced: the tune fails after writing its settings
    (tmp_path / "tuned").chmod(0o555)
    try:
        failed = run_env("tune", "--method", "ir-custom", "--dataset", "us", env=env)
    finally:
        (tmp_path / "tuned").chmod(0o755)
    if os.geteuid() != 0:  # root writes through permissions: the failure cannot be provoked this way
        assert failed.returncode != 0 and (settings.read_bytes(), calibration.read_bytes()) == before
    record = json.loads(settings.read_text())
    record["chosen"]["top_n"] = 3  # the settings changed after their calibration was fitted
    settings.write_text(json.dumps(record))
    done = run_env("eval", "--dataset", "us", "--split", "dev", env=env)
    assert done.returncode == 2 and "ir-custom-us.calibration.json was fitted with other settings than ir-custom-us.json" in done.stderr


#: The console script, with a Ctrl-C arriving as its command's modules load (where the fault suite's
#: interruptions found it, on a busy machine): an import hook raises it when openqa.config is imported.
CTRL_C_WHILE_LOADING = """
import sys
class CtrlC:
    def find_spec(self, name, path, target=None):
        if name == "openqa.config":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
from openqa.cli import main
sys.exit(main())
"""


def test_a_ctrl_c_while_the_command_loads_is_an_interruption_not_a_traceback():
    done = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_LOADING, "--help"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (130, "openqa: interrupted\n")


def test_a_second_tune_replaces_the_pair_the_first_wrote(tmp_path):
    """Tuning again into the same settings folder (other settings: here a --limit) used to fail after
    its work, opening the method with the calibration it was replacing, which no longer matched."""
    env = site_env(tmp_path)
    for method in ("ir-custom", "ensemble"):
        tune = ["tune", "--method", method, "--dataset", "us", *(["--parts", "ir-custom,ir-custom:top_n=1"] if method == "ensemble" else [])]
        assert run_env(*tune, env=env).returncode == 0
        again = run_env(*tune, "--limit", "1", env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads((tmp_path / "tuned" / f"{method}-us.calibration.json").read_text())["dev"]["n"] == 1
        done = run_env("eval", "--method", method, "--dataset", "us", "--split", "dev", env=env)
        assert done.returncode == 0, done.stderr


def test_offset_and_limit_score_a_slice_under_its_own_name(built, tmp_path):  # noqa: F811
    whole = run("eval", "--dataset", "us", "--split", "dev", "--output", str(tmp_path), "--json", *loc(built))
    second = run("eval", "--dataset", "us", "--split", "dev", "--offset", "1", "--limit", "1", "--output", str(tmp_path), "--json",
                 *loc(built))
    assert whole.returncode == 0 and second.returncode == 0, second.stderr
    rows = (tmp_path / "us-dev-ir-custom.predictions.jsonl").read_text().splitlines()
    assert json.loads(second.stdout)["n"] == 1 and json.loads(second.stdout)["variant"] == "from1"
    assert (tmp_path / "us-dev-ir-custom-from1-limit1.predictions.jsonl").read_text().splitlines() == rows[1:2]
    bad = run("eval", "--dataset", "us", "--offset", "-1", *loc(built))
    assert bad.returncode == 2 and "--offset must be 0 or more" in bad.stderr


def test_smaller_refusals_name_what_is_wrong(built, tmp_path):  # noqa: F811
    root, data, indexes = built
    passwd = tmp_path / "passwd"
    passwd.write_text("not a folder\n")
    done = run("search", "aspirin", "--data-dir", str(data), "--index-dir", str(passwd))
    assert done.returncode == 2 and f"the index folder {passwd} (--index-dir) is a file, not a folder" in done.stderr
    links = tmp_path / "ix"
    links.mkdir()
    (links / "en-custom").symlink_to(tmp_path / "gone")
    done = run("index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(links))
    assert done.returncode == 2 and "is a symbolic link to" in done.stderr and "which does not exist" in done.stderr
    twice = tmp_path / "twice.jsonl"
    twice.write_text('{"id": "a", "title": "T", "text": "x"}\n{"id": "a", "title": "T", "text": "y"}\n')
    done = run("corpus", "stats", "--lang", "en", "--corpus", str(twice))
    assert done.returncode == 2 and "twice.jsonl:2: id 'a' was already used on an earlier line" in done.stderr
    csv = tmp_path / "mmlu.csv"
    csv.write_text('What is it?,a,b,c,d,A\n"Which drug,a,b,c,d,B\nLast,a,b,c,d,C\n')
    done = run("eval", "--questions", str(csv), *loc(built))
    assert done.returncode == 2 and "mmlu.csv:2: a quoted field is not closed" in done.stderr
    settings = tmp_path / "tuned"
    settings.mkdir()
    (settings / "ir-custom-us.json").write_text(json.dumps({"chosen": {"top_n": -1}}))
    done = run("eval", "--dataset", "us", "--settings-dir", str(settings), *loc(built))
    assert done.returncode == 2 and "ir-custom-us.json: unreadable tuning record" in done.stderr and "--top-n" not in done.stderr
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "replies.sqlite").write_bytes(b"not a database at all" * 100)
    from openqa.errors import OpenQAError
    from openqa.llm.cache import ReplyCache

    with pytest.raises(OpenQAError, match="replies.sqlite is not a reply cache"):
        ReplyCache(cache)


def test_a_request_with_two_body_framings_is_refused_and_its_connection_closed(tmp_path):
    """Content-Length with Transfer-Encoding (request smuggling): one 400, then the connection closes,
    so the request hidden in the body is never served."""
    import socket
    import time

    from openqa.serve.app import create_app
    from openqa.serve.engines import limits
    from tests.test_serve import running, tiny_engines

    assert limits("ensemble").max_chars == limits("pmi").max_chars  # its PMI part's cap: never a request that cannot finish
    engines = tiny_engines(tmp_path, ["ir-custom"])
    try:
        with running(create_app(engines)) as url:
            hidden = b"0\r\n\r\nGET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            head = (b"POST /v1/answer HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(hidden))
            with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=10) as client:
                client.sendall(head + hidden)
                received, deadline = b"", time.monotonic() + 10
                while time.monotonic() < deadline:
                    chunk = client.recv(65536)
                    if not chunk:
                        break  # closed by the server
                    received += chunk
            assert received.startswith(b"HTTP/1.1 400") and received.count(b"HTTP/1.1 ") == 1
            assert b"both Content-Length and Transfer-Encoding" in received
    finally:
        engines.close()
