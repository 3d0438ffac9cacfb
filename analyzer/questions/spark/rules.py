"""Rewrites of a DuckDB question's tree where sqlglot's DuckDB → Spark translation is not enough.

sqlglot translates the syntax; these rules fix what it leaves an error on Spark
or, worse, translates into a different answer. Each is a function from one node
of sqlglot's tree to its replacement (the node itself when it does not apply),
applied by :func:`apply_rules` to every node, after the catalog's macros were
inlined (:mod:`analyzer.questions.spark.macros`). Each says what DuckDB and
Spark do differently. A construct a rule cannot express exactly raises
:class:`UnsupportedConstruct`, so a new DuckDB-only construct in a question fails
loudly (the gate in tests/e2e/test_spark_gate.py runs every question)
instead of answering something else on Spark.
"""

from __future__ import annotations

import re
from typing import Callable

import sqlglot
from sqlglot import exp


class UnsupportedConstruct(ValueError):
    """A DuckDB construct the rules cannot turn into the same answer on Spark."""


def _spark(template: str, **parts: exp.Expression) -> exp.Expression:
    """A Spark SQL expression from ``template``, its ``_name_`` columns replaced by ``parts``."""
    tree = sqlglot.parse_one(template, read="spark")

    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith("_") and node.name.strip("_") in parts:
            return wrap(parts[node.name.strip("_")])
        return node

    return tree.transform(put)


#: Nodes that bind tighter than any operator: put in place without parentheses.
_ATOMS = (exp.Column, exp.Literal, exp.Placeholder, exp.Func, exp.Paren, exp.Null, exp.Boolean,
          exp.Dot, exp.Bracket, exp.Subquery, exp.Filter)


def wrap(e: exp.Expression) -> exp.Expression:
    """A copy of ``e``, parenthesized unless it is an atom (so it keeps its precedence where it goes)."""
    return e.copy() if isinstance(e, _ATOMS) else exp.Paren(this=e.copy())


def _fn(node: exp.Expression, name: str) -> bool:
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == name


# ---------------------------------------------------------------------------
# Numbers: the types a script reads in the JSON (an integral DOUBLE prints 14.0, a BIGINT 14)


def _decimal_literal(node: exp.Expression) -> bool:
    """A number written with a point and no exponent (``60.0``): a DECIMAL on DuckDB and Spark alike."""
    return isinstance(node, exp.Literal) and node.is_number and "." in node.name and "e" not in node.name.lower()


def _holds_decimal(node: exp.Expression) -> bool:
    """``node``'s arithmetic has a DECIMAL literal in it (``x * 1.5``; not ``f(x, 0.95)``, not a division)."""
    if _decimal_literal(node):
        return True
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        return _holds_decimal(node.this) or _holds_decimal(node.expression)
    if isinstance(node, (exp.Paren, exp.Neg)):
        return _holds_decimal(node.this)
    return False


def _as_double(node: exp.Expression) -> exp.Expression:
    return exp.Cast(this=wrap(node), to=exp.DataType.build("DOUBLE"))


def decimal_division(node: exp.Expression) -> exp.Expression:
    # DuckDB's `/` divides in DOUBLE whatever its numeric operands, DECIMALs included
    # (x / 60.0 is a DOUBLE); Spark divides a DECIMAL as a DECIMAL (a number written with
    # a point, 60.0, is one on both), so round(x / 60.0, 1) came back as DECIMAL(23,1):
    # `14` in the JSON where DuckDB prints `14.0`, and rounded at the DECIMAL's scale
    # before round() saw it. An operand holding such a number is made a DOUBLE, as
    # DuckDB makes it. (Integers divide as DOUBLEs on both.)
    if not isinstance(node, exp.Div) or not (_holds_decimal(node.this) or _holds_decimal(node.expression)):
        return node
    out = node.copy()
    for side in ("this", "expression"):
        if _holds_decimal(node.args[side]):
            out.set(side, _as_double(node.args[side]))
    return out


