"""Measure the light install; writes eval/results/benchmarks/bench-install.json.

- **Install**: the wheel of this tree installed into a fresh virtual environment with the core
  only, and with every extra (``[all]``, torch pinned first as the README does): seconds of
  ``pip install`` (pip's cache warm, as on a developer's machine) and MB of site-packages, in all
  and beyond an empty environment's own (pip, setuptools).
- **Start-up**: ``import openqa`` and ``openqa --help`` wall seconds, median of ``--repeats`` runs
  with min and max, in the core environment and in the development one (``.venv``), runs
  alternated so that load on the machine hits both alike; with ``--before PYTHON``, also the
  ``openqa --help`` of another environment (the code before this change) in the same rounds.
- **Same figures**: IR-Custom on US test, MCMLE (dataset ``mainland``) test and TW-en test
  (11 English books), from the Python API (``openqa.run_eval``), from the ``openqa eval``
  command of the development environment and from the command of the core-only install, in
  the same run over the same indexes (built first when missing: ``--index-dir``).

    python scripts/benchmarks/bench_install.py                    # needs OPENQA_DATA (or ../shared/medqa/data_clean)
    python scripts/benchmarks/bench_install.py --no-full          # skip the full install (minutes, 3 GB)
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import REPO, command_line, data_dir, write_record

sys.path.insert(0, str(REPO))  # the test suite's wheel and environment builders

from openqa import run_eval  # noqa: E402
from tests.install_helpers import HEAVY, build_wheel, fresh_env  # noqa: E402

#: The datasets whose IR-Custom test accuracy the API must reproduce.
DATASETS = ("us", "mainland", "tw-en")
TARGETS = {"core_install_mb": 400, "help_s": 0.5}
DEV_PYTHON = REPO / ".venv" / "bin" / "python"


def site_packages_mb(env: Path) -> float:
    """MB on disk of an environment's site-packages."""
    folder = next((env / "lib").glob("python3*/site-packages"))
    return round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20, 1)


def install(env: Path, *requirements: str | Path) -> dict[str, float]:
    """Seconds to make a fresh environment and install ``requirements`` there, and its MB."""
    start = time.perf_counter()
    done = fresh_env(env, *requirements)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"installing {requirements} failed: {done.stderr.strip()[-400:]}")
    return {"seconds": round(seconds, 1), "site_packages_mb": site_packages_mb(env)}


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True)
    return time.perf_counter() - start


def startup(pythons: dict[str, Path], repeats: int) -> dict[str, dict[str, float]]:
    """Median, min and max seconds of ``import openqa`` and ``openqa --help`` per environment,
    rounds alternating between them (one warm-up run each first: the disk cache)."""
    cases = {f"{name} {what}": argv for name, python in pythons.items() for what, argv in (
        ("import openqa", [str(python), "-c", "import openqa"]),
        ("openqa --help", [str(python.with_name("openqa")), "--help"]),
    ) if not (name == "before" and what == "import openqa")}
    times: dict[str, list[float]] = {case: [] for case in cases}
    for round_ in range(repeats + 1):
        for case, argv in cases.items():
            seconds = wall(argv)
            if round_:
                times[case].append(seconds)
    return {case: {"median_s": round(statistics.median(t), 3), "min_s": round(min(t), 3), "max_s": round(max(t), 3)}
            for case, t in times.items()}


def command_accuracy(openqa: Path, dataset: str, index_dir: Path, results: Path) -> float:
    """Accuracy of ``openqa eval --dataset DATASET`` (test, IR-Custom) as printed by ``--json``."""
    (results / "no-tuning").mkdir(parents=True, exist_ok=True)  # an empty settings folder: the shipped settings
    done = subprocess.run([str(openqa), "eval", "--dataset", dataset, "--json", "--index-dir", str(index_dir),
                           "--settings-dir", str(results / "no-tuning"), "--output", str(results)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"openqa eval --dataset {dataset} failed: {done.stderr.strip()}")
    return json.loads(done.stdout)["accuracy"]


def same_figures(core_env: Path, index_dir: Path) -> dict[str, dict[str, float]]:
    """IR-Custom test accuracy per dataset from the API, the development command and the core command."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="openqa-bench-install-") as tmp:
        results = Path(tmp)
        (results / "no-tuning").mkdir()  # an empty settings folder: the shipped settings, no one's own tuning
        for dataset in DATASETS:
            api = run_eval("ir-custom", dataset, index_dir=index_dir, settings_dir=results / "no-tuning",
                           results_dir=results / "api")
            out[dataset] = {
                "api": api.accuracy, "n": api.n,
                "command": command_accuracy(DEV_PYTHON.with_name("openqa"), dataset, index_dir, results / "dev"),
                "core_install_command": command_accuracy(core_env / "bin" / "openqa", dataset, index_dir, results / "core"),
            }
            out[dataset]["equal"] = len({out[dataset][k] for k in ("api", "command", "core_install_command")}) == 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="start-up runs per case (default: 5)")
    parser.add_argument("--no-full", action="store_true", help="skip the full install")
    parser.add_argument("--before", help="the python of an environment with the code before this change, for --help")
    parser.add_argument("--index-dir", default=str(REPO / "indexes"), help="indexes of the real textbooks (default: ./indexes)")
    args = parser.parse_args()
    data_dir()
    work = Path(tempfile.mkdtemp(prefix="openqa-bench-install-"))
    try:
        wheel = build_wheel(work)
        empty = install(work / "empty")  # a fresh environment's own pip and setuptools
        core = install(work / "core", wheel)
        core["added_mb"] = round(core["site_packages_mb"] - empty["site_packages_mb"], 1)
        heavy = subprocess.run([str(work / "core" / "bin" / "python"), "-c",
                                f"import importlib.util as u; print([m for m in {HEAVY!r} if u.find_spec(m)])"],
                               capture_output=True, text=True, check=True).stdout.strip()
        full = None if args.no_full else install(work / "full", "torch==2.13.0", f"{wheel}[all]")
        if full:
            full["added_mb"] = round(full["site_packages_mb"] - empty["site_packages_mb"], 1)
        pythons = {"core": work / "core" / "bin" / "python", "dev": DEV_PYTHON}
        if args.before:
            pythons["before"] = Path(args.before)
        times = startup(pythons, args.repeats)
        figures = same_figures(work / "core", Path(args.index_dir))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {
        "dataset": ",".join(DATASETS), "split": "test", "method": "ir-custom",
        "n": sum(f["n"] for f in figures.values()),
        "accuracy": {dataset: f["api"] for dataset, f in figures.items()},
        "corpus": "MedQA textbooks (11 English books; Chinese for mainland)",
        "wheel": wheel.name,
        "empty_environment": empty,
        "core_install": {**core, "heavy_packages_found": json.loads(heavy.replace("'", '"'))},
        "full_install": full,
        "startup": times,
        "same_figures": figures,
        "targets": TARGETS,
        "met": {"core_install_mb": core["site_packages_mb"] < TARGETS["core_install_mb"],
                "core_install_added_mb": core["added_mb"] < TARGETS["core_install_mb"],
                "help_s": times["core openqa --help"]["median_s"] < TARGETS["help_s"],
                "api_equals_commands": all(f["equal"] for f in figures.values())},
        "notes": "pip's cache was warm; the machine is shared (2 cores, other work running): start-up times are medians "
                 "of alternated runs with their min and max.",
    }
    path = write_record("bench-install.json", record, command_line("scripts/benchmarks/bench_install.py", sys.argv[1:], ("--index-dir", "--before")))
    print(json.dumps(record, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
