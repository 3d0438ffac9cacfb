"""The focus models: GLM, listed first in the summary, the report and replay.

One rule, used by the summary, the sizing, the report and the ladder's model
gate: a model is a GLM model when its name contains ``glm`` in any case. It
lives in :mod:`analyzer.online.models` (the proxy needs it too, and
``analyzer.online`` is standard-library only); this module re-exports it. The
SQL questions use the same rule as the macro ``is_glm(model)``
(``queries/scope.sql``).
"""

from __future__ import annotations

import re

from analyzer.online.models import is_glm

__all__ = ["is_glm", "like_match"]


def like_match(value: str | None, pattern: str) -> bool:
    """SQL ``ILIKE`` in Python: ``%`` any run, ``_`` any one character, case-insensitive.

    The model patterns of ``--model`` (summary), ``--only-model`` (replay) and the
    ``model`` parameter of ``analyze sql`` questions all mean this.
    """
    if value is None:
        return False
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.I | re.S) is not None
