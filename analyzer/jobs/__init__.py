"""Use cases the command line and the notebook share.

:mod:`.main_job` (the main job's steps and its options, :class:`.main_job.RunOptions`),
:mod:`.metrics` (samples stored and windows recomputed in one transaction),
:mod:`.forget`, :mod:`.replay` (the ``analyze replay`` command's work).
:mod:`analyzer.api` is the notebook's door to the same jobs.
"""
