"""Every metric input form, read from real files into a real database.

Prometheus API JSON (matrix, vector, lists, JSONL), text exposition 0.0.4 and
OpenMetrics (with and without sample timestamps), CSV (JSON and k=v labels), the
colon/underscore spellings, NaN values, duplicates and idempotent re-loads.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from datetime import datetime, timezone

import pytest

from analyzer.core.errors import AnalyzerError, ExitCode, InputError
from analyzer.jobs.metrics import load_metrics
from analyzer.core.durations import parse_duration
from analyzer.ingestion.metric_store import parse_model_map
from analyzer.io.metric_formats import (
    CSV,
    EXPOSITION,
    OPENMETRICS,
    parse_kv_labels,
    read_metrics_file,
    scrape_target_from_name,
    scrape_time_from_name,
)
from tests.support.fresh_db import fresh_connection

T0 = 1_800_000_000  # 2027-01-15T08:00:00Z
GLM = {"model_name": "glm-5", "engine": "0"}


def epoch_of(row_ts: datetime) -> float:
    return row_ts.replace(tzinfo=timezone.utc).timestamp()


@pytest.fixture
def con(tmp_path):
    c = fresh_connection(tmp_path / "analyzer.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    yield c
    c.close()


def stored(con, metric=None):
    """(metric, pod, model_name, epoch seconds, value) rows, sorted."""
    rows = con.execute(
        "SELECT metric, pod, model_name, ts, value FROM metric_samples "
        "WHERE $m IS NULL OR metric = $m ORDER BY metric, pod, ts", {"m": metric}
    ).fetchall()
    return [(m, p, mn, epoch_of(ts), v) for m, p, mn, ts, v in rows]


def matrix(name, labels, values):
    return {"metric": {"__name__": name, **labels}, "values": [[t, str(v)] for t, v in values]}


def api(result, kind="matrix"):
    return {"status": "success", "data": {"resultType": kind, "result": result}}


# ---------------------------------------------------------------------------
# Prometheus API JSON


def test_query_range_matrix_file(tmp_path, con):
    doc = api([
        matrix("vllm:generation_tokens_total", {**GLM, "pod": "glm-5-a", "instance": "10.0.0.5:8000", "job": "vllm"},
               [(T0, 100), (T0 + 15, 250.0), (T0 + 30.5, 400)]),
        matrix("up", {"instance": "10.0.0.5:8000", "job": "vllm"}, [(T0, 1), (T0 + 15, 1)]),
        matrix("vllm:num_requests_running", {**GLM, "job": "vllm"}, [(T0, 2)]),
    ])
    path = tmp_path / "range.json"
    path.write_text(json.dumps(doc))

    report = load_metrics(con, [str(path)])
    assert report.samples_new == 6
    assert stored(con) == [
        ("up", "10.0.0.5:8000", None, T0, 1.0),  # no pod label: instance identifies the pod
        ("up", "10.0.0.5:8000", None, T0 + 15, 1.0),
        ("vllm:generation_tokens_total", "glm-5-a", "glm-5", T0, 100.0),  # pod label wins
        ("vllm:generation_tokens_total", "glm-5-a", "glm-5", T0 + 15, 250.0),
        ("vllm:generation_tokens_total", "glm-5-a", "glm-5", T0 + 30.5, 400.0),
        ("vllm:num_requests_running", "vllm", "glm-5", T0, 2.0),  # only job: job identifies it
    ]
    labels = con.execute("SELECT labels FROM metric_samples WHERE metric = 'up' LIMIT 1").fetchall()[0][0]
    assert json.loads(labels) == {"instance": "10.0.0.5:8000", "job": "vllm"}


def test_instant_query_vector_file(tmp_path, con):
    doc = api([
        {"metric": {"__name__": "vllm:num_requests_waiting", **GLM, "pod": "p1"}, "value": [T0 + 0.25, "3"]},
        {"metric": {"__name__": "up", "pod": "p1"}, "value": [T0 + 0.25, "0"]},
    ], kind="vector")
    path = tmp_path / "instant.json"
    path.write_text(json.dumps(doc))
    load_metrics(con, [str(path)])
    assert stored(con) == [("up", "p1", None, T0 + 0.25, 0.0),
                           ("vllm:num_requests_waiting", "p1", "glm-5", T0 + 0.25, 3.0)]


def test_json_list_and_jsonl_of_responses(tmp_path, con):
    one = api([matrix("up", {"pod": "p1"}, [(T0, 1)])])
    two = api([matrix("up", {"pod": "p1"}, [(T0 + 15, 1)])])
    (tmp_path / "list.json").write_text(json.dumps([one, one["data"]]))  # a response and a bare `data`
    (tmp_path / "lines.jsonl").write_text(json.dumps(one) + "\n" + json.dumps(two) + "\n")
    report = load_metrics(con, [str(tmp_path / "list.json"), str(tmp_path / "lines.jsonl")])
    assert [r[3] for r in stored(con)] == [T0, T0 + 15]
    assert report.samples_read == 4 and report.duplicates == 2


def test_error_response_and_unsupported_result_type_are_clear(tmp_path, con):
    bad = tmp_path / "error.json"
    bad.write_text(json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}))
    with pytest.raises(InputError, match="error.json.*bad_data: parse error"):
        load_metrics(con, [str(bad)])
    scalar = tmp_path / "scalar.json"
    scalar.write_text(json.dumps(api([T0, "1"], kind="scalar")))
    with pytest.raises(InputError, match="unsupported Prometheus resultType 'scalar'"):
        load_metrics(con, [str(scalar)])


def test_series_without_a_name_are_skipped(tmp_path, con):
    doc = api([{"metric": {"pod": "p1", "model_name": "glm-5"}, "values": [[T0, "12.5"]]}])  # rate(...)
    path = tmp_path / "rate.json"
    path.write_text(json.dumps(doc))
    report = load_metrics(con, [str(path)])
    assert report.other_metrics == 1 and stored(con) == []


def test_api_json_times_and_values_as_prometheus_may_spell_them(tmp_path, con):
    """Times as numbers or text, to the microsecond as Python rounds; values as ``float()`` reads them
    (infinities and NaN are read, and dropped when stored); an empty vector answer beside them."""
    times = [T0, T0 + 1, T0 + 2, T0 + 3, T0 + 4, T0 + 5.123456789, str(T0 + 6), 1.8e9 + 7]
    values = ["-Inf", "1e3", " 7", "-0", "0.1", "3", "1", "NaN"]
    path = tmp_path / "spellings.json"
    path.write_text(json.dumps([api([{"metric": {"__name__": "up", "pod": "d"}, "values": list(zip(times, values))}]),
                                api([], kind="vector")]))
    report = load_metrics(con, [str(path)])
    assert (report.samples_read, report.non_finite) == (8, 2)
    rows = con.execute("SELECT epoch_us(ts), value FROM metric_samples ORDER BY ts").fetchall()
    assert rows == [((T0 + 1) * 10**6, 1000.0), ((T0 + 2) * 10**6, 7.0), ((T0 + 3) * 10**6, -0.0),
                    ((T0 + 4) * 10**6, 0.1), (round((T0 + 5.123456789) * 10**6), 3.0), ((T0 + 6) * 10**6, 1.0)]


# ---------------------------------------------------------------------------
# Text exposition and OpenMetrics

VLLM_SCRAPE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="glm-5"} 2.0{ts}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="glm-5"} 0.0{ts}
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="glm-5"} 81234.0{ts}
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="glm-5"} 3.0{ts}
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="glm-5"} 5.0{ts}
vllm:time_to_first_token_seconds_count{engine="0",model_name="glm-5"} 5.0{ts}
vllm:time_to_first_token_seconds_sum{engine="0",model_name="glm-5"} 0.7{ts}
"""


