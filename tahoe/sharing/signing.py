"""HMAC signatures of everything the sharing server hands out and later accepts back: its own file
URLs (one file of one table, expiring), page tokens (bound to recipient and listing/query) and
refresh tokens (bound to recipient and table, pinning a version).

File URLs are shaped like S3 pre-signed URLs (`X-Amz-Expires`, `X-Amz-Signature` in the query)
because the official client's Rust kernel only treats a URL as pre-signed when its query string
looks signed. Their signature covers the table key, the file's path within the table and the
expiry; verification is constant-time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from typing import Any

__all__ = ["Signer", "b64e", "b64d", "file_id"]


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def b64e(b: bytes) -> str:
    """URL-safe base64 without padding (binascii directly: this runs once per file per version)."""
    return binascii.b2a_base64(b, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def b64d(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def file_id(path: str) -> str:
    """The stable id of a file in responses: a hash of its path in the log."""
    return hashlib.sha256(path.encode("utf-8")).hexdigest()[:32]


class BadToken(ValueError):
    """A token or signature that does not verify."""


class Signer:
    def __init__(self, key: bytes):
        self._file_key = hmac.new(key, b"tahoe-sharing/file-url", hashlib.sha256).digest()
        self._token_key = hmac.new(key, b"tahoe-sharing/token", hashlib.sha256).digest()

    # --- file URLs ----------------------------------------------------------------------------
    def _file_sig(self, table_key: str, rel_b64: str, expires: int) -> str:
        msg = f"{table_key}\n{rel_b64}\n{expires}".encode()
        return hmac.digest(self._file_key, msg, "sha256").hex()

    def file_url(self, base: str, table_key: str, rel_path: str, expires: int) -> str:
        """`{base}/files/{table_key}/{b64(rel_path)}?X-Amz-Expires=<epoch s>&X-Amz-Signature=<hex>`."""
        rel_b64 = b64e(rel_path.encode("utf-8"))
        sig = self._file_sig(table_key, rel_b64, expires)
        return f"{base}/files/{table_key}/{rel_b64}?X-Amz-Expires={expires}&X-Amz-Signature={sig}"

    def verify_file(self, table_key: str, rel_b64: str, expires: str, signature: str) -> str:
        """The file's path within the table, or BadToken (bad signature, expired, malformed)."""
        try:
            exp = int(expires)
        except (TypeError, ValueError):
            raise BadToken("malformed expiry") from None
        good = self._file_sig(table_key, rel_b64, exp)
        if not hmac.compare_digest(good.encode(), (signature or "").encode()):
            raise BadToken("bad signature")
        if exp < time.time():
            raise BadToken("expired")
        try:
            return b64d(rel_b64).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            raise BadToken("malformed path") from None

    # --- tokens -------------------------------------------------------------------------------
    def token(self, payload: dict[str, Any]) -> str:
        body = b64e(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        sig = b64e(hmac.new(self._token_key, body.encode(), hashlib.sha256).digest()[:24])
        return f"{body}.{sig}"

    def read_token(self, token: str, **expect: Any) -> dict[str, Any]:
        """The payload of a token this server signed, checking `expect` fields match exactly and
        the optional `exp` (epoch s) has not passed; else BadToken."""
        try:
            body, sig = token.split(".", 1)
            good = b64e(hmac.new(self._token_key, body.encode(), hashlib.sha256).digest()[:24])
            if not hmac.compare_digest(good.encode(), sig.encode()):
                raise BadToken("bad signature")
            payload = json.loads(b64d(body))
        except BadToken:
            raise
        except Exception:
            raise BadToken("malformed token") from None
        if not isinstance(payload, dict):
            raise BadToken("malformed token")
        for k, v in expect.items():
            if payload.get(k) != v:
                raise BadToken(f"token is not valid for this request ({k})")
        if "exp" in payload and payload["exp"] < time.time():
            raise BadToken("token expired")
        return payload
