"""Sharing server configuration: the YAML file (the reference server's keys) and the recipient
store next to it.

Owns: parsing/validating `shares[].schemas[].tables[]` and the server settings, object-name rules,
and the recipients file (`recipients.json` next to the config unless `recipientsFile` says
otherwise): each recipient's token is kept only as a SHA-256 hex digest, with an optional expiry,
a revoked flag and the shares it is granted. The file is re-read when it changes on disk, so CLI
`recipient add/revoke/rotate` take effect on a running server.

Invariants checked at load: names are 1..255 characters without space, '/', or control
characters; names are unique case-insensitively within their parent; every table has a location.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["TableConfig", "SchemaConfig", "ShareConfig", "ServerConfig", "Recipient", "RecipientStore",
           "ConfigError", "valid_name", "hash_token", "load_config"]

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
    public_url: str | None = None
    recipients_file: str | None = None
    signing_key: bytes = b""
    config_path: str | None = None

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


def _bool(v: Any, default: bool) -> bool:
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("1", "true", "yes", "on")


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
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, secrets.token_hex(32).encode())
            finally:
                os.close(fd)
        with open(key_file, "rb") as f:
            return f.read().strip()
    return secrets.token_bytes(32)


def parse_config(raw: dict, config_path: str | None = None) -> ServerConfig:
    if not isinstance(raw, dict):
        raise ConfigError("the sharing config must be a YAML mapping")
    shares = []
    for s in raw.get("shares") or []:
        schemas = []
        for sc in s.get("schemas") or []:
            tables = []
            for t in sc.get("tables") or []:
                if not t.get("location"):
                    raise ConfigError(f"table {t.get('name')!r} has no location")
                full = f"{s.get('name')}.{sc.get('name')}.{t.get('name')}"
                tables.append(TableConfig(
                    name=t.get("name"), location=str(t["location"]), share=s.get("name"), schema=sc.get("name"),
                    id=str(t.get("id") or uuid.uuid5(uuid.NAMESPACE_URL, "tahoe-sharing:" + full.lower())),
                    history_shared=_bool(t.get("historyShared"), False),
                    start_version=int(t.get("startVersion") or 0),
                    storage_options=dict(t.get("storageOptions") or {})))
            _check_unique([t.name for t in tables], "table")
            schemas.append(SchemaConfig(sc.get("name"), tables))
        _check_unique([x.name for x in schemas], "schema")
        shares.append(ShareConfig(s.get("name"), schemas, s.get("id")))
    _check_unique([x.name for x in shares], "share")
    endpoint = "/" + str(raw.get("endpoint") or "/delta-sharing").strip("/")
    auth = raw.get("authorization") or {}
    rf = raw.get("recipientsFile")
    if rf and config_path and not os.path.isabs(rf):
        rf = os.path.join(os.path.dirname(os.path.abspath(config_path)), rf)
    if not rf and config_path:
        rf = os.path.join(os.path.dirname(os.path.abspath(config_path)), "recipients.json")
    return ServerConfig(
        shares=shares,
        host=str(raw.get("host") or "127.0.0.1"),
        port=int(raw.get("port") or 8080),
        endpoint=endpoint if endpoint != "/" else "",
        presigned_url_timeout_seconds=int(raw.get("preSignedUrlTimeoutSeconds") or 3600),
        evaluate_predicate_hints=_bool(raw.get("evaluatePredicateHints"), True),
        evaluate_json_predicate_hints=_bool(raw.get("evaluateJsonPredicateHints"), True),
        query_table_page_size_limit=int(raw.get("queryTablePageSizeLimit") or 10000),
        bearer_token=auth.get("bearerToken"),
        public_url=raw.get("publicUrl"),
        recipients_file=rf,
        signing_key=_signing_key(raw, config_path),
        config_path=config_path,
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
    name: str
    token_sha256: str
    shares: list[str]
    expires_at: int | None = None   # ms since epoch
    revoked: bool = False
    created_at: int = 0

    def grants(self, share: str) -> bool:
        s = share.lower()
        return any(g == "*" or g.lower() == s for g in self.shares)

    def active(self, now_ms: int | None = None) -> bool:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return not self.revoked and (self.expires_at is None or now_ms < self.expires_at)

    def to_dict(self) -> dict:
        return {"name": self.name, "tokenSha256": self.token_sha256, "shares": self.shares,
                "expiresAt": self.expires_at, "revoked": self.revoked, "createdAt": self.created_at}

    @classmethod
    def from_dict(cls, d: dict) -> "Recipient":
        return cls(d["name"], d["tokenSha256"], list(d.get("shares") or []), d.get("expiresAt"),
                   bool(d.get("revoked", False)), int(d.get("createdAt") or 0))


class RecipientStore:
    """Recipients in a JSON file; reloaded when the file changes. Writes are atomic (rename)."""

    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._recipients: list[Recipient] = []

    def _file_stamp(self):
        try:
            st = os.stat(self.path)
            return (st.st_mtime_ns, st.st_size, st.st_ino)
        except (FileNotFoundError, TypeError):
            return None

    def all(self) -> list[Recipient]:
        if not self.path:
            return []
        stamp = self._file_stamp()
        with self._lock:
            if stamp != self._stamp:
                self._recipients = self._read() if stamp else []
                self._stamp = stamp
            return list(self._recipients)

    def _read(self) -> list[Recipient]:
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return []
        except ValueError as e:
            raise ConfigError(f"recipient file {self.path} is not valid JSON: {e}") from None
        return [Recipient.from_dict(d) for d in data.get("recipients", [])]

    def save(self, recipients: list[Recipient]) -> None:
        if not self.path:
            raise ConfigError("no recipient file configured")
        tmp = f"{self.path}.tmp-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"recipients": [r.to_dict() for r in recipients]}, f, indent=2)
        os.replace(tmp, self.path)

    def get(self, name: str) -> Recipient | None:
        return next((r for r in self.all() if r.name == name), None)

    def add(self, name: str, shares: list[str], expires_in_days: float | None = None) -> tuple[Recipient, str]:
        """A new recipient; returns it and its token (shown once, stored only hashed)."""
        if not valid_name(name):
            raise ConfigError(f"invalid recipient name {name!r}")
        recs = self.all()
        if any(r.name == name for r in recs):
            raise ConfigError(f"recipient {name!r} already exists (use rotate for a new token)")
        token = secrets.token_urlsafe(32)
        now = int(time.time() * 1000)
        exp = None if expires_in_days is None else now + int(expires_in_days * 86400_000)
        r = Recipient(name, hash_token(token), list(shares), exp, False, now)
        self.save(recs + [r])
        return r, token

    def revoke(self, name: str) -> Recipient:
        recs = self.all()
        r = next((x for x in recs if x.name == name), None)
        if r is None:
            raise ConfigError(f"no recipient named {name!r}")
        r.revoked = True
        self.save(recs)
        return r

    def rotate(self, name: str, expires_in_days: float | None = None) -> tuple[Recipient, str]:
        recs = self.all()
        r = next((x for x in recs if x.name == name), None)
        if r is None:
            raise ConfigError(f"no recipient named {name!r}")
        token = secrets.token_urlsafe(32)
        r.token_sha256 = hash_token(token)
        r.revoked = False
        if expires_in_days is not None:
            r.expires_at = int(time.time() * 1000) + int(expires_in_days * 86400_000)
        self.save(recs)
        return r, token


def profile_for(config: ServerConfig, token: str, expires_at: int | None) -> dict:
    p: dict[str, Any] = {"shareCredentialsVersion": 1, "endpoint": config.profile_endpoint(), "bearerToken": token}
    if expires_at is not None:
        from datetime import datetime, timezone

        p["expirationTime"] = datetime.fromtimestamp(expires_at / 1000, tz=timezone.utc) \
            .strftime("%Y-%m-%dT%H:%M:%S.") + f"{expires_at % 1000:03d}Z"
    return p
