"""A compact ensemble part from LLM runs' predictions: one JSON line per question with its content
digest, the letter probabilities and their scale (what ``--predictions PART=FILE`` reads; see
``openqa.scorers.precomputed``), filed under the model's identity, so that the LLM ensemble can be
refitted and re-evaluated from the records alone, without the model.

A split run in slices (``--offset``/``--limit``) is put together from the slices' predictions
files, and ``--extend`` adds the rows of an earlier compact part (whose predictions are gone); a
question found twice is refused, and so are runs whose settings differ in anything but how they
were computed (``HOW_ONLY``). Both outputs are written all or none.

    python scripts/studies/llm_part.py RUN.predictions.jsonl [MORE.predictions.jsonl ...] --model FILE.gguf \\
        --name qwen2.5-coder-1.5b-q4km-options-t512 [--extend eval/results/llm-parts/EARLIER.jsonl]
    -> eval/results/llm-parts/<name>-<sha12>-<dataset>-<split>.jsonl (+ .json: the runs' records, the model's sha256)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: benchlib and the other kinds of script

from benchlib import RESULTS, file_sha256, shareable
from openqa import run_record

#: What a part's name may hold: it becomes part of a file name in the results tree.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,80}")
#: The fields of a compact part's row.
ROW = ("qid", "digest", "scores", "scale")
#: Settings that say how a slice was computed, not what: slices may differ in them (llama.cpp's
#: prompt reuse gives a cold run's bits, ``bench-llm-cpu.json``); the part lists every value under
#: ``settings_differing``. A difference in any other setting is refused.
HOW_ONLY = ("prompt_cache", "runs_on", "cache", "sources")


def joined_settings(settings: list[Any], earlier_differing: Any = None) -> tuple[Any, dict[str, list[Any]]]:
    """The settings of a part's runs (the earliest's) and, for each ``HOW_ONLY`` setting whose value
    differs between them (or differed in the part extended, ``earlier_differing``), its values in
    order of first use; any other difference is refused."""
    dicts = [s for s in settings if isinstance(s, dict)]
    if len(dicts) < len(settings):
        if dicts:
            raise SystemExit("llm_part: some runs record their settings and some do not: give runs of one openqa")
        return settings[0] if settings else None, {}
    before = earlier_differing if isinstance(earlier_differing, dict) else {}
    differing: dict[str, list[Any]] = {}
    for key in sorted({key for s in dicts for key in s} | set(before)):
        values: list[Any] = list(before.get(key) or [])
        for s in dicts:
            if s.get(key) not in values:
                values.append(s.get(key))
        if len(values) > 1:
            if key not in HOW_ONLY:
                raise SystemExit(f"llm_part: the runs differ in their {key} ({shown(values[0])} and {shown(values[1])}): "
                                 "a part holds runs of one setting")
            differing[key] = values
    return dicts[0], differing


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"llm_part: cannot read {path} ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise SystemExit(f"llm_part: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply for the decoder
        raise SystemExit(f"llm_part: {path} is not valid JSON ({exc if isinstance(exc, ValueError) else 'nested too deeply'})") from None


def shown(value: Any) -> str:
    """A value as a message shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"


