"""Log text made safe to print on a terminal: credentials redacted, control characters escaped.

Everything a log carries (model names, error texts, file paths, pod names) is
untrusted. A model name such as ``"\\x1b]0;PWNED\\x07\\x1b[2J"`` would retitle and
clear the operator's terminal if printed raw, so every string from the data goes
through :func:`printable` (escape control characters) or :func:`terminal_text`
(scrub credentials with :func:`analyzer.core.scrub.scrub`, then escape) before it is printed.
"""

from __future__ import annotations

import re

from analyzer.core.scrub import scrub

# C0 controls (tab and newline included: a value is shown on one line), DEL, C1
# controls, and the Unicode bidi/format characters that reorder or hide text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _escape(match: re.Match) -> str:
    ch = match.group(0)
    code = ord(ch)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: object) -> str:
    """``text`` as a string with every control character shown as an escape (``\\x1b``, ``\\n``)."""
    s = "" if text is None else str(text)
    return _CONTROL.sub(_escape, s)


# For a page: the same, less the layout characters (tab, newline, carriage return) that
# HTML shows as white space, and less the zero-width joiners that emoji are made of.
_PAGE_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def page_text(text: object) -> str:
    """``text`` for an HTML page: control and bidi characters shown as escapes, layout kept.

    The report's jinja environment applies it to every value it prints
    (:func:`analyzer.outputs.report.html.template_environment`): an ESC or BEL byte from
    the logs never reaches the page raw.
    """
    s = "" if text is None else str(text)
    return _PAGE_CONTROL.sub(_escape, s)


#: The longest unbroken run of characters (a name, a token, a URL) a page shows whole.
LONG_WORD = 120


def cut_long_words(text: str, limit: int = LONG_WORD) -> str:
    """``text`` with every run of more than ``limit`` characters without a space shown as its start,
    how many characters were left out, and its end.

    A 5,000-character model or client name from the logs cannot make a report's
    table or chart thousands of pixels wide (a browser breaks lines at spaces);
    its start and end still tell it apart from the others.
    """
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 6

    def cut(match: re.Match) -> str:
        word = match.group(0)
        return f"{word[:head]}…({len(word) - head - tail:,} more characters)…{word[-tail:]}"

    return re.sub(r"\S{%d,}" % (limit + 1), cut, text)


def terminal_text(text: object) -> str:
    """Log text for the terminal: credentials scrubbed (:func:`analyzer.core.scrub.scrub`), controls escaped."""
    s = "" if text is None else str(text)
    return printable(scrub(s))
