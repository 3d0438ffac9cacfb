"""``analyze alerts``: the wedge rule as a Prometheus rule file (and its promtool unit tests)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from analyzer.cli.options import naming
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.paths import same_file
from analyzer.outputs.alerts import AlertSettings, render_prometheus_rule, render_rules, render_unit_tests


def alerts_command(*, output: str | Path | None = None, unit_tests: str | Path | None = None,
                   fmt: str = "rules", wedge_window: str | None = None, evaluation_interval: str | None = None,
                   scrape_interval: str | None = None, selector: str | None = None, pod_label: str | None = None,
                   runbook_url: str | None = None, name: str = "vllm-wedge", namespace: str | None = None,
                   object_labels: list[str] | None = None) -> str:
    """Write the rules to ``output`` (stdout when None) and the unit tests to ``unit_tests``; return the rules text."""
    with naming(selector="--prometheus-selector"):
        settings = AlertSettings.parse(wedge_window=wedge_window, evaluation_interval=evaluation_interval,
                                       scrape_interval=scrape_interval, selector=selector, pod_label=pod_label,
                                       runbook_url=runbook_url)
    if fmt == "rules":
        text = render_rules(settings)
    elif fmt == "prometheusrule":
        labels = {}
        for item in object_labels or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise AnalyzerError(f"--object-label: want KEY=VALUE, got {item!r}", ExitCode.USAGE)
            labels[key] = value
        text = render_prometheus_rule(settings, name=name, namespace=namespace, labels=labels or None)
    else:
        raise AnalyzerError(f"--format: want rules or prometheusrule, got {fmt!r}", ExitCode.USAGE)
    if unit_tests is not None and (fmt != "rules" or output is None):
        raise AnalyzerError("--unit-tests needs --output FILE of --format rules (the tests load that file)",
                            ExitCode.USAGE)
    if unit_tests is not None and same_file(output, unit_tests):
        raise AnalyzerError(f"--output and --unit-tests are the same file ({output}): the tests would replace "
                            "the rules they test; give two files", ExitCode.USAGE)
    if output is None:
        sys.stdout.write(text)
        return text
    tests_text = None
    if unit_tests is not None:  # made before anything is written: a refusal leaves no file half done
        rules_path = os.path.relpath(Path(output).resolve(), Path(unit_tests).resolve().parent)
        tests_text = render_unit_tests(settings, rules_path)
    Path(output).write_text(text, encoding="utf-8")
    print(f"wrote {output} ({settings.describe()})", file=sys.stderr)
    if unit_tests is not None:
        Path(unit_tests).write_text(tests_text, encoding="utf-8")
        print(f"wrote {unit_tests}: check with `promtool test rules {unit_tests}`", file=sys.stderr)
    return text
