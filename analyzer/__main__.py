"""``python -m analyzer``: the ``analyze`` command (:func:`analyzer.cli.app.main`)."""

from analyzer.cli.app import main

main()
