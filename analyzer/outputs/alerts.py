"""The wedge rule as Prometheus alerting rules: the offline windows' definition, written for a live Prometheus.

:mod:`analyzer.classification.windows` finds wedged and down pods after the week is
over; this module writes the same rule as a Prometheus rule file, so on-call is
paged while it happens (``analyze alerts``). The two are the same rule written
twice on purpose, and tested to agree (``tests/e2e/test_alerts.py`` runs promtool on
the generated files and compares the alerts with the analyzer's windows on the
sample week in a real Prometheus).

**VLLMPodWedged** fires for a pod (the pod label, its namespace label and
``model_name``: the offline rule's *unit*) when, at every evaluation for the
wedge window ``W`` (``for: W``):

- its own ``vllm:num_requests_running`` or ``vllm:num_requests_waiting`` is above
  0 (demand by the pod's own gauges; the alert cannot read the logs, so a pod
  without gauges is never paged, where the offline rule falls back on logged
  requests);
- ``vllm:generation_tokens_total`` did not move since the previous evaluation on
  any of its engines (``c - c offset I == 0``: an increase or a reset, the process
  restarting, both end the flat run and restart the ``for:`` clock), and the last
  two samples are at most ``R = 3`` scrape intervals old (``idelta(c[R]) == 0``):
  a hole longer than that is unknown time and restarts the clock too, so a scrape
  gap never makes a wedge;
- the ``up`` of its vLLM target (same ``instance`` and ``job`` as its vLLM series,
  not a sidecar's) is 1;
- it is not asleep by ``vllm:engine_sleep_state`` (all its engines asleep:
  ``sleep_state="awake"`` at 0, ``weights_offloaded``/``discard_all`` at 1, or the
  unlabeled gauge above 0).

The offline window starts at the last increase (or the first demand of a flat
run) and the alert fires ``W`` later, plus the time to see the first flat sample
and to reach the next evaluation: at most ``W`` + one evaluation interval when
the evaluation interval is the scrape interval (see ``docs/alerts.md``).

**VLLMPodDown** fires when ``up == 0`` for ``W`` on a target of a job that scraped
vLLM in the last day (a new pod loading its weights has no vLLM series yet; a
sidecar scraped under a job of its own has none ever).

Options are the offline rule's (:class:`AlertSettings`): the wedge window, the
label selector (``--prometheus-selector``, added to every series selector) and the
pod label the units are made of (``pod``, or ``exported_pod`` behind an
aggregating exporter, ...), plus the evaluation and scrape intervals. The YAML is
written by a small emitter here (the files are small and of a fixed shape).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from analyzer.core.durations import parse_duration
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.io.metric_samples import (
    GENERATION_TOKENS,
    KV_CACHE_USAGE,
    NAMESPACE_LABELS,
    POD_NAME_LABELS,
    REQUEST_SUCCESS,
    REQUESTS_RUNNING,
    REQUESTS_WAITING,
    SLEEP_STATE,
    UP,
)
from analyzer.io.prometheus import parse_selector
from analyzer.store.holdings import DEFAULT_WEDGE_WINDOW_S

WEDGED_ALERT = "VLLMPodWedged"
DOWN_ALERT = "VLLMPodDown"
GROUP = "vllm-wedge"
#: The generated file for the default settings, beside the report's templates.
DEFAULT_FILE = "dashboards/vllm-alerts.rules.yml"
DEFAULT_TESTS_FILE = "dashboards/vllm-alerts.test.yml"
DEFAULT_RUNBOOK = "docs/runbook.md"
#: A hole in a pod's counter samples longer than this many scrape intervals restarts the ``for:`` clock.
FRESH_SCRAPES = 3
#: How far back a job counts as one that scrapes vLLM (a replacement pod has no series of its own yet).
VLLM_JOB_MEMORY = "1d"
#: The longest wedge window the rules are written for: a pod flat for longer than a day with requests in
#: its engine was paged long before (and Prometheus refuses durations past about 292 years).
MAX_WEDGE_WINDOW_S = 86_400.0
#: The longest evaluation or scrape interval (Prometheus' own defaults are 1m).
MAX_INTERVAL_S = 3_600.0
#: Go template syntax, which Prometheus would run in an annotation (the runbook URL is written into them).
_TEMPLATE_SYNTAX = re.compile(r"\{\{|\}\}")

# The namespace label that goes with each pod label (kubernetes_pod_name came with kubernetes_namespace).
_NAMESPACE_OF = {"exported_pod": "exported_namespace", "pod": "namespace",
                 "kubernetes_pod_name": "kubernetes_namespace", "pod_name": "namespace"}
assert set(_NAMESPACE_OF) == set(POD_NAME_LABELS) and set(_NAMESPACE_OF.values()) <= set(NAMESPACE_LABELS)

# Recording rules (level:metric:operation, per unit: namespace, pod, model_name).
FLAT = "pod_model:vllm_generation_tokens:flat"
DEMAND = "pod_model:vllm_requests_in_engine:max"
TARGET_UP = "pod_model:vllm_target_up:min"
ASLEEP = "pod_model:vllm_engine_asleep:min"
VLLM_JOBS = "job:vllm_engines:count"


def prom_duration(seconds: float) -> str:
    """Seconds as a Prometheus duration: ``300`` -> ``5m``, ``90`` -> ``1m30s``, ``0.5`` -> ``500ms``."""
    ms = round(seconds * 1000)
    if ms <= 0:
        raise ValueError(f"not a positive duration: {seconds!r}")
    out = ""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        n, ms = divmod(ms, size)
        if n:
            out += f"{n}{unit}"
    return out


@dataclass(frozen=True)
class AlertSettings:
    """What the generated rules are made for (the offline rule's options and the Prometheus' intervals)."""

    wedge_window_s: float = DEFAULT_WEDGE_WINDOW_S
    evaluation_interval_s: float = 30.0
    scrape_interval_s: float = 30.0
    selector: str | None = None
    pod_label: str = "pod"
    runbook_url: str = DEFAULT_RUNBOOK
    severity: dict = field(default_factory=lambda: {WEDGED_ALERT: "critical", DOWN_ALERT: "warning"})

    @classmethod
    def parse(cls, *, wedge_window: str | float | None = None, evaluation_interval: str | float | None = None,
              scrape_interval: str | float | None = None, selector: str | None = None,
              pod_label: str | None = None, runbook_url: str | None = None) -> "AlertSettings":
        """Settings from option values (None: the default); checks them.

        Raises:
            AnalyzerError: (usage) a bad duration, selector or pod label, or a wedge
                window too short for the intervals.
        """
        base = cls()
        s = cls(
            wedge_window_s=base.wedge_window_s if wedge_window is None else parse_duration(wedge_window, "--wedge-window"),
            evaluation_interval_s=base.evaluation_interval_s if evaluation_interval is None
            else parse_duration(evaluation_interval, "--evaluation-interval"),
            scrape_interval_s=base.scrape_interval_s if scrape_interval is None
            else parse_duration(scrape_interval, "--scrape-interval"),
            selector=parse_selector(selector),
            pod_label=base.pod_label if pod_label is None else pod_label,
            runbook_url=base.runbook_url if runbook_url is None else runbook_url,
        )
        for name, v, most in (("--wedge-window", s.wedge_window_s, MAX_WEDGE_WINDOW_S),
                              ("--evaluation-interval", s.evaluation_interval_s, MAX_INTERVAL_S),
                              ("--scrape-interval", s.scrape_interval_s, MAX_INTERVAL_S)):
            if v > most:
                raise AnalyzerError(f"{name} {prom_duration(v)} is longer than the rules are written for "
                                    f"(at most {prom_duration(most)})", ExitCode.USAGE)
        check_runbook_url(s.runbook_url)
        if s.pod_label not in _NAMESPACE_OF:
            raise AnalyzerError(f"--pod-label: want one of {', '.join(POD_NAME_LABELS)}, got {s.pod_label!r}",
                                ExitCode.USAGE)
        for name, v in (("--wedge-window", s.wedge_window_s), ("--evaluation-interval", s.evaluation_interval_s),
                        ("--scrape-interval", s.scrape_interval_s)):
            if abs(v * 1000 - round(v * 1000)) > 1e-6:
                raise AnalyzerError(f"{name}: Prometheus takes whole milliseconds, got {v:g}s", ExitCode.USAGE)
        if s.wedge_window_s <= s.fresh_s or s.wedge_window_s < 2 * s.evaluation_interval_s:
            raise AnalyzerError(
                f"--wedge-window {prom_duration(s.wedge_window_s)} is too short: it must be longer than "
                f"{FRESH_SCRAPES} scrape intervals ({prom_duration(s.fresh_s)}) and at least two evaluation "
                f"intervals ({prom_duration(2 * s.evaluation_interval_s)})", ExitCode.USAGE)
        return s

    @property
    def namespace_label(self) -> str:
        return _NAMESPACE_OF[self.pod_label]

    @property
    def unit_labels(self) -> tuple[str, str, str]:
        """The labels of one unit (the offline rule's pod and model): namespace, pod, model_name."""
        return (self.namespace_label, self.pod_label, "model_name")

    @property
    def fresh_s(self) -> float:
        """``R``: the counter's last two samples must lie within this (a longer hole restarts ``for:``)."""
        return FRESH_SCRAPES * self.scrape_interval_s

    def describe(self) -> str:
        return (f"wedge window {prom_duration(self.wedge_window_s)}, evaluation interval "
                f"{prom_duration(self.evaluation_interval_s)}, scrape interval {prom_duration(self.scrape_interval_s)}, "
                f"pod label {self.pod_label}, selector {self.selector or '(none)'}")


def check_runbook_url(url: str) -> str:
    """``url`` if it can be written into the alerts' annotations as it is.

    The annotations are Go templates: ``{{`` in the URL would be run by
    Prometheus (or make it refuse the rule file), so it is refused, as are
    spaces and control characters (a URL has none).

    Raises:
        AnalyzerError: (usage) template syntax, a space or a control character in it, or nothing.
    """
    if not url or not url.strip():
        raise AnalyzerError("--runbook-url: empty; give where docs/runbook.md is served", ExitCode.USAGE)
    if _TEMPLATE_SYNTAX.search(url):
        raise AnalyzerError(f"--runbook-url {url!r}: holds template syntax ({{{{ or }}}}), which Prometheus would "
                            "run in the alert's annotations; give a plain URL", ExitCode.USAGE)
    if any(c.isspace() or not c.isprintable() for c in url):
        raise AnalyzerError(f"--runbook-url {url!r}: a URL has no spaces or control characters "
                            "(write a space as %20)", ExitCode.USAGE)
    return url


# ---------------------------------------------------------------------------
# The rules


def _sel(s: AlertSettings, metric: str, *matchers: str) -> str:
    """``metric{selector,matchers}``."""
    inner = ",".join([m for m in (s.selector, *matchers) if m])
    return f"{metric}{{{inner}}}" if inner else metric


def _by(s: AlertSettings, *extra: str) -> str:
    return "by (" + ", ".join((*s.unit_labels, *extra)) + ")"


def _on(s: AlertSettings) -> str:
    return "on (" + ", ".join(s.unit_labels) + ")"


def recording_rules(s: AlertSettings) -> list[dict]:
    """The recording rules the alerts read: one series per unit each (and one per vLLM job)."""
    i, r = prom_duration(s.evaluation_interval_s), prom_duration(s.fresh_s)
    c = _sel(s, GENERATION_TOKENS)
    # Both gauges in one selector: `running or waiting` would keep only running (`or` matches
    # label sets without the metric name).
    demand = "{" + ",".join(m for m in (f'__name__=~"{REQUESTS_RUNNING}|{REQUESTS_WAITING}"', s.selector) if m) + "}"
    awake = _sel(s, SLEEP_STATE, 'sleep_state="awake"')
    offloaded = _sel(s, SLEEP_STATE, 'sleep_state=~"weights_offloaded|discard_all"')
    unlabeled = _sel(s, SLEEP_STATE, 'sleep_state=""')
    return [
        {"record": FLAT,
         "expr": (f"# 1: no engine of the pod generated since the previous evaluation (an increase or a reset\n"
                  f"# is a change), and its last two samples are at most {r} old; 0: it generated.\n"
                  f"min {_by(s)} (\n"
                  f"    ({c} - {c} offset {i} == bool 0)\n"
                  f"  * (idelta({c}[{r}]) == bool 0)\n"
                  f")\n")},
        {"record": DEMAND,
         "expr": (f"# Requests in the engine by the pod's own gauges: the larger of running and waiting.\n"
                  f"max {_by(s)} ({demand})\n")},
        {"record": TARGET_UP,
         "expr": (f"# `up` of the pod's vLLM target: the one with the instance and job of its vLLM series.\n"
                  f"min {_by(s)} (\n"
                  f"    {_sel(s, UP)}\n"
                  f"  * on (instance, job) group_right ()\n"
                  f"    group {_by(s, 'instance', 'job')} ({c})\n"
                  f")\n")},
        {"record": ASLEEP,
         "expr": (f"# 1: every engine of the pod sleeps (vllm:engine_sleep_state), 0: one is awake.\n"
                  f"min {_by(s)} (\n"
                  f"  max {_by(s, 'engine', 'engine_id')} (\n"
                  f"      ({awake} <= bool 0)\n"
                  f"    or ({offloaded} >= bool 1)\n"
                  f"    or ({unlabeled} > bool 0)\n"
                  f"  )\n"
                  f")\n")},
        {"record": VLLM_JOBS,
         "expr": f"# Jobs that scrape vLLM: their targets' `up` is a vLLM pod's.\ncount by (job) ({c})\n"},
    ]


def _pod_text(s: AlertSettings) -> str:
    """The pod as ``namespace/pod`` (just ``pod`` without a namespace label), in Go template text."""
    return f"{{{{ with $labels.{s.namespace_label} }}}}{{{{ . }}}}/{{{{ end }}}}{{{{ $labels.{s.pod_label} }}}}"


def alerting_rules(s: AlertSettings) -> list[dict]:
    """``VLLMPodWedged`` and ``VLLMPodDown``."""
    w = prom_duration(s.wedge_window_s)
    on = _on(s)
    pod = _pod_text(s)
    model = "{{ $labels.model_name }}"
    ns, pl = s.namespace_label, s.pod_label
    restart = f"kubectl delete pod -n {{{{ $labels.{ns} }}}} {{{{ $labels.{pl} }}}}"
    wedged = {
        "alert": WEDGED_ALERT,
        "expr": (f"# The value: requests running or waiting on the pod (the larger gauge).\n"
                 f"{DEMAND} > 0\n"
                 f"  and {on} {FLAT} == 1\n"
                 f"  and {on} {TARGET_UP} == 1\n"
                 f"  unless {on} {ASLEEP} == 1\n"),
        "for": w,
        "labels": {"severity": s.severity[WEDGED_ALERT]},
        "annotations": {
            "summary": f"vLLM pod {pod} ({model}) is wedged: no tokens generated for {w} with requests in the engine",
            "description": (
                f"vllm:generation_tokens_total of {pod} (model {model}) has not increased for {w} while its own "
                f"gauges show requests running or waiting; its target is up and its engine is not asleep. "
                f"Requests to {model} routed to this pod fail or hang (the analyzer classes them wedged-pod: "
                f"no retry fixes them). Confirm: {REQUESTS_RUNNING} stuck at one value, {REQUESTS_WAITING} "
                f"growing, {KV_CACHE_USAGE} near 1 (KV cache full), {REQUEST_SUCCESS} flat. "
                f"Fix: restart the pod ({restart})."),
            "runbook_url": f"{s.runbook_url}#{WEDGED_ALERT.lower()}",
        },
    }
    down = {
        "alert": DOWN_ALERT,
        "expr": (f"# A target of a job that scraped vLLM in the last {VLLM_JOB_MEMORY} (a pod loading its weights has\n"
                 f"# no vLLM series yet; a sidecar under its own job never had any) failing its scrapes.\n"
                 f"{_sel(s, UP)} == 0\n"
                 f"  and on (job) present_over_time({VLLM_JOBS}[{VLLM_JOB_MEMORY}])\n"),
        "for": w,
        "labels": {"severity": s.severity[DOWN_ALERT]},
        "annotations": {
            "summary": "vLLM target {{ $labels.instance }} (job {{ $labels.job }}) is down",
            "description": (
                f"Prometheus has failed to scrape the vLLM target {{{{ $labels.instance }}}} of job "
                f"{{{{ $labels.job }}}} for {w} (up == 0): the pod is starting (loading weights), crashing or "
                f"unreachable, and requests routed to it fail (the analyzer classes them pod-down). Look at the "
                f"pod's events and logs (kubectl describe pod, kubectl logs --previous)."),
            "runbook_url": f"{s.runbook_url}#{DOWN_ALERT.lower()}",
        },
    }
    return [wedged, down]


def inline_recording_rules(expr: str, s: AlertSettings) -> str:
    """``expr`` with each recorded series written out as its rule's expression: what the alert sees at
    an evaluation (a group evaluates its recording rules first, at the same timestamp), for a
    ``query_range`` over times before the rules existed. A range over a recorded series becomes a
    subquery at the group's interval."""
    interval = prom_duration(s.evaluation_interval_s)
    for rule in recording_rules(s):
        body = "\n".join(line for line in rule["expr"].splitlines() if not line.lstrip().startswith("#")).strip()
        name = re.escape(rule["record"])
        expr = re.sub(rf"(?<![\w:]){name}\[(\w+)\]", lambda m: f"({body})[{m.group(1)}:{interval}]", expr)
        expr = re.sub(rf"(?<![\w:]){name}(?![\w:])", lambda m: f"({body})", expr)
    return expr


def rule_groups(s: AlertSettings) -> dict:
    """The rule file's content: one group evaluated every evaluation interval."""
    return {"groups": [{"name": GROUP, "interval": prom_duration(s.evaluation_interval_s),
                        "rules": recording_rules(s) + alerting_rules(s)}]}


def _header(s: AlertSettings, what: str) -> str:
    return (f"# {what}, generated by `analyze alerts` (analyzer.outputs.alerts) for: {s.describe()}.\n"
            "# The wedge rule of analyzer/classification/windows.py as Prometheus rules; see docs/alerts.md and\n"
            "# docs/runbook.md. Do not edit: generate again with other options.\n")


def render_rules(s: AlertSettings) -> str:
    """The Prometheus rule file (``rule_files:``) as YAML text."""
    return _header(s, "Prometheus rule file") + to_yaml(rule_groups(s))


def render_prometheus_rule(s: AlertSettings, name: str = "vllm-wedge", namespace: str | None = None,
                           labels: dict[str, str] | None = None) -> str:
    """The same rules as a ``PrometheusRule`` object for the Prometheus operator.

    ``labels`` are the object's labels: the operator's ``ruleSelector`` picks rules by
    them (kube-prometheus-stack: ``release: <its release name>``).
    """
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = labels or {"app.kubernetes.io/part-of": "analyzer"}
    obj = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": meta,
           "spec": rule_groups(s)}
    return _header(s, "PrometheusRule object") + to_yaml(obj)


