"""Hostile input and faults: damaged index files are refused with one line naming the file and the
rebuild command, and index folders survive killed, stale and overlapping builds."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.retrieval import manifest as manifest_module
from openqa.retrieval.base import SearchEngine
from openqa.retrieval.custom_bm25 import CustomBM25
from openqa.retrieval.dense import DenseIndex
from openqa.retrieval.manifest import FILES, MANIFEST, atomic_folder, folder_lock, lock_holder
from openqa.retrieval.registry import build_hint, build_index, index_folder, open_index, tokenizer_config
from openqa.text.tokenize import EnglishTokenizer, make_tokenizer
from tests.fakes import CORPUS, PARAGRAPHS, BagOfWordsEncoder
from tests.helpers import OPENQA, failures_in_threads, make_data_dir, run, wait_until

#: Engines that write index files (Lucene's and Elasticsearch's are tested with their engines).
ENGINES = ("custom", "pmi", "dense", "word2vec")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """An index folder with each file-writing engine's index of the fixture corpus, built once."""
    root = tmp_path_factory.mktemp("faults")
    data = make_data_dir(root)
    indexes = root / "indexes"
    for engine in ("custom", "pmi", "word2vec"):
        build_index(data, indexes, "en", engine)
    DenseIndex.build(index_folder(indexes, "en", "dense"), PARAGRAPHS, EnglishTokenizer(), CORPUS, encoder=BagOfWordsEncoder())
    return indexes


@pytest.fixture
def indexes(pristine, tmp_path) -> Path:
    """A copy of the pristine indexes for one test to damage."""
    return Path(shutil.copytree(pristine, tmp_path / "indexes"))


def open_fully(indexes: Path, engine: str):
    """Open an index as the CLI does and read its paragraph store too (read only when first needed)."""
    if engine == "dense":  # the fake encoder cannot be named on the command line
        hint = build_hint("en", "dense", tokenizer_config("en", "dense"))
        index = DenseIndex.load(index_folder(indexes, "en", "dense"), {}, hint, encoder=BagOfWordsEncoder())
    else:
        index = open_index(indexes, "en", engine)
    if isinstance(index, SearchEngine):
        index.paragraphs[0]
    return index


def refused(engine: str, what: str):
    """Expect the one-line damaged-index error for ``engine``'s index; ``what`` is a regex of its middle."""
    return pytest.raises(OpenQAError, match=rf"index at .*en-{engine} is damaged: {what}; rebuild with `openqa index --lang en --engine {engine}`$")


def manifest_of(indexes: Path, engine: str) -> dict:
    return json.loads((index_folder(indexes, "en", engine) / MANIFEST).read_text())


