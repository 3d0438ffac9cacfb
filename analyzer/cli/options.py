"""What the commands share: the library's errors worded with the option names, and ``--param``.

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
from typing import Iterable, Iterator

from analyzer.core.errors import AnalyzerError
from analyzer.store.asking import QueryParamError


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


@contextmanager
def param_flags() -> Iterator[None]:
    """A query's missing parameters, said as the ``--param`` options that give them."""
    try:
        yield
    except QueryParamError as exc:
        if exc.missing:
            exc.args = (f"{exc}: pass {' '.join(f'--param {p}=VALUE' for p in exc.missing)}", *exc.args[1:])
            exc.missing = ()
        raise


def parse_param_args(items: Iterable[str] | None) -> dict[str, str | None]:
    """``["k=v", ...]`` from ``--param`` into a dict; an empty value is NULL.

    Raises:
        analyzer.store.asking.QueryParamError: an item without ``=`` or with an invalid name.
    """
    out: dict[str, str | None] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("$")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise QueryParamError(f"--param {item!r}: expected NAME=VALUE")
        out[key] = value if value != "" else None
    return out
