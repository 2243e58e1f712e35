"""Named corpora (a folder of books, a JSONL file of passages) indexed and used with --corpus; their
line-by-line checks; the streaming custom build against the list build; the memory-mapped open."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from openqa.corpus.paragraphs import Paragraph
from openqa.corpus.sources import user_corpus
from openqa.errors import DataError, IndexMismatchError, IndexMissingError
from openqa.retrieval import custom_bm25
from openqa.retrieval.custom_bm25 import WEIGHT_ARRAYS, WEIGHTS, CustomBM25, DocParams, document_weights, idf
from openqa.retrieval.manifest import FILES, MANIFEST, write_manifest
from openqa.retrieval.registry import build_index, index_folder, open_index
from openqa.text.tokenize import EnglishTokenizer
from openqa.tuning import resolve_settings, save_tuned
from tests.helpers import BOOKS, TOP1, TOP2, make_data_dir, run

QUESTION = ["--question", "Which drug blocks bacterial cell wall synthesis?", "--option", "A=Gentamicin", "--option", "B=Ceftriaxone"]


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def passages() -> list[dict]:
    """The fixture books as already-split JSONL passages."""
    return [{"id": f"{book[0].lower()}{i}", "title": book, "text": text}
            for book, texts in BOOKS.items() for i, text in enumerate(texts)]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """A data folder (questions), a folder corpus (one .txt, one .md) and a JSONL corpus, each indexed by the CLI."""
    root = tmp_path_factory.mktemp("corpora")
    data = make_data_dir(root)
    books = root / "my-books"
    books.mkdir()
    (books / "Micro.txt").write_text("\n\n".join(BOOKS["Micro"]) + "\n")
    (books / "Cardio.md").write_text("\n\n".join(BOOKS["Cardio"]) + "\n")
    jsonl = write_jsonl(root / "passages.jsonl", passages())
    indexes = root / "indexes"
    for args in (["--corpus", str(books)], ["--corpus", str(jsonl), "--name", "pm"]):
        result = run("index", "--lang", "en", *args, "--index-dir", str(indexes))
        assert result.returncode == 0, result.stderr
    return root, data, indexes


@pytest.mark.spawns
def test_folder_corpus_is_indexed_under_its_name_and_evaluated_with_corpus(corpora, tmp_path):
    root, data, indexes = corpora
    manifest = json.loads((indexes / "my-books-en-custom" / MANIFEST).read_text())
    assert {k: manifest[k] for k in ("corpus", "corpus_kind", "corpus_source", "books", "paragraphs")} == {
        "corpus": "my-books", "corpus_kind": "folder", "corpus_source": str((root / "my-books").resolve()),
        "books": ["Cardio", "Micro"], "paragraphs": 6}
    result = run("eval", "--dataset", "us", "--split", "dev", "--corpus", "my-books", "--json", *TOP2,
                 "--data-dir", str(data), "--index-dir", str(indexes), "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["accuracy"] == 100.0 and summary["corpus"].startswith("my-books (folder, en): 2 books, 6 paragraphs")
    assert (tmp_path / "us-dev-ir-custom-top-2-corpus-my-books.json").is_file()  # never the textbooks' result file
    assert not (indexes / "en-custom").exists()  # the textbooks were not built on the way


@pytest.mark.spawns
def test_jsonl_corpus_is_answered_with_its_own_ids(corpora):
    _, _, indexes = corpora
    result = run("answer", *QUESTION, "--corpus", "pm", "--json", *TOP1, "--index-dir", str(indexes))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["prediction"] == "B"
    assert out["options"][0]["evidence"][0]["id"] == "m1" and out["options"][0]["evidence"][0]["book"] == "Micro"


@pytest.mark.spawns
def test_another_corpus_or_the_textbooks_index_is_refused(corpora, tmp_path):
    _, data, indexes = corpora
    copy = Path(shutil.copytree(indexes, tmp_path / "indexes"))
    shutil.copytree(copy / "pm-en-custom", copy / "other-en-custom")
    with pytest.raises(IndexMismatchError, match="corpus='pm' \\(asked for 'other'\\)"):
        open_index(copy, "en", "custom", corpus="other")
    build_index(data, copy, "en")
    shutil.copytree(copy / "en-custom", copy / "books2-en-custom")
    with pytest.raises(IndexMismatchError, match="corpus=None \\(asked for 'books2'\\)"):
        open_index(copy, "en", "custom", corpus="books2")
    shutil.copytree(copy / "pm-en-custom", copy / "en-custom", dirs_exist_ok=True)
    with pytest.raises(IndexMismatchError, match="corpus='pm' \\(asked for None\\)"):
        open_index(copy, "en", "custom", data_dir=data)


@pytest.mark.spawns
def test_a_missing_index_of_a_named_corpus_names_the_command_that_builds_it(corpora):
    root, data, indexes = corpora
    result = run("answer", *QUESTION, "--corpus", "pm", "--method", "pmi", "--data-dir", str(data), "--index-dir", str(indexes))
    assert result.returncode == 2 and not (indexes / "pm-en-pmi").exists()
    hint = f"openqa index --lang en --engine pmi --corpus {(root / 'passages.jsonl').resolve()} --name pm"
    assert result.stderr.strip() == f"openqa: error: no index at {indexes / 'pm-en-pmi'}: build it with `{hint}`"
    with pytest.raises(IndexMissingError, match="--corpus PATH --name unknown`"):
        open_index(indexes, "en", "custom", corpus="unknown")


BAD_LINES = [
    ('{"id": "a", "title": "T", "text": "x"', "not valid JSON \\(Expecting ',' delimiter at column 38\\)"),
    ('["a", "T", "x"]', "a JSON list where a record"),
    ('{"title": "T", "text": "x"}', "the record has no 'id'"),
    ('{"id": "b", "title": "  ", "text": "x"}', "'title' is empty"),
    ('{"id": "b", "title": "T", "text": 3}', "'text' is a JSON int, not a string"),
    ('{"id": "a", "title": "T", "text": "again"}', "id 'a' was already used on an earlier line"),
]


@pytest.mark.parametrize("line, message", BAD_LINES)
def test_bad_jsonl_lines_are_refused_with_file_and_line(tmp_path, line, message):
    path = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "title": "T", "text": "fine"}, "", line])
    with pytest.raises(DataError, match=f"^{path}:3: {message}"):
        user_corpus(path, "en").identity()


@pytest.mark.spawns
def test_undecodable_and_empty_jsonl_and_clashing_books_are_refused(tmp_path, corpora):
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"id": "a", "title": "T", "text": "caf\xe9"}\n')
    result = run("index", "--lang", "en", "--corpus", str(path), "--index-dir", str(tmp_path / "ix"))
    assert result.returncode == 2
    assert result.stderr == f"openqa: error: {path}:1: not UTF-8 text (invalid continuation byte at byte 38)\n"
    with pytest.raises(DataError, match="no records"):
        user_corpus(write_jsonl(tmp_path / "empty.jsonl", [""]), "en").identity()
    (tmp_path / "books").mkdir()
    (tmp_path / "books" / "A.txt").write_text("x")
    (tmp_path / "books" / "A.md").write_text("y")
    with pytest.raises(DataError, match="A.md and A.txt are both book 'A'"):
        user_corpus(tmp_path / "books", "en").identity()


def test_tuning_with_corpus_is_stored_apart_and_preferred_over_the_datasets(tmp_path):
    save_tuned({"method": "ir-custom", "dataset": "us", "corpus": None, "chosen": {"top_n": 3}}, tmp_path)
    path = save_tuned({"method": "ir-custom", "dataset": "us", "corpus": "pm", "chosen": {"top_n": 7}}, tmp_path)
    assert path.name == "ir-custom-us-corpus-pm.json"
    assert resolve_settings("ir-custom", "us", tmp_path, {}, "pm")[0].top_n == 7
    assert resolve_settings("ir-custom", "us", tmp_path, {})[0].top_n == 3
    assert resolve_settings("ir-custom", "us", tmp_path, {}, "untuned")[0].top_n == 3  # the dataset's own


# --- the streaming build and the memory-mapped open ---------------------------------------------


def list_weights(term_lists: list[list[str]], params: DocParams) -> tuple[sp.csr_matrix, list[str]]:
    """The build before it streamed, kept as the oracle: every token list held, one COO matrix."""
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in terms] for terms in term_lists]
    n = len(term_lists)
    doc_len = np.asarray([len(i) for i in ids], dtype=np.float64)
    rows = np.asarray([t for i in ids for t in i], dtype=np.int32)
    cols = np.repeat(np.arange(n, dtype=np.int32), doc_len.astype(np.int64))
    tf = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(vocab), n), dtype=np.float32)
    tf.sum_duplicates()
    doc_freq = np.diff(tf.indptr)
    norm = params.kd * (1 - params.bd + params.bd * doc_len / doc_len.mean())
    term_of_entry = np.repeat(np.arange(len(vocab)), doc_freq)
    data = tf.data * (params.kd + 1) / (tf.data + norm[tf.indices]) * idf(doc_freq, n)[term_of_entry] ** 2
    return sp.csr_matrix((data.astype(np.float32), tf.indices, tf.indptr), shape=tf.shape), list(vocab)


def random_paragraphs(count: int = 300) -> list[Paragraph]:
    """Seeded paragraphs over a small vocabulary (so terms repeat within and across paragraphs)."""
    rng = random.Random(7)
    words = [w for texts in BOOKS.values() for text in texts for w in text.split()]
    return [Paragraph(f"R:{i}", "R", " ".join(rng.choices(words, k=rng.randint(0, 40)))) for i in range(count)]


def test_streaming_build_gives_the_list_builds_weights(monkeypatch):
    monkeypatch.setattr(custom_bm25, "CHUNK", 7)  # many chunks, the last one short
    monkeypatch.setattr(custom_bm25, "WEIGH_SLICE", 50)
    tokenizer = EnglishTokenizer()
    term_lists = [tokenizer.tokenize(p.text) for p in random_paragraphs()]
    streamed, vocab = document_weights(iter(term_lists), DocParams())
    expected, expected_vocab = list_weights(term_lists, DocParams())
    assert vocab == expected_vocab
    for key in ("data", "indices", "indptr"):
        assert getattr(streamed, key).dtype == getattr(expected, key).dtype
        assert getattr(streamed, key).tobytes() == getattr(expected, key).tobytes()


def as_format_1(folder: Path) -> None:
    """Rewrite a custom index as openqa wrote it before format 2: one weights.npz, no format key."""
    manifest = json.loads((folder / MANIFEST).read_text())
    arrays = {key: np.load(folder / name) for key, name in WEIGHT_ARRAYS.items()}
    weights = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=(manifest["terms"], manifest["paragraphs"]))
    sp.save_npz(folder / WEIGHTS, weights, compressed=False)
    for name in WEIGHT_ARRAYS.values():
        (folder / name).unlink()
    write_manifest(folder, {k: v for k, v in manifest.items() if k not in ("format", FILES, "built_at", "openqa")})


def maps_the_file(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a memory-mapped file (at the end of its chain of bases)."""
    while array is not None and not isinstance(array, np.memmap):
        array = array.base
    return array is not None


