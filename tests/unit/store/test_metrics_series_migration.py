"""Samples stored as series and points (migration 006): an older database upgrades to the same samples and windows.

Before 006, ``metric_samples`` was a table holding every sample with its labels;
since, it is a view over ``metric_series`` (each label set once) and
``metric_points``. A database written at schema 005 holding samples is upgraded
on open: the view shows the rows the table held, the windows recomputed from them
are the ones a fresh load gives, and loading the same files again stores nothing.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from analyzer.store.db import MIGRATIONS, connect
from analyzer.jobs.metrics import load_metrics
from analyzer.classification.windows import recompute_windows
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


def _windows(con) -> list[tuple]:
    return con.execute("SELECT * FROM pod_windows ORDER BY ALL").fetchall()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    if not SAMPLE.is_dir():
        pytest.skip("sample_logs/metrics is not in this checkout")
    return [str(SAMPLE), _extra_csv(tmp_path_factory.mktemp("extra") / "extra.csv")]


def test_a_database_at_schema_005_with_samples_upgrades_to_the_same_samples_and_windows(tmp_path, inputs):
    fresh = connect(tmp_path / "fresh.duckdb")
    report = load_metrics(fresh, inputs)
    rows, windows = _samples(fresh), _windows(fresh)
    fresh.close()
    assert report.samples_new == len(rows) > 10_000
    assert {w[2] for w in windows} == {"wedged", "down", "sleeping"}

    # The same samples, stored as the analyzer stored them before 006: one row each, labels and all.
    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    old.execute("CREATE TABLE _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    before = [(n, fn) for n, fn in MIGRATIONS if n < "006"]
    for name, fn in before:
        fn(old)
        old.execute("INSERT INTO _migrations VALUES (?, now())", [name])
    assert "metric_samples" in {r[0] for r in old.execute("SHOW TABLES").fetchall()}
    cols = list(zip(*rows))
    old.register("rows_in", pa.table({
        "metric": pa.array(cols[0], pa.string()), "pod": pa.array(cols[1], pa.string()),
        "model_name": pa.array(cols[2], pa.string()), "instance": pa.array(cols[3], pa.string()),
        "job": pa.array(cols[4], pa.string()), "labels": pa.array(cols[5], pa.string()),
        "ts": pa.array(cols[6], pa.timestamp("us")), "value": pa.array(cols[7], pa.float64()),
        "source": pa.array(cols[8], pa.string())}))
    old.execute("INSERT INTO metric_samples SELECT * FROM rows_in")
    old.unregister("rows_in")
    old.close()

    con = connect(path)
    try:
        assert "006_metric_series" in {r[0] for r in con.execute("SELECT name FROM _migrations").fetchall()}
        kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables "
                                 "WHERE table_schema = 'main'").fetchall())
        assert kinds["metric_samples"] == "VIEW" and kinds["metric_points"] == "BASE TABLE"
        assert _samples(con) == rows
        # Each label set once: a series per metric and label set, not per sample.
        n_series = con.execute("SELECT count(*) FROM metric_series").fetchall()[0][0]
        assert n_series == len({(r[0], r[1], r[5]) for r in rows}) < len(rows) / 100
        recompute_windows(con)
        assert _windows(con) == windows
        # The upgraded series are found again: the same files store nothing new.
        again = load_metrics(con, inputs)
        assert (again.samples_new, again.duplicates) == (0, len(rows))
        assert con.execute("SELECT count(*) FROM metric_series").fetchall()[0][0] == n_series
        assert _windows(con) == windows
    finally:
        con.close()


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
