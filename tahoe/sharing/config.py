"""Sharing server configuration: the YAML file, the reference server's keys (`shares[].schemas[].tables[]`, ...)
plus tahoe's own.

  1. `parse_config` reports every problem at once, in one `ConfigError`.
  2. Reference keys tahoe has no use for (`deltaTableCacheSize`, `stalenessAcceptable`,
     `evaluateJsonPredicateHintsV2`) warn once each (`ServerConfig.warnings`); unknown keys are refused by name.
  3. tahoe's keys: `allowAnonymous`, `publicUrl`, `signingKey`/`signingKeyFile`, `store` (`sqlite:///PATH`,
     default `sharing.db` beside the config, or `postgresql://...`), `recipientsFile`, `replicas`, `replicaId`,
     `audit`, `metrics`, `openApiDocs`, `limits`, `trustedProxies`, `asyncQueryTtlSeconds`,
     `temporaryCredentials`, `fileUrls` (`server`, the default, or `store`), `recipients`.
  4. A table location tahoe cannot serve is a config problem: the server refuses to start.
  5. Authentication fails closed: no `authorization.bearerToken` and no recipients refuses every request
     unless `allowAnonymous: true`."""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import secrets
import socket
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import yaml
from ..errors import DeltaError
from ..storage.options import parse_location, store_config

__all__ = ["TableConfig", "SchemaConfig", "ShareConfig", "ServerConfig", "CredentialsConfig", "AuditConfig",
           "LimitsConfig", "ACCESS_MODES", "DOCS_MODES", "ConfigError", "valid_name", "hash_token", "load_config",
           "parse_config", "REFERENCE_IGNORED"]

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
    # Azure tables: the SAS's scope — "directory" (a directory SAS of the table's prefix; needs a
    # hierarchical namespace, ADLS Gen2) or "container" (a container SAS: every blob of the
    # container, for flat-namespace accounts; only for containers holding nothing else to protect)
    azure_scope: str = "directory"


@dataclass
class AuditConfig:
    """`audit`: where the audit log goes — `path` a file (rotated past `maxBytes`, keeping
    `backupCount` old files) or `-` for standard output; `enabled: false` turns it off."""
    enabled: bool = True
    path: str | None = None
    max_bytes: int = 100 * 1024 * 1024
    backup_count: int = 10


@dataclass
class LimitsConfig:
    """`limits`: the per-recipient defaults (each recipient may override them) and server-wide
    bounds. 0 means no limit."""
    requests_per_minute: int = 0
    bytes_per_day: int = 0
    max_concurrent_streams: int = 0
    token_requests_per_minute: int = 60      # per client address, on the OAuth token endpoint


DOCS_MODES = ("off", "auth", "open")


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
    request_timeout_seconds: int = 30
    page_token_ttl_seconds: int = 259200
    refresh_token_ttl_seconds: int = 3600
    store_url: str = "sqlite:///:memory:"
    replicas: int = 1
    replica_id: str = ""
    signing_key_shared: bool = False     # signingKey or signingKeyFile set explicitly
    audit: "AuditConfig" = field(default_factory=lambda: AuditConfig())
    metrics_enabled: bool = True
    metrics_bearer_token: str | None = None
    docs: str = "auth"
    limits: "LimitsConfig" = field(default_factory=lambda: LimitsConfig())
    trusted_proxies: list = field(default_factory=list)
    file_urls: str = "server"
    warnings: list[str] = field(default_factory=list)

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
                "queryTablePageTokenTtlMs", "refreshTokenTtlMs", "requestTimeoutSeconds",
                "temporaryCredentialValiditySeconds",
                "authorization", "allowAnonymous", "publicUrl", "recipientsFile", "signingKey", "signingKeyFile",
                "asyncQueryTtlSeconds", "temporaryCredentials", "store", "replicas", "replicaId", "audit", "metrics",
                "openApiDocs", "limits", "trustedProxies", "fileUrls"}
_SHARE_KEYS = {"name", "id", "schemas"}
_SCHEMA_KEYS = {"name", "tables"}
_TABLE_KEYS = {"name", "location", "id", "historyShared", "cdfEnabled", "startVersion", "storageOptions",
               "accessModes"}
