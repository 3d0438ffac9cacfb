"""Loading a command's modules while the cyclic garbage collector waits.

Importing the library makes some 100,000 objects (functions, classes, DuckDB's
relation API) that live until the process ends. Left on, the collector walks
them again and again as they load, and once more in full amid the first work:
some 60 ms of the half second a re-run that finds nothing new may take
(``analyze s3/ --db X`` again). :func:`modules_loading` pauses it while the
modules load and freezes what they made, so later collections walk only the
objects the work itself makes. Garbage is still collected as before, except that
what existed at the freeze (the modules, and what a notebook held then) is never
walked again: a cycle among those objects is not collected.
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def modules_loading() -> Iterator[None]:
    """Import inside this block: no cyclic collection meanwhile, and what was made is frozen after.

    The collector's state is restored (a caller that had turned it off keeps it off).
    Only a block that loaded some module freezes: called again in one process (a
    test, a notebook), its imports are done and nothing is frozen.
    """
    enabled = gc.isenabled()
    loaded = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > loaded:
            gc.freeze()  # all there is now lives until exit: never walked again
        if enabled:
            gc.enable()
