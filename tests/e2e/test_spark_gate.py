"""The gate: every question and view of queries/ answers the same on Spark as on DuckDB.

One small database exercises every path the questions take: the small week of
test_queries.py (``week_records``: tool sessions, naked 500s, ladders that
recovered and that did not, a wedged window, thinking turns, a 429, an
unanswered request) plus what it lacks: a proxy's stdout (kubectl ``--prefix
--timestamps``) with slow-completion warnings and lost-record lines (one without
a time), a line that is not JSON (quarantined) and a file that is not a log
(skipped), a logged class the rules disagree with, a burst of 429s, three failed
calls of one provider, error texts in mixed case (the case-insensitive crash
pattern), metric samples (a generation counter with a reset, a gauge with a NaN),
a model map, a pod window with fractional-second edges, replayed ladder
attempts, and a LiteLLM call whose fallback answered after its first attempt failed. It is exported as a lake (analyzer.outputs.lake), and every question,
view and materialized table runs on DuckDB (the database) and on Spark local (the
lake, the views and tables recomputed by Spark) with two parameter sets: every
declared parameter NULL, and every one bound. Rows are compared sorted, floats
within 1e-9 relative, times exactly, and every value and column as the JSON
format prints it: of the same JSON type (an integral DOUBLE prints ``14.0`` on
both engines, a BIGINT ``14``; :func:`json_kind` of each column's type). A new
DuckDB-only construct in a question fails here. How each engine is asked and the
answers compared (``json_kind`` included): tests/support/spark_questions.py.

``pytest -s`` prints the figures (questions equal / total, seconds on each engine);
they are also written to ``spark-gate.txt`` in the test's temporary folder.
Skipped only on a developer machine without pyspark or Java; under CI (env CI
set) a missing engine is a failure, not a skip.
"""

from __future__ import annotations

import io
import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.support.services import need_spark  # noqa: E402

need_spark(module=True)

from analyzer.classification.turns import refresh_turns  # noqa: E402
from analyzer.ingestion.logs import ingest  # noqa: E402
from analyzer.online import LadderSettings, log_fields, run_ladder  # noqa: E402
from analyzer.outputs.lake import export_lake  # noqa: E402
from analyzer.outputs.rows import write_json  # noqa: E402
from analyzer.questions.spark import local_session, register_lake, to_spark_sql  # noqa: E402
from analyzer.questions.spark.sql import HAND_WRITTEN, hand_written  # noqa: E402
from analyzer.store.asking import execute  # noqa: E402
from analyzer.store.db import connect  # noqa: E402
from analyzer.store.lake import open_lake  # noqa: E402
from tools import litellm_payloads as L  # noqa: E402
from tests.support.records import (  # noqa: E402
    at, request, response_error, response_ok, stamp, stdout_line, write_jsonl)
from tests.support.questions import QUERIES, RUNNABLE  # noqa: E402
from tests.support.spark_questions import (  # noqa: E402
    PARAM_SETS, SAMPLES, difference, on_duckdb, on_spark, params, same)
from tests.support.week import DAY, TOOLS_PAYLOAD, WEDGED_WINDOW, answer, turn, week_records  # noqa: E402

pytestmark = pytest.mark.spark

POD = "glm-proxy-7b5c8d9f6-q9z4x"

#: Questions that find nothing by design in one parameter set, and why.
EMPTY_BY_DESIGN = {
    ("session_turns", "null"): "it lists the turns of the sessions named; none is named",
    ("window_signals", "null"): "it reads one pod's samples between since and until; none is given",
    ("input_file_examples", "bound"): "the inputs are not in a time range: with since/until/model it says nothing",
    ("input_files_by_form", "bound"): "as input_file_examples",
    ("input_folders", "bound"): "as input_file_examples",
    ("quarantine_samples", "bound"): "as input_file_examples",
    ("quarantined_lines", "bound"): "as input_file_examples",
    ("skipped_files_kept", "bound"): "as input_file_examples",
    ("skipped_files_latest", "bound"): "as input_file_examples",
}


# ---------------------------------------------------------------------------
# The fixture database


