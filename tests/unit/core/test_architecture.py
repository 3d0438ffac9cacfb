"""The package keeps its shape: the import-linter contracts of pyproject.toml hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from tests.support.repo import REPO

ROOT = REPO


def test_the_layer_contracts_hold():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    p = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in p.stdout


# The package's own modules imported inside functions, each for a reason said beside it:
# analyzer.cli.app's jobs and printers (`analyze --help` loads typer alone), analyzer.api's
# jobs (report, export, replay bring plotly, jinja2, httpx), the metrics readers that
# bring httpx and numpy, and Spark. (`import analyzer` stays light without
# any: the package imports analyzer.api only when one of its functions is first used.)
# Any other import inside a function would hide an arrow from the contracts.
DEFERRED = {
    "analyzer/cli/app.py": None,   # every command function imports its job and printer
    "analyzer/api.py": {"analyzer.jobs.report", "analyzer.jobs.export", "analyzer.jobs.replay"},
    "analyzer/jobs/metrics.py": {"analyzer.ingestion.apistream", "analyzer.io.prometheus"},
    "analyzer/ingestion/metric_readers.py": {"analyzer.ingestion.apistream"},
    # `analyze sql --engine spark` only: pyspark and sqlglot are the spark extra, not dependencies.
    "analyzer/jobs/sql.py": {"analyzer.questions.spark"},
    # `analyze lake build` only: the same extra (pyspark, and the modules that import it).
    "analyzer/jobs/lake_build.py": {"analyzer.outputs.spark_lake", "analyzer.questions.spark",
                                    "analyzer.questions.spark.ship"},
}


def _deferred_imports() -> dict[str, set[str]]:
    import ast

    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "analyzer").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in fn.body:
                for n in ast.walk(node):
                    if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("analyzer")):
                        found.setdefault(str(path.relative_to(ROOT)), set()).add("." * n.level + (n.module or ""))
    return found


def test_imports_inside_functions_are_only_the_deferred_ones():
    found = _deferred_imports()
    stray = {f: mods for f, mods in found.items()
             if f not in DEFERRED or (DEFERRED[f] is not None and not mods <= DEFERRED[f])}
    assert not stray, f"imports of the package's own modules inside functions (move them to the top): {stray}"