def ceil_floor(node: exp.Expression) -> exp.Expression:
    # DuckDB's ceil(x) and floor(x) of a DOUBLE or an integer are DOUBLEs
    # (ceil(quantile_cont(...)) is 14.0); Spark's are BIGINTs (14 in the JSON). Both keep a
    # DECIMAL a DECIMAL, and which an expression holding a number with a point is
    # depends on the columns' types, which the translation does not know: refused.
    if not isinstance(node, (exp.Ceil, exp.Floor)):
        return node
    if node.args.get("decimals") is not None or node.args.get("to") is not None:
        raise UnsupportedConstruct(f"{node.key}(x, digits)")
    if _holds_decimal(node.this):
        raise UnsupportedConstruct(f"{node.key}() of an expression with a DECIMAL number in it (write it as "
                                   "a DOUBLE: 1.5::DOUBLE)")
    return _as_double(node)


# ---------------------------------------------------------------------------
# Time


def epoch_seconds(node: exp.Expression) -> exp.Expression:
    # DuckDB epoch(ts) is the seconds as a DOUBLE, microseconds kept; sqlglot's
    # UNIX_TIMESTAMP(ts) on Spark is whole seconds: a 0.4 s pod window would be 0 or 1 s.
    if isinstance(node, exp.TimeToUnix):
        return _spark("unix_micros(_x_) / 1e6", x=node.this)
    return node


def epoch_units(node: exp.Expression) -> exp.Expression:
    # DuckDB epoch_ms(ts) / epoch_us(ts) are the BIGINT milliseconds / microseconds of a
    # timestamp; sqlglot reads epoch_ms as the opposite function (a number to a
    # timestamp, Spark's TIMESTAMP_MILLIS) and leaves epoch_us, which Spark lacks.
    if isinstance(node, exp.UnixToTime) and not node.this.is_number:
        scale = node.args.get("scale")
        if scale is not None and scale.is_int and int(scale.name) == 3:
            return _spark("unix_millis(_x_)", x=node.this)
        if scale is not None and scale.is_int and int(scale.name) == 6:
            return _spark("unix_micros(_x_)", x=node.this)
    if _fn(node, "epoch_us"):
        return _spark("unix_micros(_x_)", x=node.expressions[0])
    if _fn(node, "epoch_ms"):
        return _spark("unix_millis(_x_)", x=node.expressions[0])
    return node


# Microseconds per unit, for date_diff over sub-day units.
_MICROS = {"microsecond": 1, "millisecond": 1000, "second": 1_000_000, "minute": 60_000_000,
           "hour": 3_600_000_000}


def date_diff(node: exp.Expression) -> exp.Expression:
    # DuckDB date_diff(unit, a, b) counts the unit boundaries crossed between a and b
    # (both truncated to the unit, then subtracted); Spark's DATEDIFF/TIMESTAMPDIFF
    # counts whole units elapsed: 0.9 ms to 1.1 ms is 1 millisecond in DuckDB, 0 in Spark.
    if not isinstance(node, exp.DateDiff):
        return node
    unit = (node.text("unit") or "day").lower().rstrip("s")
    end, start = node.this, node.expression
    if unit in _MICROS:
        f = exp.Literal.number(_MICROS[unit])
        return _spark("(unix_micros(_b_) DIV _f_) - (unix_micros(_a_) DIV _f_)", a=start, b=end, f=f)
    if unit == "day":
        return _spark("datediff(CAST(_b_ AS DATE), CAST(_a_ AS DATE))", a=start, b=end)
    raise UnsupportedConstruct(f"date_diff by {unit!r}: only microsecond .. day are translated")


# DuckDB's time_bucket origin for widths without months: Monday 2000-01-03.
_ORIGIN = "TIMESTAMP_NTZ'2000-01-03 00:00:00'"


