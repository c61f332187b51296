"""What every route of the sharing server shares: the configuration, the recipients, the signer,
the shared tables, the asynchronous queries (`queries`), and the FastAPI dependencies that hand
them (and the caller) to a route.

Owns: looking up shares, schemas and tables for a principal (an ungranted share answers exactly
like a missing one), listing pagination with signed page tokens, mapping errors of the log core
to protocol errors (with storage locations taken out of their messages), the response's file-URL
signer (base URL, expiry rounded to the minute, the caller as holder), and resolving timestamps
to versions.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from ..errors import TableNotFoundError, UnsupportedFeatureError, VersionNotFoundError
from ..log.delta_log import parse_timestamp
from ..read.changes import CdfNotEnabledError
from .auth import Authenticator, Principal, SeenAssertions
from .config import SchemaConfig, ServerConfig, ShareConfig, TableConfig, valid_name
from .errors import SharingError, bad_request, not_found, public_message
from .queries import AsyncQueries
from .signing import BadToken, FileUrls, Signer
from .tables import SharedTable, now_s
from .vending import CredentialVendor
from .audit import AuditLog
from .limits import Limiter
from .metrics import Metrics
from .recipients import open_recipients
from .store import open_store

__all__ = ["ServerContext", "get_context", "current_principal", "admit", "MAX_LIST", "AUDIT_KEY", "CLIENT_KEY",
           "STREAM_KEY"]

AUDIT_KEY = "tahoe.audit"     # the request's audit record (a dict) in the ASGI scope
CLIENT_KEY = "tahoe.client"   # the client's address (see limits.client_address)
STREAM_KEY = "tahoe.stream"   # the recipient whose in-flight count this request holds

MAX_LIST = 500
T = TypeVar("T")


class ServerContext:
    def __init__(self, config: ServerConfig, workers: int = 1):
        """`workers`: how many processes serve the config on this host. Whatever processes and
        replicas must share lives in the state store (`store`): recipients (unless in a JSON
        `recipientsFile`), the JWT assertions seen, asynchronous queries, usage."""
        self.config = config
        self.workers = workers
        self.signer = Signer(config.signing_key)
        self.store = open_store(config.store_url)
        self.recipients = open_recipients(config, self.store)
        self.auth = Authenticator(config, self.recipients, self.signer, SeenAssertions(self.store))
        self.metrics = Metrics(config.metrics_enabled)
        self.tables = {key: SharedTable(t, config.presigned_url_timeout_seconds, self.metrics,
                                        store_urls=config.file_urls == "store")
                       for key, t in config.tables_by_key().items()}
        self.queries = AsyncQueries(self.signer, config.async_query_ttl_seconds, self.store, config.replica_id)
        self.vendor = CredentialVendor(config.temporary_credentials)
        self.limiter = Limiter(config.limits, self.store)
        self.audit = AuditLog(config.audit.path, config.audit.max_bytes, config.audit.backup_count) \
            if config.audit.enabled else None
        self.ready = False
        self.warmed = 0

    def close(self) -> None:
        """Stop the background work, writing what is queued (audit records, usage)."""
        self.queries.close()
        self.limiter.close()
        if self.audit is not None:
            self.audit.close()
        self.store.close()

    def page_token_expiry(self) -> int:
        return now_s() + self.config.page_token_ttl_seconds

    # --- lookups ----------------------------------------------------------------------------------
    def find_share(self, p: Principal, share: str) -> ShareConfig:
        if not valid_name(share):
            raise not_found(f"share {share!r} does not exist")
        s = self.config.share(share)
        if s is None or not p.grants(s.name):
            raise not_found(f"share {share} does not exist")
        return s

    def find_schema(self, p: Principal, share: str, schema: str) -> tuple[ShareConfig, SchemaConfig]:
        s = self.find_share(p, share)
        sc = next((x for x in s.schemas if x.name.lower() == schema.lower()), None)
        if sc is None:
            raise not_found(f"schema {share}.{schema} does not exist")
        return s, sc

    def find_table(self, p: Principal, share: str, schema: str, table: str) -> SharedTable:
        _, sc = self.find_schema(p, share, schema)
        t = next((x for x in sc.tables if x.name.lower() == table.lower()), None)
        if t is None:
            raise not_found(f"table {share}.{schema}.{table} does not exist")
        return self.tables[t.key]

    def page(self, p: Principal, kind: str, items: list[dict], max_results: Optional[int],
             page_token: Optional[str]) -> dict[str, Any]:
        """One page of a listing; its `nextPageToken` is signed and bound to caller and listing."""
        if max_results is None:
            max_results = MAX_LIST
        if max_results < 0 or max_results > MAX_LIST:
            raise bad_request(f"maxResults must be between 0 and {MAX_LIST}")
        offset = 0
        if page_token:
            try:
                offset = int(self.signer.read_token(page_token, k=kind, r=p.id)["o"])
            except (BadToken, KeyError, TypeError, ValueError):
                raise bad_request("invalid pageToken") from None
        chunk = items[offset:offset + max_results]
        out: dict[str, Any] = {"items": chunk}
        nxt = offset + len(chunk)
        if nxt < len(items):
            out["nextPageToken"] = self.signer.token({"k": kind, "r": p.id, "o": nxt, "exp": self.page_token_expiry()})
        return out

    # --- errors -----------------------------------------------------------------------------------
    def guard(self, st: SharedTable, fn: Callable[..., T], *args, **kw) -> T:
        """Run fn, mapping the log core's errors on table `st` to protocol errors whose messages
        name the table as shared, never where it is stored."""
        try:
            return fn(*args, **kw)
        except SharingError:
            raise
        except (VersionNotFoundError, CdfNotEnabledError) as e:
            raise bad_request(self.public(st, str(e))) from None
        except UnsupportedFeatureError as e:
            raise SharingError(400, "UNSUPPORTED_OPERATION", self.public(st, str(e))) from None
        except TableNotFoundError:
            raise not_found(f"the data of table {self.shared_name(st.cfg)} does not exist") from None
        except (ValueError, TypeError) as e:
            raise bad_request(self.public(st, str(e))) from None

    @staticmethod
    def shared_name(t: TableConfig) -> str:
        return f"{t.share}.{t.schema}.{t.name}"

    def public(self, st: SharedTable, message: str) -> str:
        """`message` with the table's storage location replaced by its shared name."""
        name = f"<table {self.shared_name(st.cfg)}>"
        known = [(st.cfg.location, name), (st.cfg.location.rstrip("/"), name)]
        try:
            root = st.root
            known += [(root, name), ("file://" + root, name), ("file:" + root, name)]
        except Exception:  # the table cannot be opened: its location is all there is to hide
            pass
        return public_message(message, known)

    # --- responses --------------------------------------------------------------------------------
    def url_expiry(self) -> int:
        """URL expiry in epoch seconds: at least the configured timeout from now; timeouts of ten
        minutes or more are rounded up to the minute so that the URLs of one minute are identical
        (and their lines cacheable), shorter ones are kept exact (rounding would more than double
        a timeout of a few seconds)."""
        ttl = self.config.presigned_url_timeout_seconds
        if ttl < 600:
            return now_s() + ttl
        return -(-(now_s() + ttl) // 60) * 60

    def base_url(self, request: Request) -> str:
        if self.config.public_url:
            return self.config.public_url.rstrip("/")
        return str(request.base_url).rstrip("/") + self.config.endpoint

    def file_urls(self, request: Request, p: Principal) -> FileUrls:
        """The signer of this response's file URLs: bound to the caller, expiring together."""
        return self.signer.file_urls(self.base_url(request), self.url_expiry(), p.holder)

    def check_timestamp(self, ts: str) -> None:
        try:
            parse_timestamp(ts)
        except ValueError as e:
            raise bad_request(str(e)) from None

    def version_at_or_after(self, st: SharedTable, ts: str) -> int:
        return st.log.version_at_or_after(ts)

    def version_at_or_before(self, st: SharedTable, ts: str) -> int:
        return st.log.version_at_or_before(ts)


# --- FastAPI dependencies -------------------------------------------------------------------------
_bearer = HTTPBearer(auto_error=False, description="A recipient's bearer token")


def get_context(request: Request) -> ServerContext:
    return request.app.state.sharing


def current_principal(request: Request,
                      creds: Optional[HTTPAuthorizationCredentials] = Depends(_bearer)) -> Principal:
    """The authenticated caller (401 otherwise: see `auth`), once the recipient's controls let
    the request in (403 from an address not allowed, 429 over a limit: see `limits`)."""
    ctx = get_context(request)
    rec = request.scope.get(AUDIT_KEY)
    token = creds.credentials if creds is not None and creds.scheme.lower() == "bearer" else None
    try:
        if token is None and request.headers.get("authorization"):
            # a malformed or non-bearer Authorization header is a failed authentication, never anonymous
            raise SharingError(401, "UNAUTHENTICATED", "the Authorization header must be 'Bearer <token>'",
                               reason="malformed_header")
        p = ctx.auth.principal(token)
    except SharingError as e:
        if rec is not None:
            rec["authFailure"] = e.reason or "unauthenticated"
        raise
    if rec is not None:
        rec["recipient"] = p.name
    r = p.recipient
    if r is not None:
        admit(ctx, request, r)
    return p


def admit(ctx: ServerContext, request: Request, r) -> None:
    """Let a request of recipient `r` in, or raise its refusal (see `limits`); counts it in flight
    (released by the middleware when the response ends) and notes when the recipient was seen."""
    rec = request.scope.get(AUDIT_KEY)
    try:
        ctx.limiter.check_address(r, request.scope.get(CLIENT_KEY))
        ctx.limiter.check_rate(r)
        ctx.limiter.check_bytes(r)
        if ctx.limiter.enter_stream(r):
            request.scope[STREAM_KEY] = r.name
    except SharingError as e:
        if rec is not None:
            rec["refused"] = e.reason
        raise
    ctx.limiter.used(r.name)
