"""``analyze lake build``: raw logs to a Parquet lake on Spark (the job is :mod:`analyzer.jobs.lake_build`)."""

from __future__ import annotations

import sys

from analyzer.cli.options import naming
from analyzer.cli.terminal import print_json, print_lake_build_report, warn
from analyzer.jobs.lake_build import LakeBuildOptions, LakeBuildReport, build_lake_job


def lake_build_command(opts: LakeBuildOptions, *, json_out: bool = False) -> LakeBuildReport:
    """Build the lake and print what was written (one paragraph, or JSON); return the report."""
    if sys.stderr.isatty():
        warn(f"building the lake {opts.lake} on Spark ({opts.master or 'local, or what spark-submit gave'}) ...")
    with naming(lake="--lake", engine="--engine", conf="--conf", model_map="--model-map"):
        report = build_lake_job(opts)
    if json_out:
        print_json(report.to_dict())
    else:
        print_lake_build_report(report)
    return report
