"""The counter rules (resets, scrape gaps) are defined once and the throughput follows them.

``queries/counter_rules.sql`` holds the SQL form: ``counter_increase`` (a drop is
a reset: the new value is the increase) and ``counter_gap_s()`` (a hole longer
than the wedge window of the stored pod windows is unknown time). The wedge rule
of ``analyzer.classification.windows`` reads the same window; these tests pin that the
report's throughput question (``generation_throughput``) uses both, on a real
database.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from analyzer.store.holdings import DEFAULT_WEDGE_WINDOW_S, WEDGE_WINDOW_SETTING, stored_wedge_window
from analyzer.classification.windows import write_windows
from analyzer.store.asking import ask
from tests.support.metric_rows import insert_samples
from tests.support.fresh_db import fresh_connection

T0 = datetime(2026, 11, 20, 6, 0)
# (seconds after T0, counter value): 10 tokens/s, a restart at 180 s, a 400 s hole
# with 40,000 tokens across it, a 200 s hole with 2,000.
SAMPLES = [(0, 0.0), (60, 600.0), (120, 1200.0), (180, 100.0), (240, 700.0), (640, 40700.0), (700, 41300.0),
           (900, 43300.0)]


@pytest.fixture
def con(tmp_path):
    c = fresh_connection(tmp_path / "counters.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    # metric_samples is a view over series and points: samples go in through the store
    insert_samples(c, [("vllm:generation_tokens_total", "llm/glm-5-0", "glm-5", "10.0.0.5:8000", "vllm", "{}",
                        T0 + timedelta(seconds=s), v, "test") for s, v in SAMPLES])
    yield c
    c.close()


def _rate(con) -> float:
    rows = ask(con, "generation_throughput", {"since": T0, "until": T0 + timedelta(hours=1),
                                              "width": timedelta(hours=1)})
    assert [(pod, model) for pod, model, _b, _r in rows] == [("llm/glm-5-0", "glm-5")]
    return rows[0][3]


def test_the_gap_is_the_stored_wedge_window_with_the_same_default(con):
    assert stored_wedge_window(con) is None
    assert con.execute("SELECT counter_gap_s()").fetchall()[0][0] == DEFAULT_WEDGE_WINDOW_S
    write_windows(con, "7m")
    assert con.execute("SELECT value FROM settings WHERE name = ?", [WEDGE_WINDOW_SETTING]).fetchall()
    assert con.execute("SELECT counter_gap_s()").fetchall()[0][0] == 420.0 == stored_wedge_window(con)


def test_a_reset_counts_its_new_value_and_a_gap_longer_than_the_window_is_left_out(con):
    # Default window (5 min): the 400 s hole is a gap, the 200 s one is not; the
    # restart adds 100 tokens, never a negative rate.
    assert _rate(con) == pytest.approx((600 + 600 + 100 + 600 + 600 + 2000) / (5 * 60 + 200))
    # Windows computed with a 7-minute wedge window: the 400 s hole is continuous
    # observation for the wedge rule, so the throughput counts it too.
    write_windows(con, "7m")
    assert _rate(con) == pytest.approx((600 + 600 + 100 + 600 + 40000 + 600 + 2000) / 900)


def test_counter_increase_macro(con):
    got = con.execute("SELECT counter_increase(10.0, 25.0), counter_increase(25.0, 5.0), "
                      "counter_increase(7.0, 7.0), counter_increase(NULL, 3.0)").fetchall()[0]
    assert got == (15.0, 5.0, 0.0, None)
