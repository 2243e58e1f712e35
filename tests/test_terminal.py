"""Typed questions (``openqa.terminal``) read from a pipe in place of a terminal: where a Ctrl-C lands
decides whether it drops the question or quits, a signal never waits for the next line, and end of
input answers what was typed, then quits. (tests/test_cli.py drives the real console script on a
pseudo-terminal.)"""

from __future__ import annotations

import io
import os
import signal
import time

import pytest

from openqa.errors import OpenQAError
from openqa.terminal import TerminalLines, answer_loop

QUESTION = "Which drug?\nA: aspirin\nB: heparin\n\n"


class Typed:
    """A pipe standing in for the terminal: text typed into it, then (optionally) Ctrl-D."""

    def __init__(self, text: str, eof: bool = True) -> None:
        self.read, self._write = os.pipe()
        self.type(text)
        if eof:
            self.end()

    def type(self, text: str) -> None:
        os.write(self._write, text.encode())

    def end(self) -> None:
        """Ctrl-D: the end of input."""
        os.close(self._write)
        self._write = None

    def close(self) -> None:
        os.close(self.read)
        if self._write is not None:
            os.close(self._write)


def loop(texts: list[str], answer) -> tuple[str, str]:
    """Run the loop with ``texts[0]`` typed, each next text typed once the previous question's answer
    is worked out (a paste of two questions at once is one block), then Ctrl-D; what it printed to
    standard output and to standard error."""
    typed, out, err = Typed(texts[0], eof=len(texts) == 1), io.StringIO(), io.StringIO()
    following = list(texts[1:])

    def answer_then_type(block: str) -> str:
        try:
            return answer(block)
        finally:
            if following:
                typed.type(following.pop(0))
                if not following:
                    typed.end()

    try:
        answer_loop(answer_then_type, typed.read, out, err)
    finally:
        typed.close()
    return out.getvalue(), err.getvalue()


def test_questions_are_answered_until_end_of_input():
    out, err = loop([QUESTION, "Which one?\n\nA: x\nB: y\n"], lambda block: f"ANSWER {block.splitlines()[0]}")
    assert "ANSWER Which drug?" in out and "ANSWER Which one?" in out and err == ""


def test_a_pasted_blank_line_inside_a_question_is_kept():
    out, _ = loop(["Which drug\n\ninhibits it?\nA: aspirin\nB: heparin\n\n"], lambda block: repr(block))
    assert "'Which drug\\ninhibits it?\\nA: aspirin\\nB: heparin'" in out


def test_ctrl_c_while_a_question_is_answered_drops_it_and_goes_on():
    calls = []

    def answer(block: str) -> str:
        calls.append(block)
        if len(calls) == 1:
            raise KeyboardInterrupt  # Ctrl-C right after the final Enter, while it is solved
        return "ANSWER"

    out, err = loop([QUESTION, QUESTION], answer)
    assert len(calls) == 2 and out.count("ANSWER") == 1 and "(question dropped)" in err


def test_ctrl_c_in_the_pause_after_the_final_enter_drops_the_question(monkeypatch):
    waits = []

    def more_waiting(self, seconds):
        waits.append(seconds)
        if len(waits) == 1:
            raise KeyboardInterrupt
        return False

    monkeypatch.setattr(TerminalLines, "more_waiting", more_waiting)
    out, err = loop([QUESTION + QUESTION], lambda block: "ANSWER")
    assert out.count("ANSWER") == 1 and "(question dropped)" in err


class CtrlCAtPrompt(io.StringIO):
    """Standard output on which Ctrl-C lands as the ``prompt`` is drawn for the ``nth`` time."""

    def __init__(self, prompt: str, nth: int = 1) -> None:
        super().__init__()
        self.prompt, self.left = prompt, nth

    def write(self, text: str) -> int:
        if text == self.prompt:
            self.left -= 1
            if self.left == 0:
                raise KeyboardInterrupt
        return super().write(text)


def test_ctrl_c_as_the_prompt_is_drawn():
    """At an empty prompt it quits; at the prompt of a question's next line it drops that question,
    and the line typed next begins a new question."""
    typed = Typed(QUESTION)
    try:
        with pytest.raises(KeyboardInterrupt):
            answer_loop(lambda block: "ANSWER", typed.read, CtrlCAtPrompt("> "), io.StringIO())
    finally:
        typed.close()
    typed, out, err = Typed("half a question\n" + QUESTION), CtrlCAtPrompt(". "), io.StringIO()
    answered = []
    try:
        answer_loop(lambda block: answered.append(block) or "ANSWER", typed.read, out, err)
    finally:
        typed.close()
    assert "(question dropped)" in err.getvalue() and answered == [QUESTION.strip()]


def test_a_sigterm_ends_the_loop_even_with_a_question_at_hand():
    class Terminated(KeyboardInterrupt):
        pass

    def answer(block: str) -> str:
        raise Terminated

    with pytest.raises(Terminated):
        loop([QUESTION], answer)


def test_an_error_is_one_line_and_the_loop_goes_on():
    def answer(block: str) -> str:
        raise OpenQAError("text after the options")

    out, err = loop([QUESTION], answer)
    assert err == "openqa: text after the options\n"


def test_a_signal_that_came_before_the_wait_ends_it_at_once():
    """What readline gets wrong: the C handler ran (its byte is in the wake-up pipe) before the wait
    began. The wait must end at once, not when the next line arrives."""
    typed = Typed("", eof=False)
    try:
        with TerminalLines(typed.read) as reader:
            os.write(reader._wake[1], bytes([signal.SIGINT]))
            start = time.monotonic()
            assert reader._wait(30) is False
            assert time.monotonic() - start < 5
    finally:
        typed.close()


def test_end_of_input_in_the_middle_of_a_question_answers_it_then_quits():
    out, _ = loop(["Which drug?\nA: aspirin\nB: heparin"], lambda block: f"ANSWER {len(block.splitlines())}")
    assert "ANSWER 3" in out
