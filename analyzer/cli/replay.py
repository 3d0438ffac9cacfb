"""``analyze replay``: plan the eligible turns, then print what would be sent, or send, store and print."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analyzer.classification.turns import ensure_turns
from analyzer.cli.options import naming
from analyzer.cli.terminal import print_json, print_replay_dry_run, print_replay_header, print_replay_report
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.jobs.replay import (
    check_api_key,
    dry_run_doc,
    endpoint_url,
    load_tools_file,
    nothing_replayed_doc,
    plan_replay,
    public_endpoint,
    replay,
)
from analyzer.store.db import connect_writer


def replay_command(
    *,
    endpoint: str | None,
    api_key_env: str | None = None,
    dry_run: bool = False,
    limit: int | None = None,
    concurrency: int = 2,
    rate: float = 2.0,
    model: str | None = None,
    only_models: list[str] | None = None,
    tools_file: Path | None = None,
    flatten: bool = False,
    timeout_s: float = 300.0,
    time_budget_s: float = 120.0,
    json_out: bool = False,
    db: Path | None = None,
) -> dict[str, Any]:
    """``analyze replay``: plan, then print (dry run) or send, store and print.

    Returns the JSON-ready report that ``--json`` prints.
    """
    if limit is not None and limit < 1:
        raise AnalyzerError("--limit must be at least 1", ExitCode.USAGE)
    if rate is not None and rate < 0:
        raise AnalyzerError("--rate must be >= 0 (0: no bound)", ExitCode.USAGE)
    if concurrency < 1:
        raise AnalyzerError("--concurrency must be at least 1", ExitCode.USAGE)
    url = None
    api_key = None
    with naming(endpoint="--endpoint", tools_file="--tools"):
        if not dry_run:
            if not endpoint:
                raise AnalyzerError("--endpoint URL is required (or use --dry-run to see what would be sent)",
                                    ExitCode.USAGE)
            url = endpoint_url(endpoint)
            if api_key_env:
                api_key = os.environ.get(api_key_env)
                if not api_key:
                    raise AnalyzerError(f"--api-key-env: the environment variable {api_key_env} is not set or empty",
                                        ExitCode.USAGE)
                check_api_key(api_key, f"the API key in ${api_key_env}")
        elif endpoint:
            url = endpoint_url(endpoint)
        tools = load_tools_file(tools_file) if tools_file else None

    con = connect_writer(db)
    try:
        ensure_turns(con)
        if not con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
            raise AnalyzerError("the database holds no records; run `analyze FILES...` first", ExitCode.NO_INPUT)
        plan = plan_replay(con, only_models=only_models, limit=limit, tools=tools, model=model, flatten=flatten)
        if dry_run:
            doc = dry_run_doc(plan, url)
            if json_out:
                print_json(doc)
            else:
                print_replay_dry_run(plan, doc)
            return doc
        if not plan.turns:
            doc = nothing_replayed_doc(plan, url)
            if json_out:
                print_json(doc)
            else:
                print_replay_header(plan, public_endpoint(url), dry=False)
            return doc
        report = replay(con, plan, url, api_key=api_key, concurrency=concurrency, rate=rate or None,
                        timeout_s=timeout_s, time_budget_s=time_budget_s)
    finally:
        con.close()
    doc = report.to_dict()
    if json_out:
        print_json(doc)
    else:
        print_replay_report(report)
    return doc
