"""Samples stored as series and points: ``metric_samples`` is a view over ``metric_series``
(each label set once) and ``metric_points``; a later load adds points to the series held,
a point's first value in file order is the one stored, and forgetting a source keeps the others'.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from analyzer.store.db import connect
from analyzer.jobs.metrics import load_metrics
from analyzer.ingestion.metric_store import forget_sources
from tests.support.repo import REPO

SAMPLE = REPO / "sample_logs" / "metrics"
T0 = 1_794_787_200  # 2026-11-16T00:00:00Z


def _extra_csv(path: Path) -> str:
    """A pod with two engines that sleep for a while, and a sidecar `up` beside its vLLM `up`."""
    rows = []
    for i in range(120):
        t = T0 + 15 * i
        asleep = 40 <= i < 80
        for engine in ("0", "1"):
            labels = {"namespace": "llm", "pod": "s-0", "model_name": "qwen3", "engine": engine,
                      "instance": "10.0.0.9:8000", "job": "vllm"}
            rows.append([t, "vllm:generation_tokens_total", json.dumps(labels), 100 + (0 if asleep else i)])
            for state, v in (("awake", 0 if asleep else 1), ("weights_offloaded", 1 if asleep else 0)):
                rows.append([t, "vllm:engine_sleep_state", json.dumps({**labels, "sleep_state": state}), v])
        rows.append([t, "up", json.dumps({"namespace": "llm", "pod": "s-0", "instance": "10.0.0.9:8000",
                                          "job": "vllm"}), 0 if 100 <= i < 110 else 1])
        rows.append([t, "up", json.dumps({"namespace": "llm", "pod": "s-0", "instance": "10.0.0.9:9100",
                                          "job": "exporter"}), 1])
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "metric", "labels", "value"])
        w.writerows(rows)
    return str(path)


def _samples(con) -> list[tuple]:
    return con.execute("SELECT metric, pod, model_name, instance, job, labels::VARCHAR, ts, value, source "
                       "FROM metric_samples ORDER BY ALL").fetchall()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    if not SAMPLE.is_dir():
        pytest.skip("sample_logs/metrics is not in this checkout")
    return [str(SAMPLE), _extra_csv(tmp_path_factory.mktemp("extra") / "extra.csv")]


def test_a_second_load_adds_points_to_the_series_it_already_holds(tmp_path, inputs):
    con = connect(tmp_path / "a.duckdb")
    try:
        load_metrics(con, inputs[1:])
        n_series = con.execute("SELECT count(*) FROM metric_series").fetchall()[0][0]
        first = _samples(con)
        # A later export of the same series overlapping the first: only the new instants are stored.
        later = tmp_path / "later.csv"
        with open(inputs[1]) as f:
            lines = f.read().splitlines()
        shifted = [lines[0]] + [f"{int(t) + 15 * 60}," + rest for t, rest in (ln.split(",", 1) for ln in lines[1:])]
        later.write_text("\n".join(shifted) + "\n")
        report = load_metrics(con, [str(later)])
        assert con.execute("SELECT count(*) FROM metric_series").fetchall()[0][0] == n_series
        per_instant = len(first) // 120
        assert (report.samples_new, report.duplicates) == (60 * per_instant, 60 * per_instant)
        assert con.execute("SELECT count(*) FROM (SELECT DISTINCT metric, pod, labels::VARCHAR, ts "
                           "FROM metric_samples)").fetchall()[0][0] == len(first) + 60 * per_instant
        # Forgetting the first file's samples keeps the later file's, series and all.
        src = str(Path(inputs[1]).resolve())
        assert forget_sources(con, [src]) == len(first)
        assert {r[8] for r in _samples(con)} == {str(later.resolve())}
        assert con.execute("SELECT count(*) FROM metric_sources").fetchall()[0][0] == 1
    finally:
        con.close()


def test_the_first_value_of_a_point_in_file_order_is_stored(tmp_path):
    # The later, smaller values lose. Big enough for DuckDB to read the CSV in several chunks on several threads.
    n = 40_000
    lab = json.dumps({"pod": "p", "model_name": "m", "engine": "0"}).replace('"', '""')
    first = "".join(f'{T0 + 15 * i},vllm:num_requests_running,"{lab}",{i % 7 + 100}\n' for i in range(n))
    second = "".join(f'{T0 + 15 * i},vllm:num_requests_running,"{lab}",{i % 7}\n' for i in range(n))
    path = tmp_path / "conflict.csv"
    path.write_text("timestamp,metric,labels,value\n" + first + second)
    con = connect(tmp_path / "a.duckdb")
    try:
        report = load_metrics(con, [str(path)])
        assert (report.samples_new, report.duplicates) == (n, n)
        assert con.execute("SELECT count(*) FILTER (WHERE value < 100), max(value) FROM metric_samples"
                           ).fetchall()[0] == (0, 106)
    finally:
        con.close()
