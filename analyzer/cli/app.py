"""The ``analyze`` command line: it parses options and calls the library, nothing more.

Each command builds its job's options object (which checks them), calls the job in
:mod:`analyzer.jobs` (within :func:`analyzer.cli.options.naming`, so a library
error speaks of the command's options) and hands the result to its printer in
:mod:`analyzer.cli.terminal`. ``analyze FILES...`` is short for ``analyze run
FILES...``: the main job.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Callable, List, Optional

import typer

from analyzer import __version__
from analyzer.cli.exits import guarded
from analyzer.cli.options import naming, param_flags, parse_param_args
from analyzer.cli.terminal import print_json
from analyzer.cli.terminal.progress import job_view
from analyzer.cli.terminal.replay import show_replay
from analyzer.cli.terminal.reports import (announce_lake_build, print_alerts_written, print_forget_report,
                                           print_lake_build_report, print_lake_report)
from analyzer.cli.terminal.summary import show_summary
from analyzer.io.objectstore import sync
from analyzer.jobs import main_job
from analyzer.jobs.alerts import AlertOptions, write_alerts
from analyzer.jobs.export import ExportOptions, run_export
from analyzer.jobs.forget import ForgetOptions, run_forget
from analyzer.jobs.lake_build import LakeBuildOptions, build_lake_job
from analyzer.jobs.replay import ReplayOptions, run_replay
from analyzer.jobs.report import ReportOptions, make_report
from analyzer.jobs.sql import run_sql
from analyzer.core.errors import AnalyzerError, ExitCode

# How `analyze` and its groups parse and print help (the same for every group).
_TYPER = dict(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None, no_args_is_help=True,
              context_settings={"help_option_names": ["-h", "--help"]})

app = typer.Typer(
    **_TYPER,
    help="Log analytics and incident classification for LLM proxies fronting GLM on vLLM.\n\n"
    "`analyze FILES...` ingests proxy logs into DuckDB, classifies every turn and prints the sizing.",
)


def _show(report: Any, json_out: bool, printer: Callable[[Any], None]) -> None:
    """A command's report: its ``to_dict()`` as JSON with ``--json``, else ``printer(report)`` for a person."""
    if json_out:
        print_json(report.to_dict())
    else:
        printer(report)


def _print_version(value: bool) -> None:
    if value:

        print(f"analyze {__version__}")
        raise typer.Exit()


@app.callback()
def _group(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_print_version,
                                 help="Print the version and exit."),
) -> None:
    """Log analytics and incident classification for LLM proxies fronting GLM on vLLM."""


# Options several commands take, declared once.
Db = Annotated[Optional[Path], typer.Option(
    "--db", metavar="PATH", help="DuckDB database file [default: $ANALYZER_DB or ./analyzer.duckdb].")]
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
# --since/--until take ISO 8601 (UTC) or an age before now (analyzer.core.isotime.parse_time).
Since = Annotated[Optional[str], typer.Option(
    "--since", metavar="TIME", help="From this time on: ISO 8601 (UTC) or an age such as 24h, 7d.")]
Until = Annotated[Optional[str], typer.Option(
    "--until", metavar="TIME", help="Before this time (exclusive): ISO 8601 (UTC) or an age such as 1h.")]
Models = Annotated[Optional[List[str]], typer.Option(
    "--model", metavar="NAME",
    help="Only these models in the summary: a name or a LIKE pattern such as 'glm%' (repeatable).")]


