"""Reading the proxy's S3 bucket: an incremental mirror into a local cache.

The proxy writes ``BUCKET/YYYY-MM-DD/<chunk>.jsonl`` (about one file a minute per
pod) and, for older days, ``BUCKET/consolidated/{daily,monthly}/*.parquet``;
LiteLLM's S3 logging callback writes ``PREFIX/YYYY-MM-DD/<time>_<id>.json``, one
object per call.
``analyze s3://bucket/prefix`` (or ``analyzer.ingest("s3://...")``) first syncs
the objects of that layout under the prefix into a local cache, then ingests the
cached files like any local input.

Why a sync, and not DuckDB reading S3 directly:

- DuckDB's httpfs extension is downloaded at run time, which these machines
  cannot do (and the registry's packaged copy matches DuckDB 1.4, not 2.x);
- an fsspec filesystem (s3fs) registered with DuckDB would re-read every object
  on every run, and ingestion's file registry (path, size, mtime, fingerprint of
  the first and last 64 KiB) would cost a remote read per object per run;
- a mirror downloads each object once (new or changed, by ETag and size), keeps
  the S3 ``LastModified`` as the file's mtime so the registry sees unchanged files
  as unchanged, lets the analysis be re-run offline, and leaves ingestion's
  tested code path (DuckDB's local readers, batching, dedup) exactly as it is.

Credentials come from boto3's own chain (environment variables, a named profile
via ``--s3-profile`` or ``AWS_PROFILE``, the shared files, instance roles). They
are never logged, printed or stored: the cache and its manifest hold object keys,
ETags and sizes only, and messages show an endpoint without any user:password part.
``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``, or ``--s3-endpoint``) points at
an S3-compatible server (MinIO, Ceph, a test server) instead of AWS.

The cache is ``$ANALYZER_S3_CACHE``, else ``$XDG_CACHE_HOME/analyzer/s3`` (default
``~/.cache/analyzer/s3``); objects land in ``CACHE/<endpoint>/<bucket>/<key>``.
Objects deleted from the bucket are deleted from the mirror on the next sync of
their prefix (the records already ingested stay in the database).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from analyzer.core.errors import AnalyzerError, ExitCode, InputError
from analyzer.core.scrub import scrub

# The proxy's bucket layout, anywhere below the prefix given; and LiteLLM's S3
# logging callback's: one object per call, YYYY-MM-DD/[HH/]<time>_<id>.json (or a
# flush as .jsonl with s3_batch_file_upload).
LAYOUT = (
    re.compile(r"(^|/)\d{4}-\d{2}-\d{2}/(\d{2}/)?[^/]+\.jsonl?(\.gz)?$"),
    re.compile(r"(^|/)consolidated/(.+/)?[^/]+\.parquet$"),
)
_GLOB_CHARS = "*?["
DOWNLOAD_WORKERS = 8


@dataclass
class SyncReport:
    """What one sync did."""

    url: str
    local: str
    listed: int = 0  # objects under the prefix
    matched: int = 0  # of which in the proxy's layout
    downloaded: int = 0  # new or changed, fetched now
    unchanged: int = 0
    removed: int = 0  # gone from the bucket, removed from the mirror
    skipped: list[str] = field(default_factory=list)  # first few keys outside the layout
    bytes_downloaded: int = 0

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)

    def describe(self) -> str:
        """One line for stderr."""
        return (f"{self.url}: {self.matched} log object(s), {self.downloaded} new or changed "
                f"({self.bytes_downloaded:,} bytes), {self.unchanged} unchanged, {self.removed} removed "
                f"from the cache {self.local}")


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` into ``(bucket, prefix)``.

    Raises:
        InputError: not an ``s3://`` URL with a bucket.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3" or not parts.netloc:
        raise InputError(f"{url}: expected s3://BUCKET[/PREFIX]")
    prefix = parts.path.lstrip("/")
    if any(seg == ".." for seg in prefix.split("/")):
        raise InputError(f"{url}: '..' is not allowed in the prefix")
    return parts.netloc, prefix


def endpoint_from_env() -> str | None:
    """The S3 endpoint override from the environment, if any."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def safe_endpoint(endpoint: str | None) -> str:
    """An endpoint for messages and paths: scheme, host and port only (never user:password)."""
    if not endpoint:
        return "aws"
    p = urlsplit(endpoint)
    host = p.hostname or ""
    return f"{p.scheme}://{host}{':' + str(p.port) if p.port else ''}"


