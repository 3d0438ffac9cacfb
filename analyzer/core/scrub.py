"""Credential scrubbing: the one scrubber for every text a person reads or forwards.

Log text (questions, errors, tool-call arguments, model and pod names) and the
texts of upstream servers (Prometheus error bodies, S3 errors, replay endpoint
answers) can carry credentials: agents pass S3 keys to a SQL tool, models write
``CREATE SECRET`` statements, errors echo headers, URLs and tokens. Everything
shown goes through :func:`scrub` (or :func:`scrub_json` for parsed JSON): the
terminal summary and ``--json`` (via :mod:`analyzer.core.safetext` and
:mod:`analyzer.outputs.oncall`), the HTML report (:mod:`analyzer.outputs.report.build`), errors
and warnings on stderr (:mod:`analyzer.cli.exits`, :mod:`analyzer.cli.terminal`) and
the replay's stored texts (:mod:`analyzer.jobs.replay`). The database keeps the raw
records: they are the operator's own data.

What is scrubbed (the value goes, the key or scheme stays, so an operator still
sees *what* was there):

* values of keys named like secrets, in JSON, ``key: value``, ``key=value``,
  query strings and URL-encoded pairs (``api_key``, ``token``, ``password``,
  ``X-Api-Key``, ``aws_secret_access_key``, ``PGPASSWORD`` ...), command-line
  flags (``--password X``), DuckDB ``KEY_ID '...'``/``SECRET '...'`` literals,
  cookie values;
* ``Authorization`` headers of any scheme, ``Bearer`` tokens, ``Basic`` credentials;
* the user info of a URL, of any shape (a password holding ``@``, ``/`` or ``+``
  included): ``postgres://bob:***@db`` keeps the user, scheme and host;
* JSON Web Tokens (``eyJ...``), with or without ``Bearer``;
* PEM private-key blocks (RSA, EC, OpenSSH, PGP ...), whole, cut-off ones too;
* vendor keys by their prefix: OpenAI/Anthropic/OpenRouter ``sk-...``, AWS
  ``AKIA``/``ASIA``, Google ``AIza...`` and OAuth ``ya29.`` tokens, GitHub
  ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``, GitLab ``glpat-``,
  Hugging Face ``hf_``, Slack ``xox?-`` and ``xapp-``, Stripe ``sk_live_``/``rk_live_``,
  npm ``npm_``, PyPI ``pypi-``;
* by their shape where a word says what they are: an AWS secret access key (40
  characters of base64, mixed case and digits) after ``aws`` or ``secret`` in prose;
  Telegram bot tokens (``123456789:AA...``); the secret path of Slack webhook URLs
  (``https://hooks.slack.com/services/[REDACTED]``).

Why our own list and not a library: Yelp's ``detect-secrets`` (the best-kept
candidate) is a scanner for source files, not a scrubber. Its 1.5.0 has no
Google, Hugging Face or current OpenAI/Anthropic key pattern, flags only the
first line of a PEM block, splits a URL password holding ``@`` or ``/``, and its
entropy plugins flag ordinary words of an error text (``said``, ``failed``), which
a report cannot blank out; it took ~1 ms per 220-character error text against
~5 µs here, and pulls in PyYAML and requests. The patterns below are few, each tested
(tests/unit/outputs/test_report.py, tests/e2e/test_scrub_hostile.py).

:func:`scrub` is total (any input, never raises), idempotent
(``scrub(scrub(t)) == scrub(t)``) and keeps the text readable.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

REDACTED = "[REDACTED]"

# The core of a key name that holds a secret. A key matches when, split on `_`/`-`,
# it ends in one of these (optionally followed by id/key/value): `api_key`,
# `X-Api-Key`, `aws_secret_access_key`, `s3_secret`, `github_token`, `password`.
# `max_tokens`, `prompt_tokens` and `thinking_token_budget` do not match.
_KEY_CORE = (
    r"(?:secret|password|passwd|pwd|passphrase|token|authorization|auth|apikey|api[_-]?key"
    r"|access[_-]?key|account[_-]?key|s3[_-]?key|private[_-]?key|credentials?|session[_-]?key"
    r"|signature|sig)"
)
# Environment-style and camelCase names glue a prefix to the word: PGPASSWORD, DBSECRET,
# accessToken, refreshToken, SessionToken, SecretAccessKey (matched case-insensitively).
_GLUED = r"(?:[a-z0-9]+(?:password|passwd|secret|token|accesskey|accountkey|passphrase))"
_KEY_NAME = rf"(?:[a-z0-9]+[_-])*(?:{_GLUED}|{_KEY_CORE})(?:[_-](?:id|key|value|access[_-]key))?"
# JSON keys also hide cookies whole (in text, _COOKIE_RE keeps the cookie names).
SECRET_KEY_RE = re.compile(rf"(?i)^(?:{_KEY_NAME}|(?:set-)?cookies?)$")

# key: value / "key": "value" / key='value' / \"key\": \"value\" (JSON inside a string)
# / key=value in a query string. A name that ends a path (`../../etc/passwd: No such file`) is
# a file, not a key.
_KEY_VALUE_RE = re.compile(
    rf"""(?ix)
    (?<![a-z0-9_/-])
    (?P<key>\\?["']?{_KEY_NAME}\\?["']?\s*[:=]\s*)
    (?P<value>
        \\"(?:(?!\\").)*\\"          # \"...\" inside a JSON string
      | "(?:[^"\\]|\\.)*"            # "..."
      | '[^']*'                      # '...'
      | \[REDACTED\]                 # scrubbed already (scrub is idempotent)
      | ["'][^\n]*                  # a quoted value cut off (error bodies are cut at 1,000 chars)
      | (?!(?:bearer|basic|token|digest|negotiate|apikey)\s)[^\s,;&}}\]"'\\]+  # bare value (auth schemes apart)
    )"""
)
# DuckDB CREATE SECRET literals: KEY_ID '...', SECRET '...', SESSION_TOKEN '...'.
_DUCKDB_SECRET_RE = re.compile(r"(?i)\b(KEY_ID|SECRET|SESSION_TOKEN)(\s+)'[^']*'")
# The whole token, `abc:SECRET` included (some gateways join an id and a secret).
_BEARER_RE = re.compile(r"""(?i)\b(Bearer\s+)[^\s"',;\\]+""")
# `Basic <base64 of user:password>` anywhere (not only after Authorization:): redacted when
# the base64 decodes to printable text holding a colon, so "Basic authentication" stays.
_BASIC_RE = re.compile(r"(?i)\b(Basic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=]|\[REDACTED\])")
# Command-line flags: --password X, --password=X, --api-key 'X', --token X.
_FLAG_RE = re.compile(
    r"""(?i)(?<![a-z0-9])(--?[a-z0-9-]*(?:password|passwd|secret|token|api-key|apikey)\s*(?:=|\s)\s*)((?:"[^"]*"|'[^']*')[^\s"']*|[^\s"']+)""")