def _prefixed(text: str, when: datetime | None) -> str:
    """A line as `kubectl logs --prefix --timestamps` prints it (no time: read without --timestamps)."""
    return f"[pod/{POD}/proxy] " + (f"{stamp(when)} " if when is not None else "") + text


def _extra_records() -> list[dict]:
    """What the small week lacks, in the forms the proxy logs."""
    r: list[dict] = []
    # A logged class the rules disagree with (the proxy said empty-200-stop for a good answer).
    disagree = log_fields(TOOLS_PAYLOAD, 200, answer("Fine."))
    disagree["incident_class"] = disagree["final_class"] = "empty-200-stop"
    r += turn("l0000001", 2 * DAY + 20, "s-l", resp=response_ok, content="Fine.", extra=disagree)
    # A burst of 429s from one provider (rate_limit_bursts), two sessions.
    for i, minute in enumerate((2 * DAY + 30, 2 * DAY + 31.5, 2 * DAY + 33)):
        r += turn(f"m000000{i}", minute, f"s-m{i % 2}", resp=response_error,
                   error='Provider returned 429: {"error": {"message": "Rate limit exceeded", "code": 429}}')
    # Three failed calls of one provider and nothing else (provider_incidents), mixed-case crash texts.
    for i, text in enumerate(("vLLM ENGINECORE failed: Engine Loop Has Died at 0x7f3a2b",
                              "cuda Out Of Memory while allocating 2.50 GiB (request 9c1d2e3f-0a1b-4c5d-8e9f-001122334455)",
                              "Provider returned 503: upstream at 2026-11-18T09:10:11Z said NCCL Error 12")):
        r += turn(f"n000000{i}", 2 * DAY + 40 + i, f"s-n{i}", model="glm-4.6", client=None,
                   req={"provider": "acme"}, resp=response_error, error=text, provider="acme")
    # Thinking turns that answered (thinking_points samples three of five).
    for i in range(5):
        r += turn(f"q000000{i}", 2 * DAY + 50 + i, "s-q", req={"enable_thinking": True}, resp=response_ok,
                   content=f"Answer {i}.", reasoning="Let me see. " * (20 + 7 * i), completion_tokens=300 + 41 * i)
    # GLM as it fails today (reasoning_findings, thinking_budget_rung): an answer filed as
    # reasoning, a leak after thinking off, a leak the proxy repaired, budgets refused.
    r += turn("r0000001", 2 * DAY + 60, "s-r", req={"tool_results": [{"tool_call_id": "c1", "content": "rows"}]},
               resp=response_ok, reasoning="Texas holds 61,883 acres.", completion_tokens=9)
    r += turn("r0000002", 2 * DAY + 61, "s-r2", req={"enable_thinking": False}, resp=response_ok,
               content="Plan the query.</think>Done.")
    leaked = run_ladder({"model": "glm-5", "messages": [{"role": "user", "content": "q"}]},
                        lambda p: (200, {}, answer("Simple.</think>4")))
    r += turn("r0000003", 2 * DAY + 62, "s-r3", resp=response_ok, content="4", reasoning="Simple.",
               extra=log_fields({"model": "glm-5", "messages": [{"role": "user", "content": "q"}]},
                                leaked.status, leaked.body, leaked))
    payload = {**TOOLS_PAYLOAD, "max_tokens": 4096}
    refusal = json.dumps({"object": "error", "code": 400, "message": NO_PARSER}).encode()
    budget = run_ladder(payload, _scripted([(200, {}, answer("", "length", 4096)), (400, {}, refusal),
                                            (200, {}, answer("Fine."))]), LadderSettings(length_recovery=True))
    r += turn("r0000004", 2 * DAY + 63, "s-r4", resp=response_ok, content="Fine.",
               extra=log_fields(payload, budget.status, budget.body, budget))
    r += turn("r0000005", 2 * DAY + 64, "s-r5", resp=response_error,
               error=f"Provider returned 400: {refusal.decode()}")
    return r


NO_PARSER = ("thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser "
             "and/or --reasoning-config to use thinking_token_budget.")


