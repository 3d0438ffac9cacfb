"""The wedge and down rules, from metric files through ``pod_windows`` to the ``turns`` view.

Scenarios are written as CSV exports at a 15 s scrape interval with a 2 minute
wedge window (8 scrapes), so each phase below is a handful of rows:

- busy:     the counter rises, requests running
- idle:     the counter is flat, nothing running or waiting
- wedged:   the counter is flat, requests running and waiting
- stuck:    the counter is flat and the gauges say 0 (a dead engine; only logs show demand)
- restart:  the counter starts again from a small value (a reset), then rises
- restart-stuck: the counter resets to 0 and stays there under demand
- gap:      no samples at all

Which test shows what: idle periods (``test_idle_*``, ``test_the_last_request_*``,
``test_demand_served_*``), restarts (``test_a_counter_reset_*``,
``test_wedged_again_right_after_a_restart_*``), gaps (``test_a_gap_*``,
``test_idle_night_with_a_scrape_gap_*``), duplicates, out-of-order samples, NaN,
spellings, stale series and ``up == 0`` (their own tests), the ``turns`` view
(``test_a_tool_history_500_*``, ``test_a_failure_inside_a_down_window_*``), and
the sample week against its ground truth.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta

import pytest

from analyzer.ingestion.logs import ingest
from analyzer.jobs.metrics import load_metrics
from analyzer.classification.windows import recompute_windows, wedged_episodes
from analyzer.classification.turns import refresh_turns
from tests.support.records import (
    NAKED_500,
    NAKED_500_HEADERS,
    T0,
    TOOL_RESULT,
    request,
    response_error,
    write_jsonl,
)
from tests.support.metric_phases import EPOCH0, W, phases, t_of, windows, write_csv
from tests.support.repo import REPO
from tests.support.fresh_db import fresh_connection
from tests.support.sample_s3_week import sample_s3_week
from analyzer.store.db import connect


@pytest.fixture
def con(tmp_path):
    c = fresh_connection(tmp_path / "analyzer.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    yield c
    c.close()


def rows_for(timeline, *, pod="p1", model="glm-5", up=True, gauges=True, counter_name="vllm:generation_tokens_total",
             running_name="vllm:num_requests_running"):
    """CSV rows of one pod's scrapes (JSON labels for the counter, k=v for the rest)."""
    rows = []
    labels = {"pod": pod, "model_name": model, "engine": "0"}
    for t, v, running in timeline:
        if v is None:
            continue
        rows.append([t, counter_name, json.dumps(labels), v])
        if gauges:
            rows.append([t, running_name, f"pod={pod},model_name={model},engine=0", running])
            rows.append([t, "vllm:num_requests_waiting", f"pod={pod},model_name={model},engine=0",
                         1 if running > 2 else 0])
        if up:
            rows.append([t, "up", f"pod={pod}", 1])
    return rows


def load(con, tmp_path, rows, name="m.csv", **kw):
    return load_metrics(con, [write_csv(tmp_path / name, rows)], wedge_window=kw.pop("wedge_window", W), **kw)


# ---------------------------------------------------------------------------
# The wedge rule


def test_wedge_spans_the_flat_period_from_last_increase_to_next(tmp_path, con):
    # Busy until scrape 9, wedged mid-traffic for 5 minutes, busy again from scrape 30.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("wedged", 20), ("busy", 10))))
    assert windows(con) == [("p1", "glm-5", "wedged", t_of(9), t_of(30))]
    detail = con.execute("SELECT detail FROM pod_windows").fetchall()[0][0]
    assert "requests running/waiting" in detail and "next increase" in detail


def test_idle_night_with_flat_counters_is_not_a_wedge(tmp_path, con):
    # Eight hours of flat counters with nothing running, then traffic served at once.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("idle", 8 * 240), ("busy", 10))))
    assert windows(con) == []