def test_text_0_0_4_with_millisecond_timestamps(tmp_path, con):
    path = tmp_path / "scrape.prom"
    path.write_text(VLLM_SCRAPE.replace("{ts}", f" {T0 * 1000 + 250}"))
    read = read_metrics_file(path)
    assert read.form == EXPOSITION
    report = load_metrics(con, [str(path)])
    # Only the three series the rule reads; the histogram is counted and dropped.
    assert report.samples_new == 3 and report.other_metrics == 4
    assert {r[0] for r in stored(con)} == {
        "vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:generation_tokens_total"}
    assert {r[3] for r in stored(con)} == {T0 + 0.25}
    # A bare vLLM /metrics names no target: the file name stands in for the pod.
    assert {r[1] for r in stored(con)} == {"scrape"}


def test_text_without_timestamps_uses_the_time_in_the_file_name(tmp_path, con):
    d = tmp_path / "glm-5-7d9f"
    d.mkdir()
    first = d / "20270115T080000Z.prom"
    second = d / "2027-01-15T08-00-15Z.prom"
    first.write_text(VLLM_SCRAPE.replace("{ts}", ""))
    second.write_text(VLLM_SCRAPE.replace("{ts}", "").replace("81234.0", "81300.0"))
    report = load_metrics(con, [str(d)])  # a directory: every file in it
    assert any("time in file name" in w for w in report.warnings)
    assert [r[1:] for r in stored(con, "vllm:generation_tokens_total")] == [
        ("glm-5-7d9f", "glm-5", T0, 81234.0),  # stamp-only names: the directory is the pod
        ("glm-5-7d9f", "glm-5", T0 + 15, 81300.0),
    ]


