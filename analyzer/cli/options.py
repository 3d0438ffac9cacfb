"""What the commands share: the library's errors worded with the option names, and the database.

The library names the argument an error is about (``AnalyzerError.param``);
:func:`naming` puts the command line's option in its place, so
``load_tools_file`` says ``cannot read t.json: ...`` to a notebook and
``analyze replay`` says ``--tools: cannot read t.json: ...``. A message that
speaks of several arguments by name (``AnalyzerError.names``: ``until must be
after since``) gets each option in the place of its word (``--until must be
after --since``).
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from analyzer.core.errors import AnalyzerError
from analyzer.core.paths import default_db_path


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


def names_message(err: AnalyzerError, flags: dict[str, str]) -> str | None:
    """``err``'s message with each word of ``err.names`` replaced by its parameter's
    flag (the first time it stands as a word); None when ``flags`` names none of them."""
    text, replaced = str(err), False
    for word, param in err.names.items():
        flag = flags.get(param)
        if flag is None:
            continue
        text, n = re.subn(rf"(?<![\w-]){re.escape(word)}(?![\w-])", lambda _m: flag, text, count=1)
        replaced = replaced or n > 0
    return text if replaced else None


@contextmanager
def naming(**flags: str) -> Iterator[None]:
    """Within the block, an :class:`AnalyzerError` about a parameter in ``flags``
    (``naming(tools_file="--tools")``) is re-worded with that option; the error
    keeps its class, exit code and cause."""
    try:
        yield
    except AnalyzerError as err:
        if err.names:
            text = names_message(err, flags)
        else:
            flag = flags.get(err.param or "")
            text = None if flag is None else option_message(err, flag)
        if text is None:
            raise
        err.args = (text, *err.args[1:])
        err.param, err.names = None, {}  # said once: an outer block does not name it again
        raise


def existing_db(db: Path | None) -> Path:
    """The database file the command reads: ``db``, else ``$ANALYZER_DB`` or ./analyzer.duckdb."""
    return Path(db) if db is not None else default_db_path()
