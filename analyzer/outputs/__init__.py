"""Outputs: what people read, built from questions.

The summary (:mod:`.summary`, with :mod:`.sizing` and :mod:`.oncall`, and
:mod:`.summary_cache`), the weekly HTML report (:mod:`.report`), rows as a
table, CSV or JSON (:mod:`.rows`), a Parquet lake (:mod:`.lake`), and the wedge rule
as Prometheus alerting rules (:mod:`.alerts`).
"""
