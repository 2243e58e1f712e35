"""Tests for openqa.corpus.clean: each OCR repair on synthetic noise, idempotence, real data."""

from __future__ import annotations

import random
import re
from itertools import islice
from pathlib import Path

import pytest

from openqa.corpus.clean import HEADER_MIN_REPEATS, clean_book, clean_line


def assert_well_formed(cleaned: str) -> None:
    """One paragraph per line: no empty lines, no surrounding whitespace."""
    for line in cleaned.split("\n"):
        assert line, f"empty line in {cleaned!r}"
        assert line == line.strip(), f"untrimmed line {line!r}"


# --- single-line repairs ---------------------------------------------------------------


def test_ligatures_are_expanded():
    assert clean_line("The ﬁrst ﬂuid ﬀect", "en") == "The first fluid ffect"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Com\ufeffm\u200bunication", "Communication"),  # BOM and zero-width space inside a word
        ("in\u00adflammation", "inflammation"),  # soft hyphen
        ("coiling\x8e\x8ftranscription", "coiling transcription"),  # PDF glyphs as C1 controls
        ("PCSK9 \uf022serum LDL", "PCSK9 serum LDL"),  # private-use glyph
    ],
)
def test_invisible_and_control_characters_are_removed(raw, expected):
    assert clean_line(raw, "en") == expected


def test_whitespace_is_collapsed_and_stripped():
    assert clean_line("  many \t spaces\u00a0and\u2003em  spaces  ", "en") == "many spaces and em spaces"


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("Introduction .......... 12", "Introduction 12"),  # dot leader
        ("Name: __________ Date", "Name: Date"),  # form blank
        ("End of section ----- *****", "End of section"),
        ("The reaction is strongly positive (++++).", "The reaction is strongly positive (++++)."),
        ("Wait... then e.g. this", "Wait... then e.g. this"),  # fewer than 4 repeats is text
    ],
)
def test_repeated_character_noise_is_blanked(raw, expected):
    assert clean_line(raw, "en") == expected


@pytest.mark.parametrize("line", ["12", "  7  ", "Page 12", "page 3", "- 12 -", "— 214 —", "xii", "iv"])
def test_page_number_lines_are_debris(line):
    assert clean_line(line, "en") == ""


@pytest.mark.parametrize(
    "line", ["Fig.", "Fig. 1.3", "Figure 2-4", "Table 3.1", "Figs. 9.25A,", "Fig. 2.20, cont’d", "TABLE 7"]
)
def test_figure_and_table_stubs_are_debris(line):
    assert clean_line(line, "en") == ""


@pytest.mark.parametrize(
    "line",
    [
        "Fig. 1.3 Cytoskeletal elements and cell–cell interactions.",
        "Table 9.4: Summary of Pneumoconioses",
        "Figure 2-4 shows the cell cycle.",
    ],
)
def test_figure_captions_with_text_are_kept(line):
    assert clean_line(line, "en") == line


@pytest.mark.parametrize(
    "line", ["2.", "(A)", "12.5 / 3.4 (±0.2) 17 %", "F91.3", "• • •", "V61.21 995.52 995.52"]
)
def test_lines_made_mostly_of_symbols_and_digits_are_debris(line):
    assert clean_line(line, "en") == ""


@pytest.mark.parametrize("line", ["Gene activation", "A", "5-HT3 receptor", "IL-2", "pH 7.4"])
def test_short_lines_with_letters_are_kept(line):
    assert clean_line(line, "en") == line


def test_unknown_language_is_refused():
    with pytest.raises(ValueError, match="unknown language"):
        clean_line("text", "fr")
    with pytest.raises(ValueError, match="unknown language"):
        clean_book("text", "fr")


# --- whole-book repairs ------------------------------------------------------------------


def test_book_has_one_paragraph_per_line():
    raw = "First paragraph.\r\n\r\n\r\n  Second   paragraph.  \n\n\t\nThird.\n"
    assert clean_book(raw, "en") == "First paragraph.\nSecond paragraph.\nThird."


def test_empty_and_debris_only_books_clean_to_nothing():
    assert clean_book("", "en") == ""
    assert clean_book("\n\n12\n\n-----\n\nFig. 2.1\n", "en") == ""


def test_word_hyphenated_across_a_line_break_is_joined():
    raw = "Acute inflam-\nmation is a rapid response.\n\nIt is fol-\nlowed by re-\npair."
    assert clean_book(raw, "en") == "Acute inflammation is a rapid response.\nIt is followed by repair."


def test_hyphen_join_skips_blank_lines_and_page_numbers_between_the_halves():
    raw = "Acute inflam-\n\n214\n\nmation is a rapid response."
    assert clean_book(raw, "en") == "Acute inflammation is a rapid response."


def test_real_hyphens_are_kept():
    raw = "A beta-blocker lowers the heart rate.\nCardioselective beta-\nBlockers are preferred in asthma."
    # inside a line the hyphen is real; before a capital the next line is a new paragraph
    assert clean_book(raw, "en") == raw