def test_the_last_request_finishing_before_an_idle_night_is_not_a_wedge(tmp_path, con):
    # The first scrape after the last increase still shows a request running (it is
    # finishing), then nothing for hours; in the morning a request is served at once.
    timeline = phases(("busy", 10), ("idle", 8 * 240), ("busy", 10))
    timeline[10] = (timeline[10][0], timeline[10][1], 1)  # the blip
    timeline[-11] = (timeline[-11][0], timeline[-11][1], 1)  # morning demand, served by the next scrape
    load(con, tmp_path, rows_for(timeline))
    assert windows(con) == []


def test_idle_then_wedged_window_starts_at_the_demand(tmp_path, con):
    # The counter is flat from scrape 9 to the restart at 50, but only 30.. had demand.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("idle", 20), ("wedged", 20), ("restart", 10))))
    assert windows(con) == [("p1", "glm-5", "wedged", t_of(30), t_of(50))]
    assert "counter reset" in con.execute("SELECT detail FROM pod_windows").fetchall()[0][0]


def test_demand_served_within_the_window_after_idle_is_not_a_wedge(tmp_path, con):
    # A request arrives after an idle spell; a slow prefill keeps the counter flat for 90 s.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("idle", 20), ("wedged", 6), ("busy", 10))))
    assert windows(con) == []


def test_a_counter_reset_is_neither_negative_throughput_nor_a_flat_period(tmp_path, con):
    # Restarts in the middle of traffic: the counter drops twice and keeps rising.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("restart", 10), ("restart", 10), ("busy", 5))))
    assert windows(con) == []
    # A pod wedged until its restart: the window ends at the reset, not before or after.
    con2 = fresh_connection(tmp_path / "b.duckdb")
    load(con2, tmp_path, rows_for(phases(("busy", 10), ("wedged", 20), ("restart", 10))), name="b.csv")
    assert windows(con2) == [("p1", "glm-5", "wedged", t_of(9), t_of(30))]
    con2.close()


def test_wedged_again_right_after_a_restart_is_one_merged_window(tmp_path, con):
    # Wedged, restarted at scrape 30 (counter back to 0), and still generating nothing under demand.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("wedged", 20), ("restart-stuck", 20), ("busy", 5))))
    assert windows(con) == [("p1", "glm-5", "wedged", t_of(9), t_of(50))]


def test_a_gap_longer_than_the_window_invents_no_wedge(tmp_path, con):
    # Demand and an equal counter on both sides of a 5-minute hole; each side is 1 minute.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("wedged", 4), ("gap", 20), ("wedged", 4), ("busy", 5))))
    assert windows(con) == []


def test_a_gap_longer_than_the_window_hides_no_wedge(tmp_path, con):
    # Wedged for 3 minutes, a 5-minute hole, wedged for 3 more: both sides are found,
    # the first ends at the last sample before the hole, the second starts after it.
    load(con, tmp_path, rows_for(phases(("busy", 10), ("wedged", 12), ("gap", 20), ("wedged", 12), ("busy", 5))))
    assert windows(con) == [
        ("p1", "glm-5", "wedged", t_of(9), t_of(21)),
        ("p1", "glm-5", "wedged", t_of(42), t_of(54)),
    ]


def test_a_gap_shorter_than_the_window_is_ordinary_jitter(tmp_path, con):
    load(con, tmp_path, rows_for(phases(("busy", 10), ("wedged", 8), ("gap", 3), ("wedged", 9), ("busy", 5))))
    assert windows(con) == [("p1", "glm-5", "wedged", t_of(9), t_of(30))]


def test_idle_night_with_a_scrape_gap_is_not_a_wedge(tmp_path, con):
    load(con, tmp_path, rows_for(phases(("busy", 10), ("idle", 100), ("gap", 100), ("idle", 100), ("busy", 5))))
    assert windows(con) == []


BASE = phases(("busy", 10), ("idle", 20), ("wedged", 20), ("restart", 10))
BASE_WINDOWS = [("p1", "glm-5", "wedged", t_of(30), t_of(50))]


def test_duplicate_samples_change_nothing(tmp_path, con):
    rows = rows_for(BASE)
    report = load(con, tmp_path, rows + rows[::3], name="dups.csv")  # duplicates inside the file
    assert report.duplicates == len(rows[::3])
    again = load(con, tmp_path, rows, name="copy.csv")  # the same points from another export
    assert again.samples_new == 0 and again.duplicates == len(rows)
    assert windows(con) == BASE_WINDOWS


