"""The recipient's side of authentication: the `Authorization` header a profile stands for (`credentials_for`).

  1. A bearer token as it is; a version-2 `basic` profile: HTTP Basic on every request.
  2. `oauth_client_credentials`: a token from `tokenEndpoint` by the client-credentials grant (RFC 6749 §4.4).
  3. `oauth_jwt_bearer_private_key_jwt`: a token by the JWT-bearer grant (RFC 7523), see `JwtBearerCredentials`.
  4. OAuth tokens are cached per profile, renewed when a tenth of their lifetime (at most 10 minutes) is left
     or on a 401 (`invalidate`); the token endpoint is retried like every sharing request."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Optional

from ..errors import DeltaError
from .jws import JWT_ALGORITHMS, JwtError, sign_jwt
from .model import BASIC, OAUTH_CLIENT_CREDENTIALS, OAUTH_JWT_BEARER, DeltaSharingProfile, ProfileError
from .retry import backoff_sleep, retryable_status

__all__ = ["Credentials", "BearerCredentials", "BasicCredentials", "OAuthCredentials", "JwtBearerCredentials",
           "OAuthError", "credentials_for", "JWT_BEARER_GRANT"]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class OAuthError(DeltaError):
    """The token endpoint refused the client's credentials or answered something unusable."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class Credentials:
    """What goes into `Authorization` for one profile."""

    def header(self) -> str:
        raise NotImplementedError

    def invalidate(self, used: str) -> bool:
        """The server refused `used` (401): drop it if it is still the current one. True when a
        new attempt may succeed (a fresh token will be fetched)."""
        return False

    def expired_hint(self) -> str:
        """Words for a 401: why the credentials may have been refused."""
        return ""


class BearerCredentials(Credentials):
    def __init__(self, token: str, expiration_time: Optional[str]):
        self.token = token
        self.expiration_time = expiration_time

    def header(self) -> str:
        return f"Bearer {self.token}"

    def expired_hint(self) -> str:
        if not self.expiration_time:
            return ""
        try:
            exp = datetime.fromisoformat(self.expiration_time.replace("Z", "+00:00"))
            if exp.tzinfo is None:
                exp = exp.replace(tzinfo=timezone.utc)
        except ValueError:
            return ""
        if exp <= datetime.now(timezone.utc):
            return f" (the profile's bearer token expired at {self.expiration_time})"
        return ""


class BasicCredentials(Credentials):
    """HTTP Basic authentication (a `basic` profile): the same header on every request. Unlike the official
    connector, no `grant_type=client_credentials` post to the sharing endpoint first (it is no token endpoint)."""

    def __init__(self, username: str, password: str):
        raw = f"{username}:{password}".encode("utf-8")
        self._header = "Basic " + base64.b64encode(raw).decode("ascii")

    def header(self) -> str:
        return self._header

    def expired_hint(self) -> str:
        return " (the server refused the profile's username and password)"


class OAuthCredentials(Credentials):
    """Access tokens of the client-credentials grant, fetched on first use and renewed."""

    RENEW_MAX_SECONDS = 600

    def __init__(self, token_endpoint: str, client_id: str, client_secret: str, scope: Optional[str] = None,
                 num_retries: int = 5):
        self.token_endpoint = token_endpoint
        self.client_id = client_id
        self.client_secret = client_secret
        self.scope = scope
        self.num_retries = num_retries
        self._lock = threading.Lock()
        self._token: Optional[str] = None
        self._expires_at = 0.0
        self._renew_at = 0.0
        self.fetches = 0   # tokens obtained from the endpoint (renewals included)

    def header(self) -> str:
        with self._lock:
            if self._token is None or time.time() >= self._renew_at:
                self._fetch()
            return f"Bearer {self._token}"

    def invalidate(self, used: str) -> bool:
        with self._lock:
            if self._token is not None and used == f"Bearer {self._token}":
                self._token = None
                return True
            return self._token is None or used != f"Bearer {self._token}"

    def _grant(self) -> tuple[dict, Any]:
        """The token request's form and HTTP auth."""
        data = {"grant_type": "client_credentials"}
        if self.scope:
            data["scope"] = self.scope
        return data, (self.client_id, self.client_secret)

    def _fetch(self) -> None:
        import httpx

        last: Exception | None = None
        for attempt in range(self.num_retries + 1):
            data, auth = self._grant()
            try:
                r = httpx.post(self.token_endpoint, data=data, auth=auth,
                               headers={"Accept": "application/json"}, timeout=60)
            except httpx.TransportError as e:
                last = e
                backoff_sleep(attempt)
                continue
            if retryable_status(r.status_code) and attempt < self.num_retries:
                last = OAuthError(f"token endpoint answered {r.status_code}", r.status_code)
                backoff_sleep(attempt, r.headers.get("Retry-After"))
                continue
            if r.status_code != 200:
                detail = ""
                try:
                    body = r.json()
                    detail = ": " + str(body.get("error_description") or body.get("error") or body.get("message") or "")
                except ValueError:
                    pass
                raise OAuthError(f"the token endpoint {self.token_endpoint} refused the client credentials "
                                 f"({r.status_code}{detail})", r.status_code)
            try:
                body = r.json()
                token = body["access_token"]
                expires_in = int(body["expires_in"])
            except (ValueError, KeyError, TypeError):
                raise OAuthError(f"the token endpoint {self.token_endpoint} answered without a usable "
                                 f"access_token/expires_in") from None
            if not isinstance(token, str) or not token:
                raise OAuthError(f"the token endpoint {self.token_endpoint} answered an empty access_token")
            now = time.time()
            self._token = token
            self._expires_at = now + expires_in
            self._renew_at = self._expires_at - min(self.RENEW_MAX_SECONDS, expires_in / 10)
            self.fetches += 1
            return
        raise OAuthError(f"the token endpoint {self.token_endpoint} could not be reached: {last}")

    def expired_hint(self) -> str:
        return " (the OAuth client may have been revoked or lost its grants)"