def time_bucket(node: exp.Expression) -> exp.Expression:
    # DuckDB time_bucket(width, ts) floors ts to a multiple of width counted from
    # 2000-01-03; Spark has no such function (sqlglot writes DATE_BIN, which Spark
    # lacks). The floor is done on microseconds with pmod, exactly, for any width
    # without months (a width in months has another origin and calendar arithmetic).
    if not isinstance(node, exp.DateBin):
        return node
    if node.args.get("zone") or node.args.get("origin"):
        raise UnsupportedConstruct("time_bucket with an origin or a time zone")
    width, ts = node.this, node.expression
    if isinstance(width, exp.Interval) and (width.text("unit") or "").upper() in ("MONTH", "YEAR", "QUARTER"):
        raise UnsupportedConstruct("time_bucket by months")
    return _spark(
        "CAST(timestamp_micros(unix_micros(_ts_) - pmod(unix_micros(_ts_) - unix_micros(" + _ORIGIN + "), "
        "unix_micros(" + _ORIGIN + " + _w_) - unix_micros(" + _ORIGIN + "))) AS TIMESTAMP_NTZ)",
        ts=ts, w=width)


def to_microseconds(node: exp.Expression) -> exp.Expression:
    # DuckDB to_microseconds(n) is an INTERVAL of n microseconds; Spark has no such
    # function, but multiplies a one-microsecond interval exactly.
    if _fn(node, "to_microseconds"):
        return _spark("CAST(_n_ AS BIGINT) * INTERVAL '0.000001' SECOND", n=node.expressions[0])
    return node


# strftime's directives as Spark datetime patterns; any other letter is quoted.
_STRFTIME = {"Y": "yyyy", "m": "MM", "d": "dd", "H": "HH", "M": "mm", "S": "ss", "f": "SSSSSS", "%": "%"}


def strftime(node: exp.Expression) -> exp.Expression:
    # DuckDB strftime(ts, '%Y-%m-%dT%H:%M:%S.%f') takes C directives; sqlglot's
    # DATE_FORMAT pattern leaves the literal 'T' unquoted, which Spark reads as a
    # pattern letter and refuses. The pattern is translated here with every literal quoted.
    if not isinstance(node, exp.TimeToStr):
        return node
    fmt = node.args.get("format")
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        raise UnsupportedConstruct("strftime with a format that is not a literal")
    out, literal = [], []
    parts = re.split(r"(%.)", fmt.name)
    for part in parts:
        if part.startswith("%") and len(part) == 2:
            if part[1] not in _STRFTIME:
                raise UnsupportedConstruct(f"strftime directive {part}")
            if literal:
                out.append("'" + "".join(literal).replace("'", "''") + "'")
                literal = []
            out.append(_STRFTIME[part[1]])
        elif part:
            literal.append(part)
    if literal:
        out.append("'" + "".join(literal).replace("'", "''") + "'")
    return exp.Anonymous(this="date_format", expressions=[node.this, exp.Literal.string("".join(out))])


def interval_parameter(node: exp.Expression) -> exp.Expression:
    # DuckDB casts text ('1 hour') to an INTERVAL; Spark's CAST(... AS INTERVAL) makes a
    # calendar interval that can be neither returned nor compared. The parameter is
    # bound as a day-time interval instead (analyzer.questions.spark.binding), so the
    # cast goes.
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Placeholder) and node.to.is_type("interval"):
        return node.this
    return node


# ---------------------------------------------------------------------------
# Text


def _pattern_with_flags(pattern: exp.Expression, flags: str, what: str) -> exp.Expression:
    unknown = set(flags) - {"i", "g"}
    if unknown:
        raise UnsupportedConstruct(f"{what} option {''.join(sorted(unknown))!r}")
    if "i" not in flags:
        return pattern
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        return exp.Literal.string("(?i)" + pattern.name)
    return exp.DPipe(this=exp.Literal.string("(?i)"), expression=pattern)


