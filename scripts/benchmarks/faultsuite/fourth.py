"""Hostile cases of the fourth round (issue 37, command line): a search run's output path that names
a device node, a FIFO or a symbolic link (made in the suite's scratch folder, never the machine's
own) is written through, never replaced, and ``-`` is standard output; topics files as people write
them (a byte-order mark, a header line, mixed formats, wrong JSON types); lone surrogates in a
corpus, a topic id and a question file; corpus escape sequences in ``search``; impossible ensemble
parts and a settings record whose calibration no longer matches it; links, files and duplicate ids
where indexes and corpora are named; option letters; and the messages that blamed the wrong thing."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Callable

from faultsuite.tally import OPENQA, Case, default_sigint

TOPICS = "q1\tenzyme synthesis inhibits\nq2\treceptor blocks deficiency\n"
#: What a TREC run line of the suite's corpus starts with.
RUN_LINE = "q1 Q0 Book"


def fourth_round_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path, data: Path) -> list[Case]:
    """Every case of the fourth round."""
    return [*output_cases(qfile, loc, root), *topics_cases(qfile, loc), *surrogate_cases(qfile, loc, root),
            *search_output_cases(qfile, root), *ensemble_cases(loc, root), *naming_cases(qfile, loc, root, data),
            *option_cases(loc), *message_cases(qfile, loc, root)]


def said(text: str) -> Callable[[str, str], bool]:
    """A check: standard error says ``text``."""
    return lambda out, err: text in err


def output_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """``search --topics --output PATH``: a FIFO, a device node and a symbolic link are written
    through (the device only where this process may make one: root), ``-`` is standard output; a
    folder, the topics file itself and ``--json`` are refused in one line."""
    topics = qfile("topics.tsv", TOPICS.encode())
    scratch = root / "outputs"
    scratch.mkdir()
    search = ["search", "--topics", topics, "-k", "2", *loc]
    fifo, device, link, target = scratch / "fifo", scratch / "null", scratch / "link.trec", scratch / "real.trec"
    os.mkfifo(fifo)
    link.symlink_to(target)
    reader: list[int] = []

    def open_reader() -> None:  # a reader, so that writing through does not wait; read after the run
        reader.append(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))

    def fifo_fed(out: str, err: str) -> bool:
        got = os.read(reader[0], 1 << 16)
        os.close(reader[0])
        return stat.S_ISFIFO(os.stat(fifo).st_mode) and got.startswith(RUN_LINE.encode())

    cases = [
        Case("--output a FIFO", "output paths", [*search, "--output", str(fifo)], expect="ok", check=fifo_fed, setup=open_reader),
        Case("--output a symbolic link", "output paths", [*search, "--output", str(link)], expect="ok",
             check=lambda out, err: link.is_symlink() and target.read_text().startswith(RUN_LINE)),
        Case("--output -", "output paths", [*search, "--output", "-"], expect="ok", check=lambda out, err: out.startswith(RUN_LINE)),
        Case("--output a folder", "output paths", [*search, "--output", str(scratch)], check=said("is a folder: name a file to write")),
        Case("--output the topics file", "output paths", [*search, "--output", topics],
             check=lambda out, err: "is the topics file itself" in err and Path(topics).read_text() == TOPICS),
        Case("--topics with --json", "output paths", [*search, "--json"], check=said("--topics writes a TREC run (leave out --json)")),
    ]
    if os.geteuid() == 0:  # a character device with /dev/null's numbers, in the scratch folder
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        cases.append(Case("--output a device node", "output paths", [*search, "--output", str(device)], expect="ok",
                          check=lambda out, err: stat.S_ISCHR(os.stat(device).st_mode)))
    return cases


def topics_cases(qfile: Callable[[str, bytes], str], loc: list[str]) -> list[Case]:
    """Topics files as people write them: a BOM and a header line are no topics; a TSV line in a
    JSON-lines file, a query that is a number and an id that is a float are refused in one line."""
    def ids(*wanted: str) -> Callable[[str, str], bool]:
        return lambda out, err: {line.split()[0] for line in out.splitlines()} == set(wanted)

    files = [
        ("a byte-order mark", "\ufeffq1\tenzyme\n", "ok", ids("q1")),
        ("a header line", "qid\tquery\nq1\tenzyme\n", "ok", ids("q1")),
        ("a TSV line in JSON lines", '{"id": "q1", "text": "enzyme"}\nq2\treceptor\n',
         "error", said("a line that is not a JSON object in a JSON-lines topics file")),
        ("a query that is a number", '{"id": "q1", "text": 5}\n', "error", said("the query of topic 'q1' is a JSON int, not text")),
        ("a float id", '{"id": 1.5, "text": "enzyme"}\n', "error", said("the topic id 1.5 is a JSON float")),
    ]
    return [Case(f"topics with {what}", "topics files",
                 ["search", "--topics", qfile(f"topics-{i}.tsv", content.encode()), "-k", "1", *loc], expect=expect, check=check)
            for i, (what, content, expect, check) in enumerate(files)]


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


def ensemble_cases(loc: list[str], root: Path) -> list[Case]:
    """``tune --method ensemble`` with parts that name nothing, a setting a part does not have, or
    one part twice: refused in one line with nothing written; and a settings record edited after its
    calibration was fitted (what an interrupted or failed tune used to leave) is refused by eval."""
    settings = root / "tuned-parts"
    tune = ["tune", "--method", "ensemble", "--dataset", "us", *loc, "--settings-dir", str(settings)]

    def nothing_written(text: str) -> Callable[[str, str], bool]:
        return lambda out, err: text in err and not any(settings.glob("*"))

    paired = root / "tuned-pair"

    def unpair() -> None:
        subprocess.run([OPENQA, "tune", "--method", "ir-custom", "--dataset", "us", "--limit", "40", *loc, "--settings-dir", str(paired)],
                       check=True, capture_output=True, preexec_fn=default_sigint)
        record = json.loads((paired / "ir-custom-us.json").read_text())
        record["chosen"]["top_n"] = 3
        (paired / "ir-custom-us.json").write_text(json.dumps(record))

    return [
        Case("--parts \"\"", "ensemble parts", [*tune, "--parts", ""], check=nothing_written("--parts names no method")),
        Case("--parts ,", "ensemble parts", [*tune, "--parts", ","], check=nothing_written("--parts names no method")),
        Case("--parts pmi:top_n=3", "ensemble parts", [*tune, "--parts", "ir-custom,pmi:top_n=3"],
             check=nothing_written("pmi has no setting top_n")),
        Case("--parts ir-custom,ir-custom", "ensemble parts", [*tune, "--parts", "ir-custom,ir-custom"], check=nothing_written("ensemble part 'ir-custom' is named twice")),
        Case("settings edited after their calibration", "tuned pairs",
             ["eval", "--dataset", "us", "--split", "dev", *loc, "--settings-dir", str(paired), "--output", str(root / "out-pair")],
             check=said("ir-custom-us.calibration.json was fitted with other settings than ir-custom-us.json"), setup=unpair),
    ]


def naming_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path, data: Path) -> list[Case]:
    """Where indexes and corpora are named: a dangling link at an index's name, an index folder
    (flag or ``OPENQA_INDEXES``) that is a file, and an id used twice (``corpus stats`` and
    ``index`` refuse it alike)."""
    links = root / "ix-links"
    links.mkdir()
    (links / "en-custom").symlink_to(root / "gone")
    a_file = qfile("indexes-file", b"not a folder\n")
    twice = qfile("twice.jsonl", b'{"id": "a", "title": "T", "text": "enzyme"}\n{"id": "a", "title": "T", "text": "receptor"}\n')
    used = "twice.jsonl:2: id 'a' was already used on an earlier line"
    return [
        Case("a dangling link at the index's name", "index names", ["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(links)],
             check=lambda out, err: "is a symbolic link to" in err and "which does not exist" in err and (links / "en-custom").is_symlink()),
        Case("OPENQA_INDEXES a file", "index names", ["search", "enzyme", "--data-dir", str(data)], env={"OPENQA_INDEXES": a_file},
             check=said(f"the index folder {a_file} ($OPENQA_INDEXES) is a file, not a folder")),
        Case("--index-dir a file", "index names", ["search", "enzyme", "--data-dir", str(data), "--index-dir", a_file],
             check=said(f"the index folder {a_file} (--index-dir) is a file, not a folder")),
        Case("corpus stats: an id used twice", "index names", ["corpus", "stats", "--lang", "en", "--corpus", twice], check=said(used)),
        Case("index: an id used twice", "index names", ["index", "--lang", "en", "--corpus", twice, "--index-dir", str(root / "ix-twice")],
             check=said(used)),
    ]


def option_cases(loc: list[str]) -> list[Case]:
    """Option letters: letters past J are refused (``Y``, ``Z`` used to answer ``Y``); a run that
    does not start at A is answered with its own letters."""
    question = ["answer", "--question", "Which drug inhibits the enzyme?", *loc]
    return [
        Case("--option Y and Z", "option letters", [*question, "--option", "Y=aspirin", "--option", "Z=heparin"],
             check=said("option letters are A to J, not 'Y'")),
        Case("--option B and C", "option letters", [*question, "--option", "B=aspirin", "--option", "C=heparin", "--json"], expect="ok",
             check=lambda out, err: json.loads(out)["prediction"] in ("B", "C")),
    ]


def message_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """Messages that blamed the wrong thing: a tuned ``top_n`` of -1 (not the ``--top-n`` flag), a
    CSV quote never closed (not "found 1 column"), a damaged reply cache (not "give a writable
    --cache-dir"), a corpus JSON error (one "at", with its column), and a negative ``--offset``."""
    tuned = root / "tuned-negative"
    tuned.mkdir()
    (tuned / "ir-custom-us.json").write_text(json.dumps({"chosen": {"top_n": -1}}))
    csv = qfile("mmlu.csv", b'What is it?,a,b,c,d,A\n"Which drug,a,b,c,d,B\nLast,a,b,c,d,C\n')
    cache = root / "cache-damaged"
    cache.mkdir()
    (cache / "replies.sqlite").write_bytes(b"not a database at all" * 100)
    corpus = qfile("bad-corpus.jsonl", b'{"id": "a", "title": "T", "text": "enzyme"}\n{"id": "b" "text": "y"}\n')
    return [
        Case("a tuned top_n of -1", "messages", ["eval", "--dataset", "us", "--settings-dir", str(tuned), *loc],
             check=lambda out, err: "ir-custom-us.json: unreadable tuning record" in err and "--top-n" not in err),
        Case("a CSV quote never closed", "messages", ["eval", "--questions", csv, *loc], check=said("mmlu.csv:2: a quoted field is not closed")),
        Case("a damaged reply cache", "messages",
             ["answer", "--method", "llm", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--cache-dir", str(cache),
              "--question", "Why?", "--option", "A=x", "--option", "B=y", *loc],
             check=lambda out, err: "replies.sqlite is not a reply cache" in err and "writable" not in err),
        Case("a corpus line that is not JSON", "messages", ["index", "--lang", "en", "--corpus", corpus, "--index-dir", str(root / "ix-bad")],
             check=lambda out, err: "bad-corpus.jsonl:2: not valid JSON" in err and "at column" in err and " at at " not in err),
        Case("--offset -1", "messages", ["eval", "--dataset", "us", "--offset", "-1", *loc], check=said("--offset must be 0 or more")),
    ]
