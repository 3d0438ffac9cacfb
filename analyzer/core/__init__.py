"""The core: what every layer needs and nothing that knows about logs.

Errors and exit codes (:mod:`.errors`), times in and out (:mod:`.isotime`,
:mod:`.durations`), the one credential scrubber (:mod:`.scrub`), text safe for a
terminal (:mod:`.safetext`), the focus models (:mod:`.focus`), URLs
(:mod:`.urls`), where the SQL and templates live (:mod:`.paths`), Ctrl-C
(:mod:`.interrupt`). Imports only :mod:`analyzer.online` and the standard library.
"""
