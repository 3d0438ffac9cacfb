"""Cluster realities in metric files: namespaces, label spellings, sidecars, sleep, siblings, one count per failure.

CSV exports at 15 s scrapes with a 2 minute wedge window, as in
``tests/unit/classification/test_metrics_windows.py`` (the phase helpers both use are
tests/support/metric_phases.py's); and the streaming reader of big text scrapes checked against prometheus-client on the
same file.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pytest

from analyzer.ingestion.logs import ingest
from analyzer.jobs.metrics import load_metrics
from analyzer.classification.windows import wedged_episodes
from analyzer.io.metric_formats import read_metrics_file
from analyzer.ingestion.metric_readers import stage_text_stream
from analyzer.io.metric_samples import labels_json, pod_identity, target_of
from analyzer.ingestion.metric_stage import STAGE, Series, close_stage, open_stage
from analyzer.classification.turns import refresh_turns
from tests.support.records import NAKED_500, NAKED_500_HEADERS, TOOL_RESULT, request, response_error, write_jsonl
from tests.support.fresh_db import fresh_connection
from tests.support.metric_phases import W, phases, t_of, windows, write_csv


@pytest.fixture
def con(tmp_path):
    c = fresh_connection(tmp_path / "analyzer.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    yield c
    c.close()


def series_rows(timeline, labels: dict, *, up_labels: dict | None = None, gauges=True, extra=None):
    """CSV rows of one target: counter, gauges (running; waiting 1 when running > 2) and `up`."""
    rows = []
    for t, v, running in timeline:
        if v is None:
            continue
        rows.append([t, "vllm:generation_tokens_total", json.dumps(labels), v])
        if gauges:
            rows.append([t, "vllm:num_requests_running", json.dumps(labels), running])
            rows.append([t, "vllm:num_requests_waiting", json.dumps(labels), 1 if running > 2 else 0])
        if up_labels is not None:
            rows.append([t, "up", json.dumps(up_labels), 1])
        for name, value in (extra or {}).items():
            rows.append([t, name, json.dumps(labels), value(t, v, running)])
    return rows


def load(con, tmp_path, rows, name="m.csv"):
    return load_metrics(con, [write_csv(tmp_path / name, rows)], wedge_window=W)


def tool_500s(minutes_of_scrapes: list[int], model="glm-5"):
    recs = []
    for i, k in enumerate(minutes_of_scrapes):
        ts = datetime.fromtimestamp(t_of(k), tz=timezone.utc)
        rid = f"{i:08x}"
        recs += [request(rid, ts, session=f"s-{i}", model=model, tool_results=TOOL_RESULT),
                 response_error(rid, ts + timedelta(seconds=3), NAKED_500, headers=NAKED_500_HEADERS, model=model,
                                session=f"s-{i}")]
    return recs


# ---------------------------------------------------------------------------
# Identity


def test_pod_identity_reads_namespace_and_every_spelling():
    assert pod_identity({"pod": "glm-5-0", "namespace": "llm"}) == "llm/glm-5-0"
    assert pod_identity({"kubernetes_pod_name": "glm-5-0", "kubernetes_namespace": "llm"}) == "llm/glm-5-0"
    # honorLabels off: the series' own pod/namespace were renamed exported_*; they name the vLLM pod.
    assert pod_identity({"pod": "collector-0", "namespace": "mon", "exported_pod": "glm-5-0",
                         "exported_namespace": "llm"}) == "llm/glm-5-0"
    assert pod_identity({"instance": "10.0.0.5:8000", "job": "vllm"}) == "10.0.0.5:8000"
    assert pod_identity({}, "from-file-name") == "from-file-name"
    assert target_of({"instance": "a:1", "job": "vllm", "exported_instance": "b:2"}) == ("b:2", "vllm")


def test_two_namespaces_with_same_named_pods_are_two_pods(tmp_path, con):
    # llm/glm-5-0 wedges; llm-b/glm-5-0 of the same model keeps generating. One pod name, two pods.
    a = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    b = {**a, "namespace": "llm-b"}
    rows = series_rows(phases(("busy", 10), ("wedged", 20), ("busy", 10)), a, up_labels={"pod": "glm-5-0", "namespace": "llm"})
    rows += series_rows(phases(("busy", 40)), b, up_labels={"pod": "glm-5-0", "namespace": "llm-b"})
    load(con, tmp_path, rows)
    assert windows(con) == [("llm/glm-5-0", "glm-5", "wedged", t_of(9), t_of(30))]
    assert {p for (p,) in con.execute("SELECT DISTINCT pod FROM metric_samples").fetchall()} == {
        "llm/glm-5-0", "llm-b/glm-5-0"}


def test_the_other_namespaces_up_zero_does_not_down_this_pod(tmp_path, con):
    a = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    rows = series_rows(phases(("busy", 30)), a, up_labels={"pod": "glm-5-0", "namespace": "llm"})
    rows += series_rows(phases(("busy", 30)), {**a, "namespace": "llm-b"})
    rows += [[t_of(i), "up", json.dumps({"pod": "glm-5-0", "namespace": "llm-b"}), 0 if 10 <= i < 20 else 1]
             for i in range(30)]
    load(con, tmp_path, rows)
    assert windows(con) == [("llm-b/glm-5-0", "glm-5", "down", t_of(10), t_of(20))]


def test_exported_labels_tie_a_federated_series_to_its_pod(tmp_path, con):
    # Scraped through a collector with honorLabels off: pod/namespace are the collector's.
    labels = {"pod": "collector-0", "namespace": "monitoring", "exported_pod": "glm-5-0",
              "exported_namespace": "llm", "model_name": "glm-5", "engine": "0"}
    load(con, tmp_path, series_rows(phases(("busy", 10), ("wedged", 20), ("busy", 10)), labels))
    assert windows(con) == [("llm/glm-5-0", "glm-5", "wedged", t_of(9), t_of(30))]


def test_a_sidecars_up_zero_is_not_the_pod_down(tmp_path, con):
    # One pod, two targets: vLLM (10.0.0.5:8000, job vllm) and an exporter sidecar (10.0.0.5:9100).
    target = {"pod": "glm-5-0", "namespace": "llm", "instance": "10.0.0.5:8000", "job": "vllm"}
    labels = {**target, "model_name": "glm-5", "engine": "0"}
    sidecar = {"pod": "glm-5-0", "namespace": "llm", "instance": "10.0.0.5:9100", "job": "node-exporter"}
    rows = series_rows(phases(("busy", 30)), labels, up_labels=target)
    rows += [[t_of(i), "up", json.dumps(sidecar), 0 if 5 <= i < 25 else 1] for i in range(30)]
    report = load(con, tmp_path, rows)
    assert windows(con) == []
    assert any("10.0.0.5:9100 (node-exporter)" in w and "sidecar" in w for w in report.warnings), report.warnings
    # The vLLM target's own up == 0 still is.
    rows += [[t_of(i), "up", json.dumps(target), 0] for i in range(30, 40)]
    rows += series_rows([(t_of(i), 99999.0 + i, 1) for i in range(40, 45)], labels, up_labels=target)
    load(con, tmp_path, rows, name="m2.csv")
    assert windows(con) == [("llm/glm-5-0", "glm-5", "down", t_of(30), t_of(40))]


# ---------------------------------------------------------------------------
# Demand per pod, failures counted once


def test_the_idle_sibling_of_a_wedged_pod_is_not_wedged_and_each_failure_counts_once(tmp_path, con):
    # glm-5-0 takes every request and wedges; glm-5-1's counter is flat too, but its own
    # gauges say nothing ran or waited on it. Logged requests are the model's, not its.
    w = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    rows = series_rows(phases(("busy", 10), ("wedged", 20), ("busy", 10)), w)
    rows += series_rows(phases(("busy", 10), ("idle", 20), ("busy", 10)), {**w, "pod": "glm-5-1"})
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", tool_500s([12, 15, 18, 21, 24])))])
    load(con, tmp_path, rows)
    assert windows(con) == [("llm/glm-5-0", "glm-5", "wedged", t_of(9), t_of(30))]
    refresh_turns(con)
    classes = dict(con.execute("SELECT incident_class, count(*) FROM turns GROUP BY ALL").fetchall())
    episodes = wedged_episodes(con)
    assert classes == {"wedged-pod": 5}
    assert [(e["pod"], e["failed_turns"]) for e in episodes] == [("llm/glm-5-0", 5)]


def test_two_overlapping_windows_of_one_model_share_their_failures_not_double_them(tmp_path, con):
    # Both pods wedged at once (both gauges busy): the logs cannot say which pod served a
    # failure, so each goes to the earlier window, and the table adds up to the classes.
    w = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    rows = series_rows(phases(("busy", 10), ("wedged", 20), ("busy", 10)), w)
    rows += series_rows(phases(("busy", 14), ("wedged", 16), ("busy", 10)), {**w, "pod": "glm-5-1"})
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", tool_500s([11, 16, 20, 25])))])
    load(con, tmp_path, rows)
    refresh_turns(con)
    episodes = wedged_episodes(con)
    assert [(e["pod"], e["failed_turns"]) for e in episodes] == [("llm/glm-5-0", 4), ("llm/glm-5-1", 0)]
    total = con.execute("SELECT count(*) FROM turns WHERE incident_class = 'wedged-pod'").fetchall()[0][0]
    assert sum(e["failed_turns"] for e in episodes) == total == 4


# ---------------------------------------------------------------------------
# Frozen gauges: a wedge whose running/waiting gauges read 0 (vllm-project/vllm PR
# #46811's incident: the hang came before the gauge update)


def timeouts(minutes_of_scrapes: list[int], model="glm-5"):
    """Requests that hung until the proxy's read timeout (60 s here), logged when it fired."""
    recs = []
    for i, k in enumerate(minutes_of_scrapes):
        ts = datetime.fromtimestamp(t_of(k), tz=timezone.utc)
        rid = f"f{i:07x}"
        recs += [request(rid, ts, session=f"s-f{i}", model=model),
                 response_error(rid, ts + timedelta(seconds=60), "Request timed out after 60000ms",
                                latency_ms=60_000, model=model, session=f"s-f{i}")]
    return recs