# ---------------------------------------------------------------------------
# Annotations as Prometheus renders them (for the expected alerts of the unit tests)


_TEMPLATE = re.compile(r"\{\{ with \$labels\.(\w+) \}\}(.*?)\{\{ end \}\}|\{\{ \$labels\.(\w+) \}\}")


def render_template(text: str, labels: dict[str, str]) -> str:
    """The annotation text for an alert with ``labels``: the two constructs the rules use
    (``{{ $labels.x }}``, ``{{ with $labels.x }}{{ . }}/{{ end }}``)."""
    def one(m: re.Match) -> str:
        if m.group(1):
            value = labels.get(m.group(1), "")
            return m.group(2).replace("{{ . }}", value) if value else ""
        return labels.get(m.group(3), "")
    out = _TEMPLATE.sub(one, text)
    if "{{" in out:
        raise ValueError(f"template construct not rendered here: {out!r}")
    return out


# ---------------------------------------------------------------------------
# promtool unit tests: series shaped like the sample week's episodes


@dataclass
class _Series:
    labels: dict[str, str]
    values: list  # float, or None for a missed scrape


@dataclass
class _Scenario:
    name: str
    steps: int  # scrapes
    series: list[_Series]
    # alertname -> [(scrape step from which the expression holds, step from which it no longer does, the
    # alert's labels)]; an alertname with no spans is checked never to fire.
    holds: dict[str, list[tuple[int, int, dict[str, str]]]]

    def expected(self, s: AlertSettings, name: str, k: int) -> list[dict[str, str]]:
        """The alerts firing at evaluation ``k`` (at ``k`` evaluation intervals): active from the first
        evaluation at which the expression holds, firing ``for:`` later, until it no longer holds."""
        t, i, scrape = k * s.evaluation_interval_s, s.evaluation_interval_s, s.scrape_interval_s
        out = []
        for a, b, labels in self.holds[name]:
            active = math.ceil(a * scrape / i - 1e-9) * i
            if active + s.wedge_window_s <= t + 1e-9 and t < b * scrape - 1e-9:
                out.append(labels)
        return out

    def check_evaluations(self, s: AlertSettings, name: str) -> list[int]:
        """Every evaluation at which nothing fires, and the first, a middle and the last of each firing span."""
        ks = range(math.ceil(self.steps * s.scrape_interval_s / s.evaluation_interval_s))
        firing = [k for k in ks if self.expected(s, name, k)]
        marks = set()
        for k in firing:  # the ends of each run of firing evaluations, and its middle
            if k - 1 not in firing or k + 1 not in firing:
                marks.add(k)
        runs = sorted(marks)
        marks |= {(a + b) // 2 for a, b in zip(runs[::2], runs[1::2])}
        return [k for k in ks if k in marks or k not in firing]


def _series_text(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f"{k}={json.dumps(v)}" for k, v in labels.items())
    return f"{name}{{{inner}}}"


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def encode_values(values: list) -> str:
    """promtool's expanding notation: runs of missed samples ``_xn``, arithmetic runs ``a+bxn`` (n+1 values)."""
    out, i = [], 0
    while i < len(values):
        v = values[i]
        if v is None:
            j = i
            while j < len(values) and values[j] is None:
                j += 1
            out.append("_" if j - i == 1 else f"_x{j - i}")
            i = j
            continue
        j = i + 1
        if j < len(values) and values[j] is not None:
            step = values[j] - v
            while j + 1 < len(values) and values[j + 1] is not None and math.isclose(values[j + 1] - values[j], step):
                j += 1
            n = j - i
            if n >= 2 or step == 0:
                sign = "+" if step >= 0 else "-"
                out.append(f"{_fmt(v)}x{n}" if step == 0 else f"{_fmt(v)}{sign}{_fmt(abs(step))}x{n}")
                i = j + 1
                continue
        out.append(_fmt(v))
        i += 1
    return " ".join(out)


def _scenarios(s: AlertSettings) -> list[_Scenario]:
    """Series per scenario, one sample per scrape interval (a step)."""
    step = s.scrape_interval_s
    W = math.ceil(s.wedge_window_s / step)  # the wedge window in steps
    # The counter is seen flat once a sample equals the one before and the evaluation before saw no
    # increase either: this many steps after the last increase.
    seen_flat = max(1, math.ceil(s.evaluation_interval_s / step))
    ns, pl = s.namespace_label, s.pod_label
    sel_labels = _selector_labels(s.selector)

    def unit(pod: str, model: str, instance: str, **extra) -> dict[str, str]:
        return {**sel_labels, ns: "llm", pl: pod, "model_name": model, "instance": instance, "job": "vllm",
                "engine": "0", **extra}

    def alert_labels(name: str, lab: dict[str, str]) -> dict[str, str]:
        return {"alertname": name, "severity": s.severity[name], **{k: lab[k] for k in s.unit_labels}}

    def counter(spec: list[tuple[int, float]], start: float = 1000.0) -> list:
        """[(steps, increase per step)] -> the counter's values; ``(1, RESET)`` restarts it from 0."""
        vals, v = [], start
        for n, inc in spec:
            for _ in range(n):
                v = 12.0 if inc == RESET else v + inc  # a restarted process: a few tokens since its start
                vals.append(v)
        return vals

    def gauge(spec: list[tuple[int, float]]) -> list:
        return [g for n, g in spec for _ in range(n)]

    def up_of(lab: dict[str, str], n: int, value=1.0) -> _Series:
        return _Series({k: v for k, v in lab.items() if k not in ("model_name", "engine")}, [value] * n)

    def engine(lab: dict[str, str], tokens: list, running: list, waiting: list) -> list[_Series]:
        """The series the wedge rule reads of one unit: its generation counter, requests running and waiting."""
        return [_Series({"__name__": metric, **lab}, values) for metric, values in
                ((GENERATION_TOKENS, tokens), (REQUESTS_RUNNING, running), (REQUESTS_WAITING, waiting))]

    RESET = "reset"
    out = []

    # 1. The first wedge of the week: serving, then the counter flat with requests stuck running and
    # waiting growing (KV cache full) for 4 windows, then it recovers. Its idle sibling (same model,
    # gauges at 0, counter flat all along: the router sent the model's traffic to the wedged pod) must
    # not fire.
    a = unit("glm-5-vllm-6f9c7d8b5-k7m2q", "glm-5", "10.244.17.23:8000")
    b = unit("glm-5-vllm-6f9c7d8b5-p2x4z", "glm-5", "10.244.17.24:8000")
    serve, stuck, after = 2 * W, 4 * W, 2 * W
    n = serve + stuck + after
    last_inc = serve - 1  # the step of the last increase: the offline window starts here
    out.append(_Scenario(
        "wedged pod fires; its idle sibling does not", n,
        [*engine(a, counter([(serve, 900), (stuck, 0), (after, 900)]), gauge([(serve, 3), (stuck, 3), (after, 2)]),
                 [0] * serve + list(range(1, stuck + 1)) + [0] * after),
         _Series({"__name__": KV_CACHE_USAGE, **a}, gauge([(serve, 0.6), (stuck, 0.99), (after, 0.5)])),
         _Series({"__name__": SLEEP_STATE, **a, "sleep_state": "awake"}, [1] * n),
         up_of(a, n),
         # A sidecar of the wedged pod (another target: its own instance and job) failing its scrapes
         # meanwhile: not the vLLM target's `up`.
         _Series({**up_of(a, 0).labels, "instance": "10.244.17.23:9000", "job": "sidecar"},
                 gauge([(serve, 1), (stuck, 0), (after, 1)])),
         *engine(b, counter([(n, 0)], start=5000), [0] * n, [0] * n),
         up_of(b, n)],
        # Pending once the counter is seen flat after the last increase, firing W later, until the next
        # increase ends it.
        {WEDGED_ALERT: [(last_inc + seen_flat, serve + stuck, alert_labels(WEDGED_ALERT, a))], DOWN_ALERT: []}))

    # 2. A sleeping engine: flat, requests waiting for it to wake, but asleep on purpose.
    q = unit("qwen3-vllm-7c6d9f8b4-j5w2h", "qwen3", "10.244.11.7:8000")
    n = 4 * W
    out.append(_Scenario(
        "a sleeping engine does not fire", n,
        [*engine(q, counter([(W, 400), (n - W, 0)]), [0] * n, gauge([(W, 0), (n - W, 2)])),
         _Series({"__name__": SLEEP_STATE, **q, "sleep_state": "awake"}, gauge([(W, 1), (n - W, 0)])),
         _Series({"__name__": SLEEP_STATE, **q, "sleep_state": "weights_offloaded"}, gauge([(W, 0), (n - W, 1)])),
         up_of(q, n)],
        {WEDGED_ALERT: []}))

    # 3. A restart (the counter resets between two scrapes, up stays 1): flat under demand for most of a
    # window on each side of the reset, longer than the window in all: two runs, neither a wedge.
    half = max(1, (3 * W) // 5)
    n = W + 2 * half + W
    out.append(_Scenario(
        "a restart (counter reset) does not fire", n,
        [*engine(q, counter([(W, 400), (half, 0), (1, RESET), (half - 1, 0), (W, 400)], start=50_000),
                 [2] * n, [1] * n),
         up_of(q, n)],
        {WEDGED_ALERT: []}))

    # 4. A scrape gap longer than the window (no samples of any series) between two short flat spells
    # under demand, the counter equal on both sides: unknown time, never a wedge.
    fresh = math.ceil(s.fresh_s / step)
    spell = max(1, (W - fresh) // 2)
    gap = W + 2
    n = W + spell + gap + spell + W
    miss = [(W + spell, False), (gap, True), (spell + W, False)]
    holes = [h for k, h in miss for _ in range(k)]

    def with_gap(values: list) -> list:
        return [None if h else v for v, h in zip(values, holes)]

    out.append(_Scenario(
        "a scrape gap does not make a wedge", n,
        [*engine(a, with_gap(counter([(W, 900), (spell + gap + spell, 0), (W, 900)])), with_gap([3] * n),
                 with_gap([2] * n)),
         _Series(up_of(a, n).labels, with_gap([1] * n))],
        {WEDGED_ALERT: []}))

    # 5. The replacement pod loading weights: up == 0 (no vLLM series of its own yet) in the job that
    # scrapes vLLM (qwen3 still reports there), then up. A sidecar of another job failing its scrapes
    # is not a vLLM pod.
    r = unit("glm-5-vllm-6f9c7d8b5-r4t8w", "glm-5", "10.244.19.41:8000")
    side = {**sel_labels, ns: "llm", pl: "glm-5-vllm-6f9c7d8b5-r4t8w", "instance": "10.244.19.41:9000",
            "job": "sidecar"}
    down = 2 * W
    n = W + down + W
    out.append(_Scenario(
        "a down pod fires VLLMPodDown; a failing sidecar does not", n,
        [*engine(q, counter([(n, 400)]), [1] * n, [0] * n),
         up_of(q, n),
         _Series(up_of(r, 0).labels, [None] * W + [0] * down + [1] * W),
         *engine(r, [None] * (W + down) + counter([(W, 700)], start=0), [None] * (W + down) + [1] * W,
                 [None] * (W + down) + [0] * W),
         _Series({"__name__": UP, **side}, [1] * W + [0] * down + [1] * W)],
        # Pending from the first failed scrape, firing W later, until the first good one.
        {DOWN_ALERT: [(W, W + down, {"alertname": DOWN_ALERT, "severity": s.severity[DOWN_ALERT],
                                     **up_of(r, 0).labels})],
         WEDGED_ALERT: []}))
    return out


def _selector_labels(selector: str | None) -> dict[str, str]:
    """Labels that satisfy the selector's equality matchers (the unit tests' series must match it)."""
    out = {}
    for m in re.finditer(r'(\w+)(=~|!~|!=|=)"((?:[^"\\]|\\.)*)"', selector or ""):
        name, op, value = m.groups()
        value = json.loads(f'"{value}"')
        if op == "=":
            out[name] = value
        elif op == "=~":
            alternatives = value.split("|")
            try:
                matches = re.fullmatch(value, alternatives[0]) is not None
            except re.error:  # RE2 syntax Python does not read (\z, \pL): no series made from it
                matches = False
            if matches:
                out[name] = alternatives[0]
            else:
                raise AnalyzerError(f"--unit-tests: cannot make series that match {name}=~{value!r}", ExitCode.USAGE)
    return out


def unit_tests(s: AlertSettings, rules_file: str) -> dict:
    """A promtool test file (``promtool test rules FILE``) for the rules of ``s`` in ``rules_file``."""
    interval = prom_duration(s.evaluation_interval_s)
    rules = {r["alert"]: r for r in alerting_rules(s)}
    tests = []
    for sc in _scenarios(s):
        checks = []
        for name in sc.holds:
            for k in sc.check_evaluations(s, name):
                alerts = sc.expected(s, name, k)
                checks.append({
                    "eval_time": prom_duration(k * s.evaluation_interval_s) if k else "0s",
                    "alertname": name,
                    "exp_alerts": [{"exp_labels": labels,
                                    "exp_annotations": {k: render_template(v, labels)
                                                        for k, v in rules[name]["annotations"].items()}}
                                   for labels in alerts],
                })
        tests.append({
            "name": sc.name,
            "interval": prom_duration(s.scrape_interval_s),
            "input_series": [{"series": _series_text(x.labels.get("__name__", UP),
                                                     {k: v for k, v in x.labels.items() if k != "__name__"}),
                              "values": encode_values(x.values)} for x in sc.series],
            "alert_rule_test": checks,
        })
    return {"rule_files": [rules_file], "evaluation_interval": interval, "tests": tests}


def render_unit_tests(s: AlertSettings, rules_file: str) -> str:
    return _header(s, "promtool unit tests (promtool test rules)") + to_yaml(unit_tests(s, rules_file))


# ---------------------------------------------------------------------------
# YAML


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    text = str(v)
    if _PLAIN.match(text) and text.lower() not in _RESERVED:
        return text
    if '"' in text and text.isprintable():
        return "'" + text.replace("'", "''") + "'"  # PromQL selectors read better single-quoted
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def to_yaml(obj, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists and scalars; multi-line strings as literal blocks."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(obj, dict):
        if not obj:
            return pad + "{}\n"
        for k, v in obj.items():
            key = _scalar(k)
            if isinstance(v, str) and "\n" in v:
                chomp = "" if v.endswith("\n") else "-"
                body = "".join(f"{pad}  {line}\n" if line else "\n" for line in v.rstrip("\n").split("\n"))
                lines.append(f"{pad}{key}: |{chomp}\n{body}")
            elif isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{key}:\n" + to_yaml(v, indent + 2))
            else:
                lines.append(f"{pad}{key}: {_scalar(v) if not isinstance(v, (dict, list)) else ('{}' if isinstance(v, dict) else '[]')}\n")
        return "".join(lines)
    if isinstance(obj, list):
        if not obj:
            return pad + "[]\n"
        for item in obj:
            if isinstance(item, (dict, list)) and item:
                body = to_yaml(item, indent + 2)
                lines.append(f"{pad}- " + body[indent + 2:])
            else:
                lines.append(f"{pad}- {_scalar(item) if not isinstance(item, (dict, list)) else '[]'}\n")
        return "".join(lines)
    return pad + _scalar(obj) + "\n"
