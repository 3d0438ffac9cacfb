"""The label tables the turns SQL joins, decided in the driver by :mod:`analyzer.online`.

A week has thousands of turns but a few hundred distinct feature rows and error
heads, as in DuckDB (:mod:`analyzer.classification.turns`): the distinct rows are
collected, labelled by the same Python functions the DuckDB refresh calls
(:func:`~analyzer.classification.turns.feature_label_rows`,
:func:`~analyzer.classification.turns.error_kind_rows`, and
:data:`~analyzer.classification.turns.CLASS_LABELS`), and handed back to Spark as
small tables. Nothing of the rule is written again for Spark, and no Python runs
on the executors for it.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from analyzer.classification.turns import (
    CALLER_DEADLINE,
    CLASS_LABELS,
    FEATURE_LABEL_COLUMNS,
    check_caller_deadline,
    error_kind_rows,
    feature_label_rows,
)
from analyzer.online import DEFAULT_CALLER_DEADLINE_S
from analyzer.online.classify import ERROR_HEAD_CHARS

#: The features a label is decided from (``feature_labels``' first columns); then the decision's four.
FEATURE_COLUMNS = FEATURE_LABEL_COLUMNS[:-4]
_DECISION_FIELDS = [T.StructField("incident_class", T.StringType()), T.StructField("decision_evidence", T.StringType()),
                    T.StructField("upstream_failure", T.BooleanType()), T.StructField("ladder_trigger", T.StringType())]


def error_kinds(spark: SparkSession, records: DataFrame) -> DataFrame:
    """``error_kinds`` for the records' error heads: :func:`analyzer.online.parse_error` over each distinct one."""
    heads = (records.where((F.col("type") == "response") & F.col("error").isNotNull())
             .select("provider", F.expr(f"left(error, {ERROR_HEAD_CHARS})").alias("error_head"))
             .distinct().collect())
    schema = "provider STRING, error_head STRING, error_kind STRING, status INT"
    return spark.createDataFrame(error_kind_rows([(r.provider, r.error_head) for r in heads]), schema)


def feature_labels(spark: SparkSession, features: DataFrame) -> DataFrame:
    """``feature_labels`` for the distinct feature rows of ``features``: :func:`analyzer.online.decide` over each.

    The feature columns keep ``features``' own types, so the turns SQL joins them
    back without a cast.
    """
    distinct = features.select(*FEATURE_COLUMNS).distinct()
    rows = [tuple(r) for r in distinct.collect()]
    schema = T.StructType([*distinct.schema.fields, *_DECISION_FIELDS])
    return spark.createDataFrame(feature_label_rows(rows), schema)


def class_labels(spark: SparkSession) -> DataFrame:
    """``class_labels``: what :mod:`analyzer.online` says of each class a proxy can log."""
    return spark.createDataFrame(list(CLASS_LABELS),
                                 "incident_class STRING, tool_history BOOLEAN, upstream_failure BOOLEAN, "
                                 "ladder_trigger STRING")


def settings(spark: SparkSession, caller_deadline_s: float | None = None) -> DataFrame:
    """The ``settings`` row the features read: the callers' deadline (default the analyzer's)."""
    seconds = check_caller_deadline(caller_deadline_s) if caller_deadline_s is not None \
        else float(DEFAULT_CALLER_DEADLINE_S)
    return spark.createDataFrame([(CALLER_DEADLINE, repr(seconds))], "name STRING, value STRING") \
        .withColumn("set_at", F.lit(None).cast("timestamp_ntz"))


def model_map(spark: SparkSession, mapping: dict[str, str] | None = None) -> DataFrame:
    """``model_map``: log ``model`` -> metric ``model_name`` where they differ (``--model-map``)."""
    return spark.createDataFrame([(str(k), str(v)) for k, v in (mapping or {}).items()],
                                 "log_model STRING, model_name STRING")
