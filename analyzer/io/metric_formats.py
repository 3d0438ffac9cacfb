"""The metric input forms: told apart, judged, and parsed in Python where Python reads them.

- Prometheus HTTP API JSON: ``/api/v1/query_range`` (matrix) and ``/api/v1/query``
  (vector, or matrix for a range selector) responses, saved one per file, as a
  JSON list of responses, or one per line (JSONL). :func:`api_result` judges an
  answer; :mod:`analyzer.ingestion.apistream` walks the files.
- Text exposition, format 0.0.4 and OpenMetrics 1.0, parsed by prometheus-client.
  Samples without a timestamp get the scrape time: a timestamp in the file name
  (``20261116T140000Z``, ``2026-11-16T14-00-00Z``, epoch seconds) or else the file's
  modification time.
- CSV with the header ``timestamp, metric, labels, value``: timestamps ISO 8601 or
  epoch seconds (milliseconds when above 1e11), labels a JSON object or
  ``k=v,k=v`` (values optionally double-quoted).

Parsers raise ``ValueError`` on malformed input; :func:`read_metrics_file` (a CSV
or a text scrape) turns that into an :class:`~analyzer.core.errors.InputError`
naming the file.
"""

from __future__ import annotations

import csv
import glob
import gzip
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from analyzer.core.durations import US, to_epoch_us
from analyzer.core.errors import AnalyzerError, InputError
from analyzer.io.linereader import GZIP_MAGIC
from analyzer.io.metric_samples import Sample, pod_identity

JSON = "prometheus-json"
EXPOSITION = "text-0.0.4"
OPENMETRICS = "openmetrics"
CSV = "csv"

CSV_COLUMNS = ("timestamp", "metric", "labels", "value")

# A scrape time in a file name: 2026-11-16T14:00:00Z, 20261116T140000Z, 2026-11-16_14-00-00 ...
_NAME_STAMP = re.compile(
    r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})[T_\-](\d{2})[:\-]?(\d{2})[:\-]?(\d{2})(?:[.,](\d{1,6}))?Z?(?!\d)"
)
_NAME_EPOCH = re.compile(r"(?<!\d)(1\d{9}|1\d{12})(?!\d)")  # epoch seconds or milliseconds
_SCRAPE_SUFFIXES = (".prom", ".txt", ".om", ".metrics", ".openmetrics", ".text")
_KV_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.:\-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,]*?)\s*(?:,|$)')


@dataclass
class FileRead:
    """The samples of one metrics file and how they were read."""

    path: str
    form: str
    samples: list[Sample]
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------
# Prometheus HTTP API JSON


def api_result(doc: Any) -> tuple[str, list]:
    """The ``resultType`` and ``result`` of one Prometheus API response (or its bare ``data``).

    Raises:
        ValueError: not an API response, an error response, or a result type other than matrix or vector.
    """
    if not isinstance(doc, dict):
        raise ValueError("not a Prometheus API response (expected a JSON object)")
    if doc.get("status") == "error":
        raise ValueError(f"a Prometheus error response: {doc.get('errorType')}: {doc.get('error')}")
    data = doc.get("data", doc)
    if not isinstance(data, dict) or "result" not in data:
        raise ValueError("not a Prometheus API response (no data.result)")
    kind = data.get("resultType")
    if kind not in ("matrix", "vector"):
        raise ValueError(f"unsupported Prometheus resultType {kind!r} (want matrix or vector)")
    return kind, data["result"] or []


# ---------------------------------------------------------------------------
# Text exposition (0.0.4) and OpenMetrics


def is_openmetrics(text: str) -> bool:
    """OpenMetrics text ends with ``# EOF``; the 0.0.4 format has no such line."""
    return text.rstrip().endswith("# EOF")