_CREDENTIALS_KEYS = {"roleArn", "stsEndpoint", "region", "durationSeconds", "externalId", "azureScope"}
FILE_URL_MODES = ("server", "store")
_AUDIT_KEYS = {"enabled", "path", "maxBytes", "backupCount"}
_METRICS_KEYS = {"enabled", "bearerToken"}
_LIMITS_KEYS = {"requestsPerMinute", "bytesPerDay", "maxConcurrentStreams", "tokenRequestsPerMinute"}
ACCESS_MODES = ("url", "dir")
_AUTH_KEYS = {"bearerToken"}
LEGACY_RECIPIENTS_FILE = "recipients.json"   # the recipients' file before the state store

# reference-server keys that do not apply to tahoe: accepted, with one warning each
REFERENCE_IGNORED = {
    "deltaTableCacheSize": "tahoe keeps a few snapshots per table in memory and re-checks the latest version on "
                           "each request; the size is not configurable",
    "stalenessAcceptable": "tahoe always serves the latest version (listing the log is cheap)",
    "evaluateJsonPredicateHintsV2": "tahoe evaluates every JSON predicate hint it can parse, as "
                                    "evaluateJsonPredicateHints says",
}
# keys refused with the reason (accepting them would mislead)
_UNSUPPORTED = {
    "ssl": "TLS is not terminated by tahoe's server: put a TLS proxy in front and set publicUrl "
           "(accepting the key would serve plain HTTP where TLS was asked for)",
}


class _Problems:
    """Every problem of one config, collected (see the module docstring)."""

    def __init__(self):
        self.items: list[str] = []
        self.warnings: list[str] = []

    def add(self, message: str) -> None:
        self.items.append(message)

    def run(self, fn: Callable, *args, default=None, **kw):
        """fn(*args, **kw); a ConfigError it raises is recorded and `default` returned."""
        try:
            return fn(*args, **kw)
        except ConfigError as e:
            self.items.append(str(e))
            return default


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


def _mapping(v: Any, what: str, allowed: set[str], probs: _Problems, top: bool = False) -> dict:
    """`v` as a mapping; each unknown or unsupported key is a problem (all of them are named),
    each ignored reference key a warning. Not a mapping: a problem, and {}."""
    if not isinstance(v, dict):
        probs.add(f"{what} must be a mapping, got {type(v).__name__}")
        return {}
    for k in v:
        if k in _UNSUPPORTED:
            probs.add(f"{what}: {k} is not supported ({_UNSUPPORTED[k]})")
        elif k in REFERENCE_IGNORED and top:
            probs.warnings.append(f"{k} is ignored: {REFERENCE_IGNORED[k]}")
        elif k not in allowed:
            probs.add(f"{what}: unknown key {k!r} (known: {', '.join(sorted(allowed))})")
    return v


def _list(v: Any, what: str, probs: _Problems) -> list:
    if v is None:
        return []
    if not isinstance(v, list):
        probs.add(f"{what} must be a list, got {type(v).__name__}")
        return []
    return v


def _check_unique(names: list, what: str, probs: _Problems) -> None:
    seen = set()
    for n in names:
        if not valid_name(n):
            probs.add(f"invalid {what} name {n!r}: 1..255 characters, no spaces, '/' or control characters")
            continue
        if n.lower() in seen:
            probs.add(f"duplicate {what} name {n!r} (names are case-insensitive)")
        seen.add(n.lower())


def _signing_key(raw: dict, config_path: str | None) -> bytes:
    if raw.get("signingKey"):
        return str(raw["signingKey"]).encode()
    key_file = raw.get("signingKeyFile")
    if key_file and config_path and not os.path.isabs(key_file):
        key_file = os.path.join(os.path.dirname(os.path.abspath(config_path)), key_file)
    if not key_file and config_path:
        key_file = os.path.join(os.path.dirname(os.path.abspath(config_path)), ".sharing-signing-key")
    if key_file:
        if not os.path.exists(key_file):
            if raw.get("signingKeyFile"):
                raise ConfigError(f"signingKeyFile {key_file} does not exist")
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
            key = f.read().strip()
        if not key:
            raise ConfigError(f"signingKeyFile {key_file} is empty")
        return key
    return secrets.token_bytes(32)


