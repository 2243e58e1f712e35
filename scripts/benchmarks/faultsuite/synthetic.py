"""A seeded synthetic MedQA-shaped data folder: books of sentences of medical words, and questions
whose answer word occurs in the books."""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = ("aspirin heparin warfarin ceftriaxone gentamicin vancomycin insulin metformin digoxin amiodarone "
         "lisinopril furosemide prednisone methotrexate lithium haloperidol morphine naloxone atropine "
         "epinephrine").split()
FILLER = ("patient presents with chronic acute pain fever infection kidney liver heart lung renal hepatic "
          "cardiac pulmonary inhibits blocks receptor enzyme synthesis toxicity dose therapy treatment "
          "syndrome deficiency elevated decreased serum plasma clearance bacterial viral").split()


def make_data(root: Path, paragraphs: int, questions: int, seed: int = 7) -> Path:
    """A MedQA-shaped data folder: four English books and a US dev/test split answerable from them."""
    rng = random.Random(seed)
    data = root / "data_clean"
    books = data / "textbooks" / "en"
    books.mkdir(parents=True)
    facts = []
    for b in range(4):
        paras = []
        for _ in range(paragraphs // 4):
            drug = rng.choice(WORDS)
            words = [drug, *rng.sample(FILLER, 12)]
            facts.append((drug, words[1:6]))
            paras.append(" ".join(words).capitalize() + ". " + " ".join(rng.sample(FILLER, 10)) + ".")
        (books / f"Book{b}.txt").write_text("\n\n".join(paras) + "\n")
    folder = data / "questions" / "US" / "4_options"
    folder.mkdir(parents=True)
    lines = []
    for i in range(questions):
        drug, clue = facts[rng.randrange(len(facts))]
        wrong = rng.sample([w for w in WORDS if w != drug], 3)
        letters = "ABCD"
        answer = letters[i % 4]
        options = dict(zip(letters, wrong[: i % 4] + [drug] + wrong[i % 4 :], strict=True))
        record = {"question": f"Which drug is described: {' '.join(clue)}?", "options": options,
                  "answer": drug, "answer_idx": answer, "meta_info": "step1", "metamap_phrases": clue}
        lines.append(json.dumps(record) + "\n")
    for split in ("dev", "test"):
        (folder / f"phrases_no_exclude_{split}.jsonl").write_text("".join(lines))
    return data