def test_a_wedge_whose_gauges_read_zero_is_inferred_from_the_failing_requests(tmp_path, con):
    labels = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    rows = series_rows(phases(("busy", 10), ("stuck", 20), ("busy", 10)), labels)
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", tool_500s([12, 15, 18]) + timeouts([21, 24])))])
    load(con, tmp_path, rows)
    found = con.execute("SELECT pod, kind, epoch(start_ts)::BIGINT, epoch(end_ts)::BIGINT, inferred, detail "
                        "FROM pod_windows").fetchall()
    assert len(found) == 1
    pod, kind, start, end, inferred, detail = found[0]
    # From the first failing request (it arrived 60 ms before its 500 was logged) to the next increase.
    assert (pod, kind, inferred, end) == ("llm/glm-5-0", "wedged", True, t_of(30))
    assert t_of(12) < start <= t_of(12) + 3
    assert "inferred from the logs" in detail and "gauges read 0" in detail
    refresh_turns(con)
    rows = con.execute("SELECT incident_class, evidence, count(*) FROM turns GROUP BY ALL").fetchall()
    assert sorted(rows) == [("wedged-pod", "inferred", 5)]
    assert [(e["pod"], e["failed_turns"]) for e in wedged_episodes(con)] == [("llm/glm-5-0", 5)]


