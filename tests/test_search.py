"""Retrieval alone: ``openqa search`` (one query, a topics file -> a TREC run), ``POST /v1/search``,
and the JSONL corpus formats people already have (MedRAG, BEIR, Pyserini), told apart by their keys."""

from __future__ import annotations

import json

import numpy as np
import pytest

from openqa import DataError, Searcher, build_index
from openqa.api.search import folder_hint, rounded
from openqa.corpus.sources import user_corpus
from openqa.errors import IndexMissingError
from openqa.retrieval.base import Hit, Ranking
from tests.helpers import BOOKS, loc, make_data_dir, run
from tests.servers import call, running, tiny_engines


@pytest.mark.spawns
def test_search_prints_ranked_paragraphs_and_json(built):
    text = run("search", "ceftriaxone cell wall synthesis gentamicin", "-k", "2", *loc(built))
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].startswith("  1. [Micro Micro:1, ")
    out = run("search", "ceftriaxone cell wall synthesis gentamicin", "-k", "2", "--json", *loc(built))
    data = json.loads(out.stdout)
    assert [h["id"] for h in data["hits"]] == ["Micro:1", "Micro:2"] and data["hits"][0]["rank"] == 1
    index = run("search", "ceftriaxone cell wall synthesis gentamicin", "-k", "2", "--json", "--index", str(built[2] / "en-custom"))
    assert json.loads(index.stdout)["hits"] == data["hits"]


@pytest.mark.spawns
def test_topics_give_a_trec_run_file(built, tmp_path):
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


@pytest.mark.spawns
@pytest.mark.parametrize("content, message", [
    ("q1 no tab here\n", "topics.tsv:1: expected 'id<TAB>query' or a JSON object"),
    ("q1\tfine\nq1\tagain\n", "topics.tsv:2: topic id 'q1' was already used on an earlier line"),
    ("q1\t   \n", "topics.tsv:1: topic 'q1' has an empty query"),
    ("", "topics.tsv: no topics (expected 'id<TAB>query' lines or JSON lines with an id and a text)"),
])
def test_bad_topics_files_are_file_line_errors(built, tmp_path, content, message):
    topics = tmp_path / "topics.tsv"
    topics.write_text(content)
    result = run("search", "--topics", str(topics), *loc(built))
    assert result.returncode == 2 and result.stderr == f"openqa: error: {topics.parent}/{message}\n"


@pytest.mark.spawns
def test_a_query_and_topics_together_or_an_empty_query_are_refused(built, tmp_path):
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
            assert call(url, "/v1/search", {"query": "x", "k": "5"})[0] == call(url, "/v1/search", {"query": "x", "k": True})[0] == 422
            for lang in ("fr", "EN", "auto"):
                assert call(url, "/v1/search", {"query": "x", "lang": lang}) == (
                    400, {"error": f"unknown language {lang!r}: this server serves en, zh"})
            status, data = call(url, "/v1/search", {"query": "x", "engine": "nope"})
            assert status == 400 and data["error"].startswith("unknown engine 'nope'")
            wide = call(url, "/v1/search", {"query": "ｃｅｆｔｒｉａｘｏｎｅ cell wall", "k": 2})  # full-width letters, normalized
            assert wide[0] == 200 and wide[1]["hits"] == call(url, "/v1/search", {"query": "ceftriaxone cell wall", "k": 2})[1]["hits"]
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


@pytest.mark.spawns
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


