"""The focus models: GLM, listed first in the summary, the report and replay.

One rule, used by the summary, the sizing, the report and the ladder's model
gate: a model is a GLM model when its name contains ``glm`` in any case. It
lives in :mod:`analyzer.online.models` (the proxy needs it too, and
``analyzer.online`` is standard-library only); this module re-exports it. The
SQL questions use the same rule as the macro ``is_glm(model)``
(``queries/scope.sql``).
"""

from __future__ import annotations

from .online.models import is_glm

__all__ = ["is_glm"]
