"""Ingestion: logs and metric samples into the store.

:mod:`.logs` puts proxy records into ``records`` in bounded batches, quarantines
bad lines, skips bad files and re-reads only what changed. Metric files are read
into a scratch database (:mod:`.metrics`: each form by its reader in
:mod:`.metric_readers`, API JSON by :mod:`.apistream`) and stored by
:mod:`.metric_stage`; :mod:`.metric_store` keeps the model map and forgets
samples by source. Nothing here classifies.
"""
