"""The proxy's S3 chunk files: its full-fidelity copy of every record.

Each proxy process flushes its buffer on its own schedule
(:class:`~tools.simulator.writers.events.Flusher`) into a chunk named by the flush time;
optionally two chunks are damaged the way real buckets are (a line cut mid-JSON, a line
of NUL bytes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tools.simulator.clock import DAY_US, US, parse_ts, to_us
from tools.simulator.week import SimulatedWeek
from tools.simulator.writers.events import FLUSH_INTERVAL_S, Flusher, source_events


def chunk_line(record: dict) -> str:
    """One line of an S3 chunk (no newline): ``json.dumps`` of the record, as the proxy's flush writes it."""
    return json.dumps(record)


@dataclass
class S3WriteResult:
    """What :func:`write_s3_chunks` wrote: relative chunk paths, record count, damage."""

    files: list[str] = field(default_factory=list)
    records: int = 0
    malformed: list[dict] = field(default_factory=list)


def write_s3_chunks(
    records: SimulatedWeek | Iterable[dict],
    root: str | os.PathLike,
    *,
    flush_interval_s: int = FLUSH_INTERVAL_S,
    malformed: bool = False,
) -> S3WriteResult:
    """Write records as the proxy's S3 chunk files under ``root``.

    Each proxy process flushes its buffer every ``flush_interval_s`` seconds when it
    holds records (and once more at shutdown); a chunk is named by the flush time:
    ``YYYY-MM-DD/HH-MM-SS-<pid>.jsonl`` for the old proxy,
    ``YYYY-MM-DD/HH-MM-SS-<host>-<pid>-<8hex>.jsonl`` for newer ones. Lines are
    ``json.dumps`` of each record, as the proxy writes them. Records near midnight
    can land in the next day's folder, as in the real bucket.

    Args:
        records: a :class:`SimulatedWeek` (its processes name the chunks) or any
            iterable of record dicts in time order (one synthetic process).
        root: the bucket directory.
        flush_interval_s: the proxy's ``FLUSH_INTERVAL``.
        malformed: damage two chunks the way real buckets get damaged: one chunk's
            last line cut mid-JSON (the process died while writing), one chunk
            ending in a line of NUL bytes. Reported in the result.

    Returns:
        An :class:`S3WriteResult`.
    """
    root = Path(root)
    procs, events = source_events(records)
    result = S3WriteResult()
    flushers: dict[int, Flusher] = {}
    buffers: dict[int, list[str]] = {}
    week_start = to_us(records.start) if isinstance(records, SimulatedWeek) else None
    damage = {"cut_after": None, "garbage_after": None}

    made_dirs: set[str] = set()

    def write(key: str, lines: list[str]) -> None:
        path = root / key
        day = key.split("/", 1)[0]
        if day not in made_dirs:  # one mkdir per day folder, not per chunk
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(day)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        if malformed:
            data = _damage(key, lines, data)
        with open(path, "wb") as f:
            f.write(data)
        result.files.append(key)

    def _damage(key: str, lines: list[str], data: bytes) -> bytes:
        t = parse_ts(json.loads(lines[0])["timestamp"])
        if damage["cut_after"] is None:
            base = week_start if week_start is not None else t
            damage["cut_after"] = base + DAY_US + 12 * 3600 * US
            damage["garbage_after"] = base + 4 * DAY_US + 12 * 3600 * US
        if damage["cut_after"] is not False and t >= damage["cut_after"] and len(lines) > 2:
            last = json.loads(lines[-1])
            if last.get("type") == "request":
                damage["cut_after"] = False
                keep = len(lines[-1]) * 3 // 5
                result.malformed.append({"file": key, "line": len(lines), "kind": "truncated",
                                         "request_id": last.get("request_id"), "type": "request",
                                         "note": "last line cut mid-JSON, no trailing newline"})
                return ("\n".join(lines[:-1]) + "\n" + lines[-1][:keep]).encode("utf-8")
        if damage["garbage_after"] is not False and t >= damage["garbage_after"]:
            damage["garbage_after"] = False
            result.malformed.append({"file": key, "line": len(lines) + 1, "kind": "garbage",
                                     "request_id": None, "type": None,
                                     "note": "a line of 32 NUL bytes after the last record"})
            return data + b"\x00" * 32 + b"\n"
        return data

    for ev in events:
        p = ev.process
        if ev.kind == "start":
            flushers[p] = Flusher(procs[p], flush_interval_s)
            buffers[p] = []
            continue
        fl = flushers[p]
        for _t, key, n in fl.due(ev.t_us):
            write(key, buffers[p][:n])
            del buffers[p][:n]
        if ev.kind == "exit":
            last = fl.final(ev.t_us)
            if last is not None:
                write(last[1], buffers[p])
                buffers[p] = []
            continue
        if ev.record is not None:
            buffers[p].append(chunk_line(ev.record))
            fl.count += 1
            result.records += 1
    for p, fl in flushers.items():
        for _t, key, n in fl.due(fl.next_us):
            write(key, buffers[p][:n])
            del buffers[p][:n]
        last = fl.final(None)
        if last is not None:
            write(last[1], buffers[p])
    return result
