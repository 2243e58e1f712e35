"""What commands write: result files and settings land whole or not at all (a failed or interrupted
write leaves the old files and no temporary, concurrent writers never share one, a full disk leaves
nothing), a tune's settings and calibration stay a matching pair, a slice of a split is written
under its own name, and an output path that is a FIFO, a device or a symbolic link is written
through, never replaced."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from openqa import OpenQAError, read_result_set
from openqa.cli import main
from openqa.evaluate import results as results_module
from openqa.evaluate.results import write_all_or_none
from openqa.retrieval import manifest as manifest_module
from openqa.retrieval.manifest import folder_lock
from openqa.tuning import load_calibration
from tests.helpers import OPENQA, failures_in_threads, loc, run, site_env, write_run

TOPICS = "q1\tceftriaxone cell wall synthesis\nq2\taspirin cyclooxygenase\n"


def result_set(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_write_that_fails_leaves_the_old_files_and_no_temporary(tmp_path, monkeypatch):
    old = {tmp_path / "a.json": "old a", tmp_path / "b.md": "old b"}
    write_all_or_none(old)
    before = result_set(tmp_path)
    write_text = Path.write_text
    for failure in (KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device")):
        calls = []

        def second_write_fails(self, *args, failure=failure, calls=calls, **kwargs):
            calls.append(self)
            if len(calls) == 2:
                write_text(self, "half")  # the disk took part of it
                raise failure
            return write_text(self, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", second_write_fails)
        with pytest.raises(type(failure)):
            write_all_or_none({path: "new" for path in old})
        monkeypatch.undo()
        assert result_set(tmp_path) == before  # nothing new, no hidden .tmp


def test_a_result_summary_is_read_only_with_the_files_it_was_written_with(tmp_path):
    (tmp_path / "r.md").write_text("report")
    summary = {"dataset": "us", "split": "dev", "method": "m", "accuracy": 50.0, "command": "openqa eval",
               "result_files": {"r.md": hashlib.sha256(b"report").hexdigest()}}
    (tmp_path / "r.json").write_text(json.dumps(summary))
    assert read_result_set(tmp_path / "r.json") == summary
    assert read_result_set(str(tmp_path / "r.json")) == summary
    (tmp_path / "r.md").write_text("a later run's report")
    with pytest.raises(OpenQAError, match=r"r\.md: missing or from another run than r\.json; rerun: openqa eval"):
        read_result_set(tmp_path / "r.json")
    hostile = {"list.json": "[1, 2]", "names.json": json.dumps({"result_files": ["r.md"]}),
               "outside.json": json.dumps({"result_files": {"../r.md": "0"}}), "broken.json": "{"}
    for name, text in hostile.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(OpenQAError, match=r"not a result summary openqa wrote|unreadable result summary"):
            read_result_set(tmp_path / name)
    for bad in (None, 3, "", tmp_path / "nowhere.json", tmp_path):
        with pytest.raises(OpenQAError):
            read_result_set(bad)


def test_concurrent_writers_of_one_result_set_never_share_a_temporary(tmp_path):
    """Runs writing the same result names at once (5 of 180 failed after scoring) each have their own."""
    files = {tmp_path / name: "" for name in ("r.predictions.jsonl", "r.md", "r.json")}

    def writer(n: int) -> None:
        for i in range(30):
            write_all_or_none({path: f"{n}-{i}\n" * 200 for path in files})

    assert failures_in_threads(writer, 6) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in files)  # no temporary left


def test_a_full_disk_leaves_no_temporary_file(indexed, tmp_path, monkeypatch):
    out = tmp_path / "out"
    write_text = Path.write_text

    def disk_full(self, *args, **kwargs):
        if self.name.endswith(".tmp") and self.parent == out:
            write_text(self, "x")
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full)
    assert main(["eval", "--dataset", "us", "--split", "dev", "--output", str(out), *indexed]) == 1
    assert list(out.iterdir()) == []


def test_results_module_holds_no_signal_outside_the_main_thread(tmp_path):
    """In a worker thread (the server) the renames cannot hold signals, and need not: none runs there."""
    errors = []
    thread = threading.Thread(target=lambda: errors.append(results_module.write_atomic(tmp_path / "r.json", "{}")))
    thread.start()
    thread.join()
    assert errors == [None] and (tmp_path / "r.json").read_text() == "{}"


@pytest.mark.spawns
def test_an_output_that_is_a_fifo_a_device_or_a_link_is_written_through(built, tmp_path):
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


@pytest.mark.spawns
def test_offset_and_limit_score_a_slice_under_its_own_name(built, tmp_path):
    whole = run("eval", "--dataset", "us", "--split", "dev", "--output", str(tmp_path), "--json", *loc(built))
    second = run("eval", "--dataset", "us", "--split", "dev", "--offset", "1", "--limit", "1", "--output", str(tmp_path), "--json",
                 *loc(built))
    assert whole.returncode == 0 and second.returncode == 0, second.stderr
    rows = (tmp_path / "us-dev-ir-custom.predictions.jsonl").read_text().splitlines()
    assert json.loads(second.stdout)["n"] == 1 and json.loads(second.stdout)["variant"] == "from1"
    assert (tmp_path / "us-dev-ir-custom-from1-limit1.predictions.jsonl").read_text().splitlines() == rows[1:2]
    bad = run("eval", "--dataset", "us", "--offset", "-1", *loc(built))
    assert bad.returncode == 2 and "--offset must be 0 or more" in bad.stderr


@pytest.mark.spawns
def test_a_failed_tune_leaves_its_old_settings_and_a_mismatched_pair_is_refused(tmp_path):
    env = site_env(tmp_path)
    assert run("tune", "--method", "ir-custom", "--dataset", "us", env=env).returncode == 0
    settings, calibration = tmp_path / "tuned" / "ir-custom-us.json", tmp_path / "tuned" / "ir-custom-us.calibration.json"
    before = settings.read_bytes(), calibration.read_bytes()
    calibration.chmod(0o444)  # the calibration cannot be replaced: the tune fails after writing its settings
    (tmp_path / "tuned").chmod(0o555)
    try:
        failed = run("tune", "--method", "ir-custom", "--dataset", "us", env=env)
    finally:
        (tmp_path / "tuned").chmod(0o755)
    if os.geteuid() != 0:  # root writes through permissions: the failure cannot be provoked this way
        assert failed.returncode != 0 and (settings.read_bytes(), calibration.read_bytes()) == before
    record = json.loads(settings.read_text())
    record["chosen"]["top_n"] = 3  # the settings changed after their calibration was fitted
    settings.write_text(json.dumps(record))
    done = run("eval", "--dataset", "us", "--split", "dev", env=env)
    assert done.returncode == 2 and "ir-custom-us.calibration.json was fitted with other settings than ir-custom-us.json" in done.stderr


@pytest.mark.spawns
def test_a_second_tune_replaces_the_pair_the_first_wrote(tmp_path):
    """Tuning again into the same settings folder (other settings: here a --limit) used to fail after
    its work, opening the method with the calibration it was replacing, which no longer matched."""
    env = site_env(tmp_path)
    for method in ("ir-custom", "ensemble"):
        tune = ["tune", "--method", method, "--dataset", "us", *(["--parts", "ir-custom,ir-custom:top_n=1"] if method == "ensemble" else [])]
        assert run(*tune, env=env).returncode == 0
        again = run(*tune, "--limit", "1", env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads((tmp_path / "tuned" / f"{method}-us.calibration.json").read_text())["dev"]["n"] == 1
        done = run("eval", "--method", method, "--dataset", "us", "--split", "dev", env=env)
        assert done.returncode == 0, done.stderr


def tune_here(root: Path, monkeypatch, *args: str) -> int:
    """``openqa tune --method ir-custom --dataset us`` in this process over the tiny site in ``root``."""
    if not (root / "tuned").is_dir():
        for name, value in site_env(root).items():
            if name.startswith("OPENQA_"):
                monkeypatch.setenv(name, value)
    return main(["tune", "--method", "ir-custom", "--dataset", "us", *args])


def tuned_pair(root: Path) -> tuple[bytes, bytes]:
    """The settings and calibration ``openqa tune`` wrote, checked to match: the calibration's
    digest is that of the settings' bytes, and eval reads them."""
    settings = (root / "tuned" / "ir-custom-us.json").read_bytes()
    calibration = (root / "tuned" / "ir-custom-us.calibration.json").read_bytes()
    assert json.loads(calibration)["settings_sha256"] == hashlib.sha256(settings).hexdigest()
    assert load_calibration("ir-custom", "us", root / "tuned") is not None
    assert not [p.name for p in (root / "tuned").iterdir() if p.name.endswith((".tmp", ".staged"))]
    return settings, calibration


