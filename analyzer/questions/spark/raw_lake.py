"""Every relation of a lake, from raw logs on Spark, added to the lake they go into.

``analyze export --lake`` writes what a database holds; a lake built on Spark
holds the same relations with the same columns, computed from the raw logs by
the classification of :mod:`.raw` and merged with what the lake held before, the
way ``analyze`` merges a later run into its database:

- a file is known by its path: a file read again replaces what the lake held of
  it (its records, quarantined lines, events and ``source_files`` row, keeping
  its ``file_id``); a new file gets the next ``file_id``, in the order the
  inputs were found (as the ingest numbers them);
- copies of one record collapse over the lake's records and the new ones alike
  (:func:`.raw_records.collapse`: a full copy before a truncated one, then the
  first by file and line, so a record the lake holds stays);
- ``records`` is partitioned by UTC day and only the days that get or lose a
  record are written again (:attr:`LakeRelations.days`); the lake's other days
  are kept as they are;
- everything derived (error kinds, feature labels, pod windows, ``turns``,
  ``sessions``, ``ladder_baseline``) is computed again over all the records, so a
  session that crosses midnight is classed as if the days had been read at once;
  metric files are stored on top of the lake's metrics as a later load stores
  them, and the windows computed over all;
- the settings (caller deadline, wedge window) and the model map are the lake's
  unless given; ``replay_attempts`` and ``runs`` are carried over.

The writer is :mod:`analyzer.outputs.spark_lake`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analyzer.classification.turns import CALLER_DEADLINE
from analyzer.questions.spark.lake import SPARK_TYPES, lake_frames, spark_schema
from analyzer.questions.spark.raw import check_session, classify, read_raw
from analyzer.questions.spark.raw_events import proxy_events
from analyzer.questions.spark.raw_lines import FILE, LONG_LINE, SKIPPED
from analyzer.questions.spark.raw_records import BLANK, FREE_TEXT, OK, collapse
from analyzer.questions.spark.raw_windows import METRIC_RELATIONS
from analyzer.questions.spark.sql import catalog_relations, spark_sql
from analyzer.store.migrations import BASELINE, MIGRATIONS
from analyzer.store.holdings import WEDGE_WINDOW_SETTING
from analyzer.store.lake import MANIFEST, PARTITION, lake_schema

#: The relations carried over from the lake as they are (nothing from the logs makes them).
CARRIED = ("replay_attempts", "runs")


@dataclass
class LakeRelations:
    """What a lake built from raw logs holds: every relation, as Spark DataFrames.

    ``frames`` has every relation of :func:`analyzer.store.lake.lake_schema`, its
    columns in order with their types (a few that the driver computed, the metrics,
    as Arrow tables with the columns in order). ``days`` are the UTC days (``YYYY-MM-DD``) of
    ``records`` to write, and ``records_written`` their records: the lake's other
    days of ``records`` stay as they are (a new lake: every day). ``read`` is what
    reading the logs found.
    """

    frames: dict[str, DataFrame | pa.Table]
    days: list[str]
    records_written: DataFrame
    previous: dict | None
    read: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    _persisted: list[DataFrame] = field(default_factory=list)

    def unpersist(self) -> None:
        """Free what was kept in Spark's storage while the lake was written."""
        for df in self._persisted:
            df.unpersist()


