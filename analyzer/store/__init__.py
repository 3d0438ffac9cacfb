"""The store: the DuckDB file and the catalog of questions it answers.

:mod:`.db` opens it; ``schema.sql`` makes a new one and :mod:`.migrations` brings
it up to date; :mod:`.record_sql` is the record struct and the SQL that parses and
judges a line; :mod:`.catalog` loads ``queries/`` (views, macros, questions);
:mod:`.asking` resolves, binds and runs a question by name; :mod:`.holdings` says
what the database holds.
"""