# curl's -u user:password (the user stays).
_CURL_USER_RE = re.compile(r"""(?<![^\s"'])(-u\s+["']?[^\s:"']+:)([^\s"']+)""")
# URL-encoded pairs: access_token%3DVALUE (up to & or %26), also after %26 or %3F.
_URLENC_RE = re.compile(
    rf"""(?ix)((?:(?<=%26)|(?<=%3f)|(?<![a-z0-9_-])){_KEY_NAME}%3d)((?:(?!%26)[^&\s"'])+)""")
# Cookie / Set-Cookie headers: every cookie's value goes, the names stay.
_COOKIE_RE = re.compile(r"""(?i)\b((?:set-)?cookie\\?["']?\s*:\s*\\?["']?)([^\r\n"\\]*)""")
_COOKIE_PAIR_RE = re.compile(r"([^=;\s]+=)([^;]*)")
# An Authorization header with any scheme (Basic, Token, Digest ...): the scheme
# stays, the credentials go. Words like "basic" or "token" in prose are left alone.
_AUTH_HEADER_RE = re.compile(r"""(?i)(authorization\\?["']?\s*[:=]\s*\\?["']?[A-Za-z-]+\s+)[^\s"',;\\]+""")
# PEM private keys, whole: from BEGIN to the matching END, or to the end of a text
# that was cut off before it. Public keys and certificates are not secrets.
_PEM_RE = re.compile(
    r"(-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----)"
    r"(?:(?!-----END ).)*?(?:-----END (?P=kind)-----|-----END [A-Z0-9 ]*-----|\Z)",
    re.S,
)
# Tokens known by their shape. Each alternative starts with a literal prefix.
# A token starts a word, or follows a URL escape (`%3Dhf_...`).
_TOKEN_START = r"(?:(?<![A-Za-z0-9_-])|(?<=%[0-9A-Fa-f][0-9A-Fa-f]))"
_TOKEN_SHAPES_RE = re.compile(
    _TOKEN_START + r"(?:"
    r"sk-[A-Za-z0-9_-]{16,}"                    # OpenAI, Anthropic (sk-ant-), OpenRouter (sk-or-v1-)
    r"|(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}"     # AWS access key ids
    r"|AIza[0-9A-Za-z_-]{30,}"                  # Google API keys
    r"|gh[pousr]_[A-Za-z0-9]{30,}"              # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{30,}"            # GitHub fine-grained tokens
    r"|glpat-[A-Za-z0-9_-]{20,}"                # GitLab
    r"|hf_[A-Za-z0-9]{20,}"                     # Hugging Face
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"           # Slack bot/user/app tokens
    r"|xapp-[A-Za-z0-9-]{10,}"                  # Slack app-level tokens
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe secret and restricted keys
    r"|npm_[A-Za-z0-9]{36}"                     # npm
    r"|pypi-[A-Za-z0-9_-]{50,}"                 # PyPI
    r"|ya29\.[A-Za-z0-9_-]{20,}"                # Google OAuth access tokens
    r")(?![A-Za-z0-9])"
)
# The literal starts of _TOKEN_SHAPES_RE's alternatives (case as written).
_TOKEN_PREFIXES = ("sk-", "AKIA", "ASIA", "ABIA", "ACCA", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
                   "github_pat_", "glpat-", "hf_", "xox", "xapp-", "_live_", "_test_", "npm_", "pypi-", "ya29.")
