"""Keys at a terminal: ``openqa answer`` on a pseudo-terminal, with Ctrl-C and Ctrl-D at the moments
that used to lose them (as the prompt is drawn, right after the final Enter, while an answer is
worked out, during loading). Each scenario is one case: "ok" when every step showed what it must
and the command ended as it must."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from faultsuite.tally import OPENQA, Outcome

from tests.helpers import Terminal

QUESTION = b"Which drug inhibits the enzyme?\rA: aspirin\rB: heparin\r"
PROMPT = b"\n> "


def ctrl_c_as_the_prompt_is_drawn(term: Terminal) -> int:
    term.wait_for(PROMPT)
    for attempt in range(1, 6):
        term.type(b"Which drug is half typed?\r")
        term.wait_for(b"\n. ", count=attempt)
        term.type(b"\x03")
        term.wait_for(PROMPT, count=attempt + 1)
    assert term.seen.count(b"(question dropped)") == 5
    term.type(QUESTION + b"\r")
    term.wait_for(b"Prediction: ")
    term.wait_for(PROMPT, count=7)
    term.type(b"\x04")
    return 0


def ctrl_c_after_the_final_enter(term: Terminal) -> int:
    term.wait_for(PROMPT)
    term.type(QUESTION)
    term.wait_for(b"heparin\r\n. ")
    term.type(b"\r\x03")
    term.wait_for(PROMPT, count=2)
    assert b"(question dropped)" in term.seen
    term.type(QUESTION + b"\r")
    term.wait_for(b"Prediction: ")
    term.wait_for(PROMPT, count=3)
    term.type(b"\x04")
    return 0


def ctrl_d_while_answering(term: Terminal) -> int:
    term.type(QUESTION + b"\r\x04")
    term.wait_for(b"Prediction: ")
    return 0


def ctrl_d_during_loading(term: Terminal) -> int:
    term.type(b"\x04")
    return 0


def ctrl_c_at_an_empty_prompt(term: Terminal) -> int:
    term.wait_for(PROMPT)
    term.type(b"\x03")
    term.wait_for(b"openqa: interrupted")
    return 130


SCENARIOS: dict[str, Callable[[Terminal], int]] = {
    "Ctrl-C as the continuation prompt is drawn (5 times), then a question": ctrl_c_as_the_prompt_is_drawn,
    "Ctrl-C right after the final Enter": ctrl_c_after_the_final_enter,
    "Ctrl-D typed while the answer is worked out": ctrl_d_while_answering,
    "Ctrl-D typed during loading": ctrl_d_during_loading,
    "Ctrl-C at an empty prompt quits": ctrl_c_at_an_empty_prompt,
}


def typed_cases(loc: list[str], cwd: Path, quick: bool, per_category: int) -> list[Outcome]:
    """Run each scenario on a fresh ``openqa answer`` (``quick``: the first ``per_category``)."""
    outcomes = []
    for name, scenario in list(SCENARIOS.items())[: per_category if quick else None]:
        start = time.perf_counter()
        term = Terminal([OPENQA, "answer", *loc], cwd=cwd)
        try:
            try:
                expected = scenario(term)
            except AssertionError as exc:
                verdict, detail = "wrong-exit", str(exc)[-300:]
            else:
                code = term.exit_code(120)
                shown = term.seen.decode(errors="replace")
                verdict = ("hang" if code is None else "traceback" if "Traceback" in shown
                           else "ok" if code == expected else "wrong-exit")
                detail = "" if verdict == "ok" else f"exit {code}, expected {expected}: {shown[-300:]}"
        finally:
            term.close()
        outcomes.append(Outcome(name, "typed at a terminal", verdict, time.perf_counter() - start, detail))
    return outcomes
