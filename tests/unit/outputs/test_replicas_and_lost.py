"""What the summary and the report say about the inputs and the proxy itself.

Skipped files, the records the proxy says it lost, slow-completion warnings and
turns per proxy replica, through the real command line (``python -m
analyzer.cli.app``, text and ``--json``) and the report build, on hand-built records
in the forms production writes (multi-pod ``kubectl logs --prefix --timestamps``,
S3 chunks named after their pod). Log text with control characters and markup
never reaches the terminal or the page raw.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from analyzer.ingestion.logs import ingest
from analyzer.api import report as make_report
from analyzer.classification.turns import refresh_turns
from tests.support.records import NAKED_500, at, request, response_error, response_ok, stamp, stdout_line, write_jsonl
from tests.support.cli import analyze as cli
from tests.support.fresh_db import fresh_connection, fresh_db

POD_A = "llm-proxy-7d4b9c6f-abcde"
POD_B = "llm-proxy-7d4b9c6f-fghij"
POD_C = "llm-proxy-7d4b9c6f-klmno"  # named only by its S3 chunk
SLOW_RID = "a0000001"


def _turn(rid: str, minute: float, session: str, *, fail: bool = False) -> list[dict]:
    resp = (response_error(rid, at(minute + 0.1), NAKED_500, session=session) if fail
            else response_ok(rid, at(minute + 0.1), content="answer", session=session))
    return [request(rid, at(minute), session=session), resp]


def _prefixed(pod: str, text: str, when=None) -> str:
    """A line as `kubectl logs -l app=... --prefix [--timestamps]` prints it."""
    return f"[pod/{pod}/proxy] " + (f"{stamp(when)} " if when is not None else "") + text


def _slow(rid: str, ms: int = 312000) -> str:
    return (f"⚠️  Slow completion: {ms}ms exceeds the 300s client-side warning threshold "
            f"(model=glm-5, request_id={rid}) — the caller may already have given up on this turn")


def build_logs(root: Path) -> Path:
    """Three replicas (two on stdout, one in an S3 chunk), lost-record lines, a slow warning, a bad file.

    POD_A: 4 turns, 1 failed, the slow warning, an imbalance of 12 and (the day
    before) a buffer drop of 5. POD_B: 2 turns, a buffer drop of 37, a flush that
    re-queued (lost 0) and one untimed `log_response failed` (lost 1). POD_C: 2
    failed turns, from the chunk's name.
    """
    logs = root / "logs"
    logs.mkdir(parents=True)
    lines = [_prefixed(POD_A, "INFO:     Uvicorn running on http://0.0.0.0:8000"),
             _prefixed(POD_A, "⚠️  Log buffer exceeded 10000 entries during outage; dropped 5 oldest", at(-24 * 60))]
    for i in range(4):
        rid = f"{0xa0000000 + i:08x}"
        req, resp = _turn(rid, i * 5, "s-a", fail=(i == 2))
        lines.append(_prefixed(POD_A, stdout_line(req), at(i * 5)))
        if rid == SLOW_RID:  # the proxy prints the warning just before it logs the response
            lines.append(_prefixed(POD_A, _slow(rid), at(i * 5 + 0.1)))
        lines.append(_prefixed(POD_A, stdout_line(resp), at(i * 5 + 0.1)))
    lines.append(_prefixed(POD_A, "🚨 Logging imbalance: 40 responses for 52 requests (ratio 0.77 < 0.9) in the "
                                  "last 60s — one side of the logging pipeline may have stopped writing.", at(30)))
    for i in range(2):
        req, resp = _turn(f"{0xb0000000 + i:08x}", 40 + i, "s-b")
        lines += [_prefixed(POD_B, stdout_line(req), at(40 + i)), _prefixed(POD_B, stdout_line(resp), at(40.1 + i))]
    lines += [
        _prefixed(POD_B, "⚠️  Log buffer exceeded 10000 entries during outage; dropped 37 oldest", at(50)),
        _prefixed(POD_B, "⚠️  S3 flush failed: timeout — 120 entries re-queued for retry", at(50)),
        _prefixed(POD_B, "⚠️  log_response failed (request still served): TypeError: bad client"),
    ]
    (logs / "pods.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_jsonl(logs / "2026-11-16" / f"15-00-00-{POD_C}-7-0a1b2c3d.jsonl",
                _turn("c0000001", 60, "s-c", fail=True) + _turn("c0000002", 61, "s-c", fail=True))
    (logs / "notes.txt").write_text("remember to rotate the logs\n", encoding="utf-8")
    return logs


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("replicas")
    return build_logs(root), fresh_db(root / "a.duckdb")  # an empty database, copied (tests/support/fresh_db.py)


def test_the_json_summary_says_what_was_skipped_lost_flagged_and_per_replica(week):
    logs, db = week
    p = cli(str(logs), "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert [(Path(s["path"]).name, "not a proxy log" in s["reason"]) for s in doc["ingest"]["skipped_files"]] == [
        ("notes.txt", True)]
    assert doc["skipped_files"]["kept"] == 1 and Path(doc["skipped_files"]["latest"][0]["path"]).name == "notes.txt"
    # The period is open: every line counts, the one without a time too (and the summary says so).
    lost = doc["lost_records"]
    assert {k["kind"]: (k["events"], k["lost"]) for k in lost["by_kind"]} == {
        "buffer-dropped": (2, 42), "logging-imbalance": (1, 12), "log-response-failed": (1, 1), "flush-failed": (1, 0)}
    assert lost["total"] == 55 and lost["untimed_events"] == 1 and lost["untimed_counted"] is True
    assert "carry no time (kubectl logs read without --timestamps)" in lost["note"]
    assert "a summary of everything counts them" in lost["note"]
    slow = doc["slow_completions"]
    assert (slow["warnings"], slow["turns_flagged"]) == (1, 1)
    assert slow["by_model"] == [{"model": "glm-5", "warnings": 1, "turns_flagged": 1, "failed_flagged": 0,
                                 "max_ms": 312000}]
    assert "not a failure" in slow["note"]
    replicas = {r["proxy_pod"]: (r["turns"], r["failed"], r["failure_rate"], r["slow_warnings"], r["lost_records"])
                for r in doc["replicas"]}
    assert replicas == {POD_A: (4, 1, 0.25, 1, 17), POD_B: (2, 0, 0.0, 0, 38), POD_C: (2, 2, 1.0, 0, 0)}
    # A slow warning is a flag, not a class: the slow turn is still `ok`.
    assert doc["classes"]["ok"]["count"] == 5


def test_a_bounded_period_counts_only_the_lines_it_can_place(week):
    logs, db = week
    p = cli(str(logs), "--db", str(db), "--json", "--since", "2026-11-16", "--until", "2026-11-17")
    assert p.returncode == 0, p.stderr
    lost = json.loads(p.stdout)["lost_records"]
    # the drop of 5 the day before and the untimed log_response line are out
    assert lost["total"] == 37 + 12 and lost["untimed_counted"] is False
    assert "this bounded period cannot place them, so they are not counted" in lost["note"]
    doc = json.loads(cli(str(logs), "--db", str(db), "--json", "--since", "2026-11-16T14:06").stdout)
    assert doc["slow_completions"]["warnings"] == 0  # the warning came at 14:05:06
    assert {r["proxy_pod"]: r["turns"] for r in doc["replicas"]} == {POD_A: 2, POD_B: 2, POD_C: 2}


def test_the_text_summary_lists_skipped_files_lost_records_and_replicas(week):
    logs, db = week
    p = cli(str(logs), "--db", str(db))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert re.search(r"skipped 1 file\(s\).*\n\s+\S*notes\.txt: not a proxy log", out)
    assert "the database keeps 1 skipped file(s) in skipped_files" in out
    assert "the proxy says it lost 55 record(s) in this period" in out
    kinds = re.findall(r"^  ([a-z-]+): (\d+) lost in (\d+) line\(s\)", out, re.M)
    assert kinds == [("buffer-dropped", "42", "2"), ("logging-imbalance", "12", "1"),
                     ("log-response-failed", "1", "1"), ("flush-failed", "0", "1")]
    assert "1 slow-completion warning(s) (glm-5 1), flagging 1 turn(s)" in out and "not a failure" in out
    rows = {m.group(1): m.group(2).split() for m in re.finditer(r"│ (llm-proxy-\S+)\s+│(.*)│", out)}
    assert [c for c in rows[POD_A] if c != "│"] == ["4", "1", "25.0%", "1", "17"]
    assert [c for c in rows[POD_C] if c != "│"] == ["2", "2", "100.0%", "0", "0"]


class _Tables(HTMLParser):
    """The cells of every table of a page with an id, row by row."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.captions: dict[str, str] = {}
        self._table = self._cell = None
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
            self.captions[self._table] = ""
        elif self._table and tag == "tr":
            self.tables[self._table].append([])
        elif self._table and tag in ("td", "th"):
            self._cell = []
        elif self._table and tag == "caption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "caption":
            self._in_caption = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        elif self._in_caption and self._table:
            self.captions[self._table] += data


