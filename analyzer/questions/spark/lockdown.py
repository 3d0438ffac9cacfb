"""A Spark session that answers questions and nothing else: Spark's own locks behind the guard.

:mod:`analyzer.questions.guard` refuses a question that reads a file or calls a
function off the allow-list before Spark sees it. These are Spark's own locks, so
that what the guard refuses Spark could not do either:

- ``spark.sql.runSQLOnFiles`` off: ``SELECT * FROM text.`/etc/passwd``` (or
  ``parquet.`/other/lake```) is a missing table, not a file read;
- the functions that call Java by reflection (``reflect``, ``java_method``,
  ``try_reflect``: environment variables, file modes, links) dropped from the
  session's function registry; Spark has no setting that turns them off.

Only the session passed in is changed (a function registry is per session); a
cluster's other sessions keep theirs.
"""

from __future__ import annotations

#: Spark SQL functions that reach the JVM, and through it the machine: dropped from the session.
DROPPED_FUNCTIONS = ("reflect", "java_method", "try_reflect")

#: Spark settings of a session that answers questions (set at start by ``local_session``, and again here).
LOCKED_CONF = {"spark.sql.runSQLOnFiles": "false"}


def lock_down(spark) -> list[str]:
    """Turn off SQL on files and drop :data:`DROPPED_FUNCTIONS` in ``spark``; return the functions dropped."""
    for key, value in LOCKED_CONF.items():
        spark.conf.set(key, value)
    registry = spark._jsparkSession.sessionState().functionRegistry()
    dropped = []
    names = registry.listFunction().iterator()
    found = []
    while names.hasNext():  # the registry's own identifiers: builtins are qualified (system.builtin.name)
        ident = names.next()
        if ident.funcName().lower() in DROPPED_FUNCTIONS:
            found.append(ident)
    for ident in found:
        if registry.dropFunction(ident):
            dropped.append(ident.funcName())
    return sorted(dropped)
