"""Where an index's paragraphs come from: the MedQA textbooks, or a user's named corpus (a folder
of books or a JSONL file of passages), streamed one paragraph at a time, and what identifies each
in an index's manifest.

- **Textbooks** (the default): the books of ``data_clean/textbooks/<lang>``; ids ``book:position``.
- **A folder**: one book per ``.txt`` or ``.md`` file (not sub-folders), cleaned and split exactly
  like the textbooks (``clean.py``, ``paragraphs.py``); ids ``book:position``, book = file stem.
- **A JSONL file**: already-split passages, one per line, taken as they are, in any of the formats
  of ``JSONL_FORMATS``, told apart by their keys: openqa's ``{"id", "title", "text"}``, MedRAG's
  chunks ``{"id", "title", "content", "contents"}``, BEIR's ``corpus.jsonl`` ``{"_id", "title",
  "text"}`` and Pyserini's ``{"id", "contents"}`` (id = the record's id, book = its title, or the
  file's name where a format has none or leaves it empty). Every line is checked before anything
  is indexed, so a bad line stops ``openqa index`` at once with a ``file:line`` error: bad JSON,
  not UTF-8, no text field, a record of another format than the file's first, a field missing,
  empty or of the wrong type, a repeated id.

A named corpus' manifest entries are ``corpus`` (its name), ``corpus_kind``, ``corpus_source``
(the absolute path it was built from) and ``corpus_checksum`` (SHA-256 of its bytes, as for the
textbooks); the textbooks' indexes have no ``corpus`` entry, so indexes built before named
corpora existed open unchanged. A corpus of books also records ``books`` (their names) and
``book_sha256`` (each book's SHA-256): with the checksum, the corpus fingerprint
(``retrieval.manifest.corpus_fingerprint``) that tuned settings and results carry.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from openqa.corpus.paragraphs import (
    SEGMENTATION_VERSION,
    Paragraph,
    book_files,
    book_paragraphs,
    corpus_checksums,
)
from openqa.errors import DataError
from openqa.jsonl import decode_at, numbered_lines, text_line

#: Kinds of corpora and what each is.
TEXTBOOKS, FOLDER, JSONL = "textbooks", "folder", "jsonl"
#: Files of a folder corpus that are books.
BOOK_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class JsonlFormat:
    """A JSON-lines passage format: its name, the key that tells it apart (with ``text``, which it
    reads as the passage), and which keys hold the id and the title (None: none; ``title_optional``:
    it may be missing or empty, as BEIR's often is)."""

    name: str
    mark: str
    id: str
    title: str | None
    text: str
    title_optional: bool = False

    def fields(self) -> tuple[str, ...]:
        """The keys every record must hold (non-empty)."""
        return tuple(k for k in (self.id, None if self.title_optional else self.title, self.text) if k)


#: The passage formats a JSONL corpus may be in, in the order their keys are tried.
JSONL_FORMATS = (
    JsonlFormat("BEIR corpus.jsonl", mark="_id", id="_id", title="title", text="text", title_optional=True),
    JsonlFormat("MedRAG chunks", mark="content", id="id", title="title", text="content"),
    JsonlFormat("openqa passages", mark="text", id="id", title="title", text="text"),
    JsonlFormat("Pyserini JSON lines", mark="contents", id="id", title=None, text="contents"),
)
#: What a record without any format's text field is told.
TEXT_FIELDS = "'text' (openqa, BEIR), 'content' (MedRAG) or 'contents' (Pyserini)"


def jsonl_format(record: dict[str, Any]) -> JsonlFormat | None:
    """The format whose key ``record`` holds (the first in ``JSONL_FORMATS``), None if none."""
    return next((f for f in JSONL_FORMATS if f.mark in record), None)

#: The longest line (one passage) a JSONL corpus may hold.
MAX_RECORD_BYTES = 64 << 20
#: A corpus name: it becomes part of index folder and settings file names.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_name(name: str, what: str = "corpus name", flag: str = "--name") -> str:
    """``name`` if it can name a corpus, or another thing that becomes part of file names (``what``,
    given by ``flag``: an ensemble), with letters, digits, ``.``, ``_``, ``-`` (at most 64, starting
    with a letter or digit), else a one-line error."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        from openqa.arguments import shown

        given = repr(name) if isinstance(name, str) else shown(name)  # a text's repr is one line, an array's is not
        raise DataError(f"{what} {given} is not usable: give {flag} with letters, digits, '.', '_' or '-' "
                        "(at most 64, starting with a letter or digit)")
    return name


@dataclass(frozen=True)
class Corpus:
    """A source of paragraphs in one language: ``kind`` textbooks (``path`` is the MedQA data folder,
    ``name`` None), folder or jsonl (``path`` is the folder or file, ``name`` what indexes call it)."""

    lang: str
    kind: str
    path: Path
    name: str | None = None

    def paragraphs(self) -> Iterator[Paragraph]:
        """Every paragraph in index order, read as it is needed (nothing is held)."""
        if self.kind == JSONL:
            yield from jsonl_paragraphs(self.path)
            return
        for path in self.books():
            yield from book_paragraphs(path, self.lang)

    def books(self) -> list[Path]:
        """The book files of a textbooks or folder corpus, sorted by name."""
        if self.kind == TEXTBOOKS:
            return book_files(self.path, self.lang)
        return folder_books(self.path)

    def identity(self) -> dict[str, Any]:
        """The manifest entries that identify this corpus (a JSONL file is checked line by line here)."""
        named = {} if self.name is None else {
            "corpus": self.name, "corpus_kind": self.kind, "corpus_source": str(self.path.resolve()),
        }
        if self.kind == JSONL:
            return {"lang": self.lang, **named, "corpus_checksum": check_jsonl(self.path),
                    "segmentation": SEGMENTATION_VERSION}
        files = self.books()
        checksum, books = corpus_checksums(files)
        return {"lang": self.lang, **named, "books": [f.stem for f in files], "book_sha256": books,
                "corpus_checksum": checksum, "segmentation": SEGMENTATION_VERSION}


def corpus_tag(corpus: str | None) -> str:
    """How names of a named corpus' own files end (its tuned settings, evidence caches and result
    files: ``-corpus-NAME``), so they never replace the textbooks'; nothing for the textbooks."""
    return f"-corpus-{corpus}" if corpus else ""