def test_text_without_any_time_uses_the_file_mtime(tmp_path, con):
    path = tmp_path / "metrics.txt"
    path.write_text(VLLM_SCRAPE.replace("{ts}", ""))
    os.utime(path, (T0 + 42, T0 + 42))
    report = load_metrics(con, [str(path)])
    assert any("file modification time" in w for w in report.warnings)
    assert {r[3] for r in stored(con)} == {T0 + 42}


def test_scrape_with_target_labels_keeps_them(tmp_path, con):
    path = tmp_path / "federate-20270115T080000Z.txt"
    path.write_text('vllm:generation_tokens_total{instance="10.0.0.9:8000",job="vllm",model_name="glm-5"} 5\n'
                    'up{instance="10.0.0.9:8000",job="vllm"} 1\n')
    load_metrics(con, [str(path)])
    assert {r[1] for r in stored(con)} == {"10.0.0.9:8000"}


OPENMETRICS_SCRAPE = """\
# TYPE vllm:generation_tokens counter
# HELP vllm:generation_tokens Number of generation tokens processed.
vllm:generation_tokens_total{engine="0",model_name="glm-5",pod="glm-5-a"} 500.0{ts}
vllm:generation_tokens_created{engine="0",model_name="glm-5",pod="glm-5-a"} 1.79e+09{ts}
# TYPE vllm:num_requests_running gauge
# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="glm-5",pod="glm-5-a"} 1.0{ts}
# EOF
"""


def test_openmetrics_with_second_timestamps(tmp_path, con):
    path = tmp_path / "scrape.om"
    path.write_text(OPENMETRICS_SCRAPE.replace("{ts}", f" {T0}.125"))
    assert read_metrics_file(path).form == OPENMETRICS
    report = load_metrics(con, [str(path)])
    assert report.other_metrics == 1  # _created
    assert stored(con) == [
        ("vllm:generation_tokens_total", "glm-5-a", "glm-5", T0 + 0.125, 500.0),
        ("vllm:num_requests_running", "glm-5-a", "glm-5", T0 + 0.125, 1.0),
    ]


def test_openmetrics_without_timestamps(tmp_path, con):
    path = tmp_path / f"glm-5-a_{T0 + 60}.om"  # epoch seconds in the name
    path.write_text(OPENMETRICS_SCRAPE.replace("{ts}", ""))
    load_metrics(con, [str(path)])
    assert {r[3] for r in stored(con)} == {T0 + 60}


