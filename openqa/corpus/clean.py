"""OCR clean-up of MedQA textbooks: one cleaned paragraph per line, and idempotent.

``clean_line`` repairs one line, in this order: drop invisible characters and NFKC-normalise
(``openqa.text.unicode.normalize``, which questions get too), blank private-use glyphs,
blank out repeated-character noise, normalise whitespace, then return "" if what is left
is a page number, a figure/table stub or mostly non-letters. ``clean_book`` cleans every
line, drops empty lines, then drops running headers/footers and (English only) joins
words hyphenated across a line break until neither changes anything, so cleaning
cleaned text returns it unchanged.
"""

from __future__ import annotations

import re
from collections import Counter

from openqa.languages import LANGS, LANGUAGES
from openqa.text.unicode import normalize

#: A short line seen at least this often in one book is a running header or footer.
HEADER_MIN_REPEATS = 5
#: Only lines shorter than this many characters can be running headers or footers.
HEADER_MAX_CHARS = 60
#: A line whose letters (CJK characters count) are a smaller share of its non-space
#: characters than this is table or figure debris.
MIN_LETTER_SHARE = 0.4

# Private-use glyphs are PDF extraction leftovers (bullets, arrows); they become a space so the
# words around them stay apart.
_PRIVATE_USE = re.compile(r"[\ue000-\uf8ff\U000f0000-\U0010ffff]")
# The same non-alphanumeric character 4+ times ("....", "-----", "____", "****").
# "+" is exempt: "(++++)" is a clinical grade, not noise.
_REPEATED_CHAR = re.compile(r"([^\w\s+]|_)\1{3,}")
# "12", "Page 12", "- 12 -", "p. 7", and lower-case roman numerals up to xxxix ("xii").
_PAGE_NUMBER = re.compile(
    r"(?:(?i:page|p\.)\s*)?[-–—|]?\s*(?:\d{1,4}|(?=[ivx])x{0,3}(?:ix|iv|v?i{0,3}))\s*[-–—|]?"
)
# A figure/table label with at most a number after it: "Fig.", "Fig. 1.3", "Figure 2-4",
# "Table 3.1", "Figs. 9.25A,", "Fig. 2.20, cont'd". A caption with words after it is kept.
_FIGURE_STUB = re.compile(
    r"(?i:figs?|figures?|tables?|tab)\.?"
    r"(?:\s*[A-Za-z]?\d+(?:[.\-–]\d+)*[A-Za-z]?)?"
    r"(?:\s*[,;:]?\s*(?i:cont['’]?d|continued))?"
    r"[\s.,;:()]*"
)
# A sentence end followed by more text: such a line is prose, never a running header.
_SENTENCE_INSIDE = re.compile(r"(?:[.!?]\s|。)\s*\S")
# The end of a line whose last word goes on in the next line: a letter, then "-".
_HYPHENATED_END = re.compile(r"[A-Za-z]-\Z")


def clean_book(text: str, lang: str) -> str:
    """Clean one whole book into one paragraph per line, so paragraphs can be split on "\\n"."""
    _check_lang(lang)
    lines = [cleaned for line in text.splitlines() if (cleaned := clean_line(line, lang))]
    # A join can make a new repeated line or debris, so repeat until nothing changes;
    # a round that changes anything removes a line, so this ends.
    while True:
        kept = _drop_running_headers(lines)
        if LANGUAGES[lang].spaced:  # words broken at a line end with a hyphen
            kept = _join_hyphenated(kept, lang)
        if kept == lines:
            return "\n".join(lines)
        lines = kept


def clean_line(line: str, lang: str) -> str:
    """Clean one line of OCR text; "" when the line is pure debris (page number, stub, noise)."""
    _check_lang(lang)
    line = _PRIVATE_USE.sub(" ", normalize(line))  # normalize: as every question is
    line = _blank_repeated_chars(line)
    line = _normalise_whitespace(line)
    return "" if _is_debris(line) else line


def _check_lang(lang: str) -> None:
    """Refuse a language the rules were not written for, rather than clean it wrongly."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}: choose one of {LANGS}")


def _blank_repeated_chars(line: str) -> str:
    """Replace dot leaders, rules and other runs of one symbol with a space."""
    return _REPEATED_CHAR.sub(" ", line)


def _normalise_whitespace(line: str) -> str:
    """Collapse every run of whitespace (tabs, line separators) to one space and strip."""
    return " ".join(line.split())


def _is_debris(line: str) -> bool:
    """Whether a cleaned line holds no text: empty, a page number, a figure stub, or symbols."""
    if not line or _PAGE_NUMBER.fullmatch(line) or _FIGURE_STUB.fullmatch(line):
        return True
    letters = sum(map(str.isalpha, line))  # CJK characters are letters too
    return letters < MIN_LETTER_SHARE * (len(line) - line.count(" "))


def _drop_running_headers(lines: list[str]) -> list[str]:
    """Drop short lines repeated ``HEADER_MIN_REPEATS`` times or more, unless they read as prose."""
    counts = Counter(line for line in lines if len(line) < HEADER_MAX_CHARS)
    headers = {
        line
        for line, n in counts.items()
        if n >= HEADER_MIN_REPEATS and not _SENTENCE_INSIDE.search(line)
    }
    return [line for line in lines if line not in headers] if headers else lines


def _join_hyphenated(lines: list[str], lang: str) -> list[str]:
    """Join words split across lines, "inflam-" + "mation..." -> "inflammation...".

    English paragraphs end with a line break, so only a next line starting with a
    lower-case letter continues the word. The joined line is cleaned again, since
    the join can make it debris ("Fig-" + "ure 2.1").
    """
    joined: list[str] = []
    for line in lines:
        if joined and "a" <= line[0] <= "z" and _HYPHENATED_END.search(joined[-1]):
            line = clean_line(joined.pop()[:-1] + line, lang)
            if not line:
                continue
        joined.append(line)
    return joined
