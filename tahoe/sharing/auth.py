"""Who is asking: authentication of sharing requests and of downloads through the server's own file URLs.

  1. Principals: a recipient, the config's `authorization.bearerToken`, or, only with `allowAnonymous: true`,
     an anonymous caller. Fails closed: no token, or one matching nothing, is 401.
  2. Tokens are looked up by SHA-256 digest; the config's token is compared in constant time.
  3. File URLs are bound to a holder; `bindings_of` re-derives them at download time (none once revoked,
     rotated past grace, expired, deleted or ungranted).
  4. OAuth tokens: `issue_token` (client credentials) and `issue_jwt_token` (RFC 7523, PyJWT via `jws`),
     each `jti` accepted once across replicas (`seen_assertions`).
  5. Every refusal carries a `reason` (counted by the metrics)."""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..errors import DeltaError
from .config import ServerConfig, hash_token
from .errors import SharingError
from .recipients import OAUTH_TOKEN_TTL, Recipient, Recipients
from .signing import BadToken, Holder, Signer
from .jws import JwtError, unverified_claims, verify_assertion

__all__ = ["Principal", "Authenticator", "SeenAssertions", "OAuthError", "MAX_ASSERTION_SECONDS"]

from .jws import MAX_ASSERTION_SECONDS  # noqa: E402  (re-exported)