class JwtBearerCredentials(OAuthCredentials):
    """Access tokens of the JWT-bearer grant (RFC 7523), each asked with a fresh assertion signed
    by the profile's private key, as the official connector makes it: `grant_type=urn:ietf:params:oauth:
    grant-type:jwt-bearer`, header `alg`, `kid`; claims `iss` (client id), `aud` (the issuer), `iat`, `exp`
    (two minutes), `jti`, `scope`, `resource` (the audience); signed by `jws`."""

    def __init__(self, token_endpoint: str, client_id: str, issuer: str, audience: Optional[str],
                 private_key_file: str, key_id: Optional[str], algorithm: Optional[str], scope: Optional[str] = None,
                 num_retries: int = 5):
        super().__init__(token_endpoint, client_id, "", scope, num_retries)
        self.issuer = issuer
        self.audience = audience
        self.key_id = key_id
        self.algorithm = algorithm or "RS256"
        if self.algorithm not in JWT_ALGORITHMS:
            raise ProfileError(f"JWT algorithm {self.algorithm!r} is not supported (supported: "
                               f"{', '.join(JWT_ALGORITHMS)})")
        try:
            with open(private_key_file, "rb") as f:
                self._pem = f.read()
        except OSError as e:
            raise ProfileError(f"cannot read the profile's private key file {private_key_file}: "
                               f"{e.strerror or e}") from None

    def assertion(self) -> str:
        now = int(time.time())
        header: dict[str, Any] = {"alg": self.algorithm, "typ": "JWT"}
        if self.key_id:
            header["kid"] = self.key_id
        claims: dict[str, Any] = {"aud": self.issuer, "iss": self.client_id, "iat": now, "exp": now + 120,
                                  "jti": str(uuid.uuid4())}
        if self.scope:
            claims["scope"] = self.scope
        if self.audience:
            claims["resource"] = self.audience
        try:
            return sign_jwt(header, claims, self._pem)
        except JwtError as e:
            raise ProfileError(f"cannot sign the token request's assertion: {e}") from None

    def _grant(self) -> tuple[dict, Any]:
        return {"grant_type": JWT_BEARER_GRANT, "assertion": self.assertion()}, None


_OAUTH_CACHE: dict[tuple, OAuthCredentials] = {}
_CACHE_LOCK = threading.Lock()


def credentials_for(profile: DeltaSharingProfile) -> Credentials:
    """The credentials of a profile (OAuth ones shared by every client of the same profile, so
    a token is reused until it needs renewal)."""
    if profile.auth_type == OAUTH_CLIENT_CREDENTIALS:
        key = (profile.token_endpoint, profile.client_id, profile.client_secret, profile.scope)
        with _CACHE_LOCK:
            c = _OAUTH_CACHE.get(key)
            if c is None:
                c = _OAUTH_CACHE[key] = OAuthCredentials(profile.token_endpoint, profile.client_id,
                                                         profile.client_secret, profile.scope)
            return c
    if profile.auth_type == OAUTH_JWT_BEARER:
        pk = profile.private_key or {}
        key = (OAUTH_JWT_BEARER, profile.token_endpoint, profile.client_id, profile.issuer, profile.audience,
               profile.scope, pk.get("privateKeyFile"), pk.get("keyId"), pk.get("algorithm"))
        with _CACHE_LOCK:
            c = _OAUTH_CACHE.get(key)
            if c is None:
                c = _OAUTH_CACHE[key] = JwtBearerCredentials(
                    profile.token_endpoint, profile.client_id, profile.issuer, profile.audience,
                    pk["privateKeyFile"], pk.get("keyId"), pk.get("algorithm"), profile.scope)
            return c
    if profile.auth_type == BASIC:
        return BasicCredentials(profile.username, profile.password)
    return BearerCredentials(profile.bearer_token, profile.expiration_time)
