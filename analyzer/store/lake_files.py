"""A lake's files, proven: the files a manifest lists are the files there, with their sizes and rows.

``analyze export --lake`` lists every Parquet file of every relation in the
manifest: its path in the relation's folder, its size in bytes, its rows (from
the Parquet footer) and a fingerprint of its content (``sha256`` of the whole
file up to 1 MiB, sampled beyond: :func:`analyzer.io.sources.file_fingerprint`,
the ingest's own). A reader (:func:`verify_relation`) refuses a relation whose
folder holds a file the manifest does not list (a Parquet file copied into a day
folder), lacks one it lists, or holds one of another size, row count or
fingerprint (a sessions file copied over a turns file), and one whose folder or
files lead outside the lake (a link): each a :class:`LakeError` naming the
relation and the file. The reader then reads exactly the files it checked.

What it costs: one ``stat`` per file, the Parquet footers (one DuckDB call), and
the fingerprint's reads (the whole of a small file, about 200 KiB of a big one).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode, first_line
from analyzer.io.sources import file_fingerprint

#: The hive partition column of the partitioned relations (not one of their columns).
PARTITION = "day"
#: A file's path in its relation's folder, as a manifest may list it: one Parquet file, in a day
#: folder for a partitioned relation (DuckDB's hive default folder for rows without a time).
#: Nothing else (no ``..``, no absolute path).
FILE_PATH = re.compile(rf"(?:{PARTITION}=(?:\d{{4}}-\d{{2}}-\d{{2}}|__HIVE_DEFAULT_PARTITION__)/)?"
                       r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.parquet")


class LakeError(AnalyzerError):
    """A lake that cannot be read as its manifest says (exit 2, about ``--lake``)."""

    exit_code = ExitCode.USAGE
    param = "lake"


def relation_folder(lake_dir: str | Path, table: str) -> Path:
    """The folder of ``table`` in the lake (not resolved: a link is the reader's to refuse)."""
    return Path(lake_dir).expanduser().absolute() / table


def files_on_disk(lake_dir: str | Path, table: str, partitioned: bool) -> list[str]:
    """The Parquet files in ``table``'s folder (a day folder deeper when ``partitioned``), as paths in it, sorted."""
    base = relation_folder(lake_dir, table)
    found = base.glob(f"{PARTITION}=*/*.parquet") if partitioned else base.glob("*.parquet")
    return sorted(p.relative_to(base).as_posix() for p in found)


def describe_files(lake_dir: str | Path, table: str, partitioned: bool,
                   con: duckdb.DuckDBPyConnection | None = None) -> list[dict]:
    """The manifest's ``files`` of ``table``: each file's path in its folder, bytes, rows and fingerprint."""
    base = relation_folder(lake_dir, table)
    paths = files_on_disk(lake_dir, table, partitioned)
    rows = _footer_rows([str(base / p) for p in paths], con)
    out = []
    for rel in paths:
        full = base / rel
        size = full.stat().st_size
        out.append({"path": rel, "bytes": size, "rows": rows[str(full)], "fingerprint": file_fingerprint(full, size)})
    return out


def _footer_rows(paths: list[str], con: duckdb.DuckDBPyConnection | None) -> dict[str, int]:
    """Rows of each Parquet file, from its footer (no data is read)."""
    if not paths:
        return {}
    own = con is None
    con = con or duckdb.connect()
    try:
        # The paths go as a value (a list), never into SQL text: a name with [ or * is a name.
        return dict(con.execute("SELECT file_name, num_rows FROM parquet_file_metadata(?)", [paths]).fetchall())
    finally:
        if own:
            con.close()


def check_file_list(where: str, table: str, entry: dict) -> list[dict]:
    """``entry["files"]`` if it is a list of ``{path, bytes, rows, fingerprint}`` this analyzer reads.

    Raises:
        LakeError: no list (a lake of format 1: export it again), or an entry that is not one.
    """
    files = entry.get("files")
    if not isinstance(files, list):
        raise LakeError(f"lake {where}: relation {table} lists no files (exported by an older analyzer): "
                        "export it again (`analyze export --lake DIR`)")
    for f in files:
        ok = (isinstance(f, dict) and isinstance(f.get("path"), str) and FILE_PATH.fullmatch(f["path"])
              and all(isinstance(f.get(k), int) and not isinstance(f.get(k), bool) and f[k] >= 0
                      for k in ("bytes", "rows"))
              and isinstance(f.get("fingerprint"), str))
        if not ok:
            raise LakeError(f"lake {where}: relation {table} lists a file that is not a plain "
                            f"{{path, bytes, rows, fingerprint}}: {str(f)[:200]}")
    return files


def verify_relation(lake_dir: str | Path, table: str, entry: dict,
                    con: duckdb.DuckDBPyConnection | None = None) -> list[str]:
    """The files of ``table`` as its manifest entry lists them, each checked; their absolute paths.

    Checked: the relation's folder and every file are inside the lake (no link out);
    the Parquet files there are exactly those listed; each has the listed size,
    rows and fingerprint; the rows add up to the relation's.

    Raises:
        LakeError: the first difference, naming the relation and the file.
    """
    where = str(lake_dir)
    listed = check_file_list(where, table, entry)
    root = Path(lake_dir).expanduser().resolve()
    base = relation_folder(lake_dir, table)

    def bad(why: str) -> LakeError:
        return LakeError(f"lake {where}: relation {table}: {why}")

    if base.is_symlink() or not _inside(base.resolve(), root):
        raise bad(f"its folder {base} leads outside the lake; a lake's relations are folders in it")
    if not base.is_dir():
        raise bad("its folder is missing")
    partitioned = bool(entry.get("partition"))
    on_disk = set(files_on_disk(lake_dir, table, partitioned))
    by_path = {f["path"]: f for f in listed}
    extra = sorted(on_disk - set(by_path))
    if extra:
        raise bad(f"{extra[0]} is not in the manifest ({len(extra)} file(s) that were not exported: "
                  "the lake was changed after its export; export it again)")
    missing = sorted(set(by_path) - on_disk)
    if missing:
        raise bad(f"{missing[0]} is missing ({len(missing)} file(s) of the manifest)")
    paths = [str(base / p) for p in sorted(by_path)]
    for path in paths:
        if os.path.islink(path) or not _inside(Path(path).resolve(), root):
            raise bad(f"{Path(path).relative_to(base)} leads outside the lake")
    sizes = {}
    for rel, path in zip(sorted(by_path), paths):
        want = by_path[rel]
        sizes[path] = os.stat(path).st_size
        if sizes[path] != want["bytes"]:
            raise bad(f"{rel} is {sizes[path]} bytes, the manifest says {want['bytes']}")
    for rel, path in zip(sorted(by_path), paths):
        if file_fingerprint(path, sizes[path]) != by_path[rel]["fingerprint"]:
            raise bad(f"{rel} is not the file that was exported (its content differs)")
    try:
        rows = _footer_rows(paths, con)
    except duckdb.Error as exc:
        raise bad(f"a file cannot be read as Parquet: {first_line(exc)}") from exc
    for rel, path in zip(sorted(by_path), paths):
        if rows.get(path) != by_path[rel]["rows"]:
            raise bad(f"{rel} holds {rows.get(path)} rows, the manifest says {by_path[rel]['rows']}")
    total = sum(f["rows"] for f in listed)
    if entry.get("rows") != total:
        raise bad(f"its files hold {total} rows, the manifest says {entry.get('rows')}")
    return paths


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents
