"""Questions typed or pasted by a person (``openqa answer``, the web page): free text, then
lettered option lines, turned into ``Question`` objects with one-line errors for bad input.

Pasted text is messy: blank lines from PDFs and web pages, Chinese option markers (``A：``,
``A、``, ``（A）``), organism names that look like option lines (``E. coli``, ``H. pylori``),
terminal escape codes. The rule that keeps it unambiguous: the options are a run of consecutive
lines lettered A, B, C, ... in order at the end of the question; a lettered line anywhere else
is question text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import cast

from openqa.data.questions import Question
from openqa.errors import OpenQAError, UsageError
from openqa.text.unicode import normalize

#: The most options a question may have (A-J) and the most characters a question may hold.
MAX_OPTIONS = 10
#: The letters an option may have, in order.
OPTION_LETTERS = "ABCDEFGHIJ"
MAX_CHARS = 20_000

#: ``A: text``, ``A. text``, ``(A) text``, ``A) text``, ``A=text``, ``A：text``, ``A、text``, ``（A）text``.
#: The option text is the rest of the line, stripped in Python: a lazy group followed by ``\s*$``
#: backtracks over every space run, quadratic in the line's length (a 136 KB line took 83 s).
#: Letters past J are matched too, so that an 11th option is refused as one, not read as question text.
_OPTION_LINE = re.compile(r"\s*[(（]?([A-Za-z])\s*[:.)=：、．）](.*)")
#: Terminal escape sequences (colours, cursor moves) and other control characters but tab and newline.
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


class TooLongError(OpenQAError):
    """A question (with its options) over ``MAX_CHARS`` characters."""


def clean_text(text: str) -> str:
    """Text without terminal escape codes or control characters, with Windows/old-Mac line ends made
    ``\\n``, and normalised as the corpus is (``openqa.text.unicode.normalize``: full-width option
    letters such as ``Ａ：`` then read as ``A:``, a zero-width space cannot hide a word)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return normalize(_ESCAPES.sub("", text))


#: A UTF-16 surrogate: what Python makes of a byte that is not UTF-8 in a command line or a terminal.
_SURROGATE = re.compile("[\ud800-\udfff]")


def undecodable_replaced(text: str) -> str:
    """``text`` with each lone surrogate (a byte that was not UTF-8 where it was typed) as U+FFFD:
    a question typed or given on the command line is answered, not refused for a stray byte."""
    return _SURROGATE.sub("\ufffd", text)


def make_question(text: str, options: dict[str, str], qid: str = "interactive") -> Question:
    """A question from free text and lettered options (letters A to J), with one-line errors for bad input."""
    if not isinstance(text, str):
        raise UsageError(f"the question must be text, not {type(text).__name__}")
    if len(options) > MAX_OPTIONS:
        raise UsageError(f"at most {MAX_OPTIONS} options (A-J), not {len(options)}")
    for letter, value in options.items():
        if not isinstance(letter, str) or len(letter) != 1 or letter not in OPTION_LETTERS:
            raise UsageError(f"option letters are A to J, not {letter!r}")
        if not isinstance(value, str):
            raise UsageError(f"option {letter} must be text, not {type(value).__name__}")
    text = clean_text(undecodable_replaced(text)).strip()
    options = {letter: clean_text(undecodable_replaced(value)).strip() for letter, value in options.items()}
    if not text:
        raise OpenQAError("empty question: give the question text before the options")
    if len(options) < 2:
        raise OpenQAError("give at least two options, one per line as 'A: text' (or --option A=text)")
    empty = [k for k, v in options.items() if not v]
    if empty:
        raise OpenQAError(f"option {empty[0]} is empty")
    size = len(text) + sum(map(len, options.values()))
    if size > MAX_CHARS:
        raise TooLongError(f"question too long: {size} characters (at most {MAX_CHARS})")
    first = next(iter(options))
    return Question(qid, text, dict(options), first, options[first], None, None)


def parse_option_flags(flags: list[str]) -> dict[str, str]:
    """``["A=text", ...]`` from ``--option`` flags into an ordered dict; a repeated letter is refused."""
    options: dict[str, str] = {}
    for flag in flags:
        letter, sep, text = flag.partition("=")
        letter = normalize(letter).strip().upper()
        if not sep or len(letter) != 1 or not letter.isalpha():
            raise OpenQAError(f"--option must look like 'A=text', not {flag!r}")
        if letter in options:
            raise OpenQAError(f"option {letter} is given twice ({options[letter]!r} and {text.strip()!r})")
        options[letter] = text.strip()
    return options


@dataclass
class _Line:
    """A non-blank line and, when it looks like an option line, its letter and text."""

    text: str
    letter: str | None
    option: str


def _lines(block: str) -> list[_Line]:
    out = []
    for raw in clean_text(block).split("\n"):
        if not raw.strip():
            continue
        match = _OPTION_LINE.match(raw)
        option = match.group(2).strip() if match else ""
        letter = match.group(1).upper() if match and option else None
        out.append(_Line(raw.strip(), letter, option))
    return out


def _split(lines: list[_Line]) -> list[tuple[list[str], dict[str, str]]]:
    """Group lines into (question lines, options): each option run A, B, C, ... (two or more)
    closes a question; lettered lines outside such a run are question text."""
    questions: list[tuple[list[str], dict[str, str]]] = []
    text: list[str] = []
    run: list[_Line] = []  # option lines: each has a letter

    def close_run() -> None:
        nonlocal text
        if len(run) >= 2:
            questions.append((text, {cast(str, line.letter): line.option for line in run}))
            text = []
        else:
            text.extend(line.text for line in run)
        run.clear()

    for line in lines:
        if run and line.letter == chr(ord(cast(str, run[-1].letter)) + 1):
            run.append(line)
            continue
        if run and line.letter in {r.letter for r in run}:
            raise OpenQAError(f"option {line.letter} is given twice: {line.text[:60]!r}")
        close_run()
        if line.letter == "A":
            run.append(line)
        else:
            text.append(line.text)
    close_run()
    if text:
        questions.append((text, {}))
    return questions


def parse_block(block: str, qid: str = "interactive") -> Question:
    """One pasted question: question lines (blank lines allowed), then option lines A, B, ... last."""
    groups = _split(_lines(block))
    if len(groups) > 1 and groups[0][1]:
        extra = " ".join(groups[1][0])[:60] or "more options"
        raise OpenQAError(f"text after the options: {extra!r}; put the options last (one question at a time)")
    text, options = groups[0] if groups else ([], {})
    return make_question(" ".join(text), options, qid)


def parse_many(block: str, qid_prefix: str = "q") -> list[Question]:
    """Several pasted questions one after another, each ending with its option lines."""
    groups = _split(_lines(block))
    if not groups:
        raise OpenQAError("no question in the input")
    questions = []
    for number, (text, options) in enumerate(groups, start=1):
        try:
            questions.append(make_question(" ".join(text), options, f"{qid_prefix}{number}"))
        except OpenQAError as exc:
            raise OpenQAError(f"question {number}: {exc}") from None
    return questions


def is_complete(block: str) -> bool:
    """Whether ``block`` ends with a run of at least two option lines (so it can be solved)."""
    try:
        groups = _split(_lines(block))
    except OpenQAError:
        return True  # let the parser report the problem
    return bool(groups) and len(groups[-1][1]) >= 2
