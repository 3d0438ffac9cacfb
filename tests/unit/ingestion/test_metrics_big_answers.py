"""Huge Prometheus answers in bounded memory: the hostile input, as a file and from a live server.

A ``query_range`` answer of 20 MB (``tools.big_prometheus``), loaded twice, stays
under 0.8 GB of peak RSS: a JSON file is walked a series at a time
(``analyzer.ingestion.apistream``) and a live answer over 16 MiB is asked again in
pages of time (shown here with smaller pages). The real CLI runs in a child
process; its own peak RSS comes from ``wait4`` (through a small launcher:
tests/support/peak_rss.py says why). The
100 MB answer's bound (1.5 GB) is a big-data check: ``benchmarks/big_prometheus.py``
measures it and says PASS or MISS; these are the small-data proofs of the same paths.
Besides: the pages ask exactly the points one query would, a page too big for a
single instant is refused with a way out, and the series walk reads every layout of
an answer, and refuses what is not one with the reason.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest

from analyzer.store.db import connect
from analyzer.core.errors import AnalyzerError, ExitCode, InputError
from analyzer.jobs.metrics import load_metrics, load_prometheus
from analyzer.ingestion import apistream
from analyzer.ingestion.metric_readers import stage_file
from analyzer.io import prometheus
from analyzer.ingestion.metric_stage import Series, close_stage, open_stage
from tools.big_prometheus import Spec, serve, spec_for_bytes, write_answer, write_logs
from tests.support.peak_rss import run_with_peak_rss
from tests.support.repo import REPO

ROOT = REPO
MB = 1 << 20


def _analyze(tmp: Path, db: Path, logs: Path, *metrics: str) -> tuple[dict, int, str]:
    """``analyze --json LOGS ...`` in a child: its summary, its own peak RSS (bytes) and stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done, rss = run_with_peak_rss([sys.executable, "-m", "analyzer", "--db", str(db), "--json", str(logs), *metrics],
                                  cwd=tmp, env=env)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-2000:]
    return json.loads(done.stdout), rss, stderr


def _live(url: str, spec: Spec) -> list[str]:
    from datetime import datetime, timezone

    def iso(t: int) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    return ["--prometheus", url, "--since", iso(spec.t0), "--until", iso(spec.end)]


def _load(summary: dict) -> dict:
    (load,) = summary["metrics"]["loads"]
    return load


def _stored(db: Path) -> tuple[int, int]:
    con = connect(db)
    try:
        return con.execute("SELECT count(*), count(DISTINCT (series_id, ts)) FROM metric_points").fetchall()[0]
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("form", ["file", "live"])
def test_a_20mb_answer_loaded_twice_is_stored_once_in_a_third_of_the_old_memory(tmp_path, form):
    """20 MB took 1.2 GB (file) and 1.0 GB (live) of peak RSS before; it now stays well under 0.8 GB."""
    spec = spec_for_bytes(20 * MB)
    logs = write_logs(tmp_path / "logs.jsonl", spec)
    db = tmp_path / "a.duckdb"
    with serve(spec) as url:
        if form == "file":
            write_answer(tmp_path / "big.json", spec)
            metrics = ["--metrics", str(tmp_path / "big.json")]
        else:
            metrics = _live(url, spec)
        first, rss, _ = _analyze(tmp_path, db, logs, *metrics)
        again, rss_again, _ = _analyze(tmp_path, db, logs, *metrics)
    assert (_load(first)["samples_new"], _load(first)["duplicates"]) == (spec.samples, 0)
    assert (_load(again)["samples_new"], _load(again)["duplicates"]) == (0, spec.samples)
    assert _stored(db) == (spec.samples, spec.samples)
    assert max(rss, rss_again) < 0.8e9, f"peak RSS {rss / 1e6:.0f} / {rss_again / 1e6:.0f} MB"


def _digest(con) -> tuple:
    return con.execute("""SELECT count(*), sum(hash(metric, pod, labels::VARCHAR, ts, value, model_name, instance, job))
                          FROM metric_samples""").fetchall()[0]