def test_invalid_exposition_names_the_file(tmp_path, con):
    path = tmp_path / "broken.om"
    path.write_text('vllm:generation_tokens_total{model_name="glm-5" 1\n# EOF\n')
    with pytest.raises(InputError, match="broken.om: not a valid openmetrics"):
        load_metrics(con, [str(path)])


# ---------------------------------------------------------------------------
# CSV


def test_csv_with_json_and_kv_labels_and_every_time_form(tmp_path, con):
    path = tmp_path / "export.csv"
    path.write_text(
        "timestamp, metric, labels, value\n"
        f'2027-01-15T08:00:00Z,vllm:generation_tokens_total,"{{""model_name"": ""glm-5"", ""pod"": ""p1""}}",100\n'
        f"{T0 + 15},vllm:generation_tokens_total,model_name=glm-5,pod=p1,250\n"  # unquoted k=v with commas
        f'{(T0 + 30) * 1000},vllm:generation_tokens_total,"model_name=""glm-5"",pod=""p1""",400\n'  # ms, quoted values
        f'2027-01-15 08:00:45+00:00,up,{{"pod": "p1"}},1\n'  # unquoted JSON with a comma-free body
        f'2027-01-15T08:01:00.500Z,up,"{{""pod"": ""p1"", ""job"": ""vllm""}}",1\n'
        "\n"
    )
    assert read_metrics_file(path).form == CSV
    load_metrics(con, [str(path)])
    assert stored(con) == [
        ("up", "p1", None, T0 + 45, 1.0),
        ("up", "p1", None, T0 + 60.5, 1.0),
        ("vllm:generation_tokens_total", "p1", "glm-5", T0, 100.0),
        ("vllm:generation_tokens_total", "p1", "glm-5", T0 + 15, 250.0),
        ("vllm:generation_tokens_total", "p1", "glm-5", T0 + 30, 400.0),
    ]


def test_csv_problems_are_clear(tmp_path, con):
    no_header = tmp_path / "a.csv"
    no_header.write_text("time,name,value\n1,up,1\n")
    with pytest.raises(InputError, match="a.csv: not a valid csv metrics file: CSV header lacks timestamp, metric, labels"):
        load_metrics(con, [str(no_header)])
    bad_time = tmp_path / "b.csv"
    bad_time.write_text("timestamp,metric,labels,value\nyesterday,up,pod=p1,1\n")
    with pytest.raises(InputError, match="b.csv.*line 2"):
        load_metrics(con, [str(bad_time)])
    assert stored(con) == []


def test_kv_labels():
    assert parse_kv_labels('a=b, c="d,e", f="g\\"h"') == {"a": "b", "c": "d,e", "f": 'g"h'}
    assert parse_kv_labels('{model_name="glm-5"}') == {"model_name": "glm-5"}
    with pytest.raises(ValueError):
        parse_kv_labels("no pairs here")


# ---------------------------------------------------------------------------
# Names, NaN, duplicates, idempotency


def test_colon_and_underscore_spellings_are_one_series(tmp_path, con):
    (tmp_path / "colon.csv").write_text(
        "timestamp,metric,labels,value\n"
        f"{T0},vllm:generation_tokens_total,pod=p1,model_name=glm-5,100\n"
        f"{T0 + 15},vllm:num_requests_running,pod=p1,model_name=glm-5,1\n")
    (tmp_path / "underscore.json").write_text(json.dumps(api([
        matrix("vllm_generation_tokens_total", {"pod": "p1", "model_name": "glm-5"}, [(T0, 100), (T0 + 15, 180)]),
        matrix("vllm_num_requests_running", {"pod": "p1", "model_name": "glm-5"}, [(T0 + 15, 1)]),
        matrix("vllm_num_requests_waiting", {"pod": "p1", "model_name": "glm-5"}, [(T0 + 15, 4)]),
    ])))
    report = load_metrics(con, [str(tmp_path / "colon.csv"), str(tmp_path / "underscore.json")])
    assert report.duplicates == 2  # the same points under the other spelling
    assert [(r[0], r[3], r[4]) for r in stored(con)] == [
        ("vllm:generation_tokens_total", T0, 100.0),
        ("vllm:generation_tokens_total", T0 + 15, 180.0),
        ("vllm:num_requests_running", T0 + 15, 1.0),
        ("vllm:num_requests_waiting", T0 + 15, 4.0),
    ]


