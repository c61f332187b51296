"""Who is asking: authentication of sharing requests and of downloads through the server's own
file URLs.

Owns: the principals (a recipient from the recipients file, the config's single
`authorization.bearerToken`, or — only with `allowAnonymous: true` — an anonymous caller), the
rule that fails closed (no token → 401 unless anonymous access is explicitly allowed; a token that
matches nothing → 401, also when the recipients file has been deleted), and the *holder* each
principal's file URLs are bound to, with `binding_of`, which re-derives a holder's binding at
download time (None once the recipient is revoked, rotated, expired, deleted or no longer granted
the table's share). Tokens are compared as SHA-256 digests in constant time.

OAuth access tokens are issued for a client's credentials (`issue_token`, the client-credentials
grant) or for a JWT assertion signed by a client's registered key (`issue_jwt_token`, the
JWT-bearer grant of RFC 7523: `iss` the client id, `aud` the token endpoint, `exp` at most
`MAX_ASSERTION_SECONDS` ahead, `nbf`/`iat` not in the future, each `jti` accepted once).
"""

from __future__ import annotations

import hmac
import threading
import time
from dataclasses import dataclass

from ..errors import DeltaError
from .config import OAUTH_TOKEN_TTL, RecipientStore, ServerConfig, hash_token
from .errors import SharingError
from .signing import BadToken, Holder, Signer

__all__ = ["Principal", "Authenticator", "SeenAssertions", "OAuthError", "MAX_ASSERTION_SECONDS"]

MAX_ASSERTION_SECONDS = 600   # how far ahead a JWT assertion may expire
_CLOCK_SKEW = 60

_RECIPIENT = "r:"     # a holder credential naming a recipient: "r:<name>"
_BEARER = "bearer"    # the config's bearerToken
_ANONYMOUS = "anonymous"
_OAUTH = "oat."       # the prefix of the access tokens the token endpoint issues


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


class OAuthError(DeltaError):
    """A refused token request, answered as RFC 6749 §5.2 says (`error`, `error_description`)."""

    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status = status
        self.error = error
        self.description = description


def _claims_of(assertion: str) -> dict:
    """The claims of a JWT, not yet verified (to find whose key verifies it)."""
    import base64
    import json

    from .jws import JwtError

    parts = assertion.split(".") if isinstance(assertion, str) else []
    if len(parts) != 3:
        raise JwtError("expected three dot-separated parts")
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:
        raise JwtError("its claims are not base64url JSON") from None
    if not isinstance(claims, dict):
        raise JwtError("its claims are not a JSON object")
    return claims


