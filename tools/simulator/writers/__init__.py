"""The simulated week written in the forms the proxy and its surroundings produce.

- :mod:`~tools.simulator.writers.s3` -- the proxy's S3 chunk files;
- :mod:`~tools.simulator.writers.stdout` -- each proxy pod's stdout (``kubectl logs``),
  with the S3-mode truncation of every string at any depth;
- :mod:`~tools.simulator.writers.parquet` -- the consolidated Parquet tier;
- :mod:`~tools.simulator.writers.prometheus` -- Prometheus exports of the vLLM pods;
- :mod:`~tools.simulator.writers.events` -- the event stream and flush schedule they share.

Each writer takes a :class:`~tools.simulator.week.SimulatedWeek` or plain record dicts
in time order, and streams.
"""

from tools.simulator.writers.parquet import write_consolidated_parquet
from tools.simulator.writers.prometheus import write_prometheus_exports
from tools.simulator.writers.s3 import S3WriteResult, chunk_line, write_s3_chunks
from tools.simulator.writers.stdout import stdout_record_line, stdout_view, write_kubectl_stdout

__all__ = [
    "S3WriteResult",
    "chunk_line",
    "stdout_record_line",
    "stdout_view",
    "write_consolidated_parquet",
    "write_kubectl_stdout",
    "write_prometheus_exports",
    "write_s3_chunks",
]
