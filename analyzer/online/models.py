"""Which models a rule applies to: the GLM focus and the ladder's model gate.

One rule for "a GLM model", online and offline: its name contains ``glm`` in any
case (``glm-5``, ``z-ai/glm-5.2``, ``zai-org/GLM-5-FP8``). The SQL questions use
the same rule as the macro ``is_glm(model)`` (``queries/scope.sql``), and
:mod:`analyzer.core.focus` re-exports :func:`is_glm` from here.

The ladder is a GLM fix: :data:`LADDER_MODELS` are the model-name patterns it
is armed for by default (``fnmatch`` patterns, matched without regard to case).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Iterable

#: The models the ladder retries by default: case-insensitive ``fnmatch``
#: patterns matched against the payload's ``model`` (``"*glm*"`` is the same
#: rule as :func:`is_glm`).
LADDER_MODELS: tuple[str, ...] = ("*glm*",)


def is_glm(model: Any) -> bool:
    """True for a GLM model: the name contains ``glm`` in any case.

    Anything that is not a non-empty string (None, a number) is not GLM.
    """
    return isinstance(model, str) and "glm" in model.lower()


def model_patterns(models: Iterable[str] | None) -> tuple[str, ...] | None:
    """``models`` as a tuple of lower-case patterns (None: every model).

    Raises:
        ValueError: a bare string (one pattern must still be a sequence:
            ``("*glm*",)``), or a pattern that is not a string.
    """
    if models is None:
        return None
    if isinstance(models, (str, bytes)):
        raise ValueError(f"models must be a sequence of fnmatch patterns or None, got the string {models!r}")
    try:
        out = tuple(models)
    except TypeError:
        raise ValueError(f"models must be a sequence of fnmatch patterns or None, got {models!r}") from None
    bad = [p for p in out if not isinstance(p, str)]
    if bad:
        raise ValueError(f"models must be strings (fnmatch patterns), got {bad!r}")
    return tuple(p.lower() for p in out)


def model_matches(model: Any, models: Iterable[str] | None = LADDER_MODELS) -> bool:
    """True when ``model`` matches one of the ``fnmatch`` patterns ``models``, in any case.

    ``models=None`` matches every model (a missing or non-string model too); a
    model that is not a string matches no pattern.
    """
    patterns = model_patterns(models)
    if patterns is None:
        return True
    if not isinstance(model, str):
        return False
    name = model.lower()
    return any(fnmatchcase(name, p) for p in patterns)
