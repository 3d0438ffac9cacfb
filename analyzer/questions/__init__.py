"""Questions beyond the store's own: the read-only ``analyze sql`` and Spark.

:mod:`.sqlrun` is what ``analyze sql`` and the notebook run (the read-only
default, frames, rows fetched a batch at a time); :mod:`.spark` runs every
question of ``queries/`` on Spark SQL, over a lake (``analyze export --lake``).
"""
