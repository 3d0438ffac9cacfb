"""The wedge rule as Prometheus alerting rules (analyzer.outputs.alerts, ``analyze alerts``), checked with the real tools.

- every generated rule file passes ``promtool check rules``;
- the generated unit tests (series shaped like the sample week's episodes: a wedged
  pod and its idle sibling, a sleeping engine, a restart, a scrape gap, a down pod
  and a failing sidecar) pass ``promtool test rules``;
- the sample week's metrics, backfilled into a real Prometheus, fire the alerts in
  the analyzer's own windows and nowhere else, each within the wedge window plus
  one evaluation interval of the window's start (``tools.alert_agreement``; the
  figure is printed).

Without promtool/prometheus these skip, except under ``CI`` (``.ci/run`` installs
them), where they fail.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from analyzer.outputs.alerts import (
    DEFAULT_FILE, DEFAULT_TESTS_FILE, AlertSettings, encode_values, prom_duration, render_prometheus_rule,
    render_rules, render_template, render_unit_tests, rule_groups,
)
from analyzer.core.errors import AnalyzerError, ExitCode
from tools.alert_agreement import agreement, apply_for
from tests.support.repo import REPO
from tests.support.cli import analyze
from tests.support.prometheus import promtool, tool

ROOT = REPO

VARIANTS = {
    "default": {},
    "exported_pod, selector, 2m": {"pod_label": "exported_pod", "wedge_window": "2m",
                                   "selector": 'namespace=~"llm|llm-b",job="vllm"'},
    "1m evaluation, 15s scrapes, 10m": {"evaluation_interval": "1m", "scrape_interval": "15s", "wedge_window": "10m"},
    "kubernetes_pod_name": {"pod_label": "kubernetes_pod_name"},
}


@pytest.mark.prometheus
@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
def test_generated_rules_pass_promtool_check_and_their_unit_tests(tmp_path, variant):
    s = AlertSettings.parse(**VARIANTS[variant])
    (tmp_path / "rules.yml").write_text(render_rules(s))
    (tmp_path / "rules.test.yml").write_text(render_unit_tests(s, "rules.yml"))
    checked = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert checked.returncode == 0 and "SUCCESS: 7 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "rules.test.yml", cwd=tmp_path)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


@pytest.mark.prometheus
def test_the_prometheusrule_object_holds_the_same_groups(tmp_path):
    s = AlertSettings()
    text = render_prometheus_rule(s, namespace="monitoring", labels={"release": "kps"})
    assert "kind: PrometheusRule" in text and "namespace: monitoring" in text and "release: kps" in text
    # The spec, unindented, is the rule file: promtool checks it.
    spec = text.split("spec:\n", 1)[1]
    (tmp_path / "spec.yml").write_text("".join(line[2:] + "\n" for line in spec.splitlines()))
    checked = promtool("check", "rules", "spec.yml", cwd=tmp_path)
    assert checked.returncode == 0 and "SUCCESS: 7 rules found" in checked.stdout, checked.stdout + checked.stderr
    assert "".join(line[2:] + "\n" for line in spec.splitlines()) == render_rules(s).split("\n", 3)[3]


@pytest.mark.prometheus
def test_dashboards_hold_the_files_for_the_default_settings(tmp_path):
    """`analyze alerts -o dashboards/vllm-alerts.rules.yml --unit-tests dashboards/vllm-alerts.test.yml`."""
    out = analyze("alerts", "-o", tmp_path / "r.yml", "--unit-tests", tmp_path / "t.yml", cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert (ROOT / DEFAULT_FILE).read_text() == (tmp_path / "r.yml").read_text(), \
        f"{DEFAULT_FILE} is stale: run `analyze alerts -o {DEFAULT_FILE} --unit-tests {DEFAULT_TESTS_FILE}`"
    assert (ROOT / DEFAULT_TESTS_FILE).read_text() == (tmp_path / "t.yml").read_text().replace(
        "- r.yml", "- vllm-alerts.rules.yml")
    tested = promtool("test", "rules", DEFAULT_TESTS_FILE, cwd=ROOT)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_rules_read_the_offline_rules_names_and_options():
    s = AlertSettings.parse(pod_label="exported_pod", selector='namespace="llm"', wedge_window="7m")
    [group] = rule_groups(s)["groups"]
    wedged = next(r for r in group["rules"] if r.get("alert") == "VLLMPodWedged")
    down = next(r for r in group["rules"] if r.get("alert") == "VLLMPodDown")
    assert wedged["for"] == down["for"] == "7m"
    text = render_rules(s)
    for name in ("vllm:generation_tokens_total{namespace=\"llm\"}", "vllm:engine_sleep_state{namespace=\"llm\",",
                 "vllm:num_requests_running|vllm:num_requests_waiting\",namespace=\"llm\"", "up{namespace=\"llm\"} == 0",
                 "by (exported_namespace, exported_pod, model_name)"):
        assert name in text, name
    assert "{{ $labels.exported_pod }}" in wedged["annotations"]["summary"]
    assert wedged["labels"] == {"severity": "critical"} and down["labels"] == {"severity": "warning"}
    assert wedged["annotations"]["runbook_url"] == "docs/runbook.md#vllmpodwedged"
    anchors = (ROOT / "docs" / "runbook.md").read_text()
    assert "## VLLMPodWedged" in anchors and "## VLLMPodDown" in anchors


@pytest.mark.parametrize("kwargs, message", [
    ({"pod_label": "instance"}, "--pod-label"),
    ({"wedge_window": "1m"}, "too short"),
    ({"wedge_window": "5m", "scrape_interval": "2m"}, "too short"),
    ({"selector": "not a matcher"}, "label matchers"),
    ({"evaluation_interval": "0.0001s"}, "whole milliseconds"),
])
def test_bad_options_are_usage_errors(kwargs, message):
    with pytest.raises(AnalyzerError) as err:
        AlertSettings.parse(**kwargs)
    assert err.value.exit_code == ExitCode.USAGE and message in str(err.value)


def test_helpers():
    assert [prom_duration(x) for x in (300, 90, 0.5, 3600, 86400 + 60)] == ["5m", "1m30s", "500ms", "1h", "1d1m"]
    assert encode_values([1, 2, 3, 3, 3, None, None, 7, 0.5]) == "1+1x2 3x1 _x2 7 0.5"
    assert encode_values([5, 5, 5, 1]) == "5x2 1"
    labels = {"namespace": "llm", "pod": "p-0", "model_name": "glm-5"}
    assert render_template("{{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }} ({{ $labels.model_name }})",
                           labels) == "llm/p-0 (glm-5)"
    assert render_template("{{ with $labels.namespace }}{{ . }}/{{ end }}{{ $labels.pod }}", {"pod": "p"}) == "p"
    # for: as the rule manager applies it: active at the first evaluation, firing once for: has passed,
    # reset by an evaluation without the series.
    assert apply_for([0, 30, 60, 90, 120, 150], 30, 60) == [(60, 150)]
    assert apply_for([0, 30, 90, 120, 150, 180], 30, 60) == [(150, 180)]
    assert apply_for([0, 30], 30, 60) == []


def test_the_yaml_is_what_a_yaml_parser_reads():
    yaml = pytest.importorskip("yaml")
    s = AlertSettings.parse(selector='namespace="llm"')
    assert yaml.safe_load(render_rules(s)) == rule_groups(s)


@pytest.mark.prometheus
def test_alerts_agree_with_the_offline_windows_on_the_sample_week(tmp_path):
    """The sample week in a real Prometheus: every wedged and down window fires, nothing fires outside
    one, and the onset lag is at most the wedge window plus one evaluation interval."""
    tool("promtool"), tool("prometheus")
    result = agreement(workdir=tmp_path)
    print("\n" + result.figure())
    assert {w["kind"] for w in result.windows} == {"wedged", "down"} and len(result.windows) == 2
    assert not result.missed, result.figure()
    assert not result.outside, result.figure()
    assert not result.late, result.figure()
    assert result.ok
    # The wedge whose gauges read 0 (frozen gauges) is what the alert cannot see: it never
    # fires there, and the metrics alone make no window of it either; the analyzer
    # infers it from the logs (docs/runbook.md says so).
    truth = json.loads((REPO / "sample_logs" / "ground_truth.json").read_text())
    frozen = [e for e in truth["episodes"] if e.get("frozen")]
    assert len(frozen) == 1
    lo = datetime.fromisoformat(frozen[0]["start"].replace("Z", "+00:00")).timestamp()
    hi = datetime.fromisoformat(frozen[0]["end"].replace("Z", "+00:00")).timestamp()
    assert not [iv for iv in result.intervals if iv.first < hi and iv.last > lo]