def test_nan_values_are_ignored_in_every_form(tmp_path, con):
    d = tmp_path / "metrics"
    d.mkdir()
    (d / "a.json").write_text(json.dumps(api([
        matrix("vllm:generation_tokens_total", {"pod": "p1", "model_name": "glm-5"},
               [(T0, 1), (T0 + 15, "NaN"), (T0 + 30, "+Inf"), (T0 + 45, 2)])])))
    (d / "b.csv").write_text(f"timestamp,metric,labels,value\n{T0 + 60},up,pod=p1,NaN\n")
    (d / "c.prom").write_text(f'up{{pod="p1"}} NaN {(T0 + 75) * 1000}\nup{{pod="p1"}} 1 {(T0 + 90) * 1000}\n')
    report = load_metrics(con, [str(d)])
    assert report.non_finite == 4
    assert all(not math.isnan(r[4]) for r in stored(con))
    assert [(r[0], r[3]) for r in stored(con)] == [
        ("up", T0 + 90), ("vllm:generation_tokens_total", T0), ("vllm:generation_tokens_total", T0 + 45)]


def test_loading_the_same_file_twice_adds_nothing(tmp_path, con):
    path = tmp_path / "range.json"
    series = matrix("vllm:generation_tokens_total", {"pod": "p1", "model_name": "glm-5"},
                    [(T0 + 15 * i, 100 * i) for i in range(20)])
    path.write_text(json.dumps(api([series, series])))  # duplicates inside the file too
    first = load_metrics(con, [str(path)])
    assert (first.samples_new, first.duplicates) == (20, 20)
    second = load_metrics(con, [str(path), str(path)])  # the path given twice is read once
    assert (second.samples_new, second.duplicates) == (0, 40)
    assert con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0] == 20


def test_a_point_with_two_values_keeps_the_first_loaded(tmp_path, con):
    (tmp_path / "1.csv").write_text(f"timestamp,metric,labels,value\n{T0},up,pod=p1,1\n{T0},up,pod=p1,0\n")
    (tmp_path / "2.csv").write_text(f"timestamp,metric,labels,value\n{T0},up,pod=p1,0\n")
    report = load_metrics(con, [str(tmp_path / "1.csv"), str(tmp_path / "2.csv")])
    assert report.duplicates == 2
    assert stored(con) == [("up", "p1", None, T0, 1.0)]


@pytest.mark.parametrize("packed", [True, False])
def test_the_first_point_wins_with_the_packed_order_or_without(tmp_path, packed, monkeypatch):
    """store_stage orders a point's copies by one HUGEINT when the numbers fit, else by
    (input, position, row): the same copy wins either way, within a file and across files."""
    import analyzer.ingestion.metric_stage as stage

    if not packed:
        monkeypatch.setattr(stage, "_ROWS", 0)  # no stage row id fits: the (src, ord, rowid) struct
    (tmp_path / "a.csv").write_text(f"timestamp,metric,labels,value\n{T0},up,pod=p1,3\n{T0},up,pod=p1,4\n"
                                    f"{T0 + 15},up,pod=p1,5\n")
    (tmp_path / "b.json").write_text(json.dumps([api([matrix("up", {"pod": "p1"}, [(T0 + 15, 6), (T0 + 30, 7)])]),
                                                 api([matrix("up", {"pod": "p1"}, [(T0 + 30, 8), (T0 + 45, 9)])])]))
    (tmp_path / "c.jsonl").write_text(json.dumps(api([matrix("up", {"pod": "p1"}, [(T0 + 45, 10), (T0 + 60, 11)])])))
    con = fresh_connection(tmp_path / f"{packed}.duckdb")
    try:
        report = load_metrics(con, [str(tmp_path / n) for n in ("a.csv", "b.json", "c.jsonl")])
        assert report.duplicates == 4
        assert [r[4] for r in stored(con)] == [3.0, 5.0, 7.0, 9.0, 11.0]
    finally:
        con.close()


