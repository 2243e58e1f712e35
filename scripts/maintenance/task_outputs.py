"""Run the commands of docs/tasks.md as a researcher would, and record what they print and how long
each takes; writes eval/results/studies/tasks.json, then the page's quoted outputs and times
(``docs_figures.py``), which ``tests/test_tasks_page.py`` checks against the record.

Every task runs in a clean copy of this repository (``git archive HEAD``: the committed files, as a
fresh clone has them) in a temporary folder, with this checkout's openqa, ``OPENQA_DATA`` set and
nothing else: indexes are built into the copy's ``indexes/``, results written into its
``eval/results/``, as the commands' defaults put them. The tasks run in the page's order (as a
reader following the page: the index of the first is there for the rest), ``--repeats`` times,
each round in a fresh copy. Each command is one ``bash -c`` of the line the page shows, timed by
the wall clock (the page gives the median of the rounds); its output (standard output and error as
a terminal is left showing them, without progress bars) is kept where the page quotes it, the
copy's folder written as the paths relative to it and the data folder as ``$OPENQA_DATA``. A
command that fails stops the script. Time it on a quiet machine: the figures are the page's "how
long it takes".

    python scripts/maintenance/task_outputs.py            # needs OPENQA_DATA (the MedQA data_clean folder)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from docs_figures import PAGES, rewrite

from benchlib import REPO, command_line, data_dir, write_record


@dataclass(frozen=True)
class Step:
    """One command line of a task, and the lines of its output the page quotes (``shown``: a regular
    expression a quoted line matches; every line when empty)."""
    command: str
    shown: str = ""


@dataclass(frozen=True)
class Task:
    """What a researcher does: the files they write first (path: text), then the commands."""
    title: str
    steps: tuple[Step, ...]
    files: dict[str, str] = field(default_factory=dict)


#: The option lines and the verdict of ``openqa answer`` (not the settings or the evidence).
ANSWER_LINES = r"^(Prediction|  probability|  [A-Z]\. )"
QUESTION = """A 7-year-old boy has periorbital edema and cola-colored urine two weeks after a sore throat.
What is the most likely diagnosis?
A: Minimal change disease
B: Poststreptococcal glomerulonephritis
C: IgA nephropathy
D: Alport syndrome
"""
NOTES = {
    "notes/antibiotics.md": (
        "Penicillins and cephalosporins such as ceftriaxone are beta-lactam antibiotics: they bind penicillin-binding "
        "proteins and block the cross-linking of peptidoglycan, so they inhibit bacterial cell wall synthesis.\n\n"
        "Aminoglycosides such as gentamicin bind the 30S ribosomal subunit and inhibit bacterial protein synthesis; "
        "they can damage the kidney and the inner ear.\n\n"
        "Vancomycin binds the D-Ala-D-Ala end of cell wall precursors; a fast infusion causes flushing (red man syndrome).\n"),
    "notes/analgesics.md": (
        "Aspirin irreversibly acetylates cyclooxygenase, so platelets, which cannot make new enzyme, stay inhibited "
        "for their whole life.\n\n"
        "Acetaminophen in overdose depletes glutathione and injures the liver; N-acetylcysteine is the antidote.\n"),
    "quiz.jsonl": "".join(json.dumps(q) + "\n" for q in (
        {"question": "Which antibiotic inhibits bacterial cell wall synthesis?",
         "options": {"A": "Gentamicin", "B": "Ceftriaxone"}, "answer_idx": "B"},
        {"question": "Which drug irreversibly inhibits cyclooxygenase in platelets?",
         "options": {"A": "Aspirin", "B": "Acetaminophen"}, "answer_idx": "A"},
        {"question": "What is the antidote to an acetaminophen overdose?",
         "options": {"A": "Vancomycin", "B": "N-acetylcysteine"}, "answer_idx": "B"})),
}
#: docs/retrieval.md's pytrec_eval snippet (a test runs that one on fixtures).
SCORE = '''import pytrec_eval

qrels, run = {}, {}
with open("results/retrieval-us-test.qrels") as lines:
    for line in lines:
        qid, _, doc, relevance = line.split()
        qrels.setdefault(qid, {})[doc] = int(relevance)
with open("run.trec") as lines:
    for line in lines:
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)

measures = {"ndcg_cut_10", "P_5", "recip_rank"}
per_topic = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
for measure in sorted(measures):
    print(measure, sum(topic[measure] for topic in per_topic.values()) / len(per_topic))
'''
#: The named ensemble with the LLM part whose record docs/llm.md and the README quote, and the part file it read.
LLM_ENSEMBLE = "qwen2.5-coder-1.5b-q4km-cc324af0-options-t512-dev1000"
LLM_PART = "eval/results/llm-parts/qwen2.5-coder-1.5b-q4km-options-t512-cc324af070c2-us-test.jsonl"

#: The tasks of docs/tasks.md, in its order, by the name the page's markers use.
TASKS = {
    "index": Task("Build the index of the textbooks", (Step("openqa index --lang en", r"^built"),)),
    "answer": Task("Answer your own question", (
        Step('openqa answer --question "Which drug irreversibly inhibits cyclooxygenase?" --option A=Ceftriaxone --option B=Aspirin',
             ANSWER_LINES),
        Step("openqa answer < question.txt", ANSWER_LINES),
    ), {"question.txt": QUESTION}),
    "reproduce": Task("Reproduce a row of the README", (Step("openqa eval --dataset us --split test"),)),
    "own-corpus": Task("Your own corpus", (
        Step("openqa index --lang en --corpus notes --name mine", r"^built"),
        Step('openqa answer --corpus mine --top-n 1 --question "Which antibiotic inhibits bacterial cell wall synthesis?" '
             "--option A=Gentamicin --option B=Ceftriaxone", r"^(openqa:|Prediction|  [A-Z]\. |      \[)"),
        Step("openqa eval --questions quiz.jsonl --lang en --corpus mine", r"^quiz"),
        Step("openqa eval --questions quiz.jsonl --lang en --corpus mine --top-n 1", r"^(quiz|wrote)"),
        Step("openqa tune --questions quiz.jsonl --lang en --corpus mine", r"^(chose|probabilities|openqa:)"),
        Step('openqa answer --corpus mine --question "Which antibiotic inhibits bacterial cell wall synthesis?" '
             "--option A=Gentamicin --option B=Ceftriaxone", r"^(openqa:|Prediction|  probability|  [A-Z]\. )"),
    ), NOTES),
    "trec": Task("A TREC run and its scoring", (
        Step("openqa eval --dataset us --split test --retrieval --output results"),
        Step("openqa search --topics results/retrieval-us-test.topics.tsv --output run.trec"),
        Step("python score.py"),
    ), {"score.py": SCORE}),
    "compare": Task("Compare two runs", (
        Step("openqa compare eval/results/runs/us/us-test-ir-custom.json eval/results/runs/us/us-test-ensemble.json"),
    )),
    "llm-part": Task("An LLM as a part of the ensemble, without the model", (
        Step("openqa index --lang en --engine pmi", r"^built"),
        Step(f"openqa eval --method ensemble --dataset us --split test --limit 600 --ensemble {LLM_ENSEMBLE} "
             f"--predictions llm={LLM_PART}", r"^(us test|confidence|against|wrote)"),
    )),
}


def clean_copy(folder: Path) -> str:
    """The committed files of this repository, unpacked into ``folder`` (a fresh clone's); its commit."""
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def environment(data: Path) -> dict[str, str]:
    """A researcher's: ``OPENQA_DATA`` and no other openqa variable, this Python's commands first on
    ``PATH`` (``openqa``, ``python``), this checkout's openqa, output unbuffered (in a terminal's order)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENQA_")}
    return {**env, "OPENQA_DATA": str(data), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


#: A progress bar as tqdm draws it: ``desc: 40%|####  | 80/200 [00:01<...`` or ``desc: 72885para [00:18, ...``.
BAR = re.compile(r"^[^:]*: +(?:\d+%\|.*\| *)?\d+(?:/\d+)?\w* \[\d\d:\d\d")


def terminal_lines(text: str) -> list[str]:
    """The lines a terminal is left showing, without progress bars: of a line redrawn with ``\\r``,
    its last fragment that is no bar (none: the line goes); other lines as they are, blank ones too."""
    lines = []
    for line in text.rstrip("\n").split("\n"):
        fragments = [f for f in line.split("\r") if f.strip() and not BAR.search(f)] if "\r" in line else [line]
        lines += [f for f in fragments[-1:] if not BAR.search(f)]
    return lines


def run(step: Step, clone: Path, data: Path, env: dict[str, str]) -> dict[str, object]:
    """Run one command in ``clone``: its wall seconds, its output's line count and the lines the page quotes."""
    start = time.perf_counter()
    done = subprocess.run(["bash", "-c", step.command], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    # decoded here: text mode would make each "\r" of a redrawn progress bar a line of its own
    text = done.stdout.decode("utf-8").replace(f"{clone}/", "").replace(str(clone), ".").replace(str(data), "$OPENQA_DATA")
    if done.returncode != 0:
        raise SystemExit(f"`{step.command}` failed (exit {done.returncode}):\n{text[-2000:]}")
    lines = terminal_lines(text)
    return {"command": step.command, "seconds": round(seconds, 1), "lines": len(lines),
            "output": [line for line in lines if not step.shown or re.search(step.shown, line)]}


def run_all(data: Path) -> tuple[str, list[list[dict[str, object]]]]:
    """Every task in a fresh clean copy, in order: the commit copied, and each task's steps (``run``)."""
    with tempfile.TemporaryDirectory(prefix="openqa-tasks-") as tmp:
        clone = Path(tmp) / "openqa"
        commit = clean_copy(clone)
        env = environment(data)
        done = []
        for task in TASKS.values():
            for path, text in task.files.items():
                (clone / path).parent.mkdir(parents=True, exist_ok=True)
                (clone / path).write_text(text, encoding="utf-8")
            done.append([run(step, clone, data, env) for step in task.steps])
        return commit, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs of every task, each in a fresh copy (default: 3)")
    args = parser.parse_args()
    data = data_dir()
    books = sorted(p.name for p in (data / "textbooks" / "en").glob("*.txt"))
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rounds = []
    for repeat in range(args.repeats):
        commit, done = run_all(data)
        rounds.append(done)
        print(f"round {repeat + 1}: {sum(step['seconds'] for steps in done for step in steps):.1f} s", flush=True)
    tasks = {}
    for t, (name, task) in enumerate(TASKS.items()):
        steps = []
        for s, first in enumerate(rounds[0][t]):  # the outputs of the first round, the times of all
            seconds = [r[t][s]["seconds"] for r in rounds]
            steps.append({**first, "seconds": round(statistics.median(seconds), 1), "seconds_range": [min(seconds), max(seconds)]})
        tasks[name] = {"title": task.title, "files": task.files, "commands": [step.command for step in task.steps],
                       "steps": steps, "seconds": round(sum(step["seconds"] for step in steps), 1)}
    record = {
        "dataset": "us", "split": "test", "method": None, "n": None, "accuracy": None,
        "study": "the tasks of docs/tasks.md run as written, in a clean copy of the repository, one after another",
        "books": len(books), "corpus": f"en: {len(books)} books of $OPENQA_DATA/textbooks/en ({', '.join(books)})",
        "clean_copy_of": commit,
        "repeats": args.repeats,
        "tasks": tasks,
        "seconds": round(sum(task["seconds"] for task in tasks.values()), 1),
        "load_average": f"(1, 5, 15 min) {load_before} before the rounds, "
                        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} after",
        "notes": "wall seconds of each command on this machine: the median of the rounds (each in a fresh copy: "
                 "no index or cache but those the earlier tasks of the round built), with the least and the most; "
                 "outputs of the first round, without progress bars, their paths relative to the copy of the "
                 "repository, the data folder as $OPENQA_DATA",
    }
    path = write_record("tasks.json", record, command_line("scripts/maintenance/task_outputs.py", sys.argv[1:]))
    print(f"wrote {path.relative_to(REPO)}")
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        if "tasks.json:" in text:
            page.write_text(rewrite(text), encoding="utf-8")
            print(f"wrote the figures of {page.relative_to(REPO)}")


if __name__ == "__main__":
    main()
