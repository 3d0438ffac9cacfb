"""Ctrl-C and SIGTERM at the command layer: whatever was running, the command ends with one line.

Ctrl-C (SIGINT) ends it with 130 (``interrupted``); SIGTERM, what ``timeout`` and
service managers send, with 143 (``terminated``), the same way: the statement
stopped, the transaction rolled back, and the run's spill folders removed on the
way out (:mod:`analyzer.store.spill`), where SIGTERM's default would kill the
process and leave them.

DuckDB turns a SIGINT that arrives during a query into errors of its own
(``Query interrupted``, then ``Current transaction is aborted`` from the next
statement), and click or typer would print a blank line or exit silently. So the
command line installs this handler: the first SIGINT is remembered and raised as
:class:`Interrupted` (not a ``KeyboardInterrupt``, which the frameworks swallow);
every write path runs in :func:`analyzer.store.db.transaction`, which rolls back on the
way out, so the database keeps every committed batch whole and nothing of the
interrupted one. The CLI then reports ``interrupted`` whatever error surfaced.
Further SIGINTs during that clean-up are ignored so the rollback can finish.

A Python signal handler only runs between bytecodes, and DuckDB runs a long
statement without returning to Python, so the handler alone would wait for the
statement to end. The signal also wakes a small thread (through
``signal.set_wakeup_fd``) that calls ``interrupt()`` on every open connection
(:func:`track`, which :func:`analyzer.store.db.connect` calls): DuckDB stops the
statement, the main thread returns to Python and the handler runs.
"""

from __future__ import annotations

import signal
import socket
import threading
import weakref

_state: dict = {"interrupted": False, "raised": False, "terminated": False, "wakeup": None}
_connections: "weakref.WeakSet" = weakref.WeakSet()
# Connections are tracked from several threads (the ingest's stores) while the watcher
# thread walks the set: one lock, or the walk can fail.
_connections_lock = threading.Lock()


def track(con) -> None:
    """Have a SIGINT interrupt whatever ``con`` (a DuckDB connection) is running."""
    with _connections_lock:
        _connections.add(con)


def _interrupt_connections() -> None:
    with _connections_lock:
        connections = list(_connections)
    for con in connections:
        try:
            con.interrupt()
        except Exception:  # noqa: BLE001 - closed, or nothing running: nothing to stop
            pass


def _watch(reader: socket.socket) -> None:
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM in data:
            _state["terminated"] = True
        if signal.SIGINT in data or signal.SIGTERM in data:
            _state["interrupted"] = True
            _interrupt_connections()


class Interrupted(BaseException):
    """Raised in the main thread by the first SIGINT (Ctrl-C)."""


class Terminated(Interrupted):
    """Raised in the main thread by the first SIGTERM (``timeout``, a service manager, ``kill``)."""


def _on_signal(signum, frame) -> None:  # noqa: ARG001 - the signal module's signature
    _state["interrupted"] = True
    if signum == signal.SIGTERM:
        _state["terminated"] = True
    if _state["raised"]:
        return  # already unwinding: let the rollback finish
    _state["raised"] = True  # (the watcher thread sets "interrupted" too, maybe first: not this flag)
    raise Terminated() if signum == signal.SIGTERM else Interrupted()


#: The signals the command line ends on cleanly.
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def install_interrupt_handler():
    """Route SIGINT and SIGTERM through :func:`was_interrupted` (only from the main thread).

    Returns the previous handlers (for :func:`restore_interrupt_handler`), or None.
    """
    _state["interrupted"] = _state["raised"] = _state["terminated"] = False
    try:
        previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNALS}
    except ValueError:  # not the main thread (an embedding program): leave its handlers alone
        return None
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:
        reader.close()
        writer.close()
        return previous
    _state["wakeup"] = (reader, writer, old_fd)
    threading.Thread(target=_watch, args=(reader,), name="analyze-sigint", daemon=True).start()
    return previous


def restore_interrupt_handler(previous) -> None:
    """Put back the handler :func:`install_interrupt_handler` replaced, and stop the watcher."""
    wakeup, _state["wakeup"] = _state["wakeup"], None
    if wakeup is not None:
        reader, writer, old_fd = wakeup
        try:
            signal.set_wakeup_fd(old_fd)
        except ValueError:
            pass
        writer.close()
        try:
            reader.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        reader.close()
    for sig, handler in (previous or {}).items():
        try:
            signal.signal(sig, handler)
        except (ValueError, TypeError):
            pass


def was_interrupted() -> bool:
    """True once a SIGINT or SIGTERM arrived in this process."""
    return _state["interrupted"]


def was_terminated() -> bool:
    """True once a SIGTERM arrived in this process."""
    return _state.get("terminated", False)
