"""Limits (command line): evaluations writing the same result names at once, tunes of one tuned
pair at once, a small address space (``ulimit -v``), and manifests and settings that Python's JSON
decoder itself cannot read."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

from faultsuite.tally import OPENQA, Case, default_sigint
from faultsuite.text import QUESTION

#: The address-space limit (ulimit -v, KiB) under which eval used to spin in OpenBLAS forever.
SMALL_MEMORY_KB = 400_000


def concurrency_cases(loc: list[str], root: Path) -> list[Case]:
    """Evaluations writing the same result names at once (5 of 180 failed after scoring when they
    shared one temporary name; later, all said they wrote it while the last one won): each one
    writes the result or is refused at once in one line because another is writing it, at least
    one writes it, the record is whole, and no temporary or lock file is left."""
    cases = []
    for round_ in range(3):
        out = root / f"out-same-{round_}"
        argv = ["eval", "--dataset", "us", "--split", "dev", "--limit", "20", *loc, "--output", str(out)]
        others: list[subprocess.Popen] = []

        def start(argv: list[str] = argv, others: list[subprocess.Popen] = others) -> None:
            others.extend(subprocess.Popen([OPENQA, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           preexec_fn=default_sigint) for _ in range(4))

        def all_fine(stdout: str, err: str, out: Path = out, others: list[subprocess.Popen] = others) -> bool:
            ended = [(p.wait(timeout=300), p.stderr.read().decode() if p.stderr else "") for p in others]
            ended.append((0 if "wrote" in stdout else 2, err))
            refused = [e for code, e in ended if code != 0]
            return (all(code in (0, 2) for code, _ in ended) and len(refused) < len(ended)
                    and all("is being written in" in e and len(e.strip().splitlines()) == 1 for e in refused)
                    and not list(out.glob(".*.tmp")) and not list(out.glob(".*.lock"))
                    and all(p.stat().st_size > 0 for p in out.glob("*.json")))

        cases.append(Case(f"five evals writing the same results ({round_ + 1})", "concurrency", argv, expect="either",
                          check=all_fine, setup=start))
    return cases


def memory_cases(loc: list[str], root: Path, data: Path) -> list[Case]:
    """A 400 MB address space (eval used to spin in OpenBLAS, deaf to SIGTERM; now refused before
    any library loads, as is any limit under openqa.limits.MIN_ADDRESS_SPACE_MB), and manifests and
    settings that Python's JSON decoder itself cannot read (nesting, a 5,000-digit number)."""
    oom = lambda out, err: "out of memory" in err  # noqa: E731 (else it answered: enough memory after all)
    deep = "[" * 100_000 + "]" * 100_000
    ev = ["eval", "--dataset", "us", "--split", "dev", "--data-dir", str(data)]
    broken = {}
    for name, text in (("deep", deep), ("bignum", '{"paragraphs": ' + "9" * 5000 + "}")):
        index = root / f"ix-manifest-{name}" / "en-custom"
        index.mkdir(parents=True)
        (index / "manifest.json").write_text(text)
        broken[name] = index.parent
    tuned = root / "tuned-deep"
    tuned.mkdir()
    (tuned / "ir-custom-us.json").write_text(deep)
    return [
        Case("eval under ulimit -v 400000", "memory", [*ev, "--index-dir", loc[3], "--output", str(root / "out-m4")],
             memory_kb=SMALL_MEMORY_KB, expect="either", check=lambda out, err: "out of memory" in err or "wrote" in out),
        Case("answer under ulimit -v 400000", "memory", ["answer", "--question", QUESTION, "--option", "A=aspirin", "--option", "B=heparin", *loc],
             memory_kb=SMALL_MEMORY_KB, expect="either", check=lambda out, err: "out of memory" in err or "Prediction" in out),
        Case("index under ulimit -v 400000", "memory", ["index", "--lang", "en", "--data-dir", str(data), "--index-dir", str(root / "ix-small-mem")],
             memory_kb=SMALL_MEMORY_KB, expect="either", check=lambda out, err: "out of memory" in err or "built" in out),
        Case("eval under ulimit -v 550000 (a C++ abort before)", "memory", [*ev, "--index-dir", loc[3], "--output", str(root / "out-m5")],
             memory_kb=550_000, check=oom),
        Case("eval --json under ulimit -v 300000", "memory", [*ev, "--index-dir", loc[3], "--json", "--output", str(root / "out-m3")],
             memory_kb=300_000, check=oom),
        Case("deeply nested manifest.json", "memory", [*ev, "--index-dir", str(broken["deep"])],
             check=lambda out, err: "nested too deeply" in err),
        Case("manifest.json with a 5,000-digit number", "memory", [*ev, "--index-dir", str(broken["bignum"])],
             check=lambda out, err: "damaged" in err),
        Case("deeply nested tuned settings", "memory", [*ev, "--index-dir", loc[3], "--settings-dir", str(tuned)],
             check=lambda out, err: "unreadable tuning record" in err),
    ]


def tune_concurrency_cases(loc: list[str], root: Path) -> list[Case]:
    """Tunes of one method and dataset (a tuned pair: settings and calibration) started together,
    on a limit each of their own: every one succeeds, one after another under the pair's lock, and
    the pair left is whole (the calibration's digest is that of the settings' bytes, and eval uses
    it); two at once used to leave one run's settings with the other's calibration."""
    cases = []
    for method, parts in (("ir-custom", []), ("ensemble", []), ("ensemble", ["--ensemble", "named"])):
        settings = root / f"tuned-together-{len(cases)}"
        tune = ["tune", "--method", method, "--dataset", "us", *parts, *loc, "--settings-dir", str(settings)]
        others: list[subprocess.Popen] = []

        def start(tune: list[str] = tune, others: list[subprocess.Popen] = others) -> None:
            others.extend(subprocess.Popen([OPENQA, *tune, "--limit", str(limit)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           preexec_fn=default_sigint) for limit in (10, 20, 30))

        def whole(out: str, err: str, method: str = method, parts: list[str] = parts, settings: Path = settings,
                  others: list[subprocess.Popen] = others) -> bool:
            if [p.wait(timeout=300) for p in others] != [0] * len(others):
                return False
            stem = f"{method}-{parts[1]}-us" if parts else f"{method}-us"
            written = (settings / f"{stem}.json").read_bytes()
            calibration = json.loads((settings / f"{stem}.calibration.json").read_text())
            check = subprocess.run([OPENQA, "eval", "--method", method, "--dataset", "us", "--split", "dev", "--limit", "3", *parts, *loc,
                                    "--settings-dir", str(settings), "--output", str(root / "out-together")], capture_output=True,
                                   preexec_fn=default_sigint)
            return (calibration["settings_sha256"] == hashlib.sha256(written).hexdigest() and check.returncode == 0
                    and not [p.name for p in settings.iterdir() if p.name.endswith((".tmp", ".staged"))])

        what = f"{method} {parts[1]}" if parts else method
        cases.append(Case(f"four tunes of one {what} pair at once", "concurrent tunes", tune, expect="ok", check=whole, setup=start))
    return cases
