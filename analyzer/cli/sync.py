"""``analyze sync s3://BUCKET[/PREFIX]``: mirror the proxy's bucket into the local cache."""

from __future__ import annotations

from pathlib import Path

from analyzer.cli.terminal import print_json
from analyzer.io.objectstore import sync


def sync_command(url: str, *, profile: str | None = None, endpoint_url: str | None = None,
                 cache_dir: str | Path | None = None, json_out: bool = False):
    """Mirror the bucket prefix and print what was done; return the :class:`analyzer.io.objectstore.SyncReport`."""
    report = sync(url, profile=profile, endpoint_url=endpoint_url, cache_dir=cache_dir)
    if json_out:
        print_json(report.to_dict())
    else:
        print(report.describe())
    return report
