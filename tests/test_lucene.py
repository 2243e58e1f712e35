"""Lucene BM25 through Pyserini (starts a JVM: about 10 s): same paragraphs and ids as the custom index."""

import pytest

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.methods import method
from openqa.retrieval.custom_bm25 import CustomBM25
from openqa.retrieval.lucene import LuceneBM25, pretokenized
from openqa.scorers.ir import IRSettings
from openqa.text.tokenize import ChineseTokenizer, EnglishTokenizer
from tests.helpers import BOOKS, QUESTIONS

PARAGRAPHS = [Paragraph(f"{book}:{i}", book, t) for book, texts in BOOKS.items() for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def lucene(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lucene") / "en-lucene"
    LuceneBM25.build(folder, PARAGRAPHS, EnglishTokenizer(), {"lang": "en", "corpus_checksum": "x"})
    return LuceneBM25.load(folder, {"corpus_checksum": "x"}, "hint")


def test_pretokenized_text_is_the_tokenizers_terms():
    assert pretokenized(EnglishTokenizer(), "The Patients had fevers") == "patient fever"


def test_lucene_finds_the_same_paragraph_ids(lucene, tmp_path):
    hits = lucene.search(["gentamicin ribosomal subunit", "zzz"], k=3)
    assert lucene.paragraphs[hits[0][0].index].pid == "Micro:2"
    assert hits[1] == []
    CustomBM25.build(tmp_path / "c", PARAGRAPHS, EnglishTokenizer(), {"lang": "en"})
    custom = CustomBM25.load(tmp_path / "c", {}, "hint")
    assert custom.search(["gentamicin ribosomal subunit"], k=1)[0][0].index == hits[0][0].index


def test_ir_es_answers_fixture_questions(lucene):
    from openqa.data.questions import Question

    questions = [Question(f"q{i}", q["question"], q["options"], q["answer_idx"], q["answer"], None, None)
                 for i, q in enumerate(QUESTIONS)]
    scorer = method("ir-es").make(lucene, "usmle", IRSettings(top_n=1, query="full"))
    first, second = scorer.score(questions, progress=False)
    assert first.prediction() == "C"
    assert "A" in second.tied_best()  # its best paragraph matches the question as well as the option


def test_ir_es_refuses_the_custom_index(tmp_path):
    CustomBM25.build(tmp_path / "c", PARAGRAPHS, EnglishTokenizer(), {"lang": "en"})
    with pytest.raises(OpenQAError, match="ir-es needs"):
        method("ir-es").make(CustomBM25.load(tmp_path / "c", {}, "hint"), "usmle", IRSettings())


def test_lucene_refuses_english_bigrams(tmp_path):
    with pytest.raises(OpenQAError, match="without --ngram 2"):
        LuceneBM25.build(tmp_path / "x", PARAGRAPHS, EnglishTokenizer(ngram=2), {"lang": "en"})


def test_chinese_pretokenized_keeps_character_bigrams():
    assert pretokenized(ChineseTokenizer(mode="char", ngram=2), "心肌梗死") == "心 肌 梗 死 心肌 肌梗 梗死"
