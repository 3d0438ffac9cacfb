"""The model mapping (``--model-map``), parsed and stored. Samples are stored by :mod:`.stage`."""

from __future__ import annotations

from typing import Iterable

import duckdb

from ..errors import AnalyzerError, ExitCode


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