class SeenAssertions:
    """The (client id, jti) of the JWT assertions accepted, until they expire: each is accepted
    once. In memory for a server of one process; with `directory` (a server running several
    worker processes) one file per assertion, created exclusively, so that exactly one worker
    accepts it whichever worker each attempt reaches."""

    def __init__(self, directory: str | None = None):
        self._dir = directory
        self._mem: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self._next_purge = 0.0

    def claim(self, client_id: str, jti: str, exp: float, now: float) -> bool:
        """True the first time (client id, jti) is seen; False for a replay."""
        if self._dir is None:
            with self._lock:
                for key in [k for k, e in self._mem.items() if e < now - _CLOCK_SKEW]:
                    del self._mem[key]
                if (client_id, jti) in self._mem:
                    return False
                self._mem[(client_id, jti)] = float(exp)
                return True
        import hashlib
        import os

        os.makedirs(self._dir, mode=0o700, exist_ok=True)
        self._purge(now)
        name = hashlib.sha256(f"{client_id}\0{jti}".encode()).hexdigest()
        try:
            fd = os.open(os.path.join(self._dir, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        try:
            os.write(fd, str(int(exp)).encode())
        finally:
            os.close(fd)
        return True

    def _purge(self, now: float) -> None:
        """Drop the files of assertions expired (at most once a minute per process)."""
        import os

        if now < self._next_purge:
            return
        self._next_purge = now + 60
        with os.scandir(self._dir) as it:
            for e in it:
                try:
                    with open(e.path, "rb") as f:
                        exp = float(f.read() or 0)
                    if exp < now - _CLOCK_SKEW:
                        os.unlink(e.path)
                except (OSError, ValueError):
                    continue


class Authenticator:
    def __init__(self, config: ServerConfig, recipients: RecipientStore, signer: Signer | None = None,
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
        bound to its current secret (rotating or revoking the client ends it) and expires after
        the recipient's token lifetime."""
        if self.signer is None:
            raise OAuthError(400, "unsupported_grant_type", "this server issues no OAuth tokens")
        now_ms = int(time.time() * 1000)
        for r in self.recipients.all():
            if r.auth == "oauth" and r.client_id is not None and hmac.compare_digest(r.client_id, client_id):
                if r.public_key is not None or not hmac.compare_digest(r.token_sha256, hash_token(client_secret)):
                    break   # a key-pair client has no secret to present
                return self._issue(r, scope, now_ms)
        raise OAuthError(401, "invalid_client", "unknown client or wrong client secret")

    def _issue(self, r, scope: str | None, now_ms: int) -> dict:
        if not r.active(now_ms):
            raise OAuthError(401, "invalid_client", "the client was revoked or has expired")
        ttl = r.token_ttl or OAUTH_TOKEN_TTL
        if r.expires_at is not None:
            ttl = max(1, min(ttl, (r.expires_at - now_ms) // 1000))
        token = _OAUTH + self.signer.token({"k": "oauth", "r": r.name, "c": r.client_id,
                                            "b": r.token_sha256[:32], "exp": now_ms // 1000 + ttl})
        out = {"access_token": token, "token_type": "Bearer", "expires_in": int(ttl)}
        if scope:
            out["scope"] = scope
        return out

    def issue_jwt_token(self, assertion: str, audiences: set[str], scope: str | None = None) -> dict:
        """An access token for a JWT assertion signed by a key-pair client's private key (see the
        module docstring); OAuthError `invalid_client` (unknown or revoked client) or
        `invalid_grant` (the assertion is malformed, badly signed, for another audience, expired,
        too long-lived or replayed)."""
        from .jws import JwtError, verify_jwt

        if self.signer is None:
            raise OAuthError(400, "unsupported_grant_type", "this server issues no OAuth tokens")
        try:
            unverified = _claims_of(assertion)
        except JwtError as e:
            raise OAuthError(400, "invalid_grant", f"the assertion is not a JWT: {e}") from None
        iss = unverified.get("iss")
        r = next((x for x in self.recipients.all() if x.auth == "oauth" and x.public_key is not None
                  and isinstance(iss, str) and x.client_id is not None and hmac.compare_digest(x.client_id, iss)),
                 None)
        if r is None:
            raise OAuthError(401, "invalid_client", "the assertion's issuer is not a known key-pair client")
        try:
            header, claims = verify_jwt(assertion, r.public_key)
        except JwtError as e:
            raise OAuthError(400, "invalid_grant", f"the assertion does not verify: {e}") from None
        if r.key_id is not None and header.get("kid") not in (None, r.key_id):
            raise OAuthError(400, "invalid_grant", "the assertion is signed with another key id")
        aud = claims.get("aud")
        auds = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
        if not auds & audiences:
            raise OAuthError(400, "invalid_grant", "the assertion is for another audience (aud must be this token "
                                                   "endpoint)")
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool):
            raise OAuthError(400, "invalid_grant", "the assertion has no exp")
        if exp < now - _CLOCK_SKEW:
            raise OAuthError(400, "invalid_grant", "the assertion has expired")
        if exp > now + MAX_ASSERTION_SECONDS:
            raise OAuthError(400, "invalid_grant", f"the assertion lives too long (at most {MAX_ASSERTION_SECONDS} s)")
        for k in ("nbf", "iat"):
            v = claims.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > now + _CLOCK_SKEW:
                raise OAuthError(400, "invalid_grant", f"the assertion's {k} is in the future")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            raise OAuthError(400, "invalid_grant", "the assertion has no jti")
        if not self._seen.claim(r.client_id, jti, float(exp), now):
            raise OAuthError(400, "invalid_grant", "the assertion was already used (jti replayed)")
        return self._issue(r, scope, int(now * 1000))

    def _oauth_principal(self, token: str) -> Principal:
        try:
            payload = self.signer.read_token(token[len(_OAUTH):], k="oauth")
        except BadToken as e:
            expired = "expired" in str(e)
            raise SharingError(401, "UNAUTHENTICATED",
                               "the access token has expired" if expired else "invalid access token") from None
        r = self.recipients.get(str(payload.get("r")))
        if r is None or r.auth != "oauth" or r.client_id != payload.get("c") \
                or not hmac.compare_digest(r.token_sha256[:32], str(payload.get("b"))):
            raise SharingError(401, "UNAUTHENTICATED", "the access token's client was rotated or deleted")
        if not r.active():
            raise SharingError(401, "UNAUTHENTICATED", "the access token's client was revoked or has expired")
        return Principal(_RECIPIENT + r.name, False, tuple(r.shares), Holder(_RECIPIENT + r.name, r.token_sha256))

    def principal(self, token: str | None) -> Principal:
        """The caller a bearer token (None: no Authorization header) stands for, or a 401."""
        if not token:
            if self.config.allow_anonymous:
                return Principal(_ANONYMOUS, True, (), Holder(_ANONYMOUS, _ANONYMOUS))
            raise SharingError(401, "UNAUTHENTICATED", "a bearer token is required")
        h = hash_token(token)
        if self._bearer_hash is not None and hmac.compare_digest(self._bearer_hash, h):
            return Principal(_BEARER, True, (), Holder(_BEARER, self._bearer_hash))
        if token.startswith(_OAUTH) and self.signer is not None:
            return self._oauth_principal(token)
        now_ms = int(time.time() * 1000)
        expired = False
        for r in self.recipients.all():
            if r.auth == "bearer" and hmac.compare_digest(r.token_sha256, h):
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
