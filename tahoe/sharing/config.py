"""Sharing server configuration: the YAML file (the reference server's keys) and the recipient
store next to it.

Owns: parsing/validating `shares[].schemas[].tables[]` and the server settings, object-name rules,
and the recipients file (`recipients.json` next to the config unless `recipientsFile` says
otherwise): each recipient's token — or, for an OAuth recipient, its client secret — is kept only
as a SHA-256 hex digest, with an optional expiry, a revoked flag and the shares it is granted. The file is re-read when it changes on disk, so CLI
`recipient add/revoke/rotate` take effect on a running server. Changes to it are made under an
exclusive lock on a `<file>.lock` beside it (read, change, write a temporary file, fsync, rename,
fsync the folder), so concurrent `recipient add/revoke/rotate` processes lose nothing and a reader
never sees a half-written file.

Authentication fails closed: without `authorization.bearerToken` and without recipients every
request is refused; anonymous access needs an explicit `allowAnonymous: true`.

Invariants checked at load: names are 1..255 characters without space, '/', or control
characters; names are unique case-insensitively within their parent; every table has a location;
unknown keys are refused by name (a misspelt `allowAnonymous` must not pass silently).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml

from .locks import exclusive_lock

__all__ = ["TableConfig", "SchemaConfig", "ShareConfig", "ServerConfig", "CredentialsConfig", "Recipient",
           "RecipientStore", "ACCESS_MODES",
           "ConfigError", "valid_name", "hash_token", "load_config", "profile_for", "OAUTH_TOKEN_TTL",
           "OAUTH_TOKEN_PATH", "PRIVATE_KEY_PLACEHOLDER"]

_BAD_NAME = re.compile(r"[\s/\x00-\x1f\x7f\\]")


class ConfigError(ValueError):
    """The sharing configuration or recipient file is invalid."""


def valid_name(name: str) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 255 and not _BAD_NAME.search(name) \
        and name not in (".", "..")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass
class TableConfig:
    name: str
    location: str
    share: str
    schema: str
    id: str
    history_shared: bool = False
    start_version: int = 0
    storage_options: dict[str, Any] = field(default_factory=dict)
    access_modes: tuple[str, ...] = ("url",)

    @property
    def key(self) -> str:
        """Stable, opaque key of this table in file URLs (hash of its full name and location)."""
        h = hashlib.sha256(f"{self.share.lower()}.{self.schema.lower()}.{self.name.lower()}\n{self.location}".encode())
        return h.hexdigest()[:24]


@dataclass
class SchemaConfig:
    name: str
    tables: list[TableConfig]


@dataclass
class ShareConfig:
    name: str
    schemas: list[SchemaConfig]
    id: str | None = None


@dataclass
class CredentialsConfig:
    """`temporaryCredentials`: how the server vends STS credentials for directory access (`dir`)
    to s3:// tables. With `roleArn`, AssumeRole of that role; without, GetFederationToken with the
    server's own (IAM user) credentials — both with a session policy that allows reading only the
    table's prefix. `stsEndpoint` and `region` default to the AWS environment (AWS_ENDPOINT_URL_STS,
    AWS_ENDPOINT_URL, AWS_REGION); the server's credentials to call STS are the table's
    storageOptions keys, else the environment's."""
    role_arn: str | None = None
    sts_endpoint: str | None = None
    region: str | None = None
    duration_seconds: int = 3600
    external_id: str | None = None


@dataclass
class ServerConfig:
    shares: list[ShareConfig]
    host: str = "127.0.0.1"
    port: int = 8080
    endpoint: str = "/delta-sharing"
    presigned_url_timeout_seconds: int = 3600
    evaluate_predicate_hints: bool = True
    evaluate_json_predicate_hints: bool = True
    query_table_page_size_limit: int = 10000
    bearer_token: str | None = None
    allow_anonymous: bool = False
    public_url: str | None = None
    recipients_file: str | None = None
    signing_key: bytes = b""
    config_path: str | None = None
    async_query_ttl_seconds: int = 3600
    temporary_credentials: CredentialsConfig = field(default_factory=CredentialsConfig)

    def share(self, name: str) -> ShareConfig | None:
        n = name.lower()
        return next((s for s in self.shares if s.name.lower() == n), None)

    def tables_by_key(self) -> dict[str, TableConfig]:
        return {t.key: t for s in self.shares for sc in s.schemas for t in sc.tables}

    def profile_endpoint(self) -> str:
        if self.public_url:
            return self.public_url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}{self.endpoint}"


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

