"""Every file of queries/ runs: on a fresh database, on a small populated one, on the sample week.

The populated database is tests/support/week.py's, shared with the other tests of
the SQL layer.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from analyzer.store.db import connect
from tests.support.week import V13, V14, build_week_db
from tests.support.repo import REPO
from tests.support.fresh_db import fresh_connection, fresh_db
from tests.support.sample_s3_week import sample_s3_week
from tests.support.questions import QUERIES, RUNNABLE, run

ROOT = REPO
SAMPLE = ROOT / "sample_logs"
QUESTIONS = sorted(n for n, q in QUERIES.items() if q.kind == "question")

# ---------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    con = fresh_connection(tmp_path_factory.mktemp("fresh") / "fresh.duckdb")  # copied (tests/support/fresh_db.py)
    yield con
    con.close()


@pytest.fixture(scope="module")
def week_db(tmp_path_factory) -> Path:
    """The populated week's database file, built once (a test that changes it works on a copy)."""
    return build_week_db(fresh_db(tmp_path_factory.mktemp("week") / "week.duckdb"))  # starts as a copied empty one


@pytest.fixture(scope="module")
def week(week_db):
    con = connect(week_db, read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def sample_week(tmp_path_factory):
    """The bundled sample week (S3 chunks and metrics), when it exists: ingested, loaded and classified
    once per process (tests/support/sample_s3_week.py, shared with test_metrics_windows), copied here."""
    db, _report = sample_s3_week(tmp_path_factory.mktemp("sample") / "sample.duckdb")
    con = connect(db)
    yield con
    con.close()


# ---------------------------------------------------------------------------
# Every file runs


def test_every_question_declares_since_until_model():
    for name in QUESTIONS:
        q = QUERIES[name]
        assert {"since", "until", "model"} <= set(q.params), f"{q.path.name}: params {q.params}"
        for p in q.params:
            assert f"${p}" in q.sql, f"{q.path.name} declares {p} but never uses ${p}"


@pytest.mark.parametrize("name", RUNNABLE)
def test_runs_on_a_fresh_database(fresh, name):
    assert run(fresh, name) == []


@pytest.mark.parametrize("name", RUNNABLE)
def test_runs_on_the_populated_week(week, name):
    everything = run(week, name)
    if QUERIES[name].kind != "question":
        return
    narrowed = run(week, name, since="2026-11-17", until="2026-11-18T00:00:00Z", model="glm%")
    # The filters hold: no qwen3 (the week's other model) and no day outside the range.
    cells = [v for row in narrowed for v in row.values()]
    assert "qwen3" not in cells
    assert not any(str(v).startswith(("2026-11-16", "2026-11-18")) for v in cells
                   if isinstance(v, str) or hasattr(v, "isoformat")), narrowed
    if not everything:
        assert not narrowed  # a filter never adds rows a question did not have


@pytest.mark.parametrize("name", RUNNABLE)
def test_runs_on_the_sample_week(sample_week, name):
    rows = run(sample_week, name)
    if name in ("classes_by_day", "failures_by_day", "failures_by_client", "class_rates", "error_texts",
                "latency_by_class", "dead_sessions", "turns", "sessions"):
        assert rows, f"{name} found nothing in the sample week"


def test_the_sizing_questions_with_no_parameter_answer_the_summarys_figures(sample_week):
    """`analyze sql ladder_before_after` (and the other questions behind the sizing), asked
    with no parameter, is the summary's sizing: the same GLM scope, the same figures."""
    from analyzer.outputs.summary import build_summary

    sizing = build_summary(sample_week, with_oncall=False, refresh=False)["sizing"]
    rows = run(sample_week, "ladder_before_after")
    ba = sizing["before_after"]
    assert ba and rows, "the sample week has sessions of both eras"
    assert rows[0]["tool_sessions_without"] == ba["tool_sessions_without"]
    assert rows[0]["tool_sessions_with"] == ba["tool_sessions_with"]
    assert [(r["lost_class"], r["lost_without"], r["lost_with"]) for r in rows] == \
        [(c["lost_class"], c["lost_without"], c["lost_with"]) for c in ba["classes"]]
    # every model in scope (`-p model=%`) is a different, larger answer: the default is GLM
    everyone = run(sample_week, "ladder_before_after", model="%")
    assert everyone[0]["tool_sessions_without"] > ba["tool_sessions_without"]


# ---------------------------------------------------------------------------
# The questions answer what they say


def test_classes_by_day_counts_every_turn_once(week):
    rows = run(week, "classes_by_day")
    total = week.execute("SELECT count(*) FROM turns").fetchall()[0][0]
    assert sum(r["turns"] for r in rows) == total
    day1_glm = [r for r in rows if str(r["day"]) == "2026-11-16" and r["model"] == "glm-5"]
    assert {r["incident_class"]: r["turns"] for r in day1_glm} == {
        "ok": 3, "tool-history-5xx": 2, "length-with-no-content": 1}
    assert sum(r["share"] for r in day1_glm) == pytest.approx(1.0, abs=1e-3)
    assert all(r["model_turns"] == 6 for r in day1_glm)


def test_failures_by_day_and_filters(week):
    rows = run(week, "failures_by_day")
    assert all(r["incident_class"] != "ok" for r in rows)
    day2 = {(r["model"], r["incident_class"]): r for r in rows if str(r["day"]) == "2026-11-17"}
    assert day2[("glm-5", "tool-history-5xx")]["failed_turns"] == 2
    assert day2[("glm-5", "tool-history-5xx")]["recovered_by_ladder"] == 1
    assert day2[("glm-5", "wedged-pod")]["failed_turns"] == 1
    assert day2[("qwen3", "unanswered")]["failed_turns"] == 1
    only = run(week, "failures_by_day", since="2026-11-17", until="2026-11-18", model="qwen%")
    assert [(r["model"], r["incident_class"]) for r in only] == [("qwen3", "unanswered")]
    # An offset is honoured: 2026-11-17T01:00+02:00 is 2026-11-16T23:00Z.
    assert run(week, "failures_by_day", since="2026-11-17T01:00:00+02:00", until="2026-11-17T00:00:00Z") == []


def test_dead_sessions_with_their_last_turns(week):
    rows = run(week, "dead_sessions")
    dead = {r["session_id"] for r in rows}
    assert {"s-b", "s-d", "s-e", "s-f", "s-g", "s-i", "s-j"} == dead
    s_b = [r for r in rows if r["session_id"] == "s-b"]
    assert [(r["from_end"], r["request_id"], r["incident_class"]) for r in s_b] == [
        (1, "b0000002", "tool-history-5xx"), (2, "b0000001", "ok")]
    one = run(week, "dead_sessions", last_turns=1)
    assert len(one) == len(dead) and all(r["from_end"] == 1 for r in one)


def test_length_no_content_carries_the_cap_and_reasoning(week):
    rows = {r["request_id"]: r for r in run(week, "length_no_content")}
    assert set(rows) == {"d0000001", "j0000001"}
    logged = rows["d0000001"]
    assert (logged["max_tokens"], logged["completion_tokens"], logged["share_of_cap"], logged["evidence"]) == (
        4096, 4096, 1.0, "logged")
    assert logged["reasoning_chars"] == len("Let me think " * 50)
    legacy = rows["j0000001"]
    assert legacy["max_tokens"] is None and legacy["share_of_cap"] is None and legacy["evidence"] == "inferred"


def test_wedged_failures_name_the_window(week):
    rows = run(week, "wedged_failures")
    assert [(r["request_id"], r["incident_class"], r["rule_class"], r["pods"]) for r in rows] == [
        ("f0000001", "wedged-pod", "timeout", "glm-5-0")]
    windows = run(week, "pod_window_failures")
    assert [(w["pod"], w["kind"], w["turns"], w["failed_turns"], w["main_failure_class"]) for w in windows] == [
        ("glm-5-0", "wedged", 1, 1, "wedged-pod")]


def test_ladder_recovery_by_rung(week):
    rows = {r["rung"]: r for r in run(week, "ladder_recovery", model="glm-5")}
    assert rows["tool_choice_none"]["ladders"] == 2
    assert (rows["tool_choice_none"]["reached"], rows["tool_choice_none"]["recovered"]) == (2, 0)
    assert (rows["drop_tools"]["reached"], rows["drop_tools"]["recovered"]) == (2, 1)
    assert rows["drop_tools"]["cumulative_rate"] == 0.5
    assert 0 < rows["drop_tools"]["cumulative_low"] < 0.5 < rows["drop_tools"]["cumulative_high"] < 1


def test_failures_by_client_version(week):
    rows = {(r["client"], r["model"]): r for r in run(week, "failures_by_client")}
    v13 = rows[(V13, "glm-5")]
    assert (v13["client_name"], v13["client_version"]) == ("geo-agent", "v3.13.1")
    assert v13["tool_history_5xx"] == 2 and v13["length_with_no_content"] == 2
    assert rows[(V14, "glm-5")]["ladder_recovered"] == 1
    assert rows[("(none)", "qwen3")]["failed_turns"] == 1


def test_class_rates_intervals(week):
    rows = {(r["model"], r["incident_class"]): r for r in run(week, "class_rates")}
    ok = rows[("qwen3", "ok")]
    assert ok["turns"] == 3 and ok["model_turns"] == 5
    assert ok["rate_low"] < ok["rate"] == 0.6 < ok["rate_high"]


# ---------------------------------------------------------------------------
# The scope and the focus models, defined once (queries/scope.sql)


def test_is_glm_is_one_rule_in_sql_and_python(fresh):
    from analyzer.core.focus import is_glm

    names = ["glm-5", "GLM-4.6", "zai-org/GLM-4.5-Air", "qwen3", "gpt-4o", "", None, "g-l-m"]
    got = fresh.execute("SELECT list(is_glm(m) ORDER BY i) FROM (SELECT unnest($n) AS m, "
                        "generate_subscripts($n, 1) AS i)", {"n": names}).fetchall()[0][0]
    assert got == [is_glm(n) for n in names] == [True, True, True, False, False, False, False, False]


def test_in_scope_bounds_and_models(fresh):
    t = "TIMESTAMP '2026-11-17 12:00:00'"

    def scope(since, until, pattern, models):
        return fresh.execute(f"SELECT in_scope({t}, 'glm-5', $s, $u, $p, $m)",
                             {"s": since, "u": until, "p": pattern, "m": models}).fetchall()[0][0]

    assert scope(None, None, None, None) is True
    assert scope("2026-11-17T12:00:00", "2026-11-17T12:00:01", None, None) is True  # since inclusive
    assert scope(None, "2026-11-17T12:00:00", None, None) is False  # until exclusive
    assert scope(None, None, "GLM%", None) is True and scope(None, None, "qwen%", None) is False
    assert scope(None, None, None, ["glm-5", "qwen3"]) is True and scope(None, None, None, ["qwen3"]) is False


def test_the_summary_and_the_report_run_their_questions_by_name(week):
    # Every question the library runs is one `analyze sql NAME` runs: a figure of
    # the summary is the row of its question.
    from datetime import datetime

    from analyzer.outputs.summary import build_summary

    s = build_summary(week, models=["glm-5"], since=datetime(2026, 11, 17))
    totals = run(week, "scope_totals", since="2026-11-17", models=["glm-5"])
    assert (s["turns"], s["sessions"], s["ladder_addressable"]) == (
        totals[0]["turns"], totals[0]["sessions"], totals[0]["ladder_addressable"])
    lost = run(week, "sizing_lost_sessions", since="2026-11-17", models=["glm-5"])
    assert s["sizing"]["sessions_lost"] == lost[0]["sessions_lost"]


def test_a_read_only_connection_to_an_older_database_gets_todays_macros(week_db, tmp_path):
    # A database written by an analyzer whose queries/ had no in_scope macro (and an
    # older SQL signature): opened read-only (analyze sql, the report), the questions
    # still run, on temporary macros of that connection; the file is not changed.
    db = Path(shutil.copy(week_db, tmp_path / "older.duckdb"))  # the populated week, made older below
    con = connect(db)
    con.execute("DROP MACRO in_scope")
    con.execute("UPDATE build_state SET signature = 'older' WHERE name = 'views'")
    con.close()
    ro = connect(db, read_only=True)
    try:
        assert run(ro, "scope_totals", model="qwen%")[0]["turns"] == 5
        assert ro.execute("SELECT signature FROM build_state WHERE name = 'views'").fetchall() == [("older",)]
    finally:
        ro.close()


def test_most_frequent_breaks_a_tie_the_same_way_every_time(fresh):
    """The questions' main class (error_groups, pod_window_failures, failures_by_dimension)
    comes from most_frequent: a tie goes to the smallest class, whatever order the rows came in."""
    rows = [("other-5xx",)] * 3 + [("tool-history-5xx",)] * 3 + [("ok",)]
    picks = set()
    for seed in range(20):
        picks.add(fresh.execute(
            "SELECT most_frequent(histogram(c)) FROM (SELECT c FROM (VALUES " + ", ".join("(?)" for _ in rows)
            + ") v(c) ORDER BY hash(c || ?::VARCHAR))", [r[0] for r in rows] + [seed]).fetchall()[0][0])
    assert picks == {"other-5xx"}
    assert fresh.execute("SELECT most_frequent(histogram(c)) FROM (VALUES ('a'), ('b'), ('b')) v(c)").fetchall() == [("b",)]
    # mode() names 'b' here, in either order (its tie follows its hash table)
    assert fresh.execute("SELECT most_frequent(histogram(c)) FROM (VALUES ('b'), ('a')) v(c)").fetchall() == [("a",)]
    assert fresh.execute("SELECT most_frequent(histogram(c) FILTER (WHERE c <> 'a')) FROM (VALUES ('a')) v(c)"
                         ).fetchall() == [(None,)]