def test_a_ctrl_c_inside_the_write_of_a_tuned_pair_leaves_one_whole_pair(tmp_path, monkeypatch, capsys, ctrl_c):
    assert tune_here(tmp_path, monkeypatch) == 0
    before = tuned_pair(tmp_path)
    held = results_module.interrupts_held

    @contextlib.contextmanager
    def interrupted():  # a Ctrl-C lands while the files take their names: delivered once they have
        with held():
            signal.raise_signal(signal.SIGINT)
            yield

    monkeypatch.setattr(results_module, "interrupts_held", interrupted)
    capsys.readouterr()
    assert tune_here(tmp_path, monkeypatch, "--limit", "1") == 130
    after = tuned_pair(tmp_path)  # the new pair, whole (the old one used to lose its settings' match)
    assert after != before and json.loads(after[1])["dev"]["n"] == 1
    pair = [tmp_path / "tuned" / name for name in ("ir-custom-us.json", "ir-custom-us.calibration.json")]
    written = capsys.readouterr().err.splitlines()[-1]  # NL12: the stop said "interrupted" alone, as if nothing was written
    assert written == (f"openqa: interrupted, once {', '.join(map(str, pair))} had been written whole: the new "
                       "files are in place, not the old ones"), written

    real = Path.write_bytes

    def broken(self, data):  # a Ctrl-C while the second file is written: the old pair stays
        if ".calibration.json" in self.name:
            raise KeyboardInterrupt
        return real(self, data)

    monkeypatch.setattr(results_module, "interrupts_held", held)
    monkeypatch.setattr(Path, "write_bytes", broken)
    assert tune_here(tmp_path, monkeypatch) == 130
    monkeypatch.setattr(Path, "write_bytes", real)
    assert tuned_pair(tmp_path) == after
    assert capsys.readouterr().err.splitlines()[-1] == "openqa: interrupted"  # nothing new in place