# the keys each level of the config may hold (the reference server's, plus tahoe's own)
_SERVER_KEYS = {"version", "shares", "host", "port", "endpoint", "preSignedUrlTimeoutSeconds",
                "evaluatePredicateHints", "evaluateJsonPredicateHints", "queryTablePageSizeLimit",
                "authorization", "allowAnonymous", "publicUrl", "recipientsFile", "signingKey", "signingKeyFile",
                "asyncQueryTtlSeconds", "temporaryCredentials"}
_SHARE_KEYS = {"name", "id", "schemas"}
_SCHEMA_KEYS = {"name", "tables"}
_TABLE_KEYS = {"name", "location", "id", "historyShared", "cdfEnabled", "startVersion", "storageOptions",
               "accessModes"}
_CREDENTIALS_KEYS = {"roleArn", "stsEndpoint", "region", "durationSeconds", "externalId"}
ACCESS_MODES = ("url", "dir")
_AUTH_KEYS = {"bearerToken"}
# reference-server keys tahoe does not implement: refused with the reason
_UNSUPPORTED = {
    "ssl": "TLS is not terminated by tahoe's server: put a TLS proxy in front and set publicUrl",
    "deltaTableCacheSize": "tahoe caches a few snapshots per table; the size is not configurable",
    "stalenessAcceptable": "tahoe always serves the latest version",
    "evaluateJsonPredicateV2Hints": "JSON predicate hints are evaluated per evaluateJsonPredicateHints",
    "queryTablePageTokenTtlMs": "page tokens are signed and pinned to a version; they do not expire",
    "refreshTokenTtlMs": "refresh tokens are valid for one day",
}


def _bool(v: Any, default: bool, what: str) -> bool:
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise ConfigError(f"{what} must be true or false, got {v!r}")


def _int(v: Any, default: int, what: str, minimum: int) -> int:
    if v is None:
        return default
    if isinstance(v, bool):
        raise ConfigError(f"{what} must be an integer, got {v!r}")
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be an integer, got {v!r}") from None
    if n < minimum or (isinstance(v, float) and v != n):
        raise ConfigError(f"{what} must be an integer >= {minimum}, got {v!r}")
    return n


def _mapping(v: Any, what: str, allowed: set[str]) -> dict:
    if not isinstance(v, dict):
        raise ConfigError(f"{what} must be a mapping, got {type(v).__name__}")
    for k in v:
        if k in _UNSUPPORTED:
            raise ConfigError(f"{what}: {k} is not supported ({_UNSUPPORTED[k]})")
        if k not in allowed:
            raise ConfigError(f"{what}: unknown key {k!r} (known: {', '.join(sorted(allowed))})")
    return v


def _list(v: Any, what: str) -> list:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConfigError(f"{what} must be a list, got {type(v).__name__}")
    return v


def _check_unique(names: list[str], what: str) -> None:
    seen = set()
    for n in names:
        if not valid_name(n):
            raise ConfigError(f"invalid {what} name {n!r}: 1..255 characters, no spaces, '/' or control characters")
        if n.lower() in seen:
            raise ConfigError(f"duplicate {what} name {n!r} (names are case-insensitive)")
        seen.add(n.lower())


def _signing_key(raw: dict, config_path: str | None) -> bytes:
    if raw.get("signingKey"):
        return str(raw["signingKey"]).encode()
    key_file = raw.get("signingKeyFile")
    if not key_file and config_path:
        key_file = os.path.join(os.path.dirname(os.path.abspath(config_path)), ".sharing-signing-key")
    if key_file:
        if not os.path.exists(key_file):
            # complete or absent: written aside, then linked into place (exclusively), so that
            # processes loading the config at once (the workers of one server) share one key
            tmp = f"{key_file}.{secrets.token_hex(8)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, secrets.token_hex(32).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, key_file)
            except FileExistsError:
                pass   # another process made it first: use theirs
            finally:
                os.unlink(tmp)
        with open(key_file, "rb") as f:
            return f.read().strip()
    return secrets.token_bytes(32)


