"""The sample week against its ground truth, turn by turn, in each form the real proxy writes.

The week holds every class of the design, the GLM shapes of late 2026 among them
(answers filed as reasoning, a 0-token reasoning turn, scratchpads leaked into the
content after thinking-off requests on a GLM-5.3 served as ``glm-5``, leaks the
ladder repaired, budgets refused for lack of a reasoning parser, a wedge whose
gauges read 0), with the class each request was meant to have
(``sample_logs/ground_truth.json``). The analyzer must give every one of them its
class: from the S3 chunks and the pods' stdout together (the README's command),
from the S3 chunks alone, and from untruncated stdout alone (S3 off: strings are
not cut).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

import tools.simulator as sim
from analyzer.classification.turns import refresh_turns
from analyzer.ingestion.logs import ingest
from analyzer.jobs.metrics import load_metrics
from analyzer.store.db import connect
from tests.support.readme_run import first_command
from tests.support.repo import REPO
from tests.support.sample_s3_week import sample_s3_week

SAMPLE = REPO / "sample_logs"
TRUTH = json.loads((SAMPLE / "ground_truth.json").read_text(encoding="utf-8"))
GLM_SHAPES = ("answer-in-reasoning", "reasoning-leaked", "wedged-pod")


def classes(tmp_path, inputs: list[str]) -> dict[str, str]:
    con = connect(tmp_path / "week.duckdb")
    try:
        ingest(con, inputs)
        load_metrics(con, [str(SAMPLE / "metrics")])
        refresh_turns(con)
        return dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall())
    finally:
        con.close()


def mismatches(got: dict[str, str], only: tuple[str, ...] | None = None) -> Counter:
    return Counter((t["class"], got.get(rid)) for rid, t in TRUTH["requests"].items()
                   if (only is None or t["class"] in only) and got.get(rid) != t["class"])


def test_the_shapes_are_all_in_the_week():
    counts = Counter(t["class"] for t in TRUTH["requests"].values())
    for cls in (*GLM_SHAPES, "pod-down", "tool-history-5xx", "empty-200-stop", "length-with-no-content"):
        assert counts[cls], cls
    assert any(e.get("frozen") for e in TRUTH["episodes"])


def test_every_turn_is_in_its_true_class_from_chunks_and_stdout(readme_week):
    # The README's command is this one (chunks, stdout and metrics); its run is the session's.
    folder, proc = readme_week
    assert proc.returncode == 0, proc.stderr
    assert first_command() == ["analyze", "sample_logs/s3", "sample_logs/kubectl", "--metrics", "sample_logs/metrics"]
    con = connect(folder / "analyzer.duckdb", read_only=True)
    try:
        got = dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall())
        assert not mismatches(got)
        # The 0-token reasoning turns, the repaired leaks and the refused budgets are there, as logged.
        zero, repaired = con.execute(
            "SELECT count(*) FILTER (WHERE incident_class = 'answer-in-reasoning' AND completion_tokens = 0), "
            "count(*) FILTER (WHERE reasoning_repaired) FROM turns").fetchall()[0]
        refused = con.execute("SELECT count(*) FROM ladder_attempts WHERE rung = 'thinking_budget' AND refused "
                              "AND refused_reason LIKE 'thinking_token_budget is set but reasoning_config%'"
                              ).fetchall()[0][0]
        inferred = con.execute("SELECT count(*) FROM pod_windows WHERE inferred").fetchall()[0][0]
    finally:
        con.close()
    assert zero and repaired and refused and inferred == 1


def test_every_turn_is_in_its_true_class_from_the_chunks_alone(tmp_path):
    db, _ = sample_s3_week(tmp_path / "week.duckdb")  # the chunks and metrics, built once per process
    con = connect(db, read_only=True)
    try:
        assert not mismatches(dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall()))
    finally:
        con.close()


@pytest.fixture(scope="module")
def untruncated_stdout(tmp_path_factory):
    """The week's pod stdout with S3 off: whole records, one line each."""
    week = sim.simulate_week(seed=sim.DEFAULT_SEED, sessions=400, start=sim.DEFAULT_START, days=7)
    out = tmp_path_factory.mktemp("stdout")
    sim.write_kubectl_stdout(week, out, s3_enabled=False)
    return out


def test_the_glm_shapes_are_classed_from_untruncated_stdout_alone(tmp_path, untruncated_stdout):
    # Stdout carries no system_prompt records and no `messages`: only the GLM shapes are
    # compared here (tool history is inferred from the session, as from the chunks).
    assert not mismatches(classes(tmp_path, [str(untruncated_stdout)]), only=GLM_SHAPES)
