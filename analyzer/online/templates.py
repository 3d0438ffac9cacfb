"""GLM chat-template generations: which thinking keys a served GLM model reads.

GLM's chat templates changed how thinking is switched, so "is it GLM" is not
enough to know what to send:

=============  =========================  =================================================
generation     releases                   thinking knobs of the template
=============  =========================  =================================================
``glm-4.5``    GLM-4.5, GLM-4.6            ``enable_thinking`` (false renders ``/nothink``)
``glm-4.7``    GLM-4.7 up to GLM-5.2       ``enable_thinking``; ``clear_thinking`` for earlier turns
``glm-5.3``    GLM-5.3 and later           no off switch: ``reasoning_effort`` (``low``/``high``,
                                          anything else is max) and ``clear_thinking``
=============  =========================  =================================================

vLLM's ``glm45``/``glm47`` reasoning parser reads ``enable_thinking``/``thinking``
whatever the template: a false value stops reasoning *extraction* while a GLM-5.3
keeps thinking, and the scratchpad with a dangling ``</think>`` lands in
``content`` (vllm-project/vllm#54744). The hosted Z.AI API refuses "off" for GLM-5.3
outright (error 1210, "This model always engages in thinking and cannot be
disabled; please use low, high, or max"). So for a generation without a switch,
thinking off is never a false key: it is the lowest effort the template takes.

Served names are generic (``glm-5`` may run GLM-5.2 or GLM-5.3 weights), so the
name only gives the default (:func:`glm_version`: ``glm-5`` reads as GLM-5.0, in
the ``glm-4.7`` generation), and an operator override says what a served name
runs: ``templates={"glm-5": "glm-5.3"}`` (keys are case-insensitive ``fnmatch``
patterns of the served name, values a generation or any GLM name, e.g.
``"GLM-5.3-FP8"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class ThinkingTemplate:
    """One GLM chat-template generation and the thinking knobs it reads.

    Attributes:
        name: the generation's name (``glm-4.5``, ``glm-4.7``, ``glm-5.3``).
        first: the first GLM version of the generation, as ``(major, minor)``.
        releases: which GLM releases it covers, in words.
        off_switch: the template can turn thinking off.
        switch_keys: the ``chat_template_kwargs`` keys that switch thinking, set
            true or false (both: the template reads one, vLLM's parser both).
        effort_off: for a generation without a switch, the ``reasoning_effort``
            sent for "thinking off" (the lowest the template takes).
    """

    name: str
    first: tuple[int, int]
    releases: str
    off_switch: bool
    switch_keys: tuple[str, ...] = ()
    effort_off: str | None = None


#: The keys a GLM template or vLLM's GLM parser reads as an on/off switch: never
#: sent false to a generation without an off switch.
SWITCH_KEYS: tuple[str, ...] = ("enable_thinking", "thinking")

#: The GLM template generations, oldest first.
GLM_TEMPLATES: tuple[ThinkingTemplate, ...] = (
    ThinkingTemplate("glm-4.5", (4, 5), "GLM-4.5, GLM-4.6", True, SWITCH_KEYS),
    ThinkingTemplate("glm-4.7", (4, 7), "GLM-4.7 to GLM-5.2", True, SWITCH_KEYS),
    ThinkingTemplate("glm-5.3", (5, 3), "GLM-5.3 and later", False, (), "low"),
)

# "glm-5.3-flash", "GLM-5.3-FP8", "glm4.5-air", "glm45", "zai-org/GLM-5": the version after "glm".
_VERSION = re.compile(r"glm[-_ ]?(\d)(?:[._]?(\d))?(?!\d)")


def glm_version(name: Any) -> tuple[int, int] | None:
    """The GLM version a name says (``"zai-org/GLM-5.3-FP8"`` -> ``(5, 3)``), or None.

    A name without a minor version is ``.0`` (``glm-5`` -> ``(5, 0)``). Anything that
    is not a string, or names no GLM version, is None.
    """
    if not isinstance(name, str):
        return None
    m = _VERSION.search(name.lower())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


def template_named(name: str) -> ThinkingTemplate:
    """The generation a name stands for: a generation's name or any GLM name (``"GLM-5.3-FP8"``).

    Raises:
        ValueError: a name that says no GLM version (an operator's setting).
    """
    if isinstance(name, str):
        for t in GLM_TEMPLATES:
            if name.lower() == t.name:
                return t
    version = glm_version(name)
    if version is None:
        known = ", ".join(t.name for t in GLM_TEMPLATES)
        raise ValueError(f"{name!r} names no GLM template generation (one of {known}, or a GLM name "
                         "such as 'GLM-5.3')")
    return _by_version(version)


def _by_version(version: tuple[int, int]) -> ThinkingTemplate:
    found = GLM_TEMPLATES[0]
    for t in GLM_TEMPLATES:
        if version >= t.first:
            found = t
    return found


def check_templates(templates: Mapping[str, str] | None) -> dict[str, ThinkingTemplate]:
    """An operator's ``{served-name pattern: generation}`` map, checked: pattern (lower case) -> generation.

    Raises:
        ValueError: not a mapping, a pattern that is not a string, or a value that
            names no generation.
    """
    if templates is None:
        return {}
    if not isinstance(templates, Mapping):
        raise ValueError(f"templates must map served model names to GLM generations, got {templates!r}")
    out = {}
    for pattern, name in templates.items():
        if not isinstance(pattern, str):
            raise ValueError(f"template override keys must be model names or patterns, got {pattern!r}")
        out[pattern.lower()] = template_named(name)
    return out


def glm_template(model: Any, templates: Mapping[str, str] | None = None) -> ThinkingTemplate:
    """The template generation a GLM ``model`` runs: the operator's override, else its name.

    ``templates`` maps served-name patterns (case-insensitive ``fnmatch``) to a
    generation (see :func:`check_templates`); the first matching pattern wins. By
    name, a version before GLM-4.5 counts as ``glm-4.5``, and a name with no
    version (``glm``) as ``glm-4.7``, the switch the proposal's dual keys were
    written for.

    Raises:
        ValueError: a malformed ``templates`` map.
    """
    checked = check_templates(templates)
    name = model.lower() if isinstance(model, str) else ""
    for pattern, template in checked.items():
        if fnmatchcase(name, pattern):
            return template
    version = glm_version(name)
    if version is None:
        return GLM_TEMPLATES[1]
    return _by_version(version)
