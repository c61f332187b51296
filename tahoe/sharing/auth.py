"""Who is asking: authentication of sharing requests and of downloads through the server's own
file URLs.

Owns: the principals (a recipient from the recipients file, the config's single
`authorization.bearerToken`, or — only with `allowAnonymous: true` — an anonymous caller), the
rule that fails closed (no token → 401 unless anonymous access is explicitly allowed; a token that
matches nothing → 401, also when the recipients file has been deleted), and the *holder* each
principal's file URLs are bound to, with `binding_of`, which re-derives a holder's binding at
download time (None once the recipient is revoked, rotated, expired, deleted or no longer granted
the table's share). Tokens are compared as SHA-256 digests in constant time.
"""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass

from .config import RecipientStore, ServerConfig, hash_token
from .errors import SharingError
from .signing import Holder

__all__ = ["Principal", "Authenticator"]

_RECIPIENT = "r:"     # a holder credential naming a recipient: "r:<name>"
_BEARER = "bearer"    # the config's bearerToken
_ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `id` is unique across kinds (page and refresh tokens are bound
    to it); `holder` is what its file URLs are bound to."""
    id: str
    all_shares: bool
    shares: tuple[str, ...]
    holder: Holder

    def grants(self, share: str) -> bool:
        s = share.lower()
        return self.all_shares or any(g == "*" or g.lower() == s for g in self.shares)


class Authenticator:
    def __init__(self, config: ServerConfig, recipients: RecipientStore):
        self.config = config
        self.recipients = recipients
        self._bearer_hash = hash_token(config.bearer_token) if config.bearer_token else None

    def principal(self, token: str | None) -> Principal:
        """The caller a bearer token (None: no Authorization header) stands for, or a 401."""
        if not token:
            if self.config.allow_anonymous:
                return Principal(_ANONYMOUS, True, (), Holder(_ANONYMOUS, _ANONYMOUS))
            raise SharingError(401, "UNAUTHENTICATED", "a bearer token is required")
        h = hash_token(token)
        if self._bearer_hash is not None and hmac.compare_digest(self._bearer_hash, h):
            return Principal(_BEARER, True, (), Holder(_BEARER, self._bearer_hash))
        now_ms = int(time.time() * 1000)
        expired = False
        for r in self.recipients.all():
            if hmac.compare_digest(r.token_sha256, h):
                if r.active(now_ms):
                    return Principal(_RECIPIENT + r.name, False, tuple(r.shares),
                                     Holder(_RECIPIENT + r.name, r.token_sha256))
                expired = True
        raise SharingError(401, "UNAUTHENTICATED",
                           "the bearer token has expired or was revoked" if expired else "invalid bearer token")

    def binding_of(self, credential: str, share: str) -> str | None:
        """The current binding of the holder named by a file URL's credential, if that holder
        may still read files of `share`; else None."""
        if credential == _ANONYMOUS:
            return _ANONYMOUS if self.config.allow_anonymous else None
        if credential == _BEARER:
            return self._bearer_hash
        if credential.startswith(_RECIPIENT):
            r = self.recipients.get(credential[len(_RECIPIENT):])
            if r is None or not r.active() or not r.grants(share):
                return None
            return r.token_sha256
        return None
