"""Credentials never leave the process: URLs are stored and logged without their user info or secret query values.

Why here: a ``--base-url`` like ``http://user:pw@host/v1`` reaches the run config, error messages and logs; every
place that shows a URL passes it through :func:`redact_url` first, and error text through :func:`redact_text`.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["redact_text", "redact_url"]

_SECRET_QUERY_KEYS = re.compile(r"(key|token|secret|password|passwd|pwd|auth|signature|sig)", re.IGNORECASE)
_URL_WITH_USERINFO = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s@]+@")


def redact_url(url: str | None) -> str | None:
    """The URL with user name, password and secret-looking query values replaced by ``***``."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return _URL_WITH_USERINFO.sub(r"\1***@", url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, "***" if _SECRET_QUERY_KEYS.search(k) else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str, *secrets: str | None) -> str:
    """``text`` with every URL's user info removed and every given secret (an API key ...) replaced by ``***``."""
    out = _URL_WITH_USERINFO.sub(r"\1***@", text)
    for secret in secrets:
        if secret and len(secret) >= 4:
            out = out.replace(secret, "***")
    return out
