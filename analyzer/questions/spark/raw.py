"""Classification on Spark from the raw proxy logs, turn for turn what ``analyze`` stores in DuckDB.

::

    from analyzer.questions.spark import local_session
    from analyzer.questions.spark.raw import classify_raw, read_records

    spark = local_session()                       # or the cluster's SparkSession (UTC)
    records = read_records(spark, ["logs/s3", "logs/kubectl"])     # DuckDB's `records`
    turns = classify_raw(spark, ["logs/s3", "logs/kubectl"], metrics=["logs/metrics"])

The steps are the ingest's and the classification's, each by the analyzer's own
code where it can run on Spark, and said where it cannot:

1. files are found as ``analyze`` finds them (:func:`analyzer.io.sources.discover_inputs`
   for local paths; Spark's listing for ``s3a://``, ``hdfs://`` and the like) and
   read into numbered lines on the executors by the ingest's readers (:mod:`.raw_lines`);
2. Spark SQL judges and types the lines as :mod:`analyzer.store.record_sql` does,
   quarantines the same lines and collapses the copies of one record (:mod:`.raw_records`);
3. ``queries/turn_features.sql`` and ``queries/turns.sql``, transpiled to Spark SQL
   (:func:`analyzer.questions.spark.sql.spark_sql`), give the features and
   the turns; the labels between them are :mod:`analyzer.online`'s, decided in
   the driver over the distinct feature rows (:mod:`.raw_labels`);
4. the pods' wedged and down windows come from the metric files by the
   analyzer's own rule, on a scratch DuckDB in the driver (:mod:`.raw_windows`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analyzer.core.errors import InputError
from analyzer.io.sources import discover_inputs, is_stdin
from analyzer.questions.spark import raw_labels
from analyzer.questions.spark.raw_lines import LINES_DDL, LINE, LONG_LINE, NOTE, SKIPPED, file_lines
from analyzer.questions.spark.raw_records import collapse, judge, quarantined, typed
from analyzer.questions.spark.raw_windows import Windows, pod_windows
from analyzer.questions.spark.sql import catalog_relations, spark_sql

# A URI Spark lists itself (s3a://, hdfs://, abfss://, gs://, dbfs:/, file:/): the
# files need not be on the driver's disk. s3:// is the analyzer's own (mirrored
# first, as `analyze s3://...` does); a plain path is found as `analyze` finds it.
_SPARK_URI = re.compile(r"^(?!s3://)[a-zA-Z][a-zA-Z0-9+.-]+:/")


@dataclass
class RawLogs:
    """What reading raw logs on Spark found: DuckDB's ``records`` and ``quarantine``, and the files.

    ``files`` is ``file_id, path, form`` (``file_id`` is the file's place in the
    input: the key ``records.file_id`` and ``quarantine.file_id`` hold).
    :attr:`skipped` and :attr:`notes` are ``{"path", "reason", "size", "mtime"}`` /
    ``{"path", "note"}`` as the ingest reports them. ``lines`` (the numbered
    lines read) may be kept in Spark's storage: call :meth:`unpersist` when done.
    """

    records: DataFrame
    quarantine: DataFrame
    files: DataFrame
    lines: DataFrame
    found_skipped: list[dict] = field(default_factory=list)  # by discovery, before any file was read
    found_notes: list[dict] = field(default_factory=list)
    #: every line judged (:func:`.raw_records.judge`), and every copy of every record before the
    #: copies collapse (a lake build collapses them with the lake's records, :mod:`.raw_lake`)
    judged: DataFrame | None = None
    every_copy: DataFrame | None = None

    @cached_property
    def skipped(self) -> list[dict]:
        """Files that could not be read as logs, with the reason (reads the files, once)."""
        return self.found_skipped + [{"path": r.path, "reason": r.detail, "size": r.size_bytes, "mtime": r.mtime}
                                     for r in self._said if r.kind == SKIPPED]

    @cached_property
    def notes(self) -> list[dict]:
        """Inputs passed over on purpose (metric files, the mirror's derived tiers)."""
        return self.found_notes + [{"path": r.path, "note": r.detail} for r in self._said if r.kind == NOTE]

    @cached_property
    def _said(self) -> list:
        """The readers' word on whole files: skipped (with why) or passed over."""
        return (self.lines.where(F.col("kind").isin(SKIPPED, NOTE))
                .select("kind", "path", "detail", "size_bytes", "mtime").collect())

    def unpersist(self) -> None:
        """Free the lines kept in Spark's storage."""
        self.lines.unpersist()


def check_session(spark: SparkSession) -> None:
    """Refuse a session whose time zone is not UTC: the analyzer's times are UTC, as in DuckDB.

    A record's time without a zone is read in the session's zone, and a time
    with one is kept as UTC wall-clock time only in a UTC session.
    """
    zone = spark.conf.get("spark.sql.session.timeZone")
    if zone not in ("UTC", "Etc/UTC", "GMT", "Z", "+00:00"):
        raise ValueError(f"the Spark session's time zone is {zone!r}: set spark.sql.session.timeZone to UTC "
                         "(analyzer.questions.spark.local_session does)")


def read_raw(spark: SparkSession, paths: list[str], *, persist: bool = True) -> RawLogs:
    """Read raw proxy logs (S3 chunk JSONL, kubectl stdout, gzip, Parquet) on Spark.

    ``paths``: files, folders, globs (local, as ``analyze`` takes them) and
    Spark URIs (``s3a://bucket/logs/``, read recursively). Nothing is read until
    a result is asked for; with ``persist`` the lines read are kept (memory, then
    disk) for the records, the quarantine and the files alike, else each reads
    the files again. Raises :class:`~analyzer.core.errors.InputError` when a
    local argument matches nothing.
    """
    check_session(spark)
    sc = spark.sparkContext
    local = [p for p in paths if not _SPARK_URI.match(str(p))]
    remote = [str(p) for p in paths if _SPARK_URI.match(str(p))]
    if any(is_stdin(str(p)) for p in local):
        raise InputError("standard input cannot be read on Spark: write it to a file first")
    found = discover_inputs([str(p) for p in local]) if local else None
    files = found.files if found else []
    rdds = []
    if files:
        slices = max(1, min(len(files), 4 * sc.defaultParallelism))
        rdds.append(sc.parallelize(list(enumerate(files)), slices).flatMap(file_lines))
    if remote:
        listed = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(remote)
                  .select("path", "content", F.col("modificationTime").cast("double").alias("mtime"))
                  .rdd.sortBy(lambda r: r[0]).zipWithIndex())
        start = len(files)
        rdds.append(listed.map(lambda ri: (start + ri[1], ri[0][0], bytes(ri[0][1]), ri[0][2])).flatMap(file_lines))
    rdd = rdds[0] if len(rdds) == 1 else sc.union(rdds) if rdds else sc.emptyRDD()
    lines = spark.createDataFrame(rdd, LINES_DDL)
    if persist:
        lines = lines.persist(StorageLevel.MEMORY_AND_DISK)
    judged = judge(lines)
    every_copy = typed(judged)
    records = collapse(every_copy)
    quarantine = quarantined(lines, judged)
    file_rows = (lines.where(F.col("kind").isin(LINE, LONG_LINE))
                 .groupBy(F.col("file_index").alias("file_id"), "path").agg(F.max("form").alias("form")))
    return RawLogs(records, quarantine, file_rows, lines,
                   list(found.skipped) if found else [], list(found.notes) if found else [],
                   judged=judged, every_copy=every_copy)