def read_record(path: Path) -> dict[str, Any]:
    """An eval record (or a compact part's ``.json``) with what a part counts: its dataset and split
    (names), its number of questions (at least 1) and its accuracy (a percentage)."""
    record = read_json(path)
    if not isinstance(record, dict):
        raise SystemExit(f"llm_part: {path} is not an eval record (a JSON {type(record).__name__}, not an object)")
    checks: tuple[tuple[str, str, Callable[[Any], bool]], ...] = (
        ("dataset", "a name", lambda v: isinstance(v, str)), ("split", "a name", lambda v: isinstance(v, str)),
        ("n", "a number of questions", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        ("accuracy", "a percentage", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 100),  # not NaN
    )
    wrong = next((f"its {key} is {shown(record.get(key))}, not {what}" for key, what, good in checks
                  if not good(record.get(key))), None)
    if wrong is not None:
        raise SystemExit(f"llm_part: {path}: {wrong}: give openqa eval's own record")
    return record


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a predictions file or compact part, each checked for the part's fields."""
    rows = []
    for number, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            raise SystemExit(f"llm_part: {path}:{number}: not valid JSON") from None
        if not isinstance(row, dict) or any(key not in row for key in ROW):
            raise SystemExit(f"llm_part: {path}:{number}: a row without {', '.join(ROW)}: rerun openqa eval")
        if not (isinstance(row["qid"], str) and isinstance(row["digest"], str)):
            raise SystemExit(f"llm_part: {path}:{number}: its qid and digest must be text: rerun openqa eval")
        problem = row_problem(row)  # what the part's reader would refuse (NaN, a probability of 2.0) is never written
        if problem is not None:
            raise SystemExit(f"llm_part: {path}:{number}: {problem}")
        rows.append({key: row[key] for key in ROW})
    return rows


def row_problem(row: dict[str, Any]) -> str | None:
    """Why a slice's row cannot go into a part (an LLM's letter probabilities: the ``probability``
    scale, under its former name ``log-probability`` too; each score a number from 0 to 1 or null), or None."""
    if row["scale"] not in ("probability", "log-probability") or not isinstance(row["scores"], dict):
        return f"scores on the {row['scale']!r} scale, not letter probabilities: rerun openqa eval --method llm"
    for letter, score in row["scores"].items():
        if score is None:
            continue
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return f"the score of {letter} is {score!r}, not a finite number"
        if not 0 <= score <= 1:
            return f"the score of {letter} is {score!r}, not a probability from 0 to 1 (the row's scale is probability)"
    return None


def question_number(qid: str) -> tuple[int, str]:
    """Rows in the split's order: MedQA ids end in the question's number."""
    tail = qid.rsplit("-", 1)[-1]
    return (int(tail), qid) if tail.isdigit() else (sys.maxsize, qid)


def write_all_or_none(files: dict[Path, str]) -> None:
    """Each file written beside itself first, then all renamed into place; refused in one line, with
    nothing renamed, where one of the names holds anything but a plain file (a folder, a link)."""
    taken = next((path for path in files if path.is_symlink() or (path.exists() and not path.is_file())), None)
    if taken is not None:
        raise SystemExit(f"llm_part: {taken} is there and is not a plain file: move it away first")
    temporary = {path: path.with_name(f".{path.name}.tmp") for path in files}
    try:
        for path, text in files.items():
            temporary[path].write_text(text, encoding="utf-8")
        for path, tmp in temporary.items():
            os.replace(tmp, path)
    except OSError as exc:
        raise SystemExit(f"llm_part: cannot write {exc.filename} ({exc.strerror})") from None
    finally:
        for tmp in temporary.values():
            tmp.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("predictions", type=Path, nargs="+", help="openqa eval .predictions.jsonl files of --method llm "
                        "(the slices of one split, one model, one variant)")
    parser.add_argument("--model", type=Path, required=True, help="the GGUF file the runs used (its sha256 names the part)")
    parser.add_argument("--name", required=True, help="a short name of the model for file names (letters, digits, . _ -)")
    parser.add_argument("--extend", type=Path, help="an earlier compact part (.jsonl, its .json beside it) whose rows are kept")
    parser.add_argument("--output-dir", type=Path, default=RESULTS / "llm-parts", help="where the part goes (default: eval/results/llm-parts)")
    args = parser.parse_args()
    if not NAME.fullmatch(args.name):
        raise SystemExit(f"llm_part: --name {args.name!r}: use letters, digits, '.', '_' and '-' (it names files)")
    if not args.model.is_file():
        raise SystemExit(f"llm_part: --model {args.model}: no such file")
    out_dir = args.output_dir
    if not out_dir.is_dir():
        raise SystemExit(f"llm_part: --output-dir {out_dir}: no such folder")
    runs = []
    for predictions in args.predictions:
        record_path = predictions.with_name(predictions.name.removesuffix(".predictions.jsonl") + ".json")
        if not predictions.name.endswith(".predictions.jsonl") or not record_path.is_file():
            raise SystemExit(f"llm_part: {predictions}: give an openqa eval .predictions.jsonl with its .json record beside it")
        runs.append((predictions, record_path, read_record(record_path), read_rows(predictions)))
    first = runs[0][2]

    def run_of(record: dict[str, Any]) -> tuple[Any, ...]:
        """What slices of one run share (a slice's variant ends in its -fromN)."""
        return record.get("dataset"), record.get("split"), record.get("method"), re.sub(r"-from\d+$", "", str(record.get("variant")))

    for predictions, _, record, _ in runs:
        if run_of(record) != (*run_of(first)[:2], "llm", run_of(first)[3]):
            raise SystemExit(f"llm_part: {predictions.name} is not a slice of the same LLM run as {runs[0][0].name} "
                             "(dataset, split, method and variant must match)")
    earlier: dict[str, Any] = {}
    rows = [row for *_, run_rows in runs for row in run_rows]
    if args.extend:
        earlier = read_record(args.extend.with_suffix(".json"))
        if (earlier.get("dataset"), earlier.get("split")) != (first["dataset"], first["split"]):
            raise SystemExit(f"llm_part: --extend {args.extend.name} is a part of {earlier.get('dataset')} {earlier.get('split')}, "
                             f"not {first['dataset']} {first['split']}")
        rows = read_rows(args.extend) + rows
    seen: dict[str, str] = {}
    for row in rows:
        if row["qid"] in seen:
            raise SystemExit(f"llm_part: question {row['qid']} is in two of the files: give slices that do not overlap")
        seen[row["qid"]] = row["digest"]
    rows.sort(key=lambda row: question_number(row["qid"]))

    model_sha = file_sha256(args.model)
    if earlier and earlier.get("model_sha256") != model_sha:
        raise SystemExit(f"llm_part: --extend {args.extend.name} was made with another model (sha256 {earlier.get('model_sha256')})")
    records = [record for _, _, record, _ in runs]
    settings, differing = joined_settings(([earlier.get("settings")] if earlier else []) + [r.get("settings") for r in records],
                                          earlier.get("settings_differing"))
    counted = ([(earlier["accuracy"], earlier["n"])] if earlier else []) + [(r["accuracy"], r["n"]) for r in records]
    n = sum(size for _, size in counted)
    if n != len(rows):
        raise SystemExit(f"llm_part: the records count {n} questions but the files hold {len(rows)}: give each run's own files")
    # the runs were made in slices that may share a reply cache: the model's own seconds are the sum
    # of each slice's new calls, which their records keep (fewer calls than questions: some replies
    # came from a cache another run filled with the same prompt)
    model_seconds = sum(r.get("model_reported_seconds") or 0 for r in records) + (earlier.get("model_seconds_all_slices") or 0)
    model_calls = sum(r.get("model_calls") or 0 for r in records) + (earlier.get("model_calls_all_slices") or 0)
    stem = f"{args.name}-{model_sha[:12]}-{first['dataset']}-{first['split']}"
    given = " ".join(p.name for p in args.predictions)
    extend = f" --extend {args.extend.name}" if args.extend else ""
    meta = {"dataset": first["dataset"], "split": first["split"], "method": "llm", "n": n,
            "accuracy": round(sum(acc * size for acc, size in counted) / n, 2),
            # one run's interval where the part is one run; slices' intervals do not combine into one
            "ci95": records[0].get("ci95") if len(counted) == 1 else None,
            # None: every slice record was made from the reply cache (the runs that asked the model left none)
            "model_seconds_all_slices": round(model_seconds, 1) or None, "model_calls_all_slices": model_calls or None,
            "slices": [*(earlier.get("slices") or []), *(p.name for p in args.predictions)],
            "records": [*(earlier.get("records") or ([earlier["record"]] if earlier.get("record") else [])), *(p.name for _, p, _, _ in runs)],
            "extends": args.extend.name if args.extend else None,
            "model": args.model.name, "model_sha256": model_sha, "model_bytes": args.model.stat().st_size,
            "settings": settings, **({"settings_differing": differing} if differing else {}),
            "run_commands": [r.get("command") for r in records],
            **run_record(f"python scripts/studies/llm_part.py {given} --model {args.model.name} --name {args.name}{extend}")}
    part = "".join(json.dumps(row) + "\n" for row in rows)
    write_all_or_none({out_dir / f"{stem}.jsonl": part, out_dir / f"{stem}.json": json.dumps(shareable(meta), indent=2) + "\n"})
    print(f"wrote {out_dir / stem}.jsonl ({len(rows)} questions, {meta['accuracy']}%) and .json")


if __name__ == "__main__":
    main()
