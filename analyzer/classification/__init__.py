"""Classification: every turn's class, and the pods' wedged and down windows.

:mod:`.turns` derives the turns (features in SQL, labels from
:mod:`analyzer.online`, the logged class kept where the proxy wrote one);
:mod:`.windows` applies the wedge rule to the stored samples, and
:mod:`.evidence` says what the other signals showed during each window.
"""
