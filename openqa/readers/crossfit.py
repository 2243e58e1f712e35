"""K-fold cross-fitting: training readers on the questions users hold when there is no train split.

The MedQA copies most users hold have dev and test splits only. A reader trained on dev cannot score
dev for an ensemble to fit on (it has seen those answers), and a seeded 80/20 cut wastes a fifth of
the questions. Cross-fitting uses all of them:

1. every dev question falls in one of K folds by its content alone (``fold_of``: a seeded digest of
   its text and options, never its id, file or position), so the same question lands in the same fold
   whatever file carries it, and copies of one question never sit on both sides of a cut;
2. for each fold a new reader trains on the other K-1 folds and, after every epoch, scores the fold it
   never saw;
3. the epoch count is the one whose pooled out-of-fold accuracy is highest (fewest epochs on a tie):
   the only choice the held-out answers make, one number over all folds;
4. those out-of-fold scores, one row per dev question, are the reader's predictions on dev (a part
   an ensemble can fit on, ``openqa.scorers.precomputed``); a reader trained on all of dev for the
   chosen epoch count is the checkpoint that scores test.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np

from openqa.data import Question
from openqa.errors import OpenQAError
from openqa.readers.base import Example, Reader
from openqa.readers.train import TrainConfig, train

#: The file a fold's run folder keeps its held-out scores of every epoch in (so that a run resumes).
HELDOUT = "heldout.json"


def fold_key(question: Question, seed: int) -> int:
    """A seeded number from the question's content alone (``Question.digest``): its text and options."""
    return int(hashlib.sha256(f"{seed}:{question.digest()}".encode()).hexdigest()[:16], 16)


def fold_of(question: Question, k: int, seed: int = 13) -> int:
    """The fold (0 .. k-1) ``question`` falls in: its seeded content digest modulo ``k``. It depends on
    the question's text and options only, so no other question, file order or id moves it."""
    if k < 2:
        raise OpenQAError(f"--cross-fit needs at least 2 folds, not {k}")
    return fold_key(question, seed) % k


def assign_folds(questions: Sequence[Question], k: int, seed: int = 13) -> list[list[int]]:
    """The positions of ``questions`` in each of the ``k`` folds (``fold_of``); every fold must hold one."""
    folds: list[list[int]] = [[] for _ in range(max(k, 0))]
    for i, question in enumerate(questions):
        folds[fold_of(question, k, seed)].append(i)
    if any(not fold for fold in folds):
        raise OpenQAError(f"{len(questions)} questions leave a fold of {k} empty: cross-fit with fewer folds")
    return folds


def content_order(positions: Sequence[int], questions: Sequence[Question], seed: int = 13) -> list[int]:
    """``positions`` in a seeded order of their questions' content (the first ``n`` of it are a subset
    of n questions that the first n + m contain: what a learning curve trains on)."""
    return sorted(positions, key=lambda i: (fold_key(questions[i], seed + 1), questions[i].digest()))


def _saved_heldout(folder: Path) -> dict[str, dict[str, list[float]]]:
    path = folder / HELDOUT
    return cast(dict[str, dict[str, list[float]]], json.loads(path.read_text())) if path.is_file() else {}


