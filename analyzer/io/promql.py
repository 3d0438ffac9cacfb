"""PromQL's strings and regexes, as Prometheus reads them: what a selector value means, checked.

A label matcher's value is a PromQL string: double-quoted or single-quoted with
Go's escapes (``\\n``, ``\\"``, ``\\u00e9`` ...), or backticked and raw. Each means
its decoded text, so ``namespace='llm'`` selects the namespace ``llm`` (not
``'llm'``). :func:`unquote` decodes a value as Prometheus does and refuses what
it would refuse (an unknown escape, a quote left open); :func:`quote` writes a
text back as a double-quoted PromQL string. The value of ``=~`` and ``!~`` is an
RE2 regular expression (Go's ``regexp``): :func:`re2_problem` finds what RE2
rejects and can be told without RE2 itself (unbalanced parentheses and other
syntax errors, backreferences, lookarounds, atomic groups, possessive
quantifiers, repeats over 1000), so a rule file is never written that Prometheus
would refuse to load.
"""

from __future__ import annotations

import json
import re
import warnings

#: Go's one-character escapes (the quote itself is added per string).
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
#: RE2's limit on a counted repetition (``a{1001}`` is refused).
RE2_MAX_REPEAT = 1000


class PromQLStringError(ValueError):
    """A PromQL string or regex Prometheus would refuse; the message says why."""


def unquote(text: str) -> str:
    """The text a PromQL string literal (``"..."``, ``'...'`` or a backticked one) stands for.

    Raises:
        PromQLStringError: not one quoted string, an unknown or incomplete escape, a
            newline inside quotes, or a byte escape that is not a character.
    """
    quote_char = text[:1]
    if quote_char not in ('"', "'", "`") or len(text) < 2 or text[-1] != quote_char:
        raise PromQLStringError(f"{text}: not a quoted string")
    body = text[1:-1]
    if quote_char == "`":
        if "`" in body:
            raise PromQLStringError(f"{text}: a backtick inside a backticked string")
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == quote_char:
            raise PromQLStringError(f"{text}: an unescaped {c} inside the string")
        if c == "\n":
            raise PromQLStringError(f"{text!r}: a newline inside a quoted string (write \\n)")
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= len(body):
            raise PromQLStringError(f"{text}: a \\ at the end of the string")
        e = body[i + 1]
        if e in _SIMPLE_ESCAPES or e == quote_char:
            out.append(_SIMPLE_ESCAPES.get(e, e))
            i += 2
        elif e in "01234567":
            out.append(_code_point(text, body[i + 1:i + 4], 8, 3))
            i += 4
        elif e in _HEX_ESCAPES:
            n = _HEX_ESCAPES[e]
            out.append(_code_point(text, body[i + 2:i + 2 + n], 16, n, byte=e == "x"))
            i += 2 + n
        else:
            raise PromQLStringError(f"{text}: \\{e} is not an escape PromQL knows in this string (\\\\, \\n, "
                                    f"\\t, \\x41, \\u00e9, \\{quote_char}; a regex's \\ is written \\\\)")
    return "".join(out)


def _code_point(text: str, digits: str, base: int, width: int, byte: bool = False) -> str:
    ok = len(digits) == width and all(d in "0123456789abcdefABCDEF"[: base if base <= 10 else 22] for d in digits)
    if not ok:
        raise PromQLStringError(f"{text}: an escape needs {width} {'octal' if base == 8 else 'hex'} digits")
    value = int(digits, base)
    if (byte or base == 8) and value > 0x7F:
        raise PromQLStringError(f"{text}: a byte escape above \\x7f is not a character; write \\u{value:04x}")
    if 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:
        raise PromQLStringError(f"{text}: \\u{value:x} is not a character")
    return chr(value)


def quote(value: str) -> str:
    """``value`` as a double-quoted PromQL string (the escapes JSON and Go share)."""
    return json.dumps(value, ensure_ascii=False)


_LOOKAROUND = ("?=", "?!", "?<=", "?<!")


def re2_problem(pattern: str) -> str | None:
    """Why RE2 (Go's ``regexp``, Prometheus' regex engine) would refuse ``pattern``, or None.

    What RE2 lacks and Python's ``re`` has is looked for first (backreferences,
    lookarounds, atomic groups, conditionals, possessive quantifiers, ``\\Z``,
    repeats over :data:`RE2_MAX_REPEAT`); then the pattern, with RE2's own
    spellings that Python lacks put in Python's (``\\z``, ``\\pL``, ``(?U)``,
    ``(?<name>``), must compile in Python: unbalanced parentheses, a bad repeat
    and the like.
    """
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            e = pattern[i + 1] if i + 1 < n else ""
            if not e:
                return "it ends with a lone \\"
            if not in_class and e in "123456789":
                return f"\\{e} is a backreference, which RE2 does not have"
            if e in "gk" and pattern[i + 2:i + 3] in ("<", "{", "'"):
                return f"\\{e}{pattern[i + 2]}...: a named backreference, which RE2 does not have"
            if e == "Z":
                return "\\Z is not RE2's (write \\z, or $)"
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
            elif c == "[" and pattern[i + 1:i + 2] == ":":  # [:alpha:]
                end = pattern.find(":]", i + 2)
                i = end + 2 if end >= 0 else i + 1
                continue
            i += 1
            continue
        if c == "[":
            in_class = True
            i += 1
            if pattern[i:i + 1] == "^":
                i += 1
            if pattern[i:i + 1] == "]":  # a literal ] first in a class
                i += 1
            continue
        if c == "(" and pattern[i + 1:i + 2] == "?":
            rest = pattern[i + 1:]
            if rest.startswith(_LOOKAROUND):
                return "a lookaround ((?=, (?!, (?<=, (?<!), which RE2 does not have"
            if rest.startswith("?>"):
                return "an atomic group (?>...), which RE2 does not have"
            if rest.startswith("?P="):
                return "(?P=name) is a backreference, which RE2 does not have"
            if rest.startswith("?("):
                return "a conditional (?(...)...), which RE2 does not have"
            if rest.startswith("?#"):
                return "a comment group (?#...), which RE2 does not have"
        if c in "*+?}" and pattern[i + 1:i + 2] == "+":
            return "a possessive quantifier (*+, ++, ?+), which RE2 does not have"
        if c == "{":
            m = re.match(r"\{(\d+)(?:,(\d*))?\}", pattern[i:])
            if m and max(int(x) for x in m.groups() if x) > RE2_MAX_REPEAT:
                return f"a repeat count over {RE2_MAX_REPEAT} ({m.group()}), which RE2 refuses"
        i += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Python warns of RE2's [[:alpha:]] as a possible future set
            re.compile(_as_python(pattern))
    except re.error as exc:
        return str(exc)
    except (RecursionError, OverflowError):
        return "it is too deeply nested"
    return None


def _as_python(pattern: str) -> str:
    """``pattern`` with RE2's spellings that Python's ``re`` lacks put in Python's (for a syntax check only)."""
    out = re.sub(r"\\[pP](?:\{\^?[A-Za-z_]+\}|[A-Za-z])", r"\\w", pattern)  # Unicode classes
    out = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", out)  # end of text
    out = re.sub(r"\(\?<(?=[A-Za-z_])", "(?P<", out)  # (?<name>...)
    out = re.sub(r"\(\?[imsU]*(?:-[imsU]*)?\)", "", out)  # flag settings anywhere (Python wants them first)
    out = re.sub(r"\(\?[imsU]*(?:-[imsU]*)?:", "(?:", out)  # flag groups
    return out
