"""The questions of ``queries/`` as Spark SQL: sqlglot, the catalog's macros inlined, a few rules.

A question is written once, in DuckDB's SQL. For Spark it is translated here:

1. parsed by sqlglot (pinned: its translations are part of the answer) as DuckDB SQL;
2. every call of a catalog macro (``in_scope``, ``wilson_low``, ``proxy_events_once()``...)
   replaced by the macro's body, read from the catalog
   (:mod:`analyzer.questions.spark.macros`);
3. the project's rewrite rules applied (:mod:`analyzer.questions.spark.rules`):
   the places where sqlglot's translation would fail on Spark or answer differently;
4. written out as Spark SQL, the ``$name`` parameters as Spark's ``:name`` markers.

Where no rule can say it, a question has a hand-written Spark version in
``queries/spark/<name>.sql`` with the same header (see :data:`HAND_WRITTEN`); it
may call the catalog's macros too. Parameter values are never pasted into the
text: they bind as Spark named parameters (:mod:`analyzer.questions.spark.binding`).
"""

from __future__ import annotations

from functools import lru_cache

import sqlglot
from sqlglot import exp

from sqlglot import transforms
from sqlglot.dialects.spark import Spark
from sqlglot.generators.spark import SparkGenerator

from analyzer.core.paths import queries_dir
from analyzer.questions.spark.macros import Macro, catalog_macros, inline_macros
from analyzer.questions.spark.rules import UnsupportedConstruct, apply_rules
from analyzer.store.asking import RELATIONS, resolve
from analyzer.store.catalog import QueryFile, load_queries, parse_query_file

__all__ = ["UnsupportedConstruct", "hand_written", "relations_read", "spark_sql", "to_spark_sql", "transpile"]


def hand_written() -> dict[str, QueryFile]:
    """The hand-written Spark versions by name (``queries/spark/*.sql``, headers as in ``queries/``)."""
    d = queries_dir() / "spark"
    return {q.name: q for q in (parse_query_file(p) for p in sorted(d.glob("*.sql")))} if d.is_dir() else {}


#: The names of the questions and views that have a hand-written Spark version, and why.
HAND_WRITTEN = {
    "ladder_attempts": "the ladder's JSON list of attempts: json_transform and range() over list "
                       "indexes become from_json and posexplode",
    "thinking_points": "the sample is ordered by DuckDB's hash(), which Spark cannot compute: "
                       "Spark orders by xxhash64, a different fixed sample",
}


class _Spark4Generator(SparkGenerator):
    # sqlglot rewrites QUALIFY into a subquery for Spark, and leaves the helper column
    # in the subquery's SELECT *: two QUALIFYs in a row then name it twice. Spark 3.5+
    # runs QUALIFY itself, so it is kept as written.
    TRANSFORMS = {
        **SparkGenerator.TRANSFORMS,
        exp.Select: transforms.preprocess(
            [transforms.eliminate_distinct_on, transforms.unnest_to_explode, transforms.any_to_exists]),
    }


class Spark4(Spark):
    """sqlglot's Spark dialect, writing QUALIFY as Spark 3.5 and later read it."""

    Generator = _Spark4Generator


def _spark_macros() -> dict[str, Macro]:
    """The catalog's macros with the rules already applied to their bodies (for Spark-written SQL)."""
    return {name: Macro(m.name, m.params, apply_rules(inline_macros(m.body.copy())), m.table)
            for name, m in catalog_macros().items()}


@lru_cache(maxsize=512)
def _transpile(sql: str, dialect: str) -> str:
    statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    if len(statements) != 1:
        raise UnsupportedConstruct(f"expected one statement, found {len(statements)}")
    tree = statements[0]
    if dialect == "duckdb":
        tree = apply_rules(inline_macros(tree))
    else:  # already Spark SQL: only the macros, their bodies translated
        tree = inline_macros(tree, _spark_macros())
    return tree.sql(dialect=Spark4, pretty=True, comments=False)


def transpile(sql: str) -> str:
    """DuckDB SQL text (one statement, ``$name`` parameters) as Spark SQL (``:name`` markers).

    Raises:
        UnsupportedConstruct: a construct no rule translates to the same answer.
        sqlglot.errors.ParseError: SQL sqlglot cannot read.
    """
    return _transpile(sql, "duckdb")


def spark_sql(query: QueryFile) -> str:
    """The Spark SQL of a ``queries/`` file: its hand-written version if it has one, else transpiled."""
    own = hand_written().get(query.name)
    if own is not None:
        return _transpile(own.sql, "spark")
    return transpile(query.sql)


def to_spark_sql(name_or_sql: str) -> str:
    """A question's name, a view's name, a ``.sql`` path or DuckDB SQL text, as Spark SQL.

    A view or materialized table of the catalog is selected from by name (as
    :func:`analyzer.store.asking.resolve` does on DuckDB): on Spark it is a view
    created by :func:`analyzer.questions.spark.lake.register_lake`.
    """
    resolved = resolve(name_or_sql)
    if resolved.source is not None and resolved.source.kind == "question":
        return spark_sql(resolved.source)
    return transpile(resolved.sql)


def relations_read(spark_text: str) -> set[str]:
    """The tables and views a Spark SQL text reads (its own CTE names left out)."""
    tree = sqlglot.parse_one(spark_text, read="spark")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    return {t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes}


def catalog_relations() -> dict[str, QueryFile]:
    """The catalog's views and materialized tables (``-- view:`` and ``-- table:``) by name."""
    return {n: q for n, q in load_queries().items() if q.kind in RELATIONS}
