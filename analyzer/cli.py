"""The ``analyze`` command line: it parses options and calls the library, nothing more.

``analyze FILES...`` is short for ``analyze run FILES...``: the main job.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .errors import AnalyzerError, ExitCode

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="Log analytics and incident classification for LLM proxies fronting GLM on vLLM.\n\n"
    "`analyze FILES...` ingests proxy logs into DuckDB, classifies every turn and prints the sizing.",
)


@app.callback()
def _group() -> None:
    """Log analytics and incident classification for LLM proxies fronting GLM on vLLM."""


@app.command("run")
def run_cmd(
    files: List[str] = typer.Argument(..., help="Log files, directories or globs (JSONL, kubectl stdout, Parquet, .gz)."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB database file [default: $ANALYZER_DB or ./analyzer.duckdb]."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout."),
    strict: bool = typer.Option(False, "--strict", help="Fail on the first malformed line instead of quarantining it."),
    model: Optional[List[str]] = typer.Option(None, "--model", help="Only these models in the summary (repeatable)."),
    since: Optional[str] = typer.Option(None, "--since", help="Only turns at or after this time (ISO 8601, UTC)."),
    until: Optional[str] = typer.Option(None, "--until", help="Only turns before this time (ISO 8601, UTC)."),
    metrics: Optional[List[str]] = typer.Option(None, "--metrics", help="Prometheus exports, scrapes or CSV: files, folders, globs; several after one --metrics, up to the next option (repeatable)."),
    wedge_window: str = typer.Option("5m", "--wedge-window", help="A flat generation counter this long with demand is a wedge."),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", help="Prometheus base URL: query up and the vLLM series over --since/--until [default: the logs' time range]."),
    model_map: Optional[List[str]] = typer.Option(None, "--model-map", help="LOG_MODEL=METRIC_MODEL_NAME where vLLM's served name differs from the logged model (repeatable)."),
    fail_on: Optional[List[str]] = typer.Option(None, "--fail-on", metavar="METRIC>N[%]", help="Exit 7 after the summary when a threshold is crossed, e.g. 'tool-history-5xx>2%' or 'wedged-pod>0' (repeatable, or comma-separated)."),
    caller_deadline: Optional[float] = typer.Option(None, "--caller-deadline", help="Seconds the callers wait; an ok answer slower than this is late-200 (stored) [default: the stored value, else 300]."),
    prometheus_selector: Optional[str] = typer.Option(None, "--prometheus-selector", help='Label matchers added to every Prometheus query, e.g. namespace="llm",job="vllm".'),
    prometheus_timeout: str = typer.Option("60s", "--prometheus-timeout", help="Total time one Prometheus query may take, reading included."),
) -> None:
    """Ingest logs, classify every turn and print the sizing of each failure class."""
    from .oncall import check_fail_on, parse_fail_on
    from .pipeline import run_main_job

    thresholds = parse_fail_on(fail_on)  # a malformed threshold fails before any work
    summary = run_main_job(files=files, db=db, json_out=json_out, strict=strict, models=model,
                           since=since, until=until, metrics=metrics, wedge_window=wedge_window,
                           prometheus=prometheus, model_map=model_map, caller_deadline_s=caller_deadline,
                           prometheus_selector=prometheus_selector, prometheus_timeout=prometheus_timeout)
    check_fail_on(summary, thresholds)


@app.command("sql")
def sql_cmd(
    query: Optional[str] = typer.Argument(None, help="SQL text, or the name of a file of queries/ (see --list)."),
    param: Optional[List[str]] = typer.Option(None, "--param", "-p", help="A $name parameter as NAME=VALUE (repeatable)."),
    fmt: str = typer.Option("table", "--format", "-f", help="Output format: table, csv or json."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB database file [default: $ANALYZER_DB or ./analyzer.duckdb]."),
    write: bool = typer.Option(False, "--write", help="Open the database read-write (default: read-only)."),
    list_only: bool = typer.Option(False, "--list", help="List the queries/ files and their parameters."),
) -> None:
    """Run SQL or a query from queries/ on the database and print a table, CSV or JSON."""
    from .sqlrun import run_sql

    run_sql(query, db=db, params=param or [], fmt=fmt, write=write, list_only=list_only)


@app.command("export")
def export_cmd(
    parquet: Path = typer.Option(..., "--parquet", help="Directory to write day=YYYY-MM-DD/*.parquet into (replaced on re-export)."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB database file [default: $ANALYZER_DB or ./analyzer.duckdb]."),
) -> None:
    """Write the classified turns as Parquet partitioned by day, for bigger engines."""
    from .export import export_command

    export_command(parquet, db=db)


@app.command("sync")
def sync_cmd(
    url: str = typer.Argument(..., help="s3://BUCKET[/PREFIX] in the proxy's layout (YYYY-MM-DD/*.jsonl, consolidated/**/*.parquet)."),
    s3_profile: Optional[str] = typer.Option(None, "--s3-profile", help="Named AWS profile [default: $AWS_PROFILE or boto3's chain]."),
    s3_endpoint: Optional[str] = typer.Option(None, "--s3-endpoint", help="S3-compatible endpoint URL [default: $AWS_ENDPOINT_URL]."),
    cache: Optional[Path] = typer.Option(None, "--cache", help="Local cache [default: $ANALYZER_S3_CACHE or ~/.cache/analyzer/s3]."),
    json_out: bool = typer.Option(False, "--json", help="Print what was synced as JSON."),
) -> None:
    """Mirror the proxy's S3 bucket into the local cache (only new or changed objects)."""
    from .objectstore import sync_command

    sync_command(url, profile=s3_profile, endpoint_url=s3_endpoint, cache_dir=cache, json_out=json_out)