# An AWS secret access key in prose ("aws secret wJalr...EXAMPLEKEY is invalid"): 40 characters of
# base64 at most 40 characters after `aws` or `secret`. Only with a digit and both cases is it taken
# for a key (a git commit id is 40 characters too, lower case hex).
_AWS_SECRET_RE = re.compile(r"(?i)\b(?:aws|secret)\b[^\n]{0,40}?(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")
# Telegram bot tokens: the bot's number, a colon, and 35 characters starting with A.
_TELEGRAM_RE = re.compile(r"(?<![0-9])[0-9]{5,16}:A[A-Za-z0-9_-]{34}(?![A-Za-z0-9_-])")
# Slack webhook URLs: the path after /services/ (/workflows/, /triggers/) is the secret.
_SLACK_HOOK_RE = re.compile(r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+")
# JSON Web Tokens: a base64url header that starts `{"` (`eyJ`), a dot, the payload and
# the signature (either may be missing in a text cut short).
_JWT_RE = re.compile(_TOKEN_START + r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?")
# The user info of a URL. `user:password@`: the password runs to the last `@` that is
# followed by a host, before any `?`/`#` (a password holding `@`, `/` or `+` is
# taken whole); failing that, to the first `@` of the word. Without a colon the whole
# user info goes (`https://TOKEN@github.com`).
_URL_USERINFO_RE = re.compile(
    r"""(?i)\b([a-z][a-z0-9+.-]{0,30}:(?://|\\/\\/))"""  # a bounded scheme (linear time); `:\/\/` in JSON
    r"""(?:([^\s:/?#@"'<>\\]*):(?:(?:[^\s"'<>?#\\]|\\/)*@(?=[a-z0-9\[])|(?:[^\s"'<>\\]|\\/)*?@)"""
    r"""|[^\s:/?#@"'<>\\]+@(?=[a-z0-9\[]))"""
)


# Every key name, flag and DuckDB literal above holds one of these (lower case).
_KEY_WORDS = ("secret", "pass", "pwd", "token", "auth", "key", "credential", "sig")


def _redact_value(match: re.Match) -> str:
    value = match.group("value")
    if value[:1] in ('"', "'") and (len(value) < 2 or value[-1] != value[0]):
        return match.group("key") + value[0] + REDACTED  # cut off: redact to the end
    if value.startswith('\\"'):
        quoted = f'\\"{REDACTED}\\"'
    elif value[:1] in ('"', "'"):
        quoted = f"{value[0]}{REDACTED}{value[0]}"
    else:
        quoted = REDACTED
    return match.group("key") + quoted


def _basic(match: re.Match) -> str:
    value = match.group(2)
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        return match.group(0)
    if ":" in decoded and decoded.isprintable():
        return match.group(1) + REDACTED
    return match.group(0)


def _aws_secret(match: re.Match) -> str:
    key = match.group(1)
    if any(c.isupper() for c in key) and any(c.islower() for c in key) and any(c.isdigit() for c in key):
        start, end = match.span(1)
        text = match.group(0)
        offset = match.start(0)
        return text[:start - offset] + REDACTED + text[end - offset:]
    return match.group(0)


def _pem(match: re.Match) -> str:
    kind = match.group("kind")
    return f"-----BEGIN {kind}-----{REDACTED}-----END {kind}-----"


def _userinfo(match: re.Match) -> str:
    user = match.group(2)
    return match.group(1) + (f"{user}:{REDACTED}@" if user is not None else f"{REDACTED}@")


def scrub(text: Any) -> Any:
    """``text`` with every credential replaced by ``[REDACTED]``; None and "" come back as they are.

    Total: a value that is not a string is scrubbed as its ``str()`` (bytes are
    decoded, unknown bytes replaced); nothing raises.
    """
    if not text:
        return text
    if not isinstance(text, str):
        text = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    # A redaction can make a neighbour match a pattern it did not match before (the
    # patterns overlap): scrub again until nothing changes. A text without credentials,
    # by far the most, takes one pass.
    for _ in range(4):
        scrubbed = _scrub_once(text)
        if scrubbed == text:
            break
        text = scrubbed
    return text


def _scrub_once(text: str) -> str:
    # Each pattern runs only when the words it needs are there (plain substring tests
    # are ~100 times cheaper than a case-insensitive scan of a long error text).
    low = text.lower()
    if "-----begin " in low:
        text = _PEM_RE.sub(_pem, text)
    if "@" in text and ("://" in text or ":\\/\\/" in text):
        text = _URL_USERINFO_RE.sub(_userinfo, text)
    if "bearer" in low:
        text = _BEARER_RE.sub(lambda m: m.group(1) + REDACTED, text)
    if "authorization" in low:
        text = _AUTH_HEADER_RE.sub(lambda m: m.group(1) + REDACTED, text)
    if "basic" in low:
        text = _BASIC_RE.sub(_basic, text)
    if "cookie" in low:
        text = _COOKIE_RE.sub(lambda m: m.group(1) + _COOKIE_PAIR_RE.sub(lambda p: p.group(1) + REDACTED, m.group(2)),
                              text)
    if "%3d" in low:
        text = _URLENC_RE.sub(lambda m: m.group(1) + REDACTED, text)
    if "-u " in text:
        text = _CURL_USER_RE.sub(lambda m: m.group(1) + REDACTED, text)
    if any(word in low for word in _KEY_WORDS):
        text = _FLAG_RE.sub(lambda m: m.group(1) + REDACTED, text)
        if "'" in text:
            text = _DUCKDB_SECRET_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}'{REDACTED}'", text)
        text = _KEY_VALUE_RE.sub(_redact_value, text)
    if any(prefix in text for prefix in _TOKEN_PREFIXES):
        text = _TOKEN_SHAPES_RE.sub(REDACTED, text)
    if "aws" in low or "secret" in low:
        text = _AWS_SECRET_RE.sub(_aws_secret, text)
    if ":A" in text:
        text = _TELEGRAM_RE.sub(REDACTED, text)
    if "hooks.slack.com" in low:
        text = _SLACK_HOOK_RE.sub(lambda m: m.group(1) + REDACTED, text)
    if "eyJ" in text:
        text = _JWT_RE.sub(REDACTED, text)
    return text


def scrub_json(value: Any, key: str | None = None) -> Any:
    """Scrub a parsed JSON value: secret-named keys lose their value, strings are scrubbed.

    Strings that hold JSON themselves (tool-call ``arguments``) are parsed and
    scrubbed structurally, then dumped again.
    """
    if isinstance(value, dict):
        return {k: scrub_json(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v, key) for v in value]
    if key is not None and SECRET_KEY_RE.match(key) and value is not None and not isinstance(value, bool):
        return REDACTED
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                inner = json.loads(stripped)
            except (ValueError, RecursionError):
                pass
            else:
                return json.dumps(scrub_json(inner), ensure_ascii=False)
        return scrub(value)
    return value


def scrub_strings(value: Any) -> Any:
    """A copy of a JSON-ready document with :func:`scrub` applied to every string in it (keys too).

    The last pass before a document is shown (``--json``, the text summary): whatever
    field carries log or upstream text, no credential is printed. Other values
    (numbers, None, times) are kept as they are.
    """
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {(scrub(k) if isinstance(k, str) else k): scrub_strings(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_strings(v) for v in value]
    return value


def shorten(text: str | None, limit: int) -> str | None:
    """Cut text to ``limit`` characters, saying how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit} chars)"
