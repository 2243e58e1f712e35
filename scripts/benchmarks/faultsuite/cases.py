"""Hostile cases: bad files and flags, corrupted indexes, unreachable servers, wrong languages, messy
pasted questions, a hostile environment (closed stdin, an ASCII-only stdout, a memory limit), a
full disk and a held lock, and the cases of later rounds grouped by subject in the modules beside
this one. Each is expected to end in a clean one-line error, or, for input that is fine, in an answer."""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from faultsuite.comparing import compare_cases, predictions_cases
from faultsuite.files import naming_cases, output_cases, pipe_cases, stdout_cases, topics_cases
from faultsuite.leaks import leak_cases
from faultsuite.limits import concurrency_cases, memory_cases, tune_concurrency_cases
from faultsuite.refusals import (
    bank_cases,
    credential_cases,
    ensemble_cases,
    ensemble_name_cases,
    message_cases,
    offset_cases,
    option_cases,
    smaller_cases,
)
from faultsuite.scripts import get_model_cases, llm_part_cases
from faultsuite.tally import OPENQA, Case
from faultsuite.text import search_output_cases, surrogate_cases, terminal_cases, unicode_cases

#: Hostile cases of each category in the quick run (each also has its own test).
QUICK_PER_CATEGORY = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def corrupt_copy(good: Path, root: Path, name: str, damage: Callable[[Path], None]) -> Path:
    """An index folder (``<root>/<name>/en-<engine>``) copied from ``good`` and damaged; returns the index dir."""
    index_dir = root / name
    target = index_dir / good.name
    shutil.copytree(good, target)
    damage(target)
    return index_dir


def truncate(name: str, keep: float = 0.5) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        path = folder / name
        path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])
    return damage


