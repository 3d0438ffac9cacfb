"""Development tools of the analyzer project: run from a checkout, never installed.

:mod:`tools.simulator` generates the synthetic proxy logs the tests, the sample week
(``sample_logs/generate.py``) and the benchmarks use. The wheel ships ``analyzer``
only (``pyproject.toml``'s package discovery includes ``analyzer*``); tests reach this
package through the repository root on ``sys.path`` (pytest's rootdir insertion, as
for ``tests.support``), scripts by adding the root themselves.
"""
