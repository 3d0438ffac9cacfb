"""Typer's coercion of plain option values, without pydantic.

Typer (0.2x) checks every parsed value with a pydantic ``TypeAdapter`` it builds
the first time an option is parsed. Importing pydantic and building the adapters
took a third of a re-run that finds nothing new (``analyze s3/ --db X`` again,
whose target is half a second). The command line's options are plain (text,
lists of text, paths, flags), and for those values typer's answer is known
without the adapter: an absent value stays absent (typer's own rule), a text is
itself, a list of texts is that list, a path is ``Path(text)`` (what pydantic
makes of it) followed by typer's own path checks. Every other value (a number,
a choice, a value of another type) goes to typer's adapter as before, built
when first needed; ``tests/test_cli_coercion.py`` compares both on every option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, get_args, get_origin

_STR, _STR_LIST, _PATH = "str", "list[str]", "path"


def install() -> None:
    """Make typer's arguments and options coerce plain values without pydantic (idempotent).

    Leaves typer as it is when its internals are not the ones this was written
    against (another typer version): the values are then coerced by pydantic.
    """
    try:
        import typer._coercion  # noqa: F401 - the coercion reproduced here (the tests compare against it)
        from typer.core import TyperArgument, TyperOption
    except ImportError:  # another typer: its own coercion, untouched
        return
    for cls in (TyperArgument, TyperOption):
        original = getattr(cls, "get_runtime_param", None)
        if original is None or getattr(original, "plain_values_first", False):
            continue
        cls.get_runtime_param = _plain_first(original)  # type: ignore[method-assign]


def _plain_first(typer_runtime_param: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def get_runtime_param(self: Any) -> Any:
        return _PlainValues(plain_kind(getattr(self, "type_descriptor", None)), lambda: typer_runtime_param(self))

    get_runtime_param.plain_values_first = True  # type: ignore[attr-defined]
    return get_runtime_param


def plain_kind(descriptor: Any) -> str | None:
    """``str``, ``list[str]`` or ``path`` for a parameter whose values this module coerces, else None."""
    info = getattr(descriptor, "parameter_info", None)
    if info is None or getattr(descriptor, "file_annotation", None) is not None \
            or getattr(info, "parser", None) is not None:
        return None
    annotation = descriptor.annotation
    if annotation is str:
        return _STR
    if get_origin(annotation) is list and get_args(annotation) == (str,):
        return _STR_LIST
    if annotation is Path and getattr(info, "path_type", None) is None and _coerce_cli_path() is not None:
        return _PATH
    return None


def _coerce_cli_path() -> Callable[..., Any] | None:
    try:
        from typer._param_types import coerce_cli_path  # typer's path checks (exists, readable, ...)
    except ImportError:  # pragma: no cover - another typer version: pydantic does it all
        return None
    return coerce_cli_path


class _PlainValues:
    """Typer's runtime coercion of one parameter, for the values that need no pydantic.

    ``kind`` is :func:`plain_kind`'s answer; with None only an absent value is coerced here.
    """

    def __init__(self, kind: str | None, typer_param: Callable[[], Any]):
        self.kind = kind
        self._typer_param = typer_param

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        """What typer's adapter returns (or raises) for ``value``; the adapter itself for any other value."""
        multi = param.multiple or param.nargs == -1
        if value is None:  # typer's rule, before any adapter
            return () if multi else None
        if self.kind == _STR and not multi and type(value) is str:
            return value
        if self.kind == _STR_LIST and multi and isinstance(value, (list, tuple)) \
                and all(type(v) is str for v in value):
            return list(value)
        if self.kind == _PATH and not multi and type(value) is str:
            coerce_cli_path = _coerce_cli_path()
            try:
                return coerce_cli_path(Path(value), param.type_descriptor.parameter_info,  # type: ignore[misc]
                                       path_type=Path, param=param, ctx=ctx)
            except ValueError:  # a NUL in the path, say: typer's adapter words the error
                pass
        return self._typer_param().coerce(value, param=param, ctx=ctx)
