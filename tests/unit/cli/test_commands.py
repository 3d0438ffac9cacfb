"""The command layer: library errors speak of the library's arguments, `analyze` names its options.

A notebook calling :func:`analyzer.jobs.replay.load_tools_file` reads ``cannot read t.json``;
``analyze replay --tools t.json`` prints ``--tools: cannot read t.json`` (real processes).
"""

from __future__ import annotations

import ast

import pytest

from analyzer.cli.options import naming, option_message
from analyzer.store.db import connect
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.outputs.lake import export_lake
from analyzer.ingestion.logs import ingest
from analyzer.ingestion.metric_store import parse_model_map
from analyzer.io.prometheus import fetch_range, parse_selector
from analyzer.outputs.oncall import check_fail_on, parse_fail_on
from analyzer.jobs.replay import endpoint_url, load_tools_file
from analyzer.outputs.report.build import parse_week, resolve_period
from analyzer.store.asking import QueryParamError, bind_params, execute, resolve
from analyzer.questions.sqlrun import check_read_only
from analyzer.core.isotime import parse_range, parse_time
from analyzer.outputs.summary import resolve_models
from analyzer.classification.turns import refresh_turns
from tests.support.records import NAKED_500, TOOL_RESULT, at, request, response_error, write_jsonl
from tests.support.repo import REPO
from tests.support.cli import analyze

ROOT = REPO


def _library_error(call, *args) -> AnalyzerError:
    with pytest.raises(AnalyzerError) as err:
        call(*args)
    return err.value


def test_library_errors_name_no_option(tmp_path):
    (tmp_path / "x.json").write_text('{"*": [1]}', encoding="utf-8")
    cases = [
        (_library_error(load_tools_file, tmp_path / "missing.json"), "tools_file", "cannot read"),
        (_library_error(load_tools_file, tmp_path / "x.json"), "tools_file", "is not a list of tool definitions"),
        (_library_error(parse_selector, "not a selector"), "selector", "want label matchers"),
        (_library_error(parse_selector, '__name__="up"'), "selector", "select by labels"),
        (_library_error(parse_model_map, ["nonsense"]), "model_map", "LOG_MODEL=METRIC_MODEL_NAME"),
        (_library_error(endpoint_url, "ftp://host"), "endpoint", "endpoint must be an http(s) URL"),
        (_library_error(parse_time, "yesterday", "since"), "since", "since: not an ISO-8601 date"),
    ]
    for err, param, words in cases:
        assert err.param == param and words in str(err) and "--" not in str(err), str(err)
        assert err.exit_code in (ExitCode.USAGE, ExitCode.NO_INPUT)


@pytest.fixture
def small_db(tmp_path):
    """A real database with one GLM turn, read-write then read-only."""
    logs = write_jsonl(tmp_path / "a.jsonl", [request("c0000001", at(0), tool_results=TOOL_RESULT),
                                              response_error("c0000001", at(0.5), NAKED_500)])
    con = connect(tmp_path / "s.duckdb")
    ingest(con, [str(logs)])
    refresh_turns(con)
    con.close()
    return tmp_path / "s.duckdb"


