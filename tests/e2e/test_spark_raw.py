"""Raw proxy logs classified on Spark, turn for turn what `analyze` stores in DuckDB.

The sample week (S3 chunks and gzipped kubectl stdout, with its metrics) goes
through `analyze`'s own path into a real DuckDB file (ingest, metrics, refresh)
and through analyzer.questions.spark.raw on Spark local from the same raw files.
The records must be equal row for row (every typed column, keyed by file and
line), the quarantined lines and the pods' windows equal, and every turn's class
equal turn for turn, with the same class counts. A small set of awkward inputs
the week lacks (multi-pod and stern prefixes with --timestamps, a truncated copy
whose full copy comes from a chunk with no replica, CRLF, a BOM, gzip chunks, a
gzip cut short, a fake gzip, a lone surrogate escape, every kind of bad line,
fields of unexpected types, a consolidated Parquet day) goes through both engines too.

Skipped only on a developer machine without pyspark or Java; under CI (env CI
set) a missing engine is a failure, not a skip.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from pathlib import Path

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime", allow_module_level=True)

from analyzer.classification.turns import refresh_turns  # noqa: E402
from analyzer.ingestion.logs import ingest  # noqa: E402
from analyzer.jobs.metrics import load_metrics  # noqa: E402
from analyzer.questions.spark import local_session  # noqa: E402
from analyzer.questions.spark.raw import classify, classify_raw, read_raw, read_records  # noqa: E402
from analyzer.questions.spark.raw_records import RECORDS_COLUMNS  # noqa: E402
from analyzer.store.db import connect  # noqa: E402
from tests.support.records import (  # noqa: E402
    NAKED_500,
    TOOL_RESULT,
    at,
    request,
    response_error,
    response_ok,
    stamp,
    stdout_line,
)
from tests.support.repo import REPO  # noqa: E402

pytestmark = pytest.mark.spark

SAMPLE = REPO / "sample_logs"
LOGS = [SAMPLE / "s3", SAMPLE / "kubectl"]
METRICS = [SAMPLE / "metrics"]
JSON_COLUMNS = ("upstream_headers", "ladder")
#: Compared as they are; file_id numbers files in each engine's own way (the path is compared).
COMPARED = [c for c, _ in RECORDS_COLUMNS if c not in ("file_id", "ingest_batch")]


@pytest.fixture(scope="module")
def spark():
    session = local_session("analyzer-raw-test", master="local[2]")
    yield session
    session.stop()


def _duckdb(db: Path, logs: list, metrics: list | None = None):
    """`analyze LOGS --metrics METRICS` into ``db`` (ingest, metrics, classification); the open connection."""
    con = connect(db)
    ingest(con, [str(p) for p in logs])
    if metrics:
        load_metrics(con, [str(p) for p in metrics])
    refresh_turns(con)
    return con


@pytest.fixture(scope="module")
def week(tmp_path_factory, spark):
    """The sample week through both engines, from the raw files to the turns.

    (DuckDB connection, Spark's RawLogs, Spark's Classified, Spark's turns as
    rows, seconds per engine).
    """
    db = tmp_path_factory.mktemp("raw-week") / "week.duckdb"
    t = time.perf_counter()
    con = _duckdb(db, LOGS, METRICS)
    duck_s = time.perf_counter() - t
    t = time.perf_counter()
    raw = read_raw(spark, [str(p) for p in LOGS])
    classified = classify(spark, raw.records, [str(p) for p in METRICS])
    turns = classified.turns.collect()
    spark_s = time.perf_counter() - t
    yield con, raw, classified, turns, {"duckdb": duck_s, "spark": spark_s}
    raw.unpersist()
    con.close()


def _duck_records(con) -> dict[tuple, dict]:
    cols = ", ".join(f"r.{c}" for c in COMPARED)
    rows = con.execute(f"SELECT f.path, {cols} FROM records r JOIN source_files f USING (file_id)").fetchall()
    return {(r[0], r[COMPARED.index("line_no") + 1]): dict(zip(COMPARED, r[1:])) for r in rows}


def _spark_records(raw) -> dict[tuple, dict]:
    paths = {r.file_id: r.path for r in raw.files.collect()}
    out = {}
    for r in raw.records.collect():
        d = r.asDict()
        out[(paths[d["file_id"]], d["line_no"])] = {c: d[c] for c in COMPARED}
    return out


def _differences(duck: dict, spark: dict) -> list[str]:
    """What differs between two sets of records keyed by file and line (JSON columns compared parsed)."""
    out = [f"only in DuckDB: {k}" for k in sorted(set(duck) - set(spark))][:5]
    out += [f"only on Spark: {k}" for k in sorted(set(spark) - set(duck))][:5]
    for k in sorted(set(duck) & set(spark)):
        for c in COMPARED:
            a, b = duck[k][c], spark[k][c]
            if c in JSON_COLUMNS and a is not None and b is not None:
                a, b = json.loads(a), json.loads(b)
            if a != b:
                out.append(f"{k} {c}: DuckDB {a!r}, Spark {b!r}")
    return out


def _quarantine(con) -> list[tuple]:
    return sorted(con.execute("SELECT path, line_no, reason, snippet FROM quarantine").fetchall())


def _spark_quarantine(raw) -> list[tuple]:
    return sorted(tuple(r) for r in raw.quarantine.select("path", "line_no", "reason", "snippet").collect())


def test_the_weeks_records_are_equal_row_for_row(week):
    con, raw, *_ = week
    duck, spark = _duck_records(con), _spark_records(raw)
    assert len(duck) == 5101  # the sample week: 10,189 records read, 5,088 copies collapsed
    diffs = _differences(duck, spark)
    assert not diffs, "\n".join(diffs[:20])
    print(f"\nsample week records: {len(spark)} equal / {len(duck)}")


def test_the_records_have_the_database_columns(week):
    """A migration that adds a column to `records` must add it on Spark too."""
    con, raw, *_ = week
    spark_types = {"VARCHAR": "string", "JSON": "string", "INTEGER": "int", "BIGINT": "bigint",
                   "BOOLEAN": "boolean", "TIMESTAMP": "timestamp_ntz"}
    duck = [(name, spark_types[typ]) for name, typ, *_ in con.execute("DESCRIBE records").fetchall()]
    assert [(f.name, f.dataType.simpleString()) for f in raw.records.schema.fields] == duck


def test_the_weeks_quarantine_is_the_same(week):
    con, raw, *_ = week
    assert _spark_quarantine(raw) == _quarantine(con)
    assert len(_quarantine(con)) == 2
    assert raw.skipped == [] and raw.notes == []


def test_pod_windows_are_the_databases(week):
    con, _, classified, *_ = week
    got = sorted(tuple(r) for r in classified.pod_windows.collect())
    expected = sorted(con.execute(
        "SELECT pod, model_name, kind, start_ts, end_ts, detail, inferred FROM pod_windows").fetchall())
    assert got == expected
    assert {r[2] for r in got} == {"wedged", "down"}
    assert [r[6] for r in got].count(True) == 1  # the wedge with frozen gauges, inferred from the logs on both


def _turn_key(t: dict) -> tuple:
    # A turn is its request (id, session, time) and the response it paired with.
    return t["request_id"], t["session_id"], t["ts"], t["response_ts"]


def _value(column: str, v):
    # The ladder is JSON text: compared parsed (the engines space it alike, but need not).
    return json.loads(v) if column == "ladder" and v is not None else v


def test_every_turn_is_classed_the_same(week):
    con, _, classified, turns, seconds = week
    cur = con.execute("SELECT * FROM turns")
    cols = [d[0] for d in cur.description]
    duck = {_turn_key(t): t for t in (dict(zip(cols, r)) for r in cur.fetchall())}
    spark = {_turn_key(t): t for t in (r.asDict() for r in turns)}
    assert classified.turns.columns == cols
    assert len(duck) == 2553 and set(spark) == set(duck)
    same_class = sum(1 for k, t in duck.items() if spark[k]["incident_class"] == t["incident_class"])
    diffs = {k: [c for c in cols if _value(c, t[c]) != _value(c, spark[k][c])] for k, t in duck.items()}
    diffs = {k: cs for k, cs in diffs.items() if cs}
    print(f"\nsample week turns: {same_class} classed the same / {len(duck)}, "
          f"{len(duck) - len(diffs)} equal in all {len(cols)} columns; raw logs to turns in "
          f"{seconds['spark']:.1f} s on Spark local[2], {seconds['duckdb']:.1f} s in DuckDB "
          "(ingest, metrics, classification)")
    assert same_class == len(duck)
    assert not diffs, "\n".join(f"{k}: {cs}" for k, cs in list(diffs.items())[:20])
    # Turn for turn by the key turns has: the session and the turn's place in it.
    indexed = {(t["session_id"], t["turn_index"]): t["incident_class"] for t in duck.values() if t["session_id"]}
    assert indexed == {(t["session_id"], t["turn_index"]): t["incident_class"]
                       for t in spark.values() if t["session_id"]}


def test_the_class_counts_are_the_same(week):
    con, _, classified, *_ = week
    expected = dict(con.execute("SELECT incident_class, count(*) FROM turns GROUP BY ALL").fetchall())
    got = {r["incident_class"]: r["n"] for r in classified.turns.groupBy("incident_class").count()
           .withColumnRenamed("count", "n").collect()}
    assert got == expected
    # The README's figures for the sample week, classes the windows and the labels make among them.
    assert expected["wedged-pod"] == 13 and expected["pod-down"] == 9 and expected["tool-history-5xx"] == 31
    assert expected["answer-in-reasoning"] == 12 and expected["reasoning-leaked"] == 94
    assert sum(expected.values()) == 2553


# ---------------------------------------------------------------------------
# Awkward inputs the sample week lacks

def _line(rec: dict) -> str:
    return json.dumps(rec)


def write_awkward_logs(folder: Path) -> list[Path]:
    """Small logs with what the sample week does not hold; returns the paths to read."""
    folder.mkdir(parents=True, exist_ok=True)
    long_q = "How much of each county is protected? " * 8  # over 200 characters: cut on stdout
    r1 = request("a1000001", at(0), session="s-e1", question=long_q)
    p1 = response_ok("a1000001", at(0.1), session="s-e1", content="Done.")
    r2 = request("b2000002", at(1), session="s-e2", question=long_q, tool_results=TOOL_RESULT)
    p2 = response_error("b2000002", at(1.1), NAKED_500, session="s-e2", headers={"content-length": "0"})
    r3 = request("c3000003", at(2), session="s-e3", messages=[
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}], "function_call": None},
        {"role": "tool", "content": "rows"}])
    r3.update({"message_count": "5", "enable_thinking": "true", "tools_count": 3.0})
    p3 = response_ok("c3000003", at(2.2), session="s-e3", content="Ok", latency_ms=0)
    p3.update({"latency_ms": 12.5, "has_content": 1, "tokens": {"prompt_tokens": "900", "completion_tokens": 7.5}})
    p4 = response_ok("d4000004", at(3), session="s-e4", content="\ud83d broken emoji")  # lone surrogate escape
    p5 = response_ok("e5000005", at(3.5), session="s-e5", content=" \n\u3000")  # blank content
    p5.update({"log_fields_version": 3, "upstream_status": 200, "finish_reason": "stop", "incident_class": "ok",
               "ladder": {"trigger": None, "attempts": [{"status": 200, "has_content": False}]}})
    sys_prompt = {"timestamp": stamp(at(4)), "type": "system_prompt", "origin": "https://x", "system_sha256": "ab" * 32,
                  "content": "You are helpful."}
    offset = dict(request("f6000006", at(5), session="s-e6"), timestamp="2026-11-16T16:05:00+02:00")

    # A chunk with no replica in its name (CRLF line ends, a BOM), holding the full copies.
    chunk = folder / "s3" / "2026-11-16" / "14-00-00-7.jsonl"
    chunk.parent.mkdir(parents=True)
    body = "\r\n".join(_line(r) for r in (r1, p1, sys_prompt, r3, p3, offset)) + "\r\n"
    chunk.write_bytes(b"\xef\xbb\xbf" + body.encode())
    # A gzip chunk named by its replica; the system prompt again (a copy), and every kind of bad line.
    gz = folder / "s3" / "2026-11-16" / "14-05-00-glm-proxy-x1-7-0badcafe.jsonl.gz"
    bad = [
        '{"timestamp": "2026-11-16T14:0',                                  # cut off
        '{"timestamp": "2026-11-16T14:00:00Z", "type": "request"}{"a": 1}',  # two documents
        '{"foo": 1}',                                                       # not a record
        '[1, 2]',                                                           # not an object
        _line(dict(r1, timestamp="1999-12-31T23:59:59Z", request_id="a1999999")),
        _line(dict(r1, timestamp="infinity", request_id="a1999998")),
        _line(dict(r1, timestamp="10000-01-01T00:00:00Z", request_id="a1999997")),
        _line({k: v for k, v in r1.items() if k != "timestamp"}),
        "", "   ",
    ]
    with gzip.open(gz, "wt", encoding="utf-8") as f:
        f.write("\n".join([_line(sys_prompt), _line(p4), _line(p5), *bad]) + "\n")
    # Several replicas on stdout: kubectl --prefix --timestamps, stern, a single pod with a stamp.
    pods = folder / "kubectl" / "pods.log.gz"
    pods.parent.mkdir(parents=True)
    out = [
        "[pod/glm-proxy-a1/proxy] 2026-11-16T14:00:00.100000Z INFO:     Uvicorn running on http://0.0.0.0:8002",
        f"[pod/glm-proxy-a1/proxy] 2026-11-16T14:00:00.200000Z {stdout_line(r1, truncate=True)}",
        f"[pod/glm-proxy-a1/proxy] 2026-11-16T14:00:06.000000Z {stdout_line(p1, truncate=True)}",
        f"glm-proxy-b2 proxy 2026-11-16T14:01:00.500000Z {stdout_line(r2, truncate=True)}",
        f"2026-11-16T14:01:06Z {stdout_line(p2, truncate=True)}",
        "[pod/glm-proxy-b2/proxy] ✓ RESPONSE: {\"timestamp\": \"2026-11-16T14:0",
        "[pod/glm-proxy-b2/proxy] 📥 REQUEST: not json at all",
        "",
        "⚠️  Slow completion: 301000ms exceeds the 300s client-side warning threshold (model=glm-5, request_id=a1000001)",
    ]
    with gzip.open(pods, "wt", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    # A gzip cut short (the lines before the cut are kept), a fake gzip, a stranger's file.
    cut = folder / "s3" / "2026-11-17" / "00-00-00-9.jsonl.gz"
    cut.parent.mkdir(parents=True)
    whole = gzip.compress(("\n".join(_line(request(f"9{i:07d}", at(60 + i), session="s-cut"))
                                     for i in range(400)) + "\n").encode())
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    (folder / "s3" / "2026-11-17" / "fake.jsonl.gz").write_text("not gzip\n")
    (folder / "notes.txt").write_text("remember to rotate the keys\n")
    # The consolidated tier: a day as Parquet, the record in its `entry` column.
    return [folder / "s3", folder / "kubectl", folder / "notes.txt", SAMPLE / "consolidated"]


@pytest.fixture(scope="module")
def awkward(tmp_path_factory, spark):
    tmp = tmp_path_factory.mktemp("raw-awkward")
    paths = write_awkward_logs(tmp / "logs")
    con = _duckdb(tmp / "awkward.duckdb", paths)
    raw = read_raw(spark, [str(p) for p in paths])
    yield con, raw, paths
    raw.unpersist()
    con.close()


def test_awkward_inputs_read_the_same(awkward, spark):
    con, raw, paths = awkward
    duck, records = _duck_records(con), _spark_records(raw)
    diffs = _differences(duck, records)
    assert not diffs, "\n".join(diffs[:20])
    assert read_records(spark, [str(p) for p in paths]).count() == len(duck)  # (nothing kept in storage)
    by_id = {(d["type"], d["request_id"]): d for d in records.values()}
    # The full copy from the chunk replaced the stdout copy, and kept the replica stdout named.
    assert by_id[("request", "a1000001")]["truncated"] is False
    assert by_id[("request", "a1000001")]["proxy_pod"] == "glm-proxy-a1"
    # Only on stdout: the cut copy is the record, with the replica of its stern prefix.
    assert by_id[("request", "b2000002")]["truncated"] is True
    assert by_id[("request", "b2000002")]["proxy_pod"] == "glm-proxy-b2"
    assert by_id[("request", "c3000003")]["message_count"] == 5
    assert by_id[("request", "c3000003")]["messages_tool_history"] is True
    assert by_id[("response", "c3000003")]["latency_ms"] == 12  # 12.5, half to even as DuckDB casts
    mended = by_id[("response", "d4000004")]["raw"]  # as the ingest mends it
    assert "\\ufffd" in mended and "\\ud83d" not in mended
    assert by_id[("response", "e5000005")]["content_blank"] is True
    assert sum(1 for d in records.values() if d["type"] == "system_prompt") == 1
    assert sum(1 for d in records.values() if d["request_id"] and d["request_id"].startswith("9")) > 100
    assert sum(1 for path, _ in records if path.endswith(".parquet")) == 705


def test_awkward_inputs_quarantine_and_skip_the_same(awkward):
    con, raw, _ = awkward
    expected = _quarantine(con)
    assert _spark_quarantine(raw) == expected
    reasons = {r[2] for r in expected}
    assert {"malformed JSON (invalid or cut-off line)", "not a JSON object", "no valid timestamp",
            "not a proxy record (no request/response/system_prompt type)"} <= reasons
    assert sum(1 for r in reasons if "is not a log time" in r) == 3
    skipped = {s["path"]: s["reason"] for s in raw.skipped}
    stored = dict(con.execute("SELECT path, reason FROM skipped_files").fetchall())
    assert skipped == stored and len(stored) == 3


def test_a_uri_is_listed_and_read_by_spark_the_same(awkward, spark, tmp_path):
    """A Spark URI (s3a://, hdfs://; here file:) is listed by Spark and its bytes read on the
    executors: the records `analyze` stores for the same folder."""
    _, raw, _ = awkward
    chunk = next(p for p in (r.path for r in raw.files.collect()) if p.endswith("14-00-00-7.jsonl"))
    logs = Path(chunk).parents[2]  # s3/, kubectl/ and notes.txt
    by_uri = read_raw(spark, [logs.as_uri()])
    con = _duckdb(tmp_path / "folder.duckdb", [logs])
    try:
        listed, stored = _spark_records(by_uri), _duck_records(con)
        skipped = {s["path"].rsplit("/", 1)[1] for s in by_uri.skipped}
    finally:
        by_uri.unpersist()
        con.close()

    def relative(records: dict) -> dict:
        return {(p.split("/logs/", 1)[1], n): v for (p, n), v in records.items()}

    diffs = _differences(relative(stored), relative(listed))
    assert not diffs, "\n".join(diffs[:20])
    assert len(listed) > 100 and all(p.startswith("file:") for p, _ in listed)
    assert skipped == {"00-00-00-9.jsonl.gz", "fake.jsonl.gz", "notes.txt"}


def test_classify_raw_classes_the_awkward_turns_the_same(awkward, spark):
    """classify_raw from the raw files, no metrics (no windows): the database's turns, column for column."""
    con, _, paths = awkward
    turns = [r.asDict() for r in classify_raw(spark, [str(p) for p in paths]).collect()]
    cur = con.execute("SELECT * FROM turns")
    cols = [d[0] for d in cur.description]
    duck = {_turn_key(t): t for t in (dict(zip(cols, r)) for r in cur.fetchall())}
    spark_turns = {_turn_key(t): t for t in turns}
    assert set(spark_turns) == set(duck) and len(duck) > 100
    diffs = [f"{k} {c}: DuckDB {t[c]!r}, Spark {spark_turns[k][c]!r}" for k, t in duck.items() for c in cols
             if _value(c, t[c]) != _value(c, spark_turns[k][c])]
    assert not diffs, "\n".join(diffs[:20])
    classes = {(t["request_id"], t["incident_class"]) for t in duck.values()}
    assert {("b2000002", "tool-history-5xx"), ("a1000001", "ok")} <= classes
