"""analyzer.online must stay standard-library only; `import analyzer` must stay light."""

import json
import subprocess
import sys

HEAVY = ("duckdb", "polars", "plotly", "jinja2", "typer", "pydantic", "httpx", "rich", "pyarrow", "fastapi")


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
    assert "analyzer.cli" not in loaded
