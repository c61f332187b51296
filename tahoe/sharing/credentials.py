"""The recipient's side of authentication: the `Authorization` header a profile stands for.

Owns: `credentials_for(profile)` — a bearer token as it is (its `expirationTime` only words the
error when the server refuses it), or, for a version-2 `oauth_client_credentials` profile, an
access token obtained from the profile's `tokenEndpoint` with the OAuth 2.0 client-credentials
grant (RFC 6749 §4.4: `grant_type=client_credentials`, optional `scope`, the client
authenticated with HTTP Basic as the official connector does) and renewed before it expires —
when less than a tenth of its lifetime (at most 10 minutes) is left — or at once when the
server answers 401 (`invalidate`). Tokens are cached per profile and shared by threads (one
fetch at a time); the token endpoint is retried with backoff on 429/5xx and dropped
connections, like every sharing request.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Optional

from ..errors import DeltaError
from .model import OAUTH_CLIENT_CREDENTIALS, DeltaSharingProfile
from .retry import backoff_sleep, retryable_status

__all__ = ["Credentials", "BearerCredentials", "OAuthCredentials", "OAuthError", "credentials_for"]


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

    def _fetch(self) -> None:
        import httpx

        data = {"grant_type": "client_credentials"}
        if self.scope:
            data["scope"] = self.scope
        last: Exception | None = None
        for attempt in range(self.num_retries + 1):
            try:
                r = httpx.post(self.token_endpoint, data=data, auth=(self.client_id, self.client_secret),
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
    return BearerCredentials(profile.bearer_token, profile.expiration_time)