def textbooks(data_dir: Path, lang: str) -> Corpus:
    """The MedQA textbooks of ``lang`` under a ``data_clean`` folder (the default corpus)."""
    return Corpus(lang, TEXTBOOKS, Path(data_dir))


def user_corpus(path: Path, lang: str, name: str | None = None) -> Corpus:
    """A folder of books or a JSONL file of passages, named ``name`` (default: the folder's or
    file's name without suffix)."""
    path = Path(path)
    if path.is_dir():
        kind = FOLDER
    elif path.is_file():
        kind = JSONL
    else:
        raise DataError(f"corpus not found: {path} (give a folder of .txt/.md books or a .jsonl file)")
    return Corpus(lang, kind, path, check_name(name if name is not None else path.stem))


def one_word(text: str) -> bool:
    """Whether ``text`` can be an id in a TREC run line: printable, no white space."""
    return text.isprintable() and not any(c.isspace() for c in text)


def folder_books(folder: Path) -> list[Path]:
    """The ``.txt`` and ``.md`` books of a folder, sorted by name; two files of one stem would give
    paragraphs the same ids, so they are refused."""
    files = sorted(p for p in Path(folder).iterdir() if p.suffix in BOOK_SUFFIXES and p.is_file())
    if not files:
        raise DataError(f"no books ({', '.join('*' + s for s in BOOK_SUFFIXES)}) found in {folder}")
    stems: dict[str, Path] = {}
    for path in files:
        if not one_word(path.stem):
            raise DataError(f"{path}: a book's name makes its paragraph ids (book:position), and a TREC run cannot carry "
                            "white space or control characters in an id: rename it (e.g. with _ for spaces)")
        if path.stem in stems:
            raise DataError(f"{folder}: {stems[path.stem].name} and {path.name} are both book {path.stem!r} "
                            "(paragraph ids are book:position): rename one")
        stems[path.stem] = path
    return files


def parse_record(path: Path, number: int, raw: bytes, expected: JsonlFormat | None = None,
                 ) -> tuple[Paragraph, JsonlFormat] | None:
    """The paragraph on line ``number`` of a JSONL corpus and its format (None for a blank line),
    or a ``file:line`` error saying what is wrong with it; ``expected`` is the format of the
    file's first record, which every later one must share."""
    where = f"{path}:{number}"
    line = text_line(where, raw)
    if not line.strip():
        return None
    record = decode_at(where, line)
    if not isinstance(record, dict):
        raise DataError(f"{where}: a JSON {type(record).__name__} where a record {{\"id\", \"title\", \"text\"}} was expected")
    form = jsonl_format(record)
    if form is None:
        raise DataError(f"{where}: the record has no text field: {TEXT_FIELDS}")
    if expected is not None and form != expected:
        raise DataError(f"{where}: a {form.name} record in a file of {expected.name}: one format per file")
    for field in form.fields():
        value = record.get(field)
        if value is None:
            raise DataError(f"{where}: the record has no {field!r}")
        if field == form.id and isinstance(value, int) and not isinstance(value, bool):
            continue
        if not isinstance(value, str):
            raise DataError(f"{where}: {field!r} is a JSON {type(value).__name__}, not a string")
        if not value.strip():
            raise DataError(f"{where}: {field!r} is empty")
    title = record.get(form.title) if form.title else None
    if title is not None and not isinstance(title, str):
        raise DataError(f"{where}: {form.title!r} is a JSON {type(title).__name__}, not a string")
    book = title if title and title.strip() else path.stem
    pid = str(record[form.id])
    if not one_word(pid):
        raise DataError(f"{where}: id {pid!r} holds white space or control characters, which a TREC run cannot carry: "
                        "give one-word ids")
    return Paragraph(pid, book, record[form.text]), form


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Numbered raw lines of a JSONL corpus, each at most ``MAX_RECORD_BYTES``."""
    return numbered_lines(path, MAX_RECORD_BYTES, "a JSONL corpus")


def jsonl_paragraphs(path: Path) -> Iterator[Paragraph]:
    """The records of a JSONL corpus as paragraphs, in file order."""
    form = None
    for number, raw in _lines(path):
        parsed = parse_record(path, number, raw, form)
        if parsed is not None:
            paragraph, form = parsed
            yield paragraph


def check_jsonl(path: Path) -> str:
    """Check every line of a JSONL corpus (see ``parse_record``; ids must be unique) and return the
    SHA-256 of its bytes with the segmentation version, the corpus checksum of its manifest."""
    digest = hashlib.sha256(f"segmentation-v{SEGMENTATION_VERSION}".encode())
    seen: set[str] = set()
    form = None
    for number, raw in _lines(path):
        digest.update(raw)
        parsed = parse_record(path, number, raw, form)
        if parsed is None:
            continue
        paragraph, form = parsed
        if paragraph.pid in seen:
            raise DataError(f"{path}:{number}: id {paragraph.pid!r} was already used on an earlier line")
        seen.add(paragraph.pid)
    if not seen:
        raise DataError(f"{path}: no records (expected one JSON object per line with a text field: {TEXT_FIELDS})")
    return digest.hexdigest()
