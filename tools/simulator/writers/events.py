"""What every writer consumes: a week's events (or plain records'), and the flush schedule.

:func:`source_events` turns a :class:`~tools.simulator.week.SimulatedWeek`, or any
iterable of record dicts (given one synthetic proxy process), into processes and
events; :class:`Flusher` is one process's S3 flush loop, shared by the S3 writer (chunk
names) and the stdout writer (``✓ Flushed`` lines) so the two always agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tools.simulator.clock import US, from_us, iso, parse_ts, to_us
from tools.simulator.draws import hex_of
from tools.simulator.week import Event, SimulatedWeek
from tools.simulator.world import ProxyProcess

#: The proxy's FLUSH_INTERVAL (seconds between S3 flushes), as in llm_proxy.py.
FLUSH_INTERVAL_S = 60


def source_events(source: SimulatedWeek | Iterable[dict]) -> tuple[list[ProxyProcess], Iterator[Event]]:
    """Events and processes of a week, or of plain records (one synthetic process)."""
    if isinstance(source, SimulatedWeek):
        return source.processes, source.events()
    it = iter(source)
    first = next(it, None)
    if first is None:
        return [], iter(())
    t0 = parse_ts(first["timestamp"])
    proc = ProxyProcess("glm-proxy-sim", 1, from_us(t0 - 5 * US), from_us(t0 - 5 * US), None, "current")

    def gen() -> Iterator[Event]:
        yield Event(t0 - 5 * US, "start", 0, None, None, None)
        yield Event(t0, "record", 0, first, None, None)
        for r in it:
            yield Event(parse_ts(r["timestamp"]), "record", 0, r, None, None)

    return [proc], gen()


class Flusher:
    """The S3 flush loop of one proxy process: ``sleep(60)`` then flush, forever.

    Each flush takes a little time, so the schedule drifts by a few hundred
    milliseconds per minute, as in the real proxy. Both the S3 writer and the
    stdout writer (``✓ Flushed`` lines) use this, so keys and counts agree.
    """

    def __init__(self, proc: ProxyProcess, interval_s: int):
        self.proc = proc
        self.interval_us = interval_s * US
        self.k = 0
        self.next_us = to_us(proc.started) + self.interval_us + self._drift(0)
        self.count = 0

    def _drift(self, k: int) -> int:
        return 20_000 + int(hex_of(f"{self.proc.pod}:{self.proc.pid}:{self.proc.started}:{k}", 5), 16) % 280_000

    def due(self, t_us: int) -> Iterator[tuple[int, str, int]]:
        """Flushes that happen before ``t_us``: ``(flush_time, key, entries)``."""
        while self.next_us <= t_us:
            if self.count:
                yield self.next_us, self.key(self.next_us), self.count
                self.count = 0
            self.k += 1
            self.next_us += self.interval_us + self._drift(self.k)

    def final(self, t_us: int | None) -> tuple[int, str, int] | None:
        """The last flush: at shutdown (``t_us``), or the next scheduled one."""
        if not self.count:
            return None
        t = t_us if t_us is not None else self.next_us
        out = (t, self.key(t), self.count)
        self.count = 0
        return out

    def key(self, t_us: int) -> str:
        """The chunk's object key for a flush at ``t_us`` (``YYYY-MM-DD/HH-MM-SS-...jsonl``)."""
        ts = iso(t_us)
        stamp = f"{ts[:10]}/{ts[11:13]}-{ts[14:16]}-{ts[17:19]}"
        p = self.proc
        if p.chunk_style == "pid":
            return f"{stamp}-{p.pid}.jsonl"
        return f"{stamp}-{p.pod}-{p.pid}-{hex_of(f'{p.pod}:{p.pid}:{t_us}', 8)}.jsonl"
