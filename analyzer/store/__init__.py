"""The store: the DuckDB file and the catalog of questions it answers.

:mod:`.db` opens it and runs the append-only migrations; :mod:`.record_sql` is the
record struct and the SQL that parses and judges a line; :mod:`.catalog` loads
``queries/`` (views, macros, questions); :mod:`.asking` resolves, binds and runs
a question by name; :mod:`.holdings` says what the database holds.
"""