def test_gauges_at_zero_without_failing_requests_are_a_quiet_pod(tmp_path, con):
    labels = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    load(con, tmp_path, series_rows(phases(("busy", 10), ("stuck", 20), ("busy", 10)), labels))
    assert windows(con) == []
    # Refused requests (4xx) are no evidence that the pod hung.
    recs = []
    for i, k in enumerate([12, 15, 18, 21]):
        ts = datetime.fromtimestamp(t_of(k), tz=timezone.utc)
        recs += [request(f"e{i:07x}", ts, session="s-e"),
                 response_error(f"e{i:07x}", ts + timedelta(seconds=1), 'Provider returned 400: {"error": "bad"}',
                                session="s-e")]
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", recs))])
    load(con, tmp_path, series_rows(phases(("busy", 10), ("stuck", 20), ("busy", 10)), labels), name="m2.csv")
    assert windows(con) == []


def test_failures_while_a_sibling_generates_are_not_pinned_on_a_quiet_pod(tmp_path, con):
    # glm-5-1 serves the model all along; glm-5-0 sits idle with its gauges at 0. The
    # failures may be anyone's: no pod is suspected (the limit the docs state).
    a = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    rows = series_rows(phases(("busy", 10), ("stuck", 20), ("busy", 10)), a)
    rows += series_rows(phases(("busy", 40)), {**a, "pod": "glm-5-1"})
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", tool_500s([12, 15, 18, 21, 24])))])
    load(con, tmp_path, rows)
    assert windows(con) == []
    refresh_turns(con)
    assert dict(con.execute("SELECT incident_class, count(*) FROM turns GROUP BY ALL").fetchall()) == {
        "tool-history-5xx": 5}


# ---------------------------------------------------------------------------
# Sleep


def _sleep_rows(labels, asleep_between: tuple[int, int], n: int):
    rows = []
    for i in range(n):
        asleep = asleep_between[0] <= i < asleep_between[1]
        for state, v in (("awake", 0 if asleep else 1), ("weights_offloaded", 1 if asleep else 0), ("discard_all", 0)):
            rows.append([t_of(i), "vllm:engine_sleep_state", json.dumps({**labels, "sleep_state": state}), v])
    return rows


