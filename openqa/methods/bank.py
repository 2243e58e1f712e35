"""The bank method: a question's nearest solved questions vote for the option that is their answer
(``openqa.scorers.bank``), over the exam's solved questions (its dev split, and its train split
where the data folder has one) and any the user adds (``--bank FILE``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openqa.config import OptionSource
from openqa.data import Question, load_questions, read_question_file_digest, split_file
from openqa.errors import OpenQAError
from openqa.methods.base import Method, Opened, Request
from openqa.scorers.bank import BANK_K, BANK_MATCH, BankScorer, QuestionBank, chinese_share, require_language
from openqa.workspace import Context, Exam

#: The splits of the exam's own dataset that make its default bank (train only where the data has it).
BANK_SPLITS = ("dev", "train")
#: Where those defaults come from (what a record's settings sources say).
BANK_DEFAULTS_SOURCE = "openqa default, chosen on mainland dev (bank-choice-mainland-dev.json)"


def bank_file(file: str) -> tuple[tuple[Question, ...], str]:
    """The questions of one ``--bank`` file and the sha256 of its bytes (what a result's name and
    record give for it: never its name or folder, which say nothing of what it holds), from one read
    while the file stays as it is (its inode, size and time): a run's name, its duplicate check and
    its bank all take them from that read. A folder, a FIFO or a missing file is refused in one line."""
    path = Path(file)
    if path.is_dir():
        raise OpenQAError(f"--bank {file} is a folder: give a question file with answers")
    if path.exists() and not path.is_file():  # a FIFO or a device: no end to read, or not a file's bytes
        raise OpenQAError(f"--bank {file} is not a regular file: give a question file with answers")
    try:
        seen = path.stat()
    except FileNotFoundError:
        raise OpenQAError(f"--bank {file}: no such file (give a question file with answers)") from None
    except OSError as exc:
        raise OpenQAError(f"--bank {file}: cannot read it ({exc.strerror or exc}); give a question file with answers") from None
    return _read_bank_file(path.resolve(), f"bank-{path.stem}", (seen.st_dev, seen.st_ino, seen.st_size, seen.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _read_bank_file(path: Path, qid_prefix: str, stat: tuple[int, int, int, int]) -> tuple[tuple[Question, ...], str]:
    """``bank_file``'s read, kept while ``stat`` (the file as it was seen) holds."""
    questions, digest = read_question_file_digest(path, qid_prefix=qid_prefix)
    return tuple(questions), digest


def bank_file_digests(files: tuple[str, ...]) -> list[str]:
    """The sha256 of each ``--bank`` file's bytes, in order (``bank_file``); a file given twice (the
    same bytes) is refused in one line."""
    digests: list[str] = []
    for file in files:
        digest = bank_file(file)[1]
        if digest in digests:
            raise OpenQAError(f"--bank {file} holds what --bank {files[digests.index(digest)]} holds: give each file once")
        digests.append(digest)
    return digests


def load_bank(ctx: Context, target: Exam, files: tuple[str, ...] = ()) -> QuestionBank:
    """The exam's default bank (its dataset's dev split, and train where present) plus ``files``,
    each a question file of any format openqa reads, with answers."""
    data_dir = ctx.settings.require_data_dir()
    bank_file_digests(files)  # each file once
    questions: list[Question] = []
    sources: list[dict[str, Any]] = []
    for split in BANK_SPLITS:
        if split == "train" and not split_file(target.dataset, split, data_dir).is_file():
            continue  # a data folder without the train split: the bank is dev alone (a damaged one is refused)
        part = load_questions(target.dataset, split, data_dir)
        questions += part
        sources.append({"dataset": target.dataset, "split": split, "questions": len(part)})
    for file in files:
        solved, digest = bank_file(file)
        require_language(solved, target.lang, f"--bank {file}")
        questions += solved
        sources.append({"file": Path(file).name, "sha256": digest, "questions": len(solved)})
    return QuestionBank(questions, target.lang, sources)


def banks_by_language(files: tuple[str, ...], langs: list[str]) -> dict[str, tuple[str, ...]]:
    """The ``--bank`` files of each of ``langs``, for a command that opens a bank per language (the
    server): a file goes to the language of its questions alone (as ``require_language`` tells it),
    so an English file leaves the Chinese bank as it was. With one language every file is its (and
    one of the other language is refused when its bank is opened); a file that cannot be read goes
    to every language, whose opening says why; one of a language not among ``langs`` is refused."""
    if len(langs) < 2:
        return {lang: files for lang in langs}
    out: dict[str, list[str]] = {lang: [] for lang in langs}
    for file in files:
        try:
            questions = bank_file(file)[0]
        except (OpenQAError, OSError):
            for lang in langs:
                out[lang].append(file)
            continue
        lang = "zh" if chinese_share(questions) >= 0.5 else "en"
        if lang not in out:
            raise OpenQAError(f"--bank {Path(file).name} holds {lang} questions, and no {lang} bank is served "
                              f"(--lang {','.join(langs)})")
        out[lang].append(file)
    return {lang: tuple(chosen) for lang, chosen in out.items()}


def exam_bank(ctx: Context, target: Exam, files: tuple[str, ...] = ()) -> QuestionBank:
    """``load_bank``, built once per context for the exam and files (the bank method, an LLM's
    demonstrations and a command's check before any work share it)."""
    return ctx.shared(("bank", target.dataset, target.lang, files), lambda: load_bank(ctx, target, files))


@dataclass(frozen=True, kw_only=True)
class BankMethod(Method):
    """Solved questions as evidence (see ``openqa.scorers.bank``); ``top_n`` sets how many neighbours vote."""

    name: str
    summary: str
    display_name: str = "Solved questions"

    def takes(self, setting: str) -> bool:
        return setting == "top_n"

    def reads(self, lang: str, request: Request = Request()) -> tuple[tuple[str, str], ...]:
        """The language's custom index, whose corpus a record names (the bank itself is built when opened)."""
        return ((lang, "custom"),)

    def uses_bank(self, request: Request) -> bool:
        return True

    def open(self, ctx: Context, target: Exam, request: Request = Request()) -> Opened:
        bank = exam_bank(ctx, target, request.banks)
        k = request.overrides.top_n or BANK_K
        scorer = BankScorer(bank, k, BANK_MATCH)
        settings = {"top_n": k, "match": BANK_MATCH, "bank_size": len(bank), "bank_sources": bank.sources,
                    "exam": target.exam,
                    "sources": {"top_n": OptionSource("top_n") if request.overrides.top_n else BANK_DEFAULTS_SOURCE,
                                "match": BANK_DEFAULTS_SOURCE, "bank_size": "the bank",
                                "bank_sources": OptionSource("bank") if request.banks else "the exam's solved splits",
                                "exam": target.source}}
        return Opened(scorer, ctx.open(target.lang, "custom"), settings)