@pytest.mark.spawns
def test_batch_search_with_ids_and_threads_equals_search_alone_and_writes_runs_ir_tools_load(tmp_path):
    """``batch_search`` (ids, threads, the engine's batched path) gives each query exactly the hits
    ``search`` gives it alone, under any query-side parameters set as Pyserini's ``set_bm25``; its
    TREC run, with its settings beside it, is what pytrec_eval reads."""
    import pytrec_eval

    from openqa import UsageError

    where = {"data_dir": make_data_dir(tmp_path), "index_dir": tmp_path / "indexes"}
    searcher = Searcher.open("en", **where)
    assert searcher.params == {"kq": 0.4, "bq": 0.7, "avg_ql": None}
    queries = ["ceftriaxone cell wall synthesis", "aspirin cyclooxygenase", "gentamicin", "cell wall aspirin ceftriaxone"]
    for params in ({}, {"avg_ql": 3.0}, {"kq": 1.1, "bq": 0.2}):
        searcher.set_params(**params)
        alone = [searcher.search(q, 5) for q in queries]
        for threads in (1, 2):
            batch = searcher.batch_search(queries, [f"q{i}" for i in range(4)], k=5, threads=threads)
            assert batch.hits == alone and batch.qids == ["q0", "q1", "q2", "q3"] and batch.params == searcher.params
    assert searcher.params == {"kq": 1.1, "bq": 0.2, "avg_ql": 3.0}
    for bad, message in (({"k1": 1.0}, "no parameter 'k1'"), ({"bq": 2}, "bq from 0 to 1"), ({"kq": True}, "must be a number")):
        with pytest.raises(UsageError, match=message):
            searcher.set_params(**bad)
    with pytest.raises(UsageError, match="one id per query"):
        searcher.batch_search(queries, ["a"])
    with pytest.raises(UsageError, match="without white space"):
        searcher.batch_search(queries[:1], ["a b"])
    written = batch.write_trec(tmp_path / "run.trec", tag="test-run")
    meta = json.loads((tmp_path / "run.trec.json").read_text())
    assert meta["params"] == searcher.params and meta["k"] == 5 and meta["openqa_version"] and meta["tag"] == "test-run"
    with open(written) as f:
        run_read = pytrec_eval.parse_run(f)
    assert run_read == {qid: {h.id: pytest.approx(h.score, abs=1e-6) for h in hits} for qid, hits in zip(batch.qids, batch.hits)}
    qrels = {"q0": {"Micro:1": 1}, "q1": {batch.hits[1][0].id: 1}}
    measured = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg"}).evaluate(run_read)
    assert measured["q1"]["ndcg"] == 1.0  # the run as read ranks the first hit first
    assert batch.run() == {qid: {h.id: h.score for h in hits} for qid, hits in zip(batch.qids, batch.hits)}


@pytest.mark.parametrize("line, message", [
    ('{"id": "a b", "title": "T", "text": "aspirin"}', "id 'a b' holds white space"),
    ('{"id": "a\\tb", "title": "T", "text": "aspirin"}', "id 'a\\\\tb' holds white space"),
])
def test_corpus_ids_a_trec_run_cannot_carry_are_refused_at_index_time(tmp_path, line, message):
    corpus = tmp_path / "passages.jsonl"
    corpus.write_text('{"id": "ok", "title": "T", "text": "cell wall"}\n' + line + "\n")
    with pytest.raises(DataError, match=f"passages.jsonl:2: {message}"):
        build_index("en", "custom", corpus=corpus, index_dir=tmp_path / "ix")
    books = tmp_path / "books"
    books.mkdir()
    (books / "My Book.txt").write_text("cell wall synthesis\n")
    with pytest.raises(DataError, match="My Book.txt: a book's name makes its paragraph ids"):
        build_index("en", "custom", corpus=books, index_dir=tmp_path / "ix")


@pytest.mark.spawns
@pytest.mark.parametrize("content, outcome", [
    ("\ufeffq1\taspirin\n", {"q1"}),  # a byte-order mark is not part of the first id
    ("qid\tquery\nq1\taspirin\n", {"q1"}),  # a header line is not a topic
    ('{"id": "q1", "text": "aspirin"}\nq2\tcell wall\n', "a line that is not a JSON object in a JSON-lines topics file"),
    ('{"id": "q1", "text": 5}\n', "the query of topic 'q1' is a JSON int, not text"),
    ('{"id": 1.5, "text": "aspirin"}\n', "the topic id 1.5 is a JSON float"),
    ('{"id": "q\\ud800", "text": "aspirin"}\n', "lone surrogate"),
])
def test_topics_files_as_people_write_them(built, tmp_path, content, outcome):
    topics = tmp_path / "topics.tsv"
    topics.write_text(content, encoding="utf-8")
    done = run("search", "--topics", str(topics), "-k", "1", *loc(built))
    if isinstance(outcome, set):
        assert done.returncode == 0 and {line.split()[0] for line in done.stdout.splitlines()} == outcome, done.stderr
    else:
        assert done.returncode == 2 and outcome in done.stderr and done.stderr.count("\n") == 1, done.stderr


def python_rounded(scores: np.ndarray) -> list[float]:
    """Each score as hits carried it before: ``round(float(s), 4)``."""
    return [round(float(s), 4) for s in scores]


