"""``python -m analyzer``: the ``analyze`` command (:func:`analyzer.cli.main`)."""

from .cli import main

main()
