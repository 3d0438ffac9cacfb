"""The report's old name for the scrubber: see :mod:`analyzer.scrub` (one scrubber for every output)."""

from ..scrub import REDACTED, SECRET_KEY_RE, redact, redact_json, scrub, scrub_json, shorten

__all__ = ["REDACTED", "SECRET_KEY_RE", "redact", "redact_json", "scrub", "scrub_json", "shorten"]
