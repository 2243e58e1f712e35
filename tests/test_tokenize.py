import re

import pytest
import Stemmer

from openqa.answer import query_terms, term_spans
from openqa.data import load_questions
from openqa.errors import OpenQAError
from openqa.text import stopwords
from openqa.text.medical_filter import filter_question
from openqa.text.tokenize import ChineseTokenizer, EnglishTokenizer, TermCache, english_words, make_tokenizer

#: English words as the tokenizer first defined them: what ``english_words`` must find.
WORD = re.compile(r"[a-z0-9]+")
#: Texts whose characters are outside plain ASCII words, or lower-case into them.
AWKWARD = [
    "The Patients' FEVER (38.5°C) & rash_on palms; 5×10⁹/L", "naïve café ÉCOLE Ærø", "the Kelvin sign \u212a and İstanbul",
    "µg/dL β-blocker ﬁbrosis ΑΒΓ ǅ", "tab\tnew\nline\r\x0b\x1c end", "", "   ", "emoji 😀 end", "lone \ud800 surrogate",
    "full-width ＡＢＣ１２３ and ascii ABC123", "don't can't we're",
]


def reference_terms(text: str, ngram: int = 1, stem: bool = True) -> list[str]:
    """The English terms as the tokenizer computed them before its term cache: words of ``WORD``,
    stop words and single characters dropped, all stemmed by one ``stemWords`` call, bigrams after."""
    stop = stopwords.english()
    words = [w for w in WORD.findall(text.lower()) if len(w) > 1 and w not in stop]
    terms = Stemmer.Stemmer("english").stemWords(words) if stem else words
    return terms + ([f"{a} {b}" for a, b in zip(terms, terms[1:])] if ngram == 2 else [])


@pytest.mark.parametrize("text", AWKWARD)
def test_english_words_are_what_the_regular_expression_finds(text):
    assert english_words(text) == WORD.findall(text.lower())


@pytest.mark.parametrize("ngram, stem", [(1, True), (2, True), (1, False), (2, False)])
def test_english_terms_are_the_stemmed_words_whatever_the_cache_holds(monkeypatch, ngram, stem):
    """The same terms from a cold cache, a warm one, and one emptied as it fills (a limit of 5
    distinct words, passed several times over by these texts)."""
    texts = [*AWKWARD, "Fevers, FEVER and feverish patients: the patient's fevers", "running runs ran runner"] * 2
    warm = EnglishTokenizer(ngram, stem)
    assert [warm.tokenize(t) for t in texts] == [reference_terms(t, ngram, stem) for t in texts]
    monkeypatch.setattr(TermCache, "LIMIT", 5)
    small = EnglishTokenizer(ngram, stem)
    assert [small.tokenize(t) for t in texts] == [reference_terms(t, ngram, stem) for t in texts]
    assert 0 < len(small._terms) <= 5


def test_english_terms_of_real_questions_are_the_stemmed_words(medqa_dir):
    tokenizer = EnglishTokenizer()
    texts = [text for q in load_questions("us", "dev", medqa_dir)[:300] for text in (q.question, *q.options.values())]
    assert [tokenizer.tokenize(t) for t in texts] == [reference_terms(t) for t in texts]
    assert [tokenizer.words(t) for t in texts] == [[w for w in WORD.findall(t.lower()) if len(w) > 1 and w not in stopwords.english()] for t in texts]


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


def test_chinese_evidence_is_marked_with_the_query_words_not_its_characters():
    """Worked by hand: jieba reads the question and option as 哪|种|药物|抑制|细菌|细胞壁|合成|头孢曲松 (哪 a
    stop word); the words of two or more characters are found whole in the paragraph, and the single
    characters it shares with the query (种, 药, 成 of 一种, 药物, 成人) are not marked."""
    tokenizer = ChineseTokenizer(mode="char")
    terms = query_terms(tokenizer, "哪種藥物抑制細菌細胞壁合成?", "头孢曲松")  # traditional, as typed
    assert terms == {"药物", "抑制", "细菌", "细胞壁", "合成", "头孢曲松"}
    text = "头孢曲松是一种抑制细菌细胞壁合成的药，成人每日一次，治疗细菌感染。"
    spans = term_spans(text, terms, tokenizer)
    assert [text[a:b] for a, b in spans] == ["头孢曲松", "抑制", "细菌", "细胞壁", "合成", "细菌"]
    assert spans[:2] == [(0, 4), (7, 9)]
    # 15 of 33 characters; the index's characters and bigrams marked 18, cut across words:
    # 头孢|曲松|种|抑制|细菌|细胞|壁合|成|药|成|细菌
    assert sum(b - a for a, b in spans) == 15


def test_chinese_words_the_dictionary_lacks_are_still_marked():
    """头围 (head circumference) is not in jieba's dictionary (its words are 头|围, single characters
    never marked): its hidden Markov model joins them, and the paragraph's 头围 is marked."""
    tokenizer = ChineseTokenizer(mode="word")
    assert tokenizer.tokenize("新生儿头围") == ["新生儿", "头", "围", "新生儿 头", "头 围"]  # the index's words: unchanged
    assert tokenizer.words("新生儿头围") == ["新生儿", "头围"]
    text = "出生时头围平均34cm。"
    assert [text[a:b] for a, b in term_spans(text, query_terms(tokenizer, "新生儿头围是多少?", "34cm"), tokenizer)] == ["头围", "34cm"]
