"""``python -m analyzer``: the ``analyze`` command (:mod:`analyzer.launch`)."""

from .launch import main

main()