def test_out_of_order_samples_change_nothing(tmp_path, con):
    rows = rows_for(BASE)
    random.Random(4).shuffle(rows)
    load(con, tmp_path, rows)
    assert windows(con) == BASE_WINDOWS


def test_nan_values_neither_break_nor_make_a_flat_run(tmp_path, con):
    rows = rows_for(BASE)
    nan_rows = [[t, "vllm:generation_tokens_total", json.dumps({"pod": "p1", "model_name": "glm-5", "engine": "0"}),
                 "NaN"] for t, _, _ in BASE[::2]]
    report = load(con, tmp_path, rows + nan_rows)
    assert report.non_finite == len(nan_rows)
    assert windows(con) == BASE_WINDOWS


def test_colon_and_underscore_spellings_make_one_series(tmp_path, con):
    rows = rows_for(BASE[:30]) + rows_for(BASE[30:], counter_name="vllm_generation_tokens_total",
                                          running_name="vllm_num_requests_running")
    load(con, tmp_path, rows)
    assert windows(con) == BASE_WINDOWS
    assert con.execute("SELECT DISTINCT metric FROM metric_samples ORDER BY 1").fetchall() == [
        ("up",), ("vllm:generation_tokens_total",), ("vllm:num_requests_running",), ("vllm:num_requests_waiting",)]


def test_recompute_replaces_the_windows(tmp_path, con):
    load(con, tmp_path, rows_for(BASE))
    result = recompute_windows(con, "10m")  # longer than the 5-minute wedge
    assert result.counts() == {"wedged": 0, "down": 0, "sleeping": 0} and windows(con) == []
    recompute_windows(con, W)
    assert windows(con) == BASE_WINDOWS


# ---------------------------------------------------------------------------
# Demand from the logs


def _requests(tmp_path, minutes, model="glm-5", name="logs.jsonl"):
    recs = [request(f"{i:08x}", T0 + timedelta(minutes=m), model=model) for i, m in enumerate(minutes)]
    return write_jsonl(tmp_path / name, recs)


def test_logged_requests_are_demand_when_the_pod_has_no_gauges(tmp_path, con):
    # Scrapes 10..29 (minutes 2.5 to 7.5) are flat and no running/waiting gauges are exported.
    timeline = phases(("busy", 10), ("stuck", 20), ("busy", 5))
    ingest(con, [str(_requests(tmp_path, [3, 3.5, 4, 4.5, 5]))])
    load(con, tmp_path, rows_for(timeline, gauges=False))
    assert windows(con) == [("p1", "glm-5", "wedged", EPOCH0 + 180, t_of(30))]
    assert "logged requests" in con.execute("SELECT detail FROM pod_windows").fetchall()[0][0]


def test_the_pods_own_gauges_at_zero_beat_logged_requests(tmp_path, con):
    # The same flat stretch and the same logged requests, but the pod's gauges say nothing
    # ran or waited on it: the model's traffic went elsewhere, this pod was idle.
    ingest(con, [str(_requests(tmp_path, [3, 3.5, 4, 4.5, 5]))])
    load(con, tmp_path, rows_for(phases(("busy", 10), ("stuck", 20), ("busy", 5))))
    assert windows(con) == []


def test_no_logged_requests_and_zero_gauges_is_idle(tmp_path, con):
    load(con, tmp_path, rows_for(phases(("busy", 10), ("stuck", 20), ("busy", 5))))
    assert windows(con) == []


def test_model_map_ties_log_models_to_metric_model_names(tmp_path, con):
    timeline = phases(("busy", 10), ("stuck", 20), ("busy", 5))
    ingest(con, [str(_requests(tmp_path, [3, 4, 5], model="glm-5"))])
    load(con, tmp_path, rows_for(timeline, model="zai-org/GLM-5", gauges=False))
    assert windows(con) == []  # "glm-5" requests are not demand for "zai-org/GLM-5" ...
    load(con, tmp_path, [], name="empty.csv", model_map={"glm-5": "zai-org/GLM-5"})
    assert windows(con) == [("p1", "zai-org/GLM-5", "wedged", EPOCH0 + 180, t_of(30))]  # ... until mapped