@pytest.mark.slow
def test_pages_ask_exactly_the_points_of_one_query_and_store_what_a_file_stores(tmp_path, monkeypatch):
    spec = Spec(pods=4, points=3000)
    file = tmp_path / "answer.json"
    write_answer(file, spec)
    digests, warnings = {}, {}
    for how in ("file", "one query", "pages"):
        con = connect(tmp_path / f"{how}.duckdb")
        try:
            if how == "file":
                report = load_metrics(con, [str(file)])
            else:
                if how == "pages":  # 64 KiB per answer: every query is paged, some pages shrink
                    monkeypatch.setattr(prometheus, "PAGE_BYTES", 64 * 1024)
                with serve(spec) as url:
                    report = load_prometheus(con, url, spec.t0, spec.end, step=spec.step)
            digests[how] = _digest(con)
            warnings[how] = report.warnings
        finally:
            con.close()
    assert digests["file"][0] == spec.samples
    assert digests["one query"] == digests["file"] == digests["pages"]
    assert warnings["one query"] == []
    (paged,) = warnings["pages"]
    assert "7 of 7 queries asked over shorter spans of time" in paged and "0.0625 MiB each" in paged
    assert "--prometheus-selector" in paged  # and what narrows them


def test_an_answer_too_big_for_a_single_instant_is_refused_with_a_way_to_narrow_it(tmp_path, monkeypatch):
    """A server that sends every point whatever the range (or a Prometheus with too many
    series) is refused after a few shrinking pages, never read whole."""
    spec = Spec(pods=20, points=2000)  # about 1.5 MB per metric, whatever is asked
    monkeypatch.setattr(prometheus, "PAGE_BYTES", 64 * 1024)
    con = connect(tmp_path / "a.duckdb")
    try:
        with serve(spec, ignore_range=True) as url:
            with pytest.raises(AnalyzerError) as err:
                load_prometheus(con, url, spec.t0, spec.end, step=spec.step)
        assert con.execute("SELECT count(*) FROM metric_points").fetchall() == [(0,)]
    finally:
        con.close()
    message = str(err.value)
    assert err.value.exit_code == ExitCode.USAGE
    assert "more than 0.0625 MiB" in message and "single instant" in message and "--prometheus-selector" in message


# ---------------------------------------------------------------------------
# The series walk reads what the usual readers read


def _staged(path: Path) -> tuple:
    """("ok", the staged rows: metric, labels and pod of the series, time, value) or ("error", the message)."""
    con = open_stage()
    try:
        series = Series()
        try:
            stage_file(con, path, series)
        except InputError as exc:
            return ("error", str(exc))
        rows = con.execute("""
            SELECT st.metric, l.sid, st.ts_us, st.value::VARCHAR FROM _metric_stage st
            LEFT JOIN _metric_labels l ON l.label_key = st.label_key ORDER BY st.ord, st.rowid""").fetchall()
        return ("ok", [(m, series.rows[sid][1:3] if sid is not None else None, t, v) for m, sid, t, v in rows])
    finally:
        close_stage(con)


def _write(path: Path, doc, packed: bool = False) -> Path:
    text = doc if isinstance(doc, str) else json.dumps(doc, ensure_ascii=False)
    path.write_bytes(gzip.compress(text.encode()) if packed else text.encode())
    return path


def _series(**labels) -> dict:
    return {"metric": {"__name__": "vllm:generation_tokens_total", "pod": "p1", **labels},
            "values": [[1800000000, "1"], [1800000015.5, "2.5"], [1800000030.25, "NaN"]]}


def _ok(result, kind="matrix") -> dict:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


