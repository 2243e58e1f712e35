"""Hostile text (command line): questions mangled the way PDFs and web pages mangle them
(full-width letters, zero-width spaces, soft hyphens, ligatures, bidirectional controls) must predict
what their plain form does; lone surrogates in a corpus, a topic id, a question file and a command
line; escape sequences and newlines in a corpus or a file name reach the terminal as symbols, in
``answer`` and ``search`` alike, and ``--json`` stays one JSON document."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable

from faultsuite.tally import OPENQA, Case, default_sigint, said

FULL_WIDTH = {ord(c): ord(c) + 0xFEE0 for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"}
QUESTION = "Which drug inhibits the enzyme synthesis and blocks the receptor in deficiency?"
OPTIONS = {"A": "aspirin", "B": "heparin", "C": "insulin", "D": "lithium"}
#: How each mangling changes a text (words of seven letters or more are split inside).
MANGLINGS: dict[str, Callable[[str], str]] = {
    "full-width letters": lambda t: t.translate(FULL_WIDTH),
    "zero-width spaces inside words": lambda t: " ".join(w[:3] + "\u200b" + w[3:] if len(w) > 6 else w for w in t.split(" ")),
    "soft hyphens inside words": lambda t: " ".join(w[:4] + "\u00ad" + w[4:] if len(w) > 6 else w for w in t.split(" ")),
    "ligatures": lambda t: t.replace("fi", "\ufb01").replace("ffl", "\ufb04").replace("st", "\ufb06"),
    "bidi overrides": lambda t: "\u202e" + t + "\u202c",
    "a byte-order mark and no-break spaces": lambda t: "\ufeff" + t.replace(" ", "\u00a0"),
}


def _answer_json(loc: list[str], question: str, options: dict[str, str]) -> dict:
    flags = [f"--option={k}={v}" for k, v in options.items()]
    done = subprocess.run([OPENQA, "answer", "--question", question, *flags, "--json", *loc], capture_output=True, text=True,
                          check=True, preexec_fn=default_sigint)
    return json.loads(done.stdout)


def _ranking(record: dict) -> list[tuple[str, float | None]]:
    return [(o["letter"], o["score"]) for o in record["options"]]


def unicode_cases(qfile: Callable[[str, bytes], str], loc: list[str]) -> list[Case]:
    """Each mangling of the question and options, from flags, a paste and a question file: the same
    prediction and scores as the plain question (a full-width question used to lose every word)."""
    plain = _answer_json(loc, QUESTION, OPTIONS)
    same = lambda out, err: _ranking(json.loads(out)) == _ranking(plain) and json.loads(out)["matched"]  # noqa: E731
    plain_file = subprocess.run([OPENQA, "eval", "--questions", qfile("plain.jsonl", _record(QUESTION, OPTIONS)), "--json",
                                 "--output", str(Path(loc[1]).parent / "out-u"), *loc], capture_output=True, text=True, check=True)
    accuracy = json.loads(plain_file.stdout)["accuracy"]
    cases = []
    for i, (what, mangle) in enumerate(MANGLINGS.items()):
        question, options = mangle(QUESTION), {k: mangle(v) for k, v in OPTIONS.items()}
        flags = [f"--option={k}={v}" for k, v in options.items()]
        cases.append(Case(f"{what}: answer flags", "unicode", ["answer", "--question", question, *flags, "--json", *loc],
                          expect="ok", check=same))
        paste = (question + "\n" + "\n".join(f"{k}: {v}" for k, v in options.items()) + "\n").encode()
        cases.append(Case(f"{what}: pasted", "unicode", ["answer", "--json", *loc], paste, expect="ok", check=same))
        cases.append(Case(f"{what}: question file", "unicode",
                          ["eval", "--questions", qfile(f"mangled{i}.jsonl", _record(question, options)), "--json",
                           "--output", str(Path(loc[1]).parent / "out-u"), *loc],
                          expect="ok", check=lambda out, err: json.loads(out)["accuracy"] == accuracy and not json.loads(out)["unmatched"]))
    full_width_markers = (QUESTION + "\n" + "\n".join(f"{k.translate(FULL_WIDTH)}：{v}" for k, v in OPTIONS.items()) + "\n").encode()
    cases += [
        Case("full-width option letters pasted", "unicode", ["answer", "--json", *loc], full_width_markers, expect="ok", check=same),
        Case("bidi controls gone from the options", "unicode",
             ["answer", "--question", QUESTION, "--option", "A=\u202eniripsa", "--option", "B=\u2067heparin\u2069", "--json", *loc],
             expect="ok", check=lambda out, err: not any(c in out for c in ("\u202e", "\u2067", "\\u202e", "\\u2067"))),
        Case("question of zero-width spaces only", "unicode",
             ["answer", "--question", "\u200b\u200b\u00ad", "--option", "A=x", "--option", "B=y", *loc],
             check=lambda out, err: "empty question" in err),
        Case("option of a soft hyphen only", "unicode", ["answer", "--question", QUESTION, "--option", "A=aspirin", "--option", "B=\u00ad", *loc],
             check=lambda out, err: "option B is empty" in err),
    ]
    return cases


def _record(question: str, options: dict[str, str], answer: str = "A") -> bytes:
    return json.dumps({"question": question, "options": options, "answer_idx": answer}, ensure_ascii=False).encode() + b"\n"


def surrogate_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """Lone surrogates: escaped in a corpus text, a topic id and a question file (each a file:line
    error), and a byte that is not UTF-8 on the command line (Python reads it as one: answered)."""
    corpus = qfile("surrogate-corpus.jsonl", b'{"id": "a", "title": "T", "text": "enzyme"}\n{"id": "b", "title": "T", "text": "x\\ud800y"}\n')
    question = qfile("surrogate-question.jsonl",
                     b'{"question": "Why \\ud800?", "options": {"A": "aspirin", "B": "heparin"}, "answer_idx": "A"}\n')
    lone = "a lone surrogate escape"
    return [
        Case("lone surrogate in a corpus text", "lone surrogates",
             ["index", "--lang", "en", "--corpus", corpus, "--index-dir", str(root / "ix-surrogate")],
             check=lambda out, err: "surrogate-corpus.jsonl:2:" in err and lone in err
             and not (root / "ix-surrogate" / "en-custom-surrogate-corpus").exists()),
        Case("lone surrogate in a topic id", "lone surrogates",
             ["search", "--topics", qfile("topics-surrogate.jsonl", b'{"id": "q\\ud800", "text": "enzyme"}\n'), *loc],
             check=said("lone surrogate")),
        Case("lone surrogate in a question file", "lone surrogates", ["eval", "--questions", question, *loc],
             check=lambda out, err: "surrogate-question.jsonl:1:" in err and lone in err),
        Case("a byte that is not UTF-8 in --question", "lone surrogates",  # \udcff: how Python reads the byte 0xff
             ["answer", "--question", "Which drug inhibits the \udcff enzyme?", "--option", "A=aspirin", "--option", "B=heparin",
              "--json", *loc], expect="ok", check=lambda out, err: json.loads(out)["prediction"] in ("A", "B")),
    ]


def terminal_cases(qfile: Callable[[str, bytes], str], root: Path) -> list[Case]:
    """A corpus whose titles and text hold escape sequences (set the window title, clear the
    screen, colour) and newlines (ids may not: refused when indexed): shown as symbols, never sent,
    and the layout holds."""
    passages = [
        {"id": "p1", "title": "Book\x1b]0;owned\x07\n[fake 9.99] injected line", "text": "Aspirin \x1b[2J\x1b[H inhibits the enzyme synthesis."},
        {"id": "p2", "title": "Other\x9b31m\r", "text": "Heparin blocks the receptor \x1b[31mred\x1b[0m and\u2028more."},
        {"id": "p3", "title": "Plain", "text": "Insulin therapy for the patient with diabetes."},
    ]
    corpus = qfile("escapes.jsonl", "".join(json.dumps(p) + "\n" for p in passages).encode())
    index_dir = root / "ix-escapes"
    subprocess.run([OPENQA, "index", "--lang", "en", "--corpus", corpus, "--index-dir", str(index_dir)], check=True, capture_output=True)
    an = ["answer", "--corpus", "escapes", "--index-dir", str(index_dir), "--top-n", "1"]
    flags = ["--question", QUESTION, *[f"--option={k}={v}" for k, v in OPTIONS.items()]]

    def nothing_raw(out: str, err: str) -> bool:
        lines = out.splitlines()
        return (not any(c in out + err for c in "\x1b\x07\x9b\r\u2028") and "\u241b]0;owned\u2407" in out
                and not any(line.startswith("[fake") for line in lines))

    return [
        Case("escape sequences in a corpus: answer", "terminal", [*an, *flags, "--show", "4", "--paragraphs", "3"], expect="ok", check=nothing_raw),
        Case("escape sequences in a corpus: pasted", "terminal", [*an, "--show", "4"],
             (QUESTION + "\n" + "\n".join(f"{k}: {v}" for k, v in OPTIONS.items()) + "\n").encode(), expect="ok", check=nothing_raw),
        Case("escape sequences in a corpus: --json stays JSON", "terminal", [*an, *flags, "--json"], expect="ok",
             check=lambda out, err: "\x1b" not in out and len(out.splitlines()) == 1 and json.loads(out)["prediction"]),
        Case("escape sequences in a file name", "terminal", ["eval", "--questions", str(root / "q\x1b]0;owned\x07.jsonl"),
                                                             "--index-dir", str(index_dir)],
             check=lambda out, err: "\x1b" not in err and "\x07" not in err),
        Case("a newline in a file name", "terminal", ["eval", "--questions", str(root / "q\nopenqa: fake.jsonl"), "--index-dir", str(index_dir)],
             check=lambda out, err: "\nopenqa: fake" not in err),
    ]


def search_output_cases(qfile: Callable[[str, bytes], str], root: Path) -> list[Case]:
    """``openqa search`` over a corpus whose titles and texts hold escape sequences and newlines
    (ids may not: refused when indexed): shown as symbols, as ``answer`` shows them, and ``--json``
    stays one JSON document."""
    passages = [{"id": "p1", "title": "Book\x1b]0;owned\x07\n[fake] line", "text": "Aspirin \x1b[31minhibits\x1b[0m the enzyme\rsynthesis."},
                {"id": "p2", "title": "Plain", "text": "Heparin blocks the receptor."}]
    corpus = qfile("search-escapes.jsonl", "".join(json.dumps(p) + "\n" for p in passages).encode())
    index_dir = root / "ix-search-escapes"
    subprocess.run([OPENQA, "index", "--lang", "en", "--corpus", corpus, "--index-dir", str(index_dir)],
                   check=True, capture_output=True, preexec_fn=default_sigint)
    search = ["search", "aspirin enzyme", "--corpus", "search-escapes", "--index-dir", str(index_dir), "-k", "2"]

    def nothing_raw(out: str, err: str) -> bool:
        return (not any(c in out + err for c in "\x1b\x07\r") and "\u241b]0;owned\u2407" in out
                and not any(line.startswith("[fake]") for line in out.splitlines()))

    return [
        Case("escape sequences in a corpus: search", "search output", search, expect="ok", check=nothing_raw),
        Case("escape sequences in a corpus: search --json", "search output", [*search, "--json"], expect="ok",
             check=lambda out, err: "\x1b" not in out and len(out.splitlines()) == 1 and json.loads(out)["hits"][0]["id"] == "p1"),
    ]
