"""A Parquet lake (``analyze export --lake``) on Spark: its tables, then the catalog's views and tables.

:func:`register_lake` registers every base relation of the lake as a temp view
(the columns the manifest names: the hive ``day`` column goes), then creates the
catalog's views and materialized tables from their Spark SQL
(:mod:`analyzer.questions.spark.sql`) in dependency order. ``turns``,
``sessions`` and ``ladder_baseline`` are recomputed on Spark from the base
tables (and cached, as DuckDB materializes them); the lake's own copies are
registered as ``lake_turns``, ``lake_sessions``, ``lake_ladder_baseline``, to
compare with. :func:`run_question` then answers any question.

pyspark is imported by the caller (a SparkSession is passed in): this module
needs none of it at import time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from analyzer.core.errors import first_line
from analyzer.questions.spark.binding import spark_args
from analyzer.questions.spark.sql import catalog_relations, relations_read, spark_sql, to_spark_sql
from analyzer.store.asking import resolve
from analyzer.store.lake import MANIFEST, check_lake_path, check_manifest, lake_schema, read_manifest
from analyzer.store.lake_files import LakeError, check_file_list, verify_relation

#: The prefix of the lake's own copies of the materialized tables.
LAKE_COPY = "lake_"


def register_lake(spark, lake_dir: str | Path, *, recompute: bool = True,
                  needs: Iterable[str] | None = None) -> dict[str, str]:
    """Register the lake at ``lake_dir`` (a local path or ``s3a://...``) in ``spark``; return what was made.

    Every base relation of the manifest becomes a temp view of its name. The
    catalog's views are created on top; with ``recompute`` (default) the
    materialized tables are recomputed by Spark and cached, and the lake's copies
    are kept as ``lake_<name>``; without it, the lake's copies are used as they are.
    ``needs`` (the relations one question reads, :func:`relations_read`) creates only
    the catalog relations those read, directly or through others. Returns ``{name: "lake" | "view" | "table"}``.

    The lake proves itself first, as on DuckDB: a local lake's files are checked
    against the manifest (:func:`analyzer.store.lake_files.verify_relation`) and
    Spark reads exactly those; at a URL, the files Spark lists and the rows it
    counts must be the manifest's (:func:`_check_remote`).

    Raises:
        AnalyzerError: a pattern character in the path, no lake manifest there (or
            one that cannot be read), another schema, or names in it that are
            not plain names (:func:`analyzer.store.lake.check_manifest`).
        LakeError: files or rows that differ from the manifest's, named by relation.
    """
    lake = str(lake_dir)
    doc, frames = lake_frames(spark, lake)
    made: dict[str, str] = {}
    relations = catalog_relations()
    for table, df in frames.items():
        materialized = table in relations and relations[table].kind == "table"
        name = LAKE_COPY + table if materialized and recompute else table
        df.createOrReplaceTempView(name)
        made[name] = "lake"
    pending = {n: q for n, q in relations.items() if q.kind == "view" or recompute or n not in doc["tables"]}
    texts = {n: spark_sql(q) for n, q in pending.items()}
    if needs is not None:
        wanted: set[str] = set()
        todo = [n for n in needs if n in texts]
        while todo:
            n = todo.pop()
            if n not in wanted:
                wanted.add(n)
                todo.extend(relations_read(texts[n]) & set(texts))
        texts = {n: t for n, t in texts.items() if n in wanted}
    for name in _in_dependency_order(texts):
        # Computed once and cut from its plan: a question over it then plans a scan, not
        # the hundred operators that made it (CACHE TABLE keeps the plan, and every
        # question paid seconds to analyze it again). A lake does not change while it is
        # registered, so a view's rows are as fixed as a materialized table's.
        spark.sql(texts[name]).localCheckpoint(eager=True).createOrReplaceTempView(name)
        made[name] = relations[name].kind
    return made


def lake_frames(spark, lake_dir: str | Path, *, keep_partition: bool = False) -> tuple[dict, dict]:
    """The manifest of the lake at ``lake_dir`` and each of its relations as a DataFrame, proven first.

    Each DataFrame has the manifest's columns and reads exactly the files the
    manifest lists, checked as :func:`register_lake` says. With ``keep_partition``
    a partitioned relation keeps its hive ``day`` column last (a DATE: a filter on
    it reads only those days' files); else it goes.

    Raises:
        AnalyzerError, LakeError: as :func:`register_lake`.
    """
    lake = str(lake_dir)
    check_lake_path(lake)  # Hadoop reads * ? [ ] { } in a path as a pattern, as DuckDB does
    local = "://" not in lake
    doc = read_manifest(lake) if local else _remote_manifest(spark, lake)
    frames = {}
    for table, entry in doc["tables"].items():
        columns = [c for c, _type in entry["columns"]]
        path = str(Path(lake).expanduser().resolve() / table) if local else f"{lake.rstrip('/')}/{table}"
        files = verify_relation(lake, table, entry) if local else [path]
        reader = spark.read.option("basePath", path) if entry.get("partition") else spark.read
        df = reader.parquet(*files)
        if not local:
            _check_remote(lake, table, entry, df)
        # The hive partition column is not one of the relation's: the manifest's columns are.
        kept = [entry["partition"]] if keep_partition and entry.get("partition") else []
        frames[table] = df.select(*[f"`{c}`" for c in columns + kept])
    return doc, frames


#: DuckDB's types of the lake's columns, as Spark's (JSON is text in the lake).
SPARK_TYPES = {"VARCHAR": "string", "JSON": "string", "INTEGER": "int", "BIGINT": "bigint", "DOUBLE": "double",
               "BOOLEAN": "boolean", "TIMESTAMP": "timestamp_ntz", "DATE": "date", "VARCHAR[]": "array<string>"}


def spark_schema(columns: Iterable[tuple[str, str] | list[str]]) -> str:
    """A relation's ``(column, DuckDB type)`` pairs (a manifest's, :func:`analyzer.store.lake.lake_schema`'s)
    as a Spark DDL schema.

    Raises:
        ValueError: a type the lake does not hold.
    """
    parts = []
    for name, typ in columns:
        if typ not in SPARK_TYPES:
            raise ValueError(f"column {name}: no Spark type for DuckDB's {typ}")
        parts.append(f"`{name}` {SPARK_TYPES[typ]}")
    return ", ".join(parts)


def _check_remote(lake: str, table: str, entry: dict, df) -> None:
    """A relation of a lake at a URL: the files Spark reads are the manifest's, and so is their row count.

    (Sizes and fingerprints are a local lake's checks: Spark lists the files and
    counts the rows from their footers, without reading the data.)
    """
    listed = {f["path"] for f in check_file_list(lake, table, entry)}
    prefix = f"{lake.rstrip('/')}/{table}/"
    read = {f.split(prefix, 1)[1] if prefix in f else f for f in df.inputFiles()}
    if read != listed:
        odd = sorted(read - listed) or sorted(listed - read)
        why = "is not in the manifest" if read - listed else "is missing"
        raise LakeError(f"lake {lake}: relation {table}: {odd[0]} {why} (the lake was changed after its export)")
    rows = df.count()
    if rows != entry.get("rows"):
        raise LakeError(f"lake {lake}: relation {table}: its files hold {rows} rows, the manifest says {entry.get('rows')}")


def lake_relations() -> set[str]:
    """What a question may read on Spark over a lake: its relations, the catalog's views and tables,
    and the lake's own copies of the materialized ones (``lake_turns`` ...)."""
    catalog = catalog_relations()
    copies = {LAKE_COPY + n for n, q in catalog.items() if q.kind == "table"}
    return set(lake_schema()) | set(catalog) | copies


def _remote_manifest(spark, lake: str) -> dict:
    """The manifest of a lake at a URL, read through Spark's filesystem and checked as a local one."""
    where = f"{lake.rstrip('/')}/{MANIFEST}"
    try:
        # Hadoop's filesystem, not spark.read: Spark's file listing skips names that start with `_`.
        jvm = spark._jvm
        path = jvm.org.apache.hadoop.fs.Path(where)
        stream = path.getFileSystem(spark._jsc.hadoopConfiguration()).open(path)
        try:
            text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        doc = json.loads(text)
    except Exception as exc:  # not there, not readable (Spark's own errors), not JSON
        first = first_line(exc)
        raise LakeError(f"lake {lake}: cannot read {MANIFEST}: {first}") from exc
    # The names become view names and quoted columns: checked as for a local lake.
    return check_manifest(doc, lake)


def _in_dependency_order(texts: dict[str, str]) -> list[str]:
    """The names of ``texts`` so that each comes after the catalog relations it reads."""
    deps = {n: relations_read(t) & set(texts) - {n} for n, t in texts.items()}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(deps):
        ready = sorted(n for n, d in deps.items() if n not in done and d <= done)
        if not ready:
            raise ValueError(f"the catalog's relations read each other in a circle: {sorted(set(deps) - done)}")
        order.extend(ready)
        done.update(ready)
    return order


def run_question(spark, name_or_sql: str, **params: Any) -> list[dict[str, Any]]:
    """Run a ``queries/`` question, a catalog view, or DuckDB SQL text on Spark; the rows as dicts.

    Parameters bind as on DuckDB (:func:`analyzer.store.asking.bind_params`), as
    Spark named parameters (:func:`analyzer.questions.spark.binding.spark_args`).
    """
    return [row.asDict(recursive=True) for row in question_frame(spark, name_or_sql, **params).collect()]


def question_frame(spark, name_or_sql: str, **params: Any):
    """The Spark DataFrame of a question (as :func:`run_question`, not collected)."""
    query = resolve(name_or_sql)
    args = spark_args(query, params)
    text = to_spark_sql(name_or_sql)
    return spark.sql(text, args=args) if args else spark.sql(text)