def _tables(html: str) -> _Tables:
    t = _Tables()
    t.feed(html)
    return t


def test_the_report_section_renders_the_same_numbers(week, tmp_path):
    logs, db = week
    assert cli(str(logs), "--db", str(db), "--json").returncode == 0
    page = make_report(db, since="2026-11-16", until="2026-11-17", output=tmp_path / "r.html",
                       plotly="cdn").read_text(encoding="utf-8")
    t = _tables(page)
    turns = {r[0]: r[1:] for r in t.tables["replicas-turns"][1:]}
    assert set(turns) == {POD_A, POD_B, POD_C}
    assert turns[POD_A][:3] == ["4", "1", turns[POD_A][2]] and turns[POD_A][2].startswith("25.0% [")
    assert turns[POD_A][3:] == ["1", "12"]  # the drop of 5 the day before is outside the period
    assert turns[POD_C][:2] == ["2", "2"] and turns[POD_C][2].startswith("100.0%")
    lost = {r[0]: (r[2], r[3]) for r in t.tables["replicas-lost"][1:]}
    assert lost == {"buffer-dropped": ("1", "37"), "logging-imbalance": ("1", "12"), "flush-failed": ("1", "0")}
    caption = " ".join(t.captions["replicas-lost"].split())
    assert "49 in this period" in caption and "1 more such line(s) carry no time" in caption
    assert t.tables["replicas-slow"][1:] == [["glm-5", "1", "1", "0", "312,000"]]