def _table(t: Any, share: str, schema: str) -> TableConfig:
    where = f"table {share}.{schema}.{t.get('name') if isinstance(t, dict) else repr(t)}"
    t = _mapping(t, where, _TABLE_KEYS)
    if not t.get("location"):
        raise ConfigError(f"{where} has no location")
    full = f"{share}.{schema}.{t.get('name')}"
    hist = t.get("historyShared", t.get("cdfEnabled"))
    opts = t.get("storageOptions") or {}
    if not isinstance(opts, dict):
        raise ConfigError(f"{where}: storageOptions must be a mapping")
    cfg = TableConfig(
        name=t.get("name"), location=str(t["location"]), share=share, schema=schema,
        id=str(t.get("id") or uuid.uuid5(uuid.NAMESPACE_URL, "tahoe-sharing:" + full.lower())),
        history_shared=_bool(hist, False, f"{where}: historyShared"),
        start_version=_int(t.get("startVersion"), 0, f"{where}: startVersion", 0),
        storage_options=dict(opts), access_modes=_access_modes(t.get("accessModes"), where))
    if "dir" in cfg.access_modes:
        # directory access hands out the whole table directory: its log (all of its history) too
        if not re.match(r"(?i)^s3[an]?://", cfg.location):
            raise ConfigError(f"{where}: accessModes dir needs an s3:// location (temporary credentials are "
                              f"STS credentials scoped to the table's S3 prefix)")
        if not cfg.history_shared or cfg.start_version:
            raise ConfigError(f"{where}: accessModes dir gives direct access to the table's log, so it needs "
                              f"historyShared: true and no startVersion")
    return cfg


def _access_modes(v: Any, where: str) -> tuple[str, ...]:
    if v is None:
        return ("url",)
    if isinstance(v, str):
        v = [x.strip() for x in v.split(",")]
    if not isinstance(v, list) or not v:
        raise ConfigError(f"{where}: accessModes must be a non-empty list of {', '.join(ACCESS_MODES)}")
    modes = []
    for m in v:
        if m not in ACCESS_MODES:
            raise ConfigError(f"{where}: unknown access mode {m!r} (known: {', '.join(ACCESS_MODES)})")
        if m not in modes:
            modes.append(m)
    if "url" not in modes:
        raise ConfigError(f"{where}: accessModes must include url (the Query Table API serves every table)")
    return tuple(modes)


def _credentials_config(raw: Any) -> CredentialsConfig:
    if raw is None:
        return CredentialsConfig()
    c = _mapping(raw, "temporaryCredentials", _CREDENTIALS_KEYS)
    for k in ("roleArn", "stsEndpoint", "region", "externalId"):
        if c.get(k) is not None and (not isinstance(c[k], str) or not c[k].strip()):
            raise ConfigError(f"temporaryCredentials.{k} must be a non-empty string")
    duration = _int(c.get("durationSeconds"), 3600, "temporaryCredentials.durationSeconds", 900)
    if duration > 43200:
        raise ConfigError("temporaryCredentials.durationSeconds must be at most 43200 (12 hours, STS's limit)")
    return CredentialsConfig(role_arn=c.get("roleArn"), sts_endpoint=c.get("stsEndpoint"), region=c.get("region"),
                             duration_seconds=duration, external_id=c.get("externalId"))


