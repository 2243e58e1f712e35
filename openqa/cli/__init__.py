"""The ``openqa`` command: argument parsing and printing only, over the modules below."""

from __future__ import annotations

import sys

#: What a command stopped by Ctrl-C (or SIGTERM) says.
INTERRUPTED = "openqa: interrupted"

try:  # a Ctrl-C while the command's modules load (a second on a busy machine) stops it as one later does
    import logging
    import os
    import signal
    from typing import TYPE_CHECKING, cast

    from openqa.cli.commands import COMMANDS
    from openqa.cli.interrupts import install_interrupts
    from openqa.cli.parser import build_parser
    from openqa.cli.printing import note
    from openqa.errors import OpenQAError
    from openqa.extras import missing_extra
    from openqa.limits import MIN_ADDRESS_SPACE_MB, address_space_limited, address_space_shortfall
    from openqa.progress import shown
    from openqa.signals import StoppedAfterWriting, native_calls_running
    from openqa.text.unicode import printable
except KeyboardInterrupt:
    print(INTERRUPTED, file=sys.stderr)
    raise SystemExit(130) from None

if TYPE_CHECKING:
    import io

__all__ = ["INTERRUPTED", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script: one-line errors and a non-zero exit on bad input; SIGTERM
    stops like Ctrl-C, so builds remove their scratch folders. As the console script (no ``argv``),
    a Ctrl-C that arrives once the command has ended is ignored: it would only turn the exit status
    of finished work into death by signal while the interpreter shuts down."""
    if sys.stdout is not None and getattr(sys.stdout, "errors", None) == "strict":
        # PYTHONIOENCODING=ascii: escape what it cannot show (a stream with an errors setting is a text wrapper)
        cast("io.TextIOWrapper", sys.stdout).reconfigure(errors="backslashreplace")
    code = _run(argv)
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if native_calls_running():  # a stopped server's model thread still in llama.cpp: do not wait for it
            _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End the process with ``code`` at once, its logs and output flushed: the interpreter's normal
    exit would wait for a thread still inside native code (a prompt running in llama.cpp), and could
    free the model's memory under it (a crash)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or gone stream: nothing more can be said on it
            pass
    os._exit(code)


#: The exit status of a command whose reader closed the pipe: a program SIGPIPE ended has it in a shell.
BROKEN_PIPE = 128 + 13


def _drop_stdout() -> None:
    """Point standard output at the null device, so what is left in its buffer is not written to the
    closed pipe again when the interpreter exits (``Exception ignored ... BrokenPipeError``)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):  # no standard output to point anywhere
        pass


#: What a ``MemoryError`` (or a library that cannot be mapped) is reported as.
OUT_OF_MEMORY = "out of memory (a memory limit, `ulimit -v`, or input too large)"


class _Notes(logging.Handler):
    """What the modules below log (``logging.getLogger(__name__)``: a wait for another build's lock),
    printed as ``openqa: ...`` notes."""

    def emit(self, record: logging.LogRecord) -> None:
        note(record.getMessage())


def _run(argv: list[str] | None) -> int:
    """Parse and run one command; its exit status. Building the parser imports the registries
    (numpy, scipy): a Ctrl-C then is an interruption like any other."""
    install_interrupts()
    logger = logging.getLogger("openqa")
    if not any(isinstance(handler, _Notes) for handler in logger.handlers):
        logger.addHandler(_Notes())
    command = "openqa"
    try:
        limit = address_space_shortfall()
        if limit is not None:  # before numpy and scipy load: they cannot report it
            raise OpenQAError(f"the address space is limited to {limit} MiB (`ulimit -v`), below the {MIN_ADDRESS_SPACE_MB} MiB "
                              "openqa needs to load its libraries: it would run out of memory; raise the limit")
        args = build_parser().parse_args(argv)
        command = f"openqa {args.command}"
        with shown(True):
            COMMANDS[args.command](args)
    except ModuleNotFoundError as exc:  # an optional package of an extra that is not installed
        error = missing_extra(exc, command)
        if error is None:
            raise
        print(f"openqa: error: {error}", file=sys.stderr)
        return 2
    except OpenQAError as exc:  # one line, whatever a file name or a record held
        print(f"openqa: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:
        written = (f", once {', '.join(map(str, stop.paths))} had been written whole: the new files are in place, "
                   "not the old ones" if isinstance(stop, StoppedAfterWriting) else "")
        print(printable(INTERRUPTED + written), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (``| head``): stop quietly, as other programs do
        _drop_stdout()
        return BROKEN_PIPE
    except OSError as exc:
        print(printable(f"openqa: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")), file=sys.stderr)
        return 1
    except MemoryError:
        print(f"openqa: error: {OUT_OF_MEMORY}", file=sys.stderr)
        return 1
    except ImportError as exc:  # a library's code that cannot be mapped (``ulimit -v``), a broken install
        reason = " ".join(str(exc).split())
        hint = OUT_OF_MEMORY if "map segment" in reason or "allocate memory" in reason else "reinstall openqa"
        print(printable(f"openqa: error: cannot load {exc.name or 'a library'} ({reason}): {hint}"), file=sys.stderr)
        return 1
    except Exception as exc:
        if not address_space_limited():
            raise
        # Under ``ulimit -v`` a failed allocation inside a library's C code surfaces as any exception
        # (an IndexError from the regex compiler while numpy loads): one line, not a traceback.
        reason = " ".join(str(exc).split())[:200]
        print(printable(f"openqa: error: {type(exc).__name__} ({reason}) under an address-space limit: {OUT_OF_MEMORY}"),
              file=sys.stderr)
        return 1
    return 0
