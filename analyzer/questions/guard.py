"""One guard for every engine: what a question may reference, checked before it runs.

A question is read-only by default (``analyze sql`` without ``--write``,
``analyzer.query`` on a path, ``--engine spark`` always). What it may reference
is said once, here, and checked the same way whichever engine runs it:

- **relations** by their plain names: the tables and views of the database (or
  of the lake), and the question's own ``WITH`` names; on DuckDB also its
  ``information_schema`` views (what the database holds, described). A qualified
  name is refused otherwise (``"text"."/etc/passwd"`` and ``"parquet"."/x"`` read
  a file on Spark, ``other.main.t`` another database on DuckDB), as is a name
  that is no relation (``'x.parquet'``, a path DuckDB would read as a file);
- **functions** on the allow-list of :mod:`analyzer.questions.allowed`, and the
  catalog's own macros: ``read_text``, ``glob``, ``query``, ``getenv``,
  ``reflect``, ``java_method`` and every function not listed are refused;
- **statements**: one query (``SELECT``, ``WITH``, a set operation, ``PIVOT``);
  on DuckDB also ``DESCRIBE``, ``SUMMARIZE``, ``SHOW``, ``EXPLAIN`` and the
  PRAGMAs that describe the database (:data:`analyzer.questions.allowed.PRAGMAS`).

The question is parsed once, by sqlglot as DuckDB SQL (the questions' dialect on
both engines: Spark runs their translation). A refusal is a
:class:`QuestionRefused` (exit 2) naming what was refused. The engines keep
their own locks as well (DuckDB: no file or network access, the configuration
locked; Spark: ``spark.sql.runSQLOnFiles`` off, ``reflect`` dropped): the guard
is the rule, the locks are there if the guard ever misses something.
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from functools import lru_cache
from typing import Iterable, Iterator

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from analyzer.core.errors import AnalyzerError, ExitCode, first_line
from analyzer.questions.allowed import NAMED, PRAGMAS, TYPED
from analyzer.store.catalog import load_queries

#: Where docs/sql.md says what a question may reference (the refusals point there).
DOCS = "docs/sql.md#what-a-question-may-reference"
#: The schema a relation may be qualified with: DuckDB's default one is the relation itself.
_OWN_SCHEMA = "main"
#: DuckDB's views that describe the database (tables, columns ...): a question may read them there.
_DESCRIBING_SCHEMA = "information_schema"
#: Statements DuckDB runs that only describe the database (besides queries), by sqlglot class.
_DESCRIBING = (exp.Describe, exp.Summarize, exp.Show, exp.Pragma)
_MACRO = re.compile(r"\bMACRO\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.I)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(?:ANALYZE\s+)?", re.I)
_PRAGMA = re.compile(r"^\s*PRAGMA\s+([A-Za-z_][A-Za-z0-9_]*)", re.I)


class QuestionRefused(AnalyzerError):
    """A question that references what no question may: a file, another database, a function off the list."""

    exit_code = ExitCode.USAGE


@lru_cache(maxsize=4)
def _macro_names(texts: str) -> frozenset[str]:
    return frozenset(m.lower() for m in _MACRO.findall(texts))


def catalog_macro_names() -> frozenset[str]:
    """The macros the catalog's ``-- macro:`` files define (``in_scope``, ``wilson_low`` ...), lower case."""
    return _macro_names("\n".join(q.sql for q in load_queries().values() if q.kind == "macro"))


@contextmanager
def _quiet_sqlglot() -> Iterator[None]:
    # sqlglot logs a warning when it falls back to a raw Command (EXPLAIN, LOAD ...): that
    # would be a second line on stderr; the guard says what it refuses itself.
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def parse_question(sql: str, label: str = "the SQL") -> exp.Expression:
    """The one statement of ``sql`` as sqlglot reads DuckDB SQL.

    Raises:
        QuestionRefused: more than one statement, or SQL sqlglot cannot read (the
            guard refuses what it cannot check).
    """
    try:
        with _quiet_sqlglot():
            statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except SqlglotError as exc:
        first = first_line(exc)
        raise QuestionRefused(f"{label} cannot be checked by the question guard ({first}); a question is one "
                              f"SELECT over the database's relations ({DOCS})") from exc
    if len(statements) != 1:
        raise QuestionRefused(f"{label} holds {len(statements)} statements; a question is one")
    return statements[0]