@app.command("run", short_help="Ingest logs, classify every turn, print the verdict and the sizing.")
def run_cmd(
    files: Optional[List[str]] = typer.Argument(None, metavar="FILES", show_default=False, help="Log files, directories or globs (JSONL, kubectl stdout, Parquet, .gz); none: the summary of what --db holds."),
    db: Db = None,
    json_out: Json = False,
    strict: bool = typer.Option(False, "--strict", help="Fail on the first malformed line instead of quarantining it."),
    model: Models = None,
    since: Since = None,
    until: Until = None,
    metrics: Optional[List[str]] = typer.Option(None, "--metrics", metavar="PATH", help="Prometheus exports, scrapes or CSV: files, folders, globs; several after one --metrics, up to the next option (repeatable)."),
    wedge_window: Optional[str] = typer.Option(None, "--wedge-window", metavar="DURATION", help="A flat generation counter this long with demand is a wedge, for this run only [default: the one the database stores, else 5m]."),
    save_wedge_window: bool = typer.Option(False, "--save-wedge-window", help="Store the windows of --wedge-window: later commands use them."),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", metavar="URL", help="Prometheus base URL: query up and the vLLM series over --since/--until [default: the logs' time range]."),
    model_map: Optional[List[str]] = typer.Option(None, "--model-map", metavar="LOG=METRIC", help="LOG_MODEL=METRIC_MODEL_NAME where vLLM's served name differs from the logged model (repeatable)."),
    fail_on: Optional[List[str]] = typer.Option(None, "--fail-on", metavar="METRIC>N[%]", help="Exit 7 after the summary when a threshold is crossed, e.g. 'tool-history-5xx>2%' or 'wedged-pod>0' (repeatable, or comma-separated)."),
    caller_deadline: Optional[float] = typer.Option(None, "--caller-deadline", metavar="SECONDS", help="Seconds the callers wait; an ok answer slower than this is late-200 (stored) [default: the stored value, else 300]."),
    prometheus_selector: Optional[str] = typer.Option(None, "--prometheus-selector", metavar="MATCHERS", help='Label matchers added to every Prometheus query, e.g. namespace="llm",job="vllm".'),
    prometheus_timeout: str = typer.Option("60s", "--prometheus-timeout", metavar="DURATION", help="Total time one Prometheus query may take, reading included."),
) -> None:
    """Ingest logs, classify every turn and print the sizing of each failure class."""

    with naming(**main_job.RUN_FLAGS):
        opts = main_job.RunOptions(
            files=tuple(files or ()), db=db, json_out=json_out, strict=strict, model_patterns=tuple(model or ()),
            since=since, until=until, metrics=tuple(metrics or ()), wedge_window=wedge_window,
            save_wedge_window=save_wedge_window, prometheus=prometheus, prometheus_selector=prometheus_selector,
            prometheus_timeout=prometheus_timeout, model_map=tuple(model_map or ()), fail_on=tuple(fail_on or ()),
            caller_deadline_s=caller_deadline)
        summary, report = main_job.run(opts, job_view(shown=sys.stderr.isatty() and not json_out))
    show_summary(summary, json_out)
    with naming(**main_job.RUN_FLAGS):
        main_job.check_outcome(opts, summary, report)


@app.command("sql", short_help="Ask a question of queries/, a view, or your own SQL (read-only).")
def sql_cmd(
    query: Optional[str] = typer.Argument(None, metavar="QUERY", show_default=False, help="SQL text, or the name of a file of queries/ (see --list)."),
    param: Optional[List[str]] = typer.Option(None, "--param", "-p", metavar="NAME=VALUE", help="A $name parameter as NAME=VALUE (repeatable)."),
    fmt: str = typer.Option("table", "--format", "-f", metavar="FORMAT", help="Output format: table, csv or json."),
    db: Db = None,
    write: bool = typer.Option(False, "--write", help="Open the database read-write (default: read-only)."),
    list_only: bool = typer.Option(False, "--list", help="List the queries/ files and their parameters."),
    engine: str = typer.Option("duckdb", "--engine", metavar="ENGINE", help="duckdb (default) or spark (needs --lake and the spark extra)."),
    # A str, not a Path: with --engine spark a lake may be a URL (s3a://bucket/lake), which a Path would mangle.
    lake: Optional[str] = typer.Option(None, "--lake", metavar="DIR", help="Read a Parquet lake (analyze export --lake) instead of a database: a folder, or with --engine spark a URL."),
) -> None:
    """Run SQL or a query from queries/ on the database (or a lake, on DuckDB or Spark) and print a table, CSV or JSON."""

    # The read-only refusals' remedy (``open the database read-write``), as this command says it.
    with param_flags(), naming(write="pass --write", lake="--lake"):
        run_sql(query, db=db, params=parse_param_args(param), fmt=fmt, write=write, list_only=list_only,
                engine=engine, lake=lake)


@app.command("export", short_help="Write a Parquet lake for Spark, Trino, Athena, DuckDB elsewhere.")
def export_cmd(
    lake: Path = typer.Option(..., "--lake", metavar="DIR", help="Directory to write every relation a question reads into, with a manifest; the classified turns are DIR/turns/day=YYYY-MM-DD/*.parquet (replaced on re-export)."),
    db: Db = None,
    json_out: Json = False,
) -> None:
    """Write the database as a Parquet lake (every relation a question reads, with a manifest) for bigger engines."""

    with naming(out_dir="--lake"):
        report = run_export(ExportOptions(lake=lake, db=db))
    _show(report, json_out, print_lake_report)


@app.command("sync", short_help="Mirror the proxy's S3 bucket locally: only new or changed objects.")
def sync_cmd(
    url: str = typer.Argument(..., metavar="URL", help="s3://BUCKET[/PREFIX] in the proxy's layout (YYYY-MM-DD/*.jsonl, consolidated/**/*.parquet)."),
    s3_profile: Optional[str] = typer.Option(None, "--s3-profile", metavar="NAME", help="Named AWS profile [default: $AWS_PROFILE or boto3's chain]."),
    s3_endpoint: Optional[str] = typer.Option(None, "--s3-endpoint", metavar="URL", help="S3-compatible endpoint URL [default: $AWS_ENDPOINT_URL]."),
    cache: Optional[Path] = typer.Option(None, "--cache", metavar="DIR", help="Local cache [default: $ANALYZER_S3_CACHE or ~/.cache/analyzer/s3]."),
    json_out: Json = False,
) -> None:
    """Mirror the proxy's S3 bucket into the local cache (only new or changed objects)."""

    report = sync(url, profile=s3_profile, endpoint_url=s3_endpoint, cache_dir=cache)
    _show(report, json_out, lambda r: print(r.describe()))


@app.command("report", short_help="Render the weekly HTML report: one self-contained file.")
def report_cmd(
    files: Optional[List[str]] = typer.Argument(None, metavar="FILES", show_default=False, help="Log files, directories or globs to ingest first (optional)."),
    db: Db = None,
    week: Optional[str] = typer.Option(None, "--week", metavar="YYYY-Www", help="ISO week, e.g. 2026-W47 [default: the last complete week in the data]."),
    since: Since = None,
    until: Until = None,
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="FILE", help="HTML file to write [default: ./report-<week>.html]."),
    plotly_cdn: bool = typer.Option(False, "--plotly-cdn", help="Link plotly.js from its CDN instead of embedding it (smaller, needs network)."),
    lake: Optional[Path] = typer.Option(None, "--lake", metavar="DIR", help="Read a Parquet lake (analyze export --lake) instead of a database."),
) -> None:
    """Render the weekly HTML report (one self-contained file) and print its path.

    --since/--until report that range instead of a week.
    """

    with naming(week="--week", since="--since", until="--until", lake="--lake"):
        print(make_report(ReportOptions(db=db, files=tuple(files or ()), week=week, since=since, until=until,
                                        output=output, plotly="cdn" if plotly_cdn else "inline", lake=lake)))


