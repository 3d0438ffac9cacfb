"""``analyze lake build``: raw logs to a lake on Spark, past one machine.

:func:`build_lake_job` checks every option before a JVM starts, starts (or, under
``spark-submit``, joins) a Spark session, ships the analyzer to its executors
(:mod:`analyzer.questions.spark.ship`), reads and classifies the logs there and
writes the lake (:func:`analyzer.outputs.spark_lake.build_lake`): the layout and
manifest of ``analyze export --lake``, added to the lake already there by day.
The same job runs as ``spark-submit``'s main file (``analyzer/spark_submit.py``).

pyspark is the ``spark`` extra, not a dependency: it is imported when a build runs.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field

from analyzer.core.durations import parse_duration
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.ingestion.metric_readers import check_metric_paths
from analyzer.ingestion.metric_store import parse_model_map
from analyzer.jobs.main_job import caller_deadline_option
from analyzer.io.sources import discover_inputs
from analyzer.outputs.lake import check_out_dir
from analyzer.store.lake import check_lake_path

#: The engines a lake is built on. (On DuckDB: `analyze LOGS --db DB`, then `analyze export --lake DIR`.)
ENGINES = ("spark",)
#: The prefixes of inputs Spark lists itself (anything else is a local path, found as `analyze` finds it).
_URI = ("s3a://", "s3n://", "hdfs://", "abfs://", "abfss://", "gs://", "wasb://", "wasbs://", "dbfs:/", "file:")


@dataclass(frozen=True)
class LakeBuildOptions:
    """What ``analyze lake build`` was asked to do; checked when made (nothing read, nothing started).

    ``logs``: files, folders, globs and Spark URIs; ``lake``: the lake's folder (new,
    empty, or a lake to add to); ``metrics``: metric files or folders (read in the
    driver); ``master``: Spark's master URL (None: spark-submit's, else ``local[*]``);
    ``conf``: ``KEY=VALUE`` Spark settings; ``wedge_window``, ``model_map`` and
    ``caller_deadline_s`` as ``analyze`` takes them (default: the lake's, else the analyzer's).

    Raises:
        AnalyzerError: (usage) an engine other than spark (``param="engine"``), no logs,
            a lake path no engine could read back or not a local folder (``param="lake"``),
            a bad wedge window, caller deadline, model map or setting (``param="conf"``).
    """

    logs: tuple[str, ...]
    lake: str
    engine: str = "spark"
    metrics: tuple[str, ...] = ()
    master: str | None = None
    conf: tuple[str, ...] = ()
    wedge_window: str | None = None
    model_map: tuple[str, ...] = ()
    caller_deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise AnalyzerError(f"engine {self.engine!r}: a lake is built on spark; on DuckDB run "
                                "`analyze LOGS --db DB`, then `analyze export --lake DIR --db DB`",
                                ExitCode.USAGE, param="engine")
        if not self.logs:
            raise AnalyzerError("give the log files, folders or URIs to build the lake from", ExitCode.USAGE)
        check_lake_path(self.lake, "lake")
        if "://" in str(self.lake) or str(self.lake).startswith(("file:", "dbfs:")):
            raise AnalyzerError(f"lake {self.lake}: a lake is built in a folder the driver and the executors "
                                "reach at the same path (a shared file system on a cluster); copy it to object "
                                "storage afterwards", ExitCode.USAGE, param="lake")
        if self.wedge_window is not None:
            parse_duration(self.wedge_window, "--wedge-window")
        if self.caller_deadline_s is not None:
            caller_deadline_option(self.caller_deadline_s)
        self.model_mapping()
        self.spark_conf()

    def model_mapping(self) -> dict[str, str]:
        """``model_map`` as a dict (log model to metric model)."""
        return parse_model_map(self.model_map)

    def spark_conf(self) -> dict[str, str]:
        """``conf`` as a dict of Spark settings."""
        conf = {}
        for item in self.conf:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise AnalyzerError(f"conf {item!r}: expected KEY=VALUE", ExitCode.USAGE, param="conf")
            conf[key.strip()] = value
        return conf


@dataclass
class LakeBuildReport:
    """What a build did: the lake written (:class:`analyzer.outputs.lake.LakeReport`) and how it went."""

    lake: dict
    master: str
    days_written: list[str]
    files_read: int
    skipped_files: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    shipped: bool = True

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return dict(self.__dict__)


def check_inputs(opts: LakeBuildOptions) -> None:
    """What the options name on disk, checked before a JVM starts.

    Raises:
        AnalyzerError: (usage) the lake's folder is a file, or holds something other
            than a lake; InputError: a local path (log or metrics) that matches nothing;
            WriteError: another export or build is writing a first lake there.
    """
    check_out_dir(opts.lake, "lake")
    local = [p for p in opts.logs if not p.startswith(_URI)]
    if local:
        discover_inputs(local)  # a path that matches nothing is said before Spark starts
    if opts.metrics:
        check_metric_paths(list(opts.metrics))


def build_lake_job(opts: LakeBuildOptions) -> LakeBuildReport:
    """Build (or add to) the lake ``opts.lake`` from ``opts.logs`` on Spark; what was written.

    The session is started here (and stopped) unless one is running already
    (spark-submit, a notebook): then it is used, and left running.

    Raises:
        AnalyzerError: as :func:`check_inputs`; (usage) pyspark missing; the errors
            of :func:`analyzer.outputs.spark_lake.build_lake`.
    """
    check_inputs(opts)
    mapping, conf = opts.model_mapping(), opts.spark_conf()
    try:
        # Deferred: pyspark (and a JVM behind it) is the optional spark extra; these three
        # modules import it, so they load only for a build, and its absence is one clear error.
        from pyspark.sql import SparkSession

        from analyzer.outputs.spark_lake import build_lake
        from analyzer.questions.spark import cluster_session
        from analyzer.questions.spark.ship import ship_package
    except ImportError as exc:
        raise AnalyzerError(f"a lake is built on Spark: pip install 'analyzer[spark]' ({exc})", ExitCode.USAGE,
                            param="engine") from exc
    started = time.perf_counter()
    ours = SparkSession.getActiveSession() is None
    spark = cluster_session(opts.master, "analyze-lake-build", conf)
    try:
        with tempfile.TemporaryDirectory(prefix="analyzer-ship-") as ship_dir:
            shipped = ship_package(spark, ship_dir) is not None
            report, relations = build_lake(spark, list(opts.logs), opts.lake, metrics=list(opts.metrics) or None,
                                           wedge_window=opts.wedge_window, model_map=mapping or None,
                                           caller_deadline_s=opts.caller_deadline_s)
            master = spark.sparkContext.master
    finally:
        if ours:
            spark.stop()
    return LakeBuildReport(lake=report.to_dict(), master=master, days_written=relations.days,
                           files_read=relations.read["files"], skipped_files=relations.read["skipped"],
                           warnings=relations.warnings, seconds=round(time.perf_counter() - started, 1),
                           shipped=shipped)
