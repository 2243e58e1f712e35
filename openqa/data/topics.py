"""Query files for ``openqa search --topics`` and the TREC run files it writes, so trec_eval and
ranx users can score openqa's retrieval as they score Pyserini's.

A topics file is either tab-separated lines ``qid<TAB>query`` (Pyserini's and MS MARCO's topics),
or JSON lines with an id (``id``, ``_id`` or ``qid``) and a text (``text``, ``query`` or
``contents``), as BEIR's ``queries.jsonl``. Every line is checked before anything is searched: a
bad one is a ``file:line`` error; ids must be unique.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from openqa.errors import DataError
from openqa.jsonl import decode_at, numbered_lines, text_line

#: The longest line of a topics file.
MAX_TOPIC_BYTES = 1 << 20
#: Keys of a JSON-lines topic: its id, then its text (the first present of each is taken).
ID_KEYS = ("id", "_id", "qid")
TEXT_KEYS = ("text", "query", "contents")


#: First lines that name the columns of a TSV topics file: a header, not a topic.
HEADERS = {("qid", "query"), ("id", "query"), ("id", "text"), ("query_id", "query"), ("qid", "text")}


def _topic(where: str, line: str, json_lines: bool) -> tuple[str, str]:
    """One topic's id and query from a line of the file's format (JSON lines or TSV)."""
    if json_lines:
        if not line.lstrip().startswith("{"):
            raise DataError(f"{where}: a line that is not a JSON object in a JSON-lines topics file (one format per file)")
        record = decode_at(where, line)
        qid = next((record[k] for k in ID_KEYS if k in record), None)
        text = next((record[k] for k in TEXT_KEYS if k in record), None)
        if qid is None or text is None:
            raise DataError(f"{where}: a JSON topic needs an id ({', '.join(ID_KEYS)}) and a text ({', '.join(TEXT_KEYS)})")
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise DataError(f"{where}: the topic id {qid!r} is a JSON {type(qid).__name__}: give a string (or a whole number)")
        if not isinstance(text, str):
            raise DataError(f"{where}: the query of topic {qid!r} is a JSON {type(text).__name__}, not text")
        qid = str(qid)
    else:
        if line.lstrip().startswith("{"):
            raise DataError(f"{where}: a JSON object in a TSV topics file (one format per file)")
        qid, sep, text = line.partition("\t")
        if not sep:
            raise DataError(f"{where}: expected 'id<TAB>query' or a JSON object")
    if not qid.strip() or any(c.isspace() for c in qid.strip()) or not qid.strip().isprintable():
        raise DataError(f"{where}: the topic id {qid!r} is empty or holds spaces (a TREC run cannot carry it)")
    if not text.strip():
        raise DataError(f"{where}: topic {qid.strip()!r} has an empty query")
    return qid.strip(), text.strip()


def read_topics(path: Path) -> dict[str, str]:
    """The topics of ``path`` in file order: id -> query (its format told by its first line; a TSV
    header line such as ``qid<TAB>query`` is skipped)."""
    topics: dict[str, str] = {}
    json_lines: bool | None = None
    for number, raw in numbered_lines(path, MAX_TOPIC_BYTES, "a topics file"):
        where = f"{path}:{number}"
        line = text_line(where, raw)
        if not line.strip():
            continue
        if json_lines is None:
            json_lines = line.lstrip().startswith("{")
            if not json_lines and tuple(part.strip().lower() for part in line.split("\t")) in HEADERS:
                continue
        qid, text = _topic(where, line, json_lines)
        if qid in topics:
            raise DataError(f"{where}: topic id {qid!r} was already used on an earlier line")
        topics[qid] = text
    if not topics:
        raise DataError(f"{path}: no topics (expected 'id<TAB>query' lines or JSON lines with an id and a text)")
    return topics


def check_run_word(what: str, word: object) -> str:
    """A query id, document id or run tag as a TREC run line carries it: one word, no white space."""
    from openqa.errors import UsageError

    if not isinstance(word, str) or not word or any(c.isspace() for c in word) or not word.isprintable():
        from openqa.arguments import shown

        raise UsageError(f"a {what} must be one word of printable characters without white space, not {shown(word)}")
    return word


def trec_lines(qid: str, ids: Sequence[str], scores: Sequence[float], tag: str) -> list[str]:
    """A topic's ranked paragraphs as TREC run lines: ``qid Q0 docid rank score tag``."""
    return [f"{qid} Q0 {pid} {rank} {score:.6f} {tag}" for rank, (pid, score) in enumerate(zip(ids, scores), start=1)]