def test_a_sleeping_engine_is_not_wedged_and_its_sleep_is_shown_apart(tmp_path, con):
    # No gauges exported, logged requests all through: without the sleep state this is a wedge.
    q = {"pod": "qwen3-0", "namespace": "llm", "model_name": "qwen3", "engine": "0"}
    rows = series_rows(phases(("busy", 10), ("stuck", 20), ("busy", 10)), q, gauges=False)
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", tool_500s([11, 14, 17, 20, 23, 26], model="qwen3")))])
    load(con, tmp_path, rows, name="awake.csv")
    assert [w[2] for w in windows(con)] == ["wedged"]  # what the rule says without the sleep state
    report = load(con, tmp_path, rows + _sleep_rows(q, (10, 30), 40), name="asleep.csv")
    assert windows(con) == [("llm/qwen3-0", "qwen3", "sleeping", t_of(10), t_of(30))]
    assert report.windows == {"wedged": 0, "down": 0, "sleeping": 1}
    refresh_turns(con)
    assert "wedged-pod" not in {c for (c,) in con.execute("SELECT incident_class FROM turns").fetchall()}
    [episode] = wedged_episodes(con)
    assert (episode["kind"], episode["failed_turns"], episode["duration_s"]) == ("sleeping", 0, 20 * 15.0)


def test_a_wedge_after_waking_up_is_still_a_wedge(tmp_path, con):
    q = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    rows = series_rows(phases(("busy", 10), ("idle", 10), ("wedged", 20), ("busy", 5)), q)
    load(con, tmp_path, rows + _sleep_rows(q, (10, 20), 45))
    assert [(w[2], w[3], w[4]) for w in windows(con)] == [
        ("sleeping", t_of(10), t_of(20)), ("wedged", t_of(20), t_of(40))]


# ---------------------------------------------------------------------------
# Corroboration


def test_corroboration_says_what_each_signal_showed(tmp_path, con):
    w = {"pod": "glm-5-0", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    extra = {"vllm:kv_cache_usage_perc": lambda t, v, r: 1.0 if r == 3 else 0.3,
             "vllm:request_success_total": lambda t, v, r: v / 100}  # moves with the counter only
    load(con, tmp_path, series_rows(phases(("busy", 10), ("wedged", 20), ("busy", 10)), w, extra=extra))
    [e] = wedged_episodes(con)
    assert e["corroboration"]["text"] == (
        "3/4 agree: running stuck at 3; waiting did not grow 1→1; KV cache full 100%; success counter flat")


# ---------------------------------------------------------------------------
# The streaming reader of big text scrapes


SCRAPES = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="glm-5"}} {running} {ms}
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="glm-5"}} {tokens} {ms}
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="glm-5"}} 3.0 {ms}
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="glm-5"}} 5.0 {ms}
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{{engine="0",model_name="glm-5",sleep_state="awake"}} 1 {ms}
vllm:engine_sleep_state{{engine="0",model_name="glm-5",sleep_state="discard_all"}} 0 {ms}
up{{job="vllm",note="a }} brace, \\"quoted\\""}} {up} {ms}
vllm:kv_cache_usage_perc{{engine="0",model_name="glm-5"}} NaN {ms}
"""


def test_the_streamed_text_reader_reads_what_prometheus_client_reads(tmp_path):
    path = tmp_path / "glm-5-scrape.prom"
    t0 = 1_800_000_000_000
    path.write_text("".join(SCRAPES.format(ms=t0 + 15_000 * i, running=i % 3, tokens=100.0 * i, up=1)
                            for i in range(40)))
    reference = read_metrics_file(path).samples  # prometheus-client
    scratch = open_stage()
    try:
        series = Series()
        form, notes = stage_text_stream(scratch, path, series)
        rows = scratch.execute(f"SELECT metric, label_key, ts_us, value FROM {STAGE} ORDER BY ord").fetchall()
        keys = dict(scratch.execute("SELECT label_key, sid FROM _metric_labels").fetchall())
    finally:
        close_stage(scratch)
    kept = [s for s in reference if s.metric in {r[0] for r in rows}]
    assert form == "text-0.0.4" and notes == []
    assert len(rows) == len(kept) == 40 * 6
    by_sid = {sid: (labels, pod) for sid, labels, pod, *_ in series.rows}
    for (metric, key, ts_us, value), ref in zip(rows, kept):
        labels, pod = by_sid[keys[key]]
        assert (metric, ts_us) == (ref.metric, ref.ts_us)
        assert labels == labels_json(ref.labels) and pod == pod_identity(ref.labels, "glm-5-scrape")
        assert value == ref.value or (math.isnan(value) and math.isnan(ref.value))


@pytest.mark.parametrize("gz", [False, True])
def test_a_streamed_scrape_loads_like_a_small_one(tmp_path, monkeypatch, con, gz):
    import gzip

    import analyzer.ingestion.metric_readers as readers

    path = tmp_path / ("big.prom.gz" if gz else "big.prom")
    text = "".join(SCRAPES.format(ms=1_800_000_000_000 + 15_000 * i, running=1, tokens=10.0 * i, up=1)
                   for i in range(20))
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    small = load_metrics(con, [str(path)])
    stored = con.execute("SELECT metric, pod, labels::VARCHAR, ts, value FROM metric_samples ORDER BY ALL").fetchall()
    con.execute("DELETE FROM metric_points")  # metric_samples is a view over series and points
    monkeypatch.setattr(readers, "STREAM_BYTES", 1)  # every scrape streams
    big = load_metrics(con, [str(path)])
    assert con.execute("SELECT metric, pod, labels::VARCHAR, ts, value FROM metric_samples ORDER BY ALL").fetchall() \
        == stored
    assert (big.samples_new, big.non_finite) == (small.samples_new, small.non_finite) == (100, 20)


def test_a_malformed_line_of_a_kept_metric_in_a_streamed_scrape_names_the_line(tmp_path, monkeypatch, con):
    import analyzer.ingestion.metric_readers as readers
    from analyzer.core.errors import InputError

    path = tmp_path / "bad.prom"
    path.write_text('# TYPE up gauge\nup{job="vllm"} 1 1800000000000\nup{job="vllm" 1 1800000015000\n')
    monkeypatch.setattr(readers, "STREAM_BYTES", 1)
    with pytest.raises(InputError, match=r"bad.prom: not a valid text-0.0.4 metrics file: line 3"):
        load_metrics(con, [str(path)])
    assert con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0] == 0


def test_a_streamed_scrape_duckdb_cannot_read_as_lines_is_an_input_error(tmp_path, monkeypatch, con):
    """A line over DuckDB's 1 MiB line limit: the file is named and nothing is stored (not a raw DuckDB error)."""
    import analyzer.ingestion.metric_readers as readers
    from analyzer.core.errors import InputError

    path = tmp_path / "long.prom"
    path.write_text('# TYPE up gauge\nup{job="vllm"} 1 1800000000000\n# HELP up ' + "x" * 1_100_000 + "\n")
    monkeypatch.setattr(readers, "STREAM_BYTES", 1)
    with pytest.raises(InputError, match=r"long.prom: not a valid text metrics file") as raised:
        load_metrics(con, [str(path)])
    assert "\n" not in str(raised.value) and "xxxx" not in str(raised.value)  # one line, not the file's line
    assert con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0] == 0


