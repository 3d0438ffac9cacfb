"""How the ``analyze`` command ends: one line on stderr and the documented exit code.

Every way out of a command (an error, Ctrl-C, a closed pipe, a usage error from
typer's parser) goes through :func:`guarded`, so scripts can rely on the exit
codes of docs/cli.md and a person sees one readable line, never a traceback
(``ANALYZER_DEBUG=1`` shows it).
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, Callable

import typer

from analyzer.core.errors import AnalyzerError, ExitCode, is_write_failure, one_line
from analyzer.core.interrupt import (Interrupted, install_interrupt_handler, restore_interrupt_handler,
                                     was_interrupted, was_terminated)
from analyzer.core.safetext import terminal_text


def guarded(call: Callable[[], Any]) -> None:
    """Run a command: Ctrl-C, a closed pipe and every error end as one line and an exit code."""
    previous = install_interrupt_handler()
    try:
        try:
            code = call()
            sys.stdout.flush()
        except (Interrupted, KeyboardInterrupt):
            _signalled()
        except BrokenPipeError:
            _quiet_closed_pipe()
        except BaseException as err:  # noqa: BLE001 - every way out says one line
            _exit_for(err)
        else:
            raise SystemExit(code if isinstance(code, int) else 0)
    finally:
        restore_interrupt_handler(previous)


def _exit_for(err: BaseException) -> None:
    """One line on stderr and the documented exit code for whatever ended the command."""
    if isinstance(err, SystemExit):
        ctx = err.__context__  # typer turns a closed pipe into exit 1: it is not a failure
        if isinstance(ctx, OSError) and ctx.errno == errno.EPIPE:
            _quiet_closed_pipe()
        raise err
    if was_interrupted():  # DuckDB turns Ctrl-C into its own errors: the cause is the signal
        _signalled()
    exits, click_errors, usage_errors, aborts = _click_exceptions()  # typer's parser raises these
    if isinstance(err, exits):
        raise SystemExit(err.exit_code)
    if isinstance(err, click_errors):
        hint = ""
        if isinstance(err, usage_errors) and getattr(err, "ctx", None) is not None:  # one line, and where to look
            hint = f" (`{err.ctx.command_path} -h` lists the options)"
        _fail(err.format_message() + hint, err.exit_code)
    if isinstance(err, aborts):
        _fail("aborted", int(ExitCode.FAILED))
    if isinstance(err, OSError) and err.errno == errno.EPIPE:
        _quiet_closed_pipe()
    if isinstance(err, AnalyzerError):
        cause = err.__cause__
        if err.exit_code == ExitCode.FAILED and cause is not None and is_write_failure(cause):
            _fail(str(err), int(ExitCode.CANNOT_WRITE))  # e.g. the export's "cannot write" on a full disk
        _fail(str(err), int(err.exit_code))
    if is_write_failure(err):  # disk full, no permission, read-only file system
        where = f" {err.filename}" if isinstance(err, OSError) and err.filename else ""
        text = (err.strerror or str(err)) if isinstance(err, OSError) else str(err)
        _fail(f"cannot write{where}: {text}", int(ExitCode.CANNOT_WRITE))
    if isinstance(err, OSError):  # a vanished file and the like: say so in one line
        _fail(f"{err.strerror or err}: {err.filename}" if err.filename else str(err), int(ExitCode.FAILED))
    if isinstance(err, Exception):  # a bug: one line, the traceback on request
        if os.environ.get("ANALYZER_DEBUG"):
            raise err
        _fail(f"unexpected {type(err).__name__}: {err} (set ANALYZER_DEBUG=1 for the traceback)",
              int(ExitCode.FAILED))
    raise err


def _signalled() -> None:
    """The run was stopped by a signal: Ctrl-C (130, ``interrupted``) or SIGTERM (143, ``terminated``)."""
    if was_terminated():
        _fail("terminated", int(ExitCode.TERMINATED), raw=True)
    _fail("interrupted", int(ExitCode.INTERRUPTED), raw=True)


def _click_exceptions() -> tuple[tuple, tuple, tuple, tuple]:
    """(exit, error, usage error, abort) classes of click and of the copy of click typer carries."""
    mods = []
    try:  # a click of its own, when installed (typer >= 0.2x does not need it)
        import click

        mods.append(click.exceptions)
    except ImportError:
        pass
    try:
        import typer._click.exceptions as vendored  # typer >= 0.2x parses with its own click

        mods.append(vendored)
    except ImportError:
        pass

    def of(name: str) -> tuple:
        return tuple(getattr(m, name) for m in mods if hasattr(m, name))

    return (of("Exit") + (typer.Exit,), of("ClickException"), of("UsageError"), of("Abort") + (typer.Abort,))


def _quiet_closed_pipe() -> None:
    """`analyze ... | head -1`: the reader has what it wants; end quietly with 0."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        out, err = os.fstat(sys.stdout.fileno()), os.fstat(sys.stderr.fileno())
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush into the pipe
        if (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino):  # `2>&1 | head`: the same pipe
            os.dup2(devnull, sys.stderr.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(0)


def _fail(message: str, code: int, raw: bool = False) -> None:
    """Print ``analyze: error: MESSAGE`` as one safe line (the whole message under ANALYZER_DEBUG=1)."""
    if raw:
        text = message
    elif os.environ.get("ANALYZER_DEBUG"):  # the whole message, DuckDB's SQL and caret included
        text = "\n".join(terminal_text(line) for line in str(message).splitlines())
    else:
        text = terminal_text(one_line(message))
    try:
        print(f"analyze: error: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
    raise SystemExit(code)
