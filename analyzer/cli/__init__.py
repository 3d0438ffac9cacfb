"""The command line: typer, one module per ``analyze`` command, printing, exit codes.

:mod:`.app` is the typer app (``analyze``, the console script): it parses the
options and calls the command's module, nothing more. Each command module opens
the database, calls the layers below (which return data and raise errors in
their own terms) and prints the result through :mod:`.terminal` (or as JSON).
:mod:`.exits` turns every way out into one line on stderr and a documented exit
code.

- :mod:`.run`: ``analyze FILES...`` / ``analyze run`` (the main job, the stored summary, ``--fail-on``)
- :mod:`.sql`: ``analyze sql``
- :mod:`.export`: ``analyze export``
- :mod:`.sync`: ``analyze sync``
- :mod:`.report`: ``analyze report``
- :mod:`.replay`: ``analyze replay``
- :mod:`.forget`: ``analyze forget``
- :mod:`.alerts`: ``analyze alerts``
- :mod:`.options`: what they share (library errors worded with the option names, the database path)
- :mod:`.metrics_progress`: the progress bar of a metrics load
"""