_RECIPIENT = "r:"     # a holder credential naming a recipient: "r:<name>"
_BEARER = "bearer"    # the config's bearerToken
_ANONYMOUS = "anonymous"
_OAUTH = "oat."       # the prefix of the access tokens the token endpoint issues


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `id` is unique across kinds (page and refresh tokens are bound
    to it); `holder` is what its file URLs are bound to; `name` is how the audit log names it;
    `recipient` the recipient record (None for the config's token and anonymous callers)."""
    id: str
    all_shares: bool
    shares: tuple[str, ...]
    holder: Holder
    name: str = ""
    recipient: Any = None

    def grants(self, share: str) -> bool:
        s = share.lower()
        return self.all_shares or any(g == "*" or g.lower() == s for g in self.shares)


def _unauth(message: str, reason: str) -> SharingError:
    return SharingError(401, "UNAUTHENTICATED", message, reason=reason)


class OAuthError(DeltaError):
    """A refused token request, answered as RFC 6749 §5.2 says (`error`, `error_description`)."""

    def __init__(self, status: int, error: str, description: str, reason: str | None = None):
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description
        self.reason = reason or error


class SeenAssertions:
    """The (client id, jti) of the JWT assertions accepted: in the state store when there is one
    (shared by every process and replica), else in this process's memory."""

    def __init__(self, store=None):
        self._store = store
        self._mem: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def claim(self, client_id: str, jti: str, exp: float, now: float) -> bool:
        """True the first time (client id, jti) is seen; False for a replay."""
        if self._store is not None:
            return self._store.claim_assertion(client_id, jti, exp, now)
        with self._lock:
            for key in [k for k, e in self._mem.items() if e < now - 120]:
                del self._mem[key]
            if (client_id, jti) in self._mem:
                return False
            self._mem[(client_id, jti)] = float(exp)
            return True


class Authenticator:
    def __init__(self, config: ServerConfig, recipients: Recipients, signer: Signer | None = None,
                 seen: SeenAssertions | None = None):
        self.config = config
        self.recipients = recipients
        self.signer = signer
        self._bearer_hash = hash_token(config.bearer_token) if config.bearer_token else None
        self._seen = seen if seen is not None else SeenAssertions()

    # --- OAuth (client-credentials grant) -------------------------------------------------------
    def issue_token(self, client_id: str, client_secret: str, scope: str | None = None) -> dict:
        """An access token for an OAuth recipient's client credentials (the token endpoint's
        answer), or OAuthError. The token is signed, names the recipient and its client, is
        bound to the secret presented (rotating the client ends it, after the rotation's grace;
        revoking at once) and expires after the recipient's token lifetime."""
        if self.signer is None:
            raise OAuthError(400, "unsupported_grant_type", "this server issues no OAuth tokens")
        now_ms = int(time.time() * 1000)
        r = self.recipients.by_client_id(client_id)
        if r is not None and r.auth == "oauth" and r.public_key is None:   # a key-pair client has no secret
            h = hash_token(client_secret)
            if h in r.valid_hashes(now_ms):
                return self._issue(r, scope, now_ms, h)
        raise OAuthError(401, "invalid_client", "unknown client or wrong client secret", "bad_client_secret")

    def _issue(self, r: Recipient, scope: str | None, now_ms: int, secret_hash: str) -> dict:
        if not r.active(now_ms):
            raise OAuthError(401, "invalid_client", "the client was revoked or has expired", "revoked_or_expired")
        ttl = r.token_ttl or OAUTH_TOKEN_TTL
        if r.expires_at is not None:
            ttl = max(1, min(ttl, (r.expires_at - now_ms) // 1000))
        token = _OAUTH + self.signer.token({"k": "oauth", "r": r.name, "c": r.client_id,
                                            "b": secret_hash[:32], "exp": now_ms // 1000 + ttl})
        out = {"access_token": token, "token_type": "Bearer", "expires_in": int(ttl)}
        if scope:
            out["scope"] = scope
        return out

    def issue_jwt_token(self, assertion: str, audiences: set[str], scope: str | None = None) -> dict:
        """An access token for a JWT assertion signed by a key-pair client's private key (see
        `jws`); OAuthError `invalid_client` (unknown or revoked client) or `invalid_grant` (the
        assertion is malformed, badly signed, of another algorithm or key type, for another
        audience, expired, not yet valid, too long-lived or replayed)."""
        if self.signer is None:
            raise OAuthError(400, "unsupported_grant_type", "this server issues no OAuth tokens")
        try:
            iss = unverified_claims(assertion).get("iss")
        except JwtError as e:
            raise OAuthError(400, "invalid_grant", f"the assertion is not a JWT: {e}", "jwt_format") from None
        r = self.recipients.by_client_id(iss) if isinstance(iss, str) else None
        if r is None or r.auth != "oauth" or r.public_key is None:
            raise OAuthError(401, "invalid_client", "the assertion's issuer is not a known key-pair client",
                             "unknown_client")
        now = time.time()
        try:
            header, claims = verify_assertion(assertion, r.public_key, issuer=r.client_id, audiences=audiences,
                                              now=now)
        except JwtError as e:
            raise OAuthError(400, "invalid_grant", f"the assertion does not verify: {e}", "jwt_" + e.reason) from None
        if r.key_id is not None and header.get("kid") not in (None, r.key_id):
            raise OAuthError(400, "invalid_grant", "the assertion is signed with another key id", "jwt_kid")
        if not self._seen.claim(r.client_id, claims["jti"], float(claims["exp"]), now):
            raise OAuthError(400, "invalid_grant", "the assertion was already used (jti replayed)", "jwt_replayed")
        return self._issue(r, scope, int(now * 1000), r.token_sha256)

    def _principal_of(self, r: Recipient, binding: str) -> Principal:
        return Principal(_RECIPIENT + r.name, False, tuple(r.shares), Holder(_RECIPIENT + r.name, binding), r.name, r)

    def _oauth_principal(self, token: str) -> Principal:
        try:
            payload = self.signer.read_token(token[len(_OAUTH):], k="oauth")
        except BadToken as e:
            expired = "expired" in str(e)
            raise _unauth("the access token has expired" if expired else "invalid access token",
                          "token_expired" if expired else "bad_token") from None
        r = self.recipients.get(str(payload.get("r")))
        b = str(payload.get("b"))
        binding = None
        if r is not None and r.auth == "oauth" and r.client_id == payload.get("c"):
            binding = next((h for h in r.valid_hashes() if hmac.compare_digest(h[:32], b)), None)
        if binding is None:
            raise _unauth("the access token's client was rotated or deleted", "rotated_or_deleted")
        if not r.active():
            raise _unauth("the access token's client was revoked or has expired", "revoked_or_expired")
        return self._principal_of(r, binding)

    def principal(self, token: str | None) -> Principal:
        """The caller a bearer token (None: no Authorization header) stands for, or a 401."""
        if not token:
            if self.config.allow_anonymous:
                return Principal(_ANONYMOUS, True, (), Holder(_ANONYMOUS, _ANONYMOUS), "<anonymous>")
            raise _unauth("a bearer token is required", "missing_token")
        h = hash_token(token)
        if self._bearer_hash is not None and hmac.compare_digest(self._bearer_hash, h):
            return Principal(_BEARER, True, (), Holder(_BEARER, self._bearer_hash), "<config bearerToken>")
        if token.startswith(_OAUTH) and self.signer is not None:
            return self._oauth_principal(token)
        r = self.recipients.by_token_hash(h)
        if r is None or r.auth != "bearer":
            raise _unauth("invalid bearer token", "unknown_token")
        if not r.active():
            raise _unauth("the bearer token has expired or was revoked", "revoked_or_expired")
        return self._principal_of(r, h)

    def bindings_of(self, credential: str, share: str) -> tuple[str, ...]:
        """The current bindings of the holder named by a file URL's credential, if that holder
        may still read files of `share` (the current token's, and earlier ones in their grace
        period); else ()."""
        if credential == _ANONYMOUS:
            return (_ANONYMOUS,) if self.config.allow_anonymous else ()
        if credential == _BEARER:
            return (self._bearer_hash,) if self._bearer_hash else ()
        if credential.startswith(_RECIPIENT):
            r = self.recipients.get(credential[len(_RECIPIENT):])
            if r is None or not r.active() or not r.grants(share):
                return ()
            return tuple(r.valid_hashes())
        return ()

    @staticmethod
    def name_of(credential: str) -> str:
        """How the audit log names the holder of a file URL's credential."""
        if credential.startswith(_RECIPIENT):
            return credential[len(_RECIPIENT):]
        return {"bearer": "<config bearerToken>", "anonymous": "<anonymous>"}.get(credential, "<unknown>")