def check_question(sql: str, relations: Iterable[str], *, engine: str = "duckdb", label: str = "the SQL",
                   where: str = "the database") -> None:
    """Refuse ``sql`` unless it references only ``relations`` and allowed functions (see the module docstring).

    Args:
        sql: the question's DuckDB SQL (``$name`` parameters allowed).
        relations: the names of the tables and views it may read.
        engine: ``duckdb`` or ``spark`` (Spark runs queries only).
        label: how messages name the SQL (``query 'failures_by_day'``).
        where: how messages name what holds the relations (``the lake``).

    Raises:
        QuestionRefused: (exit 2) one line naming the statement, relation or function refused.
    """
    tree = parse_question(sql, label)
    allowed = {r.lower() for r in relations}
    _check_statement(tree, allowed, engine=engine, label=label, where=where)


def _check_statement(tree: exp.Expression, allowed: set[str], *, engine: str, label: str, where: str) -> None:
    if isinstance(tree, exp.Command) and tree.name.upper() == "EXPLAIN" and engine == "duckdb":
        inner = _EXPLAIN.sub("", tree.sql(dialect="duckdb"), count=1)
        _check_statement(parse_question(inner, label), allowed, engine=engine, label=label, where=where)
        return
    if isinstance(tree, exp.Pragma) and engine == "duckdb":
        m = _PRAGMA.match(tree.sql(dialect="duckdb"))
        name = m.group(1).lower() if m else "?"
        if name not in PRAGMAS:
            raise QuestionRefused(f"{label}: PRAGMA {name} is not one a question may run (those that describe "
                                  f"the database: {', '.join(sorted(PRAGMAS))})")
        return
    if not isinstance(tree, (exp.Query, exp.Pivot)) and not (engine == "duckdb" and isinstance(tree, _DESCRIBING)):
        kind = _statement_word(tree)
        what = "one SELECT (with WITH)" if engine == "spark" else "one SELECT, DESCRIBE, SUMMARIZE, SHOW or EXPLAIN"
        raise QuestionRefused(f"{label}: {kind} is not a question; a question is {what}, and reads only "
                              f"{where}'s relations ({DOCS})")
    _check_references(tree, allowed, engine=engine, label=label, where=where)


def _statement_word(tree: exp.Expression) -> str:
    """How the user wrote the statement's kind: its first word (INSTALL, COPY, LOAD ...)."""
    if isinstance(tree, exp.Command):
        return tree.name.upper() or "the statement"
    text = tree.sql(dialect="duckdb").split(None, 1)
    return text[0].upper() if text else type(tree).__name__.upper()


def _check_references(tree: exp.Expression, allowed: set[str], *, engine: str, label: str, where: str) -> None:
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    macros = catalog_macro_names()
    for node in tree.walk():
        if isinstance(node, exp.Command):
            raise QuestionRefused(f"{label}: {_statement_word(node)} inside a question cannot be checked; "
                                  "a question is one SELECT")
        if isinstance(node, exp.Table) and not isinstance(node.this, exp.Func):
            _check_table(node, allowed | ctes, engine=engine, label=label, where=where)
        elif isinstance(node, exp.Func) and not isinstance(node, exp.Binary):
            _check_function(node, macros, label=label)


def _check_table(node: exp.Table, allowed: set[str], *, engine: str, label: str, where: str) -> None:
    name, schema, catalog = node.name, node.db, node.catalog
    shown = ".".join(f'"{p}"' for p in (catalog, schema, name) if p)
    if engine == "duckdb" and not catalog and schema.lower() == _DESCRIBING_SCHEMA:
        return
    if catalog or (schema and schema.lower() != _OWN_SCHEMA):
        raise QuestionRefused(f"{label} reads {shown}: a question reads {where}'s relations and views by their "
                              "plain names; a qualified name reaches a file or another database, and is refused")
    if name.lower() not in allowed:
        raise QuestionRefused(f"{label} reads {shown}, which is not a relation or view of {where} "
                              "(`analyze sql --list` lists them; a question reads no file)")


def _check_function(node: exp.Func, macros: frozenset[str], *, label: str) -> None:
    """Refuse a call off :mod:`analyzer.questions.allowed` that is no catalog macro, named as written
    for a call sqlglot keeps by name, else by sqlglot's name."""
    if isinstance(node, (exp.Anonymous, exp.AnonymousAggFunc)):
        name = str(node.name).lower()
        allowed = name in NAMED or name in macros
    else:
        name, allowed = node.sql_name().lower(), type(node) in TYPED
    if not allowed:
        raise QuestionRefused(f"{label} calls {name}(), which is not a function a question may "
                              f"call: they compute over their arguments and reach nothing else ({DOCS})")
