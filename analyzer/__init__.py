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
    "connect": ("analyzer.db", "connect"),
    "ingest": ("analyzer.ingest", "ingest"),
    "classify": ("analyzer.turns", "refresh_turns"),
    "query": ("analyzer.queries", "query"),
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    """Import the public API on first use (PEP 562)."""
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'analyzer' has no attribute {name!r}")
