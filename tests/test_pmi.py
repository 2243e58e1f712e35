"""Positional index and PMI: counts and PMI values checked by hand on a tiny corpus."""

import math

import pytest

from openqa.corpus.paragraphs import Paragraph
from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.retrieval.positional import GAP, PositionalIndex
from openqa.scorers.ir import IRSettings
from openqa.scorers.pmi import NO_EVIDENCE, PMIScorer, ngrams
from openqa.text.tokenize import EnglishTokenizer

# stemmed, stop-word-free streams: [fever rash fever cough], [rash headache]
DOCS = ["fever rash fever cough", "rash headache"]


@pytest.fixture
def index(tmp_path):
    paragraphs = [Paragraph(f"B:{i}", "B", t) for i, t in enumerate(DOCS)]
    PositionalIndex.build(tmp_path / "pmi", paragraphs, EnglishTokenizer(), {"lang": "en"})
    return PositionalIndex.load(tmp_path / "pmi", {}, "hint")


def test_positions_and_ngrams(index):
    assert index.total == 6
    assert index.term_positions("fever").tolist() == [0, 2]
    assert index.term_positions("rash").tolist() == [1, 4 + GAP]
    assert index.grams(("fever", "rash")).tolist() == [0]
    assert index.grams(("fever", "", "fever")).tolist() == [0]
    assert index.grams(("rash", "headach")).tolist() == [4 + GAP]
    assert len(index.grams(("cough", "rash"))) == 0  # never across paragraphs


def test_pair_counts_within_window(index):
    counts = index.pair_counts([("fever",), ("cough",), ("headach",)], [("rash",)], window=1)
    # rash@1 has fever@0 and fever@2 within 1; cough@3 is 2 away; headache sits beside the other rash
    assert counts.tolist() == [[2, 0, 1]]
    assert index.pair_counts([("fever",)], [("cough",)], window=10).tolist() == [[2]]


def test_ngrams_of_a_sequence():
    grams = ngrams(["a", "b", "c"])
    assert ("a",) in grams and ("a", "b") in grams and ("a", "b", "c") in grams and ("a", "", "c") in grams
    assert len(grams) == 3 + 2 + 1 + 1


def test_pmi_scores_by_hand(index):
    scorer = PMIScorer(index, IRSettings(query="full"), window=1)
    q = Question("q", "fever cough", {"A": "rash", "B": "headache"}, "A", "rash", None, None)
    result = scorer.score([q], progress=False)[0]
    # A: PMI(fever, rash) = log(2 * 6 / (2 * 2)) and PMI(fever cough, rash) = log(1 * 6 / (1 * 2)), both
    # log 3; (cough, rash) never co-occur within 1 term and are left out. B: nothing is near headache.
    assert result.scores["A"] == pytest.approx(math.log(3.0))
    assert result.scores["B"] == NO_EVIDENCE
    assert result.prediction() == "A"


def test_option_absent_from_corpus_scores_zero(index):
    scorer = PMIScorer(index, IRSettings(query="full"))
    q = Question("q", "fever", {"A": "unknownword", "B": "rash"}, "B", "rash", None, None)
    assert scorer.score([q], progress=False)[0].scores["A"] == NO_EVIDENCE


def test_pmi_index_refuses_other_tokenizers(tmp_path):
    with pytest.raises(OpenQAError, match="own tokenizer"):
        PositionalIndex.build(tmp_path / "x", [Paragraph("B:0", "B", "a b")], EnglishTokenizer(ngram=2), {"lang": "en"})
    assert not (tmp_path / "x").exists()
