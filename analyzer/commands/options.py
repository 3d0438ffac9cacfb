"""What the commands share: the library's errors worded with the option names, and the database.

The library names the argument an error is about (``AnalyzerError.param``);
:func:`naming` puts the command line's option in its place, so
``load_tools_file`` says ``cannot read t.json: ...`` to a notebook and
``analyze replay`` says ``--tools: cannot read t.json: ...``.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import AnalyzerError


def option_message(err: AnalyzerError, flag: str) -> str:
    """``err``'s message with ``flag`` for its parameter.

    A message that starts with the parameter's name (``endpoint must be an
    http(s) URL``, ``since: not an ISO-8601 date``) gets the flag in its place
    (``--endpoint must be ...``, ``--since: not ...``); any other gets the flag
    in front (``--tools: cannot read ...``).
    """
    text = str(err)
    if err.param and text.startswith((err.param + " ", err.param + ":")):
        return flag + text[len(err.param):]
    return f"{flag}: {text}"


@contextmanager
def naming(**flags: str) -> Iterator[None]:
    """Within the block, an :class:`AnalyzerError` about a parameter in ``flags``
    (``naming(tools_file="--tools")``) is re-worded with that option; the error
    keeps its class, exit code and cause."""
    try:
        yield
    except AnalyzerError as err:
        flag = flags.get(err.param or "")
        if flag is None:
            raise
        err.args = (option_message(err, flag), *err.args[1:])
        err.param = None  # said once: an outer block does not name it again
        raise


def existing_db(db: Path | None) -> Path:
    """The database file the command reads: ``db``, else ``$ANALYZER_DB`` or ./analyzer.duckdb."""
    from ..paths import default_db_path

    return Path(db) if db is not None else default_db_path()
