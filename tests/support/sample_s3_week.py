"""The bundled sample week's S3 chunks and metrics, ingested and classified once per test process.

Three modules read that same database (tests/unit/questions/test_queries.py asks every
question of it; tests/unit/classification/test_metrics_windows.py checks its episodes
and classes against the ground truth; tests/e2e/test_sample_week.py its classes from
the chunks alone): each test gets a copy of the one built here,
with the report of its metrics load, instead of ingesting the week again (~2 s).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from analyzer.classification.turns import refresh_turns
from analyzer.ingestion.logs import ingest
from analyzer.jobs.metrics import load_metrics
from tests.support.fresh_db import fresh_connection
from tests.support.repo import REPO

SAMPLE = REPO / "sample_logs"

_BUILT: tuple[Path, Any] | None = None


def _build() -> tuple[Path, Any]:
    """Ingest sample_logs/s3, load sample_logs/metrics (the default wedge window), classify; once."""
    global _BUILT
    if _BUILT is None or not _BUILT[0].exists():
        folder = Path(tempfile.mkdtemp(prefix="analyzer-sample-week-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        db = folder / "sample.duckdb"
        con = fresh_connection(db)
        try:
            ingest(con, [str(SAMPLE / "s3")])
            report = load_metrics(con, [str(SAMPLE / "metrics")]) if (SAMPLE / "metrics").is_dir() else None
            refresh_turns(con)
        finally:
            con.close()
        _BUILT = (db, report)
    return _BUILT


def sample_s3_week(dest: str | Path) -> tuple[Path, Any]:
    """A copy at ``dest`` of the sample week (S3 chunks and metrics) ingested and classified, and the
    report of its metrics load (``None`` without sample_logs/metrics); skips while sample_logs/ is absent."""
    if not (SAMPLE / "s3").is_dir():
        pytest.skip("sample_logs/ not generated yet")
    db, report = _build()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, dest)
    return dest, report