def regexp_flags(node: exp.Expression) -> exp.Expression:
    # DuckDB regexp_matches(text, pattern, 'i') matches without case; sqlglot's RLIKE
    # drops the option, so a mixed-case error text would silently stop matching. Java's
    # regex takes the same request inline, as (?i) at the pattern's start.
    if isinstance(node, exp.RegexpLike) and node.args.get("flag") is not None:
        flag = node.args["flag"]
        if not isinstance(flag, exp.Literal):
            raise UnsupportedConstruct("regexp_matches with options that are not a literal")
        return exp.RegexpLike(this=node.this, expression=_pattern_with_flags(node.expression, flag.name, "regexp_matches"))
    return node


def regexp_replacement(node: exp.Expression) -> exp.Expression:
    # DuckDB (RE2) writes a group in the replacement as \1, Spark (Java) as $1: sqlglot
    # keeps '\1', which Spark then inserts as the literal text "1". A literal $ must be
    # escaped for Java. DuckDB replaces only the first match unless 'g' is given, Spark
    # always all of them: a replace without 'g' is refused. 'i' becomes (?i).
    if not isinstance(node, exp.RegexpReplace):
        return node
    mods = node.args.get("modifiers")
    flags = mods.name if isinstance(mods, exp.Literal) else ""
    if mods is not None and not isinstance(mods, exp.Literal):
        raise UnsupportedConstruct("regexp_replace with options that are not a literal")
    if "g" not in flags:
        raise UnsupportedConstruct("regexp_replace without 'g' (DuckDB replaces the first match only)")
    repl = node.args.get("replacement")
    if not isinstance(repl, exp.Literal) or not repl.is_string:
        raise UnsupportedConstruct("regexp_replace with a replacement that is not a literal")
    java = re.sub(r"\\(\d)|\$", lambda m: "$" + m.group(1) if m.group(1) else "\\$", repl.name)
    return exp.RegexpReplace(this=node.this,
                             expression=_pattern_with_flags(node.expression, flags, "regexp_replace"),
                             replacement=exp.Literal.string(java))


def parse_dirpath(node: exp.Expression) -> exp.Expression:
    # DuckDB parse_dirpath(path, separator) is the path before its last separator
    # ('' without one; the root '/' stays '/'); Spark has no such function. A greedy
    # regexp takes the same part.
    if not _fn(node, "parse_dirpath"):
        return node
    args = node.expressions
    sep = args[1].name if len(args) > 1 and isinstance(args[1], exp.Literal) else "both_slash"
    if len(args) > 1 and not isinstance(args[1], exp.Literal):
        raise UnsupportedConstruct("parse_dirpath with a separator that is not a literal")
    chars = {"forward_slash": "/", "backslash": "\\\\", "both_slash": "/\\\\"}.get(sep)
    if chars is None:
        raise UnsupportedConstruct(f"parse_dirpath separator {sep!r}")
    pattern = exp.Literal.string(f"^(.*)[{chars}][^{chars}]*$")
    return _spark("CASE WHEN _p_ = '/' THEN '/' ELSE regexp_extract(_p_, _r_, 1) END", p=args[0], r=pattern)


def isfinite(node: exp.Expression) -> exp.Expression:
    # DuckDB isfinite(x): neither NaN nor infinite (NULL for NULL); Spark has isnan only.
    if _fn(node, "isfinite"):
        return _spark("NOT isnan(_x_) AND abs(_x_) <> CAST('Infinity' AS DOUBLE)", x=node.expressions[0])
    return node


# ---------------------------------------------------------------------------
# Aggregates and lists


def list_parameter(node: exp.Expression) -> exp.Expression:
    # A list parameter used as it is (list_contains($metrics, x), unnest($models)): DuckDB
    # types a NULL by where it goes; Spark leaves NULL untyped (VOID), which
    # array_contains and explode refuse. The parameter is cast to a list of text, the
    # lists the questions take.
    if isinstance(node, (exp.ArrayContains, exp.Explode, exp.Unnest)) and isinstance(node.this, exp.Placeholder):
        node = node.copy()
        node.set("this", _spark("CAST(_p_ AS ARRAY<STRING>)", p=node.this))
    return node


def _agg_filter(agg: exp.Expression, where: exp.Where | None) -> exp.Expression:
    return exp.Filter(this=agg, expression=where.copy()) if where is not None else agg