def lake_relations(spark: SparkSession, paths: list[str], lake_dir: str | Path, *,
                   metrics: list[str] | None = None, wedge_window: str | float | None = None,
                   model_map: dict[str, str] | None = None, caller_deadline_s: float | None = None,
                   now: datetime | None = None) -> LakeRelations:
    """Every relation of the lake at ``lake_dir`` once ``paths`` (and ``metrics``) are added to it.

    ``paths`` and ``metrics`` as :func:`.raw.read_raw` and :func:`.raw.classify` take
    them; ``wedge_window``, ``model_map`` and ``caller_deadline_s`` as ``analyze``
    takes them (default: the lake's, else the analyzer's). ``lake_dir`` may hold no
    lake yet. Nothing is written here.

    Raises:
        InputError: a local path matches nothing.
        LakeError: a lake there that is not this analyzer's, or whose files differ from its manifest.
    """
    check_session(spark)
    now = now or datetime.now(timezone.utc).replace(tzinfo=None)
    schema = lake_schema()
    previous, old = (lake_frames(spark, lake_dir, keep_partition=True)
                     if (Path(lake_dir).expanduser() / MANIFEST).exists() else (None, {}))
    # Only records is read by day; the others are read whole, with their own columns.
    old = {t: df if t == "records" else df.drop(PARTITION) for t, df in old.items()}
    raw = read_raw(spark, [str(p) for p in paths])
    kept: list[DataFrame] = [raw.lines]

    ids = _file_ids(raw.lines, old.get("source_files"))
    reread = ids.where(F.col("known")).select("file_id")
    by_file = F.broadcast(ids.select("file_index", "file_id"))

    def mapped(df: DataFrame, index: str = "file_id") -> DataFrame:
        """``df`` with the file's place in the input (column ``index``) replaced by its ``file_id``."""
        return df.withColumnRenamed(index, "file_index").join(by_file, "file_index").drop("file_index")

    def of_other_files(table: str) -> DataFrame | None:
        """The lake's rows of ``table`` from files not read again (None: no lake)."""
        return old[table].join(reread, "file_id", "left_anti") if table in old else None

    # Records: the days that get a record, or lose one of a file read again, are collapsed anew.
    new_copies = mapped(raw.every_copy)
    day = F.to_date("ts").cast("string")
    days = {r[0] for r in new_copies.select(day).distinct().collect()}
    if "records" in old:
        gone = old["records"].join(reread, "file_id", "left_semi")
        days |= {str(r[0]) for r in gone.select(PARTITION).distinct().collect()}
    touched = sorted(days)  # (a record's time is never NULL: a line without one is quarantined)
    if "records" in old:
        in_touched = F.col(PARTITION).cast("string").isin(touched)
        redone = old["records"].where(in_touched).drop(PARTITION).join(reread, "file_id", "left_anti")
        untouched = old["records"].where(~in_touched).drop(PARTITION)
        written = collapse(redone.unionByName(new_copies))
    else:
        untouched = None
        written = collapse(new_copies)
    written = written.persist(StorageLevel.MEMORY_AND_DISK)
    kept.append(written)
    records = written if untouched is None else untouched.unionByName(written)

    frames: dict[str, DataFrame] = {"records": records}
    frames["source_files"] = _union(of_other_files("source_files"), _source_files(raw, ids, now))
    frames["quarantine"] = _union(of_other_files("quarantine"), mapped(raw.quarantine))
    events = spark.createDataFrame(proxy_events(raw.judged), spark_schema(schema["proxy_events"]))
    frames["proxy_events"] = _union(of_other_files("proxy_events"), mapped(events))
    skipped = [(s["path"], s["reason"], s.get("size"), s.get("mtime"), now) for s in raw.skipped]
    frames["skipped_files"] = _union(
        old["skipped_files"].where(~F.col("path").isin([s[0] for s in skipped])) if "skipped_files" in old else None,
        spark.createDataFrame(skipped, spark_schema(schema["skipped_files"])))

    # The classification, over every record (the text of the lines is not read for it).
    settings = {r["name"]: r for r in (old["settings"].collect() if "settings" in old else [])}
    caller = caller_deadline_s if caller_deadline_s is not None else (
        float(settings[CALLER_DEADLINE]["value"]) if CALLER_DEADLINE in settings else None)
    wedge = wedge_window if wedge_window is not None else (
        float(settings[WEDGE_WINDOW_SETTING]["value"]) if WEDGE_WINDOW_SETTING in settings else "5m")
    mapping = {r["log_model"]: r["model_name"] for r in old["model_map"].collect()} if "model_map" in old else {}
    mapping.update(model_map or {})
    stored = {n: old[n].toArrow() for n in METRIC_RELATIONS if n in old and n != "model_map"}
    classified = classify(spark, records.drop("raw"), metrics, wedge_window=wedge, model_map=mapping or None,
                          caller_deadline_s=caller, stored_metrics=stored)
    windows = classified.windows
    computed = windows.wedge_window_s is not None
    for name in ("error_kinds", "feature_labels", "class_labels"):
        frames[name] = spark.table(name)
    # Computed once and cut from its plan: `sessions` and `ladder_baseline` read it, and
    # planning them over the hundred operators that make it took longer than running them.
    frames["turns"] = spark.table("turns").localCheckpoint(eager=True)
    frames["turns"].createOrReplaceTempView("turns")
    relations = catalog_relations()
    for name in ("sessions", "ladder_baseline"):  # each reads `turns` alone
        frames[name] = spark.sql(spark_sql(relations[name]))
    for name in METRIC_RELATIONS:
        if computed:  # in the driver already, as the scratch database stored them
            frames[name] = windows.metrics[name]
        elif name == "model_map":
            frames[name] = spark.createDataFrame(list(mapping.items()), spark_schema(schema[name]))
        else:
            frames[name] = old.get(name)
    frames["pod_windows"] = classified.pod_windows if computed else old.get("pod_windows")
    if frames["pod_windows"] is not None:
        frames["turns_windows"] = frames["pod_windows"].select("model_name", "kind", "start_ts", "end_ts").distinct()
    rows = {CALLER_DEADLINE: settings.get(CALLER_DEADLINE), WEDGE_WINDOW_SETTING: settings.get(WEDGE_WINDOW_SETTING)}
    if caller_deadline_s is not None or rows[CALLER_DEADLINE] is None:
        rows[CALLER_DEADLINE] = (CALLER_DEADLINE, spark.table("settings").collect()[0]["value"], now)
    if computed:  # the windows now in the lake were made with this wedge window
        rows[WEDGE_WINDOW_SETTING] = (WEDGE_WINDOW_SETTING, repr(float(windows.wedge_window_s)), now)
    frames["settings"] = spark.createDataFrame([tuple(r) for r in rows.values() if r is not None],
                                               spark_schema(schema["settings"]))
    for name in CARRIED:
        frames[name] = old.get(name)
    # The schema the lake's relations have: this analyzer's, all of whose migrations it was made with.
    frames["_migrations"] = old["_migrations"] if "_migrations" in old else spark.createDataFrame(
        [(name, now) for name in (BASELINE, *(n for n, _ in MIGRATIONS))], spark_schema(schema["_migrations"]))

    out = {}
    for name, columns in schema.items():
        df = frames.get(name)
        if df is None:
            df = spark.createDataFrame([], spark_schema(columns))
        out[name] = df if isinstance(df, pa.Table) else _conform(df, columns)
    read = {"files": ids.count(), "skipped": raw.skipped, "notes": raw.notes}
    written = _conform(written, schema["records"])
    return LakeRelations(out, touched, written, previous, read, list(classified.warnings), kept)


