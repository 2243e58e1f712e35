"""The Elasticsearch engine against the ES-compatible emulator ``noida-db`` (started here), a
real cluster when ``OPENQA_ES_URL`` is set, and fakes for the response handling."""

from __future__ import annotations

import json
import os

import pytest

from openqa.corpus.sources import user_corpus
from openqa.errors import IndexMissingError, OpenQAError
from openqa.retrieval.base import PARAGRAPHS as STORE_FILE
from openqa.retrieval.base import EngineOptions, ParagraphStore
from openqa.retrieval.elastic import ElasticBM25, check_url, connect, index_body
from openqa.retrieval.lucene import LuceneParams
from openqa.retrieval.registry import build_index, open_index
from openqa.text.tokenize import EnglishTokenizer
from tests.fakes import PARAGRAPHS, roundtrip, start_emulator, stop_emulator
from tests.helpers import free_port


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    """A noida-db server for this module, stopped afterwards."""
    proc, url = start_emulator(tmp_path_factory.mktemp("es"))
    yield url
    stop_emulator(proc)


def check_search(engine: ElasticBM25) -> None:
    hits = engine.search(["gentamicin ribosomal subunit", "aspirin cyclooxygenase"], k=2)
    assert engine.paragraphs[hits[0][0].index].pid == "Micro:2"
    assert engine.paragraphs[hits[1][0].index].pid == "Cardio:1"
    assert hits[0][0].score >= hits[0][-1].score


@pytest.mark.spawns
def test_build_search_and_settings_on_emulator(emulator, tmp_path):
    engine = roundtrip(emulator, tmp_path / "en-es")
    check_search(engine)
    settings = engine.client.indices.get_settings(index=engine.index_name)[engine.index_name]["settings"]["index"]
    assert settings["similarity"]["openqa_bm25"]["k1"] in ("1.2", 1.2)
    assert engine.client.count(index=engine.index_name)["count"] == len(PARAGRAPHS)


@pytest.mark.spawns
def test_a_named_corpus_streams_into_the_server_in_bulk(emulator, tmp_path):
    """A JSONL corpus of more passages than one bulk request holds, loaded as `openqa index --corpus` does."""
    path = tmp_path / "passages.jsonl"
    with open(path, "w") as out:
        for i in range(2500):
            out.write(json.dumps({"id": f"p{i}", "title": f"T{i % 7}", "text": f"marker{i} fever cough rash {i % 13}"}) + "\n")
    options = EngineOptions(connection=emulator)
    build_index(None, tmp_path / "ix", "en", "elasticsearch", options=options, corpus=user_corpus(path, "en", "big"))
    engine = open_index(tmp_path / "ix", "en", "elasticsearch", options=options, corpus="big")
    assert engine.client.count(index=engine.index_name)["count"] == engine.manifest["paragraphs"] == 2500
    hits = engine.search(["marker1234 fever", "marker7"], k=1)
    assert [engine.paragraphs[h[0].index].pid for h in hits] == ["p1234", "p7"]


@pytest.mark.spawns
def test_rebuild_replaces_and_drops_the_old_server_index(emulator, tmp_path):
    first = roundtrip(emulator, tmp_path / "en-es")
    second = roundtrip(emulator, tmp_path / "en-es")
    assert first.index_name != second.index_name
    assert not second.client.indices.exists(index=first.index_name)


@pytest.mark.spawns
def test_failed_load_keeps_previous_index(emulator, tmp_path, monkeypatch):
    folder = tmp_path / "en-es"
    first = roundtrip(emulator, folder)
    import openqa.retrieval.elastic as elastic

    def broken(*args, **kwargs):
        raise OpenQAError("Elasticsearch refused a paragraph: test")

    before = set(first.client.indices.get(index="openqa-*"))
    monkeypatch.setattr(elastic, "_bulk_load", broken)
    with pytest.raises(OpenQAError):
        ElasticBM25.build(folder, PARAGRAPHS, EnglishTokenizer(), {"lang": "en", "corpus_checksum": "abc"}, EngineOptions(connection=emulator))
    assert json.loads((folder / "manifest.json").read_text())["es_index"] == first.index_name
    assert set(first.client.indices.get(index="openqa-*")) == before  # the half-loaded one is gone


@pytest.mark.spawns
@pytest.mark.skipif(not os.environ.get("OPENQA_ES_URL"), reason="set OPENQA_ES_URL to test a real cluster")
def test_real_cluster(tmp_path):
    engine = roundtrip(os.environ["OPENQA_ES_URL"], tmp_path / "en-es")
    try:
        check_search(engine)
    finally:
        engine.client.indices.delete(index=engine.index_name)