def default_cache_dir() -> Path:
    """``$ANALYZER_S3_CACHE``, else ``$XDG_CACHE_HOME/analyzer/s3`` (``~/.cache/analyzer/s3``)."""
    env = os.environ.get("ANALYZER_S3_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "analyzer" / "s3"


def _endpoint_dir(endpoint: str | None) -> str:
    if not endpoint:
        return "aws"
    p = urlsplit(endpoint)
    return re.sub(r"[^A-Za-z0-9.\-]", "_", f"{p.hostname or 'endpoint'}{'-' + str(p.port) if p.port else ''}")


def _split_glob(prefix: str) -> tuple[str, str | None]:
    """The literal part of a prefix to list by, and the glob pattern (or None)."""
    cut = min((prefix.find(c) for c in _GLOB_CHARS if c in prefix), default=-1)
    if cut < 0:
        return prefix, None
    return prefix[:cut], prefix + "*"


def in_layout(key: str) -> bool:
    """Is this object key a proxy log in the bucket layout?"""
    return any(p.search(key) for p in LAYOUT)


def _client(profile: str | None, endpoint: str | None):
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import ProfileNotFound
    except ImportError as exc:  # pragma: no cover - boto3 is a dependency
        raise AnalyzerError("reading s3:// inputs needs boto3: pip install boto3", ExitCode.USAGE) from exc
    try:
        session = boto3.session.Session(profile_name=profile or None)
    except ProfileNotFound as exc:
        raise AnalyzerError(f"no AWS profile named {profile!r} (--s3-profile / AWS_PROFILE)", ExitCode.USAGE) from exc
    config = Config(
        region_name=session.region_name or "us-east-1",
        retries={"max_attempts": 5, "mode": "standard"},
        connect_timeout=10,
        read_timeout=60,
        # S3-compatible servers are addressed by path (http://host:port/bucket/key).
        s3={"addressing_style": "path"} if endpoint else {},
        max_pool_connections=DOWNLOAD_WORKERS * 2,
    )
    return session.client("s3", endpoint_url=endpoint or None, config=config)


def _remote_error(exc: Exception, url: str, endpoint: str | None) -> AnalyzerError:
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, PartialCredentialsError

    where = f"{url} at {safe_endpoint(endpoint)}"
    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return AnalyzerError(f"{where}: no S3 credentials (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                             "or a profile with --s3-profile / AWS_PROFILE)", ExitCode.USAGE)
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})  # the server's words: they may quote a signature or a key
        return AnalyzerError(scrub(f"{where}: {err.get('Code', 'error')}: {err.get('Message', '')}".rstrip(": ")),
                             ExitCode.UPSTREAM)
    if isinstance(exc, EndpointConnectionError):
        return AnalyzerError(f"{where}: cannot reach the S3 endpoint", ExitCode.UPSTREAM)
    return AnalyzerError(f"{where}: {type(exc).__name__}", ExitCode.UPSTREAM)


def _load_manifest(path: Path) -> dict[str, dict[str, Any]]:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("objects", {})
    except (OSError, ValueError):
        return {}


