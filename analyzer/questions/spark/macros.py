"""The catalog's DuckDB macros, inlined into a question's tree for engines without them.

``queries/`` defines its shared pieces as DuckDB macros (``in_scope``,
``is_glm``, ``wilson_low``, ``most_frequent``, ``counter_increase``, the table
macro ``proxy_events_once()``...). Spark has no macros, so each call is replaced
by the macro's body with the arguments put in for its parameters, which is what
DuckDB itself does with a macro. The bodies are read from the macro files of the
catalog (:func:`analyzer.store.catalog.load_queries`), never copied here, so a
macro changed in ``queries/`` is changed on Spark too.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from analyzer.questions.spark.rules import wrap
from analyzer.store.catalog import load_queries


@dataclass(frozen=True)
class Macro:
    """One ``CREATE MACRO`` of the catalog: its parameters and body (a scalar or a table macro)."""

    name: str
    params: tuple[str, ...]
    body: exp.Expression
    table: bool


_CACHE: dict[str, dict[str, Macro]] = {}


def catalog_macros() -> dict[str, Macro]:
    """Every macro of the catalog's ``-- macro:`` files by lower-case name (parsed once per version)."""
    files = [q for q in load_queries().values() if q.kind == "macro"]
    key = "".join(q.sql for q in files)
    if key not in _CACHE:
        out: dict[str, Macro] = {}
        for q in files:
            for stmt in sqlglot.parse(q.sql, read="duckdb"):
                if not isinstance(stmt, exp.Create) or str(stmt.args.get("kind", "")).upper() != "MACRO":
                    continue
                udf = stmt.this
                name = udf.this.name
                params = tuple(p.name for p in udf.expressions)
                body = stmt.expression
                out[name.lower()] = Macro(name, params, body, isinstance(body, exp.Query))
        _CACHE.clear()
        _CACHE[key] = out
    return _CACHE[key]


def _call_name(node: exp.Expression) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return None


def _substitute(body: exp.Expression, params: tuple[str, ...], args: list[exp.Expression]) -> exp.Expression:
    """``body`` with each unqualified column named for a parameter replaced by its argument."""
    if len(params) != len(args):
        raise ValueError(f"a macro of {len(params)} parameters called with {len(args)} arguments")
    mapping = dict(zip(params, args))

    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name in mapping:
            # Parenthesized unless an atom: the argument keeps its precedence inside the body.
            return wrap(mapping[node.name])
        return node

    return body.copy().transform(put)


def inline_macros(tree: exp.Expression, macros: dict[str, Macro] | None = None) -> exp.Expression:
    """``tree`` with every call of a catalog macro replaced by its body (macros calling macros too)."""
    macros = catalog_macros() if macros is None else macros

    def expand(node: exp.Expression) -> exp.Expression:
        name = _call_name(node)
        if name in macros and not macros[name].table:
            m = macros[name]
            args = [inline_macros(a, macros) for a in node.expressions]
            body = inline_macros(m.body, macros)
            return wrap(_substitute(body, m.params, args))
        if isinstance(node, exp.Table) and _call_name(node.this) in macros:
            m = macros[_call_name(node.this)]
            args = [inline_macros(a, macros) for a in node.this.expressions]
            body = _substitute(inline_macros(m.body, macros), m.params, args)
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(m.name))
            return exp.Subquery(this=body, alias=alias.copy())
        return node

    return tree.transform(expand)
