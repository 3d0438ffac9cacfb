"""The analyzer shipped to Spark's executors: its package as a zip, added to the session.

The executors' Python workers run the analyzer's own readers
(:mod:`.raw_lines`) and so import the package. Rather than have it installed
where Spark runs, the driver zips the very package it imported (its ``.py``
files) and adds the zip to the session (``SparkContext.addPyFile``): each
executor puts it first on its workers' ``sys.path``, so they run the driver's
analyzer, whatever is installed beside them. They still need the analyzer's
dependencies (duckdb, pyarrow, sqlglot: what its modules import), as Spark's own
Python needs pyspark.

A package imported from a zip (``spark-submit --py-files analyzer.zip``, or a
wheel) is on the executors already: nothing is added then.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

#: The name of the zip added to the session.
ZIP_NAME = "analyzer.zip"


def package_dir() -> Path:
    """The folder of the analyzer package the driver imported."""
    return Path(__file__).resolve().parents[2]  # analyzer/questions/spark/ship.py


def zip_package(dest_dir: str | Path) -> Path | None:
    """The analyzer package's ``.py`` files as ``dest_dir / analyzer.zip``; None when it was imported from a zip."""
    root = package_dir()
    if not root.is_dir():  # inside a zip or a wheel: shipped by whoever put it there
        return None
    out = Path(dest_dir) / ZIP_NAME
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" not in path.parts:
                z.write(path, Path("analyzer") / path.relative_to(root))
    return out


def ship_package(spark, dest_dir: str | Path) -> Path | None:
    """Add the analyzer (zipped into ``dest_dir``, which must outlive the session) to ``spark``'s executors.

    Returns the zip, or None when the package came from a zip already.
    """
    out = zip_package(dest_dir)
    if out is not None:
        spark.sparkContext.addPyFile(str(out))
    return out