def _aggregate(node: exp.Expression, is_it: Callable[[exp.Expression], bool]) -> tuple:
    """``(aggregate, its FILTER clause or None)`` when ``node`` is an aggregate ``is_it`` accepts,
    alone or with its FILTER clause, else ``(None, None)``; the aggregate inside a FILTER is
    rewritten with that FILTER, not alone."""
    if isinstance(node, exp.Filter) and is_it(node.this):
        return node.this, node.expression
    if is_it(node) and not isinstance(node.parent, exp.Filter):
        return node, None
    return None, None


def histogram(node: exp.Expression) -> exp.Expression:
    # DuckDB histogram(x) is an aggregate giving MAP(value -> count), sorted by value,
    # NULL over no rows; Spark has no such aggregate. It is built from the list of
    # values: each distinct value (sorted) with the size of its matches. (A FILTER
    # clause applies to every aggregate inside.)
    target, where = _aggregate(node, lambda n: _fn(n, "histogram"))
    if target is None:
        return node
    x = target.expressions[0]
    values = _agg_filter(exp.Anonymous(this="collect_list", expressions=[x.copy()]), where)
    count = _agg_filter(exp.Count(this=x.copy()), where)
    return _spark(
        "CASE WHEN _n_ > 0 THEN map_from_entries(transform(array_sort(array_distinct(_v_)), "
        "__k -> struct(__k, size(filter(_v_, __x -> __x = __k))))) END",
        n=count, v=values)


def list_bool_or(node: exp.Expression) -> exp.Expression:
    # DuckDB list_bool_or(list) is bool_or over the list's non-NULL elements (NULL for an
    # empty list); Spark has no such function, and EXISTS would say NULL where a NULL
    # element sits beside false ones. An AGGREGATE over the elements keeps DuckDB's answer.
    if _fn(node, "list_bool_or"):
        return _spark(
            "aggregate(_l_, CAST(NULL AS BOOLEAN), (__acc, __b) -> "
            "CASE WHEN __b IS NULL THEN __acc ELSE coalesce(__acc, false) OR __b END)",
            l=node.expressions[0])
    return node


def distinct_string_agg(node: exp.Expression) -> exp.Expression:
    # DuckDB string_agg(DISTINCT x, sep ORDER BY x): Spark's LISTAGG(DISTINCT ...) WITHIN
    # GROUP does the same, but two of them in one aggregate crash Spark 4.3 (error_groups
    # has two). The distinct values are collected as a set, sorted, joined; NULL when
    # there is none, as string_agg gives.
    if not isinstance(node, exp.GroupConcat):
        return node
    inner = node.this
    order = None
    if isinstance(inner, exp.Order):
        order, inner = inner, inner.this
    if not isinstance(inner, exp.Distinct):
        return node
    if isinstance(node.parent, exp.Filter):
        raise UnsupportedConstruct("string_agg(DISTINCT ...) FILTER (...)")
    (x,) = inner.expressions
    if order is not None:
        keys = order.expressions
        if len(keys) != 1 or keys[0].this != x or keys[0].args.get("desc"):
            raise UnsupportedConstruct("string_agg(DISTINCT x ORDER BY something other than x)")
    sep = node.args.get("separator") or exp.Literal.string(",")
    return _spark("CASE WHEN count(_x_) > 0 THEN array_join(array_sort(collect_set(_x_)), _s_) END", x=x, s=sep)