def parse_config(raw: dict, config_path: str | None = None) -> ServerConfig:
    if not isinstance(raw, dict):
        raise ConfigError("the sharing config must be a YAML mapping")
    _mapping(raw, "the sharing config", _SERVER_KEYS)
    if raw.get("version") not in (None, 1):
        raise ConfigError(f"config version {raw.get('version')!r} is not supported (only 1)")
    shares = []
    for s in _list(raw.get("shares"), "shares"):
        s = _mapping(s, f"share {s.get('name') if isinstance(s, dict) else s!r}", _SHARE_KEYS)
        schemas = []
        for sc in _list(s.get("schemas"), f"share {s.get('name')}: schemas"):
            sc = _mapping(sc, f"schema {s.get('name')}.{sc.get('name') if isinstance(sc, dict) else sc!r}",
                          _SCHEMA_KEYS)
            tables = [_table(t, s.get("name"), sc.get("name"))
                      for t in _list(sc.get("tables"), f"schema {s.get('name')}.{sc.get('name')}: tables")]
            _check_unique([t.name for t in tables], "table")
            schemas.append(SchemaConfig(sc.get("name"), tables))
        _check_unique([x.name for x in schemas], "schema")
        shares.append(ShareConfig(s.get("name"), schemas, s.get("id")))
    _check_unique([x.name for x in shares], "share")
    endpoint = "/" + str(raw.get("endpoint") or "/delta-sharing").strip("/")
    auth = _mapping(raw.get("authorization") or {}, "authorization", _AUTH_KEYS)
    bearer = auth.get("bearerToken")
    if bearer is not None and (not isinstance(bearer, str) or not bearer.strip()):
        raise ConfigError("authorization.bearerToken must be a non-empty string")
    rf = raw.get("recipientsFile")
    if rf and config_path and not os.path.isabs(rf):
        rf = os.path.join(os.path.dirname(os.path.abspath(config_path)), rf)
    if not rf and config_path:
        rf = os.path.join(os.path.dirname(os.path.abspath(config_path)), "recipients.json")
    return ServerConfig(
        shares=shares,
        host=str(raw.get("host") or "127.0.0.1"),
        port=_int(raw.get("port"), 8080, "port", 0),
        endpoint=endpoint if endpoint != "/" else "",
        presigned_url_timeout_seconds=_int(raw.get("preSignedUrlTimeoutSeconds"), 3600,
                                           "preSignedUrlTimeoutSeconds", 1),
        evaluate_predicate_hints=_bool(raw.get("evaluatePredicateHints"), True, "evaluatePredicateHints"),
        evaluate_json_predicate_hints=_bool(raw.get("evaluateJsonPredicateHints"), True,
                                            "evaluateJsonPredicateHints"),
        query_table_page_size_limit=_int(raw.get("queryTablePageSizeLimit"), 10000, "queryTablePageSizeLimit", 1),
        bearer_token=bearer,
        allow_anonymous=_bool(raw.get("allowAnonymous"), False, "allowAnonymous"),
        public_url=raw.get("publicUrl"),
        recipients_file=rf,
        signing_key=_signing_key(raw, config_path),
        config_path=config_path,
        async_query_ttl_seconds=_int(raw.get("asyncQueryTtlSeconds"), 3600, "asyncQueryTtlSeconds", 1),
        temporary_credentials=_credentials_config(raw.get("temporaryCredentials")),
    )


def load_config(path: str) -> ServerConfig:
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from None
    return parse_config(raw, path)


# --- recipients ------------------------------------------------------------------------------------

@dataclass
class Recipient:
    """A recipient. `auth` "bearer": `token_sha256` is the hash of its bearer token; "oauth": of
    its OAuth client secret (`client_id` names the client; access tokens from the token endpoint
    live `token_ttl` seconds). An OAuth client with a `public_key` (PEM) authenticates with JWT
    assertions signed by the matching private key (the JWT-bearer grant, RFC 7523; `key_id` is the
    `kid` it signs with) — its secret is never handed out."""
    name: str
    token_sha256: str
    shares: list[str]
    expires_at: int | None = None   # ms since epoch
    revoked: bool = False
    created_at: int = 0
    auth: str = "bearer"
    client_id: str | None = None
    token_ttl: int | None = None
    public_key: str | None = None
    key_id: str | None = None

    def grants(self, share: str) -> bool:
        s = share.lower()
        return any(g == "*" or g.lower() == s for g in self.shares)

    def active(self, now_ms: int | None = None) -> bool:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return not self.revoked and (self.expires_at is None or now_ms < self.expires_at)

    def to_dict(self) -> dict:
        d = {"name": self.name, "tokenSha256": self.token_sha256, "shares": self.shares,
             "expiresAt": self.expires_at, "revoked": self.revoked, "createdAt": self.created_at}
        if self.auth != "bearer":
            d.update({"auth": self.auth, "clientId": self.client_id, "tokenTtlSeconds": self.token_ttl})
        if self.public_key is not None:
            d.update({"publicKey": self.public_key, "keyId": self.key_id})
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Recipient":
        auth = d.get("auth") or "bearer"
        if auth not in ("bearer", "oauth"):
            raise ValueError(f"unknown auth {auth!r}")
        if auth == "oauth" and not d.get("clientId"):
            raise ValueError("an oauth recipient needs a clientId")
        ttl = d.get("tokenTtlSeconds")
        if d.get("publicKey") is not None and auth != "oauth":
            raise ValueError("a public key belongs to an oauth recipient")
        return cls(d["name"], d["tokenSha256"], list(d.get("shares") or []), d.get("expiresAt"),
                   bool(d.get("revoked", False)), int(d.get("createdAt") or 0), auth, d.get("clientId"),
                   int(ttl) if ttl is not None else None, d.get("publicKey"), d.get("keyId"))