def test_logged_requests_a_sibling_pod_served_are_not_demand(tmp_path, con):
    # p1 is an idle standby (flat, no gauges); p2 serves the model's traffic.
    ingest(con, [str(_requests(tmp_path, [3, 3.5, 4, 4.5, 5]))])
    rows = rows_for(phases(("busy", 10), ("stuck", 20), ("busy", 5)), pod="p1", gauges=False)
    rows += rows_for(phases(("busy", 35)), pod="p2", gauges=False)
    load(con, tmp_path, rows)
    assert windows(con) == []


# ---------------------------------------------------------------------------
# Down: up == 0 and stale series


def test_up_zero_is_down_and_breaks_a_flat_run(tmp_path, con):
    timeline = phases(("busy", 10), ("wedged", 5))
    rows = rows_for(timeline)
    rows += [[t_of(i), "up", "pod=p1", 0] for i in range(15, 25)]  # scrapes fail: no vLLM series
    rows += rows_for([(t_of(i), v, r) for i, (_, v, r) in enumerate(phases(("wedged", 5)), start=25)])
    rows += rows_for([(t_of(i), 1000.0 + 250 * (i - 29), 2) for i in range(30, 35)])
    load(con, tmp_path, rows)
    # Down from the first failed scrape to the first good one. No wedge across the outage:
    # 2.5 minutes without vLLM samples is a gap, and each flat side alone is 1 minute.
    assert windows(con) == [("p1", "glm-5", "down", t_of(15), t_of(25))]
    assert con.execute("SELECT detail FROM pod_windows").fetchall()[0][0] == "up == 0"


def test_a_stale_series_is_down_while_a_sibling_pod_reports(tmp_path, con):
    # p2 stops reporting at scrape 19 (its target vanished); p1 goes on to scrape 59.
    rows = rows_for(phases(("busy", 60)), pod="p1") + rows_for(phases(("busy", 20)), pod="p2")
    load(con, tmp_path, rows)
    assert windows(con) == [("p2", "glm-5", "down", t_of(19), t_of(59))]
    assert "target missing" in con.execute("SELECT detail FROM pod_windows").fetchall()[0][0]


def test_a_stale_series_ends_when_a_replacement_appears(tmp_path, con):
    rows = rows_for(phases(("busy", 60)), pod="p1") + rows_for(phases(("busy", 20)), pod="p2")
    rows += rows_for([(t_of(i), 100.0 * i, 1) for i in range(40, 60)], pod="p3")  # p2's replacement
    load(con, tmp_path, rows)
    assert windows(con) == [("p2", "glm-5", "down", t_of(19), t_of(40))]


def test_a_stale_series_of_a_single_pod_model_is_unknown_not_down(tmp_path, con):
    # The only pod's series stop (the export ends, or the scraper died), then come back.
    load(con, tmp_path, rows_for(phases(("busy", 20), ("gap", 40), ("busy", 20))))
    assert windows(con) == []


def test_up_without_a_model_is_reported_not_guessed(tmp_path, con):
    report = load(con, tmp_path, [[t_of(i), "up", "pod=node-exporter", 0] for i in range(5)])
    assert windows(con) == []
    assert any("node-exporter" in w for w in report.warnings)


def test_coarse_samples_warn_that_no_wedge_can_be_seen(tmp_path, con):
    rows = [r for r in rows_for(phases(("busy", 10), ("wedged", 40))) if (int(r[0]) - EPOCH0) % 300 == 0]
    report = load(con, tmp_path, rows)
    assert windows(con) == []
    assert any("longer than the wedge window" in w for w in report.warnings)


# ---------------------------------------------------------------------------
# Through the real turns view


def _tool_500(rid: str, minute: float, model: str = "glm-5") -> list[dict]:
    ts = T0 + timedelta(minutes=minute)
    return [request(rid, ts, model=model, tool_results=TOOL_RESULT),
            response_error(rid, ts + timedelta(seconds=3), NAKED_500, headers=NAKED_500_HEADERS, model=model)]


