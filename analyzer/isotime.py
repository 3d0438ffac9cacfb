"""Times as the analyzer writes them: ISO 8601, and ``Z`` on the naive UTC times it stores.

The database stores naive UTC timestamps (the proxy writes ``Z``); every JSON
document, table and message says so with a trailing ``Z``, as the proxy does.
"""

from __future__ import annotations

from datetime import date, datetime, time


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
