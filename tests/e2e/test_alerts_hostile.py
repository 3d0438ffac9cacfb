"""`analyze alerts` validates what it writes: every accepted input makes a rule file promtool accepts,
with the selector meaning what the user wrote; every input Prometheus would refuse is refused first.

Selector values are PromQL strings in any of their quotes (`namespace='llm'` is the namespace llm,
not `'llm'`), regexes are RE2's, durations are bounded, the runbook URL holds no template syntax,
and the rules and their unit tests are two files. promtool is the judge (`promtool check rules` on
every accepted input, `promtool test rules` on some); without it these skip, except under CI.
"""

from __future__ import annotations


import pytest

from analyzer.core.errors import ExitCode
from analyzer.io.prometheus import parse_selector
from analyzer.io.promql import re2_problem, unquote
from tests.support.prometheus import promtool
from tests.support.cli import analyze

#: Accepted: (the options, the selector as it must reach the rules, or None when no selector is given).
ACCEPTED = {
    "single-quoted": (["--prometheus-selector", "namespace='llm'"], 'namespace="llm"'),
    "backticked": (["--prometheus-selector", "namespace=`llm`,job=~`vllm|vllm-(a|b)`"],
                   'namespace="llm",job=~"vllm|vllm-(a|b)"'),
    "double-quoted escapes": (["--prometheus-selector", r'team="q\"a",site="caf\u00e9"'], 'team="q\\"a",site="café"'),
    "single quote inside": (["--prometheus-selector", r"owner='o\'brien'"], 'owner="o\'brien"'),
    "bare": (["--prometheus-selector", "{namespace=llm, job!=sidecar}"], 'namespace="llm",job!="sidecar"'),
    "regexes RE2 reads": (["--prometheus-selector", r'pod=~"vllm-\\d+\\z",zone!~"(?i)eu-.*",x=~"[[:alpha:]]+"'],
                          r'pod=~"vllm-\\d+\\z",zone!~"(?i)eu-.*",x=~"[[:alpha:]]+"'),
    "longest durations": (["--wedge-window", "1d", "--evaluation-interval", "1h", "--scrape-interval", "1h"], None),
    "runbook with query and anchor": (["--runbook-url", "https://wiki.example/runbook?x=1&y=%7B"], None),
}

#: Refused: (the options, words of the one line that says why).
REFUSED = {
    "unbalanced paren": (["--prometheus-selector", 'job=~"("'], "not a regex Prometheus reads"),
    "backreference": (["--prometheus-selector", r'job=~"(a)\\1"'], "backreference"),
    "lookahead": (["--prometheus-selector", 'job=~"(?=vllm)v.*"'], "lookaround"),
    "possessive": (["--prometheus-selector", 'job=~"a++"'], "possessive"),
    "huge repeat": (["--prometheus-selector", 'job=~"a{2000}"'], "repeat count over 1000"),
    "unknown escape": (["--prometheus-selector", r'job="v\llm"'], r"\l is not an escape"),
    "byte escape": (["--prometheus-selector", r'job="\xff"'], "not a character"),
    "open quote": (["--prometheus-selector", "job='vllm"], "left open"),
    "absurd window": (["--wedge-window", "999999999d"], "--wedge-window"),
    "long evaluation": (["--evaluation-interval", "2h"], "--evaluation-interval 2h is longer"),
    "long scrape": (["--scrape-interval", "90m", "--wedge-window", "1d"], "--scrape-interval 1h30m is longer"),
    "template in runbook": (["--runbook-url", "https://x/{{ $labels.pod }}"], "template syntax"),
    "closing braces in runbook": (["--runbook-url", "https://x/}}"], "template syntax"),
    "space in runbook": (["--runbook-url", "https://x/run book"], "no spaces"),
}


@pytest.mark.prometheus
@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_every_accepted_input_makes_rules_promtool_accepts(tmp_path, name):
    options, selector = ACCEPTED[name]
    p = analyze("alerts", *options, "-o", "rules.yml", "--unit-tests", "tests.yml", cwd=tmp_path)
    if name in ("regexes RE2 reads",):  # no series can be made from those regexes: rules only
        assert p.returncode == ExitCode.USAGE and "--unit-tests: cannot make series" in p.stderr, p.stderr
        assert not (tmp_path / "rules.yml").exists()  # refused before anything was written
        p = analyze("alerts", *options, "-o", "rules.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rules = (tmp_path / "rules.yml").read_text()
    if selector:  # in every series selector, as the user meant it
        assert rules.count(selector) >= 5, rules
    checked = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    if (tmp_path / "tests.yml").exists():
        tested = promtool("test", "rules", "tests.yml", cwd=tmp_path)
        assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_every_input_prometheus_would_refuse_is_refused_first(tmp_path, name):
    options, words = REFUSED[name]
    p = analyze("alerts", *options, "-o", "rules.yml", cwd=tmp_path)
    assert p.returncode == ExitCode.USAGE, p.stderr
    line = p.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("analyze: error: ") and words in line, line
    assert not (tmp_path / "rules.yml").exists()


def test_the_same_file_for_rules_and_tests_is_refused(tmp_path):
    (tmp_path / "rules.yml").write_text("# mine\n")
    for tests in ("rules.yml", "./rules.yml", str(tmp_path / "rules.yml")):
        p = analyze("alerts", "-o", "rules.yml", "--unit-tests", tests, cwd=tmp_path)
        assert p.returncode == ExitCode.USAGE and "are the same file" in p.stderr, p.stderr
    (tmp_path / "link.yml").symlink_to(tmp_path / "rules.yml")
    p = analyze("alerts", "-o", "rules.yml", "--unit-tests", "link.yml", cwd=tmp_path)
    assert p.returncode == ExitCode.USAGE and "are the same file" in p.stderr, p.stderr
    assert (tmp_path / "rules.yml").read_text() == "# mine\n"


def test_a_selector_keeps_its_meaning_for_the_live_queries_too():
    """`analyze --prometheus-selector` and `analyze alerts` share the parser."""
    assert parse_selector("namespace='llm'") == 'namespace="llm"'
    assert parse_selector("namespace=`l\\lm`") == 'namespace="l\\\\lm"'  # raw: the backslash is a character
    assert unquote(r"'\x41\101\u00e9\U0001F600'") == "AAé😀"


@pytest.mark.parametrize("pattern", [r"(a|b", r"a)", r"a{2,1}", r"*a", r"a\1", r"(?<=a)b", r"(?>a)", r"(?P=x)",
                                     r"a\Z", r"x{1001}", r"\k<x>"])
def test_re2_problems_are_found(pattern, tmp_path):
    assert re2_problem(pattern), pattern


@pytest.mark.prometheus
@pytest.mark.parametrize("pattern", [r"vllm-.*", r"(?i)glm|qwen", r"a\z", r"\pL+", r"\p{Greek}", r"[[:digit:]]{2}",
                                     r"(?P<n>x)", r"(?U)a+", r"a(?i)b", r"[\d\s]", r"x{1000}", ""])
def test_re2_syntax_is_accepted_and_promtool_agrees(pattern, tmp_path):
    assert re2_problem(pattern) is None, pattern
    escaped = pattern.replace("\\", "\\\\")
    p = analyze("alerts", "--prometheus-selector", f'pod=~"{escaped}"', "-o", "rules.yml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    checked = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
