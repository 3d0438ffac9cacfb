"""What a test needs from the machine: skip without it on a developer's machine, fail under CI.

`.ci/run` installs every service the tests use; under ``CI`` a missing one is a failure, so a
missing install step cannot hide behind a skip.
"""

from __future__ import annotations

import importlib
import os
import shutil
from types import ModuleType

import pytest


def under_ci() -> bool:
    """Whether ``CI`` is set (to anything but empty, 0, false or no): a missing dependency is a failure."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def need(module: str) -> ModuleType:
    """``module`` imported; without it, the test is skipped, unless under CI where the import error fails it.

    Called from a fixture or a test, not at a module's top, when the import is slow (litellm, moto):
    every pytest worker collects every module."""
    return importlib.import_module(module) if under_ci() else pytest.importorskip(module)


def need_litellm() -> ModuleType:
    """:func:`need` of litellm, imported with its wheel's cost map (``LITELLM_LOCAL_MODEL_COST_MAP``: no
    download at import); the environment is as it was after, so no later test or child inherits it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        return need("litellm")


def need_spark(*, module: bool = False) -> None:
    """Skip when pyspark or a Java runtime is missing, unless under CI (``module``: at a module's top)."""
    if under_ci():
        return
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime", allow_module_level=module)
