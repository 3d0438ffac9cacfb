"""The model mapping (``--model-map``), parsed and stored; samples forgotten by source.

Loads store samples through :mod:`analyzer.ingestion.metric_stage`; :func:`forget_sources`
removes what sources loaded.
"""

from __future__ import annotations

from typing import Iterable

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode


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
            raise AnalyzerError(f"want LOG_MODEL=METRIC_MODEL_NAME, got {pair!r}", ExitCode.USAGE, param="model_map")
        out[log_model.strip()] = model_name.strip()
    return out


def forget_sources(con: duckdb.DuckDBPyConnection, sources: list[str]) -> int:
    """Delete the samples loaded from ``sources`` (and series and sources left empty); return how many.

    Runs inside the caller's transaction, if any.
    """
    if not sources:
        return 0
    n = con.execute("""DELETE FROM metric_points WHERE source_id IN
                       (SELECT source_id FROM metric_sources WHERE list_contains($s, source))""",
                    {"s": sources}).fetchall()[0][0]
    con.execute("DELETE FROM metric_series WHERE series_id NOT IN (SELECT DISTINCT series_id FROM metric_points)")
    con.execute("DELETE FROM metric_sources WHERE list_contains($s, source)", {"s": sources})
    return n