def test_more_library_errors_name_no_option(tmp_path, small_db):
    """Each error as a notebook reads it (no flag, the argument it is about), and as `naming` words it
    for the command line (the exact text `analyze` has always printed)."""
    (tmp_path / "afile").write_text("", encoding="utf-8")
    con = connect(small_db)
    try:
        cases = [
            (lambda: export_lake(con, tmp_path / "afile"), {"out_dir": "--lake"},
             f"out_dir {tmp_path / 'afile'}: exists and is not a directory",
             f"--lake {tmp_path / 'afile'}: exists and is not a directory"),
            (lambda: parse_range("2026-11-20", "2026-11-19"), {"since": "--since", "until": "--until"},
             "since 2026-11-20 is not before until 2026-11-19: the range "
             "[2026-11-20T00:00:00Z, 2026-11-19T00:00:00Z) is empty",
             "--since 2026-11-20 is not before --until 2026-11-19: the range "
             "[2026-11-20T00:00:00Z, 2026-11-19T00:00:00Z) is empty"),
            (lambda: resolve_models(con, ["glm5"]), {"models": "--model"},
             "model 'glm5' matches no model in the database; did you mean 'glm-5'? The models are: glm-5 ",
             "--model 'glm5' matches no model in the database; did you mean 'glm-5'? The models are: glm-5 "),
            (lambda: parse_week("2026-47x"), {"week": "--week"},
             "week: expected an ISO week like 2026-W47, got '2026-47x'",
             "--week: expected an ISO week like 2026-W47, got '2026-47x'"),
            (lambda: parse_week("2026-W60"), {"week": "--week"},
             "week: no such ISO week: '2026-W60'", "--week: no such ISO week: '2026-W60'"),
            (lambda: resolve_period(con, week="2026-W47", since="2026-11-16"),
             {"week": "--week", "since": "--since", "until": "--until"},
             "give either week or since/until, not both", "give either --week or --since/--until, not both"),
            (lambda: resolve_period(con, since="2026-11-20", until="2026-11-19"),
             {"since": "--since", "until": "--until"},
             "until must be after since", "--until must be after --since"),
            (lambda: parse_fail_on(["tool-history-5xx>>2%"]), {"specs": "--fail-on"},
             "threshold 'tool-history-5xx>>2%': expected METRIC>N or METRIC>N%",
             "--fail-on 'tool-history-5xx>>2%': expected METRIC>N or METRIC>N%"),
            (lambda: parse_fail_on(["threshold>1"]), {"specs": "--fail-on"},
             "threshold 'threshold>1': unknown metric 'threshold'; known: ok, ",
             "--fail-on 'threshold>1': unknown metric 'threshold'; known: ok, "),
            (lambda: parse_fail_on(["incidents>1%"]), {"specs": "--fail-on"},
             "threshold 'incidents>1%': incidents is a count, not a share of the turns",
             "--fail-on 'incidents>1%': incidents is a count, not a share of the turns"),
            (lambda: check_fail_on({"turns": 1, "classes": {"ok": {"count": 0}}}, parse_fail_on(["failed>0"])),
             {"thresholds": "--fail-on"}, "1 threshold crossed: failed 1 > 0",
             "--fail-on: 1 threshold crossed: failed 1 > 0"),
            (lambda: fetch_range("http://127.0.0.1:9", "2026-11-20", "2026-11-19", 15), {"since": "--since", "until": "--until"},
             "until must be after since for http://127.0.0.1:9", "--until must be after --since for http://127.0.0.1:9"),
            (lambda: fetch_range("http://127.0.0.1:9", "not a time", "2026-11-19", 15), {"since": "--since", "until": "--until"},
             "since: not an ISO-8601 time or epoch seconds: 'not a time'",
             "--since: not an ISO-8601 time or epoch seconds: 'not a time'"),
            (lambda: check_read_only("SELECT 1; SELECT 2"), {"write": "pass --write"},
             "the SQL holds 2 statements; `analyze sql` runs one per call (open the database read-write to run "
             "several)",
             "the SQL holds 2 statements; `analyze sql` runs one per call (pass --write to run several)"),
            (lambda: check_read_only("COPY (SELECT 1) TO 'x.csv'"), {"write": "pass --write"},
             "COPY is not a read-only statement: ",
             "COPY is not a read-only statement: "),
        ]
        for call, flags, library, command in cases:
            with pytest.raises(AnalyzerError) as err:
                call()
            text = str(err.value)
            assert text.startswith(library) and "--" not in text and err.value.param in flags, text
            assert err.value.exit_code in (ExitCode.USAGE, ExitCode.THRESHOLD)
            code = err.value.exit_code
            with pytest.raises(AnalyzerError) as worded:
                with naming(**flags):
                    call()
            assert str(worded.value).startswith(command) and worded.value.exit_code == code, str(worded.value)
    finally:
        con.close()
    copy = _library_error(check_read_only, "COPY (SELECT 1) TO 'x.csv'")
    assert str(copy).endswith("(open the database read-write to allow it)")
    with pytest.raises(AnalyzerError) as copy_cli:
        with naming(write="pass --write"):
            check_read_only("COPY (SELECT 1) TO 'x.csv'")
    assert str(copy_cli.value).endswith("(pass --write to allow it)")
    # A change on a read-only connection: the notebook is told to open it read-write.
    ro = connect(small_db, read_only=True)
    try:
        refused = _library_error(execute, ro, "CREATE TABLE t (x INT)")
        assert refused.param == "write" and "--" not in str(refused), str(refused)
        assert str(refused).endswith("(the database is opened read-only; open it read-write to allow changes)")
        with pytest.raises(AnalyzerError) as cli:
            with naming(write="pass --write"):
                execute(ro, "CREATE TABLE t (x INT)")
        assert str(cli.value).endswith("(the database is opened read-only; pass --write to allow changes)")
    finally:
        ro.close()


def test_a_missing_query_parameter_is_said_without_the_option():
    with pytest.raises(QueryParamError) as err:
        bind_params(resolve("SELECT $x AS x"), {})
    assert str(err.value) == "the SQL needs parameter $x" and err.value.missing == ("x",)