def test_float32_scores_rounded_at_once_are_pythons_round():
    """A float32 score times 10^4 is exact in float64, so numpy's rounding of a whole ranking gives
    Python's ``round(s, 4)``: over random scores, tiny and huge ones, halfway decimals, and exact
    ties (odd multiples of 1/32: s x 10^4 ends in .5), which go to the even neighbour."""
    rng = np.random.default_rng(48)
    halfway = (np.arange(100_000) + 0.5) / 1e4
    ties = np.arange(1, 20_000, 2) / 32
    scores = np.concatenate([rng.uniform(0, 300, 200_000), rng.lognormal(0, 4, 89_997), halfway, ties, [0, 1e-30, 3e38]])
    scores = scores.astype(np.float32)
    assert rounded(scores) == python_rounded(scores)
    assert rounded(np.array([1 / 32, 3 / 32], np.float32)) == [0.0312, 0.0938]


def test_float64_scores_are_rounded_by_python():
    """Not so in float64: 0.00025 x 10^4 is 2.5 in float64 though 0.00025 is a little more (numpy
    would give 0.0002, Python gives 0.0003), so scores other than float32 go through ``round``."""
    scores = (np.arange(20_000, dtype=np.float64) + 0.5) / 1e4
    assert rounded(scores) == python_rounded(scores)
    assert rounded(np.array([0.00025])) == [0.0003]


def test_a_ranking_holds_the_hits_it_was_made_of():
    hits = [[Hit(4, 2.5), Hit(0, 1.25)], [], [Hit(7, 0.1)]]
    ranking = Ranking.of(hits)
    assert ranking.rows.tolist() == [[4, 0], [-1, -1], [7, -1]] and ranking.counts.tolist() == [2, 0, 1]
    assert ranking.hits() == hits
    assert Ranking.of([]).hits() == [] and Ranking.of([[], []]).hits() == [[], []]


def test_the_paragraph_store_fetches_rows_together_as_one_by_one(tmp_path):
    store = Searcher.open("en", data_dir=make_data_dir(tmp_path), index_dir=tmp_path / "indexes").engine.paragraphs
    rows = store.rows
    assert rows is not None and rows > 2
    assert store.many([2, 0, 2]) == [store[2], store[0], store[2]] and store.many([]) == []
    for outside in ([0, rows], [-1]):
        with pytest.raises(IndexError, match=f"paragraph {outside[-1]} of {rows}"):
            store.many(outside)


def test_batch_hits_name_the_parameters_they_were_searched_with(tmp_path, monkeypatch):
    """Another thread's set_params while a batch is searched changes neither its hits nor what its
    ``params`` say (they were once read after the search, from the searcher)."""
    import openqa.api.search as search_module

    searcher = Searcher.open("en", data_dir=make_data_dir(tmp_path), index_dir=tmp_path / "indexes")
    searcher.set_params(kq=1.1)
    real = search_module.search_hits

    def meanwhile(*args, **kwargs):
        hits = real(*args, **kwargs)
        searcher.set_params(kq=0.2)  # as another thread would, while this batch is searched
        return hits

    monkeypatch.setattr(search_module, "search_hits", meanwhile)
    batch = searcher.batch_search(["aspirin cyclooxygenase"], k=3)
    assert batch.params["kq"] == 1.1 and searcher.params["kq"] == 0.2


def test_a_missing_index_folder_names_a_command_with_no_placeholders_left(tmp_path):
    """``search --index`` on a folder with no index says how to build one there: from the folder's
    name where openqa names folders so (``[NAME-]LANG-ENGINE``), else with the choices spelled out."""
    assert folder_hint(tmp_path / "zh-pmi") == f"openqa index --lang zh --engine pmi --index-dir {tmp_path}"
    assert folder_hint(tmp_path / "pubmed-en-custom") == \
        f"openqa index --lang en --engine custom --corpus PATH --name pubmed --index-dir {tmp_path}"
    other = folder_hint(tmp_path / "mine")
    assert "--lang en|zh --engine custom|" in other and other.endswith(f"--index-dir {tmp_path}")
    (tmp_path / "en-lucene").mkdir()
    with pytest.raises(IndexMissingError, match="build it with `openqa index --lang en --engine lucene --index-dir"):
        Searcher.from_folder(tmp_path / "en-lucene")
