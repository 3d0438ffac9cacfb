"""A lake that proves itself, and an export that cannot be fooled either.

A lake written by the real `analyze export --lake` is changed as a careless user
or a second job would change it (a Parquet file copied into a day folder, a
sessions file copied over a turns file, a relation left out of the manifest, a
column cut, a relation folder linked outside the lake, a row count edited), and
every reader (`analyze sql --lake` on DuckDB and on Spark, `analyze report
--lake`, `open_lake`) refuses it with one line naming the relation, exit 2.
Exports are killed with a real SIGKILL and run two at a time: the lake stays whole,
what a killed export left goes, a second export is refused while the first runs.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.core.errors import ExitCode
from analyzer.store.lake import MANIFEST, check_lake, open_lake
from analyzer.store.lake_files import LakeError
from tests.support.week import build_week_db
from tests.support.services import need_spark
from tests.support.cli import analyze


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("proof")
    db = build_week_db(tmp / "week.duckdb")
    p = analyze("export", "--lake", str(tmp / "lake"), "--db", str(db))
    assert p.returncode == 0, p.stderr
    return db, tmp / "lake"


@pytest.fixture
def lake(exported, tmp_path) -> Path:
    """A fresh copy of the exported lake, to change."""
    return Path(shutil.copytree(exported[1], tmp_path / "lake"))


def _exported_copy(exported, out: Path) -> Path:
    """A lake as a finished export of the week left it, at ``out``: a copy of the module's (exporting
    again would write the same files; the export itself is checked by ``exported``)."""
    return Path(shutil.copytree(exported[1], out))


def _day_file(lake: Path, table: str) -> Path:
    return sorted((lake / table).glob("day=*/*.parquet"))[0]


def _all_readers_refuse(lake: Path, *words: str) -> None:
    """`sql --lake` (DuckDB and Spark, the latter before a JVM starts) and `report --lake` say the same."""
    for args in (("sql", "SELECT count(*) FROM turns", "--lake", str(lake)),
                 ("sql", "SELECT count(*) FROM turns", "--engine", "spark", "--lake", str(lake)),
                 ("report", "--lake", str(lake), "-o", str(lake.parent / "r.html"))):
        p = analyze(*args)
        assert p.returncode == ExitCode.USAGE, (args, p.stdout, p.stderr)
        line = p.stderr.strip()
        assert len(line.splitlines()) == 1 and line.startswith("analyze: error: --lake"), line
        assert all(w in line for w in words), (words, line)
        assert "unexpected" not in line and "Catalog" not in line
    assert not (lake.parent / "r.html").exists()
    with pytest.raises(LakeError):
        open_lake(lake)


def test_an_untouched_lake_is_read_and_its_files_listed(exported):
    db, lake = exported
    doc = check_lake(lake)
    assert sum(f["rows"] for f in doc["tables"]["turns"]["files"]) == doc["tables"]["turns"]["rows"] > 0
    p = analyze("sql", "SELECT count(*) AS n FROM turns", "--lake", str(lake), "--format", "csv")
    q = analyze("sql", "SELECT count(*) AS n FROM turns", "--db", str(db), "--format", "csv")
    assert p.returncode == 0 and p.stdout == q.stdout, p.stderr


def test_an_extra_file_in_a_day_folder_is_refused(lake):
    extra = _day_file(lake, "turns")
    shutil.copy(extra, extra.with_name("copied-by-hand.parquet"))
    _all_readers_refuse(lake, "relation turns", "copied-by-hand.parquet", "not in the manifest")


def test_a_sessions_file_copied_over_a_turns_file_is_refused(lake):
    shutil.copy(_day_file(lake, "sessions"), _day_file(lake, "turns"))
    _all_readers_refuse(lake, "relation turns", "the manifest says")


def test_a_file_rewritten_with_the_same_size_is_refused(lake):
    target = _day_file(lake, "records")
    data = bytearray(target.read_bytes())
    data[64] ^= 0xFF  # in the first data page: the same size, the same footer and rows, another content
    target.write_bytes(bytes(data))
    _all_readers_refuse(lake, "relation records", "not the file that was exported")


def test_an_edited_row_count_is_refused(lake):
    doc = json.loads((lake / MANIFEST).read_text())
    doc["tables"]["turns"]["rows"] += 1
    (lake / MANIFEST).write_text(json.dumps(doc))
    _all_readers_refuse(lake, "relation turns", "the manifest says")


def test_a_missing_file_is_refused(lake):
    _day_file(lake, "records").unlink()
    _all_readers_refuse(lake, "relation records", "is missing")


def test_a_manifest_missing_a_relation_is_a_lake_error(lake):
    doc = json.loads((lake / MANIFEST).read_text())
    del doc["tables"]["records"]
    (lake / MANIFEST).write_text(json.dumps(doc))
    _all_readers_refuse(lake, "lacks relation records")


def test_a_manifest_with_cut_columns_is_a_lake_error(lake):
    doc = json.loads((lake / MANIFEST).read_text())
    doc["tables"]["turns"]["columns"] = doc["tables"]["turns"]["columns"][:5]
    (lake / MANIFEST).write_text(json.dumps(doc))
    _all_readers_refuse(lake, "relation turns lacks column")


def test_a_lake_of_the_older_format_says_export_again(lake):
    doc = json.loads((lake / MANIFEST).read_text())
    doc["format_version"] = 1
    for entry in doc["tables"].values():
        entry.pop("files")
    (lake / MANIFEST).write_text(json.dumps(doc))
    _all_readers_refuse(lake, "export it again")


def test_a_relation_folder_linked_outside_the_lake_is_refused(lake, tmp_path):
    outside = tmp_path / "elsewhere"
    shutil.move(lake / "pod_windows", outside)
    (lake / "pod_windows").symlink_to(outside, target_is_directory=True)
    _all_readers_refuse(lake, "relation pod_windows", "outside the lake")


def test_a_file_linked_outside_the_lake_is_refused(lake, tmp_path):
    target = _day_file(lake, "turns")
    outside = tmp_path / "outside.parquet"
    shutil.move(target, outside)
    target.symlink_to(outside)
    _all_readers_refuse(lake, "relation turns", "outside the lake")


# ---------------------------------------------------------------------------
# The export: staged inside the lake, one at a time, cleaned after a kill

_KILLED_EXPORT = """
import os, signal, sys
import analyzer.outputs.lake as lake
from analyzer.store.db import connect

