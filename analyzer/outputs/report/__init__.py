"""The weekly HTML report (``analyze report``, made by :mod:`analyzer.jobs.report`).

:mod:`.build` turns the views into the documented context objects of
:mod:`.context`, :mod:`.charts` makes the plotly figures, :mod:`.html` runs the
jinja2 templates in ``dashboards/``, and :mod:`analyzer.core.scrub` scrubs
credentials from every piece of log text shown.
"""
