"""Tiny fixture builders shared by the tests: a MedQA-shaped data folder written to tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

BOOKS = {
    "Micro": [
        "Neisseria gonorrhoeae does not ferment maltose and causes septic arthritis of the knee in sexually active adults.",
        "Ceftriaxone blocks bacterial cell wall synthesis and treats gonococcal septic arthritis.",
        "Gentamicin is an aminoglycoside that inhibits the 30S ribosomal subunit of bacteria.",
    ],
    "Cardio": [
        "Myocardial infarction presents with crushing chest pain radiating to the left arm and jaw.",
        "Aspirin irreversibly inhibits cyclooxygenase and reduces mortality after myocardial infarction.",
        "Ciprofloxacin inhibits DNA gyrase and is used for urinary tract infections by gram negative rods.",
    ],
}

QUESTIONS = [
    {
        "question": "A sexually active man has septic arthritis of the knee; the organism does not ferment maltose. Which drug blocks cell wall synthesis?",
        "options": {"A": "Gentamicin", "B": "Ciprofloxacin", "C": "Ceftriaxone", "D": "Trimethoprim"},
        "answer": "Ceftriaxone",
        "answer_idx": "C",
        "meta_info": "step1",
        "metamap_phrases": ["blocks cell wall synthesis", "knee"],
    },
    {
        "question": "A man has crushing chest pain radiating to the jaw. Which drug that inhibits cyclooxygenase reduces mortality?",
        "options": {"A": "Aspirin", "B": "Gentamicin", "C": "Ciprofloxacin", "D": "Ceftriaxone"},
        "answer": "Aspirin",
        "answer_idx": "A",
        "meta_info": "step1",
        "metamap_phrases": ["crushing chest pain", "jaw", "inhibits cyclooxygenase", "reduces mortality"],
    },
]


def make_data_dir(root: Path) -> Path:
    """A ``data_clean`` folder with two English books and a two-question US dev/test split."""
    data = root / "data_clean"
    books = data / "textbooks" / "en"
    books.mkdir(parents=True)
    for name, paragraphs in BOOKS.items():
        (books / f"{name}.txt").write_text("\n\n".join(paragraphs) + "\n")
    questions = data / "questions" / "US" / "4_options"
    questions.mkdir(parents=True)
    for split in ("dev", "test"):
        lines = "".join(json.dumps(q) + "\n" for q in QUESTIONS)
        (questions / f"phrases_no_exclude_{split}.jsonl").write_text(lines)
    return data
