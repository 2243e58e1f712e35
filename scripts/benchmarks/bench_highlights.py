"""How much of each Chinese evidence paragraph the page marks: real MCMLE questions solved as
``openqa serve`` answers them (the served method, 5 paragraphs per option, as the page asks), and
for every paragraph the share of its characters inside a marked span, under the marking rule that
ships (``openqa.answer.query_terms``: the query's words) and under the former one (the index's terms:
every shared character and character bigram), on the same paragraphs.

The record keeps each rule's median and spread, the paragraphs left with no mark at all (real term
matches must stay marked), and the most often marked strings (what a reader sees marked).

    python scripts/benchmarks/bench_highlights.py [--limit 50]   -> eval/results/benchmarks/bench-highlights-zh.json
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import command_line, data_dir, write_record
from openqa import Solver, load_questions

#: Paragraphs per option the page asks for.
PAGE_EVIDENCE = 5
#: The most a typical paragraph may have marked: half the 26% the fault report (issue 37) found at least.
TARGET_MEDIAN_PERCENT = 13.0
#: The most paragraphs that may be left with no mark at all (a retrieved paragraph shares a word with
#: its query nearly always; the former rule marked a shared character even in OCR noise).
TARGET_UNMARKED_PERCENT = 1.0

#: A marked span of a paragraph: its first character and the one past its last.
Span = tuple[int, int]


def coverage(text: str, spans: list[Span]) -> float:
    """The share of ``text``'s characters inside one of ``spans``."""
    return sum(end - start for start, end in spans) / len(text) if text else 0.0


def spread(shares: list[float]) -> dict[str, Any]:
    """Median, quartiles, deciles and extremes of ``shares``, as percentages."""
    deciles = statistics.quantiles(shares, n=10)
    quartiles = statistics.quantiles(shares, n=4)
    return {"median_percent": round(100 * statistics.median(shares), 1),
            "quartiles_percent": [round(100 * quartiles[0], 1), round(100 * quartiles[2], 1)],
            "deciles_10_90_percent": [round(100 * deciles[0], 1), round(100 * deciles[-1], 1)],
            "min_percent": round(100 * min(shares), 1), "max_percent": round(100 * max(shares), 1),
            "unmarked_paragraphs": sum(share == 0 for share in shares)}


def former_spans(tokenizer: Any) -> Callable[[str, str, str], list[Span]]:
    """The marking rule before issue 37, over the Chinese index's ``tokenizer``: every index term
    of the question and option (characters and their bigrams) found in the paragraph, longest first
    (the rule as it was, written out here: the shipped one has replaced it)."""

    def spans(text: str, question: str, option: str) -> list[Span]:
        terms = sorted(frozenset(tokenizer.tokenize(tokenizer.prepare_query(f"{question} {option}"))), key=len, reverse=True)
        found = re.compile("|".join(map(re.escape, terms)), re.IGNORECASE) if terms else None
        return [m.span() for m in found.finditer(text)] if found else []

    return spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50, help="first questions of the mainland dev split (default: 50)")
    parser.add_argument("--method", default="ir-custom", help="the served method (default: ir-custom, what openqa serve serves)")
    args = parser.parse_args()
    questions = load_questions("mainland", "dev", data_dir())[: args.limit]
    solver = Solver.open(args.method, lang="zh")
    former = former_spans(solver.index.tokenizer)
    shipped, was = "words (shipped)", "index terms (former)"
    shares: dict[str, list[float]] = {shipped: [], was: []}
    shown: dict[str, list[float]] = {rule: [] for rule in shares}  # the predicted option's paragraphs: what the page shows first
    marked: dict[str, Counter[str]] = {rule: Counter() for rule in shares}
    for question in questions:
        answer = solver.answer(question, evidence=PAGE_EVIDENCE).to_dict()
        for option in answer["options"]:
            for paragraph in option["evidence"]:
                text = paragraph["text"]
                for rule, spans in ((shipped, paragraph["spans"]), (was, former(text, question.question, option["text"]))):
                    shares[rule].append(coverage(text, spans))
                    if option["letter"] == answer["prediction"]:
                        shown[rule].append(shares[rule][-1])
                    marked[rule].update(text[start:end] for start, end in spans)
    rules = {rule: {**spread(shares[rule]), "predicted_option": spread(shown[rule]),
                    "most_marked": [[word, count] for word, count in marked[rule].most_common(20)]} for rule in shares}
    now, before = rules[shipped], rules[was]
    paragraphs = len(shares[shipped])
    record = {"dataset": "mainland", "split": "dev", "method": f"{args.method} evidence marks (zh)", "n": len(questions),
              "accuracy": None, "paragraphs": paragraphs, "evidence_per_option": PAGE_EVIDENCE,
              "measure": "share of a paragraph's characters inside a marked span, over every option's paragraphs",
              "rules": rules,
              "target": f"median share marked under {TARGET_MEDIAN_PERCENT}%, at most {TARGET_UNMARKED_PERCENT}% of paragraphs unmarked",
              "met": now["median_percent"] < TARGET_MEDIAN_PERCENT
              and now["unmarked_paragraphs"] <= TARGET_UNMARKED_PERCENT / 100 * paragraphs}
    out = write_record("bench-highlights-zh.json", record, command_line("scripts/benchmarks/bench_highlights.py", sys.argv[1:]))
    print(f"{len(questions)} questions, {paragraphs} paragraphs: median marked {now['median_percent']}% "
          f"(was {before['median_percent']}%), unmarked {now['unmarked_paragraphs']} (was {before['unmarked_paragraphs']}); wrote {out}")

if __name__ == "__main__":
    main()
