"""Every aggregate survives production counts: a million turns of one model, no INT32 arithmetic.

The database is generated in SQL, straight into the materialized ``turns`` table
the views, the summary and the report read (``records`` stays empty, so the
classification's signature still matches and nothing rebuilds ``turns`` from
records): 1,000,000 turns of ``glm-5`` in half a second steps, every 40th a
naked 500 with tool history that the ladder ran on (every other one recovered
at `drop_tools`), 1,000 pairs of 429s half a second apart, 1,000
timeouts with varying millisecond counts. A tenth of the turns carry a session
id. Before the Wilson macros computed in DOUBLE, ``analyze report`` and the
summary died here with ``Overflow in multiplication of INT32`` (from 23,171
turns of one model on).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from analyzer.store.db import connect
from analyzer.cli.terminal.summary import print_summary
from analyzer.outputs.sizing import wilson
from analyzer.outputs.summary import build_summary
from analyzer.classification.turns import SESSION_TABLES, is_current, refresh_turns
from analyzer.store.catalog import load_queries
from tests.support.cli import analyze
from tests.support.fresh_db import fresh_db

N = 1_000_000

_GENERATE = """
INSERT INTO turns BY NAME
SELECT printf('%08x', i) AS request_id,
       CASE WHEN (i // 10) % 10 = 0 THEN 's-' || (i // 10) END AS session_id,
       TIMESTAMP '2026-11-16' + to_microseconds(i * 500000) AS ts,
       TIMESTAMP '2026-11-16' + to_microseconds(i * 500000 + 200000) AS response_ts,
       'glm-5' AS model, 'nrp' AS provider, 'https://tpl.nrp-nautilus.io' AS origin,
       'geo-agent/v3.13.1' AS client,
       CASE WHEN i % 40 = 0 THEN 500 WHEN i % 1000 IN (1, 2) THEN 429 WHEN i % 1000 = 3 THEN NULL ELSE 200 END
           AS status,
       i % 40 <> 0 AND i % 1000 NOT IN (1, 2, 3) AS has_content,
       false AS has_tool_calls, i % 10 > 0 AS tool_history, false AS has_reasoning,
       CASE WHEN i % 1000 = 3 THEN 1200000 + i % 997 ELSE 100 + i % 1000 END AS latency_ms,
       9000 AS prompt_tokens, 50 AS completion_tokens,
       CASE WHEN i % 40 = 0 THEN 'Provider returned 500: '
            WHEN i % 1000 IN (1, 2) THEN 'Provider returned 429: {"error": {"message": "Rate limit exceeded", "code": 429}}'
            WHEN i % 1000 = 3 THEN 'Request timed out after ' || (1200000 + i % 997) || 'ms' END AS error,
       CASE WHEN i % 40 = 0 OR i % 1000 IN (1, 2) THEN 'http' WHEN i % 1000 = 3 THEN 'timeout' END AS error_kind,
       CASE WHEN i % 40 = 0 THEN 'tool-history-5xx' WHEN i % 1000 IN (1, 2) THEN 'rate-limited'
            WHEN i % 1000 = 3 THEN 'timeout' ELSE 'ok' END AS incident_class,
       'logged' AS evidence,
       CASE WHEN i % 40 = 0 THEN 'tool-history-5xx' WHEN i % 1000 IN (1, 2) THEN 'rate-limited'
            WHEN i % 1000 = 3 THEN 'timeout' ELSE 'ok' END AS rule_class,
       CASE WHEN i % 40 = 0 THEN 'tool-history-5xx' END AS ladder_trigger,
       -- every 5xx ran the ladder (as analyzer.online logs it): every other one recovered at drop_tools
       CASE WHEN i % 40 = 0 THEN json_object(
           'trigger', 'tool-history-5xx', 'outcome', CASE WHEN i % 80 = 0 THEN 'recovered' ELSE 'exhausted' END,
           'recovered_at', CASE WHEN i % 80 = 0 THEN 'drop_tools' END,
           'attempts', json_array(
               json_object('rung', 'original', 'status', 500, 'incident_class', 'tool-history-5xx', 'latency_ms', 50),
               json_object('rung', 'tool_choice_none', 'status', 500, 'incident_class', 'tool-history-5xx',
                           'latency_ms', 50),
               json_object('rung', 'drop_tools', 'status', CASE WHEN i % 80 = 0 THEN 200 ELSE 500 END,
                           'incident_class', CASE WHEN i % 80 = 0 THEN 'ok' ELSE 'tool-history-5xx' END,
                           'latency_ms', 900))) END AS ladder,
       CASE WHEN i % 40 = 0 THEN CASE WHEN i % 80 = 0 THEN 'recovered' ELSE 'exhausted' END END AS ladder_outcome,
       CASE WHEN i % 80 = 0 THEN 'drop_tools' END AS recovered_at,
       CASE WHEN i % 80 = 0 THEN 'ok' END AS recovered_class,
       false AS in_wedged_window, false AS in_down_window, false AS enable_thinking,
       false AS truncated, true AS has_log_fields, 'glm-5' AS metric_model,
       CASE WHEN (i // 10) % 10 = 0 THEN i % 10 + 1 END AS turn_index
FROM range($n) r(i)
"""

# What the generator makes, counted independently of the SQL above.
FAILED_5XX = N // 40
RECOVERED = N // 80
RATE_LIMITED = 2 * (N // 1000)
TIMEOUTS = N // 1000
OK = N - FAILED_5XX - RATE_LIMITED - TIMEOUTS


@pytest.fixture(scope="module")
def big_db(tmp_path_factory) -> Path:
    db = fresh_db(tmp_path_factory.mktemp("million") / "million.duckdb")  # an empty database, copied
    con = connect(db)
    try:
        refresh_turns(con)  # classify the empty database: its signature is now current
        con.execute(_GENERATE, {"n": N})
        for name in SESSION_TABLES:  # `sessions` and `ladder_baseline` from the generated turns
            con.execute(f'CREATE OR REPLACE TABLE "{name}" AS {load_queries()[name].sql}')
        assert is_current(con)  # nothing will rebuild `turns` from the (empty) records
        assert con.execute("SELECT count(*) FROM turns").fetchall()[0][0] == N
    finally:
        con.close()
    return db


def test_the_wilson_macros_take_int32_counts():
    con = connect(":memory:")
    try:
        # Python ints bind as INTEGER, and so would any count cast down: 4 * n * n overflowed INT32.
        low, high = con.execute("SELECT wilson_low(?, ?), wilson_high(?, ?)", [23_171, 23_171, 23_171, 23_171]
                                ).fetchall()[0]
        assert 0.9998 < low < 1.0 and high == 1.0
        low, high = con.execute("SELECT wilson_low(1000::INTEGER, 2000000000::INTEGER), "
                                "wilson_high(1000::INTEGER, 2000000000::INTEGER)").fetchall()[0]
        assert low < 1000 / 2e9 < high < 1e-6
        assert wilson(con, 500_000, 1_000_000) == (0.499, 0.501)
    finally:
        con.close()


def test_the_summary_of_a_million_turns(big_db):
    con = connect(big_db, read_only=True)
    try:
        summary = build_summary(con)
    finally:
        con.close()
    assert summary["turns"] == N
    classes = {c: v["count"] for c, v in summary["classes"].items()}
    assert classes == {"ok": OK, "tool-history-5xx": FAILED_5XX, "rate-limited": RATE_LIMITED, "timeout": TIMEOUTS}
    assert summary["classes"]["tool-history-5xx"]["rate"] == round(FAILED_5XX / N, 4)
    sizing = summary["sizing"]
    assert sizing["eligible_incidents"] == FAILED_5XX
    # The measured recovery and its Wilson interval over 25,000 ladders (INT32 overflowed here).
    rec = sizing["ladder_recovery"]
    assert (rec["ladders"], rec["recovered"], rec["rate"]) == (FAILED_5XX, RECOVERED, 0.5)
    assert rec["interval"][0] < 0.5 < rec["interval"][1] and rec["interval"][1] - rec["interval"][0] < 0.02
    rungs = {r["rung"]: r for r in sizing["ladder_rungs"]}
    assert (rungs["drop_tools"]["reached"], rungs["drop_tools"]["recovered"]) == (FAILED_5XX, RECOVERED)
    assert rungs["drop_tools"]["conditional_interval"][0] > 0.49
    oncall = summary["oncall"]
    glm = oncall["latency"][0]
    assert (glm["model"], glm["turns"], glm["max_ms"]) == ("glm-5", N, 1_200_000 + 996)
    assert oncall["tokens"][0]["prompt_tokens"] == 9000 * N  # 9e9: past INT32 and past 2^32
    assert len(oncall["rate_limit_bursts"]) == N // 1000
    timeouts = next(g for g in oncall["error_groups"] if g["pattern"] == "Request timed out after <n>ms")
    assert (timeouts["turns"], timeouts["distinct_texts"]) == (TIMEOUTS, 997)
    json.dumps(summary)  # what `analyze --json` prints
    out = io.StringIO()
    print_summary(summary, Console(file=out, width=140, highlight=False))
    assert "1,000,000 turns" in out.getvalue()


def test_the_report_of_a_million_turns(big_db, tmp_path):
    out = tmp_path / "million.html"
    p = analyze("report", "--db", big_db, "-o", out, "--plotly-cdn")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out)
    page = out.read_text(encoding="utf-8")
    assert 'data-metric="turns">1,000,000<' in page.replace(" ", "") or "1,000,000" in page
    assert "Request timed out after &lt;n&gt;ms" in page


def test_the_questions_on_a_million_turns(big_db):
    p = analyze("sql", "class_rates", "--db", big_db, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {r["incident_class"]: r for r in json.loads(p.stdout)}
    assert rows["ok"]["model_turns"] == N and rows["ok"]["turns"] == OK
    assert rows["timeout"]["rate_low"] < TIMEOUTS / N < rows["timeout"]["rate_high"]
