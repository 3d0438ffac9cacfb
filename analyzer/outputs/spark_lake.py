"""``analyze lake build``: a lake written by Spark from raw logs, the layout and manifest of ``analyze export --lake``.

:func:`build_lake` computes every relation on Spark
(:func:`analyzer.questions.spark.raw_lake.lake_relations`: the raw logs read and
classified by the executors, merged with the lake already there) and writes the
lake as the export writes it (:mod:`analyzer.outputs.lake`): one folder per
relation, the big ones in ``day=YYYY-MM-DD`` folders, staged in a hidden folder
inside the lake under the export's lock, each relation's folder swapped in, the
manifest (every file with its size, rows and fingerprint) written last. So
``analyze sql --lake``, ``analyze report --lake`` and every Spark question read it
unchanged, and a reader proves it as it proves an export.

Only the days of ``records`` that changed are written; the lake's other days are
kept (hard links into the staged folder: the lake stays whole until the swap).
Every other relation is written whole. Each file is checked to hold the lake
schema's DuckDB types (as DuckDB reads it) before the manifest names it.

The lake is a folder the driver and every executor reach at the same path: a
local folder for local mode or one machine's standalone cluster, a shared file
system on a cluster (NFS, EFS, ``/dbfs``). The logs may be anywhere Spark reads.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.outputs.lake import (PARTITIONED_BY, LakeReport, check_out_dir, export_lock, manifest_entry, manifest_of,
                                   new_staging, swap_lake_in, write_relation)
from analyzer.questions.spark.raw_lake import LakeRelations, lake_relations
from analyzer.store.db import registered
from analyzer.store.lake import PARTITION, check_lake_path, lake_schema
from analyzer.store.lake_files import files_on_disk

#: The relations Spark's executors write: those that grow with the logs. The others are
#: brought to the driver and written as the export writes them.
SPARK_WRITTEN = ("records", "turns", "sessions")


def build_lake(spark: SparkSession, paths: list[str], lake_dir: str | Path, *, metrics: list[str] | None = None,
               wedge_window: str | float | None = None, model_map: dict[str, str] | None = None,
               caller_deadline_s: float | None = None, compression: str = "zstd") -> tuple[LakeReport, LakeRelations]:
    """Add the raw logs ``paths`` (and ``metrics``) to the lake at ``lake_dir`` on Spark; what was written.

    A new lake when ``lake_dir`` is empty or not there; a re-run adds new files and
    replaces what the lake held of a file read again (see
    :mod:`analyzer.questions.spark.raw_lake`). Returns the report (rows of every
    relation, files) and the relations written (what reading found, the days).

    Raises:
        AnalyzerError: (usage) ``lake_dir`` is a file, a folder with other content, or
            has a pattern character in its path; InputError: a local path matches nothing;
            LakeError: the lake there is not this analyzer's or differs from its manifest;
            WriteError: another export or build is writing it.
    """
    check_lake_path(lake_dir, "lake")
    out = check_out_dir(lake_dir, "lake")
    report = LakeReport(path=str(out))
    with export_lock(out):
        relations = lake_relations(spark, paths, out, metrics=metrics, wedge_window=wedge_window,
                                   model_map=model_map, caller_deadline_s=caller_deadline_s)
        staging = new_staging(out)
        try:
            write_relations(spark, relations, out, staging, report, compression)
        except OSError as exc:
            raise AnalyzerError(f"cannot write the lake to {out}: {exc}", ExitCode.FAILED) from exc
        finally:
            relations.unpersist()
            shutil.rmtree(staging, ignore_errors=True)
    return report, relations


def write_relations(spark: SparkSession, relations: LakeRelations, out: Path, staging: Path, report: LakeReport,
                    compression: str = "zstd") -> None:
    """Write ``relations`` into ``staging``, check them, and swap them into the lake ``out`` (under its lock).

    The relations that grow with the logs (:data:`SPARK_WRITTEN`) are written by
    Spark's executors; the others (labels, windows, metrics, the files' registry:
    small beside them) are brought to the driver and written by the export's own
    writer (:func:`analyzer.outputs.lake.write_relation`).
    """
    schema = lake_schema()
    old = manifest_of(out)
    con = duckdb.connect()
    try:
        entries = {}
        for table, columns in schema.items():
            frame = relations.records_written if table == "records" else relations.frames[table]
            if table in SPARK_WRITTEN:
                if table == "records":  # first: the days Spark writes then go beside them
                    _keep_days(out, staging, old, relations.days)
                _spark_write(frame, table, staging, compression)
                entries[table] = _entry(table, columns, staging, con)
            else:
                with registered(con, "_relation", frame if isinstance(frame, pa.Table) else frame.toArrow()):
                    _, entries[table] = write_relation(con, table, columns, staging, compression, source="_relation")
            report.tables[table] = entries[table]["rows"]
        records = [str(staging / "records" / f["path"]) for f in entries["records"]["files"]]
        first, last = con.execute("SELECT min(ts), max(ts) FROM read_parquet(?, hive_partitioning = false)",
                                  [records]).fetchall()[0]
    finally:
        con.close()
    swap_lake_in(out, staging, entries, old, (first, last), report)


def _spark_write(df: DataFrame, table: str, staging: Path, compression: str) -> None:
    """``df`` as Parquet in ``staging / table`` by Spark: by UTC day of its time column, one file a day.

    No rows: one file of its columns, as the export writes an empty relation.
    """
    dest = str(staging / table)
    time_column = PARTITIONED_BY[table]
    (df.withColumn(PARTITION, F.to_date(time_column)).repartition(PARTITION).sortWithinPartitions(time_column)
     .write.mode("append").partitionBy(PARTITION).option("compression", compression).parquet(dest))
    _tidy(staging / table)
    if not files_on_disk(staging, table, True):
        df.coalesce(1).write.mode("append").option("compression", compression).parquet(dest)
        _tidy(staging / table)


def _entry(table: str, columns: list[tuple[str, str]], staging: Path, con: duckdb.DuckDBPyConnection) -> dict:
    """The manifest entry of the files in ``staging / table`` (Spark's, and the days kept), their types checked."""
    partitioned = bool(files_on_disk(staging, table, True))
    files = [str(staging / table / f) for f in files_on_disk(staging, table, partitioned)]
    _check_types(con, table, columns, files)
    rows = con.execute("SELECT coalesce(sum(num_rows), 0) FROM parquet_file_metadata(?)", [files]).fetchall()[0][0]
    return manifest_entry(table, columns, staging, int(rows), partitioned, con)


def _keep_days(out: Path, staging: Path, old: dict | None, written: list[str]) -> None:
    """The lake's ``records`` files of the days not written, linked into the staged folder (the lake keeps them)."""
    if not old or "records" not in old.get("tables", {}):
        return
    for f in old["tables"]["records"].get("files", []):
        folder = Path(f["path"]).parent.name
        if folder.startswith(f"{PARTITION}=") and folder.split("=", 1)[1] in written:
            continue
        target = staging / "records" / f["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(out / "records" / f["path"], target)


def _tidy(folder: Path) -> None:
    """Leave only the Parquet files Spark wrote (no ``_SUCCESS``, no checksum files)."""
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() and (path.suffix != ".parquet" or path.name.startswith((".", "_"))):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def _check_types(con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]], files: list[str]) -> None:
    """The files hold the relation's columns with its DuckDB types (JSON as text), as DuckDB reads them."""
    got = [(r[0], r[1]) for r in con.execute(
        "DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)", [files]).fetchall()]
    want = [(c, "VARCHAR" if t == "JSON" else t) for c, t in columns]
    if got != want:
        wrong = next((f"{w} (written as {g})" for w, g in zip(want, got) if w != g), f"{len(got)} columns")
        raise AnalyzerError(f"relation {table}: Spark wrote column {wrong}, not the lake's type", ExitCode.FAILED)