def _table(t: Any, share: str, schema: str, probs: _Problems) -> TableConfig | None:
    where = f"table {share}.{schema}.{t.get('name') if isinstance(t, dict) else repr(t)}"
    n = len(probs.items)
    t = _mapping(t, where, _TABLE_KEYS, probs)
    if not t.get("location"):
        probs.add(f"{where} has no location")
    full = f"{share}.{schema}.{t.get('name')}"
    hist = probs.run(_bool, t.get("historyShared", t.get("cdfEnabled")), False, f"{where}: historyShared",
                     default=False)
    start = probs.run(_int, t.get("startVersion"), 0, f"{where}: startVersion", 0, default=0)
    opts = t.get("storageOptions") or {}
    if not isinstance(opts, dict):
        probs.add(f"{where}: storageOptions must be a mapping")
        opts = {}
    modes = probs.run(_access_modes, t.get("accessModes"), where, default=("url",))
    cfg = TableConfig(
        name=t.get("name"), location=str(t.get("location") or ""), share=share, schema=schema,
        id=str(t.get("id") or uuid.uuid5(uuid.NAMESPACE_URL, "tahoe-sharing:" + full.lower())),
        history_shared=hist, start_version=start, storage_options=dict(opts), access_modes=modes)
    kind = _check_location(cfg, where, probs) if cfg.location else None
    if "dir" in cfg.access_modes:
        # directory access hands out the whole table directory: its log (all of its history) too
        if kind == "gcs":
            probs.add(f"{where}: accessModes dir on gs:// is not supported: its temporary credential would be a "
                      f"downscoped OAuth token (Google's Security Token Service with a credential access "
                      f"boundary), which tahoe does not vend; share the table with accessModes [url]")
        elif kind not in ("s3", "azure", None):
            probs.add(f"{where}: accessModes dir needs a table on S3 (STS credentials scoped to its prefix) or "
                      f"Azure (a SAS); {cfg.location!r} is {kind or 'not on an object store'}")
        elif kind == "azure" and not _azure_key_of(cfg):
            probs.add(f"{where}: accessModes dir on Azure needs the storage account's key (storageOptions "
                      f"azure_storage_account_key, or AZURE_STORAGE_ACCOUNT_KEY): the server signs the SAS it "
                      f"hands out with it")
        if not cfg.history_shared or cfg.start_version:
            probs.add(f"{where}: accessModes dir gives direct access to the table's log, so it needs "
                      f"historyShared: true and no startVersion")
    return cfg if len(probs.items) == n else None


def _check_location(cfg: TableConfig, where: str, probs: _Problems) -> str | None:
    """The store kind of the table's location ("local", "s3", "azure", "gcs"); a location tahoe
    cannot serve (a scheme no store takes, no bucket, storage options its store refuses) is a
    problem naming the table."""
    try:
        loc = parse_location(cfg.location)
        if loc.kind != "local":
            store_config(loc.kind, cfg.storage_options)
        return loc.kind
    except DeltaError as e:
        probs.add(f"{where}: tahoe cannot serve its location {cfg.location!r}: {e}")
        return None


def _azure_key_of(cfg: TableConfig) -> str | None:
    try:
        c = store_config("azure", cfg.storage_options)
    except Exception:  # noqa: BLE001 - reported by _check_location
        return None
    return c.get("azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
                 "access_key", "account_key", "master_key")


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


def _credentials_config(raw: Any, validity: Any, probs: _Problems) -> CredentialsConfig:
    """`temporaryCredentials`; the reference server's `temporaryCredentialValiditySeconds` is the
    default of its `durationSeconds`."""
    default = probs.run(_int, validity, 3600, "temporaryCredentialValiditySeconds", 900, default=3600)
    if raw is None:
        return CredentialsConfig(duration_seconds=default)
    c = _mapping(raw, "temporaryCredentials", _CREDENTIALS_KEYS, probs)
    for k in ("roleArn", "stsEndpoint", "region", "externalId"):
        if c.get(k) is not None and (not isinstance(c[k], str) or not c[k].strip()):
            probs.add(f"temporaryCredentials.{k} must be a non-empty string")
    duration = probs.run(_int, c.get("durationSeconds"), default, "temporaryCredentials.durationSeconds", 900,
                         default=default)
    if duration > 43200:
        probs.add("temporaryCredentials.durationSeconds must be at most 43200 (12 hours, STS's limit)")
    scope = str(c.get("azureScope") or "directory").strip().lower()
    if scope not in ("directory", "container"):
        probs.add(f"temporaryCredentials.azureScope must be directory or container, got {c.get('azureScope')!r}")
        scope = "directory"
    return CredentialsConfig(role_arn=c.get("roleArn"), sts_endpoint=c.get("stsEndpoint"), region=c.get("region"),
                             duration_seconds=duration, external_id=c.get("externalId"), azure_scope=scope)


