"""Durations and instants as operators write them: ``5m``, ``1h30m``, ISO 8601, epoch.

Internally the metrics code counts time in integer microseconds since the Unix
epoch (UTC): DuckDB's ``epoch_us``/``make_timestamp`` round-trip them exactly, so
a window edge never drifts by a float rounding error.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.isotime import iso_utc

US = 1_000_000  # microseconds per second

# Prometheus-style units (ms, s, m, h, d, w, y); y is 365 days as in Prometheus.
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_TERM = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")

# Above this an epoch number is taken as milliseconds: 1e11 seconds is the year 5138.
_EPOCH_MS_THRESHOLD = 1e11


def parse_duration(value: str | int | float, name: str = "duration") -> float:
    """Parse a duration into seconds: ``"5m"``, ``"90s"``, ``"1h30m"``, ``"500ms"``, ``300``.

    A bare number is seconds. ``name`` names the option in the error message.

    Raises:
        AnalyzerError: (usage) not a duration, or not positive.
    """
    if isinstance(value, bool):
        raise AnalyzerError(f"{name}: not a duration: {value!r}", ExitCode.USAGE)
    seconds: float | None = None
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            pos, total = 0, 0.0
            for m in _TERM.finditer(text):
                if m.start() != pos:
                    break
                total += float(m.group(1)) * _UNITS[m.group(2)]
                pos = m.end()
            if text and pos == len(text):
                seconds = total
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise AnalyzerError(
            f"{name}: not a positive duration: {value!r} (use e.g. 90s, 5m, 1h30m)", ExitCode.USAGE
        )
    return seconds


def to_epoch_us(value: datetime | str | int | float, name: str = "time") -> int:
    """An instant as integer microseconds since the epoch.

    Accepts a ``datetime`` (naive means UTC, as everywhere in the database), an
    ISO-8601 string (``Z`` or an offset allowed), or epoch seconds as a number or
    numeric string (values above 1e11 are taken as milliseconds).

    Raises:
        AnalyzerError: (usage) not a recognizable instant.
    """
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86400 + delta.seconds) * US + delta.microseconds
    if isinstance(value, bool):
        raise AnalyzerError(f"{name}: not a time: {value!r}", ExitCode.USAGE, param=name)
    if isinstance(value, (int, float)):
        return _epoch_number_us(float(value), name)
    text = str(value).strip()
    try:
        return _epoch_number_us(float(text), name)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise AnalyzerError(f"{name}: not an ISO-8601 time or epoch seconds: {value!r}", ExitCode.USAGE,
                            param=name) from exc
    return to_epoch_us(dt, name)


def _epoch_number_us(seconds: float, name: str) -> int:
    if not math.isfinite(seconds):
        raise AnalyzerError(f"{name}: not a time: {seconds!r}", ExitCode.USAGE, param=name)
    if abs(seconds) > _EPOCH_MS_THRESHOLD:
        seconds /= 1000.0
    return round(seconds * US)


def us_to_datetime(us: int) -> datetime:
    """Microseconds since the epoch as a naive UTC datetime (the database's convention)."""
    from datetime import timedelta

    return datetime(1970, 1, 1) + timedelta(microseconds=us)


def us_to_iso(us: int) -> str:
    """Microseconds since the epoch as ISO 8601 with a ``Z`` (how summaries print times)."""
    return iso_utc(us_to_datetime(us))
