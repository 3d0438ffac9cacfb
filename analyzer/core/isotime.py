"""Times as the analyzer reads and writes them: ISO 8601, ``Z`` on the naive UTC times it stores.

The database stores naive UTC timestamps (the proxy writes ``Z``); every JSON
document, table and message says so with a trailing ``Z``, as the proxy does.
The ``--since``/``--until`` bounds every command takes are read here too.
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, timedelta, timezone

from analyzer.core.errors import AnalyzerError, ExitCode


def iso_utc(value: datetime | date | time | None, timespec: str = "auto") -> str | None:
    """``value`` as ISO 8601: a naive datetime (UTC, as stored) with ``Z``; None stays None.

    ``timespec`` is :meth:`datetime.isoformat`'s: ``"auto"`` leaves out zero
    microseconds (``2026-11-16T14:00:00Z``); ``"microseconds"`` always writes
    six digits (``2026-11-16T14:00:00.000000Z``), for columns that line up.
    Dates, times and datetimes with a zone are written as :meth:`isoformat`
    writes them (a zone is its own offset).
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.isoformat(timespec=timespec) + "Z"
        return value.isoformat(timespec=timespec)
    if isinstance(value, time):
        return value.isoformat(timespec=timespec)
    return value.isoformat()


# An age relative to now, for --since/--until: 90s, 30m, 24h, 7d, 2w.
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.I)
_AGE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def from_iso_utc(value: str) -> datetime:
    """A time :func:`iso_utc` wrote (ISO 8601 with ``Z``) as the naive UTC datetime it came from."""
    return datetime.fromisoformat(value.removesuffix("Z"))


def parse_time(value: str | None, name: str, now: datetime | None = None) -> datetime | None:
    """Parse a bound: ISO 8601 (a date, or a date and time; UTC unless an offset is given),
    or an age before now such as ``24h`` or ``7d`` (``s``, ``m``, ``h``, ``d``, ``w``).

    Returns naive UTC.
    """
    if value is None:
        return None
    age = _AGE.match(value)
    if age:
        now = now or datetime.now(timezone.utc).replace(tzinfo=None)
        return now - timedelta(seconds=float(age.group(1)) * _AGE_SECONDS[age.group(2).lower()])
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise AnalyzerError(f"{name}: not an ISO-8601 date or time, nor an age such as 24h or 7d: {value!r}",
                            ExitCode.USAGE, param=name) from exc
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def parse_range(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``since``/``until`` as naive UTC; an empty or reversed range is a usage error
    (an :class:`~analyzer.core.errors.AnalyzerError` that names both, ``param="since"``)."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)  # one "now" for both ages
    since_dt, until_dt = parse_time(since, "since", now), parse_time(until, "until", now)
    if since_dt is not None and until_dt is not None and since_dt >= until_dt:
        raise AnalyzerError(f"since {since} is not before until {until}: the range "
                            f"[{iso_utc(since_dt)}, {iso_utc(until_dt)}) is empty", ExitCode.USAGE,
                            param="since", names={"since": "since", "until": "until"})
    return since_dt, until_dt
