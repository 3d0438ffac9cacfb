"""Prometheus API answers staged a series at a time: the one reader of API JSON, files and live answers.

A ``query_range`` answer is one JSON document: a week of a busy cluster is a
hundred megabytes in one object, and reading it whole (``json.loads``, DuckDB's
``read_json``) costs many times its size in memory (benchmarks/README.md has the
figures). Here instead:

- :class:`SeriesStager` takes series one by one (``{"metric": ..., "values": ...}``)
  and stages their points in batches of :data:`BATCH_POINTS` (times and values
  converted by numpy, the label set interned once per series, a short key per
  point): the name is ``__name__`` (empty for an expression's series, which
  storing skips), the time ``round(t * 1e6)`` microseconds and the value what
  ``float()`` reads (``"NaN"``, ``"+Inf"``);
- :func:`stream_json_file` walks a file of API answers (one, its bare ``data``, a
  list of them, or one per line; plain or gzipped) with an incremental reader
  that holds one series at a time and hands each to the stager. The analyzer's
  live queries (:mod:`analyzer.io.prometheus`) hand it each page's answer.

A malformed answer raises ``ValueError`` with the reason.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
from pathlib import Path
from typing import Any, BinaryIO, Callable

import duckdb
import numpy as np

from analyzer.core.durations import US
from analyzer.ingestion.metric_stage import STAGE, STAGE_COLUMNS, Series, intern_labels
from analyzer.io.metric_formats import api_result, gzipped
from analyzer.io.metric_samples import KEPT_SPELLINGS, labels_json
from analyzer.store.db import registered

#: Points staged per batch (one Arrow table, one INSERT).
BATCH_POINTS = 1 << 18
#: Bytes read from the file at a time.
READ_BYTES = 1 << 20

_DECODER = json.JSONDecoder()
_KEPT = frozenset(KEPT_SPELLINGS)
_WS = re.compile(r"[ \t\n\r]*")


class SeriesStager:
    """Stage the points of Prometheus API series into the scratch database, a batch at a time.

    Rows get the input's order (``ord``), the metric as named, a short key of the
    label set, the time in microseconds and the value. :meth:`finish` interns the
    label sets (each once) into ``series``. ``tick()`` is called before each batch
    is staged (an exception it raises stops the reading).
    """

    def __init__(self, scratch: duckdb.DuckDBPyConnection, tick: Callable[[], None] | None = None) -> None:
        self.scratch = scratch
        self.tick = tick
        self.rows = 0  # points staged (and pending)
        self.series_seen = 0
        self._keys: dict[str, str] = {}  # canonical labels -> short key
        self._labels: dict[str, dict[str, str]] = {}  # short key -> labels (without __name__)
        self._names: dict[str, int] = {}
        self._pending: list[tuple[int, int, list, list]] = []  # (name index, key index, times, values)
        self._pending_points = 0
        self._key_index: dict[str, int] = {}
        self._kept_keys: set[str] = set()  # the label sets of kept metrics with points

    # -- input

    def add_document(self, doc: Any) -> None:
        """The series of a parsed API answer, its ``data``, or a list of them.

        Raises:
            ValueError: an error response, an unsupported result type, a malformed result.
        """
        if isinstance(doc, list):
            for item in doc:
                self.add_document(item)
            return
        kind, result = api_result(doc)
        for series in result:
            self.add(kind, series)

    def add(self, kind: str, series: Any) -> None:
        """One series of a ``matrix`` or ``vector`` result.

        Raises:
            ValueError: a malformed series or point.
        """
        try:
            labels = {str(k): str(v) for k, v in (series.get("metric") or {}).items()}
            name = labels.pop("__name__", "")
            if kind == "matrix":
                points = series.get("values") or []
            else:
                points = [series["value"]] if series.get("value") else []
            n = len(points)
            if n and min(map(len, points)) < 2:  # more is ignored, as DuckDB's typed read does
                raise ValueError("a point is not [time, value]")
            times = [p[0] for p in points]
            values = [p[1] for p in points]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed {kind} result: {exc!r}") from exc
        self.series_seen += 1
        if not n:
            return
        canonical = labels_json(labels)
        key = self._keys.get(canonical)
        if key is None:
            key = self._keys[canonical] = f"s{len(self._keys)}"
            self._labels[key] = labels
            self._key_index[key] = len(self._key_index)
        if name in _KEPT:
            self._kept_keys.add(key)
        name_i = self._names.setdefault(name, len(self._names))
        self._pending.append((name_i, self._key_index[key], times, values))
        self._pending_points += n
        if self._pending_points >= BATCH_POINTS:
            self.flush()

    # -- output

    def flush(self) -> None:
        """Stage the pending points (one INSERT).

        Raises:
            ValueError: a time or value that is not a number (as ``float()`` says).
        """
        if not self._pending:
            return
        if self.tick is not None:
            self.tick()
        import pyarrow as pa

        pending, self._pending, n = self._pending, [], self._pending_points
        self._pending_points = 0
        times = [t for _, _, ts, _ in pending for t in ts]
        values = [v for _, _, _, vs in pending for v in vs]
        counts = np.fromiter((len(ts) for _, _, ts, _ in pending), np.int64, len(pending))
        ts_us, vals = _numbers(times, "time"), _numbers(values, "value")
        if not np.isfinite(ts_us).all():
            raise ValueError("malformed result: a time that is not a finite number")
        ts_us = np.round(ts_us * US).astype(np.int64)  # Python's round(): half to even, as the parser
        names = pa.array(list(self._names), pa.string())
        keys = pa.array(list(self._key_index), pa.string())
        table = pa.table({
            "ord": pa.array(np.arange(self.rows, self.rows + n, dtype=np.int64)),
            "metric": pa.DictionaryArray.from_arrays(
                pa.array(np.repeat(np.fromiter((p[0] for p in pending), np.int32, len(pending)), counts)), names),
            "label_key": pa.DictionaryArray.from_arrays(
                pa.array(np.repeat(np.fromiter((p[1] for p in pending), np.int32, len(pending)), counts)), keys),
            "ts_us": pa.array(ts_us),
            "value": pa.array(vals),
        })
        del times, values, pending
        with registered(self.scratch, "_metric_series_batch", table):
            self.scratch.execute(f"INSERT INTO {STAGE} {STAGE_COLUMNS} "
                                 "SELECT ord, metric::VARCHAR, label_key::VARCHAR, ts_us, value FROM _metric_series_batch")
        self.rows += n

    def finish(self, series: Series) -> Series:
        """Stage what is pending and intern the label sets seen (of kept metrics, each once)."""
        self.flush()
        keys = sorted(self._kept_keys, key=self._key_index.__getitem__)
        return intern_labels(self.scratch, lambda key: dict(self._labels[key]), series, keys=keys)


def _numbers(items: list, what: str) -> np.ndarray:
    """``items`` (JSON numbers or their text) as float64, as ``float()`` reads each."""
    if None in items:  # numpy would make NaN of it; float(None) is an error
        raise ValueError(f"malformed result: a {what} that is null")
    try:
        out = np.array(items, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"malformed result: a {what} that is not a number: {exc}") from exc
    if out.ndim != 1 or len(out) != len(items):
        raise ValueError(f"malformed result: a {what} that is not a number")
    return out


# ---------------------------------------------------------------------------
# A file of API responses, walked incrementally


class _Reader:
    """JSON text read a megabyte at a time; :meth:`value` decodes one value, holding only it."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf = ""
        self.pos = 0
        self.offset = 0  # characters dropped before buf
        self.eof = False

    def _more(self, want: int = 0) -> bool:
        if self.eof:
            return False
        data = self.f.read(max(READ_BYTES, want))
        if self.pos:  # drop what was consumed
            self.offset += self.pos
            self.buf, self.pos = self.buf[self.pos:], 0
        if not data:
            self.buf += self.decoder.decode(b"", final=True)
            self.eof = True
            return False
        self.buf += self.decoder.decode(data)
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ('' at the end)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def take(self, char: str) -> None:
        got = self.peek()
        if got != char:
            raise ValueError(f"not valid JSON: expected {char!r}, got {got or 'the end'!r} at {self._where()}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, read whole."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Cut off by the buffer's end, or malformed: read as much again and retry (a
                # value twice as long as the buffer costs one more decode, not one per chunk).
                where = self._where(exc.pos)
                if self._more(len(self.buf) - self.pos):
                    continue
                raise ValueError(f"not valid JSON: {exc.msg} at {where}") from exc
            if end == len(self.buf) and self._more():  # a number may go on in the next chunk
                continue
            self.pos = end
            return obj

    def key(self) -> str:
        key = self.value()
        if not isinstance(key, str):
            raise ValueError(f"not valid JSON: an object key that is not a string at {self._where()}")
        self.take(":")
        return key

    def after_item(self, close: str) -> bool:
        """After an item of an object or array: True at ``close`` (consumed), False at ',' (consumed)."""
        got = self.peek()
        if got in (close, ","):
            self.pos += 1
            return got == close
        raise ValueError(f"not valid JSON: expected ',' or {close!r}, got {got or 'the end'!r} at {self._where()}")

    def _where(self, pos: int | None = None) -> str:
        return f"character {self.offset + (self.pos if pos is None else pos)}"


def stream_json_file(path: Path, stager: SeriesStager) -> int:
    """Stage the series of a file of Prometheus API answers; return how many answers it held.

    One answer (or its bare ``data``), a list of them, or one per line (JSONL),
    plain or gzipped; an empty file or list holds none.

    Raises:
        ValueError: not valid JSON, or not Prometheus API answers of matrix or vector results.
    """
    with (gzip.open if gzipped(path) else open)(path, "rb") as f:
        r = _Reader(f)
        answers = 0
        while (c := r.peek()) != "":
            if c != "[":
                _answer(r, stager)
                answers += 1
                continue
            r.pos += 1  # a list of answers
            if r.peek() == "]":
                r.pos += 1
                continue
            while True:
                _answer(r, stager)
                answers += 1
                if r.after_item("]"):
                    break
        return answers


def _answer(r: _Reader, stager: SeriesStager) -> None:
    """One answer, or its bare ``data``, judged as :func:`~analyzer.io.metric_formats.api_result` judges it."""
    if r.peek() != "{":
        stager.add_document(r.value())  # a list in a list, a number...: read whole, add_document says what it is
        return
    kind, result = api_result(_members(r, stager, envelope=True))
    for series in result:  # what was not staged as it was read (a result before its resultType)
        stager.add(kind, series)


def _members(r: _Reader, stager: SeriesStager, envelope: bool) -> dict[str, Any]:
    """An answer's object (``envelope``) or its ``data``, every member read whole but two:
    ``data`` is walked the same way, and a ``result`` after a ``resultType`` of matrix or
    vector is staged series by series (and kept as ``[]``), holding one series at a time."""
    r.take("{")
    out: dict[str, Any] = {}
    if r.peek() == "}":
        r.pos += 1
        return out
    while True:
        key = r.key()
        if key == "data" and envelope and r.peek() == "{":
            out[key] = _members(r, stager, envelope=False)
        elif key == "result" and out.get("resultType") in ("matrix", "vector") and r.peek() == "[":
            r.pos += 1
            if r.peek() == "]":
                r.pos += 1
            else:
                while True:
                    stager.add(out["resultType"], r.value())
                    if r.after_item("]"):
                        break
            out[key] = []
        else:
            out[key] = r.value()
        if r.after_item("}"):
            return out