written = []
original = lake._write_table

def write_then_die(con, table, staging, compression):
    out = original(con, table, staging, compression)
    written.append(table)
    if len(written) == 3:  # half-way: some relations staged, none swapped in
        print(staging, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return out

lake._write_table = write_then_die
con = connect(sys.argv[1], read_only=True)
lake.export_lake(con, sys.argv[2])
"""


def test_a_killed_export_leaves_the_lake_whole_and_the_next_one_clears_its_staging(exported, tmp_path):
    db, _ = exported
    out = _exported_copy(exported, tmp_path / "lake")
    before = json.loads((out / MANIFEST).read_text())
    p = subprocess.run([sys.executable, "-c", _KILLED_EXPORT, str(db), str(out)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr
    staging = Path(p.stdout.strip())
    assert staging.parent == out and staging.name.startswith(".staging-") and staging.is_dir()  # inside the lake
    assert not [e for e in tmp_path.iterdir() if e.name.startswith(".")]  # nothing beside it
    assert json.loads((out / MANIFEST).read_text()) == before
    check_lake(out)  # the lake is as the last finished export left it
    again = analyze("export", "--lake", str(out), "--db", str(db))
    assert again.returncode == 0, again.stderr
    assert not staging.exists() and sorted(e.name for e in out.iterdir() if e.name.startswith(".")) == [".export.lock"]
    check_lake(out)


def test_an_older_analyzers_leftovers_beside_the_lake_are_removed(exported, tmp_path):
    db, _ = exported
    out = tmp_path / "lake"
    left = tmp_path / ".lake.staging-0123abcd"
    (left / "records").mkdir(parents=True)
    (left / "records" / "data_0.parquet").write_bytes(b"raw lines of a killed export")
    other = tmp_path / ".lakes.staging-0123abcd"  # another lake's: kept
    other.mkdir()
    assert analyze("export", "--lake", str(out), "--db", str(db)).returncode == 0
    assert not left.exists() and other.exists()


_HOLDS_THE_LOCK = """
import sys
from pathlib import Path
from analyzer.outputs.lake import export_lock

with export_lock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_a_second_export_is_refused_while_one_runs(exported, tmp_path):
    db, _ = exported
    out = _exported_copy(exported, tmp_path / "lake")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_LOCK, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = analyze("export", "--lake", str(out), "--db", str(db))
        assert p.returncode == ExitCode.CANNOT_WRITE, p.stderr
        assert p.stderr.strip() == (f"analyze: error: --lake {out.resolve()}: another export is writing this lake "
                                    f"(process {holder.pid}); wait for it to end, then export again")
        check_lake(out)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert analyze("export", "--lake", str(out), "--db", str(db)).returncode == 0


def test_an_export_refused_while_a_first_lake_is_swapped_in_says_so(exported, tmp_path):
    """A first export swaps its relations in and writes the manifest last: meanwhile the folder holds
    relations and no manifest. A second export then is refused as the lock refuses it (exit 9), not as
    a folder of something else (exit 2): the race two exports at once met."""
    db, _ = exported
    out = tmp_path / "lake"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_LOCK, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        (out / "records").mkdir()  # swapped in; no manifest yet
        p = analyze("export", "--lake", str(out), "--db", str(db))
        assert p.returncode == ExitCode.CANNOT_WRITE, p.stderr
        assert p.stderr.strip() == (f"analyze: error: --lake {out.resolve()}: another export is writing this lake "
                                    f"(process {holder.pid}); wait for it to end, then export again")
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    (out / "records").rmdir()  # the holder ended without its manifest: what it left is the next export's to judge
    assert analyze("export", "--lake", str(out), "--db", str(db)).returncode == 0
    check_lake(out)


def test_a_killed_holder_releases_the_lock(exported, tmp_path):
    """flock is released by the kernel: a lock is never stale after kill -9."""
    db, _ = exported
    out = tmp_path / "lake"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDS_THE_LOCK, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=60)
    holder.stdin.close()
    started = time.monotonic()
    p = analyze("export", "--lake", str(out), "--db", str(db))
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - started < 120
    check_lake(out)


