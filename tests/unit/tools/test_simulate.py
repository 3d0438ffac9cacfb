"""Tests of tools.simulator: the synthetic week must be deterministic, well-formed
and shaped exactly like what the real proxy writes (docs/log-format.md)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import tools.simulator as sim
from tools.simulator.clock import iso, to_us
from tools.simulator.writers.parquet import PARQUET_COLUMNS
from tests.support.repo import REPO

SAMPLE = REPO / "sample_logs"
# Key orders of records the real proxy wrote, kept in the project's own fixtures.
REAL_KEY_ORDERS = REPO / "tests" / "fixtures" / "real_proxy_key_orders.json"

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
CUT = re.compile(r"…\(\+(\d+) chars\)$")

# Key order per record kind, as llm_proxy.py writes them (and as the real proxy's
# records show: tests/fixtures/real_proxy_key_orders.json). Optional keys are in
# brackets in the comments.
COMMON = ["timestamp", "type", "request_id", "session_id", "client", "provider", "model", "origin"]
REQUEST_KEYS = COMMON + ["message_count", "tools_count", "enable_thinking", "user_question",
                         "user_message_this_turn", "tool_results_this_turn"]  # [messages]
SUCCESS_KEYS = COMMON + ["latency_ms", "has_content", "has_tool_calls", "has_reasoning_content", "content",
                         "reasoning_content", "content_preview", "reasoning_content_preview"]
SUCCESS_OPTIONAL = ["tool_calls", "tool_call_dialect_repaired", "tokens"]
ERROR_KEYS = COMMON + ["latency_ms", "error"]  # [upstream_headers]
SYSTEM_PROMPT_KEYS = ["timestamp", "type", "origin", "system_sha256", "content"]
HEADER_ORDER = ["retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
                "x-request-id", "server", "date", "content-length"]
VLLM_TOKEN_KEYS = ["prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details"]
REJECTED_PROVIDERS = {"unrouted", "streaming-unsupported"}


def _log_field_keys() -> list[str]:
    from analyzer.online import log_fields

    return list(log_fields({"model": "glm-5", "messages": []}, 200, b"{}"))


@pytest.fixture(scope="module")
def week() -> sim.SimulatedWeek:
    """A small full week: every scenario item, few sessions (fast)."""
    return sim.simulate_week(seed=5, sessions=90)


@pytest.fixture(scope="module")
def records(week) -> list[dict]:
    return list(week.records())


@pytest.fixture(scope="module")
def truth(week) -> dict[str, sim.Truth]:
    return {t.request_id: t for t in week.truth()}


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _write_all(week: sim.SimulatedWeek, out: Path) -> None:
    s3 = sim.write_s3_chunks(week, out / "s3", malformed=True)
    sim.write_kubectl_stdout(week, out / "kubectl")
    sim.write_prometheus_exports(week, out / "metrics")
    sim.write_consolidated_parquet(sim.records_on(week, "2026-11-16"), out / "daily.parquet")
    sim.write_ground_truth(week, out / "ground_truth.json", malformed=s3.malformed)


def _s3_lines(root: Path):
    for path in sorted(root.rglob("*.jsonl")):
        for n, line in enumerate(path.read_bytes().split(b"\n"), start=1):
            if line:
                yield path, n, line


# ---------------------------------------------------------------------------
# Determinism


def test_same_seed_gives_the_same_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write_all(sim.simulate_week(seed=11, sessions=40), a)
    _write_all(sim.simulate_week(seed=11, sessions=40), b)
    digest = _tree_digest(a)
    assert digest == _tree_digest(b)
    assert any(k.startswith("s3/") for k in digest) and any(k.startswith("kubectl/") for k in digest)


def test_a_week_regenerates_identically_and_seeds_differ():
    w = sim.simulate_week(seed=2, sessions=30)
    first = [json.dumps(r) for r in w.records()]
    assert first == [json.dumps(r) for r in w.records()]
    other = [json.dumps(r) for r in sim.simulate_week(seed=3, sessions=30).records()]
    assert first != other


def test_simulation_is_lazy_and_streams():
    w = sim.simulate_week(seed=1, sessions=10**6)  # nothing is generated yet
    it = w.records()
    first = [next(it) for _ in range(200)]
    assert all(r["timestamp"] <= s["timestamp"] or s["type"] == "request"
               for r, s in zip(first, first[1:]))


# ---------------------------------------------------------------------------
# Records


def test_records_are_in_time_order_with_z_timestamps(records):
    previous = ""
    for i, rec in enumerate(records):
        assert TS.match(rec["timestamp"]), rec["timestamp"]
        if rec["type"] == "system_prompt":
            # Logged inside log_request after the request's timestamp was taken,
            # but buffered before the request: the one allowed inversion.
            assert records[i + 1]["type"] == "request"
            assert records[i + 1]["timestamp"] <= rec["timestamp"]
            continue
        assert rec["timestamp"] >= previous
        previous = rec["timestamp"]


def test_request_ids_are_unique_and_hex(records):
    requests = [r["request_id"] for r in records if r["type"] == "request"]
    assert len(requests) == len(set(requests))
    assert all(re.fullmatch(r"[0-9a-f]{8}", rid) for rid in requests)


def test_requests_and_responses_pair(records, truth):
    requests = {r["request_id"]: r for r in records if r["type"] == "request"}
    responses = Counter(r["request_id"] for r in records if r["type"] == "response")
    assert max(responses.values()) == 1
    for rec in records:
        if rec["type"] != "response" or rec["request_id"] in requests:
            continue
        # Only refusals before log_request have no request record.
        assert rec["provider"] in REJECTED_PROVIDERS or "API key not configured" in rec["error"], rec
        assert rec["latency_ms"] == 0
    for rid, req in requests.items():
        answered = rid in responses
        assert answered == (truth[rid].cls != "unanswered"), rid
        for key in ("session_id", "client", "provider", "model", "origin"):
            if answered:
                resp = next(r for r in records if r["type"] == "response" and r["request_id"] == rid)
                assert resp[key] == req[key]
                assert resp["timestamp"] >= req["timestamp"]
    assert set(truth) == set(requests) | set(responses)


def test_record_shapes_match_the_real_proxy(records):
    extra = _log_field_keys()
    seen = Counter()
    for rec in records:
        keys = list(rec)
        kind = rec["type"]
        if kind == "system_prompt":
            assert keys == SYSTEM_PROMPT_KEYS
        elif kind == "request":
            assert keys in (REQUEST_KEYS, REQUEST_KEYS + ["messages"]), keys
        else:
            # Ladder-day records end with the online module's fields, all of them.
            if keys[-len(extra):] == extra:
                keys = keys[:-len(extra)]
                seen["ladder-day"] += 1
            if "error" in rec:
                assert keys in (ERROR_KEYS, ERROR_KEYS + ["upstream_headers"]), keys
                headers = rec.get("upstream_headers")
                if headers:
                    assert list(headers) == [h for h in HEADER_ORDER if h in headers]
                    assert all(isinstance(v, str) for v in headers.values())
                seen["error"] += 1
            else:
                assert keys[:len(SUCCESS_KEYS)] == SUCCESS_KEYS, keys
                tail = keys[len(SUCCESS_KEYS):]
                assert tail == [k for k in SUCCESS_OPTIONAL if k in tail], keys
                assert rec["content_preview"] == rec["content"][:200]
                assert rec["reasoning_content_preview"] == rec["reasoning_content"][:200]
                assert len(rec["reasoning_content"]) <= 4000
                if rec["provider"] in ("nrp", "nimbus"):
                    assert list(rec["tokens"]) == VLLM_TOKEN_KEYS
                seen["success"] += 1
        seen[kind] += 1
    assert seen["ladder-day"] and seen["error"] and seen["success"] and seen["system_prompt"]


def test_key_orders_equal_the_real_proxys():
    orders = json.loads(REAL_KEY_ORDERS.read_text(encoding="utf-8"))["orders"]
    assert orders["request"] == [REQUEST_KEYS]
    assert sorted(orders["error"]) == sorted([ERROR_KEYS, ERROR_KEYS + ["upstream_headers"]])
    for keys in orders["success"]:
        assert keys[:len(SUCCESS_KEYS)] == SUCCESS_KEYS
        assert set(keys[len(SUCCESS_KEYS):]) <= set(SUCCESS_OPTIONAL)


def test_turn_semantics(records, truth):
    by_session = defaultdict(list)
    for rec in records:
        if rec["type"] == "request" and rec["session_id"]:
            by_session[rec["session_id"]].append(rec)
    grew = retries = 0
    for reqs in by_session.values():
        assert len({r["user_question"] for r in reqs}) == 1
        for prev, cur in zip(reqs, reqs[1:]):
            assert cur["message_count"] >= prev["message_count"]
            grew += cur["message_count"] > prev["message_count"]
            retry_of = truth[cur["request_id"]].retry_of
            if retry_of:
                assert retry_of == prev["request_id"]
                assert cur["message_count"] == prev["message_count"]
                assert cur["user_message_this_turn"] == prev["user_message_this_turn"]
                assert truth[prev["request_id"]].cls != "ok" or prev["request_id"] not in truth
                retries += 1
    assert grew and retries
    for rec in records:
        if rec["type"] == "request" and rec["tool_results_this_turn"]:
            assert truth[rec["request_id"]].tool_history
            assert all(r["tool_call_id"].startswith("chatcmpl-tool-") for r in rec["tool_results_this_turn"])


def test_full_capture_messages(records):
    prompts = {r["system_sha256"]: r for r in records if r["type"] == "system_prompt"}
    full = [r for r in records if r["type"] == "request" and "messages" in r]
    assert full and prompts
    for rec in full:
        msgs = rec["messages"]
        assert len(msgs) == rec["message_count"]
        system = msgs[0]
        assert list(system) == ["role", "system_sha256", "content_len", "_dedup"]
        assert system["_dedup"] is True
        prompt = prompts[system["system_sha256"]]
        assert hashlib.sha256(prompt["content"].encode()).hexdigest() == system["system_sha256"]
        assert len(prompt["content"]) == system["content_len"]
        assert msgs[-1]["role"] in ("user", "tool")
        assert not any(m["role"] == "system" and "content" in m for m in msgs)
    assert any(m.get("tool_calls") for r in full for m in r["messages"])


# ---------------------------------------------------------------------------
# Ground truth and the online classifier


def test_truth_agrees_with_the_online_classifier(records, truth):
    """Classify every answered turn from its record with analyzer.online's rule.

    The analyzer infers tool history from earlier turns; here the truth provides it.
    """
    from analyzer.online import TurnFeatures, decide, has_leaked_think_block, is_blank, parse_error

    windows = {"wedged-pod", "pod-down", "unanswered"}
    checked = Counter()
    for rec in records:
        if rec["type"] != "response":
            continue
        t = truth[rec["request_id"]]
        if t.cls in windows:
            continue
        if "incident_class" in rec:  # ladder days: the logged class is the original answer's
            assert rec["incident_class"] == t.cls, (rec, t)
            checked["logged"] += 1
            continue
        kind, status = parse_error(rec.get("error"), rec["provider"])
        feats = TurnFeatures(
            status=status if rec.get("error") else 200,
            has_content=rec.get("has_content"),
            has_tool_calls=rec.get("has_tool_calls"),
            tool_history=t.tool_history,
            has_reasoning=rec.get("has_reasoning_content"),
            has_reasoning_text=None if rec.get("error") else not is_blank(rec.get("reasoning_content")),
            reasoning_leaked=has_leaked_think_block(rec.get("content")),
            reasoning_at_cap=None if rec.get("error") else len(rec.get("reasoning_content") or "") >= 4000,
            completion_tokens=(rec.get("tokens") or {}).get("completion_tokens"),
            error_kind=kind,
            evidence="inferred",
        )
        assert decide(feats).incident_class == t.cls, (rec, t)
        checked[t.cls] += 1
    assert checked["logged"] and checked["ok"]


def test_window_classes_fall_inside_their_episodes(week, truth):
    episodes = {(e.kind, e.model_name): [] for e in week.episodes}
    for e in week.episodes:
        episodes[(e.kind, e.model_name)].append((e.start, e.end))
    for t in truth.values():
        ts = datetime.fromisoformat(t.ts.replace("Z", "+00:00"))
        for cls, kind in (("wedged-pod", "wedged"), ("pod-down", "down")):
            inside = any(s <= ts < e for s, e in episodes.get((kind, t.model), []))
            if t.cls == cls:
                assert inside, t
    # Nothing of the quiet model runs in the quiet window.
    quiet = next(e for e in week.non_episodes if e.kind == "quiet")
    for t in truth.values():
        ts = datetime.fromisoformat(t.ts.replace("Z", "+00:00"))
        assert not (t.model == quiet.model_name and quiet.start <= ts < quiet.end), t


def test_ladder_days_carry_the_online_fields(records, truth, week):
    ladder_from = next(p.accepts_from for p in week.processes if p.version == "ladder")
    cutoff = iso(to_us(ladder_from) + 1_300 * 1_000_000)  # after the old pod drained
    extra = _log_field_keys()
    late = [r for r in records if r["type"] == "response" and r["timestamp"] > cutoff]
    assert late and all(list(r)[-len(extra):] == extra for r in late)
    early = [r for r in records if r["type"] == "response" and r["timestamp"] < iso(to_us(ladder_from))]
    assert early and not any("incident_class" in r for r in early)
    ladders = [r["ladder"] for r in late if r["ladder"]]
    assert ladders, "the ladder should trigger at least once"
    for lad in ladders:
        assert lad["attempts"][0]["rung"] == "original"
        if lad["outcome"] == "recovered":
            assert lad["attempts"][-1]["rung"] == lad["recovered_at"]


def test_a_wedge_on_a_ladder_day_is_never_recovered():
    start = sim.DEFAULT_START
    wedge = sim.Episode("wedged", "glm-5", "glm-5-vllm-6f9c7d8b5-k7m2q",
                        start + timedelta(days=5, hours=17), start + timedelta(days=5, hours=23))
    week = sim.simulate_week(seed=8, sessions=400, episodes=[wedge])
    s, e = iso(to_us(wedge.start)), iso(to_us(wedge.end))
    inside = 0
    truth = {t.request_id: t for t in week.truth()}
    for rec in week.records():
        if rec["type"] == "response" and rec["model"] == "glm-5" and s <= truth[rec["request_id"]].ts < e:
            inside += 1
            assert truth[rec["request_id"]].cls in ("wedged-pod", "client-cancelled"), rec
            assert "error" in rec
            if rec.get("ladder"):
                assert rec["ladder"]["outcome"] != "recovered"
    assert inside


# ---------------------------------------------------------------------------
# The written forms


def test_s3_chunks_parse_and_name_like_the_proxy(tmp_path, week, records):
    result = sim.write_s3_chunks(week, tmp_path)
    assert result.records == len(records) and not result.malformed
    lines = [json.loads(line) for _, _, line in _s3_lines(tmp_path)]
    assert lines == records
    legacy = re.compile(r"^\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-\d+\.jsonl$")
    modern = re.compile(r"^\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-glm-proxy-[0-9a-z]+-[0-9a-z]+-\d+-[0-9a-f]{8}\.jsonl$")
    assert all(legacy.match(f) or modern.match(f) for f in result.files)
    assert any(legacy.match(f) for f in result.files) and any(modern.match(f) for f in result.files)
    assert len(result.files) == len(set(result.files))


def test_malformed_lines_are_reported(tmp_path, week):
    result = sim.write_s3_chunks(week, tmp_path, malformed=True)
    bad = []
    for path, n, line in _s3_lines(tmp_path):
        try:
            json.loads(line)
        except ValueError:
            bad.append((str(path.relative_to(tmp_path)), n))
    assert sorted(bad) == sorted((m["file"], m["line"]) for m in result.malformed)
    assert {m["kind"] for m in result.malformed} == {"truncated", "garbage"}
    cut = next(m for m in result.malformed if m["kind"] == "truncated")
    assert not (tmp_path / cut["file"]).read_bytes().endswith(b"\n")


def _stdout_records(path: Path) -> list[tuple[str, dict]]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            for prefix in ("📥 REQUEST: ", "✓ RESPONSE: ", "✗ RESPONSE: "):
                if line.startswith(prefix):
                    out.append((prefix, json.loads(line[len(prefix):])))
    return out


def test_stdout_cuts_strings_and_overlaps_s3(tmp_path, week, records):
    files = sim.write_kubectl_stdout(week, tmp_path)
    assert files and all(p.name.startswith("glm-proxy-") and p.name.endswith(".log.gz") for p in files)
    by_key = {(r["type"], r.get("request_id")): r for r in records if r["type"] != "system_prompt"}
    seen, cut = set(), 0
    for path in files:
        for prefix, view in _stdout_records(path):
            key = (view["type"], view["request_id"])
            assert key not in seen
            seen.add(key)
            full = by_key[key]
            assert "messages" not in view
            assert prefix == ("📥 REQUEST: " if view["type"] == "request"
                              else "✗ RESPONSE: " if "error" in full else "✓ RESPONSE: ")
            assert view == sim.stdout_view(full)
            assert list(view) == [k for k in full if k != "messages"]
            for k, v in view.items():
                if isinstance(v, str) and len(full[k]) > 200:
                    m = CUT.search(v)
                    assert m and v.startswith(full[k][:200]) and int(m.group(1)) == len(full[k]) - 200
                    cut += 1
    assert seen == set(by_key) and cut
    text = ""
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            text += f.read()
    assert "🚀 Multi-Provider LLM Proxy Starting" in text and "✓ Flushed " in text
    assert re.search(r'^INFO:     [\d.]+:\d+ - "POST /v1/chat/completions HTTP/1.1" 200 OK$', text, re.M)
    assert "\\u2026(+" in text  # json.dumps escapes the ellipsis, as the proxy's print does


def test_stdout_flush_lines_match_the_s3_chunks(tmp_path, week):
    s3 = sim.write_s3_chunks(week, tmp_path / "s3")
    files = sim.write_kubectl_stdout(week, tmp_path / "k")
    flushed = {}
    for path in files:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                m = re.match(r"✓ Flushed (\d+) log entries to s3://logs-open-llm-proxy/(\S+)$", line)
                if m:
                    flushed[m.group(2)] = int(m.group(1))
    assert set(flushed) == set(s3.files)
    for key, n in flushed.items():
        assert n == len((tmp_path / "s3" / key).read_text().splitlines())


def test_stdout_without_s3_prints_full_records(tmp_path):
    week = sim.simulate_week(seed=4, sessions=20, days=1)
    recs = [r for r in week.records() if r["type"] != "system_prompt"]
    path = tmp_path / "pod.log"
    sim.write_kubectl_stdout(recs, path, s3_enabled=False)
    printed = [line.split(": ", 1)[1] for line in path.read_text(encoding="utf-8").splitlines()
               if line.startswith(("📥 REQUEST: ", "✓ RESPONSE: ", "✗ RESPONSE: "))]
    assert printed == [json.dumps(r) for r in recs]
    assert "✓ Flushed" not in path.read_text(encoding="utf-8")


def test_consolidated_parquet(tmp_path, week):
    duckdb = pytest.importorskip("duckdb")
    day = list(sim.records_on(week, "2026-11-16"))
    n = sim.write_consolidated_parquet(iter(day), tmp_path / "d.parquet")
    assert n == len(day)
    con = duckdb.connect()
    rel = con.sql(f"SELECT * FROM read_parquet('{tmp_path / 'd.parquet'}')")
    assert rel.columns == list(PARQUET_COLUMNS)
    rows = rel.fetchall()
    assert len(rows) == len(day)
    assert sorted(json.loads(r[-1])["timestamp"] for r in rows) == [json.loads(r[-1])["timestamp"] for r in rows]
    originals = {json.dumps(r) for r in day}
    assert all(r[-1] in originals for r in rows)
    types = dict(con.sql(f"DESCRIBE SELECT * FROM read_parquet('{tmp_path / 'd.parquet'}')").fetchall()[i][:2]
                 for i in range(len(PARQUET_COLUMNS)))
    assert types["ts"] == "TIMESTAMP WITH TIME ZONE"
    sim.write_consolidated_parquet(iter(day), tmp_path / "legacy.parquet", legacy=True)
    assert con.sql(f"SELECT * FROM read_parquet('{tmp_path / 'legacy.parquet'}')").columns == [
        "ts", "type", "request_id", "origin", "entry"]


def test_prometheus_exports_show_the_episodes(tmp_path, week):
    files = sim.write_prometheus_exports(week, tmp_path)
    docs = {p.name: json.loads(p.read_text()) for p in files}
    for doc in docs.values():
        assert doc["status"] == "success" and doc["data"]["resultType"] == "matrix"
        for series in doc["data"]["result"]:
            assert {"__name__", "model_name", "pod", "instance", "job"} <= set(series["metric"])
            ts = [t for t, _ in series["values"]]
            assert ts == sorted(ts) and all(t % 30 == 0 for t in ts)
            assert all(isinstance(v, str) for _, v in series["values"])

    def series(name, pod):
        doc = docs[name]
        s = next(s for s in doc["data"]["result"] if s["metric"]["pod"] == pod)
        return {t: float(v) for t, v in s["values"]}

    def unix(dt):
        return int(dt.timestamp())

    for ep in week.episodes:
        up = series("up.json", ep.pod)
        inside = [t for t in up if unix(ep.start) <= t < unix(ep.end)]
        assert inside
        if ep.kind == "down":
            assert all(up[t] == 0 for t in inside)
            gen = series("vllm_generation_tokens_total.json", ep.pod)
            assert not any(t in gen for t in inside)
        else:
            assert all(up[t] == 1 for t in inside)
            gen = series("vllm_generation_tokens_total.json", ep.pod)
            run = series("vllm_num_requests_running.json", ep.pod)
            wait = series("vllm_num_requests_waiting.json", ep.pod)
            assert len({gen[t] for t in inside}) == 1  # flat
            if ep.frozen:  # the engine hung before its gauges updated: they read 0 under demand
                assert all(run[t] == 0 and wait[t] == 0 for t in inside)
            else:
                assert all(run[t] > 0 for t in inside)  # while there is demand
    quiet = next(e for e in week.non_episodes if e.kind == "quiet")
    gen = series("vllm_generation_tokens_total.json", quiet.pod)
    run = series("vllm_num_requests_running.json", quiet.pod)
    wait = series("vllm_num_requests_waiting.json", quiet.pod)
    inside = [t for t in gen if unix(quiet.start) + 60 <= t < unix(quiet.end)]
    assert len({gen[t] for t in inside}) == 1 and not any(run[t] or wait[t] for t in inside)
    restart = next(e for e in week.non_episodes if e.kind == "restart")
    gen = series("vllm_generation_tokens_total.json", restart.pod)
    before = max(t for t in gen if t < unix(restart.start))
    after = min(t for t in gen if t >= unix(restart.start))
    assert gen[after] < gen[before] / 1000  # a counter reset
    gap = next(e for e in week.non_episodes if e.kind == "scrape-gap")
    assert not any(unix(gap.start) <= t < unix(gap.end) for t in series("up.json", restart.pod))


def test_ground_truth_file(tmp_path, week, truth):
    summary = sim.write_ground_truth(week, tmp_path / "gt.json", malformed=[{"file": "x", "line": 1}])
    doc = json.loads((tmp_path / "gt.json").read_text())
    assert doc["malformed"] == [{"file": "x", "line": 1}]
    assert {e["kind"] for e in doc["episodes"]} == {"wedged", "down"}
    assert set(doc["requests"]) == set(truth)
    assert doc["class_counts"] == summary["class_counts"]
    assert sum(sum(c.values()) for c in doc["class_counts"].values()) == len(truth)


def test_import_needs_only_the_standard_library():
    code = ("import sys, tools.simulator; "
            "bad = [m for m in ('duckdb', 'polars', 'pyarrow', 'httpx', 'pydantic') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------
# The committed sample


@pytest.mark.skipif(not (SAMPLE / "ground_truth.json").exists(), reason="sample_logs not generated")
def test_sample_week_has_every_class_and_episode():
    doc = json.loads((SAMPLE / "ground_truth.json").read_text())
    classes = Counter()
    for per_model in doc["class_counts"].values():
        classes.update(per_model)
    expected = {"ok", "tool-history-5xx", "empty-200-stop", "length-with-no-content", "wedged-pod", "pod-down",
                "timeout", "connection-error", "other-5xx", "rate-limited", "client-error", "client-cancelled",
                "unanswered", "tool-call-stop-mismatch"}
    assert expected <= set(classes)
    glm = doc["class_counts"]["glm-5"]
    assert glm["tool-history-5xx"] > glm.get("other-5xx", 0)  # concentrated in tool sessions
    assert [e["kind"] for e in doc["episodes"]] == ["wedged", "wedged", "down"]
    assert {m["kind"] for m in doc["malformed"]} == {"truncated", "garbage"}
    assert len(list((SAMPLE / "s3").rglob("*.jsonl"))) < 1000
    size = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert size < 12 * 1024 * 1024


@pytest.mark.skipif(not (SAMPLE / "ground_truth.json").exists(), reason="sample_logs not generated")
def test_sample_logs_are_up_to_date(tmp_path):
    """sample_logs/ is exactly what generate.py writes (regenerate it after changing the simulator)."""
    subprocess.run([sys.executable, str(SAMPLE / "generate.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True, cwd=REPO)
    fresh = _tree_digest(tmp_path)
    committed = {k: v for k, v in _tree_digest(SAMPLE).items()
                 if k.split("/")[0] in ("s3", "kubectl", "consolidated", "metrics", "ground_truth.json")}
    assert fresh == committed