def quantile_disc(node: exp.Expression) -> exp.Expression:
    # DuckDB quantile_disc(x, q) is the first sorted value whose cumulative share reaches
    # q (index ceil(n * q), 1-based; the first for q = 0), the SQL standard's
    # PERCENTILE_DISC. sqlglot writes PERCENTILE_DISC(x, q), a form Spark does not read
    # (it wants WITHIN GROUP, which takes no FILTER beside it here), so the value is
    # taken at that index of Spark's sorted list of the non-NULL values.
    target, where = _aggregate(node, lambda n: isinstance(n, exp.PercentileDisc))
    if target is None:
        return node
    x, q = target.this, target.expression
    if not (isinstance(q, exp.Literal) and q.is_number):
        raise UnsupportedConstruct("quantile_disc with a quantile that is not a number")
    values = _agg_filter(exp.Anonymous(this="collect_list", expressions=[x.copy()]), where)
    count = _agg_filter(exp.Count(this=x.copy()), where)
    return _spark("CASE WHEN _n_ > 0 THEN try_element_at(array_sort(_v_), "
                  "greatest(CAST(ceil(_n_ * _q_) AS INT), 1)) END",
                  n=count, v=values, q=q)


def _compare(keys: list[exp.Ordered], i: int = 0) -> str:
    """A comparator body over ``__l.k<i>`` / ``__r.k<i>`` ordering as DuckDB orders ``keys``."""
    if i == len(keys):
        return "0"
    desc = bool(keys[i].args.get("desc"))
    # DuckDB puts NULLs last in both directions unless told otherwise.
    nulls_first = bool(keys[i].args.get("nulls_first"))
    lt, gt = ("1", "-1") if desc else ("-1", "1")
    nl, nr = ("-1", "1") if nulls_first else ("1", "-1")
    k = f"k{i}"
    rest = _compare(keys, i + 1)
    return (f"CASE WHEN __l.{k} IS NULL AND __r.{k} IS NULL THEN {rest} WHEN __l.{k} IS NULL THEN {nl} "
            f"WHEN __r.{k} IS NULL THEN {nr} WHEN __l.{k} < __r.{k} THEN {lt} WHEN __l.{k} > __r.{k} THEN {gt} "
            f"ELSE {rest} END")


def ordered_first(node: exp.Expression) -> exp.Expression:
    # DuckDB first(x ORDER BY k1 DESC, k2) is x of the first row in that order (NULLs of a
    # key last); Spark's first() takes no ORDER BY. The rows' (keys, x) are collected,
    # sorted by a comparator that orders as DuckDB does, and the first one's x taken.
    target, where = _aggregate(node, lambda n: isinstance(n, exp.First) and isinstance(n.this, exp.Order))
    if target is None:
        return node
    order = target.this
    keys = list(order.expressions)
    fields = ", ".join(f"_k{i}_ AS k{i}" for i in range(len(keys)))
    parts = {f"k{i}": k.this for i, k in enumerate(keys)}
    rows = _spark(f"collect_list(struct({fields}, _x_ AS v))", x=order.this, **parts)
    return _spark(f"try_element_at(array_sort(_rows_, (__l, __r) -> {_compare(keys)}), 1).v",
                  rows=_agg_filter(rows, where))


def hugeint(node: exp.Expression) -> exp.Expression:
    # DuckDB's HUGEINT is a 128-bit integer; Spark has none. DECIMAL(38, 0) holds the
    # same whole numbers exactly (sqlglot writes INT128, which Spark does not know).
    if isinstance(node, exp.DataType) and node.is_type("int128"):
        return exp.DataType.build("DECIMAL(38, 0)")
    return node


def list_contains_null(node: exp.Expression) -> exp.Expression:
    # DuckDB list_contains(list, NULL) is NULL (a macro given NULL for a column, as
    # in_scope(ts, NULL, ...)); Spark refuses an untyped NULL as the element.
    if isinstance(node, exp.ArrayContains) and isinstance(node.expression, exp.Null):
        return _spark("CAST(NULL AS BOOLEAN)")
    return node


def quantile_cont(node: exp.Expression) -> exp.Expression:
    # DuckDB quantile_cont(x, q) interpolates linearly between the sorted values, as
    # Spark's exact percentile(x, q) does; sqlglot writes PERCENTILE_CONT(x, q), which
    # Spark reads only in its WITHIN GROUP form.
    if isinstance(node, exp.PercentileCont) and node.expression is not None and not isinstance(node.parent, exp.WithinGroup):
        return exp.Anonymous(this="percentile", expressions=[node.this, node.expression])
    return node