def test_unreachable_server_is_one_line_error():
    with pytest.raises(OpenQAError, match=r"cannot reach Elasticsearch at http://127.0.0.1:\d+"):
        connect(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(OpenQAError, match="--es-url"):
        connect(None)


@pytest.mark.parametrize("url, problem", [
    ("not a url", "does not start with http:// or https://"),
    ("localhost:9200", "does not start with http:// or https://"),
    ("ftp://localhost:9200", "does not start with http:// or https://"),
    ("http://:9200", "names no host"),
    ("http://localhost", "names no port"),
    ("http://localhost:nine", "port is not a number"),
    ("http://localhost:99999", "port is not a number"),
])
def test_malformed_url_is_refused_before_connecting(url, problem):
    with pytest.raises(OpenQAError, match=problem) as err:
        connect(url)
    assert "expected http://host:9200" in str(err.value) and repr(url) in str(err.value)


@pytest.mark.parametrize("url", ["http://localhost:9200", "https://user:pw@es.example.org:443/prefix", " http://[::1]:9200 "])
def test_well_formed_urls_pass(url):
    check_url(url)


def test_rebuild_hints_name_the_server(tmp_path):
    with pytest.raises(IndexMissingError, match=r"`hint --es-url URL`"):
        ElasticBM25.load(tmp_path / "en-es", {}, "hint")
    with pytest.raises(IndexMissingError, match=r"`hint --es-url http://es:9200`"):
        ElasticBM25.load(tmp_path / "en-es", {}, "hint", EngineOptions(connection="http://es:9200"))
    (tmp_path / "en-es").mkdir()
    (tmp_path / "en-es" / "manifest.json").write_text(json.dumps({"engine": "elasticsearch", "es_url": "http://es:9200", "lang": "zh"}))
    with pytest.raises(OpenQAError, match=r"lang='zh'.*`hint --es-url http://es:9200`"):
        ElasticBM25.load(tmp_path / "en-es", {"lang": "en"}, "hint")


def test_index_body_is_explicit():
    body = index_body(LuceneParams(k1=0.9, b=0.4), shards=3)
    assert body["settings"]["number_of_shards"] == 3
    assert body["settings"]["similarity"]["openqa_bm25"] == {"type": "BM25", "k1": 0.9, "b": 0.4}
    assert body["mappings"]["properties"]["contents"]["analyzer"] == "whitespace"


class FakeClient:
    """Answers msearch with canned responses (or raises a canned error) and records the request."""

    def __init__(self, responses):
        self.responses = responses
        self.searches = None

    def msearch(self, searches):
        self.searches = searches
        if isinstance(self.responses, Exception):
            raise self.responses
        return {"responses": self.responses}


def fake_engine(responses) -> ElasticBM25:
    manifest = {"tokenizer": EnglishTokenizer().config(), "es_index": "idx"}
    return ElasticBM25(tmp_folder(), manifest, FakeClient(responses), "http://fake:9200", ParagraphStore(tmp_folder() / STORE_FILE))


def tmp_folder():
    import pathlib
    import tempfile

    return pathlib.Path(tempfile.mkdtemp())


def test_search_request_and_response_handling():
    engine = fake_engine([{"hits": {"hits": [{"_id": "4", "_score": 2.5}, {"_id": "1", "_score": 1.0}]}}])
    hits = engine.search(["The Fevers"], k=2)
    assert [(h.index, h.score) for h in hits[0]] == [(4, 2.5), (1, 1.0)]
    assert engine.client.searches == [{"index": "idx"}, {"query": {"match": {"contents": "fever"}}, "size": 2, "_source": False}]


def test_search_error_is_reported():
    engine = fake_engine([{"error": {"type": "index_not_found_exception"}}])
    with pytest.raises(OpenQAError, match="index_not_found_exception"):
        engine.search(["fever"], k=1)


def test_transport_and_server_errors_name_the_server():
    from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
    from elasticsearch import ApiError, ConnectionError, ConnectionTimeout

    for error in (ConnectionError("refused"), ConnectionTimeout("timed out")):
        expected = rf"Elasticsearch at http://fake:9200 stopped answering while searching \({type(error).__name__}\)"
        with pytest.raises(OpenQAError, match=expected):
            fake_engine(error).search(["fever"], k=1)
    meta = ApiResponseMeta(503, "1.1", HttpHeaders(), 0.01, NodeConfig("http", "fake", 9200))
    with pytest.raises(OpenQAError, match="http://fake:9200 refused a request while searching: 503 overloaded"):
        fake_engine(ApiError("overloaded", meta, {})).search(["fever"], k=1)
