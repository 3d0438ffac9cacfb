"""What the other signals said during a wedged window, so an operator can trust or dismiss it.

The wedge rule rests on a flat generation counter under demand. Four more signals
of the same pod and model, over the same window, either agree or do not:

- **running stuck**: ``vllm:num_requests_running`` never changed and stayed above 0
  (requests in the batch that never finish);
- **waiting growing**: ``vllm:num_requests_waiting`` ended higher than it started;
- **KV cache full**: ``vllm:kv_cache_usage_perc`` reached 98% or more;
- **success counter flat**: ``vllm:request_success_total`` (all ``finished_reason``
  series) did not increase: nothing finished.

A signal without samples in the window is *unknown* and listed as such. Engines
(``engine`` label) are summed; a counter that drops inside the window restarted,
and its new value counts as the increase.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import duckdb

from analyzer.io.metric_samples import KV_CACHE_USAGE, REQUEST_SUCCESS, REQUESTS_RUNNING, REQUESTS_WAITING
from analyzer.store.asking import ask

#: A KV cache this full (0..1) cannot admit another request.
KV_FULL = 0.98

_SIGNALS = (REQUESTS_RUNNING, REQUESTS_WAITING, KV_CACHE_USAGE, REQUEST_SUCCESS)

# The samples of each window: the question window_signals of queries/ (run by name).


def _fmt(v: float) -> str:
    return f"{v:g}" if v == int(v) else f"{v:.1f}"


def corroborate(con: duckdb.DuckDBPyConnection,
                windows: list[tuple[str | None, str, datetime, datetime]]) -> list[dict]:
    """For each ``(pod, model_name, start, end)``: the signals, whether each agrees, and a line of text.

    Returns dicts ``{"signals": [{"signal", "agrees" (True/False/None), "text"}], "agreeing": n,
    "known": m, "text": "3/4 agree: ..."}``.
    """
    out = []
    for pod, model, start, end in windows:
        rows = ask(con, "window_signals", {"pod": pod, "model_name": model, "metrics": list(_SIGNALS),
                                           "since": start, "until": end})
        by: dict[str, list] = defaultdict(list)
        for metric, _labels, first, last, lo, hi, increase in rows:
            by[metric].append((first, last, lo, hi, increase or 0.0))
        signals = [_running(by.get(REQUESTS_RUNNING)), _waiting(by.get(REQUESTS_WAITING)),
                   _kv(by.get(KV_CACHE_USAGE)), _success(by.get(REQUEST_SUCCESS))]
        known = [s for s in signals if s["agrees"] is not None]
        unknown = [s["signal"] for s in signals if s["agrees"] is None]
        agreeing = sum(1 for s in known if s["agrees"])
        text = (f"{agreeing}/{len(known)} agree: " + "; ".join(s["text"] for s in known)) if known else \
            "no other signals"
        if known and unknown:
            text += f" (no samples for: {', '.join(unknown)})"
        out.append({"signals": signals, "agreeing": agreeing, "known": len(known), "text": text})
    return out


def _running(series) -> dict:
    if not series:
        return {"signal": "running stuck", "agrees": None, "text": "running: no samples"}
    stuck = all(lo == hi and hi > 0 for _f, _l, lo, hi, _i in series)
    total_hi = sum(hi for *_x, hi, _i in series)
    if stuck:
        return {"signal": "running stuck", "agrees": True, "text": f"running stuck at {_fmt(total_hi)}"}
    total_lo = sum(lo for _f, _l, lo, _h, _i in series)
    return {"signal": "running stuck", "agrees": False, "text": f"running varied {_fmt(total_lo)}–{_fmt(total_hi)}"}


def _waiting(series) -> dict:
    if not series:
        return {"signal": "waiting growing", "agrees": None, "text": "waiting: no samples"}
    first = sum(f for f, *_x in series)
    last = sum(s[1] for s in series)
    grew = last > first
    return {"signal": "waiting growing", "agrees": grew,
            "text": f"waiting {'grew' if grew else 'did not grow'} {_fmt(first)}→{_fmt(last)}"}


def _kv(series) -> dict:
    if not series:
        return {"signal": "KV cache full", "agrees": None, "text": "KV cache: no samples"}
    peak = max(hi for *_x, hi, _i in series)
    full = peak >= KV_FULL
    return {"signal": "KV cache full", "agrees": full,
            "text": f"KV cache {'full' if full else 'at most'} {peak * 100:.0f}%"}


def _success(series) -> dict:
    if not series:
        return {"signal": "success counter flat", "agrees": None, "text": "request_success: no samples"}
    finished = sum(i for *_x, i in series)
    if finished <= 0:
        return {"signal": "success counter flat", "agrees": True, "text": "success counter flat"}
    return {"signal": "success counter flat", "agrees": False, "text": f"{_fmt(finished)} requests finished"}
