"""Writing samples and the model mapping into the database, idempotently.

A sample is identified by ``(metric, pod, labels, ts)``: loading the same file
twice, or the same series from two exports that overlap, stores each point once.
When two inputs disagree on the value of the same point, the first one loaded
wins (within one input, the first in file order) and the other is counted as a
duplicate: a series has one value per instant.
"""

from __future__ import annotations

from typing import Iterable

import duckdb

from ..errors import AnalyzerError, ExitCode
from .samples import Sample, labels_json

_STAGE = "_metric_samples_in"


def store_samples(con: duckdb.DuckDBPyConnection, samples: Iterable[Sample], source: str) -> tuple[int, int]:
    """Insert normalized samples not yet stored; return ``(new, duplicates)``.

    Runs inside the caller's transaction, if any.
    """
    import pyarrow as pa

    cols: dict[str, list] = {k: [] for k in ("ord", "metric", "pod", "model_name", "instance", "job", "labels", "ts_us", "value")}
    # The samples of one series share one labels dict: serialize it once. The
    # cache holds the dict too, so its id cannot be reused while the cache lives.
    encoded: dict[int, tuple[dict, str]] = {}
    for i, s in enumerate(samples):
        hit = encoded.get(id(s.labels))
        if hit is None or hit[0] is not s.labels:
            hit = encoded[id(s.labels)] = (s.labels, labels_json(s.labels))
        cols["ord"].append(i)
        cols["metric"].append(s.metric)
        cols["pod"].append(s.pod)
        cols["model_name"].append(s.labels.get("model_name"))
        cols["instance"].append(s.labels.get("instance"))
        cols["job"].append(s.labels.get("job"))
        cols["labels"].append(hit[1])
        cols["ts_us"].append(s.ts_us)
        cols["value"].append(s.value)
    total = len(cols["ord"])
    if not total:
        return 0, 0
    arrow = pa.table({
        "ord": pa.array(cols["ord"], pa.int64()),
        "metric": pa.array(cols["metric"], pa.string()),
        "pod": pa.array(cols["pod"], pa.string()),
        "model_name": pa.array(cols["model_name"], pa.string()),
        "instance": pa.array(cols["instance"], pa.string()),
        "job": pa.array(cols["job"], pa.string()),
        "labels": pa.array(cols["labels"], pa.string()),
        "ts_us": pa.array(cols["ts_us"], pa.int64()),
        "value": pa.array(cols["value"], pa.float64()),
    })
    con.register(_STAGE, arrow)
    try:
        before = con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]
        con.execute(
            f"""
            INSERT INTO metric_samples (metric, pod, model_name, instance, job, labels, ts, value, source)
            SELECT s.metric, s.pod, s.model_name, s.instance, s.job, s.labels::JSON,
                   make_timestamp(s.ts_us), s.value, $source
            FROM (
                SELECT *, row_number() OVER (PARTITION BY metric, pod, labels, ts_us ORDER BY ord) AS nth
                FROM {_STAGE}
            ) s
            WHERE s.nth = 1
              AND NOT EXISTS (
                  SELECT 1 FROM metric_samples m
                  WHERE m.metric = s.metric
                    AND m.pod IS NOT DISTINCT FROM s.pod
                    AND m.ts = make_timestamp(s.ts_us)
                    AND m.labels::VARCHAR = s.labels::JSON::VARCHAR)
            """,
            {"source": source},
        )
        after = con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]
    finally:
        con.unregister(_STAGE)
    new = after - before
    return new, total - new


def store_model_map(con: duckdb.DuckDBPyConnection, model_map: dict[str, str] | None) -> None:
    """Record log ``model`` -> metric ``model_name`` overrides (replacing earlier ones).

    Models without an entry match the metric ``model_name`` of the same name.
    """
    for log_model, model_name in (model_map or {}).items():
        con.execute(
            "INSERT OR REPLACE INTO model_map (log_model, model_name) VALUES (?, ?)",
            [str(log_model), str(model_name)],
        )


def parse_model_map(pairs: Iterable[str] | None) -> dict[str, str]:
    """``["glm-5=zai-org/GLM-5", ...]`` (the ``--model-map`` option) as a dict.

    Raises:
        AnalyzerError: (usage) an item that is not ``LOG_MODEL=METRIC_MODEL_NAME``.
    """
    out: dict[str, str] = {}
    for pair in pairs or []:
        log_model, sep, model_name = pair.partition("=")
        if not sep or not log_model.strip() or not model_name.strip():
            raise AnalyzerError(f"--model-map: want LOG_MODEL=METRIC_MODEL_NAME, got {pair!r}", ExitCode.USAGE)
        out[log_model.strip()] = model_name.strip()
    return out
