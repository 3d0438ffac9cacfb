"""The SQL library in queries/: views the database is built from, and questions.

Each file holds one SELECT with a comment header::

    -- view: turns            (or: -- table: NAME, -- question: NAME, -- macro: NAME)
    -- title: Every turn with its incident class
    -- params: since, until   (questions only; `$name` placeholders)
    -- free text saying what it answers ...

Views are created from these files verbatim (``CREATE OR REPLACE VIEW name AS
<file>``), so the SQL a user reads is the SQL that runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from analyzer.core.paths import queries_dir

_HEADER = re.compile(r"^--\s*(view|table|question|macro|title|params)\s*:\s*(.*?)\s*$")


@dataclass(frozen=True)
class QueryFile:
    """One file of queries/: its kind (view or question), name, title, params, SQL."""

    kind: str
    name: str
    title: str
    params: tuple[str, ...]
    description: str
    sql: str
    path: Path


def parse_query_file(path: Path) -> QueryFile:
    """Read a queries/ file and its header."""
    text = path.read_text(encoding="utf-8")
    kind = name = title = ""
    params: tuple[str, ...] = ()
    desc: list[str] = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        m = _HEADER.match(line)
        if m:
            key, value = m.groups()
            if key in ("view", "table", "question", "macro"):
                kind, name = key, value
            elif key == "title":
                title = value
            elif key == "params":
                params = tuple(p.strip() for p in value.split(",") if p.strip() and p.strip() != "none")
        else:
            desc.append(line[2:].strip())
    if not kind:
        raise ValueError(f"{path}: the header must start with '-- view:', '-- table:', '-- question:' or '-- macro:' NAME")
    return QueryFile(kind, name, title, params, " ".join(desc).strip(), text, path)


# The parsed files of queries/ (keyed by the folder), kept while none of them changed: the
# summary and the report run a few dozen questions by name, each resolved here.
_LOADED: dict[Path, tuple[tuple, dict[str, QueryFile]]] = {}


def load_queries() -> dict[str, QueryFile]:
    """Every query file of queries/ by name (parsed again only when a file changed)."""
    d = queries_dir()
    entries = sorted((e for e in os.scandir(d) if e.name.endswith(".sql")), key=lambda e: e.name)
    stamps = []
    for e in entries:
        st = e.stat()
        stamps.append((e.name, st.st_mtime_ns, st.st_size))
    stamp = tuple(stamps)
    cached = _LOADED.get(d)
    if cached and cached[0] == stamp:
        return dict(cached[1])
    out = {}
    for e in entries:
        q = parse_query_file(Path(e.path))
        out[q.name] = q
    _LOADED[d] = (stamp, out)
    return dict(out)


def create_views(con: duckdb.DuckDBPyConnection, *, materialize: bool = True) -> None:
    """(Re)create every view of queries/ in the database.

    Macro files (``-- macro:``) run first, verbatim. Views may build on each other;
    they are created in dependency order by retrying the ones whose dependencies do
    not exist yet. A ``-- table:`` file is a materialized view: created here when
    missing, rebuilt by :func:`analyzer.classification.turns.refresh_turns`; with
    ``materialize=False`` it is left to the caller (a lake brings its own).
    """
    queries = load_queries().values()
    # Views are recreated only when the SQL changed since they were last made (a
    # re-run that changed nothing should not pay for thirty CREATE VIEWs).
    signature = _signature(queries)
    if _stored_signature(con) == signature:
        return
    for q in queries:
        if q.kind == "macro":
            con.execute(q.sql)
    pending = [q for q in queries if q.kind == "view" or (q.kind == "table" and materialize)]
    while pending:
        failed = []
        errors = {}
        for q in pending:
            try:
                if q.kind == "table":
                    con.execute(f'CREATE TABLE IF NOT EXISTS "{q.name}" AS {q.sql}')
                else:
                    con.execute(f'CREATE OR REPLACE VIEW "{q.name}" AS {q.sql}')
            except duckdb.CatalogException as exc:
                failed.append(q)
                errors[q.name] = exc
        if len(failed) == len(pending):
            raise duckdb.CatalogException("; ".join(f"{k}: {v}" for k, v in errors.items()))
        pending = failed
    try:
        con.execute("INSERT OR REPLACE INTO build_state VALUES ('views', ?, now())", [signature])
    except duckdb.CatalogException:
        pass


def _signature(queries) -> str:
    import hashlib

    return hashlib.md5("".join(q.kind + q.name + q.sql for q in queries).encode()).hexdigest()


def _stored_signature(con: duckdb.DuckDBPyConnection) -> str | None:
    try:
        known = con.execute("SELECT signature FROM build_state WHERE name = 'views'").fetchall()
    except duckdb.CatalogException:  # a lake's connection has no build_state
        known = []
    return known[0][0] if known else None


def create_temp_macros(con: duckdb.DuckDBPyConnection) -> None:
    """On a read-only connection to a database whose stored SQL is older: today's macros, as TEMP macros.

    The questions call macros (``in_scope``, ``is_glm``, ...) that a database
    written by an older analyzer does not hold; a read-only connection cannot
    create them in the database, but it can for itself. Nothing is done when the
    stored SQL is current.
    """
    queries = load_queries().values()
    if _stored_signature(con) == _signature(queries):
        return
    for q in queries:
        if q.kind == "macro":
            con.execute(re.sub(r"\bCREATE OR REPLACE MACRO\b", "CREATE OR REPLACE TEMP MACRO", q.sql))
