"""How a trained reader (Max-out, the paper's) grows with the training questions: a learning curve on dev.

This copy of MedQA has no train split; the release has one (US 10,178 questions, MCMLE 27,400, TW
11,298). To tell a user with those splits what to expect, the reader is trained on 250, 500, 1,000
and all of the dev questions it may train on, and scored on dev questions it never saw, by the
cross-fitting of ``openqa train --cross-fit K`` (``openqa.cross_fit_reader``): dev is cut into K folds
by question content; for each held-out fold (``--folds-run``: one by default, all for the full
cross-fit) a reader trains on the first N questions of the other folds, in a seeded order of their
content (so the 250 are among the 500, and so on), and scores the held-out fold after every epoch.
Every size is scored on the same held-out questions. The accuracy reported is at the epoch count with
the best held-out accuracy (what cross-fitting chooses), beside every epoch's and the seconds
training took. No test question is read.

    python scripts/studies/reader_curve.py --dataset us --index-dir FOLDER
        # -> eval/results/studies/reader-curve-us.json (+ .png where matplotlib is installed)

The record is rewritten after every size, so a long run stopped midway keeps the sizes it finished
(``complete`` says whether all were); a rerun resumes each size's fold runs from their last epoch.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import RESULTS, command_line, data_dir, print_notes, write_record
from openqa import TrainConfig, cross_fit_reader, dataset_spec, record_folder


def sizes_of(text: str) -> list[int | None]:
    """``250,500,all`` as [250, 500, None] (None: every question the held-out folds leave)."""
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip()
        if part == "all":
            out.append(None)
        elif part.isdigit() and int(part) > 0:
            out.append(int(part))
        else:
            raise SystemExit(f"--sizes: {part!r} is neither a positive number nor 'all'")
    return out


def plot(record: dict[str, Any], path: Path) -> bool:
    """The curve (held-out accuracy against training questions) as a PNG at ``path``; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = record["sizes"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["train_questions"] for r in rows], [r["accuracy"] for r in rows], "o-", label="Max-out, held-out dev")
    ax.axhline(100 / record["options"], color="grey", linestyle=":", label="chance")
    ax.set_xscale("log")
    ax.set_xlabel("training questions")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{record['dataset']}: Max-out learning curve ({record['held_out_questions']} held-out dev questions)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="us", help="dataset whose dev split trains and scores (default: us)")
    parser.add_argument("--sizes", default="250,500,1000,all", help="training questions per size; all: every one the "
                        "held-out folds leave (default: 250,500,1000,all)")
    parser.add_argument("--folds", type=int, default=5, help="K, the folds dev is cut into (default: 5)")
    parser.add_argument("--folds-run", default="1", help="held-out folds, e.g. 1 or 1,2,3 or all (default: 1)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per size; the best held-out one is reported (default: 3)")
    parser.add_argument("--batch-size", type=int, default=8, help="questions per forward pass (default: 8)")
    parser.add_argument("--effective-batch", type=int, default=16, help="questions per optimiser step (default: 16)")
    parser.add_argument("--lr", type=float, default=1e-3, help="learning rate (default: 1e-3, openqa train's for maxout)")
    parser.add_argument("--top-n", type=int, default=3, help="evidence paragraphs per option (default: 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--index-dir", default="indexes", help="index folder with the exam language's custom and "
                        "word2vec indexes (default: ./indexes)")
    parser.add_argument("--runs", help="folder of the fold runs, one per size (default: a folder under the temporary one)")
    parser.add_argument("--results", help="folder for the record and figure (default: the repository's eval/results/studies)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    print_notes()
    data = data_dir()
    folds_run = None if args.folds_run == "all" else [int(f) for f in args.folds_run.split(",")]
    config = TrainConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, effective_batch=args.effective_batch)
    runs = Path(args.runs or Path(tempfile.gettempdir()) / f"reader-curve-{args.dataset}")
    name = f"reader-curve-{args.dataset}.json"
    command = command_line("scripts/studies/reader_curve.py", argv, ("--index-dir", "--runs", "--results"))
    folder = Path(args.results) if args.results else RESULTS / record_folder(name)
    record: dict[str, Any] = {"dataset": args.dataset, "split": "dev", "method": "reader", "reader": "maxout",
                              "options": dataset_spec(args.dataset).n_options, "protocol": None, "folds": args.folds, "folds_run": folds_run or "all", "threads": args.threads,
                              "config": {**config.__dict__}, "top_n": args.top_n, "sizes": [], "complete": False}
    for size in sorted(sizes_of(args.sizes), key=lambda n: float("inf") if n is None else n):
        start = time.perf_counter()
        fitted = cross_fit_reader(args.dataset, "maxout", folds=args.folds, output=runs / f"n{size or 'all'}", config=config,
                                  top_n=args.top_n, folds_run=folds_run, train_limit=size, final=False, write=False,
                                  data_dir=data, index_dir=args.index_dir)
        fits = fitted["cross_fit"]
        record.update(protocol=fitted["protocol"], n=fitted["n"], held_out_questions=fitted["n"])
        trained = [f["train_questions"] for f in fits["folds"]]
        row = {"size": size or "all", "train_questions": round(sum(trained) / len(trained)), "accuracy": fitted["accuracy"],
               "correct": fitted["correct"], "n": fitted["n"], "epochs_chosen": fits["epochs_chosen"],
               "accuracy_by_epoch": fits["accuracy_by_epoch"],
               "seconds": round(sum(e["seconds"] for f in fits["folds"] for e in f["epochs"]), 1),
               "seconds_per_epoch": [e["seconds"] for f in fits["folds"] for e in f["epochs"]],
               "wall_seconds": round(time.perf_counter() - start, 1), "folds": fits["folds"]}
        record["sizes"].append(row)
        print(f"{args.dataset} {row['size']} ({row['train_questions']} training questions): {row['accuracy']:.2f}% held out "
              f"after {row['epochs_chosen']} epochs (by epoch {fits['accuracy_by_epoch']}), {row['seconds']} s training",
              flush=True)
        record["accuracy"] = row["accuracy"]  # the largest size run so far (the sizes grow)
        write_record(name, record, command, folder)
    record["complete"] = True
    path = write_record(name, record, command, folder)
    print(f"wrote {path}")
    figure = folder / name.replace(".json", ".png")
    if plot(record, figure):
        print(f"wrote {figure}")


if __name__ == "__main__":
    main(sys.argv[1:])
