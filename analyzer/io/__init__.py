"""Inputs: finding and reading what the user names, without writing to the database.

Log inputs: :mod:`.sources` (files, folders, globs, ``s3://``, stdin, each
file's form), :mod:`.objectstore` (the S3 mirror), :mod:`.linereader` and
:mod:`.input_readers` (numbered lines of JSONL, kubectl stdout, Parquet, gzip),
:mod:`.batch_lines`. Metric inputs: :mod:`.metric_formats` and
:mod:`.metric_samples` (the forms told apart, the Python parsers of CSV and text
scrapes, the kept names), :mod:`.prometheus` (range queries against a live
Prometheus).
"""