def _file_urls(v: Any) -> str:
    if v is None:
        return "server"
    mode = str(v).strip().lower()
    if mode not in FILE_URL_MODES:
        raise ConfigError(f"fileUrls must be server (the server's own URLs, checked on every download) or store "
                          f"(the store's own signed URLs, as the reference server), got {v!r}")
    return mode


def _store_url(v: Any, config_path: str | None, probs: _Problems) -> str:
    """`store`: `sqlite:///PATH` (relative paths beside the config), a bare path (SQLite), or
    `postgresql://...`. Default: `sharing.db` beside the config (in memory without a config file)."""
    if v is None:
        if config_path:
            return "sqlite:///" + os.path.join(os.path.dirname(os.path.abspath(config_path)), "sharing.db")
        return "sqlite:///:memory:"
    if not isinstance(v, str) or not v.strip():
        probs.add("store must be sqlite:///PATH or postgresql://USER@HOST/DB")
        return "sqlite:///:memory:"
    v = v.strip()
    if v.startswith(("postgresql://", "postgres://")):
        return v
    path = v[len("sqlite:///"):] if v.startswith("sqlite:///") else v
    if "://" in path:
        probs.add(f"store {v!r}: only sqlite:///PATH and postgresql:// stores are supported")
        return "sqlite:///:memory:"
    if path != ":memory:" and config_path and not os.path.isabs(path):
        path = os.path.join(os.path.dirname(os.path.abspath(config_path)), path)
    return "sqlite:///" + path


def _audit(raw: Any, config_path: str | None, probs: _Problems) -> AuditConfig:
    default_path = os.path.join(os.path.dirname(os.path.abspath(config_path)), "sharing-audit.jsonl") \
        if config_path else None
    if raw is None:
        return AuditConfig(enabled=default_path is not None, path=default_path)
    if raw is False:
        return AuditConfig(enabled=False)
    a = _mapping(raw, "audit", _AUDIT_KEYS, probs)
    enabled = probs.run(_bool, a.get("enabled"), True, "audit.enabled", default=True)
    path = a.get("path", default_path)
    if path is not None and (not isinstance(path, str) or not path.strip()):
        probs.add("audit.path must be a file path or - (standard output)")
        path = None
    if path and path != "-" and config_path and not os.path.isabs(path):
        path = os.path.join(os.path.dirname(os.path.abspath(config_path)), path)
    if enabled and path is None:
        probs.add("audit.path is needed (a file, or - for standard output) when the config is not read from a file")
    return AuditConfig(enabled=enabled and path is not None, path=path,
                       max_bytes=probs.run(_int, a.get("maxBytes"), 100 * 1024 * 1024, "audit.maxBytes", 1024,
                                           default=100 * 1024 * 1024),
                       backup_count=probs.run(_int, a.get("backupCount"), 10, "audit.backupCount", 0, default=10))


def _limits(raw: Any, probs: _Problems) -> LimitsConfig:
    if raw is None:
        return LimitsConfig()
    m = _mapping(raw, "limits", _LIMITS_KEYS, probs)
    return LimitsConfig(
        requests_per_minute=probs.run(_int, m.get("requestsPerMinute"), 0, "limits.requestsPerMinute", 0, default=0),
        bytes_per_day=probs.run(_int, m.get("bytesPerDay"), 0, "limits.bytesPerDay", 0, default=0),
        max_concurrent_streams=probs.run(_int, m.get("maxConcurrentStreams"), 0, "limits.maxConcurrentStreams", 0,
                                         default=0),
        token_requests_per_minute=probs.run(_int, m.get("tokenRequestsPerMinute"), 60,
                                            "limits.tokenRequestsPerMinute", 0, default=60))