def _scripted(answers):
    """``send`` answering each call with the next of ``answers``."""
    it = iter(answers)
    return lambda payload: next(it)


def _stdout_lines() -> list[str]:
    """One replica's stdout: turns with a slow warning between request and response, lost records."""
    lines = [_prefixed("INFO:     Uvicorn running on http://0.0.0.0:8000", None)]
    for i, minute in enumerate((DAY + 50, DAY + 52)):
        rid = f"p000000{i}"
        req = request(rid, at(minute), session="s-p")
        resp = response_ok(rid, at(minute + 0.2), content="Slow but fine.", session="s-p", latency_ms=312_000)
        lines.append(_prefixed(stdout_line(req), at(minute)))
        lines.append(_prefixed(f"⚠️  Slow completion: {312000 + i}ms exceeds the 300s client-side warning "
                               f"threshold (model=glm-5, request_id={rid}) — the caller may already have given up",
                               at(minute + 0.19)))
        lines.append(_prefixed(stdout_line(resp), at(minute + 0.2)))
    lines += [
        _prefixed("⚠️  Log buffer exceeded 10000 entries during outage; dropped 7 oldest", at(DAY + 55)),
        _prefixed("⚠️  S3 flush failed: timeout — 120 entries re-queued for retry", at(DAY + 56)),
        _prefixed("⚠️  log_response failed (request still served): TypeError: bad client", None),
    ]
    return lines


def _metrics(con) -> None:
    """A generation counter (with a reset and a flat stretch) and a running gauge (with a NaN) for glm-5-0."""
    con.execute("INSERT INTO metric_sources VALUES (1, '/metrics/vllm.json')")
    con.execute("""INSERT INTO metric_series VALUES
        (1, 'vllm:generation_tokens_total', 'vllm/glm-5-0', 'glm-5', '10.0.0.5:8000', 'vllm',
         '{"instance":"10.0.0.5:8000","job":"vllm","model_name":"glm-5","pod":"glm-5-0"}'),
        (2, 'vllm:num_requests_running', 'vllm/glm-5-0', 'glm-5', '10.0.0.5:8000', 'vllm',
         '{"instance":"10.0.0.5:8000","job":"vllm","model_name":"glm-5","pod":"glm-5-0"}'),
        (3, 'vllm:generation_tokens_total', NULL, 'Qwen/Qwen3-32B', '10.0.0.9:8000', 'vllm',
         '{"instance":"10.0.0.9:8000","job":"vllm","model_name":"Qwen/Qwen3-32B"}')""")
    counter, points = 1000.0, []
    for k in range(0, 60):
        minute = DAY + k
        if k == 30:
            counter = 40.0  # the process restarted
        elif not 25 <= k <= 35:  # flat while wedged
            counter += 125.5 + k
        points.append((1, at(minute) + timedelta(milliseconds=250 * (k % 3)), counter, 1))
        points.append((2, at(minute), float("nan") if k == 7 else float(3 if 25 <= k <= 35 else k % 4), 1))
        points.append((3, at(minute + 2 * DAY - DAY), 500.0 + 37.25 * k, None))
    con.executemany("INSERT INTO metric_points VALUES (?, ?, ?, ?)", points)
    con.execute("INSERT INTO model_map VALUES ('qwen3', 'Qwen/Qwen3-32B')")


def _replays(con) -> None:
    """`analyze replay` of the exhausted ladder (e0000002): three attempts, the last recovering."""
    ts, session = con.execute("SELECT ts, session_id FROM records WHERE request_id = 'e0000002' "
                              "AND type = 'request'").fetchall()[0]
    rows = [(1, "original", 500, "tool-history-5xx", 1200, None, None, None, "Provider returned 500: ", False),
            (2, "tool_choice_none", 422, "refused", 80, None, None, None, "unsupported", True),
            (3, "drop_tools", 200, "ok", 2300, "stop", 880, 14, None, False)]
    for no, rung, status, cls, ms, finish, pt, ct, err, refused in rows:
        con.execute(
            "INSERT INTO replay_attempts (request_id, ts, session_id, model, trigger, outcome, recovered_at, "
            "attempt_no, rung, status, incident_class, latency_ms, finish_reason, prompt_tokens, "
            "completion_tokens, error, endpoint, replayed_at, refused) "
            "VALUES ('e0000002', ?, ?, 'glm-5', 'tool-history-5xx', 'recovered', 'drop_tools', ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "'http://127.0.0.1:9/v1', ?, ?)",
            [ts, session, no, rung, status, cls, ms, finish, pt, ct, err, at(3 * DAY), refused])


