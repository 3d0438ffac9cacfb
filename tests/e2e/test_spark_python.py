"""A local Spark session's executors run the analyzer's own Python, whatever ``python3`` is on PATH.

pyspark starts its Python workers with ``$PYSPARK_PYTHON``, else ``python3`` from
PATH: for an ``analyze`` installed with pipx, or a venv run without activating
it, that is an interpreter without duckdb or the analyzer, and every Spark
reading of raw logs failed in its executors (``No module named 'duckdb'``). The
session starts in a fresh process whose PATH holds a ``python3`` that cannot
import duckdb; a Python function runs in an executor and imports it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.repo import REPO
from tests.support.services import need_spark

pytestmark = pytest.mark.spark

_PROBE = """
import os, sys
from analyzer.questions.spark import local_session
spark = local_session("python-probe")
# In an executor: the python3 on PATH cannot import duckdb, the analyzer's interpreter can.
print(spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("duckdb").__name__).collect()[0])
print(os.environ.get("PYSPARK_PYTHON", "-"))  # as it was before the session: nothing left set
spark.stop()
"""


def test_the_executors_run_this_interpreter_not_the_python3_on_path(tmp_path):
    need_spark()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    bare = bin_dir / "python3"  # this interpreter without site-packages: no duckdb, no analyzer
    bare.write_text(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
    bare.chmod(0o755)
    check = subprocess.run([str(bare), "-c", "import duckdb"], capture_output=True, text=True)
    assert check.returncode != 0 and "duckdb" in check.stderr  # the trap is set
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    imported, left = p.stdout.split()
    assert imported == "duckdb" and left == "-"
