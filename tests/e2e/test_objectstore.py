"""`analyze s3://bucket/...` against a real S3-compatible server on 127.0.0.1 (moto's server mode).

The bucket holds the proxy's layout: chunk files under YYYY-MM-DD/ (plain and
gzip) and the consolidated Parquet tier. The analyzer mirrors it into a local
cache, only new or changed objects, and ingests the cache; the credentials
appear nowhere: not in the output, the cache, or the database.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import uuid
from pathlib import Path

import pytest

from analyzer.store.db import connect
from analyzer.core.errors import ExitCode
from analyzer.io.objectstore import in_layout, parse_url, safe_endpoint
from tests.support.week import week_records
from tests.support.cli import Ran
from tests.support.cli import analyze as run_analyze
from tests.support.services import need
from tools.loopback import free_port

ACCESS_KEY = "AKIAANALYZERTEST0001"
SECRET_KEY = "never-print-this-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def endpoint():
    """A moto S3 server on a free loopback port, for this module."""
    moto_server = need("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def env(tmp_path, endpoint) -> dict[str, str]:
    """The environment of an `analyze` process: keys and endpoint, nothing from the user's ~/.aws."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    e.update({
        "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint, "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"), "AWS_EC2_METADATA_DISABLED": "true",
        "ANALYZER_S3_CACHE": str(tmp_path / "cache"),
    })
    return e