def build_gate_db(path: Path) -> Path:
    """The gate's database: the small week and what it lacks, ingested and classified as `analyze` does."""
    logs = path.parent / "logs"
    chunk = write_jsonl(logs / "2026-11-16" / "14-00-00-proxy-1-0a1b2c3d.jsonl", week_records() + _extra_records())
    with chunk.open("a", encoding="utf-8") as f:
        f.write("{this line is not JSON\n")
    (logs / "pods.log").write_text("\n".join(_stdout_lines()) + "\n", encoding="utf-8")
    (logs / "notes.txt").write_text("remember to rotate the logs\n", encoding="utf-8")
    # LiteLLM's logs: a call whose first attempt failed and whose fallback answered (gateway_attempts)
    call = {"call_id": "5f0c1c3e-gate", "user": "s-litellm"}
    L.write_objects(logs / "litellm", [
        L.payload(**call, start=L.T0 + 86400 + 3600, status="failure", error_information=L.error(
            500, "InternalServerError", "litellm.InternalServerError: InternalServerError: Hosted_vllmException - ")),
        L.payload(**call, start=L.T0 + 86400 + 3605, fallbacks=1, model_group="glm-5-backup",
                  api_base="http://vllm-glm-1:8000/v1")])
    con = connect(path)
    try:
        ingest(con, [str(logs)])
        con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('glm-5-0', 'glm-5', 'wedged', ?, ?, 'flat counter, 3 running')",
                    list(WEDGED_WINDOW))
        # A down window with fractional-second edges around the unanswered qwen3 request.
        con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('qwen3-0', 'Qwen/Qwen3-32B', 'down', ?, ?, 'up = 0')",
                    [at(DAY + 39) + timedelta(seconds=59.750125), at(DAY + 41) + timedelta(seconds=20.333333)])
        _metrics(con)
        _replays(con)
        refresh_turns(con)
    finally:
        con.close()
    return path


# ---------------------------------------------------------------------------
# The run: both engines, both parameter sets, once for the module


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-gate")
    db = build_gate_db(tmp / "gate.duckdb")
    con = connect(db, read_only=True)
    try:
        export_lake(con, tmp / "lake")
        started = time.perf_counter()
        duck = {(n, s): on_duckdb(con, n, params(n, s)) for n in RUNNABLE for s in PARAM_SETS}
        duck_s = time.perf_counter() - started
    finally:
        con.close()
    started = time.perf_counter()
    spark = local_session("analyzer-gate", master="local[2]")
    session_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        register_lake(spark, str(tmp / "lake"))
        register_s = time.perf_counter() - started
        answers, errors = {}, {}
        started = time.perf_counter()
        for n in RUNNABLE:
            for s in PARAM_SETS:
                try:
                    answers[(n, s)] = on_spark(spark, n, params(n, s))
                except Exception as exc:  # every question runs; the test of each says what failed
                    errors[(n, s)] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        spark_s = time.perf_counter() - started
        df = spark.sql(to_spark_sql(NUMBERS_SQL))
        numbers_on_spark = _json(df.columns, [tuple(r) for r in df.collect()])
    finally:
        spark.stop()
    lake = open_lake(tmp / "lake")
    try:
        cur = execute(lake, NUMBERS_SQL, {})
        numbers_on_duckdb = _json([d[0] for d in cur.description], cur.fetchall())
    finally:
        lake.close()
    equal = sum(1 for k in duck if k in answers and difference(duck[k], answers[k]) is None
                or (k[0] in SAMPLES and k in answers and _sample_ok(duck, answers, k) is None))
    empty = sorted(k for k, (_, rows, _) in duck.items() if not rows)
    figures = (
        f"spark gate: {equal} / {len(duck)} answers equal ({len(RUNNABLE)} questions, views and tables x "
        f"{len(PARAM_SETS)} parameter sets; {len(hand_written())} hand-written Spark versions)\n"
        f"  DuckDB (the database): {duck_s:.2f} s for all {len(duck)}\n"
        f"  Spark local[2] (the lake): session {session_s:.1f} s, register_lake {register_s:.1f} s "
        f"(views and the materialized turns, sessions, ladder_baseline recomputed), questions {spark_s:.1f} s\n"
        f"  empty on DuckDB: {', '.join(f'{n} ({s})' for n, s in empty) or 'none'}\n")
    (tmp / "spark-gate.txt").write_text(figures, encoding="utf-8")
    print("\n" + figures)
    return duck, answers, errors, (numbers_on_duckdb, numbers_on_spark)


