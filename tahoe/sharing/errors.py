"""Errors of the sharing server as the protocol answers them: `{"errorCode", "message"}` with an
HTTP status (spec "API Response Format" errors and the reference server's codes).

Owns: `SharingError` and its common shapes (404 `RESOURCE_DOES_NOT_EXIST`, 400
`INVALID_PARAMETER_VALUE`), and `public_message`, which every message passes through before it
leaves the server: a recipient never learns where a table is stored (local paths, bucket URIs),
whatever a lower layer put into its message.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["SharingError", "not_found", "bad_request", "public_message"]


class SharingError(Exception):
    """An error answered as `{"errorCode", "message"}` with an HTTP status."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None, reason: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers        # extra response headers (Retry-After, WWW-Authenticate)
        self.reason = reason          # a short word for metrics and the audit log (why it was refused)


def not_found(what: str) -> SharingError:
    return SharingError(404, "RESOURCE_DOES_NOT_EXIST", what)


def bad_request(message: str) -> SharingError:
    return SharingError(400, "INVALID_PARAMETER_VALUE", message)


# a URI (scheme://...), a file: URI, a Windows drive path, or an absolute POSIX path (a "/" not
# preceded by a word character, so "a/b" in prose is left alone)
_PATHS = re.compile(
    r"""[A-Za-z][A-Za-z0-9+.\-]*://[^\s'"<>]*"""
    r"""|\bfile:[^\s'"<>]+"""
    r"""|\b[A-Za-z]:\\[^\s'"<>]*"""
    r"""|(?<![\w.:/\-])/[^\s'"<>]+""")


def public_message(message: str, known: Iterable[tuple[str, str]] = ()) -> str:
    """`message` without storage locations: each `(secret, stands_for)` in `known` (a table's
    location and the name it is shared as) is replaced by its stand-in, then any remaining URI
    or absolute path by `<path>`."""
    for secret, stand_in in sorted(known, key=lambda kv: -len(kv[0])):
        if secret:
            message = message.replace(secret, stand_in)
    return _PATHS.sub("<path>", message)
