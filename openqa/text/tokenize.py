"""One tokenizer per language; every index and scorer gets its terms from here.

English: lower-case, alphanumeric words, NLTK's English stop-word list (shipped by bm25s),
Snowball stemming (PyStemmer), optional word bigrams. Chinese: single characters plus
character bigrams, or jieba words; Latin words inside Chinese text are kept lower-cased.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, cast

import Stemmer

from openqa.errors import OpenQAError, UsageError
from openqa.text import stopwords

#: The characters of English words, once lower-cased; a byte table that makes every other byte a space.
_EN_WORD = b"abcdefghijklmnopqrstuvwxyz0123456789"
_SPACE_ALL_BUT_EN_WORD = bytes(byte if byte in _EN_WORD else ord(" ") for byte in range(256))
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_ZH_PIECE = re.compile(f"[{_CJK}]+|[a-z0-9]+")
_HAS_WORD = re.compile(f"[{_CJK}a-z0-9]")


class Tokenizer(ABC):
    """Turns text into index terms; ``config()`` goes into index manifests."""

    lang: ClassVar[str]

    @abstractmethod
    def tokenize(self, text: str) -> list[str]:
        """Index terms of ``text`` in reading order (n-grams after the unigrams they span)."""

    @abstractmethod
    def config(self) -> dict[str, Any]:
        """Every setting that changes the terms, so a mismatched index can be refused."""

    @abstractmethod
    def words(self, text: str) -> list[str]:
        """The content words of ``text`` (lower-cased, unstemmed, stop words and single characters
        dropped), in reading order: what a reader recognises as a match when evidence is marked."""

    def prepare_query(self, text: str) -> str:
        """Normalise query text before tokenizing (e.g. script conversion); identity by default."""
        return text


def english_words(text: str) -> list[str]:
    """The runs of ASCII lower-case letters and digits in ``text`` lower-cased, as the regular
    expression ``[a-z0-9]+`` finds them there, at about half its cost: every other character
    becomes a space (a non-ASCII one encoded as ``?`` first, then one byte-table translation), and
    the text is split at spaces."""
    return text.lower().encode("ascii", "replace").translate(_SPACE_ALL_BUT_EN_WORD).decode("ascii").split()


def _with_bigrams(terms: list[str], ngram: int) -> list[str]:
    """Append adjacent-term bigrams joined by a space when ``ngram`` is 2."""
    if ngram < 2 or len(terms) < 2:
        return terms
    return terms + [f"{a} {b}" for a, b in zip(terms, terms[1:])]


class TermCache(dict[str, "str | None"]):
    """Each word's term (None: a word dropped), computed by ``term`` the first time the word is
    looked up, then kept: words recur (a question's in each of its options' queries, a corpus's
    everywhere), and a lookup costs a fraction of stemming (PyStemmer's own cache costs about five
    lookups a word and holds fewer words than a corpus has). Emptied when it holds ``LIMIT`` words,
    so that its memory stays bounded (some 20 MB) whatever text passes."""

    LIMIT = 1 << 17

    def __init__(self, term: Callable[[str], str | None]) -> None:
        super().__init__()
        self._compute = term

    def __missing__(self, word: str) -> str | None:
        if len(self) >= self.LIMIT:
            self.clear()
        term = self[word] = self._compute(word)
        return term


class EnglishTokenizer(Tokenizer):
    """Lower-case words minus stop words, Snowball-stemmed, optionally with bigrams."""

    lang = "en"

    def __init__(self, ngram: int = 1, stem: bool = True) -> None:
        if ngram not in (1, 2):
            raise OpenQAError(f"English n-gram order must be 1 or 2, not {ngram}")
        self.ngram = ngram
        self.stem = stem
        self._stop = stopwords.english()
        # No cache of PyStemmer's own: the term cache asks it for each distinct word once.
        self._stemmer = Stemmer.Stemmer("english", 0) if stem else None
        self._terms = TermCache(self._term)

    def words(self, text: str) -> list[str]:
        stop = self._stop
        return [w for w in english_words(text) if len(w) > 1 and w not in stop]

    def tokenize(self, text: str) -> list[str]:
        """The terms of ``words(text)``: each word's term found in the ``TermCache`` (the stemmer
        runs once per distinct word, not once per occurrence)."""
        terms = [t for t in map(self._terms.__getitem__, english_words(text)) if t is not None]
        return _with_bigrams(terms, self.ngram)

    def _term(self, word: str) -> str | None:
        """The term of one lower-case word: None for a stop word or a single character (``words``
        drops them), else the word, Snowball-stemmed when ``stem`` is on."""
        if len(word) < 2 or word in self._stop:
            return None
        return word if self._stemmer is None else self._stemmer.stemWord(word)

    def config(self) -> dict[str, Any]:
        return {"lang": "en", "ngram": self.ngram, "stem": self.stem, "stopwords": "nltk-english"}


class ChineseTokenizer(Tokenizer):
    """Characters plus character bigrams (``mode='char'``) or jieba words (``mode='word'``)."""

    lang = "zh"
    MODES = ("char", "word")

    def __init__(self, mode: str = "char", ngram: int = 2) -> None:
        if mode not in self.MODES:
            raise OpenQAError(f"Chinese tokenizer mode must be one of {self.MODES}, not {mode!r}")
        self.mode = mode
        self.ngram = ngram
        self._stop = stopwords.chinese()
        self._t2s: Any = None  # opencc.OpenCC("t2s"), made on first use

    def tokenize(self, text: str) -> list[str]:
        text = text.lower()
        if self.mode == "char":
            return self._char_terms(text)
        return self._word_terms(text)

    def _char_terms(self, text: str) -> list[str]:
        terms: list[str] = []
        for piece in _ZH_PIECE.findall(text):
            if piece[0].isascii():
                if len(piece) > 1:
                    terms.append(piece)
                continue
            terms.extend(piece)
            if self.ngram >= 2:
                terms.extend(piece[i : i + 2] for i in range(len(piece) - 1))
        return terms

    def _jieba_words(self, text: str, hmm: bool = False) -> list[str]:
        """jieba's words of ``text`` (as written), stop words and punctuation dropped; with ``hmm``
        also the words its dictionary lacks, found by its hidden Markov model."""
        import jieba  # imported here: loading its dictionary costs ~0.6 s

        jieba.setLogLevel(logging.WARNING)

        stop = self._stop
        return [w.strip() for w in jieba.lcut(text, HMM=hmm) if w.strip() and w not in stop and _HAS_WORD.search(w)]

    def _word_terms(self, text: str) -> list[str]:
        words = [w for w in self._jieba_words(text) if not (w.isascii() and len(w) < 2)]
        return _with_bigrams(words, self.ngram)

    def words(self, text: str) -> list[str]:
        """jieba's words of two or more characters, whatever the index's mode: a single character
        is mostly a function word or a piece of a longer word, so marking every shared one (and the
        character bigrams across words) would cover much of every evidence paragraph (measured by
        ``scripts/benchmarks/bench_highlights.py``). Its hidden Markov model joins the medical terms its
        dictionary lacks (头围, head circumference, would be 头|围 and never marked); the index's word
        mode keeps the dictionary's words alone, as its indexes were built."""
        return [w for w in self._jieba_words(text.lower(), hmm=True) if len(w) > 1]

    def prepare_query(self, text: str) -> str:
        """Convert traditional characters to simplified: the Chinese textbooks are simplified."""
        if self._t2s is None:
            from opencc import OpenCC

            self._t2s = OpenCC("t2s")
        return cast(str, self._t2s.convert(text))

    def config(self) -> dict[str, Any]:
        return {"lang": "zh", "mode": self.mode, "ngram": self.ngram}


TOKENIZERS: dict[str, type[Tokenizer]] = {"en": EnglishTokenizer, "zh": ChineseTokenizer}

#: Tokenizer settings of the BM25 indexes when the user gives none (chosen on dev, see README).
DEFAULT_CONFIGS: dict[str, dict[str, Any]] = {
    "en": {"lang": "en", "ngram": 1, "stem": True},
    "zh": {"lang": "zh", "mode": "char", "ngram": 2},
}


def make_tokenizer(config: dict[str, Any]) -> Tokenizer:
    """Build the tokenizer a config (as stored in a manifest) describes."""
    options = dict(config)
    lang = options.pop("lang", None)
    if lang not in TOKENIZERS:
        raise UsageError(f"unknown language {lang!r}: choose one of {sorted(TOKENIZERS)}")
    options.pop("stopwords", None)
    return TOKENIZERS[lang](**options)
