"""Adapters that run :mod:`analyzer.online` inside other gateways.

Each module here is loaded by the gateway it adapts (never by the analyzer), and is
the only place that imports that gateway: ``litellm_ladder`` is LiteLLM's custom
provider running the fallback ladder and the request normalizer
(docs/integrations/litellm.md). Nothing else in the package imports this one, so
``import analyzer`` never loads a gateway; pyproject.toml's import-linter
contracts say so.
"""
