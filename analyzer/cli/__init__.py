"""The command line: typer, the printers, exit codes.

:mod:`.app` is the typer app (``analyze``, the console script): each command
builds its job's options object, calls the job (:mod:`analyzer.jobs`: one per
use case) and hands the result to its printer in :mod:`.terminal` (or prints it
as JSON), nothing more. :mod:`.options` words the library's errors with the
command's option names; :mod:`.exits` turns every way out into one line on
stderr and a documented exit code.

- ``analyze FILES...`` / ``analyze run``: :mod:`analyzer.jobs.main_job`, printed by :mod:`.terminal.summary`
- ``analyze sql``: :mod:`analyzer.jobs.sql` (writes its rows itself: table, CSV or JSON)
- ``analyze export``: :mod:`analyzer.jobs.export`, ``analyze forget``: :mod:`analyzer.jobs.forget`,
  ``analyze alerts``: :mod:`analyzer.jobs.alerts`, printed by :mod:`.terminal.reports`
- ``analyze report``: :mod:`analyzer.jobs.report` (prints the page's path)
- ``analyze replay``: :mod:`analyzer.jobs.replay`, printed by :mod:`.terminal.replay`
- ``analyze sync``: :func:`analyzer.io.objectstore.sync`
"""
