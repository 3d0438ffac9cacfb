-- view: metric_samples
-- title: Every stored metric sample with its series' labels
-- One row per sample: the series (table metric_series: the normalized metric, the
-- pod identity `namespace/pod`, model_name, instance, job and the canonical JSON
-- `labels`, stored once per series) joined to its points (table metric_points:
-- series_id, ts, value, source_id) and the source it was loaded from (table
-- metric_sources). A query over many samples runs faster on metric_points
-- grouped by series_id.
SELECT s.metric, s.pod, s.model_name, s.instance, s.job, s.labels, p.ts, p.value, f.source
FROM metric_points p
JOIN metric_series s ON s.series_id = p.series_id
LEFT JOIN metric_sources f ON f.source_id = p.source_id