@app.command("report")
def report_cmd(
    files: Optional[List[str]] = typer.Argument(None, help="Log files, directories or globs to ingest first (optional)."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB database file [default: $ANALYZER_DB or ./analyzer.duckdb]."),
    week: Optional[str] = typer.Option(None, "--week", help="ISO week, e.g. 2026-W47 [default: the last complete week in the data]."),
    since: Optional[str] = typer.Option(None, "--since", help="Report from this time instead of a week (ISO 8601, UTC)."),
    until: Optional[str] = typer.Option(None, "--until", help="Report until this time, exclusive (ISO 8601, UTC)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="HTML file to write [default: ./report-<week>.html]."),
    plotly_cdn: bool = typer.Option(False, "--plotly-cdn", help="Link plotly.js from its CDN instead of embedding it (smaller, needs network)."),
) -> None:
    """Render the weekly HTML report (one self-contained file) and print its path."""
    from .report import make_report

    path = make_report(db, files or None, week=week, since=since, until=until, output=output,
                       plotly="cdn" if plotly_cdn else "inline")
    print(path)


@app.command("replay")
def replay_cmd(
    endpoint: Optional[str] = typer.Option(None, "--endpoint", help="OpenAI-compatible chat-completions URL, or a base URL (…/v1); required unless --dry-run."),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Name of the environment variable holding the API key (sent as a bearer token; never printed or stored)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be sent, per turn and rung; send nothing."),
    limit: Optional[int] = typer.Option(None, "--limit", help="Replay at most N turns (the earliest first)."),
    concurrency: int = typer.Option(2, "--concurrency", help="Turns replayed at the same time."),
    rate: float = typer.Option(2.0, "--rate", help="At most R upstream calls per second, rungs included (0: no bound)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name to send [default: the model each turn logged]."),
    only_model: Optional[List[str]] = typer.Option(None, "--only-model", help="Replay only turns of this logged model (repeatable) [default: GLM models]."),
    tools: Optional[Path] = typer.Option(None, "--tools", help="JSON tool definitions: a list, or an object keyed by origin ('*' default) [default: stand-ins named after the transcript's tools]."),
    flatten: bool = typer.Option(False, "--flatten", help="Also try the opt-in flatten_transcript rung."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds to wait for one upstream answer."),
    time_budget: float = typer.Option(120.0, "--time-budget", help="Seconds the ladder's retries of one turn may take in all."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB database file [default: $ANALYZER_DB or ./analyzer.duckdb]."),
) -> None:
    """Re-send failed full-capture turns through the ladder to an endpoint; store every attempt."""
    from .replay import replay_command

    replay_command(endpoint=endpoint, api_key_env=api_key_env, dry_run=dry_run, limit=limit,
                   concurrency=concurrency, rate=rate, model=model, only_models=only_model or None,
                   tools_file=tools, flatten=flatten, timeout_s=timeout, time_budget_s=time_budget,
                   json_out=json_out, db=db)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``analyze`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    # `analyze FILES... [OPTIONS]` is the main job: anything that does not start
    # with a command name (or the group's own --help) goes to `run`.
    if args and args[0] not in commands and args[0] not in ("--help", "-h"):
        args.insert(0, "run")
    try:
        if args and args[0] == "run":
            args = _metric_lists(args)
        app(args=args, prog_name="analyze", standalone_mode=True)
    except AnalyzerError as err:
        _fail(str(err), int(err.exit_code))
    except OSError as err:  # an unwritable output, a vanished file: say so in one line
        _fail(f"{err.strerror or err}: {err.filename}" if err.filename else str(err), int(ExitCode.FAILED))
    except Exception as err:  # noqa: BLE001 - a bug: one line, the traceback on request
        if os.environ.get("ANALYZER_DEBUG"):
            raise
        _fail(f"unexpected {type(err).__name__}: {err} (set ANALYZER_DEBUG=1 for the traceback)",
              int(ExitCode.FAILED))


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
_FLAGS = {"--json", "--strict", "--help"}


def _fail(message: str, code: int) -> None:
    print(f"analyze: error: {message}", file=sys.stderr)
    raise SystemExit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
