"""The translation of queries/' DuckDB SQL to Spark SQL, without Spark (tests/e2e/test_spark_gate.py
runs every question on both engines)."""

from __future__ import annotations

from analyzer.questions.spark import to_spark_sql


def test_parameter_markers_translate_outside_strings_only():
    sql = "SELECT '$keep' AS a, $since AS b -- $comment\nFROM t WHERE x = $model"
    spark_sql = to_spark_sql(sql)
    assert "'$keep'" in spark_sql and ":since AS b" in spark_sql and "x = :model" in spark_sql
    assert "$since" not in spark_sql and ":comment" not in spark_sql and ":keep" not in spark_sql
