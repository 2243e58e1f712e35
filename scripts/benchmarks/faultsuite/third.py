"""Hostile cases of the third round (issue 32, command line): questions mangled the way PDFs and web
pages mangle them (full-width letters, zero-width spaces, soft hyphens, ligatures, bidirectional
controls) must predict what their plain form does; question files read from pipes and FIFOs;
escape sequences and newlines in a corpus must reach the terminal as symbols; concurrent evaluations
writing the same result names; a memory limit of 400 MB; a deeply nested manifest; and the smaller
refusals (a corpus without indexable words, a settings folder that is missing or a file, repeated
keys, a file at an index's name, an eleventh option)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Callable

from faultsuite.tally import OPENQA, Case, default_sigint

#: The address-space limit (ulimit -v, KiB) under which eval used to spin in OpenBLAS forever.
SMALL_MEMORY_KB = 400_000
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


def third_round_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path, data: Path) -> list[Case]:
    """Every case of the third round."""
    return [*unicode_cases(qfile, loc), *pipe_cases(qfile, loc, root), *terminal_cases(qfile, root),
            *concurrency_cases(loc, root), *memory_cases(loc, root, data), *smaller_cases(qfile, loc, root, data)]


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


def pipe_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """Question files that cannot be read twice: the first question of a pipe was silently dropped,
    other pipes said "invalid JSON", a FIFO hung."""
    out = ["--output", str(root / "out-p")]
    two = _record(QUESTION, OPTIONS) + _record("Which drug is an anticoagulant?", OPTIONS, "B")
    mirage = json.dumps({"medqa": {"1": {"question": QUESTION, "options": OPTIONS, "answer": "A"},
                                   "2": {"question": "Which anticoagulant?", "options": OPTIONS, "answer": "B"}}}, indent=2).encode()
    medmcqa = b"".join(json.dumps({"question": QUESTION, "opa": "aspirin", "opb": "heparin", "opc": "insulin", "opd": "lithium",
                                   "cop": c}).encode() + b"\n" for c in (1, 2, 3))
    n_is = lambda n: lambda o, e: json.loads(o)["n"] == n  # noqa: E731
    fifos = root / "fifos"
    fifos.mkdir()
    for name in ("lonely", "fed", "fed-mirage"):
        os.mkfifo(fifos / name)

    def feed(name: str, content: bytes) -> Callable[[], None]:
        def start() -> None:
            def write() -> None:
                with open(fifos / name, "wb") as writer:  # waits for the reader
                    writer.write(content)
            threading.Thread(target=write, daemon=True).start()
        return start

    ev = ["eval", "--json", *loc, *out]
    return [
        Case("MedQA lines piped to /dev/stdin", "pipes", [*ev, "--questions", "/dev/stdin"], two, expect="ok", check=n_is(2)),
        Case("MIRAGE JSON piped to /dev/stdin", "pipes", [*ev, "--questions", "/dev/stdin"], mirage, expect="ok", check=n_is(2)),
        Case("MedMCQA lines piped to /dev/stdin", "pipes", [*ev, "--questions", "/dev/stdin"], medmcqa, expect="ok", check=n_is(3)),
        Case("nothing piped to /dev/stdin", "pipes", [*ev, "--questions", "/dev/stdin"], b"", check=lambda o, e: "no questions" in e),
        Case("a FIFO nobody writes to", "pipes", [*ev, "--questions", str(fifos / "lonely")], check=lambda o, e: "no questions" in e),
        Case("a FIFO a program writes to", "pipes", [*ev, "--questions", str(fifos / "fed")], expect="ok", check=n_is(2),
             setup=feed("fed", two)),
        Case("a FIFO of MIRAGE JSON", "pipes", [*ev, "--questions", str(fifos / "fed-mirage")], expect="ok", check=n_is(2),
             setup=feed("fed-mirage", mirage)),
        Case("questions /dev/null", "pipes", [*ev, "--questions", "/dev/null"], check=lambda o, e: "no questions" in e),
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


def concurrency_cases(loc: list[str], root: Path) -> list[Case]:
    """Evaluations writing the same result names at once (5 of 180 failed after scoring when they
    shared one temporary name): every one succeeds, and no temporary file is left."""
    cases = []
    for round_ in range(3):
        out = root / f"out-same-{round_}"
        argv = ["eval", "--dataset", "us", "--split", "dev", "--limit", "20", *loc, "--output", str(out)]
        others: list[subprocess.Popen] = []

        def start(argv: list[str] = argv, others: list[subprocess.Popen] = others) -> None:
            others.extend(subprocess.Popen([OPENQA, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           preexec_fn=default_sigint) for _ in range(4))

        def all_fine(stdout: str, err: str, out: Path = out, others: list[subprocess.Popen] = others) -> bool:
            codes = [p.wait(timeout=300) for p in others]
            return codes == [0] * len(others) and not list(out.glob(".*.tmp"))

        cases.append(Case(f"five evals writing the same results ({round_ + 1})", "concurrency", argv, expect="ok",
                          check=all_fine, setup=start))
    return cases


def memory_cases(loc: list[str], root: Path, data: Path) -> list[Case]:
    """A 400 MB address space (eval used to spin in OpenBLAS, deaf to SIGTERM; now refused before
    any library loads, as is any limit under openqa.limits.MIN_ADDRESS_SPACE_MB), and manifests and
    settings that Python's JSON decoder itself cannot read (nesting, a 5,000-digit number)."""
    oom = lambda out, err: "out of memory" in err  # noqa: E731 (else it answered: enough memory after all)
    deep = "[" * 100_000 + "]" * 100_000
    ev = ["eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data)]
    broken = {}
    for name, text in (("deep", deep), ("bignum", '{"paragraphs": ' + "9" * 5000 + "}")):
        index = root / f"ix-manifest-{name}" / "en-custom"
        index.mkdir(parents=True)
        (index / "manifest.json").write_text(text)
        broken[name] = index.parent
    tuned = root / "tuned-deep"
    tuned.mkdir()
    (tuned / "ir-custom-us.json").write_text(deep)
    return [
        Case("eval under ulimit -v 400000", "memory", [*ev, "--index-dir", loc[3], "--output", str(root / "out-m4")],
             memory_kb=SMALL_MEMORY_KB, expect="either", check=lambda out, err: "out of memory" in err or "wrote" in out),
        Case("answer under ulimit -v 400000", "memory", ["answer", "--question", QUESTION, "--option", "A=aspirin", "--option", "B=heparin", *loc],
             memory_kb=SMALL_MEMORY_KB, expect="either", check=lambda out, err: "out of memory" in err or "Prediction" in out),
        Case("index under ulimit -v 400000", "memory", ["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(root / "ix-small-mem")],
             memory_kb=SMALL_MEMORY_KB, expect="either", check=lambda out, err: "out of memory" in err or "built" in out),
        Case("eval under ulimit -v 550000 (a C++ abort before)", "memory", [*ev, "--index-dir", loc[3], "--output", str(root / "out-m5")],
             memory_kb=550_000, check=oom),
        Case("eval --json under ulimit -v 300000", "memory", [*ev, "--index-dir", loc[3], "--json", "--output", str(root / "out-m3")],
             memory_kb=300_000, check=oom),
        Case("deeply nested manifest.json", "memory", [*ev, "--index-dir", str(broken["deep"])],
             check=lambda out, err: "nested too deeply" in err),
        Case("manifest.json with a 5,000-digit number", "memory", [*ev, "--index-dir", str(broken["bignum"])],
             check=lambda out, err: "damaged" in err),
        Case("deeply nested tuned settings", "memory", [*ev, "--index-dir", loc[3], "--settings-dir", str(tuned)],
             check=lambda out, err: "unreadable tuning record" in err),
    ]


def smaller_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path, data: Path) -> list[Case]:
    """The smaller defects of the round, each refused in one line (or answered as asked)."""
    stop_words = qfile("stop-words.jsonl", b'{"id": "p1", "title": "t", "text": "the of and a"}\n{"id": "p2", "title": "t", "text": "it is"}\n')
    blocked = root / "ix-blocked"
    blocked.mkdir()
    (blocked / "en-custom").write_text("my notes")
    ev = ["eval", "--dataset", "us", "--split", "dev", "--limit", "5", *loc, "--output", str(root / "out-s")]
    repeated = b'{"question": "Why?", "options": {"A": "aspirin", "A": "lithium", "B": "heparin"}, "answer_idx": "A"}\n'
    mirage = b'{"medqa": {"7": {"question": "Why?", "options": {"A": "x", "B": "y"}, "answer": "A"}, "7": {"question": "Why not?", "options": {"A": "x", "B": "y"}, "answer": "B"}}}'
    eleven = ("What?\n" + "".join(f"{chr(ord('A') + i)}: option {i}\n" for i in range(11))).encode()
    kept = lambda out, err: (blocked / "en-custom").read_text() == "my notes" and [p.name for p in blocked.iterdir()] == ["en-custom"]  # noqa: E731
    return [
        Case("corpus without indexable words (custom)", "smaller",
             ["index", "--lang", "en", "--corpus", stop_words, "--index-dir", str(root / "ix-stop")],
             check=lambda out, err: "no indexable words" in err),
        Case("corpus without indexable words (pmi)", "smaller",
             ["index", "--lang", "en", "--engine", "pmi", "--corpus", stop_words, "--index-dir", str(root / "ix-stop")],
             check=lambda out, err: "no indexable words" in err and not (root / "ix-stop" / "stop-words-en-pmi").exists()),
        Case("--settings-dir missing", "smaller", [*ev, "--settings-dir", str(root / "no-such-tuned")], check=lambda out, err: "not found" in err),
        Case("--settings-dir a file", "smaller", [*ev, "--settings-dir", qfile("tuned-file", b"x")], check=lambda out, err: "is not a folder" in err),
        Case("OPENQA_SETTINGS missing", "smaller", ev, env={"OPENQA_SETTINGS": str(root / "no-such-env-tuned")},
             check=lambda out, err: "settings folder" in err),
        Case("eval --retrieval --json", "smaller", [*ev, "--retrieval", "--retrievers", "ir-custom", "--json"], expect="ok",
             check=lambda out, err: "ir-custom" in json.loads(out)["retrievers"]),
        Case("repeated option key", "smaller", ["eval", "--questions", qfile("repeated.jsonl", repeated), *loc],
             check=lambda out, err: "key 'A' repeated" in err),
        Case("repeated MIRAGE id", "smaller", ["eval", "--questions", qfile("repeated-ids.json", mirage), *loc],
             check=lambda out, err: "key '7' repeated" in err),
        Case("a file at the index's name", "smaller", ["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(blocked)],
             check=kept),
        Case("eleven pasted options", "smaller", ["answer", *loc], eleven, check=lambda out, err: "at most 10 options" in err),
        Case("eleven option flags", "smaller", ["answer", "--question", "What?", *[f"--option={chr(ord('A') + i)}=x{i}" for i in range(11)], *loc],
             check=lambda out, err: "at most 10 options" in err),
    ]