def test_memory_mapped_open_gives_the_same_results_as_the_format_1_index(tmp_path):
    paragraphs = random_paragraphs()
    corpus = {"lang": "en", "corpus_checksum": "x"}
    CustomBM25.build(tmp_path / "new", iter(paragraphs), EnglishTokenizer(), corpus)
    shutil.copytree(tmp_path / "new", tmp_path / "old")
    as_format_1(tmp_path / "old")
    mapped, read = (CustomBM25.load(tmp_path / name, {"corpus_checksum": "x"}, "hint") for name in ("new", "old"))
    assert all(maps_the_file(getattr(mapped.weights, key)) for key in WEIGHT_ARRAYS)  # scipy copied nothing
    assert not maps_the_file(read.weights.data)
    queries = [p.text for p in paragraphs[:40:4]] + ["ceftriaxone cell wall", "nothing known here"]
    assert mapped.search(queries, 5) == read.search(queries, 5)
    assert mapped.paragraphs[3] == read.paragraphs[3] == paragraphs[3]


def test_an_unknown_format_is_refused_with_the_rebuild_command(tmp_path):
    CustomBM25.build(tmp_path / "ix", random_paragraphs(20), EnglishTokenizer(), {"lang": "en"})
    manifest = json.loads((tmp_path / "ix" / MANIFEST).read_text())
    (tmp_path / "ix" / MANIFEST).write_text(json.dumps({**manifest, "format": 9}))
    with pytest.raises(IndexMismatchError, match="has format 9, which this openqa does not read; rebuild with `hint`"):
        CustomBM25.load(tmp_path / "ix", {}, "hint")


@pytest.mark.spawns
def test_every_engine_reads_a_named_corpus_from_the_same_stream(corpora, tmp_path):
    root, _, _ = corpora
    corpus = user_corpus(root / "passages.jsonl", "en", "pm")
    for engine in ("custom", "pmi"):
        build_index(None, tmp_path, "en", engine, corpus=corpus)
    custom, pmi = (json.loads((index_folder(tmp_path, "en", e, "pm") / MANIFEST).read_text()) for e in ("custom", "pmi"))
    assert custom["paragraphs"] == pmi["paragraphs"] == 6 and custom["corpus_checksum"] == pmi["corpus_checksum"]
    assert custom["corpus_kind"] == "jsonl" and "books" not in custom


@pytest.mark.spawns
def test_serve_opens_the_named_corpus(corpora):
    from openqa.config import Settings
    from openqa.data.pasted import make_question
    from openqa.pipeline import Context
    from openqa.serve.engines import Engines, RequestError

    _, data, indexes = corpora
    ctx = Context(Settings.resolve(str(data), str(indexes), None, None, None, None), corpus="pm")
    engines = Engines(ctx, ["en"], ["ir-custom"])
    try:
        question = make_question("Which drug blocks bacterial cell wall synthesis?", {"A": "Gentamicin", "B": "Ceftriaxone"})
        record = engines.answer(question, None, None, 1, 1).result(timeout=60)
        shutil.rmtree(indexes / "pm-en-custom")  # a deleted index is named by its own folder, with its rebuild
        with pytest.raises(RequestError, match="the pm-en-custom index of ir-custom .* --name pm"):
            engines.answer(question).result(timeout=60)
        assert "index pm-en-custom deleted" in engines.describe()[0]["changed"]
    finally:
        engines.close()
    assert record["options"][0]["evidence"][0]["id"] == "m1"  # the JSONL corpus' own ids, not the textbooks'
    assert not (indexes / "en-custom").exists()


@pytest.mark.spawns
def test_corpus_stats_of_a_jsonl_corpus(corpora):
    root, _, _ = corpora
    result = run("corpus", "stats", "--lang", "en", "--corpus", str(root / "passages.jsonl"), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["paragraphs"] == 6