def test_chinese_lines_are_never_hyphen_joined():
    raw = "DNA-\nbinding 蛋白"
    assert clean_book(raw, "zh") == raw


def test_running_header_is_dropped():
    words = ["one", "two", "three", "four", "five", "six"]
    pages = [
        f"Chapter 3 Inflammation\n\nParagraph {word} describes the response of tissue.\n\n{page}"
        for page, word in enumerate(words, start=101)
    ]
    cleaned = clean_book("\n\n".join(pages), "en").split("\n")
    assert cleaned == [f"Paragraph {word} describes the response of tissue." for word in words]


def test_lines_repeated_less_often_or_reading_as_prose_are_kept():
    rare = ["Pathogenesis", "Text A."] * (HEADER_MIN_REPEATS - 1)
    prose = ["Rest. Then measure again.", "Text B."] * (HEADER_MIN_REPEATS + 2)
    cleaned = clean_book("\n".join(rare + prose), "en").split("\n")
    assert cleaned.count("Pathogenesis") == HEADER_MIN_REPEATS - 1
    assert cleaned.count("Rest. Then measure again.") == HEADER_MIN_REPEATS + 2
    assert "Text B." not in cleaned  # a short line ending a sentence, repeated: a footer


def test_header_variants_differing_only_in_noise_are_counted_together():
    raw = "\n".join(
        f"Available @ StudentConsult.com{' ' * i}\nBody paragraph {i} about the heart." for i in range(6)
    )
    cleaned = clean_book(raw, "en")
    assert "StudentConsult" not in cleaned
    assert cleaned.count("\n") == 5


def test_chinese_text_is_kept_and_full_width_forms_normalised():
    raw = "病理学（pathology）是研究疾病的医学基础学科。\n\n［治疗］\n１２\n血压＞１４０／９０ｍｍＨｇ为高血压。"
    expected = "病理学(pathology)是研究疾病的医学基础学科。\n[治疗]\n血压>140/90mmHg为高血压。"
    assert clean_book(raw, "zh") == expected


# --- idempotence ---------------------------------------------------------------------------

NOISY_BOOKS = [
    ("en", "The ﬁrst  step\u200b is inflam-\n\n12\n\nmation.\n\nFig. 1.1\n\n........\n\nNext para-\ngraph."),
    ("en", "\n".join(f"Header\nBody text {i}.\n- {i} -" for i in range(7)) + "\nFig-\nure 2.1\nxi-\ni"),
    # the joins make a fifth "Gene activation": a repeated line only the second round sees
    ("en", "Gene acti-\nvation\n" * 4 + "Gene activation\nGenes are switched on by factors."),
    ("zh", "第一章　绪论\n\n病理学（ｐａｔｈｏｌｏｇｙ）……是研究疾病的学科。\n\n\ufeff——————\n\nxii"),
]


@pytest.mark.parametrize("lang, raw", NOISY_BOOKS)
def test_cleaning_a_noisy_book_twice_changes_nothing(lang, raw):
    once = clean_book(raw, lang)
    assert once  # something survives
    assert_well_formed(once)
    assert clean_book(once, lang) == once
    assert [clean_line(line, lang) for line in once.split("\n")] == once.split("\n")


def test_clean_text_is_left_unchanged():
    text = "Gene activation\nThe genome has about 3.2 billion DNA base pairs.\nβ-cells secrete insulin."
    assert clean_book(text, "en") == text
    text = "病理学是研究疾病的学科。\n第二段。"
    assert clean_book(text, "zh") == text


def test_idempotence_on_random_noise():
    pieces = list("ab xiv.-_*+:|\t\n") + ["ﬁ", "\u0301", "\u200b", "\x81", "˜", "…", "（", "病理"]
    pieces += ["Fig. ", "Page ", "-\n", "\n\n", "Header\n", "１２"]
    rng = random.Random(20240601)
    for _ in range(300):
        raw = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 200)))
        for lang in ("en", "zh"):
            once = clean_book(raw, lang)
            assert clean_book(once, lang) == once, raw
            if once:
                assert_well_formed(once)


# --- real data -----------------------------------------------------------------------------


def test_real_book_excerpt_cleans_idempotently(medqa_dir: Path):
    path = medqa_dir / "textbooks" / "en" / "Pathology_Robbins.txt"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    with path.open(encoding="utf-8") as f:
        raw = "".join(islice(f, 2000))
    once = clean_book(raw, "en")
    assert once
    assert_well_formed(once)
    assert clean_book(once, "en") == once
    lines = once.split("\n")
    assert "http://ebooksmedicine.net" not in lines  # the watermark repeated on every page
    assert not any(re.fullmatch(r"Fig\.(\s*[\d.]+)?", line) for line in lines)
    assert sum(len(line) for line in lines) > 0.9 * len(raw.replace("\n", ""))  # prose survives