# ---------------------------------------------------------------------------
# Query shape


def limit_parameter(node: exp.Expression) -> exp.Expression:
    # DuckDB's LIMIT NULL means no limit (a question's `limit` left unbound); Spark
    # refuses a NULL limit and wants an INT, so the bound is coalesced to INT's max.
    if isinstance(node, exp.Limit) and isinstance(node.expression, exp.Placeholder):
        return exp.Limit(expression=_spark("CAST(coalesce(_p_, 2147483647) AS INT)", p=node.expression))
    return node


def star_replace(node: exp.Expression) -> exp.Expression:
    # DuckDB's SELECT * REPLACE (expr AS col) keeps col in its place; Spark has no
    # REPLACE, only * EXCEPT (col). The replaced columns come after the others: the
    # rows are the same, the column order of that SELECT differs (the questions read
    # such a CTE by name).
    if not isinstance(node, exp.Select) or not any(
            isinstance(e, exp.Star) and e.args.get("replace") for e in node.expressions):
        return node
    out: list[exp.Expression] = []
    for e in node.expressions:
        if isinstance(e, exp.Star) and e.args.get("replace"):
            if e.args.get("except_"):
                raise UnsupportedConstruct("SELECT * EXCLUDE (...) REPLACE (...)")
            replaced = e.args["replace"]
            out.append(exp.Star(except_=[exp.column(a.alias) for a in replaced]))
            out.extend(a.copy() for a in replaced)
        else:
            out.append(e.copy())
    select = node.copy()
    select.set("expressions", out)
    return select


def cast_of_unnest(node: exp.Expression) -> exp.Expression:
    # DuckDB casts what unnest() gives (unnest(generate_series(...))::DATE); Spark
    # refuses a generator nested in an expression, so the cast goes inside, onto each element.
    if isinstance(node, exp.Cast) and isinstance(node.this, (exp.Explode, exp.Unnest)):
        gen = node.this
        to = node.to
        elements = _spark("transform(_l_, __e -> CAST(__e AS STRING))", l=gen.this)
        elements.find(exp.Cast).set("to", to.copy())
        return exp.Explode(this=elements)
    return node


def cte_hints(node: exp.Expression) -> exp.Expression:
    # DuckDB's AS [NOT] MATERIALIZED is a hint to its planner; Spark's parser refuses it.
    if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
        node.set("materialized", None)
    return node


#: The rules, in the order they apply (each to every node of the tree).
RULES: tuple[Callable[[exp.Expression], exp.Expression], ...] = (
    # First: they read the types of what the question wrote, not of what a rule writes.
    decimal_division,
    ceil_floor,
    cte_hints,
    star_replace,
    cast_of_unnest,
    limit_parameter,
    interval_parameter,
    epoch_seconds,
    epoch_units,
    date_diff,
    time_bucket,
    to_microseconds,
    strftime,
    regexp_flags,
    regexp_replacement,
    parse_dirpath,
    isfinite,
    list_parameter,
    histogram,
    list_bool_or,
    distinct_string_agg,
    quantile_disc,
    quantile_cont,
    ordered_first,
    hugeint,
    list_contains_null,
)


def apply_rules(tree: exp.Expression) -> exp.Expression:
    """``tree`` with every rule of :data:`RULES` applied to every node."""
    for rule in RULES:
        tree = tree.transform(_keeping_precedence(rule))
    return tree


def _keeping_precedence(rule: Callable[[exp.Expression], exp.Expression]) -> Callable[[exp.Expression], exp.Expression]:
    # A function call replaced by an operator (date_diff by a subtraction) must keep
    # binding as tightly as the call did: date_diff(...) / 60 is not a - b / 60.
    def apply(node: exp.Expression) -> exp.Expression:
        out = rule(node)
        if out is not node and isinstance(out, (exp.Binary, exp.Not, exp.Neg)):
            return exp.Paren(this=out)
        return out

    return apply
