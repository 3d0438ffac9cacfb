"""analyzer.online must stay standard-library only; `import analyzer` must stay light."""

import ast
import json
import subprocess
import sys
from pathlib import Path
from tests.support.repo import REPO

HEAVY = ("duckdb", "polars", "plotly", "jinja2", "typer", "pydantic", "httpx", "rich", "pyarrow", "fastapi", "litellm")


def _modules_after(statement: str) -> set[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_online_imports_only_the_standard_library():
    # Only what the import adds: the interpreter's own start-up (site, editable
    # finders) is not analyzer.online's doing.
    loaded = _modules_after("import analyzer.online") - _modules_after("pass")
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == [], f"analyzer.online pulled in {heavy}"
    stdlib = set(sys.stdlib_module_names)
    third_party = sorted(
        m for m in loaded if m.split(".")[0] not in stdlib and m.split(".")[0] != "analyzer"
    )
    assert third_party == [], f"non-stdlib modules loaded: {third_party}"


def test_package_import_is_lazy():
    loaded = _modules_after("import analyzer")
    assert not [m for m in loaded if m.split(".")[0] in HEAVY]
    assert "analyzer.cli.app" not in loaded


ONLINE = REPO / "analyzer" / "online"


def _imported_names(path: Path) -> list[tuple[int, str]]:
    """Every module a source file imports (top level, in functions, under TYPE_CHECKING), absolute."""
    package = "analyzer.online" if path.name == "__init__.py" else f"analyzer.online.{path.stem}"
    here = package.split(".") if path.name == "__init__.py" else package.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # `from ..x import y` in analyzer/online/a.py is analyzer.x
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def test_online_sources_import_nothing_of_analyzer_outside_online():
    """Read statically: the proxy vendors or imports analyzer.online alone, so no file of it
    may reach into the rest of the package (nor outside the standard library)."""
    files = sorted(ONLINE.rglob("*.py"))
    assert len(files) >= 5
    stdlib = set(sys.stdlib_module_names)
    bad = []
    for path in files:
        for line, module in _imported_names(path):
            top = module.split(".")[0]
            inside = module == "analyzer.online" or module.startswith("analyzer.online.")
            if (top == "analyzer" and not inside) or (top != "analyzer" and top not in stdlib and top != "__future__"):
                bad.append(f"{path.name}:{line}: {module}")
    assert bad == [], f"analyzer.online imports from outside itself: {bad}"


def test_the_static_check_sees_an_import_from_outside(tmp_path):
    """The check above is not vacuous: a relative import out of the package is resolved and caught."""
    probe = tmp_path / "probe.py"
    probe.write_text("from ..db import connect\nfrom . import classify\nimport analyzer.core.errors\n", encoding="utf-8")
    assert [m for _, m in _imported_names(probe)] == ["analyzer.db", "analyzer.online", "analyzer.core.errors"]


def test_online_loads_no_analyzer_module_outside_itself():
    """At run time, in a fresh interpreter: `import analyzer.online` loads the package's
    `__init__` (unavoidable, and light) and analyzer.online's own modules, nothing else of analyzer."""
    loaded = _modules_after("import analyzer.online")
    ours = sorted(m for m in loaded if m == "analyzer" or m.startswith("analyzer."))
    outside = [m for m in ours if m != "analyzer" and m != "analyzer.online" and not m.startswith("analyzer.online.")]
    assert "analyzer.online.classify" in ours and outside == [], f"analyzer.online loaded {outside}"


def _private_imports(root: Path) -> list[str]:
    """``from .module import _name`` across modules of ``root`` (an alias to a private name is fine)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__" and (node.level or
                                                                                    (node.module or "").startswith("analyzer")):
                found += [f"{path.relative_to(root.parent)}:{node.lineno} {a.name}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_another_modules_private_names(tmp_path):
    root = REPO / "analyzer"
    assert _private_imports(root) == []
    # the check sees one
    pkg = tmp_path / "analyzer"
    pkg.mkdir()
    (pkg / "a.py").write_text("def _hidden():\n    pass\n", encoding="utf-8")
    (pkg / "b.py").write_text("from .a import _hidden\n", encoding="utf-8")
    assert _private_imports(pkg) == ["analyzer/b.py:1 _hidden"]