def test_csv_and_json_exports_are_never_read_by_the_python_parser(tmp_path, monkeypatch, con):
    """Well-formed exports go through their own readers (DuckDB's for CSV, the series walk for
    API JSON, a bare ``data`` in a list too); the Python parser only takes what DuckDB refuses."""
    import analyzer.ingestion.metric_readers as readers

    def referee(path):
        raise AssertionError(f"fell back to the Python parser for {path}")

    labels = {"pod": "p1", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    csv_path = write_csv(tmp_path / "m.csv", series_rows(phases(("busy", 10), ("wedged", 20), ("busy", 10)), labels))
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "vllm_num_requests_waiting", **labels, "pod": "p2"},
         "values": [[1_800_000_000 + 15 * i, str(i)] for i in range(10)] + [[1_800_000_150.5, "NaN"]]}]}}
    (tmp_path / "r.json").write_text(json.dumps([doc, {"resultType": "vector", "result": [
        {"metric": {"__name__": "up", "pod": "p2", "namespace": "llm"}, "value": [1_800_000_000.25, "1"]}]}]))
    monkeypatch.setattr(readers, "read_metrics_file", referee)
    report = load_metrics(con, [csv_path, str(tmp_path / "r.json")], wedge_window=W)
    assert report.samples_new == 40 * 3 + 10 + 1 and report.non_finite == 1
    assert windows(con) == [("llm/p1", "glm-5", "wedged", t_of(9), t_of(30))]
    got = con.execute("SELECT metric, pod, epoch_us(ts), value FROM metric_samples WHERE pod = 'llm/p2' "
                      "ORDER BY metric, ts LIMIT 2").fetchall()
    assert got == [("up", "llm/p2", 1_800_000_000_250_000, 1.0),
                   ("vllm:num_requests_waiting", "llm/p2", 1_800_000_000_000_000, 0.0)]
