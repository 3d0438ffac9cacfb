"""Shared fixtures. Add new ones under a section header of their own.

Servers started here bind 127.0.0.1 only and are stopped when the test ends.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.support.ingesting import ingest_records
from tests.support.proxy import LadderProxy
from tests.support.readme_run import run_first_command
from tools.faulty_upstream import FaultyUpstream

# Every JVM the tests start (local Spark, spark-submit, the standalone cluster's daemons
# and executors; each inherits this environment) lives seconds on the sample week, where
# the JIT's optimizing tier (C2) compiles code the run ends before it pays back, on the same
# two cores as the tests: C1 alone (figures: benchmarks/README.md#spark_jitpy). A developer's
# own JAVA_TOOL_OPTIONS wins; the JVM says "Picked up JAVA_TOOL_OPTIONS" on stderr.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

# ---------------------------------------------------------------------------
# Loopback servers: the fault-injecting upstream and the ladder proxy


@pytest.fixture
def upstream() -> Iterator[FaultyUpstream]:
    """A running fault-injecting upstream; set ``upstream.script`` per test.

    Answers every request with a healthy completion until scripted otherwise.
    """
    with FaultyUpstream() as server:
        yield server
        # A script that raised answered 599; fail the test that wrote it.
        assert not server.script_errors, f"upstream script raised: {server.script_errors!r}"


@pytest.fixture
def make_proxy(tmp_path, upstream) -> Iterator[Callable[..., LadderProxy]]:
    """Start a ladder proxy: ``make_proxy(flatten=True, max_attempts=5, ...)``.

    It forwards to the ``upstream`` fixture unless ``upstream_url`` is given, and
    writes its JSONL log under ``tmp_path`` (``proxy.log_path``).
    """
    started: list[LadderProxy] = []

    def make(upstream_url: str | None = None, **options: Any) -> LadderProxy:
        log_path = tmp_path / f"proxy-{len(started)}.jsonl"
        proxy = LadderProxy(upstream_url or upstream.chat_url, log_path, **options).start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@pytest.fixture
def proxy(make_proxy) -> LadderProxy:
    """A ladder proxy with default options in front of ``upstream``."""
    return make_proxy()


# ---------------------------------------------------------------------------
# A temporary database holding some records


@pytest.fixture
def ingested(tmp_path) -> Iterator[Callable[..., Any]]:
    """``ingested(records)``: the records ingested and classified in a fresh database file
    under ``tmp_path`` (as `analyze` does), as an open connection closed after the test.
    Each call makes another database (``name`` tells them apart)."""
    opened = []

    def make(records: list[dict], name: str = "a"):
        folder = tmp_path / name
        folder.mkdir()
        con = ingest_records(folder / "db.duckdb", records)
        opened.append(con)
        return con

    yield make
    for con in opened:
        con.close()


# ---------------------------------------------------------------------------
# The README's first command, run once (tests/support/readme_run.py)


@pytest.fixture(scope="session")
def readme_week(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The folder the README's first command ran in (``sample_logs/``, ``analyzer.duckdb``) and
    the finished process. Read only: a test that writes there takes a copy."""
    folder = tmp_path_factory.mktemp("readme-week")
    return folder, run_first_command(folder)