def cross_fit(
    make_reader: Callable[[], Reader], data: Sequence[Example], k: int, config: TrainConfig, out_dir: Path,
    record: dict[str, Any], load: Callable[[Path], Reader], folds_run: Sequence[int] | None = None,
    train_limit: int | None = None,
) -> dict[str, Any]:
    """Cross-fit readers that ``make_reader`` makes over ``data`` in ``k`` folds (see the module), each
    fold's run in ``out_dir/fold-<i>`` (a rerun resumes it).

    :param folds_run: the folds (1 .. k) to hold out and predict (default: all: every question gets
        an out-of-fold prediction); a learning curve may run fewer.
    :param train_limit: train each fold's reader on at most this many of the other folds' questions,
        the first in ``content_order`` (default: all of them).
    :return: ``folds`` (per fold: its questions, the training questions, seconds, held-out accuracy per
        epoch), ``accuracy_by_epoch`` (pooled over the folds run), ``epochs_chosen``, ``accuracy``
        (at that epoch), ``correct``, ``n`` and ``scores`` (question digest -> its out-of-fold option
        scores at the chosen epoch, with its fold).
    """
    questions = [e.question for e in data]
    folds = assign_folds(questions, k, config.seed)
    chosen_folds = sorted(set(folds_run or range(1, k + 1)))
    if not chosen_folds or chosen_folds[0] < 1 or chosen_folds[-1] > k:
        raise OpenQAError(f"folds to run must be among 1..{k}, not {list(folds_run or [])}")
    if train_limit is not None and train_limit < 1:
        raise OpenQAError(f"the training questions per fold must be at least 1, not {train_limit}")
    by_epoch: dict[int, dict[str, tuple[int, list[float]]]] = {}
    summary = []
    for number in chosen_folds:
        held = folds[number - 1]
        pool = [i for fold, members in enumerate(folds, 1) if fold != number for i in members]
        training = content_order(pool, questions, config.seed)[:train_limit] if train_limit else pool
        folder = out_dir / f"fold-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        heldout = _saved_heldout(folder)

        def keep(epoch: int, scores: list[np.ndarray], held: list[int] = held, heldout: dict[str, Any] = heldout,
                 folder: Path = folder) -> None:
            heldout[str(epoch)] = {questions[i].digest(): [float(x) for x in row] for i, row in zip(held, scores)}
            tmp = folder / f".{HELDOUT}.tmp"
            tmp.write_text(json.dumps(heldout))
            tmp.replace(folder / HELDOUT)

        start = time.perf_counter()
        fold_record = {**record, "fold": number, "folds": k, "fold_questions": len(held), "train_questions": len(training)}
        if train_limit:  # a run folder of another size is refused rather than resumed (``check_same_run``)
            fold_record["protocol"] = f"{record.get('protocol', 'cross-fit')} (at most {train_limit} training questions)"
        run = train(make_reader(), [data[i] for i in training], [data[i] for i in held], config, folder, fold_record, load,
                    on_epoch=keep)
        overlap = {questions[i].digest() for i in training} & {questions[i].digest() for i in held}
        if overlap:  # the content rule makes this impossible; a check that it holds, never a silent leak
            raise OpenQAError(f"fold {number}: {len(overlap)} held-out questions are among its training questions")
        summary.append({"fold": number, "questions": len(held), "train_questions": len(training),
                        "seconds": round(time.perf_counter() - start, 1),
                        "epochs": [{"epoch": e["epoch"], "loss": e["loss"], "accuracy": e["selection_accuracy"],
                                    "seconds": e["seconds"]} for e in run["epochs"]]})
        for epoch, rows in heldout.items():
            for digest, row in rows.items():
                by_epoch.setdefault(int(epoch), {})[digest] = (number, row)
    held_all = [i for n in chosen_folds for i in folds[n - 1]]
    digests = [q.digest() for q in questions]
    complete = sorted(e for e, rows in by_epoch.items() if e <= config.epochs and all(digests[i] in rows for i in held_all))
    if not complete:
        raise OpenQAError(f"{out_dir}: no epoch has held-out scores for every fold run")

    def correct_at(epoch: int) -> int:
        rows = by_epoch[epoch]
        return sum(int(np.argmax(rows[digests[i]][1])) == data[i].label for i in held_all)

    accuracy_by_epoch = {e: round(100.0 * correct_at(e) / len(held_all), 2) for e in complete}
    best = max(complete, key=lambda e: (correct_at(e), -e))
    return {"folds": summary, "accuracy_by_epoch": accuracy_by_epoch, "epochs_chosen": best,
            "accuracy": 100.0 * correct_at(best) / len(held_all), "correct": correct_at(best), "n": len(held_all),
            "scores": {d: {"fold": fold, "scores": row} for d, (fold, row) in by_epoch[best].items()}}


def train_on_all(
    make_reader: Callable[[], Reader], data: Sequence[Example], config: TrainConfig, epochs: int, out_dir: Path,
    record: dict[str, Any], load: Callable[[Path], Reader],
) -> dict[str, Any]:
    """The reader that scores test: trained on every question of ``data`` for ``epochs`` (the count
    cross-fitting chose), with no selection set (its last epoch is its checkpoint, ``out_dir/best``)."""
    return train(make_reader(), data, [], replace(config, epochs=epochs), out_dir, record, load)


def out_of_fold_rows(result: dict[str, Any], data: Sequence[Example]) -> list[dict[str, Any]]:
    """The out-of-fold scores as rows of a predictions file (``openqa.scorers.precomputed``: digest,
    scores by letter, scale ``logits``), with the question's id and fold, in the order of ``data``."""
    rows = []
    for e in data:
        held = result["scores"].get(e.question.digest())
        if held is None:
            continue
        rows.append({"digest": e.question.digest(), "qid": e.question.qid, "fold": held["fold"],
                     "scores": dict(zip(e.question.options, held["scores"])), "scale": "logits"})
    return rows
