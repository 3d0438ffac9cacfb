"""Inputs: finding and reading what the user names, without writing to the database.

Log inputs: :mod:`.sources` (files, folders, globs, ``s3://``, stdin, each
file's form), :mod:`.objectstore` (the S3 mirror), :mod:`.linereader` and
:mod:`.input_readers` (numbered lines of JSONL, kubectl stdout, Parquet, gzip),
:mod:`.batch_lines`. Metric inputs: :mod:`.metric_formats` and
:mod:`.metric_samples` (every form's parser), :mod:`.prometheus` (range queries
against a live Prometheus).
"""