@pytest.fixture
def bucket(endpoint):
    """A fresh bucket with a week in the proxy's layout; yields (name, put)."""
    s3 = need("boto3").client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    name = f"proxy-logs-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)

    def put(key: str, body: bytes) -> None:
        s3.put_object(Bucket=name, Key=key, Body=body)

    by_day: dict[str, list[dict]] = {}
    for r in week_records():
        by_day.setdefault(r["timestamp"][:10], []).append(r)
    days = sorted(by_day)
    put(f"consolidated/daily/{days[0]}.parquet", _consolidated(by_day[days[0]]))
    put(f"{days[1]}/14-00-00-glm-proxy-7b5c8d9f6-q9z4x-1-0a1b2c3d.jsonl", _jsonl(by_day[days[1]]))
    put(f"{days[2]}/14-01-00-1.jsonl.gz", gzip.compress(_jsonl(by_day[days[2]][:4])))
    put("README.txt", b"not a log")
    put("tmp/scratch.json", b"{}")
    yield name, put, by_day, s3
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
        for obj in page.get("Contents", []):
            s3.delete_object(Bucket=name, Key=obj["Key"])
    s3.delete_bucket(Bucket=name)


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _consolidated(records: list[dict]) -> bytes:
    """The consolidated tier: typed columns and the whole record as JSON in `entry`."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = ("type", "request_id", "session_id", "origin", "client", "provider", "model")
    table = pa.table({"ts": [r["timestamp"] for r in records], **{c: [r.get(c) for r in records] for c in cols},
                      "entry": [json.dumps(r) for r in records]})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def analyze(env: dict, *args: str) -> Ran:
    """The command, run in this process with ``env`` as its environment (tests/support/cli.py)."""
    return run_analyze(*args, env=env)


def _no_secret(*texts: str) -> None:
    for t in texts:
        assert SECRET_KEY not in t and ACCESS_KEY not in t


def test_ingests_the_bucket_then_syncs_only_what_is_new(tmp_path, env, bucket):
    name, put, by_day, _ = bucket
    db = tmp_path / "a.duckdb"
    expected = sum(len(v) for v in by_day.values()) - (len(by_day[sorted(by_day)[2]]) - 4)

    p = analyze(env, f"s3://{name}/", "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["ingest"]["files_ingested"] == 3 and summary["ingest"]["new_records"] == expected
    assert summary["ingest"]["quarantined"] == 0
    assert "3 log object(s), 3 new or changed" in p.stderr
    _no_secret(p.stdout, p.stderr)

    # A second run downloads and reads nothing.
    p2 = analyze(env, f"s3://{name}/", "--db", str(db), "--json")
    assert p2.returncode == 0, p2.stderr
    assert "0 new or changed (0 bytes), 3 unchanged" in p2.stderr
    again = json.loads(p2.stdout)["ingest"]
    assert (again["files_ingested"], again["files_unchanged"], again["new_records"]) == (0, 3, 0)

    # A new chunk arrives: only it is fetched and read.
    day3 = sorted(by_day)[2]
    put(f"{day3}/14-02-00-glm-proxy-7b5c8d9f6-q9z4x-1-9f8e7d6c.jsonl", _jsonl(by_day[day3][4:]))
    p3 = analyze(env, f"s3://{name}/{day3}/", "--db", str(db), "--json")
    assert p3.returncode == 0, p3.stderr
    assert "2 log object(s), 1 new or changed" in p3.stderr
    third = json.loads(p3.stdout)
    assert third["ingest"]["files_ingested"] == 1
    assert third["turns"] == len([r for v in by_day.values() for r in v if r["type"] == "request"])

    # The credentials are nowhere: output, cache files, database.
    _no_secret(p3.stdout, p3.stderr)
    for f in Path(env["ANALYZER_S3_CACHE"]).rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert SECRET_KEY.encode() not in data and ACCESS_KEY.encode() not in data
    con = connect(db, read_only=True)
    try:
        cols = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                           "WHERE data_type IN ('VARCHAR', 'JSON') AND NOT internal").fetchall()
        for table, col in cols:
            hits = con.execute(f'SELECT count(*) FROM "{table}" WHERE contains("{col}"::VARCHAR, ?) '
                               f'OR contains("{col}"::VARCHAR, ?)', [SECRET_KEY, ACCESS_KEY]).fetchall()[0][0]
            assert hits == 0, f"{table}.{col}"
        paths = [r[0] for r in con.execute("SELECT path FROM source_files").fetchall()]
    finally:
        con.close()
    assert all(p.startswith(env["ANALYZER_S3_CACHE"]) for p in paths)


def test_changed_and_deleted_objects(tmp_path, env, bucket):
    name, put, by_day, s3 = bucket
    day2 = sorted(by_day)[1]
    key = f"{day2}/14-00-00-glm-proxy-7b5c8d9f6-q9z4x-1-0a1b2c3d.jsonl"
    cache = tmp_path / "c"
    p = analyze(env, "sync", f"s3://{name}/{day2}/", "--cache", str(cache), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["downloaded"] == 1
    local = next(cache.rglob("*.jsonl"))
    put(key, _jsonl(by_day[day2][:2]))  # rewritten: new ETag and size
    second = json.loads(analyze(env, "sync", f"s3://{name}/{day2}/", "--cache", str(cache), "--json").stdout)
    assert (second["downloaded"], second["unchanged"]) == (1, 0)
    assert local.read_bytes() == _jsonl(by_day[day2][:2])
    s3.delete_object(Bucket=name, Key=key)
    third = json.loads(analyze(env, "sync", f"s3://{name}/{day2}/", "--cache", str(cache), "--json").stdout)
    assert (third["matched"], third["removed"]) == (0, 1) and not local.exists()


def test_named_profile_and_endpoint_option(tmp_path, env, bucket, endpoint):
    name = bucket[0]
    creds = tmp_path / "credentials"
    creds.write_text(f"[analyzer-test]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n")
    e = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")}
    e["AWS_SHARED_CREDENTIALS_FILE"] = str(creds)
    p = analyze(e, "sync", f"s3://{name}/", "--s3-profile", "analyzer-test", "--s3-endpoint", endpoint,
                "--cache", str(tmp_path / "c"), "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert (report["matched"], report["downloaded"]) == (3, 3)
    assert report["skipped"] == ["README.txt", "tmp/scratch.json"]
    _no_secret(p.stdout, p.stderr)
    p = analyze(e, "sync", f"s3://{name}/", "--s3-profile", "nobody", "--s3-endpoint", endpoint)
    assert p.returncode == ExitCode.USAGE and "no AWS profile named 'nobody'" in p.stderr


@pytest.mark.parametrize("case", ["no-bucket", "no-credentials", "no-logs", "bad-url"])
def test_clear_errors(tmp_path, env, bucket, case):
    name = bucket[0]
    url = {"no-bucket": "s3://no-such-bucket-here/", "no-logs": f"s3://{name}/tmp/",
           "bad-url": "s3:///nobucket"}.get(case, f"s3://{name}/")
    e = dict(env)
    if case == "no-credentials":
        del e["AWS_ACCESS_KEY_ID"], e["AWS_SECRET_ACCESS_KEY"]
    p = analyze(e, url, "--db", str(tmp_path / "a.duckdb"))
    code, message = {
        "no-bucket": (ExitCode.UPSTREAM, "NoSuchBucket"),
        "no-credentials": (ExitCode.USAGE, "no S3 credentials"),
        "no-logs": (ExitCode.NO_INPUT, "no proxy log objects"),
        "bad-url": (ExitCode.NO_INPUT, "expected s3://BUCKET"),
    }[case]
    assert p.returncode == code, p.stderr
    assert message in p.stderr and "Traceback" not in p.stderr
    _no_secret(p.stdout, p.stderr)


def test_layout_and_url_helpers():
    assert parse_url("s3://b/2026-11-16/") == ("b", "2026-11-16/")
    assert in_layout("2026-11-16/14-03-07-glm-proxy-1-0a1b2c3d.jsonl")
    assert in_layout("logs/2026-11-16/14-03-07-1.jsonl.gz")
    assert in_layout("consolidated/monthly/2026-10.parquet")
    assert not in_layout("2026-11-16/notes.txt") and not in_layout("README.txt")
    # LiteLLM's S3 callback: one object per call, by day (or by hour), or a flush as .jsonl
    assert in_layout("litellm/2026-11-16/time-14-03-07-726024_chatcmpl-0a1b2c3d.json")
    assert in_layout("litellm/2026-11-16/14/time-14-03-07-726024_5f0c1c3e-9a1d.json")
    assert in_layout("litellm/2026-11-16/batch_14-03-07_0a1b2c3d.jsonl")
    assert not in_layout("litellm/audit-5f0c1c3e.json") and not in_layout("tmp/scratch.json")
    assert safe_endpoint("https://user:pa55@minio.local:9000/") == "https://minio.local:9000"
