"""Questions typed or pasted at a terminal (``openqa answer`` with nothing piped in), read so that
no Ctrl-C and no Ctrl-D is ever lost.

Why no line editor. CPython's ``readline`` notices a signal only when its wait for a key is
interrupted: a Ctrl-C that lands while the prompt is being drawn stays pending until the next line
is typed, and then drops that line instead. It also resets the terminal on every prompt, which
throws away a Ctrl-D typed while an answer was printing. So the terminal stays in its ordinary
(canonical) mode and the kernel does the editing: Backspace, Ctrl-U (line), Ctrl-W (word); it
echoes what is typed, turns Ctrl-C into SIGINT and Ctrl-D at the start of a line into end of input,
and keeps keys typed ahead (during loading, while an answer prints) for the next read. Every wait
here is one ``select`` on the terminal and on the signal wake-up pipe (``signal.set_wakeup_fd``):
a signal that arrives at any moment, even before the wait began, ends the wait at once, and its
handler (Ctrl-C: ``KeyboardInterrupt``) runs before another line is read. What is given up: arrow
keys and history; and the kernel keeps at most 4095 characters of one line (a pasted question
spans many lines, each well under that).
"""

from __future__ import annotations

import codecs
import os
import select
import signal
import sys
from typing import Callable, TextIO

from openqa.data.pasted import is_complete
from openqa.errors import OpenQAError
from openqa.text.unicode import printable

#: How long after an empty line more pasted text may follow and still belong to the same question.
PASTE_GAP_S = 0.05

INTRO = ("Paste or type a question, then its options as 'A: ...' lines; an empty line after the options "
         "solves it. Ctrl-C drops the question (at an empty prompt it quits), Ctrl-D quits.")


class TerminalLines:
    """Lines read from a terminal file descriptor in canonical mode; use as a context manager,
    which routes signals to the wake-up pipe for as long as it is open."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.eof = False
        self._text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._wake: tuple[int, int] | None = None
        self._old_wake = -1

    def __enter__(self) -> TerminalLines:
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        self._wake = (read, write)
        self._old_wake = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.set_wakeup_fd(self._old_wake)
        for fd in self._wake or ():
            os.close(fd)

    def _wait(self, timeout: float | None) -> bool:
        """Whether the terminal has input within ``timeout`` seconds (None: until it has). A signal
        ends the wait; its handler's exception (Ctrl-C: ``KeyboardInterrupt``) is raised from here."""
        assert self._wake is not None  # waits happen inside the with block, which opened the pipe
        wake = self._wake[0]
        ready = select.select([self.fd, wake], [], [], timeout)[0]
        if wake in ready:
            try:
                while os.read(wake, 512):
                    pass
            except BlockingIOError:
                pass
        return self.fd in ready

    def readline(self) -> str | None:
        """The next line without its newline; None at end of input (Ctrl-D at the start of a line),
        and from then on."""
        while "\n" not in self._text:
            if self.eof:
                break
            if not self._wait(None):
                continue  # a signal without an exception (a window resize): keep waiting
            data = os.read(self.fd, 1 << 16)
            if data:
                self._text += self._decoder.decode(data)
            else:
                self.eof = True
                self._text += self._decoder.decode(b"", final=True)
        if self.eof and "\n" not in self._text:
            line, self._text = self._text, ""
            return line or None
        line, _, self._text = self._text.partition("\n")
        return line

    def more_waiting(self, seconds: float) -> bool:
        """Whether more text (a paste's next line) is read or arrives within ``seconds``."""
        return bool(self._text) or (not self.eof and self._wait(seconds))

    def discard(self) -> None:
        """Forget a line read in part (the kernel forgets the rest of it on Ctrl-C)."""
        self._text = self._text[: self._text.rfind("\n") + 1]


def read_question(reader: TerminalLines, lines: list[str], out: TextIO) -> str | None:
    """Append lines to ``lines`` up to an empty line that follows the options (blank lines inside a
    question are kept when more text follows at once, as in a paste) and return the question's text;
    None at end of input with no question started. ``lines`` belongs to the caller, which knows from
    it whether a question was at hand when a Ctrl-C lands."""
    while True:
        out.write("> " if not lines else ". ")
        out.flush()
        line = reader.readline()
        if line is None:
            return "\n".join(lines) if lines else None
        if line.strip():
            lines.append(line)
        elif lines and is_complete("\n".join(lines)) and not reader.more_waiting(PASTE_GAP_S):
            return "\n".join(lines)


def answer_loop(answer: Callable[[str], str], fd: int, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
    """Read questions from the terminal ``fd`` and print ``answer(text)`` for each until Ctrl-D.

    A Ctrl-C (``KeyboardInterrupt`` itself) while a question is at hand, from its first line until its
    answer is printed, drops that question; at an empty prompt it ends the loop (raised). Other
    interrupts (subclasses: a SIGTERM) always end it. A one-line error (``OpenQAError``) is printed
    and the loop goes on.
    """
    print(INTRO, file=out, flush=True)
    lines: list[str] = []
    with TerminalLines(fd) as reader:
        while True:
            try:
                block = read_question(reader, lines, out)
                if block is None:
                    out.write("\n")
                    return
                try:
                    print(answer(block), file=out)
                except OpenQAError as exc:
                    print(f"openqa: {printable(str(exc))}", file=err)
                print(file=out, flush=True)
                lines.clear()
                if reader.eof:
                    return
            except KeyboardInterrupt as exc:
                if not lines or type(exc) is not KeyboardInterrupt:
                    raise
                lines.clear()
                reader.discard()
                print("\n(question dropped)", file=err, flush=True)
