"""Add the corpus fingerprint to the shipped tuned settings and calibrations made before records
carried one (``openqa/tuned/*.json``), computed from the data folder they were tuned on, so that
openqa tells a user whose corpus differs (the full MedQA release's 18 English books, say).

    python scripts/maintenance/fingerprint_tuned.py --data-dir DATA_CLEAN [--check]

Each record's language is the one whose corpus checksum its ``index`` entry names (else its
dataset's); a record naming a checksum of neither language of the data folder is left alone and
listed. The key is added at the end of the record, the rest of the file kept byte for byte, and a
calibration that recorded its settings file's digest gets the new digest (it was fitted with the
same settings). Records that already carry a fingerprint are left as they are.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the other kinds of script

from openqa import Workspace, corpus_fingerprint

ROOT = Path(__file__).resolve().parents[2]
TUNED = ROOT / "openqa" / "tuned"
KEY = "corpus_fingerprint"
#: The language of each dataset's questions (the index its settings were tuned over).
DATASET_LANGS = {"us": "en", "us5": "en", "tw-en": "en", "mainland": "zh", "mainland5": "zh", "tw": "zh", "tw-zh": "zh"}


def with_key(text: str, value: dict) -> str:
    """``text`` (a record: a JSON object, two-space indented) with ``KEY: value`` added last."""
    body = text.rstrip()
    assert body.endswith("}"), "a record is a JSON object"
    shown = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
    return f"{body[:-1].rstrip()},\n  \"{KEY}\": {shown}\n}}\n"


def language(record: dict, fingerprints: dict[str, dict]) -> str | None:
    """The language whose corpus the record was made over (None: a corpus of neither)."""
    checksum = (record.get("index") or {}).get("corpus_checksum")
    if checksum:
        return next((lang for lang, f in fingerprints.items() if f["checksum"] == checksum), None)
    return DATASET_LANGS.get(str(record.get("dataset")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the MedQA data_clean folder the shipped settings were tuned on")
    parser.add_argument("--check", action="store_true", help="change nothing: list the records that lack a fingerprint")
    args = parser.parse_args()
    where = Workspace(data_dir=args.data_dir)
    fingerprints = {lang: corpus_fingerprint(lang, workspace=where) for lang in ("en", "zh")}
    for lang, f in fingerprints.items():
        print(f"{lang}: {len(f['books'])} books, checksum {f['checksum'][:12]}")
    settings = sorted(p for p in TUNED.glob("*.json") if not p.name.endswith(".calibration.json"))
    calibrations = sorted(TUNED.glob("*.calibration.json"))
    missing, skipped = [], []
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in settings}  # what calibrations were fitted with
    for path in settings + calibrations:  # settings first: their calibrations take their new digests
        text = path.read_text(encoding="utf-8")
        record = json.loads(text)
        if KEY in record:
            continue
        lang = language(record, fingerprints)
        if lang is None:
            skipped.append(path.name)
            continue
        missing.append(path.name)
        if args.check:
            continue
        text = with_key(text, fingerprints[lang])
        fitted = record.get("settings_sha256")
        if fitted:
            pair = path.with_name(path.name.replace(".calibration.json", ".json"))
            if before.get(pair.name) == fitted:
                text = text.replace(fitted, hashlib.sha256(pair.read_bytes()).hexdigest(), 1)
        path.write_text(text, encoding="utf-8")
    print(f"{'lacking' if args.check else 'fingerprinted'}: {len(missing)} records" + "".join(f"\n  {n}" for n in missing))
    if skipped:
        print("made over a corpus of neither language (left alone):" + "".join(f"\n  {n}" for n in skipped))


if __name__ == "__main__":
    main()