def _save_manifest(path: Path, bucket: str, objects: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps({"bucket": bucket, "objects": objects}, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _local(mirror: Path, prefix: str) -> str:
    # A whole bucket or "folder" is a directory; a partial key prefix (or a glob)
    # is a glob inside the bucket's mirror.
    if not prefix or prefix.endswith("/"):
        return str(mirror / prefix)
    return str(mirror / prefix) + "*"


def sync(
    url: str,
    *,
    profile: str | None = None,
    endpoint_url: str | None = None,
    cache_dir: str | Path | None = None,
) -> SyncReport:
    """Mirror the proxy-log objects under ``s3://bucket/prefix`` into the local cache.

    Only objects new or changed since the last sync (by ETag and size) are
    downloaded; a file's mtime is the object's ``LastModified``. The prefix may
    hold glob characters (``s3://logs/2026-11-1*``).

    Args:
        url: ``s3://BUCKET[/PREFIX]``.
        profile: a named AWS profile (default: boto3's chain, ``AWS_PROFILE``...).
        endpoint_url: an S3-compatible endpoint (default ``AWS_ENDPOINT_URL``).
        cache_dir: the cache root (default :func:`default_cache_dir`).

    Raises:
        InputError: a malformed URL.
        AnalyzerError: no credentials or no such profile (exit 2), the server
            refused or could not be reached (exit 6).
    """
    bucket, prefix = parse_url(url)
    endpoint = endpoint_url or endpoint_from_env()
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    mirror = root / _endpoint_dir(endpoint) / bucket
    # Beside the mirrors, hidden: bucket names never start with a dot.
    manifest_path = root / _endpoint_dir(endpoint) / ".manifests" / f"{bucket}.json"
    list_prefix, pattern = _split_glob(prefix)
    report = SyncReport(url=url, local=_local(mirror, prefix))

    from botocore.exceptions import BotoCoreError, ClientError

    client = _client(profile, endpoint)
    remote: dict[str, dict[str, Any]] = {}
    try:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=list_prefix):
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if pattern and not fnmatch.fnmatchcase(key, pattern):
                    continue
                report.listed += 1
                # A key is a path below the cache: never absolute, never climbing out.
                if (key.endswith("/") or not in_layout(key) or ".." in key.split("/")
                        or key.startswith("/") or not (mirror / key).resolve().is_relative_to(mirror.resolve())):
                    if len(report.skipped) < 5:
                        report.skipped.append(key)
                    continue
                remote[key] = {"etag": obj.get("ETag", "").strip('"'), "size": int(obj.get("Size", 0)),
                               "mtime": obj["LastModified"].timestamp()}
    except (BotoCoreError, ClientError) as exc:
        raise _remote_error(exc, url, endpoint) from None
    report.matched = len(remote)

    known = _load_manifest(manifest_path)
    todo = []
    for key, meta in remote.items():
        path = mirror / key
        prev = known.get(key)
        if (prev and prev.get("etag") == meta["etag"] and prev.get("size") == meta["size"]
                and path.is_file() and path.stat().st_size == meta["size"]):
            report.unchanged += 1
        else:
            todo.append((key, meta))

    def fetch(item: tuple[str, dict]) -> tuple[str, dict]:
        key, meta = item
        path = mirror / key
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.part-{uuid.uuid4().hex[:8]}")
        try:
            body = client.get_object(Bucket=bucket, Key=key)["Body"]
            with open(tmp, "wb") as f:
                for chunk in body.iter_chunks(1 << 20):
                    f.write(chunk)
            os.utime(tmp, (meta["mtime"], meta["mtime"]))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return key, meta

    errors: list[Exception] = []
    try:
        with ThreadPoolExecutor(max_workers=DOWNLOAD_WORKERS) as pool:
            for fut in [pool.submit(fetch, item) for item in todo]:
                try:
                    key, meta = fut.result()
                except (BotoCoreError, ClientError, OSError) as exc:
                    errors.append(exc)
                    continue
                known[key] = meta
                report.downloaded += 1
                report.bytes_downloaded += meta["size"]
        if not errors:
            # Mirror deletions, but only under what was listed now.
            for key in [k for k in known if k.startswith(list_prefix) and k not in remote
                        and (not pattern or fnmatch.fnmatchcase(k, pattern))]:
                (mirror / key).unlink(missing_ok=True)
                del known[key]
                report.removed += 1
    finally:
        _save_manifest(manifest_path, bucket, known)  # what did arrive is kept for next time
    if errors:
        exc = errors[0]
        if isinstance(exc, OSError) and not isinstance(exc, (BotoCoreError, ClientError)):
            raise AnalyzerError(f"cannot write the S3 cache under {mirror}: {exc}", ExitCode.FAILED) from None
        raise _remote_error(exc, url, endpoint) from None
    return report


def sync_for_ingest(url: str) -> str:
    """The hook of :func:`analyzer.io.sources.discover_inputs` for ``s3://`` inputs.

    Syncs with the settings from the environment (profile, endpoint, cache) and
    returns the local glob of the mirrored objects, for discover_inputs to expand.
    """
    report = sync(url)
    print(report.describe(), file=sys.stderr)
    if not report.matched:
        raise InputError(f"{url}: no proxy log objects under this prefix "
                         "(expected YYYY-MM-DD/*.jsonl or consolidated/**/*.parquet, or LiteLLM's "
                         "YYYY-MM-DD/*.json)")
    return report.local
