"""The command layer: one module per ``analyze`` command, holding its glue.

Each module opens the database, calls the library (which returns data and
raises errors in its own terms) and prints the result through
:mod:`analyzer.terminal` (or as JSON). :mod:`analyzer.cli` parses the options
and calls these; nothing else lives here.

- :mod:`.run`: ``analyze FILES...`` / ``analyze run`` (the main job, the stored summary, ``--fail-on``)
- :mod:`.sql`: ``analyze sql``
- :mod:`.export`: ``analyze export``
- :mod:`.sync`: ``analyze sync``
- :mod:`.report`: ``analyze report``
- :mod:`.replay`: ``analyze replay``
- :mod:`.forget`: ``analyze forget``
- :mod:`.options`: what they share (library errors worded with the option names, the database path)
"""