def test_a_second_tune_of_a_pair_waits_for_the_lock_of_the_first(tmp_path, monkeypatch, capsys):
    assert tune_here(tmp_path, monkeypatch) == 0
    before = tuned_pair(tmp_path)
    lock = tmp_path / "tuned" / ".ir-custom-us.lock"
    monkeypatch.setattr(manifest_module, "LOCK_TIMEOUT_S", 0.0)
    with folder_lock(lock):  # another openqa tune of this method and dataset is writing the pair
        assert tune_here(tmp_path, monkeypatch, "--limit", "1") == 2
    err = capsys.readouterr().err
    assert f"openqa: error: {lock} stayed locked by process {os.getpid()}" in err, err
    assert tuned_pair(tmp_path) == before
    assert tune_here(tmp_path, monkeypatch, "--limit", "1") == 0 and tuned_pair(tmp_path) != before


def test_compare_never_writes_over_its_own_runs_and_writes_dash_to_standard_output(tmp_path, monkeypatch, capsys):
    runs = [str(write_run(tmp_path, name, right, n=4)) for name, right in (("a", {0, 1}), ("b", {0, 2, 3}))]
    (tmp_path / "link.md").symlink_to(tmp_path / "b.predictions.jsonl")
    before = result_set(tmp_path)
    monkeypatch.chdir(tmp_path)
    for output in ("a.json", str(tmp_path / "b.predictions.jsonl"), "a", "link.md", "./b"):  # "a" writes a.json beside a
        assert main(["compare", *runs, "--output", output]) == 2, output
        err = capsys.readouterr().err
        assert "one of the runs compared: name another file" in err and err.count("\n") == 1, err
    assert result_set(tmp_path) == before
    assert main(["compare", *runs, "--output", "-"]) == 0
    assert "| b.json | a.json |" in capsys.readouterr().out and result_set(tmp_path) == before  # no file named '-'
    assert main(["compare", *runs, "--output", "cmp.md"]) == 0
    assert (tmp_path / "cmp.md").is_file() and (tmp_path / "cmp.md.json").is_file()


