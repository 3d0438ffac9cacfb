"""docs/sql.md's "Python and notebooks" section works as written: its Python blocks are executed.

They run in order, in one namespace, in a fresh process-like setting: the working
directory holds `logs/` (a small week built from tests/support/records.py) and
`$ANALYZER_DB` points at a new database there, as for a user who set it.
"""

from __future__ import annotations

import re

import polars as pl
import pytest

from tests.support.records import write_jsonl
from tests.unit.questions.test_queries import week_records
from tests.support.repo import REPO

DOC = (REPO / "docs" / "sql.md").read_text(encoding="utf-8")
SECTION_TITLE = "## Python and notebooks"


def section() -> str:
    start = DOC.find(f"\n{SECTION_TITLE}\n")
    assert start >= 0, f"docs/sql.md has no '{SECTION_TITLE}' section"
    end = DOC.find("\n## ", start + len(SECTION_TITLE) + 1)
    return DOC[start: end if end >= 0 else len(DOC)]


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", section(), flags=re.M | re.S)


def test_the_section_has_python_to_run():
    assert python_blocks(), "the section shows no ```python example"


def test_the_notebook_example_runs(tmp_path, monkeypatch):
    by_day: dict[str, list[dict]] = {}
    for r in week_records():
        by_day.setdefault(r["timestamp"][:10], []).append(r)
    for day, records in by_day.items():
        write_jsonl(tmp_path / "logs" / day / "14-00-00-glm-proxy-1-0a1b2c3d.jsonl", records)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANALYZER_DB", str(tmp_path / "notebook.duckdb"))

    namespace: dict = {"__name__": "__notebook__"}
    for i, block in enumerate(python_blocks(), 1):
        try:
            exec(compile(block, f"docs/sql.md ({SECTION_TITLE}, python block {i})", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure message is the point
            pytest.fail(f"python block {i} of the docs/sql.md section failed: {type(exc).__name__}: {exc}\n{block}")

    frames = {k: v for k, v in namespace.items() if isinstance(v, pl.DataFrame)}
    assert len(frames) >= 2, "the example should produce polars DataFrames"
    assert any(len(f) for f in frames.values()), "every DataFrame of the example came back empty"
    assert (tmp_path / "notebook.duckdb").exists()


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
