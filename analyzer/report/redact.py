"""Credential scrubbing for every piece of log text the report shows.

Log text (questions, errors, tool-call arguments) can carry credentials: agents
pass S3 keys to a SQL tool, models write ``CREATE SECRET`` statements, errors
echo headers. The patterns follow the proxy's own scrubbing (keys named like
secrets, DuckDB ``KEY_ID '...'``/``SECRET '...'`` literals, bearer tokens) plus
provider-style keys (``sk-...``) and AWS access key ids. Redaction replaces the
value, keeps the key, so an operator still sees *what* was there.
"""

from __future__ import annotations

import json
import re
from typing import Any

REDACTED = "[REDACTED]"

# The core of a key name that holds a secret. A key matches when, split on `_`/`-`,
# it ends in one of these (optionally followed by id/key/value): `api_key`,
# `X-Api-Key`, `aws_secret_access_key`, `s3_secret`, `github_token`, `password`.
# `max_tokens`, `prompt_tokens` and `thinking_token_budget` do not match.
_KEY_CORE = (
    r"(?:secret|password|passwd|pwd|token|authorization|auth|apikey|api[_-]?key"
    r"|access[_-]?key|s3[_-]?key|private[_-]?key|credentials?|session[_-]?key)"
)
# Environment-style names glue a prefix to the word: PGPASSWORD, MYSQLPASSWORD, DBSECRET.
_GLUED = r"(?:[a-z0-9]+(?:password|passwd|secret))"
_KEY_NAME = rf"(?:[a-z0-9]+[_-])*(?:{_GLUED}|{_KEY_CORE})(?:[_-](?:id|key|value|access[_-]key))?"
# JSON keys also hide cookies whole (in text, _COOKIE_RE keeps the cookie names).
SECRET_KEY_RE = re.compile(rf"(?i)^(?:{_KEY_NAME}|(?:set-)?cookies?)$")

# key: value / "key": "value" / key='value' / \"key\": \"value\" (JSON inside a string)
# / key=value in a query string.
_KEY_VALUE_RE = re.compile(
    rf"""(?ix)
    (?<![a-z0-9_-])
    (?P<key>\\?["']?{_KEY_NAME}\\?["']?\s*[:=]\s*)
    (?P<value>
        \\"(?:(?!\\").)*\\"          # \"...\" inside a JSON string
      | "(?:[^"\\]|\\.)*"            # "..."
      | '[^']*'                      # '...'
      | ["'][^\n]*                  # a quoted value cut off (error bodies are cut at 1,000 chars)
      | (?!(?:bearer|basic|token|digest|negotiate|apikey)\s)[^\s,;&}}\]"'\\]+  # bare value (auth schemes apart)
    )"""
)
# DuckDB CREATE SECRET literals: KEY_ID '...', SECRET '...', SESSION_TOKEN '...'.
_DUCKDB_SECRET_RE = re.compile(r"(?i)\b(KEY_ID|SECRET|SESSION_TOKEN)(\s+)'[^']*'")
# The whole token, `abc:SECRET` included (some gateways join an id and a secret).
_BEARER_RE = re.compile(r"""(?i)\b(Bearer\s+)[^\s"',;\\]+""")
# Command-line flags: --password X, --password=X, --api-key 'X', --token X.
_FLAG_RE = re.compile(
    r"""(?i)(?<![a-z0-9])(--?[a-z0-9-]*(?:password|passwd|secret|token|api-key|apikey)\s*(?:=|\s)\s*)("[^"]*"|'[^']*'|[^\s"']+)""")
# URL-encoded pairs: access_token%3DVALUE (up to & or %26), also after %26 or %3F.
_URLENC_RE = re.compile(
    rf"""(?ix)((?:(?<=%26)|(?<=%3f)|(?<![a-z0-9_-])){_KEY_NAME}%3d)((?:(?!%26)[^&\s"'])+)""")
# Cookie / Set-Cookie headers: every cookie's value goes, the names stay.
_COOKIE_RE = re.compile(r"""(?i)\b((?:set-)?cookie\\?["']?\s*:\s*\\?["']?)([^\r\n"\\]*)""")
_COOKIE_PAIR_RE = re.compile(r"([^=;\s]+=)([^;]*)")
# An Authorization header with any scheme (Basic, Token, Digest ...): the scheme
# stays, the credentials go. Words like "basic" or "token" in prose are left alone.
_AUTH_HEADER_RE = re.compile(r"""(?i)(authorization\\?["']?\s*[:=]\s*\\?["']?[A-Za-z-]+\s+)[^\s"',;\\]+""")
# Provider keys (sk-..., sk-ant-..., sk-or-v1-...), AWS access key ids, GitHub tokens.
_TOKEN_SHAPES_RE = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,})\b"
)
# user:password@ in URLs.
_URL_PASSWORD_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@")


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


def redact(text: str | None) -> str | None:
    """Scrub credentials out of free text (None stays None)."""
    if not text:
        return text
    text = _BEARER_RE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _AUTH_HEADER_RE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _COOKIE_RE.sub(lambda m: m.group(1) + _COOKIE_PAIR_RE.sub(lambda p: p.group(1) + REDACTED, m.group(2)), text)
    text = _URLENC_RE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _FLAG_RE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _DUCKDB_SECRET_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}'{REDACTED}'", text)
    text = _KEY_VALUE_RE.sub(_redact_value, text)
    text = _TOKEN_SHAPES_RE.sub(REDACTED, text)
    text = _URL_PASSWORD_RE.sub(lambda m: m.group(1) + REDACTED + "@", text)
    return text


def redact_json(value: Any, key: str | None = None) -> Any:
    """Scrub a parsed JSON value: secret-named keys lose their value, strings are scrubbed.

    Strings that hold JSON themselves (tool-call ``arguments``) are parsed and
    scrubbed structurally, then dumped again.
    """
    if isinstance(value, dict):
        return {k: redact_json(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, key) for v in value]
    if key is not None and SECRET_KEY_RE.match(key) and value is not None and not isinstance(value, bool):
        return REDACTED
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                inner = json.loads(stripped)
            except ValueError:
                pass
            else:
                return json.dumps(redact_json(inner), ensure_ascii=False)
        return redact(value)
    return value


def shorten(text: str | None, limit: int) -> str | None:
    """Cut text to ``limit`` characters, saying how much was left out."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…(+{len(text) - limit} chars)"
