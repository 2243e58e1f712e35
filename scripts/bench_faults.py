"""Fault suite: the ``openqa`` console script against hostile input and interruptions, with figures.

It builds a synthetic corpus (seeded: sentences of medical words in books of paragraphs, and
questions whose answer word occurs in the corpus), then

* runs hostile cases (bad files and flags, corrupted indexes, unreachable servers, wrong
  languages, messy pasted questions), each expected to end in a clean one-line error (or, for
  input that is fine, an answer), and
* interrupts ``openqa index`` of every engine that runs here and ``openqa eval`` with SIGINT and
  SIGKILL at random moments, then checks that the index under its name still answers exactly as
  the complete one did (after the recovery a later open does), that a later build leaves no
  scratch folders, that no JVM crash log lands in the working folder, and that every result
  summary agrees with the files beside it.

Writes eval/results/bench-faults.json: cases tried, clean errors, tracebacks, hangs, indexes lost
or served half-written, result sets inconsistent (target: 0 of each bad outcome).

    python scripts/bench_faults.py                 # everything (about 10-15 minutes here)
    python scripts/bench_faults.py --quick         # the part the tests run
    python scripts/bench_faults.py --engines custom,lucene --tries 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

OPENQA = str(Path(sys.executable).with_name("openqa"))
RESULT = Path(__file__).resolve().parents[1] / "eval" / "results" / "bench-faults.json"
#: A command that has not ended after this many seconds hangs; after a SIGINT it has this long to stop.
HANG_SECONDS, STOP_SECONDS = 120, 20
#: Engines whose index builds are interrupted, with how many tries each per signal (slow ones fewer).
ENGINE_TRIES = {"custom": 10, "pmi": 10, "lucene": 10, "word2vec": 4, "dense": 3}
#: Hostile cases of each category in the quick run.
QUICK_PER_CATEGORY = 3
#: The method that scores with each engine's index (to compare an interrupted index with the complete one).
ENGINE_METHOD = {"custom": ("ir-custom", None), "pmi": ("pmi", None), "lucene": ("ir-es", "lucene"),
                 "dense": ("dense", None), "word2vec": (None, None)}

WORDS = ("aspirin heparin warfarin ceftriaxone gentamicin vancomycin insulin metformin digoxin amiodarone "
         "lisinopril furosemide prednisone methotrexate lithium haloperidol morphine naloxone atropine "
         "epinephrine").split()
FILLER = ("patient presents with chronic acute pain fever infection kidney liver heart lung renal hepatic "
          "cardiac pulmonary inhibits blocks receptor enzyme synthesis toxicity dose therapy treatment "
          "syndrome deficiency elevated decreased serum plasma clearance bacterial viral").split()


def make_data(root: Path, paragraphs: int, questions: int, seed: int = 7) -> Path:
    """A MedQA-shaped data folder: four English books and a US dev/test split answerable from them."""
    rng = random.Random(seed)
    data = root / "data_clean"
    books = data / "textbooks" / "en"
    books.mkdir(parents=True)
    facts = []
    for b in range(4):
        paras = []
        for _ in range(paragraphs // 4):
            drug = rng.choice(WORDS)
            words = [drug, *rng.sample(FILLER, 12)]
            facts.append((drug, words[1:6]))
            paras.append(" ".join(words).capitalize() + ". " + " ".join(rng.sample(FILLER, 10)) + ".")
        (books / f"Book{b}.txt").write_text("\n\n".join(paras) + "\n")
    folder = data / "questions" / "US" / "4_options"
    folder.mkdir(parents=True)
    lines = []
    for i in range(questions):
        drug, clue = facts[rng.randrange(len(facts))]
        wrong = rng.sample([w for w in WORDS if w != drug], 3)
        letters = "ABCD"
        answer = letters[i % 4]
        options = dict(zip(letters, wrong[: i % 4] + [drug] + wrong[i % 4 :]))
        record = {"question": f"Which drug is described: {' '.join(clue)}?", "options": options,
                  "answer": drug, "answer_idx": answer, "meta_info": "step1", "metamap_phrases": clue}
        lines.append(json.dumps(record) + "\n")
    for split in ("dev", "test"):
        (folder / f"phrases_no_exclude_{split}.jsonl").write_text("".join(lines))
    return data


@dataclass
class Case:
    """One hostile run: the arguments, its standard input, and whether an answer or an error is right."""

    name: str
    category: str
    argv: list[str]
    stdin: bytes | None = None
    expect: str = "error"  # or "ok"
    check: Callable[[str], bool] | None = None  # on stdout, for expect "ok"


@dataclass
class Outcome:
    name: str
    category: str
    verdict: str  # clean-error, ok, traceback, hang, wrong-exit
    seconds: float
    detail: str = ""


@dataclass
class Figures:
    """What bench-faults.json reports."""

    cases: int = 0
    clean_errors: int = 0
    answered: int = 0
    tracebacks: int = 0
    hangs: int = 0
    wrong_exits: int = 0
    interruptions: int = 0
    clean_stops: int = 0
    indexes_lost: int = 0
    indexes_half_written: int = 0
    scratch_left: int = 0
    crash_logs: int = 0
    result_sets_inconsistent: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)

    def stopped(self, name: str, verdict: str, detail: str) -> None:
        """Count one interrupted run by how it ended."""
        self.interruptions += 1
        if verdict in ("clean-stop", "killed", "finished"):
            self.clean_stops += 1
            return
        self.failed(verdict, {"name": name, "verdict": verdict, "detail": detail})

    def answered_case(self, outcome: Outcome) -> None:
        """Count one hostile case by how it ended."""
        self.cases += 1
        if outcome.verdict in ("clean-error", "ok"):
            self.clean_errors += outcome.verdict == "clean-error"
            self.answered += outcome.verdict == "ok"
            return
        self.failed(outcome.verdict, asdict(outcome))

    def failed(self, verdict: str, failure: dict[str, Any]) -> None:
        """Count a run that ended badly (a traceback, a hang, a wrong exit) and keep its details."""
        self.tracebacks += verdict == "traceback"
        self.hangs += verdict == "hang"
        self.wrong_exits += verdict == "wrong-exit"
        self.failures.append(failure)


def judge(case: Case, rc: int | None, out: str, err: str, seconds: float) -> Outcome:
    """Classify a finished (or hung: ``rc`` None) run of ``case``."""
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("usage:", "  "))]
    if rc is None:
        return Outcome(case.name, case.category, "hang", seconds)
    if "Traceback" in err:
        return Outcome(case.name, case.category, "traceback", seconds, err[-400:])
    if case.expect == "ok":
        good = rc == 0 and (case.check is None or case.check(out))
        return Outcome(case.name, case.category, "ok" if good else "wrong-exit", seconds, "" if good else f"rc {rc}: {err[-300:]}")
    errors = [line for line in lines if "error" in line]
    if rc in (1, 2) and len(errors) == 1:
        return Outcome(case.name, case.category, "clean-error", seconds, errors[0][:200])
    return Outcome(case.name, case.category, "wrong-exit", seconds, f"rc {rc}: {err[-300:]}")


def run_case(case: Case, cwd: Path) -> Outcome:
    start = time.perf_counter()
    try:
        proc = subprocess.run([OPENQA, *case.argv], input=case.stdin or b"", capture_output=True, cwd=cwd,
                              timeout=HANG_SECONDS)
    except subprocess.TimeoutExpired:
        return judge(case, None, "", "", time.perf_counter() - start)
    return judge(case, proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"),
                 time.perf_counter() - start)


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


def hostile_cases(root: Path, data: Path, index_dir: Path, quick: bool) -> list[Case]:
    """Every hostile case; ``quick`` keeps one or two of each kind."""
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
        Case("evidence negative", "bad flags", [*an, "--question", "Why?", "--option", "A=x", "--option", "B=y", "--evidence", "-1"]),
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
        Case("Chinese question, English index", "wrong language", [*an, "--question", "患者胸痛，应选用哪种药物？", "--option", "A=阿司匹林", "--option", "B=肝素"]),
        Case("Chinese questions evaluated in English", "wrong language",
             ["eval", "--questions", qfile("zh.jsonl", json.dumps({"question": "患者胸痛？", "options": {"A": "阿司匹林", "B": "肝素"}, "answer_idx": "A"}, ensure_ascii=False).encode()),
              "--json", *loc, *out], expect="ok", check=lambda s: json.loads(s)["unmatched"] == 1),
        Case("no Chinese textbooks", "wrong language", ["answer", "--lang", "zh", "--question", "胸痛？", "--option", "A=阿司匹林", "--option", "B=肝素", *loc]),
        # pasted questions
        Case("E. coli in the question", "pasted", an, "A man has diarrhea.\nE. coli was cultured.\nWhich drug?\nA: aspirin\nB: heparin\n".encode(),
             expect="ok", check=lambda s: "Prediction: " in s),
        Case("blank lines in a paste", "pasted", an, "Which drug\n\ninhibits the enzyme?\n\nA: aspirin\n\nB: heparin\n".encode(), expect="ok"),
        Case("Chinese option markers", "pasted", an, "Which drug inhibits the enzyme?\nA：aspirin\nB、heparin\n".encode(), expect="ok"),
        Case("repeated pasted letter", "pasted", an, b"Which drug?\nA: aspirin\nA: heparin\n"),
        Case("text after the options", "pasted", an, b"Which drug?\nA: aspirin\nB: heparin\nthanks\n"),
        Case("escape codes", "pasted", an, b"Which \x1b[31mdrug\x1b[0m inhibits?\nA: aspirin\nB: heparin\n", expect="ok",
             check=lambda s: "\x1b[31m" not in s),
        Case("stdin not UTF-8", "pasted", an, "Which drug?\nA: aspirin\nB: hép\n".encode("latin-1")),
        Case("stdin empty", "pasted", an, b""),
        Case("two questions as JSON", "pasted", [*an, "--json"], b"Which drug?\nA: aspirin\nB: heparin\n\nWhich one?\nA: insulin\nB: lithium\n",
             expect="ok", check=lambda s: len(s.splitlines()) == 2),
    ]
    if quick:
        kept: dict[str, list[Case]] = {}
        for case in cases:
            kept.setdefault(case.category, [])
            if len(kept[case.category]) < QUICK_PER_CATEGORY:
                kept[case.category].append(case)
        cases = [case for group in kept.values() for case in group]
    return cases


def scores(index_dir: Path, data: Path, engine: str) -> Any:
    """What the ``engine`` index answers for the dev questions (None when it cannot be opened)."""
    from openqa.config import Settings
    from openqa.errors import OpenQAError
    from openqa.methods import Request, open_method
    from openqa.workspace import Context, Exam
    from openqa.data import load_questions

    name, via = ENGINE_METHOD[engine]
    ctx = Context(Settings.resolve(str(data), str(index_dir), None, None, None, None))
    try:
        if name is None:  # word vectors: compare the vectors themselves
            from openqa.retrieval.registry import open_index

            index = open_index(index_dir, "en", engine, data_dir=data)
            return [round(float(x), 5) for x in index.vectors[:50].ravel()]
        scorer = open_method(ctx, name, Exam.resolve("us"), Request(engine=via)).scorer
        return [[round(v, 4) for v in r.scores.values()] for r in scorer.score(load_questions("us", "dev", data)[:20], progress=False)]
    except OpenQAError:
        return None


def interrupt(argv: list[str], cwd: Path, after: float, sig: signal.Signals) -> tuple[str, str]:
    """Start ``openqa argv``, send ``sig`` after ``after`` seconds; the verdict and stderr's tail."""
    proc = subprocess.Popen([OPENQA, *argv], cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        proc.wait(timeout=after)
        return "finished", ""
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "hang", ""
    err = err.decode(errors="replace")
    if sig == signal.SIGKILL:
        return "killed", ""
    if proc.returncode == 0 and "Traceback" not in err:
        return "finished", ""  # the signal came as the work ended
    if "Traceback" in err:
        return "traceback", err[-400:]
    return ("clean-stop" if proc.returncode == 130 and "interrupted" in err else "wrong-exit"), f"rc {proc.returncode}: {err[-300:]}"


def interrupt_builds(engine: str, tries: int, root: Path, data: Path, figures: Figures, rng: random.Random) -> None:
    """Interrupt index builds of ``engine`` over a complete index and check what is left."""
    index_dir = root / f"ix-{engine}"
    cwd = root / f"cwd-{engine}"
    cwd.mkdir(exist_ok=True)
    build = ["index", "--lang", "en", "--engine", engine, "--data-dir", str(data), "--index-dir", str(index_dir)]
    start = time.perf_counter()
    if subprocess.run([OPENQA, *build], cwd=cwd, capture_output=True).returncode != 0:
        figures.failures.append({"name": f"{engine} build", "verdict": "cannot build here: skipped"})
        return
    full = time.perf_counter() - start
    reference = scores(index_dir, data, engine)
    for sig in (signal.SIGINT, signal.SIGKILL):
        for _ in range(tries):
            name = f"{engine} index {sig.name}"
            figures.stopped(name, *interrupt(build, cwd, rng.uniform(0.2, full * 1.1), sig))
            now = scores(index_dir, data, engine)
            if now is None:
                figures.indexes_lost += 1
                figures.failures.append({"name": name, "verdict": "index lost"})
            elif now != reference:
                figures.indexes_half_written += 1
                figures.failures.append({"name": name, "verdict": "index answers differently"})
    subprocess.run([OPENQA, *build], cwd=cwd, capture_output=True)
    leftovers = [p.name for p in index_dir.iterdir() if p.name.startswith(".")]
    figures.scratch_left += len(leftovers)
    if leftovers:
        figures.failures.append({"name": f"{engine} scratch", "verdict": "left after a later build", "detail": leftovers})
    logs = list(cwd.glob("hs_err_pid*.log"))
    figures.crash_logs += len(logs)


def interrupt_evals(tries: int, root: Path, data: Path, figures: Figures, rng: random.Random) -> None:
    """Interrupt ``openqa eval`` and check that every result summary agrees with the files beside it."""
    from openqa.errors import OpenQAError
    from openqa.evaluate.results import read_result_set

    out = root / "eval-out"
    argv = ["eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data), "--index-dir", str(root / "ix-custom"), "--output", str(out)]
    start = time.perf_counter()
    subprocess.run([OPENQA, *argv], cwd=root, capture_output=True)
    full = time.perf_counter() - start
    for sig in (signal.SIGINT, signal.SIGKILL):
        for _ in range(tries):
            figures.stopped(f"eval {sig.name}", *interrupt(argv, root, rng.uniform(0.2, full * 1.1), sig))
            for summary in out.glob("*.json"):
                try:
                    read_result_set(summary)
                except OpenQAError as exc:
                    figures.result_sets_inconsistent += 1
                    figures.failures.append({"name": f"eval {sig.name}", "verdict": "result set inconsistent", "detail": str(exc)})


def run_suite(quick: bool = False, engines: list[str] | None = None, tries: int | None = None, seed: int = 11) -> dict[str, Any]:
    """Run the hostile cases and the interruptions; return the record."""
    rng = random.Random(seed)
    figures = Figures()
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="openqa-faults-") as tmp:
        root = Path(tmp)
        data = make_data(root, paragraphs=800 if quick else 8000, questions=40 if quick else 400)
        index_dir = root / "indexes"
        for engine in ("custom", "pmi"):
            subprocess.run([OPENQA, "index", "--lang", "en", "--engine", engine, "--data-dir", str(data),
                            "--index-dir", str(index_dir)], check=True, capture_output=True)
        for case in hostile_cases(root, data, index_dir, quick):
            outcome = run_case(case, root)
            outcomes.append(outcome)
            print(f"{outcome.verdict:<12} {outcome.seconds:5.1f} s  {case.category}: {case.name}", file=sys.stderr)
        for outcome in outcomes:
            figures.answered_case(outcome)
        chosen = engines or (["custom"] if quick else list(ENGINE_TRIES))
        for engine in chosen:
            print(f"interrupting {engine} index builds", file=sys.stderr)
            interrupt_builds(engine, tries or (2 if quick else ENGINE_TRIES[engine]), root, data, figures, rng)
        interrupt_evals(tries or (2 if quick else 10), root, data, figures, rng)
    return {
        "dataset": "synthetic corpus (seeded) and hostile inputs", "split": "faults", "method": "openqa console script",
        "n": figures.cases + figures.interruptions,
        "accuracy": round(100 * (figures.clean_errors + figures.answered + figures.clean_stops)
                          / max(1, figures.cases + figures.interruptions), 2),
        "accuracy_means": "share of cases and interruptions that ended cleanly (clean error, right answer, clean stop)",
        "engines_interrupted": chosen, "quick": quick, "seed": seed,
        **{k: v for k, v in asdict(figures).items()},
        "categories": sorted({o.category for o in outcomes}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases of each kind and two interruptions each (what the tests run)")
    parser.add_argument("--engines", help=f"comma-separated engines whose builds are interrupted (default: {','.join(ENGINE_TRIES)})")
    parser.add_argument("--tries", type=int, help="interruptions per engine and signal (default: per engine, up to 10)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the interruption moments (default: 11)")
    parser.add_argument("--output", type=Path, default=RESULT, help=f"record path (default: {RESULT})")
    args = parser.parse_args()
    # Started in the background, this process may ignore SIGINT, and so would every command it starts:
    # a handler here is reset to the default in each child, which then reacts to Ctrl-C as a user's does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from openqa.evaluate.results import run_record, write_atomic

    start = time.perf_counter()
    record = run_suite(args.quick, args.engines and args.engines.split(","), args.tries, args.seed)
    record.update({"seconds": round(time.perf_counter() - start, 1), **run_record("python scripts/bench_faults.py " + " ".join(sys.argv[1:]))})
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(args.output, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    bad = {k: record[k] for k in ("tracebacks", "hangs", "wrong_exits", "indexes_lost", "indexes_half_written",
                                  "scratch_left", "crash_logs", "result_sets_inconsistent")}
    print(f"{record['cases']} cases, {record['interruptions']} interruptions: {bad}; wrote {args.output}")


if __name__ == "__main__":
    main()
