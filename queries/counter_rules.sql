-- macro: counter_rules
-- title: How a Prometheus counter's samples are read: resets and gaps, defined once
-- The rules analyzer.classification.windows applies to the generation counter (see its
-- docstring), for the SQL that reads counters (the report's throughput, the
-- corroboration of a wedged window):
-- counter_increase(previous, value): the counter's increase from the sample before
-- (NULL for a series' first sample). A value below the one before is a reset (the
-- process restarted and counted again from 0), so the increase is the new value,
-- never a negative throughput.
-- counter_gap_s(): a hole between two samples longer than this many seconds is a
-- scrape gap, unknown time: no rate is drawn across it. It is the wedge window of
-- the stored pod windows (settings `pod_windows.wedge_window_s`, set by
-- `--wedge-window`, 5 minutes by default), the same hole the wedge rule treats as
-- unknown.
CREATE OR REPLACE MACRO counter_increase(previous, value) AS
    CASE WHEN value < previous THEN value ELSE value - previous END;
CREATE OR REPLACE MACRO counter_gap_s() AS
    coalesce((SELECT max(CAST(value AS DOUBLE)) FROM settings WHERE name = 'pod_windows.wedge_window_s'), 300.0);