def _conform(df: DataFrame, columns: list[tuple[str, str]]) -> DataFrame:
    """``df`` with the relation's columns, in order, of the lake's types."""
    return df.select(*[F.col(f"`{c}`").cast(SPARK_TYPES[t]).alias(c) for c, t in columns])


def _union(old: DataFrame | None, new: DataFrame) -> DataFrame:
    return new if old is None else old.unionByName(new.select(*old.columns))


def _file_ids(lines: DataFrame, known: DataFrame | None) -> DataFrame:
    """The files read (a ``file`` row each) with their ``file_id``: the lake's for a path it knows, else the next.

    ``file_index, path, file_id, known``. New files are numbered after the lake's
    highest ``file_id`` in the order the inputs were found, as the ingest numbers them.
    """
    files = lines.where(F.col("kind") == FILE).select("file_index", "path")
    if known is None:
        start, files = 0, files.withColumn("file_id", F.lit(None).cast("int"))
    else:
        start = known.agg(F.max("file_id")).collect()[0][0] or 0
        files = files.join(known.select("path", "file_id"), "path", "left")
    fresh = files.where(F.col("file_id").isNull()).withColumn(
        "file_id", (F.lit(start) + F.row_number().over(Window.orderBy("file_index"))).cast("int"))
    return (files.where(F.col("file_id").isNotNull()).withColumn("known", F.lit(True))
            .unionByName(fresh.withColumn("known", F.lit(False))))


def _source_files(raw, ids: DataFrame, now: datetime) -> DataFrame:
    """``source_files`` rows of the files read, as the ingest registers them.

    ``lines`` is how far a file was read, ``records`` its lines that are records
    (each copy), ``quarantined`` its bad lines (those over the length limit too),
    ``free_text`` its free-text lines. A file that could not be read from its first
    line is no row (it is in ``skipped_files``).
    """
    lines = raw.lines
    counts = raw.judged.groupBy("file_index").agg(
        F.count(F.when(F.col("verdict") == OK, 1)).alias("records"),
        F.count(F.when(~F.col("verdict").isin(OK, BLANK, FREE_TEXT), 1)).alias("bad"),
        F.count(F.when(F.col("verdict") == FREE_TEXT, 1)).alias("free_text"))
    long = lines.where(F.col("kind") == LONG_LINE).groupBy("file_index").agg(F.count("*").alias("long"))
    failed = lines.where(F.col("kind") == SKIPPED).select("file_index").distinct()
    files = lines.where(F.col("kind") == FILE)
    nothing_read = files.where(F.col("line_no") == 0).join(failed, "file_index", "left_semi").select("file_index")
    return (files.join(nothing_read, "file_index", "left_anti")
            .join(F.broadcast(ids.select("file_index", "file_id")), "file_index")
            .join(counts, "file_index", "left").join(long, "file_index", "left")
            .select("file_id", "path", "form", "size_bytes", "mtime", "fingerprint",
                    F.col("line_no").alias("lines"), F.coalesce("records", F.lit(0)).alias("records"),
                    (F.coalesce("bad", F.lit(0)) + F.coalesce("long", F.lit(0))).alias("quarantined"),
                    F.coalesce("free_text", F.lit(0)).alias("free_text"),
                    F.lit(now).cast("timestamp_ntz").alias("ingested_at"), "bytes_done",
                    F.col("line_no").alias("lines_done"), "complete", "ctime"))
