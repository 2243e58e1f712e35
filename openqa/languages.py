"""The languages openqa reads, and everything that differs between them, in one place.

MedQA comes in English (USMLE and the Taiwanese exam in English) and simplified Chinese (MCMLE,
and the Taiwanese exam converted); each language has its own textbooks, paragraph rules, default
exam and way of building a question-only query. Modules that treat the languages differently read
it here instead of comparing language codes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from openqa.arguments import shown
from openqa.errors import UsageError


@dataclass(frozen=True)
class Language:
    """One corpus language and the rules that depend on it."""

    code: str
    name: str
    #: The exam a question file or pasted question is scored as when none is named.
    default_exam: str
    #: Where the language's books live under MedQA's ``data_clean/``.
    textbooks: str
    #: Whether words are separated by spaces (pieces of text are joined with a space; a Lucene or
    #: Elasticsearch index holds single words).
    spaced: bool
    #: What the paper's Table 4 counts as a token.
    token_unit: str
    #: Paragraphs shorter than this many characters (headings, debris) are dropped...
    min_chars: int
    #: ... and longer ones are cut at sentence ends into pieces of at most this many.
    max_chars: int
    #: Where sentences end.
    sentence_end: re.Pattern[str]
    #: Whether the medical filter (and MetaMap phrases) apply to its questions; without, the
    #: question-only query is the full text and tuning tries only that.
    medical_filter: bool

    @property
    def joiner(self) -> str:
        """What goes between two pieces of text that are put together."""
        return " " if self.spaced else ""

    @property
    def question_query(self) -> str:
        """The query mode of question-only retrieval (``eval --retrieval``, LLM evidence)."""
        return "filter" if self.medical_filter else "full"

    def other(self) -> str | None:
        """The other language, which a question that matches nothing here may be in."""
        others = [code for code in LANGUAGES if code != self.code]
        return others[0] if len(others) == 1 else None


LANGUAGES: dict[str, Language] = {
    "en": Language("en", "English", "usmle", "textbooks/en", True, "words", 40, 2000,
                   re.compile(r"(?<=[.!?])\s+"), True),
    "zh": Language("zh", "Chinese", "mcmle", "textbooks/zh_paragraph", False, "characters", 10, 1000,
                   re.compile(r"(?<=[。！？；])"), False),
}
#: The language codes, for command-line choices.
LANGS: tuple[str, ...] = tuple(LANGUAGES)
#: The language of a command that names none.
DEFAULT_LANG = "en"


def language(code: str) -> Language:
    """The corpus language registered under ``code``, with the rules that depend on it (its name,
    default exam, where its books are, whether words are spaced, what a token is, where sentences end).

    :param code: ``en`` or ``zh``.
    :returns: its ``Language``.
    :raises OpenQAError: on an unknown code (one line listing the known ones)."""
    if not isinstance(code, str) or code not in LANGUAGES:
        raise UsageError(f"unknown language {shown(code)}: choose one of {', '.join(LANGS)}")
    return LANGUAGES[code]


def known_languages() -> list[Language]:
    """Every corpus language openqa knows (``language`` of each code), in registry order.

    :returns: the ``Language`` of each code."""
    return list(LANGUAGES.values())