def test_a_bad_file_leaves_the_database_as_it_was(tmp_path, con):
    good = tmp_path / "a.csv"
    good.write_text(f"timestamp,metric,labels,value\n{T0},up,pod=p1,1\n")
    bad = tmp_path / "b.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="b.json"):
        load_metrics(con, [str(good), str(bad)])
    assert stored(con) == []


def test_gzip_and_globs_and_missing_paths(tmp_path, con):
    with gzip.open(tmp_path / "x.csv.gz", "wt") as f:
        f.write(f"timestamp,metric,labels,value\n{T0},up,pod=p1,1\n")
    load_metrics(con, [str(tmp_path / "*.gz")])
    assert len(stored(con)) == 1
    with pytest.raises(InputError, match="no such metrics file"):
        load_metrics(con, [str(tmp_path / "nope.json")])


def test_model_map_is_stored(tmp_path, con):
    load_metrics(con, [], model_map={"glm-5": "zai-org/GLM-5"})
    load_metrics(con, [], model_map={"glm-5": "zai-org/GLM-5-FP8", "glm-4.6": "glm46"})
    assert con.execute("SELECT * FROM model_map ORDER BY 1").fetchall() == [
        ("glm-4.6", "glm46"), ("glm-5", "zai-org/GLM-5-FP8")]


# ---------------------------------------------------------------------------
# Helpers


def test_parse_duration():
    assert parse_duration("5m") == 300
    assert parse_duration("90s") == 90
    assert parse_duration("1h30m") == 5400
    assert parse_duration("500ms") == 0.5
    assert parse_duration("300") == 300
    assert parse_duration(2.5) == 2.5
    for bad in ("", "5 minutes", "-5m", "0s", "5mm", "m5", "nan"):
        with pytest.raises(AnalyzerError) as err:
            parse_duration(bad, "--wedge-window")
        assert err.value.exit_code == ExitCode.USAGE and "--wedge-window" in str(err.value)


def test_file_name_stamps_and_targets(tmp_path):
    assert scrape_time_from_name(tmp_path / "x-20270115T080000Z.prom") == T0 * 10**6
    assert scrape_time_from_name(tmp_path / "x_2027-01-15_08-00-00.txt") == T0 * 10**6
    assert scrape_time_from_name(tmp_path / f"x-{T0}000.txt") == T0 * 10**6  # epoch ms
    assert scrape_time_from_name(tmp_path / "glm-5.prom") is None
    assert scrape_target_from_name(tmp_path / "glm-5-abc_20270115T080000Z.prom.gz") == "glm-5-abc"
    assert scrape_target_from_name(tmp_path / "pod-b" / "20270115T080000Z.prom") == "pod-b"
    assert scrape_target_from_name(tmp_path / "glm-4.6-a_2027-01-15T08:00:00.250Z.txt") == "glm-4.6-a"


def test_parse_model_map():
    assert parse_model_map(["glm-5=zai-org/GLM-5", " glm-4.6 = glm46 "]) == {
        "glm-5": "zai-org/GLM-5", "glm-4.6": "glm46"}
    assert parse_model_map(None) == {}
    for bad in ("glm-5", "=x", "glm-5="):
        with pytest.raises(AnalyzerError) as err:
            parse_model_map([bad])
        # the library speaks of its parameter; `analyze --model-map` names the option (tests/unit/cli/test_commands.py)
        assert err.value.exit_code == ExitCode.USAGE and err.value.param == "model_map"
        assert "LOG_MODEL=METRIC_MODEL_NAME" in str(err.value) and "--" not in str(err.value)