def _classes(con):
    refresh_turns(con)
    return dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall())


def test_a_tool_history_500_inside_a_wedge_is_wedged_pod(tmp_path, con):
    # Wedged from scrape 30 (minute 7.5) to the restart at 50 (minute 12.5).
    records = _tool_500("000000a1", 9) + _tool_500("000000a2", 13.5) + _tool_500("000000a3", 1)
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", records))])
    assert set(_classes(con).values()) == {"tool-history-5xx"}  # no metrics yet: nothing to tell

    load(con, tmp_path, rows_for(BASE))
    classes = _classes(con)
    assert classes == {"000000a1": "wedged-pod", "000000a2": "tool-history-5xx", "000000a3": "tool-history-5xx"}
    triggers = dict(con.execute("SELECT request_id, ladder_trigger FROM turns").fetchall())
    assert triggers["000000a1"] is None  # the ladder cannot fix a wedged pod
    assert triggers["000000a2"] is not None

    [episode] = wedged_episodes(con)
    assert episode == {
        "pod": "p1", "model_name": "glm-5", "kind": "wedged",
        "start": "2026-11-16T14:07:30Z", "end": "2026-11-16T14:12:30Z", "duration_s": 300.0,
        "failed_turns": 1, "detail": episode["detail"], "corroboration": episode["corroboration"],
        "alert_at": "2026-11-16T14:09:30Z",  # the start plus the wedge window (W = 2m): the live alert fires then
        "inferred": False,  # the pod's own gauges show the demand
    }
    # The gauges were exported (running 3, waiting 1 throughout); KV cache and the success counter were not.
    assert episode["corroboration"]["text"] == ("1/2 agree: running stuck at 3; waiting did not grow 1→1 "
                                                "(no samples for: KV cache full, success counter flat)")


def test_a_failure_inside_a_down_window_is_pod_down_through_the_model_map(tmp_path, con):
    records = _tool_500("000000b1", 4.5, model="glm-5") + _tool_500("000000b2", 1, model="glm-5")
    ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", records))])
    rows = rows_for(phases(("busy", 10)), model="zai-org/GLM-5")
    rows += [[t_of(i), "up", "pod=p1", 0] for i in range(10, 30)]
    rows += rows_for([(t_of(i), 40.0 * i, 1) for i in range(30, 40)], model="zai-org/GLM-5")
    load(con, tmp_path, rows, model_map={"glm-5": "zai-org/GLM-5"})
    assert _classes(con) == {"000000b1": "pod-down", "000000b2": "tool-history-5xx"}
    [episode] = wedged_episodes(con)
    assert (episode["kind"], episode["duration_s"], episode["failed_turns"]) == ("down", 300.0, 1)


def test_a_failed_scrape_inside_a_wedge_is_down_and_the_wedge_goes_on(tmp_path, con):
    # Wedged from scrape 9; at scrape 18 the scrape fails (up 0, no vLLM series), then wedged again.
    timeline = [p for p in phases(("busy", 10), ("wedged", 17), ("busy", 5)) if p[0] != t_of(18)]
    rows = [r for r in rows_for(timeline)] + [[t_of(18), "up", "pod=p1", 0]]
    load(con, tmp_path, rows)
    assert windows(con) == [
        ("p1", "glm-5", "down", t_of(18), t_of(19)),
        ("p1", "glm-5", "wedged", t_of(9), t_of(18)),
        ("p1", "glm-5", "wedged", t_of(19), t_of(27)),
    ]


def test_the_engines_of_a_pod_are_one_unit(tmp_path, con):
    # Engine 0 flat under demand while engine 1 of the same pod keeps generating: the pod serves.
    rows = rows_for(phases(("busy", 10), ("wedged", 20), ("busy", 5)))
    rows += [[t, "vllm:generation_tokens_total", json.dumps({"pod": "p1", "model_name": "glm-5", "engine": "1"}),
              100 * i] for i, (t, _, _) in enumerate(phases(("busy", 35)))]
    load(con, tmp_path, rows)
    assert windows(con) == []


# ---------------------------------------------------------------------------
# The bundled sample week against its ground truth

SAMPLE = REPO / "sample_logs"


