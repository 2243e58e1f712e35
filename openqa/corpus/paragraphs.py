"""Textbook paragraphs with stable ids (book + position), read from a MedQA data folder."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from openqa.corpus.clean import clean_book
from openqa.errors import DataError
from openqa.languages import LANGUAGES

#: Bump when cleaning or segmentation changes, so indexes built before are refused.
SEGMENTATION_VERSION = 1

_EN_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Paragraph:
    """One retrievable unit of a textbook: ``pid`` is ``book:position``."""

    pid: str
    book: str
    text: str


def book_files(data_dir: Path, lang: str) -> list[Path]:
    """The ``.txt`` books of a language, sorted by name; a clear error if there are none."""
    if lang not in LANGUAGES:
        raise DataError(f"unknown corpus language {lang!r}: choose one of {', '.join(LANGUAGES)}")
    folder = Path(data_dir) / LANGUAGES[lang].textbooks
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise DataError(f"no textbooks (*.txt) found in {folder}")
    return files


def corpus_checksum(files: list[Path]) -> str:
    """SHA-256 over book names and bytes, plus the segmentation version: an index's identity."""
    return corpus_checksums(files)[0]


def corpus_checksums(files: list[Path]) -> tuple[str, dict[str, str]]:
    """The corpus checksum (``corpus_checksum``) and each book's own SHA-256 by name (file stem),
    from one read of each book: with the book names, the corpus fingerprint an index's manifest,
    and every record made over it, carry."""
    digest = hashlib.sha256(f"segmentation-v{SEGMENTATION_VERSION}".encode())
    books = {}
    for path in files:
        data = path.read_bytes()
        digest.update(path.name.encode())
        digest.update(data)
        books[path.stem] = hashlib.sha256(data).hexdigest()
    return digest.hexdigest(), books


def split_long(text: str, lang: str) -> list[str]:
    """Cut a paragraph longer than the language's ``max_chars`` into pieces at sentence ends."""
    language = LANGUAGES[lang]
    limit = language.max_chars
    if len(text) <= limit:
        return [text]
    joiner = language.joiner
    pieces, current = [], ""
    for sentence in language.sentence_end.split(text):
        if current and len(current) + len(sentence) + 1 > limit:
            pieces.append(current)
            current = ""
        current = f"{current}{joiner}{sentence}" if current else sentence
        while len(current) > limit:  # one sentence longer than the limit
            pieces.append(current[:limit])
            current = current[limit:]
    if current:
        pieces.append(current)
    return pieces


def book_paragraphs(path: Path, lang: str) -> list[Paragraph]:
    """Clean one book and split it into paragraphs (one per cleaned line), dropping debris."""
    book = path.stem
    try:
        raw = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    texts = [
        piece
        for line in clean_book(raw, lang).split("\n")
        if len(line) >= LANGUAGES[lang].min_chars
        for piece in split_long(line, lang)
    ]
    return [Paragraph(f"{book}:{i}", book, text) for i, text in enumerate(texts)]


def read_paragraphs(data_dir: Path, lang: str) -> Iterator[Paragraph]:
    """Every paragraph of every book of ``lang``, books in name order."""
    for path in book_files(data_dir, lang):
        yield from book_paragraphs(path, lang)


def corpus_stats(paragraphs: list[Paragraph], lang: str) -> dict[str, float]:
    """The paper's Table 4 columns: tokens are words (en) or characters (zh)."""
    vocabulary: Counter[str] = Counter()
    lengths = []
    for p in paragraphs:
        tokens = _EN_WORD.findall(p.text.lower()) if LANGUAGES[lang].spaced else list(p.text.replace(" ", ""))
        vocabulary.update(tokens)
        lengths.append(len(tokens))
    n = len(lengths)
    return {
        "books": len({p.book for p in paragraphs}),
        "paragraphs": n,
        "tokens": sum(lengths),
        "vocabulary": len(vocabulary),
        "avg_paragraph_length": round(sum(lengths) / n, 1) if n else 0.0,
        "max_paragraph_length": max(lengths, default=0),
    }