def test_naming_puts_the_option_in_place_of_the_parameter():
    assert option_message(AnalyzerError("endpoint must be x", param="endpoint"), "--endpoint") == "--endpoint must be x"
    assert option_message(AnalyzerError("cannot read t", param="tools_file"), "--tools") == "--tools: cannot read t"
    with pytest.raises(AnalyzerError) as err:
        with naming(selector="--prometheus-selector"):
            with naming(selector="--prometheus-selector"):  # named once, however deep
                raise AnalyzerError("want label matchers", ExitCode.USAGE, param="selector")
    assert str(err.value) == "--prometheus-selector: want label matchers" and err.value.exit_code == ExitCode.USAGE
    with pytest.raises(AnalyzerError) as other:  # an error about no named parameter passes unchanged
        with naming(selector="--prometheus-selector"):
            raise AnalyzerError("Prometheus at x is unreachable", ExitCode.UPSTREAM)
    assert str(other.value) == "Prometheus at x is unreachable"


def test_the_command_line_still_names_its_options(tmp_path):
    logs = write_jsonl(tmp_path / "logs" / "a.jsonl", [request("c0000001", at(0), tool_results=TOOL_RESULT),
                                                       response_error("c0000001", at(0.5), NAKED_500)])
    (tmp_path / "x.json").write_text('{"*": [1]}', encoding="utf-8")
    expected = [
        (("replay", "--db", "r.duckdb", "--endpoint", "http://127.0.0.1:9", "--tools", "missing.json"),
         ExitCode.NO_INPUT, "analyze: error: --tools: cannot read missing.json: No such file or directory"),
        (("replay", "--db", "r.duckdb", "--endpoint", "http://127.0.0.1:9", "--tools", "x.json"),
         ExitCode.USAGE, "analyze: error: --tools: x.json: '*' is not a list of tool definitions"),
        (("replay", "--db", "r.duckdb", "--endpoint", "ftp://host"),
         ExitCode.USAGE, "analyze: error: --endpoint must be an http(s) URL, got 'ftp://host'"),
        ((str(logs), "--db", "a.duckdb", "--prometheus", "http://127.0.0.1:9", "--prometheus-selector", "nope"),
         ExitCode.USAGE, "analyze: error: --prometheus-selector: want label matchers"),
        ((str(logs), "--db", "a.duckdb", "--prometheus", "ftp://host"),
         ExitCode.USAGE, "analyze: error: --prometheus: not an http(s) URL: 'ftp://host'"),
        ((str(logs), "--db", "a.duckdb", "--since", "yesterday"),
         ExitCode.USAGE, "analyze: error: --since: not an ISO-8601 date or time, nor an age such as 24h or 7d: "),
        (("forget", "--db", "a.duckdb", "--until", "soon"),
         ExitCode.USAGE, "analyze: error: --until: not an ISO-8601 date or time"),
        (("report", "--db", "a.duckdb", "--since", "monday"),
         ExitCode.USAGE, "analyze: error: --since: not an ISO-8601 date or time"),
        (("sql", "--db", "a.duckdb", "SELECT $x AS x"),
         ExitCode.USAGE, "analyze: error: the SQL needs parameter $x: pass --param x=VALUE"),
        ((str(logs), "--db", "a.duckdb", "--model-map", "nonsense"),
         ExitCode.USAGE, "analyze: error: --model-map: want LOG_MODEL=METRIC_MODEL_NAME, got 'nonsense'"),
    ]
    for args, code, line in expected:
        p = analyze(*args, cwd=tmp_path)
        assert p.returncode == code and p.stderr.startswith(line), (args, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr


def test_cli_only_parses_and_calls_the_command_layer():
    """analyzer.cli.app imports the jobs (analyzer.jobs) and printers (analyzer.cli) and little else; each
    command's function builds the options, calls the job and prints: no loop, no statement branching but on
    --json, no try."""
    tree = ast.parse((ROOT / "analyzer" / "cli" / "app.py").read_text(encoding="utf-8"))
    ours = [n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module.startswith("analyzer")]
    assert ours and all(m.startswith(("analyzer.cli.", "analyzer.jobs"))
                        or m in ("analyzer", "analyzer.io.objectstore", "analyzer.core.errors") for m in ours), ours
    commands = [f for f in tree.body if isinstance(f, ast.FunctionDef)
                and any(isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "command" for d in f.decorator_list)]
    assert len(commands) == 9  # run, sql, export, sync, report, replay, forget, alerts, lake build
    for f in commands:
        assert not [n for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))], f.name
        logic = [type(n).__name__ for n in ast.walk(f) if isinstance(n, (ast.For, ast.While, ast.Try, ast.With))
                 and not (isinstance(n, ast.With) and all("naming" in ast.unparse(i.context_expr)
                                                          or "param_flags" in ast.unparse(i.context_expr)
                                                          for i in n.items))]
        ifs = [ast.unparse(n.test) for n in ast.walk(f) if isinstance(n, ast.If)]  # an option's value may be an IfExp
        assert not logic and all(t == "json_out" for t in ifs), (f.name, logic, ifs)
