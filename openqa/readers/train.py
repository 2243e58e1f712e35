"""Training any reader: seeded shuffles, gradient accumulation, linear warm-up, mixed precision
(bf16 where the device has it, else fp16 with loss scaling on a GPU: ``Reader.precision``) over fp32
weights, selection accuracy after each epoch, the best checkpoint kept, and resumption from the
last finished epoch when a run is restarted."""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, cast

import numpy as np
import torch

from openqa import arguments as arg
from openqa.errors import OpenQAError
from openqa.progress import tqdm
from openqa.readers.base import Example, Reader

BEST, LAST, RUN = "best", "last", "run.json"


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings of ``openqa train`` (paper: lr 2e-5, effective batch 18 for base models).

    :param epochs: passes over the training questions.
    :param lr: the peak learning rate.
    :param batch_size: questions a forward pass.
    :param effective_batch: questions an optimizer step (gradients accumulated over batches).
    :param warmup: the share of the steps the learning rate warms up over.
    :param seed: the seed of the shuffles (and of random, numpy and torch when training starts).
    :raises OpenQAError: on numbers out of range (one line)."""

    epochs: int = 3
    lr: float = 2e-5
    batch_size: int = 2
    effective_batch: int = 18
    warmup: float = 0.1  # a fraction of the steps (the paper's 1,000 steps exceed small data)
    seed: int = 13

    def __post_init__(self) -> None:
        for flag, value in (("--epochs", self.epochs), ("--batch-size", self.batch_size),
                            ("--effective-batch", self.effective_batch)):
            arg.whole(flag, value, 1)
        if not (arg.is_number(self.lr) and self.lr > 0):
            raise OpenQAError(f"--lr must be above 0, not {arg.shown(self.lr)}")
        if not (arg.is_number(self.warmup) and 0 <= self.warmup < 1):
            raise OpenQAError(f"warm-up must be a fraction of the steps in [0, 1), not {arg.shown(self.warmup)}")
        arg.whole("--seed", self.seed, 0, 2**32 - 1)  # numpy's seeds are 32-bit


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def predict(reader: Reader, examples: Sequence[Example], batch_size: int = 8, progress: bool = False) -> list[np.ndarray]:
    """Option scores for every example, in order, without gradients."""
    reader.model.eval()
    out: list[np.ndarray] = []
    with torch.no_grad(), reader.autocast():
        for start in tqdm(range(0, len(examples), batch_size), desc="reading", unit="batch", disable=not progress):
            out.extend(reader.logits(examples[start : start + batch_size]).float().cpu().numpy())
    return out


def scored_accuracy(scores: Sequence[np.ndarray], examples: Sequence[Example]) -> float:
    """Share (%) of ``examples`` whose best option by ``scores`` (one row each) is the correct one."""
    if not examples:
        raise OpenQAError("no questions to measure accuracy on")
    return 100.0 * float(np.mean([int(np.argmax(s)) == e.label for s, e in zip(scores, examples)]))


def accuracy(reader: Reader, examples: Sequence[Example]) -> float:
    """Share (%) of examples whose best-scored option is the correct one."""
    return scored_accuracy(predict(reader, examples), examples)


#: run-record fields a resumed run must share with the one it continues (epochs may grow)
RESUME_KEYS = ("dataset", "reader", "model", "protocol", "retriever", "top_n", "reader_settings")


def check_same_run(previous: dict[str, Any], record: dict[str, Any], config: TrainConfig, out_dir: Path) -> None:
    """Refuse to resume a run folder that was started with other data or settings."""
    before = {**{k: previous[k] for k in RESUME_KEYS if k in previous}, **previous.get("config", {})}
    now = {**{k: record.get(k) for k in RESUME_KEYS}, **asdict(config)}
    changed = [f"{k} {before[k]!r} -> {now[k]!r}" for k in now if k != "epochs" and k in before and before[k] != now[k]]
    if changed:
        raise OpenQAError(f"{out_dir} holds a run with other settings ({'; '.join(changed)}); "
                          "use another --output, or delete the folder to start again")


def train(
    reader: Reader, train_set: Sequence[Example], select_set: Sequence[Example], config: TrainConfig,
    out_dir: Path, record: dict[str, Any], load: Callable[[Path], Reader],
    on_epoch: Callable[[int, list[np.ndarray]], None] | None = None,
) -> dict[str, Any]:
    """Train, keep the best checkpoint (by selection accuracy) in ``out_dir/best``; resume from ``out_dir/last``.

    An empty ``select_set`` selects nothing: ``best`` is the last epoch (a reader trained on every
    question held, for an epoch count chosen elsewhere: ``openqa.readers.crossfit``). ``on_epoch``
    receives each finished epoch's number and the selection set's scores (cross-fitting keeps a
    held-out fold's predictions of every epoch so)."""
    from transformers import get_linear_schedule_with_warmup

    out_dir.mkdir(parents=True, exist_ok=True)
    run_path = out_dir / RUN
    history: list[dict[str, Any]] = []
    first_epoch, best = 0, -1.0
    if (out_dir / LAST / "state.pt").is_file():
        check_same_run(json.loads(run_path.read_text()) if run_path.is_file() else {}, record, config, out_dir)
        reader = load(out_dir / LAST)
        state = torch.load(out_dir / LAST / "state.pt", map_location="cpu", weights_only=False)
        first_epoch, best = state["epoch"] + 1, state["best"]
        history = json.loads(run_path.read_text()).get("epochs", []) if run_path.is_file() else []
    seed_everything(config.seed)
    accumulate = max(1, config.effective_batch // config.batch_size)
    steps = max(1, config.epochs * len(train_set) // (config.batch_size * accumulate))
    optimizer = torch.optim.AdamW(reader.model.parameters(), lr=config.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup * steps), steps)
    if first_epoch:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
    # fp16 gradients underflow without loss scaling; bf16 has fp32's range and needs none
    scaler = torch.amp.GradScaler(reader.device.type, enabled=reader.precision == "fp16")
    for epoch in range(first_epoch, config.epochs):
        start = time.perf_counter()
        order = list(range(len(train_set)))
        random.Random(config.seed + epoch).shuffle(order)
        reader.model.train()
        losses = []
        bar = tqdm(range(0, len(order), config.batch_size), desc=f"epoch {epoch + 1}/{config.epochs}", unit="batch")
        for i, offset in enumerate(bar):
            batch = [train_set[j] for j in order[offset : offset + config.batch_size]]
            with reader.autocast():
                loss = reader.loss(batch) / accumulate
            scaler.scale(loss).backward()
            losses.append(loss.item() * accumulate)
            if (i + 1) % accumulate == 0 or offset + config.batch_size >= len(order):
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
                scheduler.step()
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
        scores = predict(reader, select_set)
        seconds = time.perf_counter() - start  # the epoch's training and its reading of the selection set
        if on_epoch is not None:
            on_epoch(epoch + 1, scores)
        selection = scored_accuracy(scores, select_set) if select_set else None
        history.append({"epoch": epoch + 1, "loss": round(float(np.mean(losses)), 4),
                        "selection_accuracy": None if selection is None else round(selection, 2),
                        "seconds": round(seconds, 1), "examples_per_second": round(len(order) / seconds, 2)})
        print(f"epoch {epoch + 1}: loss {history[-1]['loss']:.4f}, "
              + ("no selection set" if selection is None else f"selection accuracy {selection:.2f}%"))
        if selection is None or selection > best:
            best = -1.0 if selection is None else selection
            reader.save(out_dir / BEST)
        reader.save(out_dir / LAST)
        torch.save({"epoch": epoch, "best": best, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
                   out_dir / LAST / "state.pt")
        run_path.write_text(json.dumps({**record, "config": asdict(config), "epochs": history,
                                        "best_selection_accuracy": best if select_set else None}, indent=2))
    return cast(dict[str, Any], json.loads(run_path.read_text()))
