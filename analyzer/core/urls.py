"""URLs given on the command line: what may be shown, and the credentials they carry."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit, urlunsplit


def public_url(url: str) -> str:
    """``url`` without user info, query or fragment: safe to print, log and store."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<unparseable URL>"


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None, dict[str, str]]:
    """Split a URL into its public base, basic-auth credentials and query parameters.

    ``http://alice:pw@prom:9090/prefix?token=x`` gives
    ``("http://prom:9090/prefix", ("alice", "pw"), {"token": "x"})``: the caller
    sends the credentials with the request (httpx ``auth=``, ``params=``) and only
    ever shows the base.
    """
    parts = urlsplit(url)
    auth = (parts.username or "", parts.password or "") if parts.username or parts.password else None
    return public_url(url), auth, dict(parse_qsl(parts.query))
