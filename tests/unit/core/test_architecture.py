"""The package keeps its shape: the import-linter contracts of pyproject.toml hold."""

from __future__ import annotations

import ast
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


# The package's own modules imported inside functions: only where they defer a heavy optional
# dependency, said beside the import. pyspark (the spark extra) for `analyze sql --engine spark`
# and `analyze lake build`. Any other import inside a function would hide an arrow from the
# contracts: it goes at the top of its module.
DEFERRED = {
    "analyzer/jobs/sql.py": {"analyzer.questions.spark"},
    "analyzer/jobs/lake_build.py": {"analyzer.outputs.spark_lake", "analyzer.questions.spark",
                                    "analyzer.questions.spark.ship"},
}


def _deferred_imports() -> dict[str, set[str]]:
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
                    elif isinstance(n, ast.Import):
                        for alias in n.names:
                            if alias.name == "analyzer" or alias.name.startswith("analyzer."):
                                found.setdefault(str(path.relative_to(ROOT)), set()).add(alias.name)
    return found


def test_imports_inside_functions_are_only_the_deferred_ones():
    found = _deferred_imports()
    stray = {f: mods for f, mods in found.items()
             if not mods <= DEFERRED.get(f, set())}
    assert not stray, f"imports of the package's own modules inside functions (move them to the top): {stray}"