#: One series and an expression's in every layout of an answer: each stages the same rows.
LAYOUTS = {
    "one answer": _ok([_series(), {"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}]),
    "a list of one answer": [_ok([_series(), {"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}])],
    "a list in a list": [[_ok([_series(), {"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}])]],
    "two answers in a list": [_ok([_series()]), _ok([{"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}])],
    "two answers, one per line": json.dumps(_ok([_series()])) + "\n" + json.dumps(
        _ok([{"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}])) + "\n",
    "warnings after data": {**_ok([_series(), {"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}]),
                            "warnings": ["w"], "infos": ["i"]},
    "status after data": {"data": {"resultType": "matrix", "result": [
        _series(), {"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}]}, "status": "success"},
    "bare data": {"resultType": "matrix", "result": [_series(), {"metric": {"pod": "p1"},
                                                                 "values": [[1800000000, "4"]]}]},
    "result before resultType": {"status": "success", "data": {"result": [
        _series(), {"metric": {"pod": "p1"}, "values": [[1800000000, "4"]]}], "resultType": "matrix"}},
}


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_the_series_walk_reads_every_layout_of_an_answer_alike(tmp_path, packed):
    staged = {name: _staged(_write(tmp_path / (f"{i}.json" + (".gz" if packed else "")), doc, packed))
              for i, (name, doc) in enumerate(LAYOUTS.items())}
    labels = ('{"pod":"p1"}', "p1")
    expected = ("ok", [("vllm:generation_tokens_total", labels, 1800000000_000000, "1.0"),
                       ("vllm:generation_tokens_total", labels, 1800000015_500000, "2.5"),
                       ("vllm:generation_tokens_total", labels, 1800000030_250000, "nan"),
                       ("", labels, 1800000000_000000, "4.0")])  # no name: staged, never stored
    assert staged == {name: expected for name in LAYOUTS}


#: Other answers: how many points each stages, or the reason it is refused.
SHAPES = {
    "vector": (_ok([{"metric": {"__name__": "up", "pod": "p"}, "value": [1800000000, "1"]},
                    {"metric": {"__name__": "up"}, "value": None}], "vector"), 1),
    "null result": (_ok(None), 0),
    "times as text, int labels": (_ok([{"metric": {"__name__": "up", "pod": 5},
                                        "values": [["1800000000.25", "1"]]}]), 1),
    "no metric object": (_ok([{"values": [[1800000000, "1"]]}]), 1),
    "unicode labels": (_ok([_series(pod="pöd ✓")]), 3),
    "empty": ("", 0),
    "empty list": ("[]", 0),
    "an error response": ({"status": "error", "errorType": "bad_data", "error": "nope"}, "bad_data: nope"),
    "a scalar result": ({"status": "success", "data": {"resultType": "scalar", "result": [1, "2"]}},
                        "unsupported Prometheus resultType 'scalar'"),
    "a value that is not a number": (_ok([{"metric": {"__name__": "up"}, "values": [[1800000000, "x"]]}]),
                                     "a value that is not a number"),
    "a null value": (_ok([{"metric": {"__name__": "up"}, "values": [[1800000000, None]]}]), "a value that is null"),
    "a point without a value": (_ok([{"metric": {"__name__": "up"}, "values": [[1800000000]]}]),
                                "a point is not [time, value]"),
    "no data": ({"status": "success"}, "no data.result"),
    "a dict result": (_ok({"a": 1}), "malformed matrix result"),
    "a number": ("5", "expected a JSON object"),
    "truncated": (json.dumps(_ok([_series()]))[:-10], "not valid JSON"),
    "trailing text": (json.dumps(_ok([_series()])) + " trailing", "not valid JSON"),
}


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_series_walk_stages_an_answer_or_says_why_not(tmp_path, shape, packed):
    doc, expected = SHAPES[shape]
    path = _write(tmp_path / ("answer.json.gz" if packed else "answer.json"), doc, packed)
    staged = _staged(path)
    if isinstance(expected, int):
        assert staged[0] == "ok" and len(staged[1]) == expected, staged
    else:
        assert staged[0] == "error" and f"{path}: not a valid prometheus-json metrics file" in staged[1], staged
        assert expected in staged[1], staged


def test_a_series_cut_by_the_read_buffer_is_read_whole(tmp_path, monkeypatch):
    """Series longer than the walk's read size, numbers cut at a buffer's end: the same points."""
    spec = Spec(pods=2, points=50)
    write_answer(tmp_path / "answer.json", spec)
    whole = _staged(tmp_path / "answer.json")
    monkeypatch.setattr(apistream, "READ_BYTES", 7)
    assert _staged(tmp_path / "answer.json") == whole and len(whole[1]) == spec.samples