def rewrite(name: str, text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_text(text)


def shuffle_lines(name: str) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        lines = (folder / name).read_text().splitlines()
        random.Random(1).shuffle(lines)
        (folder / name).write_text("\n".join(lines) + "\n")
    return damage


def remove(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).unlink()


def hostile_cases(root: Path, data: Path, index_dir: Path, quick: bool, tiny: Path | None = None) -> list[Case]:
    """Every hostile case; ``quick`` keeps the first ``QUICK_PER_CATEGORY`` of each kind. ``tiny``: a
    nearly full file system (``tiny_disk``) for the full-disk case, None to leave it out."""
    loc = ["--data-dir", str(data), "--index-dir", str(index_dir)]
    out = ["--output", str(root / "out")]
    files = root / "files"
    files.mkdir(exist_ok=True)

    def qfile(name: str, content: bytes) -> str:
        (files / name).write_bytes(content)
        return str(files / name)

    good = json.dumps({"question": "Which drug inhibits the enzyme?", "options": {"A": "aspirin", "B": "heparin"}, "answer_idx": "A"})
    ev = ["eval", "--dataset", "us", "--split", "dev", *loc]
    an = ["answer", *loc]
    tr = ["train", "--reader", "maxout", "--dataset", "us", *loc, "--output", str(root / "run")]
    dead = f"http://127.0.0.1:{free_port()}"
    custom = index_dir / "en-custom"
    pmi = index_dir / "en-pmi"
    cases = [
        # bad files
        Case("data dir missing", "bad files", ["index", "--lang", "en", "--data-dir", str(root / "nope"), "--index-dir", str(root / "ix-a")]),
        Case("data dir is a file", "bad files", ["index", "--lang", "en", "--data-dir", qfile("plain", b"x"), "--index-dir", str(root / "ix-b")]),
        Case("no textbooks", "bad files", ["index", "--lang", "en", "--data-dir", str(files), "--index-dir", str(root / "ix-c")]),
        Case("question file missing", "bad files", ["eval", "--questions", str(files / "none.jsonl"), *loc]),
        Case("question file empty", "bad files", ["eval", "--questions", qfile("empty.jsonl", b""), *loc]),
        Case("invalid JSON line", "bad files", ["eval", "--questions", qfile("bad.jsonl", (good + "\n{oops\n").encode()), *loc]),
        Case("not UTF-8", "bad files", ["eval", "--questions", qfile("latin.jsonl", good.replace("enzyme", "enzym\xe9").encode("latin-1")), *loc]),
        Case("JSON list line", "bad files", ["eval", "--questions", qfile("list.jsonl", b"[1, 2]\n"), *loc]),
        Case("no options", "bad files", ["eval", "--questions", qfile("noopt.jsonl", b'{"question": "Why?", "answer_idx": "A"}\n'), *loc]),
        Case("one option", "bad files", ["eval", "--questions", qfile("one.jsonl", b'{"question": "Why?", "options": {"A": "x"}, "answer_idx": "A"}\n'), *loc]),
        Case("answer not an option", "bad files", ["eval", "--questions", qfile("ans.jsonl", good.replace('"A"}', '"C"}').encode() + b"\n"), *loc]),
        Case("letters out of order", "bad files", ["eval", "--questions", qfile("order.jsonl", b'{"question": "Why?", "options": {"B": "x", "A": "y"}, "answer_idx": "A"}\n'), *loc]),
        Case("question file is a folder", "bad files", ["eval", "--questions", str(files), *loc]),
        Case("binary garbage", "bad files", ["eval", "--questions", qfile("garbage.jsonl", bytes(range(256)) * 4), *loc]),
        Case("BOM is fine", "bad files", ["eval", "--questions", qfile("bom.jsonl", ("\ufeff" + good + "\n").encode()), *loc, *out], expect="ok"),
        Case("data dir without questions", "bad files", ["eval", "--dataset", "us", "--data-dir", str(files), "--index-dir", str(index_dir)]),
        # bad flags
        Case("unknown dataset", "bad flags", ["eval", "--dataset", "nope", *loc]),
        Case("no train split", "bad flags", ["eval", "--dataset", "us", "--split", "train", *loc]),
        Case("split with questions", "bad flags", ["eval", "--questions", qfile("ok.jsonl", good.encode()), "--split", "dev", *loc]),
        Case("lang with dataset", "bad flags", [*ev, "--lang", "zh"]),
        Case("limit 0", "bad flags", [*ev, "--limit", "0"]),
        Case("limit negative", "bad flags", [*ev, "--limit", "-5"]),
        Case("top-n 0", "bad flags", [*ev, "--top-n", "0"]),
        Case("top-n negative", "bad flags", [*ev, "--top-n", "-1"]),
        Case("unknown aggregate", "bad flags", [*ev, "--aggregate", "magic"]),
        Case("unknown method", "bad flags", [*ev, "--method", "magic"]),
        Case("unknown engine", "bad flags", [*ev, "--engine", "magic"]),
        Case("unknown exam", "bad flags", ["eval", "--questions", qfile("ok.jsonl", good.encode()), "--exam", "magic", *loc]),
        Case("reader without model", "bad flags", [*ev, "--method", "reader"]),
        Case("reader model missing", "bad flags", [*ev, "--method", "reader", "--model", str(root / "nope")]),
        Case("index of other settings", "bad flags", [*ev, "--ngram", "2"]),
        Case("unknown retrievers", "bad flags", [*ev, "--retrieval", "--retrievers", "magic"]),
        Case("paragraphs negative", "bad flags", [*an, "--question", "Why?", "--option", "A=x", "--option", "B=y", "--paragraphs", "-1"]),
        Case("show negative", "bad flags", [*an, "--question", "Why?", "--option", "A=x", "--option", "B=y", "--show", "-1"]),
        Case("option without =", "bad flags", [*an, "--question", "Why?", "--option", "Ax"]),
        Case("repeated option flag", "bad flags", [*an, "--question", "Why?", "--option", "A=x", "--option", "A=y"]),
        Case("empty question flag", "bad flags", [*an, "--question", " ", "--option", "A=x", "--option", "B=y"]),
        Case("one option flag", "bad flags", [*an, "--question", "Why?", "--option", "A=x"]),
        Case("batch size 0", "bad flags", [*tr, "--batch-size", "0"]),
        Case("batch size negative", "bad flags", [*tr, "--batch-size", "-1"]),
        Case("epochs 0", "bad flags", [*tr, "--epochs", "0"]),
        Case("lr 0", "bad flags", [*tr, "--lr", "0"]),
        Case("train top-n 0", "bad flags", [*tr, "--top-n", "0"]),
        Case("max length 0", "bad flags", ["train", "--reader", "bert", "--model", "x", "--dataset", "us", *loc, "--max-length", "0"]),
        Case("train split fraction", "bad flags", [*tr, "--train-split", "dev:1.5"]),
        Case("train split malformed", "bad flags", [*tr, "--train-split", "nope"]),
        Case("tune unknown dataset", "bad flags", ["tune", "--dataset", "nope", *loc]),
        Case("tune slow index missing", "bad flags", ["tune", "--dataset", "us", "--method", "dense", *loc]),
        Case("index unknown engine", "bad flags", ["index", "--lang", "en", "--engine", "magic", *loc]),
        Case("index unknown language", "bad flags", ["index", "--lang", "xx", *loc]),
        Case("output not writable", "bad flags", [*ev, "--output", qfile("blocker", b"") + "/out"]),
        Case("settings dir not writable", "bad flags", ["tune", "--dataset", "us", *loc, "--settings-dir", qfile("blocker2", b"") + "/tuned"]),
        # corrupted indexes
        *[
            Case(f"custom index: {what}", "corrupted index",
                 ["eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data), "--index-dir", str(corrupt_copy(custom, root, f"c{i}", damage))])
            for i, (what, damage) in enumerate([
                ("weights truncated", truncate("weights.data.npy")),
                ("weights empty", truncate("weights.data.npy", 0)),
                ("manifest a JSON list", rewrite("manifest.json", "[1, 2]")),
                ("manifest garbage", rewrite("manifest.json", "{not json")),
                ("paragraphs truncated", truncate("paragraphs.jsonl", 0.7)),
                ("vocabulary truncated", truncate("vocab.txt", 0.9)),
                ("vocabulary shuffled", shuffle_lines("vocab.txt")),
                ("vocabulary missing", remove("vocab.txt")),
            ])
        ],
        Case("custom index: manifest missing (a quick index is rebuilt)", "corrupted index",
             ["eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data), *out,
              "--index-dir", str(corrupt_copy(custom, root, "c-nomanifest", remove("manifest.json")))], expect="ok"),
        *[
            Case(f"pmi index: {path.name} truncated", "corrupted index",
                 ["eval", "--dataset", "us", "--split", "dev", "--method", "pmi", "--data-dir", str(data),
                  "--index-dir", str(corrupt_copy(pmi, root, f"p{i}", truncate(path.name))) ])
            for i, path in enumerate(sorted(p for p in pmi.iterdir() if p.name != "manifest.json"))
        ],
        # unreachable servers
        Case("es url not a url", "unreachable server", ["index", "--lang", "en", "--engine", "elasticsearch", "--es-url", "not a url", *loc]),
        Case("es url without scheme", "unreachable server", ["index", "--lang", "en", "--engine", "elasticsearch", "--es-url", "localhost:9200", *loc]),
        Case("es server down (index)", "unreachable server", ["index", "--lang", "en", "--engine", "elasticsearch", "--es-url", dead, *loc]),
        Case("es server down (eval)", "unreachable server", [*ev, "--method", "ir-es", "--engine", "elasticsearch", "--es-url", dead]),
        # wrong languages
        Case("tied answer, no language hint", "wrong language",
             [*an, "--question", "患者胸痛，应选用哪种药物？ aspirin", "--option", "A=阿司匹林", "--option", "B=肝素"], expect="ok",
             check=lambda out, err: "the question was read as English (--lang en), but it looks Chinese: try --lang zh" in out),
        Case("Chinese question, English index", "wrong language", [*an, "--question", "患者胸痛，应选用哪种药物？", "--option", "A=阿司匹林", "--option", "B=肝素"]),
        Case("Chinese questions evaluated in English", "wrong language",
             ["eval", "--questions", qfile("zh.jsonl", json.dumps({"question": "患者胸痛？", "options": {"A": "阿司匹林", "B": "肝素"}, "answer_idx": "A"}, ensure_ascii=False).encode()),
              "--json", *loc, *out], expect="ok", check=lambda out, err: json.loads(out)["unmatched"] == 1),
        Case("no Chinese textbooks", "wrong language", ["answer", "--lang", "zh", "--question", "胸痛？", "--option", "A=阿司匹林", "--option", "B=肝素", *loc]),
        # pasted questions
        Case("E. coli in the question", "pasted", an, "A man has diarrhea.\nE. coli was cultured.\nWhich drug?\nA: aspirin\nB: heparin\n".encode(),
             expect="ok", check=lambda out, err: "Prediction: " in out),
        Case("blank lines in a paste", "pasted", an, "Which drug\n\ninhibits the enzyme?\n\nA: aspirin\n\nB: heparin\n".encode(), expect="ok"),
        Case("Chinese option markers", "pasted", an, "Which drug inhibits the enzyme?\nA：aspirin\nB、heparin\n".encode(), expect="ok"),
        Case("repeated pasted letter", "pasted", an, b"Which drug?\nA: aspirin\nA: heparin\n"),
        Case("text after the options", "pasted", an, b"Which drug?\nA: aspirin\nB: heparin\nthanks\n"),
        Case("escape codes", "pasted", an, b"Which \x1b[31mdrug\x1b[0m inhibits?\nA: aspirin\nB: heparin\n", expect="ok",
             check=lambda out, err: "\x1b[31m" not in out),
        Case("stdin not UTF-8", "pasted", an, "Which drug?\nA: aspirin\nB: hép\n".encode("latin-1")),
        Case("stdin empty", "pasted", an, b""),
        Case("two questions as JSON", "pasted", [*an, "--json"], b"Which drug?\nA: aspirin\nB: heparin\n\nWhich one?\nA: insulin\nB: lithium\n",
             expect="ok", check=lambda out, err: len(out.splitlines()) == 2),
        *hostile_input(qfile, loc, root),
        *hostile_environment(qfile, loc, an, out),
        *edited_manifests(root, data, custom, pmi),
        # (the cases of issues 32 and 37, grouped by subject in text, files, limits and refusals; run in this order)
        *unicode_cases(qfile, loc), *pipe_cases(qfile, loc, root), *terminal_cases(qfile, root),
        *concurrency_cases(loc, root), *memory_cases(loc, root, data), *smaller_cases(qfile, loc, root, data),
        *output_cases(qfile, loc, root), *topics_cases(qfile, loc), *surrogate_cases(qfile, loc, root),
        *search_output_cases(qfile, root), *ensemble_cases(loc, root), *naming_cases(qfile, loc, root, data),
        *option_cases(loc), *message_cases(qfile, loc, root), *bank_cases(qfile, loc),
        *([full_disk_case(loc, tiny)] if tiny else []),
        lock_case(root, data),
        # (the cases of issue 49: compare, predictions files, ensemble names, offsets, credentials,
        # standard output, concurrent tunes and the scripts)
        *compare_cases(loc, root), *predictions_cases(loc, root), *ensemble_name_cases(loc, root), *offset_cases(loc, root),
        *credential_cases(loc, root), *stdout_cases(qfile, loc, root), *tune_concurrency_cases(loc, root),
        *get_model_cases(root, tiny), *llm_part_cases(root),
        # (the sixth round: leaking banks, names, settings that may not replace a record, runs of one name)
        *leak_cases(loc, root, data),
    ]
    if quick:
        kept: dict[str, list[Case]] = {}
        for case in cases:
            kept.setdefault(case.category, [])
            if len(kept[case.category]) < QUICK_PER_CATEGORY:
                kept[case.category].append(case)
        cases = [case for group in kept.values() for case in group]
    return cases




def hostile_input(qfile: Callable[[str, bytes], str], loc: list[str], root: Path) -> list[Case]:
    """Files whose JSON the decoder itself chokes on, and input without end."""
    big_id = b'{"id": ' + b"9" * 5000 + b', "question": "Why?", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}\n'
    corpus = b'{"id": 1, "title": "t", "text": "aspirin"}\n{"id": ' + b"9" * 5000 + b', "title": "t", "text": "x"}\n'
    return [
        Case("deeply nested JSON", "hostile input", ["eval", "--questions", qfile("deep.jsonl", b"[" * 100_000 + b"]" * 100_000), *loc],
             check=lambda out, err: "nested too deeply" in err),
        Case("id of 5,000 digits", "hostile input", ["eval", "--questions", qfile("bigid.jsonl", big_id), *loc],
             check=lambda out, err: "4300 digits" in err),
        Case("corpus id of 5,000 digits", "hostile input",
             ["index", "--lang", "en", "--corpus", qfile("bigid-corpus.jsonl", corpus), "--index-dir", str(root / "ix-bigid")],
             check=lambda out, err: "4300 digits" in err),
        Case("questions /dev/zero under ulimit -v", "hostile input", ["eval", "--questions", "/dev/zero", *loc],
             memory_kb=MEMORY_KB, check=lambda out, err: "line longer than" in err),
        Case("deeply nested JSON corpus", "hostile input",
             ["index", "--lang", "en", "--corpus", qfile("deep-corpus.jsonl", b"[" * 100_000 + b"]" * 100_000), "--index-dir", str(root / "ix-deep")]),
    ]


#: The address-space limit of the memory-limited cases (Python, numpy and numba fit well inside).
MEMORY_KB = 4_000_000


def hostile_environment(qfile: Callable[[str, bytes], str], loc: list[str], an: list[str], out: list[str]) -> list[Case]:
    """A closed standard input, endless standard input under a memory limit, an ASCII-only stdout."""
    ascii_only = {"PYTHONIOENCODING": "ascii"}
    zh = ["--question", "Which drug inhibits the enzyme? 阿司匹林", "--option", "A=aspirin", "--option", "B=肝素"]
    zh_file = qfile("zh-ascii.jsonl", json.dumps({"question": "患者胸痛 aspirin？", "options": {"A": "阿司匹林", "B": "肝素"},
                                                  "answer_idx": "A"}, ensure_ascii=False).encode() + b"\n")
    return [
        Case("stdin closed", "environment", an, stdin_closed=True, check=lambda out, err: "standard input is closed" in err),
        Case("stdin /dev/zero under ulimit -v", "environment", an, stdin_file="/dev/zero", memory_kb=MEMORY_KB,
             check=lambda out, err: "more than 64 MiB" in err),
        Case("PYTHONIOENCODING=ascii: answer", "environment", [*an, *zh], env=ascii_only, expect="ok",
             check=lambda out, err: "\\u809d\\u7d20" in out),
        Case("PYTHONIOENCODING=ascii: answer --json", "environment", [*an, "--json", *zh], env=ascii_only, expect="ok",
             check=lambda out, err: json.loads(out)["options"][0]["text"] in ("aspirin", "肝素")),
        Case("PYTHONIOENCODING=ascii: eval --json", "environment", ["eval", "--questions", zh_file, "--json", *loc, *out],
             env=ascii_only, expect="ok", check=lambda out, err: json.loads(out)["n"] == 1),
    ]


def edited_manifests(root: Path, data: Path, custom: Path, pmi: Path) -> list[Case]:
    """Indexes whose manifest's paragraph count was edited (up, down, 0): never a crash (SIGSEGV,
    SIGABRT) or another figure. The custom index reads its paragraph store by that count, so it must
    refuse it in one line; the positional index (pmi) keeps no paragraph store and does not use the
    count, so it may refuse it or answer exactly as before the edit."""
    cases = []
    for engine, good, method in (("custom", custom, "ir-custom"), ("pmi", pmi, "pmi")):
        argv = ["eval", "--dataset", "us", "--split", "dev", "--method", method, "--data-dir", str(data), "--json",
                "--output", str(root / "out-m")]
        if engine == "pmi":
            done = subprocess.run([OPENQA, *argv, "--index-dir", str(good.parent)], capture_output=True, text=True, check=True)
            before = json.loads(done.stdout)["accuracy"]
        for what, edit in (("up", lambda n: n + 1), ("down", lambda n: n - 1), ("to 0", lambda n: 0)):
            index_dir = corrupt_copy(good, root, f"m-{engine}-{what.replace(' ', '')}", edit_paragraphs(edit))
            cases.append(Case(f"{engine} manifest paragraphs {what}", "edited manifest", [*argv, "--index-dir", str(index_dir)],
                              **({} if engine == "custom" else {
                                  "expect": "either",
                                  "check": lambda out, err, before=before: not out or json.loads(out)["accuracy"] == before})))
    return cases


def edit_paragraphs(edit: Callable[[int], int]) -> Callable[[Path], None]:
    def damage(folder: Path) -> None:
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["paragraphs"] = edit(manifest["paragraphs"])
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return damage


@contextmanager
def tiny_disk(path: Path) -> Iterator[Path | None]:
    """A 64 KiB tmpfs mounted at ``path`` and filled but for 4 KiB (None where mounting is not
    allowed: not root); unmounted after."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)], capture_output=True).returncode != 0:
        yield None
        return
    try:
        (path / "filler").write_bytes(b"x" * (60 << 10))
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def full_disk_case(loc: list[str], tiny: Path) -> Case:
    """``eval`` writing its results to a full disk: one line, and neither result nor temporary file left."""
    out = tiny / "results"

    def nothing_left(stdout: str, err: str) -> bool:
        return "No space left on device" in err and [p.name for p in out.iterdir()] == []

    return Case("results to a full disk", "full disk", ["eval", "--dataset", "us", "--split", "dev", *loc, "--output", str(out)],
                check=nothing_left)


#: The lock case's other process: it takes the index folder's lock, says so (a line on stdout), and
#: lets go once another process has had the folder open (``openqa index`` waiting for the lock) for
#: ``GRACE`` seconds, or after a minute: never sooner, however slowly the machine starts openqa.
HOLDER = """
import fcntl, os, sys, time
folder, grace = os.path.realpath(sys.argv[1]), float(sys.argv[2])
fcntl.flock(os.open(folder, os.O_RDONLY), fcntl.LOCK_EX)
print(flush=True)

def waited_for():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd") if int(pid) != os.getpid() else []
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == folder for fd in fds):
                return True
        except OSError:
            pass
    return False

deadline = time.monotonic() + 60
while not waited_for() and time.monotonic() < deadline:
    time.sleep(0.1)
time.sleep(grace)
"""
#: How long the holder keeps the lock once ``openqa index`` waits for it.
GRACE_S = 2
#: Lock holders started, waited for by ``run_suite`` at the end.
HOLDERS: list[subprocess.Popen] = []


def lock_case(root: Path, data: Path) -> Case:
    """``openqa index`` while another process holds the index folder's lock: it says at once who
    holds it and that it waits, then builds."""
    index_dir = root / "ix-locked"
    index_dir.mkdir()

    def hold_lock() -> None:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(index_dir), str(GRACE_S)], stdout=subprocess.PIPE)
        holder.stdout.readline()  # it holds the lock now
        HOLDERS.append(holder)

    def said_at_once(out: str, err: str) -> bool:
        return any(line.startswith(f"openqa: {index_dir} is locked by process ") and "waiting up to" in line
                   for line in err.splitlines())

    return Case("index waits for a held lock", "lock", ["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(index_dir)],
                expect="ok", check=said_at_once, setup=hold_lock)
