"""The Python API of docs/sql.md's "Python and notebooks" section: ingest, classify, query, connect.

The section's examples themselves run as written in tests/e2e/test_doc_examples.py.
"""

from __future__ import annotations

import polars as pl
import pytest

from tests.support.records import write_jsonl
from tests.support.week import week_records


# ---------------------------------------------------------------------------
# The API the section documents


def test_api_with_a_path_or_a_connection(tmp_path):
    import analyzer
    import analyzer.ingestion.logs  # noqa: F401 - the submodule must not shadow the function

    logs = write_jsonl(tmp_path / "logs" / "2026-11-16" / "14-00-00-1.jsonl", week_records())
    db = tmp_path / "api.duckdb"
    first = analyzer.ingest(str(logs.parent), db=db)
    again = analyzer.ingest([logs], db=db)  # callable twice: still the API function
    assert first.new_records == len(week_records()) and again.files_unchanged == 1
    assert analyzer.classify(db=db).new_feature_rows == 0  # ingest classified already

    by_name = analyzer.query("classes_by_day", db=db, model="qwen3")
    assert isinstance(by_name, pl.DataFrame) and set(by_name["model"]) == {"qwen3"}
    con = analyzer.connect(db)  # read-write in this process: query() shares it
    try:
        n = analyzer.query("SELECT count(*) AS n FROM turns", db=con)["n"][0]
        also = analyzer.query("SELECT count(*) AS n FROM turns WHERE model = $m", db=db, m="glm-5")["n"][0]
    finally:
        con.close()
    assert n == 17 and 0 < also < n

    from analyzer.store.asking import QueryParamError, UnknownQueryError

    with pytest.raises(UnknownQueryError):
        analyzer.query("no_such_question", db=db)
    with pytest.raises(QueryParamError):
        analyzer.query("classes_by_day", db=db, colour="red")


def test_query_on_a_missing_database_is_an_error_not_an_empty_answer(tmp_path):
    import analyzer
    from analyzer.core.errors import DatabaseError

    with pytest.raises(DatabaseError, match="no database"):
        analyzer.query("SELECT count(*) FROM turns", db=tmp_path / "typo.duckdb")
    assert not (tmp_path / "typo.duckdb").exists()
