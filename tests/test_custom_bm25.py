"""The custom BM25 engine: scores checked against the Appendix B formula computed by hand."""

import json
import math

import numpy as np
import pytest

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import IndexMismatchError, OpenQAError
from openqa.retrieval.custom_bm25 import CustomBM25, DocParams, QueryParams, top_k
from openqa.retrieval.manifest import atomic_folder
from openqa.text.tokenize import EnglishTokenizer

DOCS = ["fever fever cough", "fever rash", "cough cough cough rash headache"]


def build(tmp_path, docs=DOCS):
    folder = tmp_path / "idx"
    paragraphs = [Paragraph(f"B:{i}", "B", t) for i, t in enumerate(docs)]
    CustomBM25.build(folder, paragraphs, EnglishTokenizer(stem=False), {"lang": "en", "corpus_checksum": "x"}, DocParams(0.9, 0.35))
    return folder


def test_scores_match_the_papers_formula_worked_by_hand(tmp_path):
    """Appendix B: s(Q,D) = sum BM25(q,D) * IDF(q) * query saturation, BM25 itself holding IDF(q).

    Corpus DOCS: N = 3, lengths 3, 2, 5, avgDL = 10/3; df(fever) = 2, df(headache) = 1.
      IDF(fever)    = ln(1 + (3 - 2 + .5) / (2 + .5)) = ln 1.6    = 0.470004
      IDF(headache) = ln(1 + (3 - 1 + .5) / (1 + .5)) = ln 2.6667 = 0.980829
    Document side f(kD+1) / (f + kD(1 - bD + bD dl/avgDL)), kD 0.9, bD 0.35:
      fever in D0 (f 2, dl 3):    3.8 / (2 + 0.9 * 0.965) = 1.324734
      fever in D1 (f 1, dl 2):    1.9 / (1 + 0.9 * 0.860) = 1.071026
      headache in D2 (f 1, dl 5): 1.9 / (1 + 0.9 * 1.175) = 0.923451
    Query "fever fever headache" (|Q| 3, avgQL 2), kQ 0.4, bQ 0.7: norm = 0.4 * (0.3 + 0.7 * 1.5) = 0.54
      fever (f 2): 2.8 / 2.54 = 1.102362;  headache (f 1): 1.4 / 1.54 = 0.909091
    Scores, IDF squared:
      D0 = 0.470004^2 * 1.324734 * 1.102362 = 0.322593
      D1 = 0.470004^2 * 1.071026 * 1.102362 = 0.260811
      D2 = 0.980829^2 * 0.923451 * 0.909091 = 0.807622
    """
    engine = CustomBM25.load(build(tmp_path), {"corpus_checksum": "x"}, "hint")
    engine.query_params = QueryParams(kq=0.4, bq=0.7, avg_len=2.0)
    scores = engine.score_terms([["fever", "fever", "headache"]])[0]
    np.testing.assert_allclose(scores, [0.322593, 0.260811, 0.807622], rtol=2e-5)


def test_query_saturation_by_formula(tmp_path):
    engine = CustomBM25.load(build(tmp_path), {"corpus_checksum": "x"}, "hint")
    engine.query_params = QueryParams(kq=0.4, bq=0.7, avg_len=2.0)
    scores = engine.score_terms([["fever", "fever", "rash"]])[0]
    # doc lengths 3, 2, 5 -> avgdl 10/3; df(fever)=2, df(rash)=2; N=3
    kd, bd, kq, bq = 0.9, 0.35, 0.4, 0.7
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    def doc(tf, dl):
        return idf * tf * (kd + 1) / (tf + kd * (1 - bd + bd * dl / (10 / 3)))  # BM25(q, D), IDF included
    def qry(tf, ql=3, avg=2.0):
        return idf * tf * (kq + 1) / (tf + kq * (1 - bq + bq * ql / avg))  # IDF(q) x query saturation
    expected = [
        qry(2) * doc(2, 3),
        qry(2) * doc(1, 2) + qry(1) * doc(1, 2),
        qry(1) * doc(1, 5),
    ]
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_index_with_other_scoring_is_refused(tmp_path):
    folder = build(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    del manifest["scoring"]  # an index written before the paper's IDF-twice formula
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexMismatchError, match="scoring=None.*rebuild with `openqa index --lang en`"):
        CustomBM25.load(folder, {}, "openqa index --lang en")


def test_search_ranks_and_drops_non_matching(tmp_path):
    engine = CustomBM25.load(build(tmp_path), {}, "hint")
    hits = engine.search(["headache", "nothing matches"], k=3)
    assert [h.index for h in hits[0]] == [2]
    assert hits[1] == []
    assert engine.paragraphs[hits[0][0].index].pid == "B:2"


def test_fit_queries_sets_average_query_length(tmp_path):
    engine = CustomBM25.load(build(tmp_path), {}, "hint")
    engine.fit_queries(["fever", "fever rash cough"])
    assert engine.query_params.avg_len == 2.0


def test_mismatched_settings_or_corpus_are_refused(tmp_path):
    folder = build(tmp_path)
    with pytest.raises(IndexMismatchError, match="corpus_checksum"):
        CustomBM25.load(folder, {"corpus_checksum": "other"}, "openqa index --lang en")
    with pytest.raises(IndexMismatchError, match="rebuild with `openqa index --lang en`"):
        CustomBM25.load(folder, {"tokenizer": {"lang": "en", "ngram": 2}}, "openqa index --lang en")


def test_missing_index_says_how_to_build(tmp_path):
    with pytest.raises(OpenQAError, match="build it with"):
        CustomBM25.load(tmp_path / "none", {}, "openqa index --lang en")


def test_interrupted_build_keeps_the_old_index(tmp_path):
    folder = build(tmp_path)
    before = json.loads((folder / "manifest.json").read_text())
    with pytest.raises(RuntimeError):
        with atomic_folder(folder) as scratch:
            (scratch / "partial").write_text("half")
            raise RuntimeError("interrupted")
    assert json.loads((folder / "manifest.json").read_text()) == before
    assert not (folder / "partial").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_rebuild_replaces_index(tmp_path):
    build(tmp_path)
    folder = build(tmp_path, ["single document about rash"])
    assert json.loads((folder / "manifest.json").read_text())["paragraphs"] == 1


def test_top_k_matches_a_full_sort():
    rng = np.random.default_rng(7)
    scores = np.where(rng.random((20, 500)) < 0.7, 0, rng.gamma(1.0, 2.0, (20, 500))).astype(np.float32)
    scores[3, :] = 0  # nothing matches
    scores[4, :10] = 1.0  # ties: lower index first
    for k in (1, 5, 50, 600):
        for row, hits in zip(scores, top_k(scores, k)):
            exact = [i for i in np.lexsort((np.arange(len(row)), -row))[:k] if row[i] > 0]
            assert [h.index for h in hits] == exact