def rewrite_manifest(indexes: Path, engine: str, manifest: object) -> None:
    (index_folder(indexes, "en", engine) / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("engine", ENGINES)
def test_every_written_file_is_recorded_and_checked(indexes, engine):
    folder = index_folder(indexes, "en", engine)
    records = manifest_of(indexes, engine)[FILES]
    assert sorted(records) == sorted(p.name for p in folder.iterdir() if p.name != MANIFEST)
    for name, record in records.items():
        path = folder / name
        original = path.read_bytes()
        assert record["bytes"] == len(original)
        path.write_bytes(original[:-1])
        with refused(engine, f"{name} has {len(original) - 1} bytes where {len(original)} were written"):
            open_fully(indexes, engine)
        path.write_bytes(b"")
        with refused(engine, f"{name} has 0 bytes where {len(original)} were written"):
            open_fully(indexes, engine)
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with refused(engine, f"{name} has changed since it was written \\(SHA-256 differs\\)"):
            open_fully(indexes, engine)
        path.unlink()
        with refused(engine, f"{name} is missing"):
            open_fully(indexes, engine)
        path.write_bytes(original)
    open_fully(indexes, engine)


def test_shuffled_vocabulary_is_refused(indexes):
    """Same size, same terms, other order: every term would score another term's row."""
    vocab = index_folder(indexes, "en", "custom") / "vocab.txt"
    terms = vocab.read_text().split("\n")[:-1]
    vocab.write_text("\n".join(reversed(terms)) + "\n")
    with refused("custom", "vocab.txt has changed since it was written \\(SHA-256 differs\\)"):
        open_index(indexes, "en", "custom")


@pytest.mark.parametrize(
    "manifest, what",
    [
        ("[1, 2]", "manifest.json holds a JSON list, not an object"),
        ('{"engine": "cus', "manifest.json is not valid JSON .*"),
        ('{"files": [1]}', "manifest.json has a malformed 'files' record"),
        ('{"files": {"../../etc/passwd": {"bytes": 1, "sha256": "x"}}}', "manifest.json has a malformed record for '../../etc/passwd'"),
        ('{"files": {"vocab.txt": {"bytes": "12"}}}', "manifest.json has a malformed record for 'vocab.txt'"),
    ],
)
def test_manifest_that_is_not_an_index_record(indexes, manifest, what):
    (index_folder(indexes, "en", "custom") / MANIFEST).write_text(manifest)
    with refused("custom", what):
        open_index(indexes, "en", "custom")


#: What a file cut in half is refused with, where it is read without error: counts that disagree.
#: (Every other file: "NAME cannot be read (the reader's error)".)
CUT_FILE = {
    "paragraphs.jsonl": r"store size counts disagree \(paragraphs\.jsonl \d+, paragraphs\.offsets\.npy \d+\)",
    "vocab.txt": r"term counts disagree \(vocab\.txt \d+, (weights\.)?indptr\.npy \d+, manifest\.json \d+\)",
}


@pytest.mark.parametrize("engine", ENGINES)
def test_index_without_file_records_opens_with_the_weaker_check(indexes, engine):
    """Indexes built before files were recorded still open; cut files still fail on one line
    (a parse error or counts that disagree), though a same-sized edit would go unnoticed."""
    manifest = manifest_of(indexes, engine)
    records = manifest.pop(FILES)
    rewrite_manifest(indexes, engine, manifest)
    open_fully(indexes, engine)
    folder = index_folder(indexes, "en", engine)
    for name in records:
        path = folder / name
        original = path.read_bytes()
        path.write_bytes(original[: len(original) // 2])
        with refused(engine, CUT_FILE.get(name, rf"{re.escape(name)} cannot be read \(\w+: .+\)")):
            open_fully(indexes, engine)
        path.write_bytes(original)


def test_cut_vocabulary_of_an_old_index_is_caught_by_counts(indexes):
    manifest = manifest_of(indexes, "custom")
    del manifest[FILES]
    rewrite_manifest(indexes, "custom", manifest)
    vocab = index_folder(indexes, "en", "custom") / "vocab.txt"
    terms = vocab.read_text().split("\n")[:-1]
    vocab.write_text("\n".join(terms[:-3]) + "\n")
    counts = f"term counts disagree \\(vocab.txt {len(terms) - 3}, weights.indptr.npy {len(terms)}, manifest.json {len(terms)}\\)"
    with refused("custom", counts):
        open_index(indexes, "en", "custom")


def test_files_over_the_hash_limit_rely_on_size_and_their_own_checks(indexes, monkeypatch):
    """Past ``HASH_LIMIT`` only sizes are compared on open; a raw array's header is still parsed
    and its entry counts compared (its data bytes are not read on open: that is the point)."""
    monkeypatch.setattr(manifest_module, "HASH_LIMIT", 0)
    folder = index_folder(indexes, "en", "custom")
    original = (folder / "weights.indices.npy").read_bytes()
    (folder / "weights.indices.npy").write_bytes(b"X" + original[1:])  # not the .npy magic string
    with refused("custom", "weights.indices.npy cannot be read \\(ValueError: .*\\)"):
        open_index(indexes, "en", "custom")
    (folder / "weights.indices.npy").write_bytes(original.replace(b"'<i4'", b"'<f4'", 1))  # the header's type
    with refused("custom", "weights arrays have the wrong shapes or types .*"):
        open_index(indexes, "en", "custom")
    (folder / "weights.indices.npy").write_bytes(original)
    indptr = folder / "weights.indptr.npy"
    ends = bytearray(indptr.read_bytes())
    ends[-4:] = (int.from_bytes(ends[-4:], "little") - 1).to_bytes(4, "little")  # the last row one entry short
    indptr.write_bytes(bytes(ends))
    with refused("custom", "weight entry counts disagree .*"):
        open_index(indexes, "en", "custom")


@pytest.mark.spawns
def test_cli_reports_a_damaged_index_on_one_line(indexes, tmp_path):
    weights = index_folder(indexes, "en", "custom") / "weights.data.npy"
    weights.write_bytes(weights.read_bytes()[:100])
    data = make_data_dir(tmp_path)
    result = run("eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data), "--index-dir", str(indexes))
    assert result.returncode == 2
    assert result.stderr.startswith("openqa: error: index at ") and "weights.data.npy has 100 bytes" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


# --- swapping index folders -------------------------------------------------------------------


def hidden(indexes: Path, name: str = "en-custom") -> list[str]:
    return sorted(p.name for p in indexes.iterdir() if p.name.startswith(f".{name}."))


def rebuild(indexes: Path) -> None:
    """Replace the custom index (6 paragraphs) by one of a single paragraph, as ``openqa index`` would."""
    corpus = {key: manifest_of(indexes, "custom")[key] for key in ("lang", "books", "corpus_checksum", "segmentation")}
    tokenizer = make_tokenizer(tokenizer_config("en", "custom"))
    CustomBM25.build(index_folder(indexes, "en", "custom"), [Paragraph("B:0", "B", "rash")], tokenizer, corpus)


def test_open_restores_the_index_hidden_by_a_killed_swap(indexes, monkeypatch):
    rename = Path.rename

    def killed_before_second_rename(self, target):
        if ".building-" in self.name:
            raise KeyboardInterrupt
        return rename(self, target)

    monkeypatch.setattr(Path, "rename", killed_before_second_rename)
    with pytest.raises(KeyboardInterrupt):
        rebuild(indexes)
    monkeypatch.undo()
    assert not index_folder(indexes, "en", "custom").exists()
    assert [name.rsplit("-", 1)[0] for name in hidden(indexes)] == [".en-custom.old"]
    assert open_index(indexes, "en", "custom").manifest["paragraphs"] == 6
    assert hidden(indexes) == []


def test_the_newest_complete_hidden_index_is_restored_and_the_rest_removed(indexes):
    final = index_folder(indexes, "en", "custom")
    for stamp in (100, 200):
        copy = shutil.copytree(final, indexes / f".en-custom.old-{stamp}")
        manifest = json.loads((copy / MANIFEST).read_text())
        (copy / MANIFEST).write_text(json.dumps({**manifest, "marker": stamp}))
    incomplete = indexes / ".en-custom.old-300"
    incomplete.mkdir()
    (incomplete / "weights.npz").write_bytes(b"half")
    shutil.rmtree(final)
    assert open_index(indexes, "en", "custom").manifest["marker"] == 200
    assert hidden(indexes) == [".en-custom.old-100", ".en-custom.old-300"]
    rebuild(indexes)
    assert hidden(indexes) == []


@pytest.mark.spawns
def test_a_build_removes_scratch_folders_of_dead_builds_only(indexes):
    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    names = {
        "dead": f".en-custom.building-{host}-{dead.pid}-1",
        "live": f".en-custom.building-{host}-{os.getpid()}-2",
        "other host": f".en-custom.building-elsewhere.example-{dead.pid}-3",
        "before pids were recorded": ".en-custom.building-4",
    }
    for name in names.values():
        (indexes / name).mkdir()
        (indexes / name / "weights.npz").write_bytes(b"partial")
    rebuild(indexes)
    assert hidden(indexes) == sorted(names[k] for k in ("live", "other host", "before pids were recorded"))
    assert open_index(indexes, "en", "custom").manifest["paragraphs"] == 1


def test_an_index_rebuilt_after_it_was_opened_is_not_called_damaged(indexes, tmp_path):
    """NL9: an index opened, then rebuilt from another corpus by another command, is sound; the
    opened one says to open it again, never that it is damaged nor to rebuild it (from the old corpus)."""
    opened = open_index(indexes, "en", "custom")
    data = make_data_dir(tmp_path / "other")
    (data / "textbooks" / "en" / "Extra.txt").write_text("\n\n".join(f"Paragraph {i} of another book about the kidney."
                                                                      for i in range(40)) + "\n")
    build_index(data, indexes, "en", "custom")
    with pytest.raises(OpenQAError) as caught:
        opened.paragraphs.many([0, 1])
    assert str(caught.value) == (f"index at {index_folder(indexes, 'en', 'custom')} was rebuilt since it was opened: "
                                 "open it again (rerun the command, restart the server)")
    assert open_index(indexes, "en", "custom").paragraphs[0]  # the new index is sound


def test_overlapping_builds_both_succeed_and_the_last_to_finish_wins(tmp_path):
    final = tmp_path / "en-custom"
    with atomic_folder(final) as first:
        (first / "who").write_text("first")
        with atomic_folder(final) as second:
            (second / "who").write_text("second")
        assert (final / "who").read_text() == "second"
    assert (final / "who").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["en-custom"]


def test_many_concurrent_builds_never_collide(tmp_path):
    final = tmp_path / "en-custom"

    def builds(who: int) -> None:
        for _ in range(20):  # the unlocked swap failed in every such run
            with atomic_folder(final) as scratch:
                (scratch / "who").write_text(str(who))

    assert failures_in_threads(builds, 4) == []
    assert (final / "who").read_text() in {"0", "1", "2", "3"}
    assert [p.name for p in tmp_path.iterdir()] == ["en-custom"]


def test_a_build_reads_its_index_name_under_the_lock_another_swap_holds(tmp_path, caplog):
    """A build checks what stands at the index's name (a folder, a file, a dangling link) only once it
    holds the folder's lock: unlocked, it could read the name between another build's two renames (gone
    in between), and call a folder a file; here a file appears while the lock is held, and is refused."""
    final = tmp_path / "en-custom"
    failures: list[BaseException] = []

    def build() -> None:
        try:
            with atomic_folder(final) as scratch:
                (scratch / "who").write_text("late")
        except OpenQAError as exc:
            failures.append(exc)

    with folder_lock(tmp_path):
        builder = threading.Thread(target=build)
        builder.start()
        wait_until(lambda: f"{tmp_path} is locked by" in caplog.text, "the build waits for the lock")
        final.write_text("not an index")
    builder.join(timeout=10)
    assert not builder.is_alive()
    assert [str(exc) for exc in failures] == [f"{final} is a file, not an index folder: move it away, then build again"]
    assert final.read_text() == "not an index" and sorted(p.name for p in tmp_path.iterdir()) == ["en-custom"]


def test_an_open_during_a_swap_waits_instead_of_restoring_the_old_index(indexes, caplog):
    """Between a swap's two renames the index name is briefly free; an open must not take it."""
    final = index_folder(indexes, "en", "custom")
    opened: list = []
    with folder_lock(indexes):
        final.rename(indexes / ".en-custom.old-1")  # the swap's first rename
        reader = threading.Thread(target=lambda: opened.append(open_index(indexes, "en", "custom")))
        reader.start()
        wait_until(lambda: f"{indexes} is locked by" in caplog.text, "the open waits for the swap's lock")
        assert not final.exists() and not opened
        shutil.copytree(indexes / ".en-custom.old-1", indexes / ".en-custom.building-x")
        (indexes / ".en-custom.building-x").rename(final)  # the second rename
    reader.join(timeout=10)
    assert len(opened) == 1 and opened[0].folder == final
    assert hidden(indexes) == [".en-custom.old-1"]  # the swap's own clean-up, or the next build's


def test_a_swap_held_too_long_is_a_clear_error(indexes, monkeypatch, caplog):
    monkeypatch.setattr(manifest_module, "LOCK_TIMEOUT_S", 0.2)
    holder = f"process {os.getpid()} on {socket.gethostname()}"
    with folder_lock(indexes), pytest.raises(OpenQAError, match=f"stayed locked by {holder} .*for 0 s"):
        rebuild(indexes)
    assert f"{indexes} is locked by {holder}" in caplog.text and "waiting up to 0 s" in caplog.text
    assert open_index(indexes, "en", "custom").manifest["paragraphs"] == 6


@pytest.mark.spawns
def test_openqa_index_says_at_once_whose_lock_it_waits_for(tmp_path):
    """Another process holds the index folder's lock: the build names it and waits, then finishes."""
    data, indexes = make_data_dir(tmp_path), tmp_path / "indexes"
    indexes.mkdir()
    hold = "import fcntl, os, signal, sys\nfcntl.flock(os.open(sys.argv[1], os.O_RDONLY), fcntl.LOCK_EX)\nsignal.pause()"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(indexes)])
    try:
        wait_until(lambda: lock_holder(indexes) != "another process", "the holder has the lock",
                   alive=lambda: holder.poll() is None)
        with open(tmp_path / "stderr", "w+b") as err:
            build = subprocess.Popen([OPENQA, "index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(indexes)],
                                     stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
            wait_until(lambda: b"waiting up to 60 s" in (tmp_path / "stderr").read_bytes(), "the build says whose lock it waits for",
                       alive=lambda: build.poll() is None)
        said = (tmp_path / "stderr").read_text().splitlines()[0]
        assert said.startswith(f"openqa: {indexes} is locked by process {holder.pid} on {socket.gethostname()} "
                               f"({Path(sys.executable).name} -c import fcntl")
        assert said.endswith("): waiting up to 60 s for it")
    finally:
        holder.kill()
        holder.wait()
    assert build.wait(timeout=120) == 0
    assert (indexes / "en-custom" / MANIFEST).is_file()


@pytest.mark.spawns
def test_word_vectors_are_the_same_on_every_build(tmp_path):
    """Two builds in two processes give identical vectors (one worker, a hash not salted per process)."""
    data = make_data_dir(tmp_path)
    vectors = []
    for name in ("a", "b"):
        result = run("index", "--lang", "en", "--engine", "word2vec", "--data-dir", str(data), "--index-dir", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        vectors.append((tmp_path / name / "en-word2vec" / "vectors.npy").read_bytes())
    assert vectors[0] == vectors[1]


@pytest.mark.parametrize("engine", ["custom", "dense"])
@pytest.mark.parametrize("count", [0, 1, 5, 7, 10**9, -3, "6", None])
def test_an_edited_paragraph_count_is_refused(indexes, engine, count):
    """The manifest's paragraph count is checked against the paragraph store and the engine's own
    files (once, in ``Index.load``): an edited count is refused naming the file, never a crash
    (the kernel would read past its buffer) or a number computed over the wrong paragraphs."""
    path = index_folder(indexes, "en", engine) / MANIFEST
    manifest = json.loads(path.read_text())
    assert manifest["paragraphs"] == 6
    manifest["paragraphs"] = count
    path.write_text(json.dumps(manifest))
    with pytest.raises(OpenQAError, match=r"is damaged: .*rebuild with `openqa index --lang en --engine " + engine):
        open_fully(indexes, engine)


@pytest.mark.spawns
def test_an_edited_paragraph_count_fails_eval_with_one_line(indexes, tmp_path):
    """Before: `openqa eval` died with SIGSEGV/SIGABRT, or printed an accuracy with "paragraphs": 0."""
    path = index_folder(indexes, "en", "custom") / MANIFEST
    manifest = json.loads(path.read_text())
    manifest["paragraphs"] = 2
    path.write_text(json.dumps(manifest))
    data = make_data_dir(tmp_path / "data")
    proc = run("eval", "--dataset", "us", "--data-dir", str(data), "--index-dir", str(indexes), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "paragraph" in proc.stderr and "rebuild with" in proc.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.json"))
