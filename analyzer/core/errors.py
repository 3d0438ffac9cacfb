"""Exit codes and the errors the command line turns into clear messages."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of ``analyze`` (stable: scripts test them)."""

    OK = 0
    FAILED = 1  # an unexpected failure
    USAGE = 2  # bad arguments (typer/click's own code)
    NO_INPUT = 3  # no such file, or no log records in the inputs
    BAD_INPUT = 4  # malformed input under --strict
    DATABASE = 5  # the database cannot be opened or is not ours
    UPSTREAM = 6  # a remote service (Prometheus, replay endpoint) failed
    THRESHOLD = 7  # a --fail-on threshold was crossed (the summary was still printed)
    SKIPPED = 8  # --strict: the run completed, but some input files were skipped
    CANNOT_WRITE = 9  # an output cannot be written: disk full, permission denied, read-only file system
    INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it
    TERMINATED = 143  # SIGTERM (timeout, a service manager), as shells report it


class AnalyzerError(Exception):
    """An error with a message meant for the operator and an exit code.

    ``param`` names the argument of the library function the error is about
    (``"tools_file"``, ``"selector"``), when it is about one: the message speaks
    of the value, and the command line names its option in front of it
    (:func:`analyzer.cli.options.naming`).

    ``names`` is for a message that speaks of its arguments by name, inside the
    sentence (``until must be after since``): ``{word: param}``, the words (or
    phrase) of the message that stand for each argument, so the command line can
    put its options in their place (``--until must be after --since``).
    """

    exit_code: ExitCode = ExitCode.FAILED
    param: str | None = None
    names: dict[str, str] = {}

    def __init__(self, message: str, exit_code: ExitCode | None = None, *, param: str | None = None,
                 names: dict[str, str] | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code
        if param is not None:
            self.param = param
        if names:
            self.names = dict(names)


class InputError(AnalyzerError):
    """Inputs that cannot be read: missing files, not a log, malformed under --strict."""

    exit_code = ExitCode.NO_INPUT


class DatabaseError(AnalyzerError):
    """The database file cannot be opened, is locked, or is not an analyzer database."""

    exit_code = ExitCode.DATABASE


class WriteError(AnalyzerError):
    """An output (the database, a report, an export) cannot be written: disk full, no permission."""

    exit_code = ExitCode.CANNOT_WRITE


# errno values that mean "this output cannot be written" rather than a bug.
_WRITE_ERRNOS = {"ENOSPC", "EDQUOT", "EACCES", "EPERM", "EROFS", "EFBIG", "EISDIR", "ENOTDIR", "EEXIST"}
# The same conditions as DuckDB words them in its IOException messages.
_WRITE_TEXTS = ("no space left on device", "disk quota exceeded", "permission denied",
                "read-only file system", "file too large", "could not write", "cannot open file")


def is_write_failure(exc: BaseException) -> bool:
    """True when ``exc`` says an output could not be written (disk full, unwritable path)."""
    import errno

    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, "") in _WRITE_ERRNOS
    text = str(exc).lower()
    return any(t in text for t in _WRITE_TEXTS)


def one_line(message: str) -> str:
    """The operator's line of an error message.

    DuckDB appends the SQL it was given with a caret under the failing position
    (``LINE 1: SELECT ...`` / ``^``) and sometimes a JSON blob of details; those
    lines are dropped (``ANALYZER_DEBUG=1`` shows the whole message), the rest is
    joined into one line.
    """
    kept = []
    for line in str(message).splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("LINE ") or set(stripped) <= {"^", " "}:
            break  # the quoted SQL and its caret come last
        kept.append(stripped)
    return " ".join(kept) if kept else str(message).strip()


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message that is not blank, else its type's name (Spark's and
    sqlglot's errors run to many lines: a stack, the plan, the query marked up)."""
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
