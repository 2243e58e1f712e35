"""One question, one answer: the same questions through every route openqa offers, compared question
by question (matched by content, never by id or position).

Routes: ``Solver.answer`` one question at a time (text and options, as MIRAGE scores MedRAG), the
Python ``run_eval``, the command ``openqa eval``, ``openqa eval --limit`` (a prefix), the same
questions shuffled into a file (``openqa eval --questions``), and ``POST /v1/answer`` of a running
``openqa serve``. Each route's predictions and option scores are compared with the first route's.

    python scripts/studies/routes.py --dataset us --split test
    python scripts/studies/routes.py --dataset mainland --split test --limit 500
    -> eval/results/studies/routes-<dataset>-<split>-<method>[-limitN].json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import httpx

from benchlib import data_dir, record_path
from openqa import Solver, dataset_spec, load_questions, read_question_file, run_eval, run_record

ROOT = Path(__file__).resolve().parents[2]
OPENQA = str(Path(sys.executable).with_name("openqa"))
#: How many questions the --limit route takes (a prefix of the file; fewer when --limit is smaller).
PREFIX = 100

Scored = dict[str, tuple[str | None, dict[str, float | None]]]  # content key -> (prediction, scores)


def key(question: str, options: dict[str, str]) -> str:
    """A question's content: its text and lettered options (what a route is matched by)."""
    return hashlib.sha256(json.dumps([question, options], ensure_ascii=False).encode()).hexdigest()


def from_predictions(path: Path, by_qid: dict[str, str]) -> Scored:
    """A predictions file's rows, keyed by the content of the question each row's id names."""
    out: Scored = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out[by_qid[row["qid"]]] = (row["prediction"], row["scores"])
    return out


def predictions_file(folder: Path) -> Path:
    return next(folder.glob("*.predictions.jsonl"))


def cli_eval(args: list[str], out: Path) -> Path:
    done = subprocess.run([OPENQA, "eval", *args, "--output", str(out)], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"openqa eval {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return predictions_file(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_route(method: str, lang: str, asked: list[tuple[str, dict[str, str]]]) -> Scored:
    """Every question through ``POST /v1/answer`` of a real ``openqa serve`` on loopback."""
    port = free_port()
    server = subprocess.Popen([OPENQA, "serve", "--method", method, "--lang", lang, "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            for _ in range(600):
                try:
                    if client.get("/v1/methods").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.5)
            out: Scored = {}
            for question, options in asked:
                for attempt in range(50):
                    reply = client.post("/v1/answer", json={"question": question, "options": options, "method": method,
                                                            "lang": lang, "evidence": 0})
                    if reply.status_code not in (429, 503):
                        break
                    time.sleep(0.2 * (attempt + 1))
                reply.raise_for_status()
                body = reply.json()
                out[key(question, options)] = (body["prediction"], {o["letter"]: o["score"] for o in body["options"]})
            return out
    finally:
        server.terminate()
        server.wait(timeout=30)


def compare(reference: Scored, other: Scored) -> dict[str, int]:
    """How many of ``other``'s questions differ from the reference in prediction and in scores."""
    shared = [k for k in other if k in reference]
    return {"questions": len(other), "matched": len(shared),
            "predictions_differ": sum(reference[k][0] != other[k][0] for k in shared),
            "scores_differ": sum(reference[k][1] != other[k][1] for k in shared)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="us")
    parser.add_argument("--split", default="test")
    parser.add_argument("--method", default="ir-custom")
    parser.add_argument("--limit", type=int, help="the first N questions of the split (default: all)")
    args = parser.parse_args()
    spec = dataset_spec(args.dataset)
    data = data_dir()  # the MedQA data, also of the commands this runs
    questions = load_questions(args.dataset, args.split, data)[: args.limit]
    by_qid = {q.qid: key(q.question, q.options) for q in questions}
    asked = [(q.question, dict(q.options)) for q in questions]
    routes: dict[str, Scored] = {}
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    solver = Solver.open(args.method, spec.lang, exam=spec.exam)
    loop: Scored = {}
    for question, options in asked:
        answer = solver.answer(question, options, evidence=0)
        loop[key(question, options)] = (answer.prediction, {k: v for k, v in answer.scores.items()})
    routes["Solver.answer, one question at a time"], seconds["Solver.answer"] = loop, time.perf_counter() - start

    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        limit_flags = ["--limit", str(args.limit)] if args.limit else []
        evaluation = run_eval(args.method, args.dataset, split=args.split, limit=args.limit, results_dir=tmp / "api")
        routes["run_eval"] = from_predictions(predictions_file(tmp / "api"), by_qid)
        routes["openqa eval"] = from_predictions(
            cli_eval(["--dataset", args.dataset, "--split", args.split, "--method", args.method, *limit_flags], tmp / "cli"), by_qid)
        prefix = min(PREFIX, len(questions))  # a prefix of the questions compared, however few
        routes[f"openqa eval --limit {prefix}"] = from_predictions(
            cli_eval(["--dataset", args.dataset, "--split", args.split, "--method", args.method, "--limit", str(prefix)],
                     tmp / "prefix"), by_qid)
        raw = (data / "questions" / spec.files[args.split]).read_text(encoding="utf-8").splitlines()[: len(questions)]
        random.Random(0).shuffle(raw)
        shuffled = tmp / "shuffled.jsonl"
        shuffled.write_text("\n".join(raw) + "\n", encoding="utf-8")
        ids = {q.qid: key(q.question, q.options) for q in read_question_file(shuffled)}
        routes["openqa eval --questions (the same questions shuffled)"] = from_predictions(
            cli_eval(["--questions", str(shuffled), "--lang", spec.lang, "--exam", spec.exam, "--method", args.method],
                     tmp / "shuffled"), ids)
    start = time.perf_counter()
    routes["POST /v1/answer (openqa serve)"] = serve_route(args.method, spec.lang, asked)
    seconds["POST /v1/answer"] = time.perf_counter() - start

    reference_name = next(iter(routes))
    reference = routes[reference_name]
    rows = {name: compare(reference, scored) for name, scored in routes.items() if name != reference_name}
    record = {
        "dataset": args.dataset, "split": args.split, "method": args.method, "n": len(questions),
        "accuracy": evaluation.accuracy, "reference": reference_name, "routes": rows,
        "differ": sum(r["predictions_differ"] + r["scores_differ"] for r in rows.values()),
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "data": str(spec.files[args.split]), **run_record("python scripts/studies/routes.py " + " ".join(sys.argv[1:])),
    }
    limited = f"-limit{args.limit}" if args.limit else ""  # a prefix never replaces the whole split's record
    out = record_path(f"routes-{args.dataset}-{args.split}-{args.method}{limited}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(rows, indent=1))
    print(f"{record['differ']} differences over {len(rows)} routes; wrote {out}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