def read_records(spark: SparkSession, paths: list[str]) -> DataFrame:
    """The ``records`` DuckDB would store for ``paths``, as a Spark DataFrame (see :func:`read_raw`).

    Nothing is kept in Spark's storage: cache it if it is read more than once.
    """
    return read_raw(spark, paths, persist=False).records


@dataclass
class Classified:
    """The classification of raw logs on Spark: ``turns`` and what it was built from.

    Each is also a temp view of the session under the relation's name in the
    analyzer's database (``records``, ``error_kinds``, ``settings``,
    ``class_labels``, ``model_map``, ``pod_windows``, ``turn_features``,
    ``feature_labels``, ``turns``), so questions over ``turns`` run on it as they
    run on a lake.
    """

    turns: DataFrame
    features: DataFrame
    feature_labels: DataFrame
    error_kinds: DataFrame
    pod_windows: DataFrame
    #: what the wedge rule warned of (coarse samples, pods without a model, ...)
    warnings: list[str] = field(default_factory=list)
    #: the windows with the metric relations they were computed from (:class:`.raw_windows.Windows`)
    windows: Windows | None = None


def classify(spark: SparkSession, records: DataFrame, metrics: list[str] | None = None, *,
             wedge_window: str | float = "5m", model_map: dict[str, str] | None = None,
             caller_deadline_s: float | None = None, stored_metrics: dict | None = None) -> Classified:
    """Turn features, labels and turns from ``records`` (DuckDB's ``records``, as :func:`read_raw` reads it).

    As :func:`analyzer.classification.turns.refresh_turns` builds them:
    ``queries/turn_features.sql`` over the records and the error kinds of their
    error heads, :mod:`analyzer.online`'s label for each distinct feature row,
    then ``queries/turns.sql`` with the labels, the class labels, the model map
    and the pod windows of ``metrics`` (files, as ``--metrics`` takes them).
    ``model_map``, ``wedge_window`` and ``caller_deadline_s`` are the main job's
    ``--model-map``, ``--wedge-window`` and ``--caller-deadline``; ``stored_metrics``
    the metric relations stored before (:func:`.raw_windows.pod_windows`).

    Registers the relations as temp views of ``spark`` (see :class:`Classified`);
    pass ``spark.newSession()`` (to this and to :func:`read_raw`) to keep them
    apart from a session's own views. ``records``, ``turn_features`` and
    ``turns`` are cached in the session (``turns`` as DuckDB materializes it).
    """
    check_session(spark)
    records = records.cache()
    _view(records, "records")
    kinds = _view(raw_labels.error_kinds(spark, records), "error_kinds")
    _view(raw_labels.settings(spark, caller_deadline_s), "settings")
    _view(raw_labels.class_labels(spark), "class_labels")
    _view(raw_labels.model_map(spark, model_map), "model_map")
    windows = pod_windows(spark, records, metrics, wedge_window=wedge_window, model_map=model_map,
                          stored=stored_metrics)
    _view(windows.pod_windows, "pod_windows")
    relations = catalog_relations()
    features = _view(spark.sql(spark_sql(relations["turn_features"])).cache(), "turn_features")
    labels = _view(raw_labels.feature_labels(spark, features), "feature_labels")
    # Cached, as DuckDB materializes `turns`: the questions over it do not recompute it.
    turns = _view(spark.sql(spark_sql(relations["turns"])).cache(), "turns")
    return Classified(turns, features, labels, kinds, windows.pod_windows, windows.warnings, windows)


def classify_raw(spark: SparkSession, paths: list[str], metrics: list[str] | None = None, **options) -> DataFrame:
    """The ``turns`` of raw logs, classified on Spark: :func:`read_raw`, then :func:`classify`.

    ``paths`` as :func:`read_raw` takes them, ``metrics`` and ``options`` as
    :func:`classify`. The same rows, class for class, as ``analyze PATHS
    --metrics METRICS`` stores in its ``turns`` table. Computed before it
    returns, as ``analyze`` classifies before it answers.
    """
    raw = read_raw(spark, paths)
    try:
        turns = classify(spark, raw.records, metrics, **options).turns
        turns.count()  # computed (and cached) now: the lines read can then be let go
    finally:
        raw.unpersist()
    return turns


def _view(df: DataFrame, name: str) -> DataFrame:
    df.createOrReplaceTempView(name)
    return df