#: Divisions by a number with a point, ceil and floor: Spark alone would give a DECIMAL and a BIGINT
#: (`14` where DuckDB prints `14.0`); the translation makes each a DOUBLE, as on DuckDB. A product
#: with a number with a point stays a DECIMAL on both (printed as an integer when whole, on both).
NUMBERS_SQL = ("SELECT count(*) / 60.0 AS per_minute, round(count(*) / 2.0, 1) AS halves, "
               "ceil(count(*) / 4) AS quarters, floor(avg(latency_ms)) AS floor_ms, count(*) * 1.5 AS scaled "
               "FROM turns")


def _json(columns, rows) -> str:
    """Rows as `analyze sql -f json` prints them."""
    out = io.StringIO()
    write_json(columns, rows, out)
    return out.getvalue()


def test_numbers_print_as_the_same_json_types(gate):
    on_duckdb, on_spark = gate[3]
    assert on_spark == on_duckdb
    assert [type(v) for v in json.loads(on_duckdb)[0].values()][:4] == [float, float, float, float]


def _sample_ok(duck, answers, key) -> str | None:
    name, param_set = key
    _, rows, kinds = answers[key]
    _, all_rows, _ = duck[(name, "null")]
    _, drawn, drawn_kinds = duck[key]
    if kinds != drawn_kinds:
        return f"columns print as other JSON types: DuckDB {drawn_kinds}, Spark {kinds}"
    if len(rows) != len(drawn):
        return f"{len(rows)} rows on Spark, {len(drawn)} on DuckDB"
    missing = [r for r in rows if not any(same(r, x) for x in all_rows)]
    return f"rows not in the unlimited answer: {missing}" if missing else None


@pytest.mark.parametrize("param_set", PARAM_SETS)
@pytest.mark.parametrize("name", RUNNABLE)
def test_same_answer_on_spark_as_on_duckdb(gate, name, param_set):
    duck, answers, errors, _ = gate
    key = (name, param_set)
    assert key not in errors, f"{name} ({param_set} parameters) failed on Spark: {errors[key]}"
    if name in SAMPLES and param_set == "bound":
        problem = _sample_ok(duck, answers, key)
    else:
        problem = difference(duck[key], answers[key])
    assert problem is None, f"{name} ({param_set} parameters): {problem}"


@pytest.mark.parametrize("param_set", PARAM_SETS)
@pytest.mark.parametrize("name", RUNNABLE)
def test_the_fixture_gives_every_question_an_answer(gate, name, param_set):
    duck = gate[0]
    _, rows, _ = duck[(name, param_set)]
    if (name, param_set) in EMPTY_BY_DESIGN:
        assert not rows, f"{name} ({param_set}) was listed as empty by design: {EMPTY_BY_DESIGN[(name, param_set)]}"
    else:
        assert rows, f"{name} ({param_set} parameters) found nothing in the gate's database: the gate checks nothing there"


def test_the_hand_written_versions_are_the_ones_named():
    """queries/spark/ holds only versions of catalog files, with the same kind and parameters."""
    own = hand_written()
    assert set(own) == set(HAND_WRITTEN)
    for name, q in own.items():
        assert q.kind == QUERIES[name].kind and q.params == QUERIES[name].params, name
