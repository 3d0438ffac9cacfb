"""``analyze alerts``: the wedge rule as Prometheus alerting rules, and their promtool unit tests."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.paths import same_file
from analyzer.outputs.alerts import AlertSettings, render_prometheus_rule, render_rules, render_unit_tests

FORMATS = ("rules", "prometheusrule")


@dataclass(frozen=True)
class AlertOptions:
    """What ``analyze alerts`` was asked; checked when made.

    ``output``: the rules file (None: the text is returned for stdout);
    ``unit_tests``: also write promtool unit tests there (needs ``output`` and the
    ``rules`` format); ``fmt``: ``rules`` (a rule_files file) or ``prometheusrule``
    (the Prometheus operator's object, named ``name`` in ``namespace`` with
    ``object_labels``, ``KEY=VALUE`` each); the rest are the rule's settings
    (:meth:`analyzer.outputs.alerts.AlertSettings.parse`).

    Raises:
        AnalyzerError: (usage) a bad value, naming its option.
    """

    output: Path | None = None
    unit_tests: Path | None = None
    fmt: str = "rules"
    wedge_window: str | None = None
    evaluation_interval: str | None = None
    scrape_interval: str | None = None
    selector: str | None = None
    pod_label: str | None = None
    runbook_url: str | None = None
    name: str = "vllm-wedge"
    namespace: str | None = None
    object_labels: tuple[str, ...] = ()
    settings: AlertSettings = field(init=False, repr=False, compare=False)
    labels: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        settings = AlertSettings.parse(wedge_window=self.wedge_window, evaluation_interval=self.evaluation_interval,
                                       scrape_interval=self.scrape_interval, selector=self.selector,
                                       pod_label=self.pod_label, runbook_url=self.runbook_url)
        if self.fmt not in FORMATS:
            raise AnalyzerError(f"--format: want rules or prometheusrule, got {self.fmt!r}", ExitCode.USAGE)
        labels = {}
        for item in self.object_labels:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise AnalyzerError(f"--object-label: want KEY=VALUE, got {item!r}", ExitCode.USAGE)
            labels[key] = value
        if self.unit_tests is not None and (self.fmt != "rules" or self.output is None):
            raise AnalyzerError("--unit-tests needs --output FILE of --format rules (the tests load that file)",
                                ExitCode.USAGE)
        if self.unit_tests is not None and same_file(self.output, self.unit_tests):
            raise AnalyzerError(f"--output and --unit-tests are the same file ({self.output}): the tests would "
                                "replace the rules they test; give two files", ExitCode.USAGE)
        object.__setattr__(self, "settings", settings)
        object.__setattr__(self, "labels", labels)


@dataclass
class AlertsWritten:
    """The rules' text, and the files written (none: the text is for stdout)."""

    text: str
    settings: AlertSettings
    rules_file: Path | None = None
    tests_file: Path | None = None


def write_alerts(opts: AlertOptions) -> AlertsWritten:
    """Render the rules (and their unit tests) and write them to ``opts.output`` / ``opts.unit_tests``.

    Both texts are made before anything is written: a refusal leaves no file half done.
    """
    if opts.fmt == "rules":
        text = render_rules(opts.settings)
    else:
        text = render_prometheus_rule(opts.settings, name=opts.name, namespace=opts.namespace,
                                      labels=opts.labels or None)
    if opts.output is None:
        return AlertsWritten(text, opts.settings)
    tests_text = None
    if opts.unit_tests is not None:
        rules_path = os.path.relpath(Path(opts.output).resolve(), Path(opts.unit_tests).resolve().parent)
        tests_text = render_unit_tests(opts.settings, rules_path)
    Path(opts.output).write_text(text, encoding="utf-8")
    if tests_text is not None:
        Path(opts.unit_tests).write_text(tests_text, encoding="utf-8")
    return AlertsWritten(text, opts.settings, Path(opts.output),
                         Path(opts.unit_tests) if tests_text is not None else None)
