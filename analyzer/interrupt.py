"""Ctrl-C at the command layer: whatever was running, the command ends with 130 and one line.

DuckDB turns a SIGINT that arrives during a query into errors of its own
(``Query interrupted``, then ``Current transaction is aborted`` from the next
statement), and click or typer would print a blank line or exit silently. So the
command line installs this handler: the first SIGINT is remembered and raised as
:class:`Interrupted` (not a ``KeyboardInterrupt``, which the frameworks swallow);
every write path runs in :func:`analyzer.db.transaction`, which rolls back on the
way out, so the database keeps every committed batch whole and nothing of the
interrupted one. The CLI then reports ``interrupted`` whatever error surfaced.
Further SIGINTs during that clean-up are ignored so the rollback can finish.
"""

from __future__ import annotations

import signal

_state = {"interrupted": False}


class Interrupted(BaseException):
    """Raised in the main thread by the first SIGINT (Ctrl-C)."""


def _on_sigint(signum, frame) -> None:  # noqa: ARG001 - the signal module's signature
    if _state["interrupted"]:
        return  # already unwinding: let the rollback finish
    _state["interrupted"] = True
    raise Interrupted()


def install_interrupt_handler():
    """Route SIGINT through :func:`was_interrupted` (only from the main thread).

    Returns the previous handler (for :func:`restore_interrupt_handler`), or None.
    """
    _state["interrupted"] = False
    try:
        return signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # not the main thread (an embedding program): leave its handler alone
        return None


def restore_interrupt_handler(previous) -> None:
    """Put back the handler :func:`install_interrupt_handler` replaced."""
    if previous is not None:
        try:
            signal.signal(signal.SIGINT, previous)
        except ValueError:
            pass


def was_interrupted() -> bool:
    """True once a SIGINT arrived in this process."""
    return _state["interrupted"]
