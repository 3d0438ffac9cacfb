-- macro: pod_alert_onset
-- title: When the live alert would have fired for a wedged or down window, defined once
-- The alerts `analyze alerts` writes (VLLMPodWedged, VLLMPodDown; docs/alerts.md)
-- hold `for:` the wedge window of the stored pod windows (counter_gap_s(), the
-- setting `pod_windows.wedge_window_s`, 5 minutes by default) from the window's
-- start, so they fire at the start plus the wedge window (plus up to one scrape
-- and one evaluation interval), and only for a window at least that long.
-- alert_fires_at(start_ts, end_ts): that time, or NULL when the window ended first
-- (too short to page). The onset lag is alert_fires_at - start_ts.
CREATE OR REPLACE MACRO alert_fires_at(start_ts, end_ts) AS
    CASE WHEN end_ts >= start_ts + to_microseconds(CAST(round(counter_gap_s() * 1e6) AS BIGINT))
         THEN start_ts + to_microseconds(CAST(round(counter_gap_s() * 1e6) AS BIGINT)) END;