def test_compare_never_replaces_another_eval_runs_record_or_files(tmp_path, monkeypatch, capsys):
    """NL1: an eval run not compared keeps its record and the files it names (its report here); the
    comparison written before may be replaced."""
    runs = [str(write_run(tmp_path, name, right, n=4)) for name, right in (("a", {0, 1}), ("b", {0, 2, 3}))]
    other = write_run(tmp_path, "c", {0}, n=4)
    (tmp_path / "c.md").write_text("# the report of run c\n")
    record = json.loads(other.read_text())
    record["result_files"]["c.md"] = hashlib.sha256(b"# the report of run c\n").hexdigest()
    other.write_text(json.dumps(record))
    assert read_result_set(other)
    monkeypatch.chdir(tmp_path)
    assert main(["compare", *runs, "--output", "cmp.md"]) == 0
    capsys.readouterr()
    before = result_set(tmp_path)
    for output, replaced in (("c", "c.json, the record of an eval run"), ("c.json", "c.json, the record of an eval run"),
                             ("c.md", "c.md, a file of the eval run c.json"),
                             ("c.predictions.jsonl", "c.predictions.jsonl, a file of the eval run c.json")):
        assert main(["compare", *runs, "--output", output]) == 2, output
        err = capsys.readouterr().err
        assert err.startswith(f"openqa: error: --output {output} would replace ") and err.endswith(
            f"{replaced}: name another file\n") and err.count("\n") == 1, err
    assert result_set(tmp_path) == before and read_result_set(other)
    assert main(["compare", *runs[::-1], "--output", "cmp.md"]) == 0  # its own earlier output
    assert result_set(tmp_path) != before and "| a.json | b.json |" in (tmp_path / "cmp.md").read_text()


@pytest.mark.spawns
@pytest.mark.parametrize("name", ["/dev/stdout", "/proc/self/fd/1", "link"])
def test_output_to_standard_output_writes_through_a_redirection_and_a_pipe(tmp_path, name):
    """NL10, NC1: standard output named as --output gets the tables once (they were printed twice),
    with no note naming /proc/<pid>/fd/pipe:[...]; with --json, which prints the record there, it is refused."""
    runs = [str(write_run(tmp_path, run_name, {0, 1}, n=4)) for run_name in ("a", "b")]
    (tmp_path / "link").symlink_to("/dev/stdout")
    output = str(tmp_path / "link") if name == "link" else name
    redirected = tmp_path / "out.md"
    redirected.write_text("before\n")
    inode = redirected.stat().st_ino
    with open(redirected, "a") as out:  # openqa compare ... --output NAME >> out.md
        done = subprocess.run([OPENQA, "compare", *runs, "--output", output], stdout=out, stderr=subprocess.PIPE, text=True,
                              timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = redirected.read_text()
    assert redirected.stat().st_ino == inode and text.startswith("before\n# us test: 2 runs on 4 common questions")
    assert text.count("# us test: 2 runs") == 1 and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.json", "a.predictions.jsonl", "b.json", "b.predictions.jsonl", "link", "out.md"]
    piped = subprocess.run([OPENQA, "compare", *runs, "--output", output], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
    assert piped.returncode == 0 and piped.stdout.count("# us test: 2 runs") == 1 and "wrote" not in piped.stderr, piped.stderr
    as_json = subprocess.run([OPENQA, "compare", *runs, "--output", output, "--json"], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
    assert as_json.returncode == 2 and not as_json.stdout and as_json.stderr == (
        f"openqa: error: --output {output} is standard output, where --json prints the record: name a file, or leave "
        "out one of them\n")
    to_stderr = subprocess.run([OPENQA, "compare", *runs, "--output", "/dev/stderr", "--json"], capture_output=True,
                               text=True, timeout=120, cwd=tmp_path)
    assert to_stderr.returncode == 0 and json.loads(to_stderr.stdout)["n"] == 4
    assert to_stderr.stderr.endswith("\nwrote /dev/stderr\n") and to_stderr.stderr.startswith("# us test"), to_stderr.stderr
