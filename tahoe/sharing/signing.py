"""HMAC signatures of everything the sharing server hands out and later accepts back: its own file URLs (one file,
one holder, expiring), page tokens (recipient and listing) and refresh tokens (recipient, table, version).

  1. File URLs look like S3 pre-signed URLs (`X-Amz-Credential`, `X-Amz-Expires`, `X-Amz-Signature`), which
     the official client's kernel needs.
  2. A signature covers table, path, expiry, holder and the holder's binding (never in the URL): revoking or
     rotating a recipient invalidates its URLs. Verification is constant-time.
  3. Plain HMAC-SHA256, not JWT: nothing here is a JOSE object (no algorithm for an attacker to choose), and
     one signer per response (`_file_signer`) hashes the shared fields once for all its file URLs."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Signer", "Holder", "FileUrls", "BadToken", "b64e", "b64d", "file_id", "FILE_ID_HASHES"]


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def b64e(b: bytes) -> str:
    """URL-safe base64 without padding (binascii directly: this runs once per file per version)."""
    return binascii.b2a_base64(b, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def b64d(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


# the `fileidhash` schemes (spec "File ID Hash"): how a file's `id` is derived from its path in the log
FILE_ID_HASHES = ("parquet", "delta")


def file_id(path: str, scheme: str = "delta") -> str:
    """The stable id of a file in responses, a hash of its path in the log as the reference server
    makes it: `parquet` — MD5 hex (its parquet-format ids), `delta` — SHA-256 hex (its
    delta-format ids). The same file has the same id in every response of one scheme."""
    b = path.encode("utf-8")
    if scheme == "parquet":
        return hashlib.md5(b, usedforsecurity=False).hexdigest()
    return hashlib.sha256(b).hexdigest()


class BadToken(ValueError):
    """A token or signature that does not verify."""


@dataclass(frozen=True)
class Holder:
    """Whom file URLs are issued to: `credential` is written into the URL, `binding` only into
    its signature (it must be recomputable at download time, e.g. the recipient's token hash)."""
    credential: str
    binding: str


class FileUrls:
    """The file URLs of one response: one base, one expiry, one holder. `url(table_key, rel)`
    gives a whole URL; `prefix`, `query` and `signer(table_key)` give its parts for renderers that
    assemble many lines (`prefix + table_key + "/" + b64(rel) + query + sign(b64(rel))`)."""

    def __init__(self, key: bytes, base: str, expires: int, holder: Holder):
        self.base = base
        self.expires = expires
        self.holder = holder
        self._key = key
        self._signers: dict[str, Callable[[str], str]] = {}
        self.query = f"?X-Amz-Credential={b64e(holder.credential.encode('utf-8'))}" \
                     f"&X-Amz-Expires={expires}&X-Amz-Signature="

    def prefix(self, table_key: str) -> str:
        return f"{self.base}/files/{table_key}/"

    def signer(self, table_key: str) -> Callable[[str], str]:
        """`rel_b64 -> hex signature` for files of one table."""
        sign = self._signers.get(table_key)
        if sign is None:
            sign = self._signers[table_key] = _file_signer(self._key, table_key, self.expires, self.holder)
        return sign

    def url(self, table_key: str, rel_path: str) -> str:
        rel_b64 = b64e(rel_path.encode("utf-8"))
        return f"{self.prefix(table_key)}{rel_b64}{self.query}{self.signer(table_key)(rel_b64)}"


def _file_signer(key: bytes, table_key: str, expires: int, holder: Holder) -> Callable[[str], str]:
    head = hmac.new(key, f"{table_key}\n{int(expires)}\n{holder.credential}\n{holder.binding}\n".encode("utf-8"),
                    hashlib.sha256)

    def sign(rel_b64: str) -> str:
        h = head.copy()
        h.update(rel_b64.encode("utf-8"))
        return h.hexdigest()
    return sign


class Signer:
    def __init__(self, key: bytes):
        self._file_key = hmac.new(key, b"tahoe-sharing/file-url", hashlib.sha256).digest()
        self._token_key = hmac.new(key, b"tahoe-sharing/token", hashlib.sha256).digest()

    # --- file URLs ----------------------------------------------------------------------------
    def file_urls(self, base: str, expires: int, holder: Holder) -> FileUrls:
        """The signer of one response's file URLs (`{base}/files/{table_key}/{b64(rel_path)}?...`)."""
        return FileUrls(self._file_key, base, expires, holder)

    def verify_file(self, table_key: str, rel_b64: str, credential_b64: str, expires: str, signature: str,
                    binding_of: Callable[[str], Any]) -> str:
        """The file's path within the table, or BadToken (unknown or no-longer-valid holder —
        `binding_of(credential)` gives its current binding, or several (a rotation's grace), or
        None —, bad signature, expired, malformed)."""
        try:
            exp = int(expires)
            credential = b64d(credential_b64 or "").decode("utf-8")
        except (TypeError, ValueError, UnicodeDecodeError, binascii.Error):
            raise BadToken("malformed URL") from None
        bindings = binding_of(credential) if credential else None
        if isinstance(bindings, str):
            bindings = (bindings,)
        # a signature is computed either way, so timing does not tell known holders from unknown
        given = (signature or "").encode("utf-8", "replace")
        ok = False
        for binding in bindings or ("\x00none",):
            good = _file_signer(self._file_key, table_key, exp, Holder(credential, binding))(rel_b64)
            ok = hmac.compare_digest(good.encode(), given) or ok
        if not ok:
            raise BadToken("bad signature")
        if not bindings:
            raise BadToken("the URL's holder is unknown or no longer valid")
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

    def read_token(self, token: str, *, allow_expired: bool = False, **expect: Any) -> dict[str, Any]:
        """The payload of a token this server signed, checking `expect` fields match exactly and
        the optional `exp` (epoch s) has not passed (unless `allow_expired`); else BadToken."""
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
        if not allow_expired and "exp" in payload and payload["exp"] < time.time():
            raise BadToken("token expired")
        return payload
