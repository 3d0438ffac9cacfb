"""A real LiteLLM proxy in front of the fault-injecting upstream, its S3 logs analyzed, the ladder inside it.

LiteLLM (the test extra's pinned ``litellm``, started as its ``litellm --config``
command on 127.0.0.1) routes ``glm-5`` to :class:`tools.faulty_upstream.FaultyUpstream`
as a ``hosted_vllm/`` model and ``glm-5-ladder`` to the same upstream through
analyzer.integrations.litellm_ladder; its S3 logging callback writes every
call's StandardLoggingPayload to a moto server on 127.0.0.1. The scripted calls
(tools/litellm_week.py: every class LiteLLM's logs can show, a fallback, the
ladder's recoveries) are driven through it once for the module; then
``analyze s3://...`` reads the objects LiteLLM itself wrote, and each turn's
class, each ladder's outcome and the per-rung figures are checked against the
script and against what the upstream received.

Skipped without litellm or moto only when ``CI`` is not set; under CI a missing
package is a failure (``.ci/run`` installs the test extra).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections import Counter
from types import SimpleNamespace

import pytest

from analyzer.online import LOG_FIELDS_KEY
from analyzer.store.db import connect
from tests.support.cli import analyze
from tests.support.services import need, need_litellm
from tools.faulty_upstream import FaultyUpstream
from tools.litellm_proxy import LiteLLMProxy
from tools.litellm_week import (
    BUCKET,
    CALLS,
    LITELLM_ENV,
    PREFIX,
    config_yaml,
    drive,
    rungs_received,
    wait_for_objects,
)
from tools.loopback import free_port

pytestmark = pytest.mark.slow  # starts a LiteLLM proxy (about ten seconds) and drives the week through it

ACCESS_KEY = "AKIALITELLMTEST0001"
SECRET_KEY = "never-print-this-" + secrets.token_hex(12)


def _packages():
    """litellm, moto's server and boto3, imported when the module's first test runs, not when it is
    collected (litellm takes seconds to import, and the quick loop leaves this module out): a missing
    one skips, except under CI, where it fails."""
    need_litellm()
    for name in ("moto.server", "boto3"):
        need(name)


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    """The calls driven through one real LiteLLM, its objects in moto, analyzed from s3:// into a database."""
    import logging

    _packages()
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    tmp = tmp_path_factory.mktemp("litellm")
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
        s3.create_bucket(Bucket=BUCKET)
        with FaultyUpstream() as upstream:
            config = tmp / "config.yaml"
            config.write_text(config_yaml(upstream.url, endpoint, ACCESS_KEY, SECRET_KEY), encoding="utf-8")
            proxy = LiteLLMProxy(config, env=LITELLM_ENV)
            with proxy:
                try:
                    driven = drive(proxy, upstream)
                    keys = wait_for_objects(s3, expected=len(driven))
                except Exception:
                    print(proxy.tail(), file=sys.stderr)
                    raise
            errors = upstream.script_errors
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update({"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                    "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
                    "AWS_CONFIG_FILE": str(tmp / "no-config"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "no-creds"),
                    "AWS_EC2_METADATA_DISABLED": "true", "ANALYZER_S3_CACHE": str(tmp / "cache")})
        db = tmp / "litellm.duckdb"
        p = analyze(f"s3://{BUCKET}/{PREFIX}/", "--db", db, "--json", env=env)
        payloads = [json.loads(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys]
    finally:
        moto.stop()
    yield SimpleNamespace(driven=driven, keys=keys, payloads=payloads, db=db, run=p, script_errors=errors)


def _rows(db, sql: str, params=None) -> list[tuple]:
    con = connect(db, read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def test_litellm_wrote_one_object_per_call_and_the_analyzer_read_them_all(week):
    assert week.script_errors == []
    assert week.run.returncode == 0, week.run.stderr
    summary = json.loads(week.run.stdout)
    # one payload per call, two for the fallback whose first attempt failed
    fallback = [d for d in week.driven if d.call.name == "fallback"][0]
    assert Counter(p["litellm_call_id"] for p in week.payloads)[fallback.call_id] == 2
    assert len(week.keys) == len(week.driven) + 1
    assert summary["ingest"]["quarantined"] == 0 and summary["ingest"]["skipped_files"] == []
    assert summary["ingest"]["new_records"] == 2 * len(week.payloads)
    assert summary["turns"] == len(CALLS)
    assert SECRET_KEY not in week.run.stdout + week.run.stderr


def test_every_scripted_turn_is_in_its_scripted_class(week):
    got = dict(_rows(week.db, "SELECT request_id, incident_class FROM turns"))
    want = {d.call_id: d.call.expected for d in week.driven}
    wrong = {d.call.name: (got.get(d.call_id), d.call.expected) for d in week.driven
             if got.get(d.call_id) != d.call.expected}
    assert not wrong, wrong
    assert set(got) == set(want)


def test_the_fallbacks_first_attempt_is_kept_beside_its_turn(week):
    """LiteLLM logged the failed first attempt and the fallback's answer: one ok turn, the attempt listed."""
    fallback = [d for d in week.driven if d.call.name == "fallback"][0]
    p = analyze("sql", "gateway_attempts", "--db", week.db, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [(r["request_id"], r["attempts"], r["first_error"], r["incident_class"]) for r in rows] == \
        [(fallback.call_id, 2, "Provider returned 500: ", "ok")]


def test_litellms_status_is_not_what_classifies(week):
    """The empty 200s, the answer in reasoning, the leak: LiteLLM logged them all as success."""
    status = {p["litellm_call_id"]: p["status"] for p in week.payloads}
    names = ("empty-200", "answer-in-reasoning", "length", "leaked-think", "no-choices")
    checked = [d for d in week.driven if d.call.name in names]
    assert {d.call.name for d in checked} == set(names)  # a renamed call fails here, not silently
    for d in checked:
        assert status[d.call_id] == "success" and d.status == 200, d.call.name


def test_litellm_splits_an_opening_think_block_itself_but_not_a_dangling_one(week):
    by_name = {d.call.name: d.call_id for d in week.driven}
    message = {p["litellm_call_id"]: p["response"]["choices"][0]["message"] for p in week.payloads
               if p["status"] == "success" and p["response"].get("choices")}
    split = message[by_name["think-split-by-litellm"]]
    assert (split["content"], split.get("reasoning_content")) == ("Texas.", "Sum the rows.")
    assert message[by_name["leaked-think"]]["content"].endswith("</think>Texas.")


def test_the_ladder_recovered_inside_litellm_and_its_log_fields_reached_the_payload(week):
    ladder = {d.call_id: d for d in week.driven if d.call.model == "glm-5-ladder"}
    rows = {rid: (outcome, at, final) for rid, outcome, at, final in _rows(
        week.db, "SELECT request_id, ladder_outcome, recovered_at, recovered_class FROM turns")}
    for cid, d in ladder.items():
        outcome, at, final = rows[cid]
        assert (outcome, at) == (d.call.outcome, d.call.recovered_at), d.call.name
        if d.call.outcome == "recovered":
            assert d.status == 200 and final == "ok", d.call.name  # the client got the recovered answer
    # every ladder call's payload carries analyzer.online's log fields in its metadata, under the key
    # the reader looks for
    for p in week.payloads:
        fields = (p["metadata"].get("spend_logs_metadata") or {}).get(LOG_FIELDS_KEY)
        assert (fields is not None) == (p["litellm_call_id"] in ladder)
        if fields is not None:
            assert fields["log_fields_version"] == 4 and fields["ladder_armed"] in (True, None)
    # the leaked think block was split out before the client saw it
    leak = [d for d in ladder.values() if d.call.name == "ladder-leak-repaired"][0]
    repaired = _rows(week.db, "SELECT reasoning_repaired FROM turns WHERE request_id = ?", [leak.call_id])
    assert repaired == [(True,)]


def test_per_rung_figures_from_litellms_logs_equal_what_the_upstream_received(week):
    received = rungs_received(week.driven)
    ladders = sum(1 for d in week.driven if d.call.outcome is not None)
    assert received["original"] == ladders
    rows = _rows(week.db, "SELECT rung, count(*), count(*) FILTER (WHERE refused), count(*) FILTER (WHERE recovered) "
                          "FROM ladder_attempts GROUP BY rung")
    assert {rung: n for rung, n, _, _ in rows} == received
    # the sizing question, as a user asks it
    p = analyze("sql", "sizing_ladder_rungs", "--db", week.db, "--format", "json")
    assert p.returncode == 0, p.stderr
    per_rung: Counter = Counter()
    recovered: Counter = Counter()
    for r in json.loads(p.stdout):
        per_rung[r["rung"]] += r["reached"] + r["refused"]
        recovered[r["rung"]] += r["recovered"]
    started = sum({r["trigger"]: r["ladders"] for r in json.loads(p.stdout)}.values())
    assert started == ladders
    assert dict(per_rung) == {k: v for k, v in received.items() if k != "original"}
    want = Counter(d.call.recovered_at for d in week.driven if d.call.recovered_at)
    assert +recovered == want
    refused = {r["rung"]: r["refused"] for r in json.loads(p.stdout) if r["refused"]}
    assert refused == {"tool_choice_none": 1}


def test_before_and_after_split_litellm_sessions_by_what_their_records_say(week):
    eras = dict(_rows(week.db, "SELECT session_id, ladder_era FROM sessions"))
    assert {s for s, e in eras.items() if e == "with-ladder"} == {c.session for c in CALLS if
                                                                  c.model == "glm-5-ladder"}
    assert {s for s, e in eras.items() if e == "without-ladder"} == {c.session for c in CALLS
                                                                     if c.model != "glm-5-ladder"}
