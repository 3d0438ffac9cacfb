"""Credentials planted in a small week never reach a person: the report, --json, the text
summary, stderr. The real command line runs on real files; a real HTTP server on
127.0.0.1 poses as a Prometheus that leaks a token in its error body and warnings.

Also: chart labels are HTML-escaped once (no ``&quot;``), and control characters
from the logs (ESC, BEL) never reach the page raw. The database keeps the raw
records (the operator's own data).
"""

from __future__ import annotations

import json
import re
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import duckdb
import pytest

from analyzer.core.errors import ExitCode
from analyzer.core.scrub import REDACTED, scrub, scrub_json
from tests.support.records import TOOL_RESULT, at, request, response_error, response_ok, write_jsonl
from tests.support.repo import REPO
from tests.support.cli import Ran
from tests.support.cli import analyze as run_analyze
from tools.loopback import serving

ROOT = REPO

PEM_BODY = "MIIEpAIBAAKCAQEAPEMSECRETBODYLINE0123456789abcdefABCDEF"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJKV1RTRUNSRVQifQ.c2lnbmF0dXJlSldUU0VDUkVUeHl6"

#: 40 characters of base64, as AWS's secret access keys are.
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/AWSPROSESECRET0KEY"
assert len(AWS_SECRET) == 40
#: name -> (the text planted, the pieces of it that must never be shown).
FORMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "bearer": ("sent Authorization: Bearer tokBEARERSECRET1234567890 upstream", ("tokBEARERSECRET",)),
    "sk": ("key sk-ant-api03-SKSECRET1234567890abcdefgh rejected", ("SKSECRET",)),
    "akia": ("aws AKIASECRETKEYID12345 denied", ("AKIASECRETKEYID12345",)),
    "jwt": (f"401 for {JWT} (expired)", tuple(JWT.split("."))),
    "pem": (f"bad key: -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX\n"
            "-----END RSA PRIVATE KEY----- end", (PEM_BODY, "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX")),
    "google": ("maps key AIzaSyGOOGLESECRET_0123456789abcdefghij invalid", ("GOOGLESECRET",)),
    "hf": ("hub said hf_HUGGINGFACESECRET0123456789abcd is revoked", ("HUGGINGFACESECRET",)),
    "slack": ("notify xoxb-1234567890-0987654321-SLACKSECRETabcdefgh failed", ("SLACKSECRET",)),
    "url": ("connect postgres://admin:p@ssURLSECRET/w+rd@db.internal:5432/app failed", ("ssURLSECRET", "w+rd")),
    "github": ("push ghp_GITHUBSECRET0123456789abcdefghijklmn and github_pat_11ABCDEFG0PATSECRET_0123456789abcdefghij failed",
               ("GITHUBSECRET", "PATSECRET")),
    "pairs": ("retry api_key=GENERICKEYSECRET1 token=TOKENPAIRSECRET7 password=PASSWORDPAIRSECRET9 failed",
              ("GENERICKEYSECRET1", "TOKENPAIRSECRET7", "PASSWORDPAIRSECRET9")),
    "basic": ("proxy sent Basic dXNlcjpCQVNJQ1NFQ1JFVA== upstream", ("dXNlcjpCQVNJQ1NFQ1JFVA",)),
    # camelCase and PascalCase key names (OAuth, AWS STS/SDK output), an Azure connection
    # string, signed URLs (S3, Azure SAS) and curl's -u user:password
    "camel": ('sts said {"accessToken": "CAMELACCESSSECRET1", "SecretAccessKey": "AWSSTSSECRET2", '
              '"SessionToken": "STSSESSIONSECRET3"} refreshToken=REFRESHSECRET4 failed',
              ("CAMELACCESSSECRET1", "AWSSTSSECRET2", "STSSESSIONSECRET3", "REFRESHSECRET4")),
    "azure": ("blob DefaultEndpointsProtocol=https;AccountName=a;AccountKey=AZUREACCOUNTSECRET5;EndpointSuffix=x failed",
              ("AZUREACCOUNTSECRET5",)),
    "signed": ("GET https://b.s3.amazonaws.com/k?X-Amz-Signature=AMZSIGSECRET6&sv=1&sig=SASSIGSECRET7 403",
               ("AMZSIGSECRET6", "SASSIGSECRET7")),
    "curl": ("ran curl -u alice:CURLPASSSECRET8 https://x", ("CURLPASSSECRET8",)),
    # an AWS secret access key in prose, a Google OAuth token, a Slack webhook, a Telegram bot token
    "aws_prose": (f"aws secret {AWS_SECRET} is invalid", ("AWSPROSESECRET",)),
    "google_oauth": ("oauth ya29.a0AfH6SMBxGOOGLEOAUTHSECRET_0123456789-abc expired", ("GOOGLEOAUTHSECRET",)),
    "slack_hook": ("notify https://hooks.slack.com/services/T0SLACKT/B0SLACKB/SLACKHOOKSECRET0123456789 failed",
                   ("SLACKHOOKSECRET", "T0SLACKT/B0SLACKB")),
    "telegram": ("bot 123456789:AAHdqTcvCH1vGWJxTELEGRAMSECRET01234 unauthorized", ("TELEGRAMSECRET",)),
}
#: Every piece that must not be shown, anywhere.
SECRETS = [piece for _, pieces in FORMS.values() for piece in pieces]
QUOTED_MODEL = 'glm-5 "beta"'
ESC_TEXT = "colour \x1b[31mred\x1b[0m and a bell \x07 here"


