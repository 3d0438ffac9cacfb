"""Simulated time: integer microseconds since the Unix epoch, and the timestamp
formats the proxy and the HTTP servers around it write (record ``timestamp``,
RFC 7231 ``Date`` headers, second-precision ISO for the scenario)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

UTC = timezone.utc


US = 1_000_000  # microseconds per second: all internal times are integer microseconds
DAY_US = 86_400 * US


#: The origin of every simulated time.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(dt: datetime) -> int:
    """Microseconds since the epoch of an aware datetime."""
    return (dt - EPOCH) // timedelta(microseconds=1)


def from_us(t_us: int) -> datetime:
    """The aware UTC datetime of a microsecond time."""
    return EPOCH + timedelta(microseconds=t_us)


_DATE_CACHE: dict[int, str] = {}
_HTTP_DATE_CACHE: dict[int, str] = {}
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _date_of_day(day: int) -> str:
    s = _DATE_CACHE.get(day)
    if s is None:
        s = from_us(day * DAY_US).strftime("%Y-%m-%d")
        _DATE_CACHE[day] = s
    return s


def iso(t_us: int) -> str:
    """``2026-11-16T14:03:07.123456Z``: the proxy's ``utcnow().isoformat() + "Z"``.

    (The real proxy drops the fraction when the microseconds are exactly 0; the
    simulation always writes six decimals.)
    """
    day, rem = divmod(t_us, DAY_US)
    sec, us = divmod(rem, US)
    h, sec = divmod(sec, 3600)
    m, sec = divmod(sec, 60)
    return f"{_date_of_day(day)}T{h:02d}:{m:02d}:{sec:02d}.{us:06d}Z"


def iso_seconds(dt: datetime) -> str:
    """``2026-11-16T14:03:07Z``: how the scenario and the ground truth write times."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def http_date(t_us: int) -> str:
    """An RFC 7231 ``Date`` header value."""
    day, rem = divmod(t_us, DAY_US)
    head = _HTTP_DATE_CACHE.get(day)
    if head is None:
        d = from_us(day * DAY_US)
        head = f"{_WEEKDAYS[d.weekday()]}, {d.day:02d} {_MONTHS[d.month - 1]} {d.year}"
        _HTTP_DATE_CACHE[day] = head
    sec = rem // US
    h, sec = divmod(sec, 3600)
    m, sec = divmod(sec, 60)
    return f"{head} {h:02d}:{m:02d}:{sec:02d} GMT"


def parse_ts(ts: str) -> int:
    """The microsecond time of a record's ``timestamp``."""
    return to_us(datetime.fromisoformat(ts.replace("Z", "+00:00")))
