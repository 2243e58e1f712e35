"""The cost model a server weighs requests by: measured seconds against each method's work units.

``openqa serve`` calls a request heavy when its method estimates it at over ``HEAVY_SECONDS``
(``Solver.estimate`` / ``Method.estimate``: a fixed part plus seconds per work unit, per language).
This script measures those coefficients for IR-Custom and PMI in English and Chinese, and for one
search of the custom index, on one thread: it times the server's own work (``Solver.answer`` with
3 evidence paragraphs per option, as ``/v1/answer``; ``Searcher.search`` top-10, as ``/v1/search``)
and counts its work units (``Solver.estimate`` and ``Searcher.estimate``: IR, the index terms of the
option queries; PMI, question n-grams x option n-grams summed over the options; a search, its
query's terms). The questions: the first ``--real`` test questions of MedQA US and Mainland, the
longest test question of each, and long ones cut from their text (a question and four options of
given lengths, up to the method's size limit), among them the issue's 1,960-character Chinese PMI
question (1,000 characters and four options of 240). Each is timed ``--rounds`` times, one method
after the other after a warm-up, and its median kept. The coefficients are a least-squares fit of
seconds = fixed + per_unit x units on relative errors (each question counts alike, short or long).
The record holds every point, each fit with its errors, how many points it puts on the other side
of ``HEAVY_SECONDS`` than their measured time, and how many of each test split's questions it
estimates as heavy.

    /work/llm/quiet.sh python scripts/benchmarks/bench_costs.py   -> eval/results/benchmarks/bench-costs.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

import numpy as np

from benchlib import command_line, data_dir, write_record
from openqa import Question, Searcher, Solver, load_questions

#: The test split of each language's exam.
DATASETS = {"en": "us", "zh": "mainland"}
#: Long questions (characters of the question, of each of four options), per method and language, up
#: to the size limits (IR 20,000 characters, PMI 6,000); PMI's largest take seconds each.
IR_LONG = [(1_000, 250), (2_000, 500), (4_000, 1_000), (8_000, 2_000), (12_000, 2_000)]
LONG = {("ir-custom", "en"): IR_LONG, ("ir-custom", "zh"): IR_LONG,
        ("pmi", "en"): [(500, 100), (1_000, 240), (2_000, 240), (2_000, 500), (4_000, 500)],
        ("pmi", "zh"): [(200, 50), (400, 100), (600, 150), (1_000, 240), (800, 400)]}
#: Query lengths (characters) of the long searches.
SEARCHES = [500, 2_000, 5_000, 10_000, 20_000]


def long_questions(solver: Solver, text: str, sizes: list[tuple[int, int]]) -> list[tuple[str, Question]]:
    """Questions cut from ``text`` (real questions' text run together): the question, then four
    options, each named by its sizes (``long 1000+4x240``)."""
    out = []
    for q_chars, o_chars in sizes:
        cuts = [text[q_chars + i * o_chars: q_chars + (i + 1) * o_chars] for i in range(4)]
        out.append((f"long {q_chars}+4x{o_chars}", solver.question(text[:q_chars], dict(zip("ABCD", cuts)))))
    return out


def timed(run: Callable[[], Any], rounds: int) -> dict[str, Any]:
    """Median, min and max seconds of ``rounds`` calls of ``run``."""
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return {"seconds": round(statistics.median(seconds), 5), "min": round(min(seconds), 5), "max": round(max(seconds), 5)}


def fit(points: list[dict[str, Any]], heavy_seconds: float) -> dict[str, Any]:
    """seconds = fixed + per_unit x units, least squares on relative errors (fixed kept at 0 or more),
    and how many points it puts on the other side of ``heavy_seconds`` than their measured time."""
    units = np.array([p["units"] for p in points], dtype=float)
    seconds = np.array([p["seconds"] for p in points], dtype=float)
    weights = 1 / seconds
    design = np.stack([np.ones_like(units), units], axis=1) * weights[:, None]
    fixed, per_unit = np.linalg.lstsq(design, np.ones_like(seconds), rcond=None)[0]
    if fixed < 0:
        fixed, per_unit = 0.0, float(np.sum(units * weights * weights * seconds) / np.sum((units * weights) ** 2))
    predicted = fixed + per_unit * units
    ratio = seconds / predicted
    heavy, estimated = seconds > heavy_seconds, predicted > heavy_seconds
    return {"fixed": float(f"{fixed:.3g}"), "per_unit": float(f"{per_unit:.3g}"),
            "median_abs_relative_error": round(float(np.median(np.abs(ratio - 1))), 3),
            "measured_over_estimated": {"min": round(float(ratio.min()), 2), "max": round(float(ratio.max()), 2)},
            "heavy_measured": int(heavy.sum()), "heavy_estimated": int(estimated.sum()),
            "heavy_missed": int((heavy & ~estimated).sum()), "light_called_heavy": int((~heavy & estimated).sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", type=int, default=30, help="real test questions per language")
    parser.add_argument("--rounds", type=int, default=3, help="timings per question (the median is kept)")
    args = parser.parse_args()
    data = data_dir()
    points: dict[str, list[dict[str, Any]]] = {}
    estimate_seconds: dict[str, float] = {}
    split_units: dict[str, list[float]] = {}  # every test question's work units, weighed below with the fit
    for lang, dataset in DATASETS.items():
        real = load_questions(dataset, "test", data)
        text = "".join(q.question + "".join(q.options.values()) for q in real[:400])
        longest = max(real, key=lambda q: len(q.question) + sum(map(len, q.options.values())))
        for name in ("ir-custom", "pmi"):
            solver = Solver.open(name, lang)
            asked = [("real", q) for q in real[: args.real]] + [("longest test question", longest)] + long_questions(solver, text, LONG[name, lang])
            solver.answer(asked[0][1], evidence=3)  # warm: numba, caches
            key = f"{name}_{lang}".replace("-", "_")  # a key a page's {{ record:key }} placeholder can name
            split_units[key] = [solver.estimate(q).units for q in real]
            points[key] = []
            for kind, q in asked:
                start = time.perf_counter()
                units = solver.estimate(q).units
                estimate_seconds[key] = max(estimate_seconds.get(key, 0.0), time.perf_counter() - start)
                took = timed(lambda q=q, solver=solver: solver.answer(q, evidence=3), args.rounds)
                points[key].append({"kind": kind, "characters": len(q.question) + sum(map(len, q.options.values())),
                                    "units": units, **took})
                print(key, kind, points[key][-1], flush=True)
        searcher = Searcher.open(lang, "custom")
        queries = [("real", q.question) for q in real[: args.real]] + [(f"long {n}", text[:n]) for n in SEARCHES]
        searcher.search(queries[0][1])
        key = f"search_{lang}"
        points[key] = []
        for kind, query in queries:
            units = searcher.estimate(query).units
            took = timed(lambda query=query, searcher=searcher: searcher.search(query, k=10), args.rounds)
            points[key].append({"kind": kind, "characters": len(query), "units": units, **took})
            print(key, points[key][-1], flush=True)
    heavy_seconds = searcher.estimate(queries[0][1]).heavy_seconds  # the server's mark (HEAVY_SECONDS)
    fits = {key: fit(rows, heavy_seconds) for key, rows in points.items()}
    for key, units in split_units.items():
        estimated = fits[key]["fixed"] + fits[key]["per_unit"] * np.array(units)
        fits[key]["test_split"] = {"questions": len(units), "estimated_max_seconds": round(float(estimated.max()), 3),
                                   "estimated_heavy": int((estimated > heavy_seconds).sum())}
    issue = next(p for p in points["pmi_zh"] if p["kind"] == "long 1000+4x240")
    record = {
        "dataset": "us, mainland", "split": "test", "method": "cost model of ir-custom, pmi and a custom search (serve)",
        "n": sum(map(len, points.values())), "accuracy": None,
        "units": {"ir-custom": "index terms of the option queries (question part + option), summed",
                  "pmi": "question n-grams x option n-grams, summed over the options",
                  "search": "index terms of the query"},
        "heavy_seconds": heavy_seconds, "fits": fits,
        "test_questions": {"questions": sum(f["test_split"]["questions"] for f in fits.values() if "test_split" in f),
                           "estimated_heavy": sum(f["test_split"]["estimated_heavy"] for f in fits.values() if "test_split" in f),
                           "what": "US and Mainland test questions, each weighed for IR-Custom and for PMI"},
        "issue_question": {"what": "Chinese PMI, 1,000-character question and four 240-character options", **issue,
                           "estimated": round(fits["pmi_zh"]["fixed"] + fits["pmi_zh"]["per_unit"] * issue["units"], 3)},
        "estimate_seconds_max": {key: round(value, 4) for key, value in estimate_seconds.items()},
        "points": points, "rounds": args.rounds,
        "notes": f"{os.cpu_count()} cores, one thread; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())} at the end",
    }
    out = write_record("bench-costs.json", record, command_line("scripts/benchmarks/bench_costs.py", sys.argv[1:]))
    print(json.dumps(fits, indent=1), "->", out)


if __name__ == "__main__":
    main()
