"""analyzer.cli_coercion: the command line's plain option values coerced without pydantic,
to the very values (and errors) typer's own pydantic adapters give."""

from __future__ import annotations

from pathlib import Path

import subprocess
import sys

import pytest
import typer.main

from analyzer.cli import app
from analyzer.cli_coercion import _PlainValues, plain_kind


def _every_parameter():
    group = typer.main.get_command(app)
    for name, command in sorted(group.commands.items()):
        for param in command.params:
            yield name, command, param


def _outcome(coerce):
    try:
        value = coerce()
    except Exception as exc:  # noqa: BLE001 - an error is an outcome to compare
        return ("raises", type(exc).__name__, str(exc))
    return ("value", type(value).__name__, repr(value))  # repr: nan is nan


def _values(tmp_path: Path) -> list:
    here = tmp_path / "here.jsonl"
    here.write_text("{}\n", encoding="utf-8")
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    texts = ["", "x", " a b ", "-", "60s", "3", "2.5", "nan", "\udcff", "a\x00b", "a//b/", "~/x",
             str(here), str(folder), str(tmp_path / "missing" / "db.duckdb")]
    return [None, True, 3, 2.5, *texts, tuple(texts[:3]), (), [str(here)], ("a", 1), Path(here)]


def _reference():
    """typer's own coercion (``build_runtime_param``), the reference; absent in other typer versions."""
    coercion = pytest.importorskip("typer._coercion", reason="this typer has no typer._coercion: "
                                   "analyzer.cli_coercion leaves it alone (test_another_typer_is_left_alone)")
    return coercion.build_runtime_param


def test_another_typer_is_left_alone():
    # A typer without the module reproduced here keeps its own coercion: the
    # command line stays right, only slower to start. (A child process: install()
    # patches typer's classes for the whole process.)
    code = (
        "import sys, typer.core\n"
        "sys.modules['typer._coercion'] = None  # as if this typer had no such module\n"
        "before = (typer.core.TyperOption.get_runtime_param, typer.core.TyperArgument.get_runtime_param)\n"
        "from analyzer.cli_coercion import install; install()\n"
        "after = (typer.core.TyperOption.get_runtime_param, typer.core.TyperArgument.get_runtime_param)\n"
        "assert after == before, 'patched'\n"
        "print('left alone')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "left alone"


def test_every_option_coerces_as_typer_does(tmp_path):
    build_runtime_param = _reference()
    checked_plain = 0
    for name, command, param in _every_parameter():
        ctx = command.context_class(command, info_name=name)
        reference = build_runtime_param(param.type_descriptor)
        ours = _PlainValues(plain_kind(param.type_descriptor), lambda: build_runtime_param(param.type_descriptor))
        for value in _values(tmp_path):
            expected = _outcome(lambda: reference.coerce(value, param=param, ctx=ctx))
            got = _outcome(lambda: ours.coerce(value, param=param, ctx=ctx))
            assert got == expected, (name, param.name, value)
            if ours.kind is not None and expected[0] == "value":
                checked_plain += 1
    assert checked_plain > 100  # the plain kinds were compared, not only the fallbacks


def test_plain_kinds_are_the_command_lines_text_list_and_path_options():
    kinds = {(name, param.name): plain_kind(param.type_descriptor) for name, _, param in _every_parameter()}
    assert kinds[("run", "files")] == "list[str]"
    assert kinds[("run", "db")] == "path"
    assert kinds[("run", "since")] == "str"
    assert kinds[("run", "caller_deadline")] is None  # a number: typer's adapter parses it
    assert kinds[("replay", "limit")] is None