def parse_exposition(text: str, *, default_ts_us: int, fallback_pod: str | None = None) -> Iterator[Sample]:
    """Samples of a ``/metrics`` scrape, 0.0.4 or OpenMetrics (told apart by ``# EOF``).

    Sample timestamps are milliseconds in 0.0.4 and seconds in OpenMetrics; the
    prometheus-client parsers hand both back in seconds. Samples without one get
    ``default_ts_us``.

    Raises:
        ValueError: the text does not parse.
    """
    if is_openmetrics(text):
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    else:
        from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.timestamp is None:
                ts_us = default_ts_us
            elif hasattr(s.timestamp, "nsec"):  # openmetrics Timestamp: exact seconds + nanoseconds
                ts_us = s.timestamp.sec * US + s.timestamp.nsec // 1000
            else:
                ts_us = round(float(s.timestamp) * US)
            labels = {str(k): str(v) for k, v in s.labels.items()}
            yield Sample(s.name, labels, ts_us, float(s.value), pod_identity(labels, fallback_pod))


def scrape_time_from_name(path: Path) -> int | None:
    """A scrape time written in the file name, in epoch microseconds, or None."""
    m = _NAME_STAMP.search(path.name)
    if m:
        y, mo, d, h, mi, s, frac = m.groups()
        iso = f"{y}-{mo}-{d}T{h}:{mi}:{s}" + (f".{frac.ljust(6, '0')}" if frac else "") + "+00:00"
        try:
            return to_epoch_us(iso)
        except AnalyzerError:  # an impossible date such as month 13: not a stamp
            pass
    m = _NAME_EPOCH.search(path.name)
    if m:
        return to_epoch_us(int(m.group(1)))
    return None


def scrape_time(path: Path) -> tuple[int, str]:
    """The time of a scrape's samples that carry none (epoch microseconds), and what it was taken from:
    the time in the file name, else the file's modification time."""
    ts_us = scrape_time_from_name(path)
    if ts_us is None:
        return round(path.stat().st_mtime * US), "file modification time"
    return ts_us, "time in file name"


def scrape_target_from_name(path: Path) -> str | None:
    """A pod identity for a scrape that names no target: the file name without its
    time stamp and scrape suffix (``glm-5-abc_20261116T140000Z.prom.gz`` -> ``glm-5-abc``),
    or, when nothing is left, the parent directory's name."""
    name = path.name.removesuffix(".gz")
    for suffix in _SCRAPE_SUFFIXES:
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    name = _NAME_EPOCH.sub("", _NAME_STAMP.sub("", name)).strip(" -_.")
    return name or path.parent.name or None


# ---------------------------------------------------------------------------
# CSV


def parse_kv_labels(text: str) -> dict[str, str]:
    """Labels written ``k=v,k=v`` (values may be double-quoted with JSON escapes).

    Raises:
        ValueError: the text is not a list of ``key=value`` pairs.
    """
    out: dict[str, str] = {}
    text = text.strip().strip("{}")
    pos = 0
    while pos < len(text):
        m = _KV_LABEL.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"labels are neither JSON nor k=v,k=v: {text!r}")
        key, value = m.group(1), m.group(2)
        out[key] = json.loads(value) if value.startswith('"') else value
        pos = m.end()
    return out


