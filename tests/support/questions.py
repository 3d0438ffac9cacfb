"""The catalog of queries/ for the tests: every file that runs, and one run the way `analyze sql` takes.

:data:`RUNNABLE` is every question, view and materialized table; :func:`run` asks one of
them on a connection (tests/unit/questions/test_queries.py, the LiteLLM sample week's
test, the Spark gate).
"""

from __future__ import annotations

from analyzer.store.asking import execute
from analyzer.store.catalog import load_queries

QUERIES = load_queries()
RUNNABLE = sorted(n for n, q in QUERIES.items() if q.kind in ("question", "view", "table"))


def run(con, name, **params):
    """Question, view or table ``name``'s rows as dicts, by the path `analyze sql` takes (parameters bound)."""
    cur = execute(con, name if QUERIES[name].kind == "question" else f'SELECT * FROM "{name}"', params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]
