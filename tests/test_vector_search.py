"""The vector search backends: torch's exact top-k gives FAISS flat's hits (ids and scores), ties
broken by the lowest id, k past the number of vectors padded as FAISS pads; the default backend
by device and index kind."""

from __future__ import annotations

import numpy as np
import pytest

from openqa.errors import UsageError
from openqa.retrieval import vector_search
from openqa.retrieval.base import EngineOptions
from openqa.retrieval.dense import FAISS_FILE, DenseIndex
from openqa.retrieval.vector_search import MISSING_SCORE, FaissSearch, TorchExactSearch, open_search
from openqa.text.tokenize import EnglishTokenizer
from tests.fakes import CORPUS, PARAGRAPHS, BagOfWordsEncoder

faiss = pytest.importorskip("faiss")


def flat(vectors):
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def test_ties_go_to_the_lowest_ids_by_hand():
    vectors = np.array([[1, 0], [0, 1], [1, 0], [0.5, 0.5], [1, 0]], np.float32)
    search = TorchExactSearch(vectors)
    scores, ids = search.search(np.array([[1, 0]], np.float32), 2)
    assert ids.tolist() == [[0, 2]] and scores.tolist() == [[1.0, 1.0]]  # 0, 2 and 4 tie: the first two
    scores, ids = search.search(np.array([[1, 0]], np.float32), 7)
    assert ids.tolist() == [[0, 2, 4, 3, 1, -1, -1]]
    assert scores.tolist() == [[1.0, 1.0, 1.0, 0.5, 0.0, MISSING_SCORE, MISSING_SCORE]]
    with pytest.raises(UsageError, match="k must be at least 1"):
        search.search(np.array([[1, 0]], np.float32), 0)


@pytest.mark.parametrize("k", [1, 10, 299, 300, 350])
@pytest.mark.parametrize("n_queries", [3, 25])  # FAISS computes under 20 queries and from 20 on by two methods
def test_torch_gives_faiss_flat_hits_with_ties(k, n_queries):
    """Small integer vectors: every product is exact in fp32 and many tie. Each score, rank by rank,
    and each group of equal scores inside the top k hold the same ids as FAISS's; of the group at
    the cut, FAISS keeps whichever its heap met first, torch the lowest ids."""
    rng = np.random.default_rng(0)
    vectors = rng.integers(-2, 3, size=(300, 8)).astype(np.float32)
    queries = rng.integers(-2, 3, size=(n_queries, 8)).astype(np.float32)
    expected_scores, expected_ids = flat(vectors).search(queries, k)
    scores, ids = TorchExactSearch(vectors).search(queries, k)
    np.testing.assert_allclose(scores, expected_scores, rtol=0, atol=1e-5)
    assert ids.dtype == np.int64 and scores.dtype == np.float32
    for row in range(n_queries):
        products = vectors @ queries[row]
        found = ids[row][ids[row] >= 0]
        assert len(found) == min(k, 300) and (expected_ids[row] >= 0).sum() == len(found)
        assert ids[row][len(found):].tolist() == [-1] * (k - len(found))
        np.testing.assert_array_equal(products[found], scores[row][: len(found)])  # each id carries its score
        cut = scores[row][len(found) - 1]
        for score in set(scores[row][: len(found)].tolist()):
            mine = ids[row][scores[row] == score]
            theirs = expected_ids[row][expected_scores[row] == score]
            if score != cut or len(found) == 300:
                assert sorted(mine) == sorted(theirs)
            else:
                tied = np.flatnonzero(products == score)
                assert mine.tolist() == tied[: len(mine)].tolist() and set(theirs) <= set(tied)


def test_torch_gives_faiss_flat_hits_on_unit_vectors():
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((1000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = vectors[:40] + 0.1 * rng.standard_normal((40, 32)).astype(np.float32)
    expected_scores, expected_ids = flat(vectors).search(queries, 10)
    scores, ids = TorchExactSearch(vectors).search(queries, 10)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_allclose(scores, expected_scores, rtol=0, atol=1e-5)


def test_queries_in_blocks_give_the_same_hits(monkeypatch):
    rng = np.random.default_rng(2)
    vectors = rng.integers(-2, 3, size=(50, 4)).astype(np.float32)
    queries = rng.integers(-2, 3, size=(9, 4)).astype(np.float32)
    whole = TorchExactSearch(vectors).search(queries, 12)
    monkeypatch.setattr(TorchExactSearch, "CELLS", 100)  # 2 queries a block
    for got, expected in zip(TorchExactSearch(vectors).search(queries, 12), whole):
        np.testing.assert_array_equal(got, expected)
    scores, ids = TorchExactSearch(np.zeros((0, 4), np.float32)).search(queries, 3)
    assert ids.tolist() == [[-1] * 3] * 9 and (scores == MISSING_SCORE).all()


def test_the_backend_by_device_index_and_name():
    vectors = np.eye(4, dtype=np.float32)
    index = flat(vectors)
    assert isinstance(open_search(index, "cpu"), FaissSearch)  # on a CPU FAISS searches
    assert TorchExactSearch.fits(index, "cuda") and not TorchExactSearch.fits(index, "cpu")
    hnsw = faiss.IndexHNSWFlat(4, 32, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(vectors)
    assert not TorchExactSearch.fits(hnsw, "cuda")  # approximate indexes stay with FAISS
    chosen = open_search(index, "cpu", "torch")
    assert isinstance(chosen, TorchExactSearch)
    np.testing.assert_array_equal(chosen.vectors.numpy(), vectors)  # read out of the FAISS index
    with pytest.raises(UsageError, match="flat inner-product index"):
        open_search(hnsw, "cpu", "torch")
    with pytest.raises(UsageError, match="unknown vector search 'annoy': choose one of faiss-gpu, torch, faiss"):
        open_search(index, "cpu", "annoy")
    assert list(vector_search.BACKENDS) == ["faiss-gpu", "torch", "faiss"]


def test_a_dense_index_searches_alike_with_either_backend(tmp_path):
    encoder = BagOfWordsEncoder()
    DenseIndex.build(tmp_path / "en-dense", PARAGRAPHS, EnglishTokenizer(), CORPUS, EngineOptions(), encoder=encoder)
    index = DenseIndex.load(tmp_path / "en-dense", {}, "hint", encoder=encoder)
    assert isinstance(index.vectors, FaissSearch)
    queries = ["gentamicin aminoglycoside ribosomal subunit", "aspirin cyclooxygenase", "knee"]
    expected = index.search(queries, k=8)  # more than the 6 paragraphs
    index.vectors = open_search(faiss.read_index(str(tmp_path / "en-dense" / FAISS_FILE)), "cpu", "torch")
    got = index.search(queries, k=8)
    for mine, theirs in zip(got, expected):
        assert len(mine) == len(theirs) == 6
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)
        assert {h.index for h in mine} == {h.index for h in theirs}
