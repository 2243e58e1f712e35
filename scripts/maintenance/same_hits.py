"""Whether a change to openqa leaves every search hit as it was: the working tree's openqa and
another revision's search the same real MedQA queries, and their hits (paragraph ids, books,
scores, ranks and texts) are compared.

    python scripts/maintenance/same_hits.py --base REV    -> "identical", or the first difference (exit 1)

The searches (``Searcher``, default engine ``custom``): the 5,092 US test option queries
(question + option, as ``scripts/benchmarks/bench_search.py`` times them) top-10 on one thread,
top-100 on two, top-10 with the query-side parameters set, and the first 300 one at a time; the
first 400 US test questions' options alone; the first 1,000 MCMLE and 300 TW test questions'
queries over the Chinese index. Each revision runs in a process of its own (this script with
``--dump``), the base from ``git archive REV openqa`` in a temporary folder; both read the indexes
``OPENQA_INDEXES`` names and the data ``OPENQA_DATA`` names.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib

from benchlib import REPO, data_dir

Hits = list[list[list[Any]]]  # per query, per hit: id, book, score, rank, SHA-256 of the text


def full_queries(dataset: str, limit: int | None = None, with_question: bool = True) -> list[str]:
    """One query per option of ``dataset``'s first ``limit`` test questions: question + option
    (IR-Custom's "full" queries), or the option alone."""
    from openqa import load_questions

    questions = load_questions(dataset, "test", data_dir())[:limit]
    return [f"{q.question if with_question else ''} {text}".strip() for q in questions for text in q.options.values()]


def dump(path: Path) -> None:
    """Run every search with the openqa on the import path and write the hits to ``path`` (JSON)."""
    import openqa
    from openqa import Searcher, SearchHit

    def rows(hits: list[list[SearchHit]]) -> Hits:
        return [[[h.id, h.book, h.score, h.rank, hashlib.sha256(h.text.encode()).hexdigest()] for h in found] for found in hits]

    us = full_queries("us")
    en = Searcher.open("en", "custom", data_dir=data_dir())
    zh = Searcher.open("zh", "custom", data_dir=data_dir())
    searches: dict[str, Hits] = {
        "us test, top 10, 1 thread": rows(en.batch_search(us, k=10).hits),
        "us test, top 100, 2 threads": rows(en.batch_search(us, k=100, threads=2).hits),
        "us test, first 300 one at a time, top 5": rows([en.search(q, k=5) for q in us[:300]]),
        "us test, first 400 questions' options alone, top 10": rows(en.batch_search(full_queries("us", 400, False), k=10).hits),
        "mainland test, first 1,000 questions, top 10": rows(zh.batch_search(full_queries("mainland", 1000), k=10).hits),
        "tw test, first 300 questions, top 10": rows(zh.batch_search(full_queries("tw", 300), k=10).hits),
    }
    en.set_params(kq=1.1, bq=0.2, avg_ql=40.0)
    searches["us test, top 10, kq 1.1, bq 0.2, avg_ql 40"] = rows(en.batch_search(us, k=10).hits)
    path.write_text(json.dumps({"openqa": str(Path(openqa.__file__).parent), "searches": searches}), encoding="utf-8")


def run_dump(openqa_parent: Path, out: Path) -> dict[str, Hits]:
    """The searches of the openqa package found in ``openqa_parent``, run in a process of its own."""
    env = {**os.environ, "PYTHONPATH": str(openqa_parent)}
    subprocess.run([sys.executable, __file__, "--dump", str(out)], env=env, check=True)
    record = json.loads(out.read_text(encoding="utf-8"))
    assert Path(record["openqa"]).resolve() == (openqa_parent / "openqa").resolve(), record["openqa"]
    searches: dict[str, Hits] = record["searches"]
    return searches


def first_difference(base: dict[str, Hits], new: dict[str, Hits]) -> str | None:
    """Where the two runs' hits first differ (search, query number, hit), or None."""
    for name, hits in base.items():
        if new.get(name) == hits:
            continue
        found = new.get(name, [])
        if len(found) != len(hits):
            return f"{name}: {len(hits)} queries before, {len(found)} now"
        for number, (before, now) in enumerate(zip(hits, found), start=1):
            if before != now:
                at = next((i for i, (a, b) in enumerate(zip(before, now)) if a != b), min(len(before), len(now)))
                return f"{name}, query {number}, hit {at + 1}: {before[at:at + 1]} before, {now[at:at + 1]} now ({len(before)} and {len(now)} hits)"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the git revision to compare the working tree's openqa with")
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)  # one side's run
    args = parser.parse_args()
    if args.dump:
        dump(args.dump)
        return
    if not args.base:
        parser.error("give --base REV")
    with tempfile.TemporaryDirectory(prefix="same-hits-") as tmp:
        folder = Path(tmp)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.base, "openqa"], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder / "base", filter="data")
        base = run_dump(folder / "base", folder / "base.json")
        new = run_dump(REPO, folder / "new.json")
    difference = first_difference(base, new)
    queries = [found for hits in base.values() for found in hits]
    print(f"{len(base)} searches, {len(queries)} queries, {sum(map(len, queries))} hits:", difference or "identical")
    sys.exit(1 if difference else 0)


if __name__ == "__main__":
    main()