def _networks(raw: Any, what: str, probs: _Problems) -> list:
    out = []
    for v in _list(raw, what, probs):
        try:
            out.append(ipaddress.ip_network(str(v).strip(), strict=False))
        except ValueError:
            probs.add(f"{what}: {v!r} is not an IP address or CIDR network")
    return out


def parse_config(raw: Any, config_path: str | None = None) -> ServerConfig:
    """The config `raw` (a YAML document) describes; ConfigError listing every problem found."""
    probs = _Problems()
    if not isinstance(raw, dict):
        raise ConfigError("the sharing config must be a YAML mapping")
    _mapping(raw, "the sharing config", _SERVER_KEYS, probs, top=True)
    if raw.get("version") not in (None, 1):
        probs.add(f"config version {raw.get('version')!r} is not supported (only 1)")
    shares = []
    share_names = []
    for s in _list(raw.get("shares"), "shares", probs):
        s = _mapping(s, f"share {s.get('name') if isinstance(s, dict) else s!r}", _SHARE_KEYS, probs)
        share_names.append(s.get("name"))
        schemas, schema_names = [], []
        for sc in _list(s.get("schemas"), f"share {s.get('name')}: schemas", probs):
            sc = _mapping(sc, f"schema {s.get('name')}.{sc.get('name') if isinstance(sc, dict) else sc!r}",
                          _SCHEMA_KEYS, probs)
            schema_names.append(sc.get("name"))
            raw_tables = _list(sc.get("tables"), f"schema {s.get('name')}.{sc.get('name')}: tables", probs)
            tables = [_table(t, s.get("name"), sc.get("name"), probs) for t in raw_tables]
            _check_unique([t.get("name") if isinstance(t, dict) else t for t in raw_tables], "table", probs)
            schemas.append(SchemaConfig(sc.get("name"), [t for t in tables if t is not None]))
        _check_unique(schema_names, "schema", probs)
        shares.append(ShareConfig(s.get("name"), schemas, s.get("id")))
    _check_unique(share_names, "share", probs)
    endpoint = "/" + str(raw.get("endpoint") or "/delta-sharing").strip("/")
    auth = _mapping(raw.get("authorization") or {}, "authorization", _AUTH_KEYS, probs)
    bearer = auth.get("bearerToken")
    if bearer is not None and (not isinstance(bearer, str) or not bearer.strip()):
        probs.add("authorization.bearerToken must be a non-empty string")
        bearer = None
    rf = raw.get("recipientsFile")
    if rf and config_path and not os.path.isabs(rf):
        rf = os.path.join(os.path.dirname(os.path.abspath(config_path)), rf)
    if not rf and raw.get("store") is None and config_path:
        # the layout before the state store: `recipients.json` beside the config. A deployment that
        # has one keeps its recipients (they are not silently replaced by an empty sharing.db).
        legacy = os.path.join(os.path.dirname(os.path.abspath(config_path)), LEGACY_RECIPIENTS_FILE)
        if os.path.exists(legacy):
            rf = legacy
            probs.warnings.append(
                f"recipients are read from {legacy} (the layout before the state store); set recipientsFile "
                f"to keep it, or move them with `tahoe sharing recipient import {legacy}`")
    metrics = _mapping(raw.get("metrics") or {}, "metrics", _METRICS_KEYS, probs)
    docs = str(raw.get("openApiDocs", "auth")).strip().lower() if raw.get("openApiDocs") is not False else "off"
    if docs in _TRUE:
        docs = "open"
    if docs not in DOCS_MODES:
        probs.add(f"openApiDocs must be one of {', '.join(DOCS_MODES)}, got {raw.get('openApiDocs')!r}")
        docs = "auth"
    replicas = probs.run(_int, raw.get("replicas"), 1, "replicas", 1, default=1)
    explicit_key = bool(raw.get("signingKey") or raw.get("signingKeyFile"))
    if replicas > 1 and not explicit_key:
        probs.add(f"replicas is {replicas}, but no signingKey is set: every replica would sign file URLs and tokens "
                  f"with its own key, so one replica's URLs would be refused by the others. Set signingKey (or "
                  f"signingKeyFile) to the same secret on every replica, e.g. signingKey: "
                  f"\"{{the output of: python -c 'import secrets; print(secrets.token_hex(32))'}}\"")
    store = _store_url(raw.get("store"), config_path, probs)
    if replicas > 1 and store.startswith("sqlite:///") and raw.get("store") is None:
        probs.warnings.append("replicas > 1 with the default SQLite store: every replica must share the file "
                              "(one host); replicas on several hosts need store: postgresql://...")
    public_url = raw.get("publicUrl")
    if public_url is not None and (not isinstance(public_url, str) or not re.match(r"(?i)^https?://", public_url)):
        probs.add(f"publicUrl must be an http:// or https:// URL, got {public_url!r}")
        public_url = None
    replica_id = raw.get("replicaId") or os.environ.get("TAHOE_SHARING_REPLICA_ID") or \
        f"{socket.gethostname()}-{os.getpid()}"
    key = probs.run(_signing_key, raw, config_path, default=b"")
    cfg = ServerConfig(
        shares=shares,
        host=str(raw.get("host") or "127.0.0.1"),
        port=probs.run(_int, raw.get("port"), 8080, "port", 0, default=8080),
        endpoint=endpoint if endpoint != "/" else "",
        presigned_url_timeout_seconds=probs.run(_int, raw.get("preSignedUrlTimeoutSeconds"), 3600,
                                                "preSignedUrlTimeoutSeconds", 1, default=3600),
        evaluate_predicate_hints=probs.run(_bool, raw.get("evaluatePredicateHints"), True, "evaluatePredicateHints",
                                           default=True),
        evaluate_json_predicate_hints=probs.run(_bool, raw.get("evaluateJsonPredicateHints"), True,
                                                "evaluateJsonPredicateHints", default=True),
        query_table_page_size_limit=probs.run(_int, raw.get("queryTablePageSizeLimit"), 10000,
                                              "queryTablePageSizeLimit", 1, default=10000),
        bearer_token=bearer,
        allow_anonymous=probs.run(_bool, raw.get("allowAnonymous"), False, "allowAnonymous", default=False),
        public_url=public_url,
        recipients_file=rf,
        signing_key=key,
        config_path=config_path,
        async_query_ttl_seconds=probs.run(_int, raw.get("asyncQueryTtlSeconds"), 3600, "asyncQueryTtlSeconds", 1,
                                          default=3600),
        temporary_credentials=_credentials_config(raw.get("temporaryCredentials"),
                                                  raw.get("temporaryCredentialValiditySeconds"), probs),
        request_timeout_seconds=probs.run(_int, raw.get("requestTimeoutSeconds"), 30, "requestTimeoutSeconds", 0,
                                          default=30),
        page_token_ttl_seconds=probs.run(_int, raw.get("queryTablePageTokenTtlMs"), 259200000,
                                         "queryTablePageTokenTtlMs", 1000, default=259200000) // 1000,
        refresh_token_ttl_seconds=probs.run(_int, raw.get("refreshTokenTtlMs"), 3600000, "refreshTokenTtlMs", 1000,
                                            default=3600000) // 1000,
        store_url=store,
        replicas=replicas,
        replica_id=str(replica_id),
        signing_key_shared=explicit_key,
        audit=_audit(raw.get("audit"), config_path, probs),
        metrics_enabled=probs.run(_bool, metrics.get("enabled"), True, "metrics.enabled", default=True),
        metrics_bearer_token=metrics.get("bearerToken"),
        docs=docs,
        limits=_limits(raw.get("limits"), probs),
        trusted_proxies=_networks(raw.get("trustedProxies"), "trustedProxies", probs),
        file_urls=probs.run(_file_urls, raw.get("fileUrls"), default="server"),
        warnings=probs.warnings,
    )
    if probs.items:
        n = len(probs.items)
        where = f" in {config_path}" if config_path else ""
        if n == 1:
            raise ConfigError(probs.items[0] + (f" ({config_path})" if config_path else ""))
        raise ConfigError(f"{n} problems{where}:\n" + "\n".join(f"  - {p}" for p in probs.items))
    return cfg


def load_config(path: str) -> ServerConfig:
    try:
        with open(path) as f:
            raw = yaml.safe_load(f) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from None
    return parse_config(raw, path)
