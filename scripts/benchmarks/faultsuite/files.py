"""Files that are not plain files, and paths people give (command line): question files read
from pipes and FIFOs (read once, never hung on); a search run's output path that names a FIFO, a
device node or a symbolic link (made in the suite's scratch folder, never the machine's own) is
written through, never replaced, and ``-`` is standard output; topics files as people write them (a
byte-order mark, a header line, mixed formats, wrong JSON types); links, files and duplicate ids
where indexes and corpora are named."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from pathlib import Path
from typing import Callable

from faultsuite.tally import Case, said
from faultsuite.text import OPTIONS, QUESTION, _record

TOPICS = "q1\tenzyme synthesis inhibits\nq2\treceptor blocks deficiency\n"
#: What a TREC run line of the suite's corpus starts with.
RUN_LINE = "q1 Q0 Book"


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


def stdout_cases(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """``--output /dev/stdout`` (or ``/proc/self/fd/1``, or a link to it) where standard output is
    appended to a file (``>> log``: it used to be replaced, earlier lines lost) or is a pipe (it
    used to fail after the work): written through once (compare's tables used to come twice), the
    file's earlier lines and inode kept, nothing else made; a full device (``/dev/full``) and a results folder there are refused in one line."""
    folder = root / "stdout"
    folder.mkdir()
    runs = []
    for name, right in (("a", {0, 1}), ("b", {0, 2, 3})):
        rows = [{"qid": f"q{i}", "digest": f"d{i}", "prediction": "A", "correct": i in right, "confidence": 0.5} for i in range(4)]
        predictions = "".join(json.dumps(r) + "\n" for r in rows)
        (folder / f"{name}.predictions.jsonl").write_text(predictions)
        (folder / f"{name}.json").write_text(json.dumps({  # as openqa eval writes it: its files by name and digest
            "dataset": "us", "split": "test", "method": name, "n": 4,
            "result_files": {f"{name}.predictions.jsonl": hashlib.sha256(predictions.encode()).hexdigest()}}))
        runs.append(str(folder / f"{name}.json"))
    (folder / "link").symlink_to("/dev/stdout")
    made = sorted(p.name for p in folder.iterdir())
    topics = qfile("stdout-topics.tsv", TOPICS.encode())
    compared = "# us test: 2 runs on 4 common questions"

    def appended(log: Path, text: str, times: int) -> tuple[Path, Callable[[], None], Callable[[str, str], bool]]:
        """A log file with a line in it (``>> log``), and a check that ``text`` was added ``times`` times to it."""
        def start() -> None:
            log.write_text("before\n")
            inode.append(log.stat().st_ino)
        inode: list[int] = []

        def kept(out: str, err: str) -> bool:
            written = log.read_text()
            return (log.stat().st_ino == inode[0] and written.startswith("before\n") and written.count(text) == times
                    and sorted(p.name for p in folder.iterdir()) == made)
        return log, start, kept

    cases = []
    for what, name in (("/dev/stdout", "/dev/stdout"), ("/proc/self/fd/1", "/proc/self/fd/1"), ("a link to /dev/stdout", str(folder / "link"))):
        log, start, kept = appended(root / f"compare-{len(cases)}.log", compared, 1)  # the tables once
        cases.append(Case(f"compare --output {what} >> a file", "standard output", ["compare", *runs, "--output", name],
                          expect="ok", stdout_file=log, setup=start, check=kept))
    log, start, kept = appended(root / "search.log", RUN_LINE, 2)  # q1 and its two hits
    return [
        *cases,
        Case("compare --output /dev/stdout into a pipe", "standard output", ["compare", *runs, "--output", "/dev/stdout"], expect="ok",
             check=lambda out, err: out.count(compared) == 1 and sorted(p.name for p in folder.iterdir()) == made),
        Case("search --output /dev/stdout >> a file", "standard output",
             ["search", "--topics", topics, "-k", "2", *loc, "--output", "/dev/stdout"], expect="ok", stdout_file=log, setup=start,
             check=kept),
        Case("search --output /dev/stdout into a pipe", "standard output",
             ["search", "--topics", topics, "-k", "2", *loc, "--output", "/dev/stdout"], expect="ok",
             check=lambda out, err: out.startswith(RUN_LINE) and len(out.splitlines()) == 4),
        Case("compare --output /dev/full", "standard output", ["compare", *runs, "--output", "/dev/full"],
             check=said("cannot write /dev/full (No space left on device)")),
        Case("search --output /dev/full", "standard output", ["search", "--topics", topics, "-k", "2", *loc, "--output", "/dev/full"],
             check=said("cannot write /dev/full (No space left on device)")),
        Case("eval --output /dev/stdout (a folder is needed)", "standard output",
             ["eval", "--dataset", "us", "--split", "test", "--limit", "2", *loc, "--output", "/dev/stdout"],
             check=said("cannot write results to /dev/stdout")),
    ]