def test_two_exports_at_once_leave_one_readable_lake(exported, tmp_path):
    """The race of issue 47: both started together; one wins the lock, the other is refused, the lake reads."""
    db, _ = exported
    out = tmp_path / "lake"
    procs = [subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", "export", "--lake", str(out), "--db", str(db)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=300) for p in procs)
    assert codes[0] == 0 and codes[1] in (0, ExitCode.CANNOT_WRITE), codes
    check_lake(out)
    assert analyze("sql", "SELECT count(*) FROM turns", "--lake", str(out)).returncode == 0


# ---------------------------------------------------------------------------
# A lake at a URL on Spark: the files Spark lists and the rows it counts


@pytest.mark.spark
def test_spark_checks_a_lake_at_a_url(lake):
    need_spark()
    from analyzer.questions.spark import local_session, register_lake

    url = lake.resolve().as_uri()  # file:///...: read through Spark's filesystem, as s3a:// would be
    spark = local_session("analyzer-lake-proof")
    try:
        made = register_lake(spark, url, needs=["turns"])
        assert made["turns"] == "table"
        extra = _day_file(lake, "turns")
        shutil.copy(extra, extra.with_name("copied-by-hand.parquet"))
        with pytest.raises(LakeError, match="relation turns: .*copied-by-hand.parquet is not in the manifest"):
            register_lake(spark.newSession(), url, needs=["turns"])
    finally:
        spark.stop()
