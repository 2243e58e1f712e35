"""Retrieval alone: ``openqa search`` (one query, a topics file -> a TREC run), ``POST /v1/search``,
and the JSONL corpus formats people already have (MedRAG, BEIR, Pyserini), told apart by their keys."""

from __future__ import annotations

import json

import pytest

from openqa import DataError, Searcher, build_index
from openqa.corpus.sources import user_corpus
from tests.helpers import BOOKS
from tests.test_cli import built, loc, run  # noqa: F401  (the tiny site's fixture)
from tests.test_serve import call, running, tiny_engines


def test_search_prints_ranked_paragraphs_and_json(built):  # noqa: F811
    text = run("search", "ceftriaxone cell wall synthesis gentamicin", "-k", "2", *loc(built))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].startswith("  1. [Micro Micro:1, ")
    out = run("search", "ceftriaxone cell wall synthesis gentamicin", "-k", "2", "--json", *loc(built))
    data = json.loads(out.stdout)
    assert [h["id"] for h in data["hits"]] == ["Micro:1", "Micro:2"] and data["hits"][0]["rank"] == 1
    index = run("search", "ceftriaxone cell wall synthesis gentamicin", "-k", "2", "--json", "--index", str(built[2] / "en-custom"))
    assert json.loads(index.stdout)["hits"] == data["hits"]


def test_topics_give_a_trec_run_file(built, tmp_path):  # noqa: F811
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tceftriaxone cell wall synthesis\n\nq2\taspirin cyclooxygenase\n")
    run_file = tmp_path / "run.trec"
    result = run("search", "--topics", str(topics), "--output", str(run_file), "-k", "3", *loc(built))
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in run_file.read_text().splitlines()]
    assert lines[0][:4] == ["q1", "Q0", "Micro:1", "1"] and lines[0][5] == "openqa-custom"
    assert {line[0] for line in lines} == {"q1", "q2"} and all(len(line) == 6 for line in lines)
    ranks = [int(line[3]) for line in lines if line[0] == "q2"]
    assert ranks == list(range(1, len(ranks) + 1))
    beir = tmp_path / "queries.jsonl"  # BEIR's queries.jsonl gives the same run
    beir.write_text('{"_id": "q1", "text": "ceftriaxone cell wall synthesis"}\n{"_id": "q2", "text": "aspirin cyclooxygenase"}\n')
    again = run("search", "--topics", str(beir), "-k", "3", *loc(built))
    assert again.stdout == run_file.read_text()


@pytest.mark.parametrize("content, message", [
    ("q1 no tab here\n", "topics.tsv:1: expected 'id<TAB>query' or a JSON object"),
    ("q1\tfine\nq1\tagain\n", "topics.tsv:2: topic id 'q1' was already used on an earlier line"),
    ("q1\t   \n", "topics.tsv:1: topic 'q1' has an empty query"),
    ("", "topics.tsv: no topics (expected 'id<TAB>query' lines or JSON lines with an id and a text)"),
])
def test_bad_topics_files_are_file_line_errors(built, tmp_path, content, message):  # noqa: F811
    topics = tmp_path / "topics.tsv"
    topics.write_text(content)
    result = run("search", "--topics", str(topics), *loc(built))
    assert result.returncode == 2 and result.stderr == f"openqa: error: {topics.parent}/{message}\n"


def test_a_query_and_topics_together_or_an_empty_query_are_refused(built, tmp_path):  # noqa: F811
    both = run("search", "aspirin", "--topics", str(tmp_path / "t.tsv"), *loc(built))
    assert both.stderr == "openqa: error: give a query or --topics FILE (one of them)\n"
    empty = run("search", "  ", *loc(built))
    assert empty.returncode == 2 and empty.stderr == "openqa: error: empty query: give the text to search for\n"


def test_post_v1_search_is_in_the_api_and_its_docs(tmp_path):
    engines = tiny_engines(tmp_path, ["ir-custom"])
    try:
        with running(__import__("openqa.serve.app", fromlist=["create_app"]).create_app(engines)) as url:
            status, data = call(url, "/v1/search", {"query": "ceftriaxone cell wall synthesis gentamicin", "k": 2})
            assert status == 200 and [h["id"] for h in data["hits"]] == ["Micro:1", "Micro:2"]
            assert data["hits"] == [h.to_dict() for h in Searcher(engines.ctx.opened["en", "custom"]).search(
                "ceftriaxone cell wall synthesis gentamicin", 2)]
            assert call(url, "/v1/search", {"query": " "}) == (400, {"error": "empty query: give the text to search for"})
            status, data = call(url, "/v1/search", {"query": "x", "engine": "dense"})
            assert status == 404 and "no dense (en) index is served here" in data["error"]
            assert call(url, "/v1/search", {"query": "x", "k": 0})[0] == 422
            assert "/v1/search" in call(url, "/openapi.json")[1]["paths"]
    finally:
        engines.close()


def test_medrag_beir_and_pyserini_corpora_are_read_by_their_keys(tmp_path):
    texts = [text for paragraphs in BOOKS.values() for text in paragraphs]
    formats = {
        "medrag": [{"id": f"m_{i}", "title": "Micro", "content": t, "contents": f"Micro. {t}"} for i, t in enumerate(texts)],
        "beir": [{"_id": f"b{i}", "title": "" if i else "Micro", "text": t, "metadata": {}} for i, t in enumerate(texts)],
        "pyserini": [{"id": i, "contents": t} for i, t in enumerate(texts)],
    }
    for name, records in formats.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        paragraphs = list(user_corpus(path, "en").paragraphs())
        assert [p.text for p in paragraphs] == texts
        build_index("en", corpus=path, index_dir=tmp_path / "ix")
        hit = Searcher.open("en", corpus=name, index_dir=tmp_path / "ix").search("ceftriaxone cell wall", k=1)[0]
        assert hit.text == texts[1], name
    assert [p.book for p in user_corpus(tmp_path / "beir.jsonl", "en").paragraphs()][:2] == ["Micro", "beir"]
    assert next(user_corpus(tmp_path / "pyserini.jsonl", "en").paragraphs()).pid == "0"


@pytest.mark.parametrize("second, message", [
    ({"_id": "b", "title": "T", "text": "x"}, ":2: a BEIR corpus.jsonl record in a file of openqa passages: one format per file"),
    ({"id": "b", "title": "T", "body": "x"}, ":2: the record has no text field: 'text' \\(openqa, BEIR\\), 'content' \\(MedRAG\\) "
                                            "or 'contents' \\(Pyserini\\)"),
    ({"id": "b", "title": "T", "content": "x"}, ":2: the record has no 'contents'|:2: a MedRAG chunks record in a file of openqa"),
])
def test_a_file_that_mixes_formats_or_lacks_a_text_field_is_a_file_line_error(tmp_path, second, message):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({"id": "a", "title": "T", "text": "fine"}) + "\n" + json.dumps(second) + "\n")
    with pytest.raises(DataError, match=message):
        user_corpus(path, "en").identity()
    result = run("index", "--lang", "en", "--corpus", str(path), "--index-dir", str(tmp_path / "ix"))
    assert result.returncode == 2 and result.stderr.startswith(f"openqa: error: {path}:2: ")
    assert len(result.stderr.splitlines()) == 1 and not (tmp_path / "ix").exists()