def _fsync_dir(path: str) -> None:
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RecipientStore:
    """Recipients in a JSON file; reloaded when the file changes. Every change is a
    read-modify-write under the file's lock, written atomically (temporary file, fsync, rename)."""

    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._recipients: list[Recipient] = []
        self._by_name: dict[str, Recipient] = {}

    def _file_stamp(self):
        try:
            st = os.stat(self.path)
            return (st.st_mtime_ns, st.st_size, st.st_ino)
        except (FileNotFoundError, TypeError):
            return None

    def all(self) -> list[Recipient]:
        """The recipients as the file holds them now (none when it is absent)."""
        self._refresh()
        return list(self._recipients)

    def get(self, name: str) -> Recipient | None:
        self._refresh()
        return self._by_name.get(name)

    def _refresh(self) -> None:
        if not self.path:
            return
        stamp = self._file_stamp()
        with self._lock:
            if stamp != self._stamp:
                self._recipients = self._read() if stamp else []
                self._by_name = {r.name: r for r in self._recipients}
                self._stamp = stamp

    def _read(self) -> list[Recipient]:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return []
        except ValueError as e:
            raise ConfigError(f"recipient file {self.path} is not valid JSON: {e}") from None
        if not isinstance(data, dict) or not isinstance(data.get("recipients", []), list):
            raise ConfigError(f"recipient file {self.path} must hold {{\"recipients\": [...]}}")
        try:
            return [Recipient.from_dict(d) for d in data.get("recipients", [])]
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"recipient file {self.path} holds an invalid recipient: {e!r}") from None

    def _write(self, recipients: list[Recipient]) -> None:
        directory = os.path.dirname(os.path.abspath(self.path))
        tmp = f"{self.path}.tmp-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"recipients": [r.to_dict() for r in recipients]}, f, indent=2)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(directory)

    def update(self, change: Callable[[list[Recipient]], Any]) -> Any:
        """Apply `change` to the recipients as the file holds them, under the file's lock, and
        write the result atomically; returns what `change` returned. A `change` that raises
        writes nothing."""
        if not self.path:
            raise ConfigError("no recipient file configured")
        with exclusive_lock(self.path + ".lock"):
            recs = self._read()
            out = change(recs)
            self._write(recs)
        return out

    def add(self, name: str, shares: list[str], expires_in_days: float | None = None, oauth: bool = False,
            token_ttl: int | None = None, public_key: str | None = None,
            key_id: str | None = None) -> tuple[Recipient, str]:
        """A new recipient; returns it and its token — with `oauth`, its OAuth client secret
        (`client_id` generated; access tokens live `token_ttl` seconds, default
        OAUTH_TOKEN_TTL) — shown once, stored only hashed. With `public_key` (PEM; implies
        `oauth`) the client authenticates with JWTs signed by its private key instead of a secret
        (the returned secret is of no use to it)."""
        if not valid_name(name):
            raise ConfigError(f"invalid recipient name {name!r}")
        if public_key is not None:
            from .jws import JwtError, load_public_key

            try:
                load_public_key(public_key)
            except JwtError as e:
                raise ConfigError(f"recipient {name!r}: {e}") from None
            oauth = True
        elif key_id is not None:
            raise ConfigError("a key id needs a public key")
        if token_ttl is not None and (not oauth or token_ttl < 1):
            raise ConfigError("a token lifetime needs --oauth and must be at least 1 second")
        token = secrets.token_urlsafe(32)

        def change(recs: list[Recipient]) -> Recipient:
            if any(r.name == name for r in recs):
                raise ConfigError(f"recipient {name!r} already exists (use rotate for a new token)")
            now = int(time.time() * 1000)
            exp = None if expires_in_days is None else now + int(expires_in_days * 86400_000)
            r = Recipient(name, hash_token(token), list(shares), exp, False, now)
            if oauth:
                r.auth, r.client_id, r.token_ttl = "oauth", f"{name}-{secrets.token_hex(8)}", token_ttl
                r.public_key, r.key_id = public_key, key_id
            recs.append(r)
            return r
        return self.update(change), token

    def revoke(self, name: str) -> Recipient:
        def change(recs: list[Recipient]) -> Recipient:
            r = _named(recs, name)
            r.revoked = True
            return r
        return self.update(change)

    def rotate(self, name: str, expires_in_days: float | None = None) -> tuple[Recipient, str]:
        token = secrets.token_urlsafe(32)

        def change(recs: list[Recipient]) -> Recipient:
            r = _named(recs, name)
            r.token_sha256 = hash_token(token)
            r.revoked = False
            if expires_in_days is not None:
                r.expires_at = int(time.time() * 1000) + int(expires_in_days * 86400_000)
            return r
        return self.update(change), token