@app.command("replay", short_help="Re-send captured failures through the ladder to an endpoint.")
def replay_cmd(
    endpoint: Optional[str] = typer.Option(None, "--endpoint", metavar="URL", help="OpenAI-compatible chat-completions URL, or a base URL (…/v1); required unless --dry-run."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", metavar="VAR", help="Name of the environment variable holding the API key (sent as a bearer token; never printed or stored)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be sent, per turn and rung; send nothing."),
    limit: Optional[int] = typer.Option(None, "--limit", metavar="N", help="Replay at most N turns (the earliest first)."),
    concurrency: int = typer.Option(2, "--concurrency", metavar="N", help="Turns replayed at the same time."),
    rate: float = typer.Option(2.0, "--rate", metavar="R", help="At most R upstream calls per second, rungs included (0: no bound)."),
    model: Optional[str] = typer.Option(None, "--model", metavar="NAME", help="Model name to send [default: the model each turn logged]."),
    only_model: Optional[List[str]] = typer.Option(None, "--only-model", metavar="NAME", help="Replay only turns of this logged model: a name or a LIKE pattern such as 'glm%' (repeatable) [default: GLM models]."),
    tools: Optional[Path] = typer.Option(None, "--tools", metavar="FILE", help="JSON tool definitions: a list, or an object keyed by origin ('*' default) [default: stand-ins named after the transcript's tools]."),
    flatten: bool = typer.Option(False, "--flatten", help="Also try the opt-in flatten_transcript rung."),
    timeout: float = typer.Option(300.0, "--timeout", metavar="SECONDS", help="Seconds to wait for one upstream answer."),
    time_budget: float = typer.Option(120.0, "--time-budget", metavar="SECONDS", help="Seconds the ladder's retries of one turn may take in all."),
    json_out: Json = False,
    db: Db = None,
) -> None:
    """Re-send failed full-capture turns through the ladder to an endpoint; store every attempt."""

    with naming(endpoint="--endpoint", tools_file="--tools", limit="--limit", rate="--rate",
                concurrency="--concurrency", api_key_env="--api-key-env"):
        run = run_replay(ReplayOptions(
            endpoint=endpoint, api_key_env=api_key_env, dry_run=dry_run, limit=limit, concurrency=concurrency,
            rate=rate, model=model, only_models=tuple(only_model or ()), tools_file=tools, flatten=flatten,
            timeout_s=timeout, time_budget_s=time_budget, db=db))
    show_replay(run, json_out)


@app.command("forget", short_help="Remove files from the database and derive the rest again.")
def forget_cmd(
    paths: Optional[List[str]] = typer.Argument(None, metavar="PATHS", show_default=False,
                                                help="Files to forget: paths or globs as the database holds them (see `analyze --db X`)."),
    since: Since = None,
    until: Until = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be forgotten; change nothing."),
    json_out: Json = False,
    db: Db = None,
) -> None:
    """Remove files (their records and quarantined lines) from the database and re-derive the rest.

    --since/--until choose the files whose records all lie in that range.
    """

    with naming(since="--since", until="--until"):
        report = run_forget(ForgetOptions(paths=tuple(paths or ()), since=since, until=until, dry_run=dry_run, db=db))
    _show(report, json_out, print_forget_report)


@app.command("alerts", short_help="Write the wedge rule as Prometheus alerting rules (and tests).")
def alerts_cmd(
    output: Optional[Path] = typer.Option(None, "--output", "-o", metavar="FILE", help="File to write [default: stdout]."),
    unit_tests: Optional[Path] = typer.Option(None, "--unit-tests", metavar="FILE", help="Also write promtool unit tests for --output (promtool test rules FILE)."),
    fmt: str = typer.Option("rules", "--format", metavar="FORMAT", help="rules (a Prometheus rule_files file) or prometheusrule (a PrometheusRule object for the Prometheus operator)."),
    wedge_window: Optional[str] = typer.Option(None, "--wedge-window", metavar="DURATION", help="A flat generation counter this long with demand is a wedge; the alerts' for: [default: 5m]."),
    evaluation_interval: Optional[str] = typer.Option(None, "--evaluation-interval", metavar="DURATION", help="The rule group's interval [default: 30s]."),
    scrape_interval: Optional[str] = typer.Option(None, "--scrape-interval", metavar="DURATION", help="How often Prometheus scrapes vLLM; a hole of 3 scrapes restarts the wedge's for: [default: 30s]."),
    prometheus_selector: Optional[str] = typer.Option(None, "--prometheus-selector", metavar="MATCHERS", help='Label matchers added to every series selector, e.g. namespace="llm",job="vllm".'),
    pod_label: Optional[str] = typer.Option(None, "--pod-label", metavar="LABEL", help="The label naming the vLLM pod: pod, exported_pod (behind an aggregating exporter), kubernetes_pod_name or pod_name [default: pod]."),
    runbook_url: Optional[str] = typer.Option(None, "--runbook-url", metavar="URL", help="Where docs/runbook.md is served (the annotations link its sections) [default: docs/runbook.md]."),
    name: str = typer.Option("vllm-wedge", "--name", metavar="NAME", help="--format prometheusrule: the object's name."),
    namespace: Optional[str] = typer.Option(None, "--namespace", metavar="NAMESPACE", help="--format prometheusrule: the object's namespace."),
    object_label: Optional[List[str]] = typer.Option(None, "--object-label", metavar="KEY=VALUE", help="--format prometheusrule: a label of the object, for the operator's ruleSelector (repeatable)."),
) -> None:
    """Write the wedge rule as Prometheus alerting rules (VLLMPodWedged, VLLMPodDown)."""

    with naming(selector="--prometheus-selector"):
        written = write_alerts(AlertOptions(
            output=output, unit_tests=unit_tests, fmt=fmt, wedge_window=wedge_window,
            evaluation_interval=evaluation_interval, scrape_interval=scrape_interval, selector=prometheus_selector,
            pod_label=pod_label, runbook_url=runbook_url, name=name, namespace=namespace,
            object_labels=tuple(object_label or ())))
    print_alerts_written(written)


lake_app = typer.Typer(
    **_TYPER,
    help="Parquet lakes past one machine: `analyze lake build` writes one from raw logs on Spark.",
)
app.add_typer(lake_app, name="lake")


@lake_app.command("build")
def lake_build_cmd(
    logs: List[str] = typer.Argument(..., metavar="LOGS", show_default=False, help="Log files, folders or globs, or URIs Spark reads (s3a://, hdfs://, file:); JSONL chunks, kubectl stdout, Parquet, .gz."),
    lake: str = typer.Option(..., "--lake", metavar="DIR", help="The lake's folder (new, empty, or a lake to add to), at the same path on the driver and the executors."),
    engine: str = typer.Option("spark", "--engine", metavar="ENGINE", help="spark (the only engine that builds a lake from logs)."),
    metrics: Optional[List[str]] = typer.Option(None, "--metrics", metavar="PATH", help="Prometheus exports, scrapes or CSV (read by the driver); several after one --metrics, up to the next option (repeatable)."),
    master: Optional[str] = typer.Option(None, "--master", metavar="URL", help="Spark's master: spark://HOST:7077, yarn, k8s://..., local[N] [default: spark-submit's, else local[*]]."),
    conf: Optional[List[str]] = typer.Option(None, "--conf", metavar="KEY=VALUE", help="A Spark setting, as spark-submit's --conf (repeatable)."),
    wedge_window: Optional[str] = typer.Option(None, "--wedge-window", metavar="DURATION", help="A flat generation counter this long with demand is a wedge [default: the lake's, else 5m]."),
    model_map: Optional[List[str]] = typer.Option(None, "--model-map", metavar="LOG=METRIC", help="LOG_MODEL=METRIC_MODEL_NAME where vLLM's served name differs from the logged model (repeatable)."),
    caller_deadline: Optional[float] = typer.Option(None, "--caller-deadline", metavar="SECONDS", help="Seconds the callers wait; an ok answer slower than this is late-200 [default: the lake's, else 300]."),
    json_out: Json = False,
) -> None:
    """Build a Parquet lake from raw logs on Spark (the layout and manifest of `analyze export --lake`).

    A re-run adds to the lake: new files are added, a file read again replaces what
    the lake held of it, and only the days of records that changed are written.
    """

    with naming(lake="--lake", engine="--engine", conf="--conf", model_map="--model-map"):
        opts = LakeBuildOptions(logs=tuple(logs), lake=lake, engine=engine, metrics=tuple(metrics or ()),
                                master=master, conf=tuple(conf or ()), wedge_window=wedge_window,
                                model_map=tuple(model_map or ()), caller_deadline_s=caller_deadline)
        announce_lake_build(opts)
        report = build_lake_job(opts)
    _show(report, json_out, print_lake_build_report)


def main(argv: list[str] | None = None) -> None:
    """The ``analyze`` console script (and ``python -m analyzer``): every command, through typer."""
    args = list(sys.argv[1:] if argv is None else argv)
    guarded(lambda: app(args=_route(args), prog_name="analyze", standalone_mode=False))


def _route(args: list[str]) -> list[str]:
    """`analyze FILES... [OPTIONS]` is the main job: anything that is not a command goes to `run`.

    A first word that is no command, no file and close to a command name is a typo:
    a usage error with the likely command, instead of "no such file".
    """
    commands = sorted([*(c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands),
                       *(g.name for g in app.registered_groups if g.name)])
    if args and args[0] == "run" or args[:2] == ["lake", "build"]:
        return _metric_lists(args)
    if not args or args[0] in commands or args[0] in ("--help", "-h", "--version", "-V"):
        return args
    first = args[0]
    if not first.startswith("-") and not Path(first).exists() and not any(ch in first for ch in "*?[/.:"):
        import difflib

        close = difflib.get_close_matches(first, commands, n=1, cutoff=0.6)
        if close:
            raise AnalyzerError(f"no such command or file {first!r}; did you mean `analyze {close[0]}`? "
                                f"(commands: {', '.join(commands)})", ExitCode.USAGE)
    return _metric_lists(["run", *args])


def _metric_lists(args: list[str]) -> list[str]:
    """``--metrics a b c`` (what the shell makes of ``--metrics dir/*.json``) as one
    ``--metrics`` per path: every argument after ``--metrics`` up to the next option
    is a metrics path. Log files therefore go before ``--metrics``; when none is
    left, that is said rather than the paths taken for logs or dropped."""
    out: list[str] = []
    absorbed = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out += args[i:]
            break
        out.append(arg)
        i += 1
        if arg == "--metrics" or arg.startswith("--metrics="):
            first = arg.startswith("--metrics=")
            while i < len(args) and not args[i].startswith("-"):
                if first:
                    out.append("--metrics")
                out.append(args[i])
                first, absorbed = True, True
                i += 1
    positional = [a for j, a in enumerate(out[1:], 1) if not a.startswith("-")
                  and not (out[j - 1].startswith("--") and "=" not in out[j - 1] and out[j - 1] not in _FLAGS)]
    if absorbed and not positional and "--help" not in out:
        raise AnalyzerError("no log files given: every argument after --metrics up to the next option is a "
                            "metrics path; put the log files before --metrics", ExitCode.USAGE)
    return out


# Options of `run` that take no value (so the argument after them is positional).
_FLAGS = {"--json", "--strict", "--help", "-h", "--save-wedge-window"}


if __name__ == "__main__":  # pragma: no cover
    main()
