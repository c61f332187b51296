"""The OAuth 2.0 token endpoint (`POST {endpoint}/oauth/token`) for recipients created with
`tahoe sharing recipient add NAME --oauth`: the client-credentials grant (RFC 6749 §4.4) and, for
clients registered with a public key (`--public-key`), the JWT-bearer grant (RFC 7523 §2.1:
`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, `assertion` a JWT signed by the
client's private key, its `aud` this endpoint's URL — what the official connector's
`oauth_jwt_bearer_private_key_jwt` profiles send; checked by `auth.Authenticator.issue_jwt_token`).

For client credentials the client authenticates with HTTP Basic (`client_id:client_secret`, what
the official connector sends) or with `client_id` / `client_secret` form fields; the body is
form-encoded (`grant_type`, optional `scope`, echoed back). Answers: 200
`{"access_token", "token_type": "Bearer", "expires_in", "scope"?}` with `Cache-Control: no-store`;
errors as RFC 6749 §5.2 (`{"error", "error_description"}`: 400 `invalid_request` /
`unsupported_grant_type` / `invalid_grant`, 401 `invalid_client` with `WWW-Authenticate: Basic`)."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import parse_qs, unquote_plus

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ..auth import OAuthError
from ..context import AUDIT_KEY, CLIENT_KEY, ServerContext, get_context
from ..recipients import OAUTH_TOKEN_PATH

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"

__all__ = ["router"]

router = APIRouter(tags=["oauth"])

_MAX_BODY = 16 * 1024


def _error(e: OAuthError, headers: dict | None = None) -> JSONResponse:
    headers = {"Cache-Control": "no-store", **(headers or {})}
    if e.status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="delta-sharing"'
    return JSONResponse({"error": e.error, "error_description": e.description}, status_code=e.status,
                        headers=headers)


def _basic(header: str | None) -> tuple[str, str] | None:
    if not header or not header.lower().startswith("basic "):
        return None
    try:
        raw = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise OAuthError(401, "invalid_client", "malformed Basic credentials") from None
    cid, sep, secret = raw.partition(":")
    if not sep:
        raise OAuthError(401, "invalid_client", "malformed Basic credentials")
    # RFC 6749 §2.3.1: both are form-urlencoded before being joined
    return unquote_plus(cid), unquote_plus(secret)


@router.post(OAUTH_TOKEN_PATH)
async def token(request: Request, ctx: ServerContext = Depends(get_context)):
    """An access token for a recipient's OAuth client credentials."""
    wait = ctx.limiter.check_token_endpoint(request.scope.get(CLIENT_KEY))
    rec = request.scope.get(AUDIT_KEY)
    if wait is not None:
        if rec is not None:
            rec["refused"] = "token_rate_limited"
        return _error(OAuthError(429, "slow_down", "too many token requests from this address: retry later"),
                      {"Retry-After": str(wait)})
    try:
        body = await request.body()
        if len(body) > _MAX_BODY:
            raise OAuthError(400, "invalid_request", "the request body is too large")
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if body and ctype != "application/x-www-form-urlencoded":
            raise OAuthError(400, "invalid_request", "the body must be application/x-www-form-urlencoded")
        try:
            form = {k: v for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True,
                                              strict_parsing=bool(body)).items()}
        except (UnicodeDecodeError, ValueError):
            raise OAuthError(400, "invalid_request", "the body is not a valid form") from None
        if any(len(v) > 1 for v in form.values()):
            raise OAuthError(400, "invalid_request", "a parameter is repeated")
        f = {k: v[0] for k, v in form.items()}
        grant = f.get("grant_type")
        if grant is None:
            raise OAuthError(400, "invalid_request", "grant_type is missing")
        if grant == JWT_BEARER_GRANT:
            if not f.get("assertion"):
                raise OAuthError(400, "invalid_request", "the jwt-bearer grant needs an assertion")
            audiences = {ctx.base_url(request) + OAUTH_TOKEN_PATH, ctx.config.profile_endpoint() + OAUTH_TOKEN_PATH}
            answer = ctx.auth.issue_jwt_token(f["assertion"], audiences, f.get("scope") or None)
            if rec is not None:
                rec["recipient"] = "<jwt client>"
            return JSONResponse(answer, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})
        if grant != "client_credentials":
            raise OAuthError(400, "unsupported_grant_type",
                             f"supported grants: client_credentials, {JWT_BEARER_GRANT}")
        creds = _basic(request.headers.get("authorization"))
        if creds is None:
            if "client_id" not in f or "client_secret" not in f:
                raise OAuthError(401, "invalid_client", "client authentication is missing")
            creds = (f["client_id"], f["client_secret"])
        elif "client_secret" in f:
            raise OAuthError(400, "invalid_request", "use one client authentication method, not two")
        answer = ctx.auth.issue_token(creds[0], creds[1], f.get("scope") or None)
        r = ctx.recipients.by_client_id(creds[0])
        if rec is not None and r is not None:
            rec["recipient"] = r.name
    except OAuthError as e:
        if rec is not None:
            rec["authFailure"] = e.reason
        return _error(e)
    return JSONResponse(answer, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})