def test_without_replicas_or_proxy_lines_the_section_says_so(tmp_path):
    db = fresh_db(tmp_path / "plain.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    chunk = write_jsonl(tmp_path / "logs" / "2026-11-16" / "14-00-00-12345.jsonl", _turn("d0000001", 0, "s-1"))
    p = cli(str(chunk), "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["replicas"] == [] and doc["lost_records"]["total"] == 0 and doc["slow_completions"]["warnings"] == 0
    text = cli(str(chunk), "--db", str(db)).stdout
    assert "Per proxy replica" not in text and "the proxy says it lost" not in text
    assert "slow-completion warning" not in text and "could not be read as logs" not in text
    page = make_report(db, since="2026-11-16", until="2026-11-17", output=tmp_path / "r.html",
                       plotly="cdn").read_text(encoding="utf-8")
    t = _tables(page)
    assert "says which replica served it" in t.tables["replicas-turns"][1][0]
    assert "no line in this period says records were lost" in t.tables["replicas-lost"][1][0]
    assert "no slow-completion warnings" in t.tables["replicas-slow"][1][0]


# -- hostile names -------------------------------------------------------------

EVIL_POD = "evil\x1b[2J\x07<b>bold<\x9b31m"  # no "/", "]" or space: a pod prefix holds none
EVIL_FILE = "[blink]x\x1b[2J\x9b.txt"
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # tab and newline are layout


def test_hostile_pod_names_and_paths_never_reach_the_output_raw(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = []
    for i in range(2):
        req, resp = _turn(f"{0xe0000000 + i:08x}", i, "s-e", fail=(i == 1))
        lines += [_prefixed(EVIL_POD, stdout_line(req), at(i)), _prefixed(EVIL_POD, stdout_line(resp), at(i + 0.1))]
    lines.append(_prefixed(EVIL_POD, "⚠️  Log buffer exceeded 10000 entries during outage; dropped 3 oldest", at(5)))
    (logs / "pods.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (logs / EVIL_FILE).write_text("not a log\n", encoding="utf-8")
    db = fresh_db(tmp_path / "a.duckdb")  # an empty database, copied (tests/support/fresh_db.py)

    p = cli(str(logs), "--db", str(db))
    assert p.returncode == 0, p.stderr
    for stream in (p.stdout, p.stderr):
        assert not RAW_CONTROLS.search(stream), repr(stream)
    assert "evil\\x1b[2J\\x07<b>bold<\\x9b31m" in p.stdout  # shown, escaped: the name stays legible
    assert "[blink]x\\x1b[2J\\x9b.txt" in p.stdout and "[blink]x\\x1b[2J\\x9b.txt" in p.stderr  # not read as markup

    doc = json.loads(cli(str(logs), "--db", str(db), "--json").stdout)  # JSON escapes by itself
    assert [r["proxy_pod"] for r in doc["replicas"]] == [EVIL_POD]
    assert doc["lost_records"]["total"] == 3

    r = cli("report", "--db", str(db), "--since", "2026-11-16", "--until", "2026-11-17",
            "-o", str(tmp_path / "r.html"), "--plotly-cdn")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert not RAW_CONTROLS.search(page)
    assert "<b>bold" not in page
    cells = _tables(page).tables["replicas-turns"][1]
    assert cells[0] == "evil\\x1b[2J\\x07<b>bold<\\x9b31m" and cells[1:3] == ["2", "1"]


# -- the slow_turns view ----------------------------------------------------------

def test_a_slow_warning_flags_the_one_turn_it_names_when_ids_collide(tmp_path):
    """Two sessions share an 8-hex id: the stamped warning flags the turn whose time fits;
    an unstamped one flags the turn written just above it in the same file."""
    rid = "abad1dea"
    early = _turn(rid, 0, "s-one")
    late = _turn(rid, 120, "s-two")
    stamped = tmp_path / "stamped.log"
    stamped.write_text("\n".join([
        _prefixed(POD_A, stdout_line(early[0]), at(0)), _prefixed(POD_A, stdout_line(early[1]), at(0.1)),
        _prefixed(POD_A, stdout_line(late[0]), at(120)),
        _prefixed(POD_A, _slow(rid, 400000), at(120.1)), _prefixed(POD_A, stdout_line(late[1]), at(120.1)),
    ]) + "\n", encoding="utf-8")
    con = fresh_connection(tmp_path / "a.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    try:
        ingest(con, [str(stamped)])
        refresh_turns(con)
        rows = con.execute("SELECT session_id, slow_warning, slow_ms FROM slow_turns ORDER BY ts").fetchall()
        assert rows == [("s-one", False, None), ("s-two", True, 400000)]
        # Read twice (a stdout log that grew): still one warning on one turn.
        with stamped.open("a", encoding="utf-8") as f:
            f.write(_prefixed(POD_A, "INFO:     10.0.0.7:42250 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK") + "\n")
        ingest(con, [str(stamped)])
        refresh_turns(con)
        assert con.execute("SELECT sum(slow_warnings), count(*) FILTER (WHERE slow_warning) FROM slow_turns"
                           ).fetchall() == [(1, 1)]

        other = _turn("0badcafe", 200, "s-three") + _turn("0badcafe", 300, "s-four")
        plain = tmp_path / "plain.log"  # single-pod stdout without --timestamps
        plain.write_text("\n".join([stdout_line(other[0]), stdout_line(other[1]),
                                    stdout_line(other[2]), _slow("0badcafe"), stdout_line(other[3]),
                                    ]) + "\n", encoding="utf-8")
        ingest(con, [str(plain)])
        refresh_turns(con)
        rows = con.execute("SELECT session_id, slow_warning FROM slow_turns WHERE request_id = '0badcafe' "
                           "ORDER BY ts").fetchall()
        assert rows == [("s-three", False), ("s-four", True)]
    finally:
        con.close()
