"""Schema changes from the first release on: append-only, applied in order, recorded in ``_migrations``.

A new database is made by ``schema.sql`` (the schema of the first release, v0.1.0),
recorded as :data:`BASELINE`; then it, like any database made before, gets every
migration of :data:`MIGRATIONS` it has not seen. A released migration is never edited
or reordered, only followed by a new one; a new column is nullable, with a comment
saying what older rows hold.

A database made before v0.1.0 (its ``_migrations`` names the pre-release steps,
``001_initial`` ...) is not upgraded: it is rebuilt from its logs.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import duckdb

from analyzer import __version__
from analyzer.core.errors import DatabaseError

Migration = Callable[[duckdb.DuckDBPyConnection], None]

#: What ``schema.sql`` is recorded as in ``_migrations``.
BASELINE = "000_baseline"
_SCHEMA_SQL = Path(__file__).with_name("schema.sql")

#: Applied in order after the baseline; append only: ``("001_what", function)``, named so that
#: each sorts after the one before (the last name is the schema a lake records).
MIGRATIONS: list[tuple[str, Migration]] = []


def schema_name() -> str:
    """This analyzer's schema: the name of its last migration (the baseline's while there is none)."""
    return MIGRATIONS[-1][0] if MIGRATIONS else BASELINE


def check_recorded(recorded: set[str], target: str) -> None:
    """Refuse a database whose ``_migrations`` (``recorded``) this analyzer cannot bring up to date.

    Raises:
        DatabaseError: made by a pre-release build (no baseline recorded), or by a
            newer analyzer (a migration this version does not know).
    """
    if recorded and BASELINE not in recorded:
        raise DatabaseError(f"{target} was made by a pre-release build of the analyzer; rebuild it from its "
                            "logs into a new file: analyze LOGS --db NEW.duckdb")
    unknown = sorted(recorded - {BASELINE, *(name for name, _ in MIGRATIONS)})
    if unknown:
        raise DatabaseError(f"{target} was written by a newer analyzer (schema {', '.join(unknown)} unknown to "
                            f"analyzer {__version__}); upgrade the analyzer, or pass another --db")


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Make a new database's schema, or apply the migrations an existing one has not seen; return their names.

    Run it inside a transaction (:func:`analyzer.store.db.connect` does): the
    database gets every step or none.
    """
    con.execute("CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    done = {r[0] for r in con.execute("SELECT name FROM _migrations").fetchall()}
    applied = []
    for name, step in [(BASELINE, _baseline), *MIGRATIONS]:
        if name in done:
            continue
        step(con)
        con.execute("INSERT INTO _migrations VALUES (?, ?)", [name, datetime.now(timezone.utc).replace(tzinfo=None)])
        applied.append(name)
    return applied


def _baseline(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(_SCHEMA_SQL.read_text(encoding="utf-8"))