def analyze(*args: str, **kw) -> Ran:
    """The command as a user runs it from the repository (in this process: tests/support/cli.py), stdout a pipe."""
    return run_analyze(*args, cwd=ROOT, **kw)


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


# ---------------------------------------------------------------------------
# The scrubber itself


@pytest.mark.parametrize("name", sorted(FORMS))
def test_every_form_is_scrubbed_and_the_context_stays(name):
    text, pieces = FORMS[name]
    out = scrub(text)
    assert not [p for p in pieces if p in out], out
    assert REDACTED in out
    assert scrub(out) == out  # idempotent
    # the words around the secret stay readable
    first, last = text.split()[0], text.split()[-1]
    assert out.startswith(first) and out.endswith(last)


@pytest.mark.parametrize("text,expected", [
    ("postgres://admin:p@ss/w+rd@db.internal:5432/app", "postgres://admin:[REDACTED]@db.internal:5432/app"),
    ("https://u:p@host/path?email=a@b.com", "https://u:[REDACTED]@host/path?email=a@b.com"),
    ("git clone https://ghtoken1234@github.com/x/y", "git clone https://[REDACTED]@github.com/x/y"),
    ("x https://u:pa?ss@host y", "x https://u:[REDACTED]@host y"),
    ("http://127.0.0.1:9090/api/v1/query?query=up", "http://127.0.0.1:9090/api/v1/query?query=up"),
    (r'{"dsn": "postgres:\/\/admin:p@ss\/w+rd@db:5432\/app"}', r'{"dsn": "postgres:\/\/admin:[REDACTED]@db:5432\/app"}'),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAA",  # cut off before its END
     "-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]-----END OPENSSH PRIVATE KEY-----"),
    ("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
     "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"),  # not a secret
    ("redirect?x=1%26tok%3Dhf_abcdefghijklmnopqrstuvwxyz", "redirect?x=1%26tok%3D[REDACTED]"),
    ("Basic authentication is off; task-1234567890abcdefghij ran", "Basic authentication is off; task-1234567890abcdefghij ran"),
    ("hf_hub_download failed for xox", "hf_hub_download failed for xox"),
    ("maxTokens: 10, promptTokens: 5, max_tokens=4096, thinking_token_budget=512",
     "maxTokens: 10, promptTokens: 5, max_tokens=4096, thinking_token_budget=512"),  # counts, not secrets
    # a path is not a key (issue 47: an error about ../../etc/passwd came out as "[REDACTED] such file")
    ("cannot open ../../etc/passwd: No such file or directory", "cannot open ../../etc/passwd: No such file or directory"),
    ("/run/secrets/token: permission denied", "/run/secrets/token: permission denied"),
    # 40 characters after "secret" that are no key: a commit id (lower-case hex), a path
    ("secret rotated in commit 3f9c1e0b8a7d6c5b4a39281706f5e4d3c2b1a098 yesterday",
     "secret rotated in commit 3f9c1e0b8a7d6c5b4a39281706f5e4d3c2b1a098 yesterday"),
    ("aws s3 cp s3://bucket/2026/11/16/chunk-0a1b2c3d.jsonl . --region us-east-1",
     "aws s3 cp s3://bucket/2026/11/16/chunk-0a1b2c3d.jsonl . --region us-east-1"),
    ("at 12:30:45 model glm-5:AWQ answered; see hooks.slack.com for the channel",
     "at 12:30:45 model glm-5:AWQ answered; see hooks.slack.com for the channel"),
    ("https://hooks.slack.com/services/T00/B00/XXXXXXXX", "https://hooks.slack.com/services/[REDACTED]"),
    ("https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0/sendMessage",
     "https://api.telegram.org/bot[REDACTED]/sendMessage"),
])
def test_scrub_keeps_scheme_host_and_prose(text, expected):
    assert scrub(text) == expected


