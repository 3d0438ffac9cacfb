"""analyzer: log analytics and incident classification for LLM proxies fronting GLM on vLLM.

The package namespace is the Python API for notebooks and scripts. It imports
lazily, so ``import analyzer`` stays fast and never pulls in the CLI, plotly or
jinja2; ``analyzer.online`` (the part the proxy runs) is standard-library only.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# name -> (module, attribute): resolved on first use.
_LAZY = {
    "connect": ("analyzer.api", "connect"),
    "query": ("analyzer.api", "query"),
    "ingest": ("analyzer.api", "ingest"),
    "classify": ("analyzer.api", "classify"),
    "report": ("analyzer.api", "report"),
    "export_lake": ("analyzer.api", "export_lake"),
    "replay": ("analyzer.api", "replay"),
    "sync_s3": ("analyzer.io.objectstore", "sync"),
}

__all__ = sorted(_LAZY) + ["__version__"]


def _resolve(name: str) -> Any:
    import importlib

    module, attr = _LAZY[name]
    return getattr(importlib.import_module(module), attr)


def __getattr__(name: str) -> Any:
    """Import the public API on first use (PEP 562)."""
    if name in _LAZY:
        value = _resolve(name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analyzer' has no attribute {name!r}")
