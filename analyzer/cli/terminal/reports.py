"""What ``analyze export``, ``analyze lake build``, ``analyze forget`` and ``analyze alerts`` say they did."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from analyzer.cli.terminal import safe_text, warn
from analyzer.core.paths import shown_path
from analyzer.core.safetext import terminal_text

if TYPE_CHECKING:  # pragma: no cover
    from analyzer.jobs.alerts import AlertsWritten
    from analyzer.jobs.forget import ForgetReport
    from analyzer.jobs.lake_build import LakeBuildOptions, LakeBuildReport
    from analyzer.outputs.lake import LakeReport


def print_lake_report(report: "LakeReport") -> None:
    """One line: how many rows of how many relations went into the lake, and where."""
    removed = f", removed {safe_text(', '.join(report.removed))}" if report.removed else ""
    print(f"exported {report.rows:,} rows of {len(report.tables)} relations ({report.files} Parquet files) "
          f"to {safe_text(report.path)}{removed}")


def announce_lake_build(opts: "LakeBuildOptions") -> None:
    """On a terminal (stderr), that the build starts and where: a JVM's start takes seconds."""
    if sys.stderr.isatty():
        where = opts.master or "local, or what spark-submit gave"
        print(f"building the lake {safe_text(opts.lake)} on Spark ({safe_text(where)}) ...", file=sys.stderr)


def print_lake_build_report(report: "LakeBuildReport") -> None:
    """What a lake build wrote: the lake's rows and files, the days of records written, what was skipped."""
    lake = report.lake
    days = report.days_written
    span = f" ({days[0]} .. {days[-1]})" if days else ""
    print(f"built {terminal_text(shown_path(lake['path']))} on Spark ({safe_text(report.master)}) in {report.seconds:.0f} s: "
          f"{lake['rows']:,} rows of {len(lake['tables'])} relations ({lake['files']} Parquet files)")
    print(f"  {report.files_read:,} log files read; records of {len(days)} day(s) written{span}, "
          f"{lake['tables'].get('records', 0):,} records and {lake['tables'].get('turns', 0):,} turns in the lake")
    for s in report.skipped_files:
        warn(f"skipped {s['path']}: {s['reason']}")
    for w in report.warnings:
        warn(w)


def print_forget_report(report: "ForgetReport") -> None:
    """What ``forget`` removed (or would), what it read again and re-derived."""
    verb = "would forget" if report.dry_run else "forgot"
    if report.resumed:
        print(f"{'would finish' if report.dry_run else 'finished'} an interrupted forget of "
              f"{len(report.resumed):,} file(s)")
    print(f"{verb} {len(report.files):,} file(s): {report.records:,} records, {report.quarantined:,} quarantined lines"
          + (f", {report.replay_attempts:,} replay attempts" if report.replay_attempts else "")
          + (f", {report.metric_samples:,} metric samples from {len(report.metric_sources)} source(s)"
             if report.metric_sources else ""))
    for p in report.files[:10]:
        print(f"  {terminal_text(shown_path(p))}")
    if len(report.files) > 10:
        print(f"  ... and {len(report.files) - 10} more")
    if report.kept_straddling:
        print(f"kept {report.kept_straddling} file(s) with records on both sides of the range")
    if report.reread:
        print(f"read again {len(report.reread)} file(s) that held copies of forgotten records")
    if report.reread_missing:
        print(f"note: {len(report.reread_missing)} file(s) that held copies are gone from disk; "
              "their copies are not in the database", file=sys.stderr)
    if report.windows_recomputed:
        print("pod windows recomputed with the stored wedge window; classification up to date")


def print_alerts_written(written: "AlertsWritten") -> None:
    """The rules on stdout when no file was given; else which files were written (stderr)."""
    if written.rules_file is None:
        sys.stdout.write(written.text)
        return
    print(f"wrote {written.rules_file} ({written.settings.describe()})", file=sys.stderr)
    if written.tests_file is not None:
        print(f"wrote {written.tests_file}: check with `promtool test rules {written.tests_file}`", file=sys.stderr)