def parse_labels_field(text: str) -> dict[str, str]:
    """A CSV labels field: a JSON object or ``k=v,k=v``; empty means no labels."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{") and '"' in text and ":" in text:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            return {str(k): str(v) for k, v in doc.items()}
    return parse_kv_labels(text)


def parse_csv(text: str) -> Iterator[Sample]:
    """Samples of a CSV with the header ``timestamp, metric, labels, value`` (any order).

    A labels field with commas should be quoted; an unquoted one is tolerated by
    taking the extra fields of a row as part of the labels.

    Raises:
        ValueError: a missing column, or a row whose time, labels or value do not parse.
    """
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    header = [h.strip().lower() for h in next(reader, [])]
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        raise ValueError(f"CSV header lacks {', '.join(missing)} (want: {', '.join(CSV_COLUMNS)})")
    idx = {c: header.index(c) for c in CSV_COLUMNS}
    li = idx["labels"]
    for n, row in enumerate(reader, 2):
        if not row or all(not f.strip() for f in row):
            continue
        extra = len(row) - len(header)
        if extra < 0:
            raise ValueError(f"line {n}: {len(row)} fields, want {len(header)}")

        def col(name: str) -> str:
            i = idx[name]
            return row[i + extra] if i > li else row[i]

        try:
            labels = parse_labels_field(",".join(row[li:li + extra + 1]))
            ts_us = to_epoch_us(col("timestamp").strip(), "timestamp")
            value = float(col("value").strip())
        except Exception as exc:  # AnalyzerError from the time parser, ValueError from the rest
            raise ValueError(f"line {n}: {exc}") from exc
        yield Sample(col("metric").strip(), labels, ts_us, value, pod_identity(labels))


# ---------------------------------------------------------------------------
# Files


def detect_form(text: str, name: str = "") -> str:
    """Which parser a file needs: from its content, or its name when that says CSV or JSON
    (so a CSV with a wrong header gets a CSV error, not an exposition one)."""
    suffix = name.lower().removesuffix(".gz").rsplit(".", 1)[-1] if "." in name else ""
    if suffix == "csv":
        return CSV
    head = text.lstrip()
    if suffix in ("json", "jsonl") or head.startswith(("{", "[")):
        return JSON
    first = head.splitlines()[0] if head else ""
    if {c.strip().lower() for c in first.split(",")} >= set(CSV_COLUMNS):
        return CSV
    return OPENMETRICS if is_openmetrics(text) else EXPOSITION


def gzipped(path: Path) -> bool:
    """Whether a file starts with gzip's magic bytes."""
    with path.open("rb") as f:
        return f.read(2) == GZIP_MAGIC


def read_text(path: Path) -> str:
    """A file's text, transparently gunzipped when it ends in ``.gz``."""
    data = path.read_bytes()
    if path.suffix == ".gz" or data[:2] == GZIP_MAGIC:
        data = gzip.decompress(data)
    return data.decode("utf-8-sig")


def read_metrics_file(path: str | Path) -> FileRead:
    """Parse one CSV or text scrape (API JSON is walked by :mod:`analyzer.ingestion.apistream`).

    Raises:
        InputError: the file cannot be read or does not parse in its detected form.
    """
    p = Path(path)
    try:
        text = read_text(p)
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"{p}: cannot read metrics file: {exc}") from exc
    form = detect_form(text, p.name)
    notes: list[str] = []
    try:
        if form == CSV:
            samples = list(parse_csv(text))
        else:
            default_ts, stamp_from = scrape_time(p)
            fallback_pod = scrape_target_from_name(p)
            samples = list(parse_exposition(text, default_ts_us=default_ts, fallback_pod=fallback_pod))
            if any(s.ts_us == default_ts for s in samples):
                notes.append(f"{p}: samples without timestamps stamped with the {stamp_from}")
    except (ValueError, IndexError, KeyError, TypeError) as exc:  # the exposition parsers raise any of these
        raise InputError(f"{p}: not a valid {form} metrics file: {exc}") from exc
    if not samples:
        notes.append(f"{p}: no samples (read as {form})")
    return FileRead(str(p.resolve()), form, samples, notes)


def discover_metric_files(paths: Iterable[str | Path]) -> list[Path]:
    """Expand files, directories (recursively, hidden files skipped) and globs, in order.

    Raises:
        InputError: a path that does not exist and matches nothing.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(f for f in p.rglob("*") if f.is_file() and not any(
                part.startswith(".") for part in f.relative_to(p).parts))
        elif p.is_file():
            out.append(p)
        else:
            matches = sorted(glob.glob(str(raw), recursive=True))
            if not matches:
                raise InputError(f"no such metrics file or directory: {raw}")
            out += discover_metric_files(matches)
    seen: set[Path] = set()
    return [f for f in out if not (f.resolve() in seen or seen.add(f.resolve()))]
