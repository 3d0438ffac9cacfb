"""The focus models: GLM, listed first in the summary, the report and replay.

One rule, used by the summary, the sizing and the report: a model is a GLM model
when its name contains ``glm`` in any case. The SQL questions use the same rule
as the macro ``is_glm(model)`` (``queries/scope.sql``).
"""

from __future__ import annotations


def is_glm(model: str | None) -> bool:
    """GLM models are the focus: they are listed first everywhere."""
    return bool(model) and "glm" in model.lower()
