"""What a test needs from the machine: skip without it on a developer's machine, fail under CI.

`.ci/run` installs every service the tests use; under ``CI`` a missing one is a failure, so a
missing install step cannot hide behind a skip.
"""

from __future__ import annotations

import os
import shutil

import pytest


def need_spark(*, module: bool = False) -> None:
    """Skip when pyspark or a Java runtime is missing, unless under CI (``module``: at a module's top)."""
    if os.environ.get("CI"):
        return
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime", allow_module_level=module)
