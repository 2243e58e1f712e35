import pytest

from openqa.errors import OpenQAError
from openqa.text.medical_filter import filter_question
from openqa.text.tokenize import ChineseTokenizer, EnglishTokenizer, make_tokenizer


def test_english_lowercases_drops_stopwords_and_stems():
    assert EnglishTokenizer().tokenize("The Patients were Complaining of FEVERS") == ["patient", "complain", "fever"]


def test_english_bigrams_follow_unigrams():
    assert EnglishTokenizer(ngram=2).tokenize("chest pain radiates") == [
        "chest", "pain", "radiat", "chest pain", "pain radiat",
    ]


def test_chinese_char_mode_gives_characters_and_bigrams_and_latin_words():
    assert ChineseTokenizer(mode="char").tokenize("心肌梗死 CT") == [
        "心", "肌", "梗", "死", "心肌", "肌梗", "梗死", "ct",
    ]


def test_chinese_word_mode_drops_punctuation_and_stopwords():
    terms = ChineseTokenizer(mode="word", ngram=1).tokenize("患者，突发胸痛。")
    assert "，" not in terms and "。" not in terms
    assert "患者" in terms


def test_chinese_query_is_converted_to_simplified():
    assert ChineseTokenizer().prepare_query("關節疼痛") == "关节疼痛"


def test_make_tokenizer_round_trips_config_and_rejects_unknown_language():
    tok = EnglishTokenizer(ngram=2)
    assert make_tokenizer(tok.config()).config() == tok.config()
    with pytest.raises(OpenQAError, match="unknown language"):
        make_tokenizer({"lang": "fr"})


def test_medical_filter_keeps_medical_words_and_drops_narrative_and_numbers():
    kept = filter_question("A 45-year-old man comes to the clinic 3 days ago with fever and jaundice.").split()
    assert "fever" in kept and "jaundice" in kept and "clinic" in kept
    assert not {"comes", "ago", "3", "days", "the"} & set(kept)