def _named(recs: list[Recipient], name: str) -> Recipient:
    r = next((x for x in recs if x.name == name), None)
    if r is None:
        raise ConfigError(f"no recipient named {name!r}")
    return r


OAUTH_TOKEN_TTL = 3600      # seconds an OAuth access token lives unless the recipient says otherwise
OAUTH_TOKEN_PATH = "/oauth/token"


PRIVATE_KEY_PLACEHOLDER = "PATH-TO-YOUR-PRIVATE-KEY.pem"


def profile_for(config: ServerConfig, token: str, expires_at: int | None, recipient: Recipient | None = None) -> dict:
    """The profile a recipient receives: version 1 with its bearer token, or — for an OAuth
    recipient — version 2 `oauth_client_credentials` with the token endpoint and its client
    credentials (`token` is then the client secret), or, for a client with a public key, version
    2 `oauth_jwt_bearer_private_key_jwt` (issuer: the token endpoint, audience: the sharing
    endpoint; the recipient puts the path of its private key in `privateKeyFile`)."""
    if recipient is not None and recipient.public_key is not None:
        from .jws import algorithm_for_key, load_public_key

        endpoint = config.profile_endpoint()
        key: dict[str, Any] = {"privateKeyFile": PRIVATE_KEY_PLACEHOLDER,
                               "algorithm": algorithm_for_key(load_public_key(recipient.public_key))}
        if recipient.key_id:
            key["keyId"] = recipient.key_id
        return {"shareCredentialsVersion": 2, "type": "oauth_jwt_bearer_private_key_jwt", "endpoint": endpoint,
                "auth": {"tokenEndpoint": endpoint + OAUTH_TOKEN_PATH, "clientId": recipient.client_id,
                         "issuer": endpoint + OAUTH_TOKEN_PATH, "audience": endpoint, "privateKey": key}}
    if recipient is not None and recipient.auth == "oauth":
        endpoint = config.profile_endpoint()
        return {"shareCredentialsVersion": 2, "type": "oauth_client_credentials", "endpoint": endpoint,
                "tokenEndpoint": endpoint + OAUTH_TOKEN_PATH, "clientId": recipient.client_id,
                "clientSecret": token}
    p: dict[str, Any] = {"shareCredentialsVersion": 1, "endpoint": config.profile_endpoint(), "bearerToken": token}
    if expires_at is not None:
        from datetime import datetime, timezone

        p["expirationTime"] = datetime.fromtimestamp(expires_at / 1000, tz=timezone.utc) \
            .strftime("%Y-%m-%dT%H:%M:%S.") + f"{expires_at % 1000:03d}Z"
    return p
