"""A lake built on Spark by day: the days a run does not touch keep their files; what a build refuses.

The builds themselves run on a real standalone cluster in
tests/e2e/test_lake_build_cluster.py (the sample week in two runs, equal to the
export). Here, without Spark: the lake's ``records`` files of the days a run does
not write are the same files in the new lake (links, made before the swap: the
old lake stays whole until then), and the options a build refuses are refused
before a session starts.
"""

from __future__ import annotations

import os

import pytest

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.cli.terminal.reports import print_lake_build_report
from analyzer.jobs.lake_build import LakeBuildOptions, LakeBuildReport, build_lake_job
from tests.support.repo import REPO

S3 = str(REPO / "sample_logs" / "s3")


def test_the_days_a_run_does_not_write_keep_their_files(tmp_path):
    spark_lake = pytest.importorskip("analyzer.outputs.spark_lake")  # (pyspark: the spark extra)
    out, staging = tmp_path / "lake", tmp_path / "lake" / ".staging-1"
    files = []
    for day in ("2026-11-16", "2026-11-17", "2026-11-18"):
        path = out / "records" / f"day={day}" / "data_0.parquet"
        path.parent.mkdir(parents=True)
        path.write_bytes(day.encode())
        files.append({"path": f"day={day}/data_0.parquet", "bytes": 10, "rows": 1, "fingerprint": "x"})
    (out / "records" / "day=2026-11-19").mkdir()
    (out / "records" / "day=2026-11-19" / "stray.parquet").write_bytes(b"not the manifest's")
    old = {"tables": {"records": {"files": files}}}
    spark_lake._keep_days(out, staging, old, ["2026-11-17"])
    kept = sorted(p.relative_to(staging / "records").as_posix() for p in staging.rglob("*.parquet"))
    assert kept == ["day=2026-11-16/data_0.parquet", "day=2026-11-18/data_0.parquet"]  # only the manifest's
    for rel in kept:
        assert os.path.samefile(staging / "records" / rel, out / "records" / rel)
    spark_lake._keep_days(out, tmp_path / "new", None, [])  # a new lake keeps nothing
    assert not (tmp_path / "new").exists()


def test_the_options_are_checked_when_made(tmp_path):
    cases = {
        "engine 'duckdb'": dict(logs=(S3,), lake=str(tmp_path / "l"), engine="duckdb"),
        "same path": dict(logs=(S3,), lake="s3a://bucket/lake"),
        "read as a pattern": dict(logs=(S3,), lake=str(tmp_path / "lake*")),
        "expected KEY=VALUE": dict(logs=(S3,), lake=str(tmp_path / "l"), conf=("spark.x",)),
        "give the log files": dict(logs=(), lake=str(tmp_path / "l")),
        # A usage error naming the option, as `analyze --caller-deadline -5` gives (was an unexpected ValueError).
        "^--caller-deadline: the caller deadline must be a positive": dict(logs=(S3,), lake=str(tmp_path / "l"),
                                                                          caller_deadline_s=-5.0),
    }
    for words, kwargs in cases.items():
        with pytest.raises(AnalyzerError, match=words) as refused:
            LakeBuildOptions(**kwargs)
        assert refused.value.exit_code == ExitCode.USAGE, words
    opts = LakeBuildOptions(logs=(S3,), lake=str(tmp_path / "l"), conf=("spark.executor.memory=2g", "a.b= c=d"))
    assert opts.spark_conf() == {"spark.executor.memory": "2g", "a.b": " c=d"}


def test_a_build_refuses_what_is_not_there_before_spark_starts(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    cases = {
        "not empty and not a lake": LakeBuildOptions(logs=(S3,), lake=str(tmp_path)),
        "no such file": LakeBuildOptions(logs=(str(tmp_path / "none"),), lake=str(tmp_path / "l")),
    }
    for words, opts in cases.items():
        with pytest.raises(AnalyzerError, match=words):
            build_lake_job(opts)  # refused before a session starts
    assert not (tmp_path / "l").exists()


def test_the_report_says_what_was_written_and_what_was_skipped(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = LakeBuildReport(
        lake={"path": str(tmp_path / "week-lake"), "rows": 171330, "files": 46,
              "tables": {"records": 5101, "turns": 2553, **{f"t{i}": 1 for i in range(19)}}},
        master="spark://127.0.0.1:7077", days_written=["2026-11-16", "2026-11-22"], files_read=472,
        skipped_files=[{"path": "x\x1b[2J.gz", "reason": "not gzip"}], warnings=["no metrics for glm-5"], seconds=69.4)
    print_lake_build_report(report)
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "built week-lake on Spark (spark://127.0.0.1:7077) in 69 s: 171,330 rows of 21 relations (46 Parquet files)",
        "  472 log files read; records of 2 day(s) written (2026-11-16 .. 2026-11-22), 5,101 records and 2,553 "
        "turns in the lake"]
    assert "skipped x" in err and "\x1b" not in err and "no metrics for glm-5" in err
    assert report.to_dict()["master"] == "spark://127.0.0.1:7077"