def test_the_sample_week_finds_its_episodes_and_none_of_its_look_alikes(tmp_path):
    if not (SAMPLE / "metrics").is_dir() or not (SAMPLE / "ground_truth.json").is_file():
        pytest.skip("sample_logs/metrics is not in this checkout")
    truth = json.loads((SAMPLE / "ground_truth.json").read_text())
    # The S3 chunks ingested, the metrics loaded with the default 5-minute window, then classified:
    # built once per process and shared with test_queries (tests/support/sample_s3_week.py).
    db, report = sample_s3_week(tmp_path / "sample.duckdb")
    assert report.warnings == []
    con = connect(db)
    try:
        found = con.execute(
            "SELECT pod, model_name, kind, epoch(start_ts), epoch(end_ts) FROM pod_windows ORDER BY start_ts"
        ).fetchall()

        def epoch(iso: str) -> float:
            return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()

        # Each episode once, its bounds within one 30 s step of the truth (the export's resolution).
        assert len(found) == len(truth["episodes"])
        for ep, (pod, model, kind, start, end) in zip(truth["episodes"], found):
            assert (pod, model, kind) == (ep["pod"], ep["model_name"], ep["kind"])
            assert abs(start - epoch(ep["start"])) <= 30 and abs(end - epoch(ep["end"])) <= 30, (ep, start, end)
        # The quiet night, the restart between two scrapes and the scrape gap are not windows.
        for non in truth["non_episodes"]:
            lo, hi = epoch(non["start"]), epoch(non["end"])
            assert not [w for w in found if w[3] < hi and w[4] > lo], non

        refresh_turns(con)  # current already (classified after the metrics): nothing to redo
        classes = dict(con.execute(
            "SELECT incident_class, count(*) FROM turns WHERE model = 'glm-5' GROUP BY ALL").fetchall())
        expected = truth["class_counts"]["glm-5"]
        for cls in ("wedged-pod", "pod-down", "tool-history-5xx"):
            assert classes.get(cls, 0) == expected[cls], cls
    finally:
        con.close()


def test_episodes_filter_like_the_summary(tmp_path, con):
    load(con, tmp_path, rows_for(BASE), model_map={"glm-5-chat": "glm-5"})
    refresh_turns(con)
    assert len(wedged_episodes(con)) == 1
    assert len(wedged_episodes(con, models=["glm-5-chat"])) == 1  # a log model name, mapped
    assert wedged_episodes(con, models=["qwen3"]) == []
    assert len(wedged_episodes(con, since=T0.replace(tzinfo=None) + timedelta(minutes=12))) == 1  # overlaps
    assert wedged_episodes(con, since=T0.replace(tzinfo=None) + timedelta(minutes=13)) == []
    assert wedged_episodes(con, until=T0.replace(tzinfo=None) + timedelta(minutes=7)) == []


def test_a_single_series_timeline_is_the_merged_one():
    """One engine's counter takes a shortcut in the rule: it must see what merging series sees.

    A unit of two identical series goes through the merge of instants; one series
    (strictly increasing instants) through the shortcut; a series that repeats an
    instant falls back to the merge. All three agree on every change and gap.
    """
    from analyzer.classification.windows import _GAP, _INC, _RESET, _single_timeline, _timeline

    rng = random.Random(7)
    seen = set()
    for _ in range(500):
        t, series = 0, []
        for _ in range(rng.randint(0, 40)):
            t += rng.choice([1, 5, 15, 16, 40, 301])
            series.append((t, float(rng.choice([0, 3, 3, 4, 9]))))
        w_us = rng.choice([15, 30, 300])
        times, changes = _timeline([series], w_us)
        assert _single_timeline(series, w_us) == (times, changes)  # the shortcut, itself
        assert (times, changes) == _timeline([series, list(series)], w_us)
        if series:
            repeated = series + [series[-1]]
            assert _single_timeline(repeated, w_us) is None  # not taken: the merge decides
            assert _timeline([repeated], w_us) == _timeline([repeated, list(repeated)], w_us)
        seen.update(changes)
    assert {_GAP, _INC, _RESET} <= seen  # the draws reached every kind of change