@pytest.mark.parametrize("value", [None, "", 0, 12.5, b"hf_HUGGINGFACESECRET0123456789abcd\xff", ["x"], "\x00\udcff",
                                   "{" * 5000, "a" * 100_000 + "://" + "b:" + "@" * 50_000])
def test_scrub_is_total(value):
    out = scrub(value)
    assert out is value or isinstance(out, str)
    assert "HUGGINGFACESECRET" not in str(out)
    scrub_json({"arguments": value if isinstance(value, str) else str(value)})


def test_scrub_is_idempotent_on_random_text():
    from hypothesis import given, settings, strategies as st

    alphabet = st.sampled_from(list("abcAZ09:/@=_-+.%?#'\" \n{}[]") + ["Bearer ", "Basic ", "api_key", "://",
                                                                      "hf_", "eyJ", "-----BEGIN RSA PRIVATE KEY-----",
                                                                      "sk-", "AKIA", "password", "cookie: "])

    @settings(max_examples=400, deadline=None)
    @given(st.lists(alphabet, max_size=40).map("".join))
    def check(text):
        once = scrub(text)
        assert scrub(once) == once

    check()


# ---------------------------------------------------------------------------
# A small week with every form planted, through the real command line


def _week(tmp_path: Path) -> Path:
    recs: list[dict] = []
    for i, (name, (text, _)) in enumerate(sorted(FORMS.items())):
        rid, sid = f"{0xa1000000 + i:08x}", f"s-leak-{name}"
        model = QUOTED_MODEL if i % 2 else "glm-5"
        calls = [{"name": "query", "arguments": json.dumps({"sql": "SELECT 1", "note": text})}]
        recs.append(request(rid, at(i), session=sid, model=model, question=f"why? {text}", tool_results=TOOL_RESULT))
        recs.append(response_error(rid, at(i + 0.1), f"Provider returned 500: {text}", session=sid, model=model))
        ok = f"{0xa2000000 + i:08x}"
        recs.append(request(ok, at(i + 0.2), session=sid, model=model, question=text))
        recs.append(response_ok(ok, at(i + 0.3), content=f"preview {text}", tool_calls=calls, session=sid, model=model))
    rid = "a3000000"
    recs.append(request(rid, at(20), session="s-esc", question=ESC_TEXT, tool_results=TOOL_RESULT))
    recs.append(response_error(rid, at(20.1), f"Provider returned 500: {ESC_TEXT}", session="s-esc"))
    path = write_jsonl(tmp_path / "logs" / "week.jsonl", recs)
    # A malformed line holding a token: quarantined, and its reason is shown.
    with path.open("a", encoding="utf-8") as f:
        f.write('{"type": "response", "error": "hf_HUGGINGFACESECRET0123456789abcd broken\n')
    return path


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("hostile")
    logs, db = _week(tmp), tmp / "w.duckdb"
    p = analyze(str(logs), "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    return logs, db, p


def test_json_summary_shows_no_credential(week):
    _, _, p = week
    summary = json.loads(p.stdout)
    assert leaked(p.stdout) == [] and leaked(p.stderr) == []
    assert REDACTED in p.stdout
    assert summary["quarantined_lines"] >= 1 and summary["turns"] > 0


def test_text_summary_shows_no_credential(week):
    _, db, _ = week
    p = analyze("--db", str(db))
    assert p.returncode == 0, p.stderr
    assert leaked(p.stdout + p.stderr) == []
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout


def test_report_shows_no_credential_and_no_raw_control_character(week, tmp_path):
    _, db, _ = week
    out = tmp_path / "r.html"
    p = analyze("report", "--db", str(db), "--since", "2026-11-16", "--until", "2026-11-17", "-o", str(out))
    assert p.returncode == 0, p.stderr
    page = out.read_text(encoding="utf-8")
    assert "s-leak-" in page and "s-esc" in page  # the failing sessions are shown ...
    assert leaked(page) == [] and leaked(p.stdout + p.stderr) == []  # ... without a credential
    assert REDACTED in page
    # Control characters from the logs are shown as escapes, never raw.
    assert "\x1b" not in page and "\x07" not in page
    assert "colour \\x1b[31mred" in page
    # Chart labels are escaped once: a quote in a model name is a quote, not &quot;.
    scripts = [s for s in re.findall(r"<script>(drawChart\(.*?)</script>", page, re.S)]
    assert scripts
    joined = "".join(scripts)
    assert "&quot;" not in joined and "\\u0026quot;" not in joined and "&#34;" not in joined
    assert 'glm-5 \\"beta\\"' in joined


def test_the_database_keeps_the_raw_record(week):
    _, db, _ = week
    con = duckdb.connect(str(db), read_only=True)
    try:
        raw = con.execute("SELECT string_agg(raw::VARCHAR, '\n') FROM records").fetchall()[0][0]
    finally:
        con.close()
    assert "HUGGINGFACESECRET" in raw and PEM_BODY in raw


# ---------------------------------------------------------------------------
# An upstream that leaks: a Prometheus answering 500 (and warnings) with a token


HF = "hf_PROMSECRETTOKEN0123456789abcdefgh"


@pytest.fixture
def leaky_prometheus() -> Iterator[dict]:
    state = {"status": 500}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if state["status"] == 500:
                doc = {"status": "error", "errorType": "internal",
                       "error": f"query failed: remote read with Authorization {HF} refused"}
            else:
                doc = {"status": "success", "data": {"resultType": "matrix", "result": []},
                       "warnings": [f"remote store used token={HF} and {HF}"]}
            body = json.dumps(doc).encode()
            self.send_response(state["status"])
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
        state["url"] = url
        yield state


def test_a_prometheus_error_body_token_is_not_printed(leaky_prometheus, week, tmp_path):
    logs, _, _ = week
    p = analyze(str(logs), "--db", str(tmp_path / "p.duckdb"), "--prometheus", leaky_prometheus["url"],
                "--prometheus-timeout", "20s")
    assert p.returncode == ExitCode.UPSTREAM, p.stderr
    assert "answered status 'error' (HTTP 500)" in p.stderr
    assert "PROMSECRETTOKEN" not in p.stderr + p.stdout
    assert REDACTED in p.stderr


def test_prometheus_warnings_are_scrubbed_on_stderr_and_in_json(leaky_prometheus, week, tmp_path):
    leaky_prometheus["status"] = 200
    logs, _, _ = week
    p = analyze(str(logs), "--db", str(tmp_path / "p.duckdb"), "--prometheus", leaky_prometheus["url"],
                "--prometheus-timeout", "20s", "--json")
    assert p.returncode == 0, p.stderr
    assert "Prometheus warning" in p.stderr
    assert "PROMSECRETTOKEN" not in p.stderr + p.stdout
    assert leaked(p.stdout + p.stderr) == []


def test_an_s3_error_message_is_scrubbed():
    """S3's own words (a denied request quoting its token or key) reach stderr scrubbed."""
    from botocore.exceptions import ClientError

    from analyzer.io.objectstore import _remote_error

    exc = ClientError({"Error": {"Code": "AccessDenied",
                                 "Message": "denied: X-Amz-Security-Token=S3TOKENSECRET42 for AKIASECRETKEYID12345"}},
                      "ListObjectsV2")
    err = _remote_error(exc, "s3://bucket/logs", "http://127.0.0.1:9")
    assert err.exit_code == ExitCode.UPSTREAM and "AccessDenied" in str(err)
    assert "S3TOKENSECRET42" not in str(err) and "AKIASECRETKEYID12345" not in str(err)


@pytest.mark.parametrize("text", ["a." * 20000 + "://x y@", "http://" + "a:" * 20000 + "@", "a_" * 20000 + "token",
                                  "-----BEGIN RSA PRIVATE KEY-----" + "-----END X" * 5000, "api_key: " + "\\" * 40000,
                                  "aws secret " * 4000 + "A1/" * 13000, "12345:A" * 6000,
                                  "hooks.slack.com/services/" + "a/" * 20000, "ya29." * 8000])
def test_scrub_takes_linear_time_on_hostile_shapes(text):
    """40,000 characters in well under a second (a quadratic pattern took seconds here)."""
    import time

    started = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - started < 1.0


def test_an_error_about_a_path_shows_the_path(tmp_path):
    """Issue 47: `../../etc/passwd: no such file` came out as `../../etc/[REDACTED] such file`."""
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    p = run_analyze("../../etc/passwd", "--db", tmp_path / "x.duckdb", cwd=cwd)
    assert p.returncode == ExitCode.NO_INPUT
    assert p.stderr == "analyze: error: ../../etc/passwd: no such file, directory or matching log files\n"
