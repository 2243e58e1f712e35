"""Values in, values out: one opened index serves several methods and settings from many threads
at once, and every thread gets exactly what scoring alone gives."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

from openqa.config import Settings
from openqa.data import Question
from openqa.methods import method
from openqa.scorers.ir import IRSettings
from openqa.workspace import Context
from tests.helpers import QUESTIONS, make_data_dir


def variants(n: int) -> list[Question]:
    """``n`` questions made from the fixture's: options shuffled and question words dropped, so that
    each has its own queries and its own avgQL."""
    rng = random.Random(5)
    out = []
    for i in range(n):
        base = QUESTIONS[i % len(QUESTIONS)]
        words = base["question"].split()
        kept = " ".join(w for w in words if rng.random() > 0.3) or words[0]
        texts = list(base["options"].values())
        rng.shuffle(texts)
        options = dict(zip("ABCD", texts))
        answer = next(letter for letter, text in options.items() if text == base["answer"])
        out.append(Question(f"t{i}", kept, options, answer, base["answer"], None, None))
    return out


def results(scored) -> list[tuple]:
    """What must not differ: each question's scores and each option's evidence rows."""
    return [(s.question.qid, s.scores, {k: [(h.index, h.score) for h in v] for k, v in s.evidence.items()}) for s in scored]


def test_methods_and_settings_scored_from_threads_equal_sequential(tmp_path):
    ctx = Context(Settings.resolve(make_data_dir(tmp_path), tmp_path / "indexes"))
    custom, positional = ctx.open("en", "custom"), ctx.open("en", "pmi")
    scorers = [  # two settings sets (and two exams' presets) over one opened custom index, and PMI
        method("ir-custom").make(custom, "usmle", IRSettings(top_n=1, aggregate="sum", query="full")),
        method("ir-custom").make(custom, "twmle", IRSettings(top_n=3, aggregate="max", query="filter")),
        method("pmi").make(positional, "usmle", IRSettings(query="full")),
    ]
    questions = variants(60)
    one_at_a_time = {(s, q.qid): results(scorer.score([q], progress=False)) for s, scorer in enumerate(scorers) for q in questions}
    whole = {s: results(scorer.score(questions, progress=False)) for s, scorer in enumerate(scorers)}
    jobs = [(s, q) for s in range(len(scorers)) for q in questions] * 3
    random.Random(7).shuffle(jobs)
    with ThreadPoolExecutor(8) as pool:
        singles = list(pool.map(lambda job: ((job[0], job[1].qid), results(scorers[job[0]].score([job[1]], progress=False))), jobs))
        batches = list(pool.map(lambda s: (s, results(scorers[s].score(questions, progress=False))), [0, 1, 2] * 4))
    assert all(one_at_a_time[key] == got for key, got in singles)
    assert all(whole[s] == got for s, got in batches)
    # a question's scores are its own: scored alone or with the 59 others, the same (avgQL is fixed)
    assert all(whole[s] == [one_at_a_time[s, q.qid][0] for q in questions] for s in range(len(scorers)))
    assert whole[0] != whole[1]  # the settings sets differ, so equality above is not vacuous


def test_threads_opening_one_empty_index_folder_build_it_once(tmp_path, monkeypatch):
    import threading

    import openqa.workspace as workspace

    data = make_data_dir(tmp_path)
    builds = []
    real = workspace.build_index
    started = threading.Barrier(4)

    def counted(*args, **kwargs):
        builds.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(workspace, "build_index", counted)
    ctx = Context(Settings.resolve(data, tmp_path / "fresh"))

    def open_it(_):
        started.wait(timeout=60)  # all four ask before any has built it
        return ctx.open("en", "custom").manifest["paragraphs"]

    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(open_it, range(4)))
    assert len(builds) == 1 and len(set(counts)) == 1
