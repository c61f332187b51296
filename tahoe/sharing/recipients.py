"""Recipients: who may read which shares, with which credential, from where and how much.

  1. `Recipient`: token (or OAuth secret) kept only as SHA-256, shares, expiry, revocation, rotation `grace`
     tokens, an IP/CIDR allow-list, limits, comment, properties.
  2. Stored in the state store (`store.StateStore`, the default) or a JSON file (`recipientsFile`); a file
     that stops parsing keeps the last good copy serving.
  3. `Recipients`: the in-memory index (by token hash, OAuth client id, name), rebuilt only on change.
  4. Changes (`add`, `grant`, `ungrant`, `delete`, `revoke`, `rotate`, `set`) are one transaction, or a
     locked read-modify-write of the file with an atomic replace.
  5. `profile_for`: the profile a recipient receives."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .config import ConfigError, ServerConfig, hash_token, valid_name
from .locks import exclusive_lock
from .jws import algorithm_for_key, load_public_key, JwtError
from .store import open_store

__all__ = ["Recipient", "Recipients", "FileBackend", "StoreBackend", "profile_for", "OAUTH_TOKEN_TTL",
           "OAUTH_TOKEN_PATH", "PRIVATE_KEY_PLACEHOLDER", "LIMIT_KEYS", "open_recipients", "parse_networks"]

log = logging.getLogger("tahoe.sharing")

OAUTH_TOKEN_TTL = 3600      # seconds an OAuth access token lives unless the recipient says otherwise
OAUTH_TOKEN_PATH = "/oauth/token"
PRIVATE_KEY_PLACEHOLDER = "PATH-TO-YOUR-PRIVATE-KEY.pem"
# per-recipient limits (the config's `limits` give the defaults)
LIMIT_KEYS = ("requestsPerMinute", "bytesPerDay", "maxConcurrentStreams")


def parse_networks(values: list[str], what: str) -> list:
    """IP networks of an allow-list (a bare address is a /32 or /128); ConfigError naming a bad one."""
    out = []
    for v in values:
        try:
            out.append(ipaddress.ip_network(str(v).strip(), strict=False))
        except ValueError:
            raise ConfigError(f"{what}: {v!r} is not an IP address or CIDR network") from None
    return out


@dataclass
class Recipient:
    """A recipient. `auth` "bearer": `token_sha256` is the hash of its bearer token; "oauth": of
    its OAuth client secret (`client_id` names the client; access tokens live `token_ttl`
    seconds). An OAuth client with a `public_key` (PEM) authenticates with JWT assertions signed by
    the matching private key (RFC 7523; `key_id` is the `kid` it signs with). `grace`: hashes of
    earlier tokens with the time (ms) until which they still work."""
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
    grace: list[list] = field(default_factory=list)       # [[sha256, until_ms], ...]
    allow: list[str] = field(default_factory=list)        # IP/CIDR allow-list (empty: anywhere)
    limits: dict[str, int] = field(default_factory=dict)
    comment: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def grants(self, share: str) -> bool:
        s = share.lower()
        return any(g == "*" or g.lower() == s for g in self.shares)

    def active(self, now_ms: int | None = None) -> bool:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return not self.revoked and (self.expires_at is None or now_ms < self.expires_at)

    def valid_hashes(self, now_ms: int | None = None) -> list[str]:
        """The current token hash and those of earlier tokens still in their grace period."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return [self.token_sha256] + [h for h, until in self.grace if until > now_ms]

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"name": self.name, "tokenSha256": self.token_sha256, "shares": self.shares,
                             "expiresAt": self.expires_at, "revoked": self.revoked, "createdAt": self.created_at}
        if self.auth != "bearer":
            d.update({"auth": self.auth, "clientId": self.client_id, "tokenTtlSeconds": self.token_ttl})
        if self.public_key is not None:
            d.update({"publicKey": self.public_key, "keyId": self.key_id})
        for k, v in (("grace", self.grace), ("allow", self.allow), ("limits", self.limits),
                     ("comment", self.comment), ("properties", self.properties)):
            if v:
                d[k] = v
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Recipient":
        if not isinstance(d, dict):
            raise ValueError("a recipient must be a JSON object")
        for k in ("name", "tokenSha256"):
            if not isinstance(d.get(k), str) or not d[k]:
                raise ValueError(f"{k} must be a non-empty string")
        auth = d.get("auth") or "bearer"
        if auth not in ("bearer", "oauth"):
            raise ValueError(f"unknown auth {auth!r}")
        if auth == "oauth" and not d.get("clientId"):
            raise ValueError("an oauth recipient needs a clientId")
        if d.get("publicKey") is not None and auth != "oauth":
            raise ValueError("a public key belongs to an oauth recipient")
        shares = d.get("shares") or []
        if not isinstance(shares, list) or not all(isinstance(s, str) for s in shares):
            raise ValueError("shares must be a list of names")
        allow = list(d.get("allow") or [])
        parse_networks(allow, "allow")
        limits = dict(d.get("limits") or {})
        for k, v in limits.items():
            if k not in LIMIT_KEYS:
                raise ValueError(f"unknown limit {k!r} (known: {', '.join(LIMIT_KEYS)})")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"limit {k} must be a non-negative integer")
        ttl = d.get("tokenTtlSeconds")
        exp = d.get("expiresAt")
        if exp is not None and (not isinstance(exp, int) or isinstance(exp, bool)):
            raise ValueError("expiresAt must be epoch milliseconds")
        return cls(d["name"], d["tokenSha256"], list(shares), exp, bool(d.get("revoked", False)),
                   int(d.get("createdAt") or 0), auth, d.get("clientId"), int(ttl) if ttl is not None else None,
                   d.get("publicKey"), d.get("keyId"), [list(g) for g in d.get("grace") or []], allow, limits,
                   d.get("comment"), dict(d.get("properties") or {}))


# --- where recipients live ----------------------------------------------------------------------------
class StoreBackend:
    """Recipients in the state store."""

    def __init__(self, store):
        self.store = store
        self.where = f"the state store ({store.kind})"

    def changed(self, miss: bool = False) -> bool:
        return self.store.changed(miss)

    def load(self) -> list[Recipient]:
        return [Recipient.from_dict(d) for d in self.store.load_recipients()]

    def problems(self) -> list[str]:
        out = []
        for d in self.store.load_recipients():
            try:
                Recipient.from_dict(d)
            except (KeyError, TypeError, ValueError, ConfigError) as e:
                out.append(f"recipient {d.get('name')!r} in {self.where}: {e}")
        return out

    def update(self, change: Callable[[list[Recipient]], Any]) -> Any:
        def body(rows: list[dict]):
            recs = [Recipient.from_dict(d) for d in rows]
            names = {r.name for r in recs}
            out = change(recs)
            kept = {r.name for r in recs}
            rows[:] = [r.to_dict() for r in recs] + [{"name": n, "$deleted": True} for n in names - kept]
            return out
        return self.store.update_recipients(body)


class FileBackend:
    """Recipients in a JSON file `{"recipients": [...]}` (see the module docstring)."""

    def __init__(self, path: str):
        self.path = path
        self.where = path
        self._stamp: tuple | None = ()

    def _file_stamp(self):
        try:
            st = os.stat(self.path)
            return (st.st_mtime_ns, st.st_size, st.st_ino)
        except (FileNotFoundError, TypeError):
            return None

    def changed(self, miss: bool = False) -> bool:
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        return True

    def _parse(self) -> tuple[list[Recipient], list[str]]:
        """The recipients the file holds and every problem found in it."""
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return [], []
        except ValueError as e:
            return [], [f"recipient file {self.path} is not valid JSON: {e}"]
        if not isinstance(data, dict) or not isinstance(data.get("recipients", []), list):
            return [], [f"recipient file {self.path} must hold {{\"recipients\": [...]}}"]
        recs, problems, seen = [], [], set()
        for i, d in enumerate(data.get("recipients", [])):
            try:
                r = Recipient.from_dict(d)
            except (KeyError, TypeError, ValueError, ConfigError) as e:
                problems.append(f"recipient file {self.path}: recipient #{i + 1} "
                                f"({d.get('name') if isinstance(d, dict) else d!r}): {e}")
                continue
            if r.name in seen:
                problems.append(f"recipient file {self.path}: recipient {r.name!r} appears twice")
            seen.add(r.name)
            recs.append(r)
        return recs, problems

    def load(self) -> list[Recipient]:
        recs, problems = self._parse()
        if problems:
            raise ConfigError("; ".join(problems))
        return recs

    def problems(self) -> list[str]:
        return self._parse()[1]

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
        if os.name == "posix":
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def update(self, change: Callable[[list[Recipient]], Any]) -> Any:
        with exclusive_lock(self.path + ".lock"):
            recs = self.load()    # a malformed file is refused by name, never overwritten
            out = change(recs)
            self._write(recs)
        return out


def open_recipients(config: ServerConfig, store=None) -> "Recipients":
    """The recipients of `config`: its `recipientsFile` when set, else the state store (opened
    here when not given)."""
    if config.recipients_file:
        return Recipients(FileBackend(config.recipients_file))
    if store is None:
        store = open_store(config.store_url)
    return Recipients(StoreBackend(store))


# --- the index ------------------------------------------------------------------------------------------
class Recipients:
    """The recipients of one server, indexed (see the module docstring); thread-safe."""

    def __init__(self, backend):
        self.backend = backend
        self._lock = threading.Lock()
        self._all: list[Recipient] = []
        self._by_name: dict[str, Recipient] = {}
        self._by_hash: dict[str, Recipient] = {}
        self._by_client: dict[str, Recipient] = {}
        self._warned: Any = None
        self._dirty = True
        self.last_error: str | None = None

    def _refresh(self, miss: bool = False) -> None:
        with self._lock:
            if not self.backend.changed(miss) and not self._dirty:
                return
            self._dirty = False
            try:
                recs = self.backend.load()
            except ConfigError as e:
                # keep serving the last good copy; say so once per change of the source
                self.last_error = str(e)
                if self._warned != str(e):
                    self._warned = str(e)
                    log.error("recipients: %s — still serving the last good copy (%d recipients); fix it "
                              "(`tahoe sharing check-config` lists every problem)", e, len(self._all))
                return
            self.last_error = None
            self._warned = None
            self._all = recs
            self._by_name = {r.name: r for r in recs}
            self._by_client = {r.client_id: r for r in recs if r.client_id}
            by_hash: dict[str, Recipient] = {}
            for r in recs:
                by_hash[r.token_sha256] = r
                for h, _until in r.grace:
                    by_hash.setdefault(h, r)
            self._by_hash = by_hash

    def all(self) -> list[Recipient]:
        self._refresh()
        return list(self._all)

    def get(self, name: str) -> Recipient | None:
        self._refresh()
        return self._by_name.get(name)

    def by_token_hash(self, h: str) -> Recipient | None:
        """The recipient whose current token — or an earlier one still in its grace period — hashes
        to `h` (not checked for expiry or revocation here)."""
        self._refresh()
        r = self._by_hash.get(h)
        if r is None:
            self._refresh(miss=True)   # perhaps added a moment ago (through another replica)
            r = self._by_hash.get(h)
        if r is None:
            return None
        if r.token_sha256 == h:
            return r
        now = int(time.time() * 1000)
        return r if any(g == h and until > now for g, until in r.grace) else None

    def by_client_id(self, client_id: str) -> Recipient | None:
        self._refresh()
        r = self._by_client.get(client_id)
        if r is None:
            self._refresh(miss=True)
            r = self._by_client.get(client_id)
        return r

    def problems(self) -> list[str]:
        return self.backend.problems()

    # --- changes ------------------------------------------------------------------------------------------
    def update(self, change: Callable[[list[Recipient]], Any]) -> Any:
        out = self.backend.update(change)
        with self._lock:
            self._dirty = True       # the next lookup re-reads (a process does not see its own writes as changes)
        return out

    def add(self, name: str, shares: list[str], expires_in_days: float | None = None, oauth: bool = False,
            token_ttl: int | None = None, public_key: str | None = None, key_id: str | None = None,
            comment: str | None = None, properties: dict | None = None) -> tuple[Recipient, str]:
        """A new recipient and its token (with `oauth`, its client secret), shown once, stored
        only hashed."""
        if not valid_name(name):
            raise ConfigError(f"invalid recipient name {name!r}")
        if public_key is not None:
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
            r = Recipient(name, hash_token(token), list(shares), exp, False, now, comment=comment,
                          properties=dict(properties or {}))
            if oauth:
                r.auth, r.client_id, r.token_ttl = "oauth", f"{name}-{secrets.token_hex(8)}", token_ttl
                r.public_key, r.key_id = public_key, key_id
            recs.append(r)
            return r
        return self.update(change), token

    def _change_one(self, name: str, fn: Callable[[Recipient], Any]) -> Recipient:
        def change(recs: list[Recipient]) -> Recipient:
            r = _named(recs, name)
            fn(r)
            return r
        return self.update(change)

    def revoke(self, name: str) -> Recipient:
        def fn(r):
            r.revoked = True
            r.grace = []
        return self._change_one(name, fn)

    def delete(self, name: str) -> None:
        def change(recs: list[Recipient]) -> None:
            r = _named(recs, name)
            recs.remove(r)
        self.update(change)

    def grant(self, name: str, shares: list[str]) -> Recipient:
        def fn(r):
            for s in shares:
                if s.lower() not in {g.lower() for g in r.shares}:
                    r.shares.append(s)
        return self._change_one(name, fn)

    def ungrant(self, name: str, shares: list[str]) -> Recipient:
        drop = {s.lower() for s in shares}

        def fn(r):
            missing = [s for s in shares if s.lower() not in {g.lower() for g in r.shares}]
            if missing:
                raise ConfigError(f"recipient {name!r} is not granted {', '.join(missing)} "
                                  f"(granted: {', '.join(r.shares) or 'nothing'})")
            r.shares = [g for g in r.shares if g.lower() not in drop]
        return self._change_one(name, fn)

    def rotate(self, name: str, expires_in_days: float | None = None,
               grace_seconds: float = 0) -> tuple[Recipient, str]:
        """A new token (or client secret); the old one keeps working `grace_seconds` more."""
        token = secrets.token_urlsafe(32)

        def fn(r):
            now = int(time.time() * 1000)
            keep = [g for g in r.grace if g[1] > now]
            if grace_seconds > 0 and not r.revoked:
                keep.append([r.token_sha256, now + int(grace_seconds * 1000)])
            r.grace = keep
            r.token_sha256 = hash_token(token)
            r.revoked = False
            if expires_in_days is not None:
                r.expires_at = now + int(expires_in_days * 86400_000)
        return self._change_one(name, fn), token

    def set(self, name: str, *, allow: list[str] | None = None, limits: dict | None = None,
            comment: str | None = None, properties: dict | None = None) -> Recipient:
        """Change a recipient's allow-list, limits (a value of None removes one), comment or
        properties (a value of None removes one)."""
        if allow is not None:
            parse_networks(allow, f"recipient {name!r}: allow")
        for k, v in (limits or {}).items():
            if k not in LIMIT_KEYS:
                raise ConfigError(f"unknown limit {k!r} (known: {', '.join(LIMIT_KEYS)})")
            if v is not None and (not isinstance(v, int) or v < 0):
                raise ConfigError(f"limit {k} must be a non-negative integer")

        def fn(r):
            if allow is not None:
                r.allow = list(allow)
            for k, v in (limits or {}).items():
                if v is None:
                    r.limits.pop(k, None)
                else:
                    r.limits[k] = v
            if comment is not None:
                r.comment = comment or None
            for k, v in (properties or {}).items():
                if v is None:
                    r.properties.pop(k, None)
                else:
                    r.properties[k] = str(v)
        return self._change_one(name, fn)


def _named(recs: list[Recipient], name: str) -> Recipient:
    r = next((x for x in recs if x.name == name), None)
    if r is None:
        raise ConfigError(f"no recipient named {name!r}")
    return r


def profile_for(config: ServerConfig, token: str, expires_at: int | None, recipient: Recipient | None = None) -> dict:
    """The profile a recipient receives: version 1 with its bearer token, or — for an OAuth
    recipient — version 2 `oauth_client_credentials` with the token endpoint and its client
    credentials (`token` is then the client secret), or, for a client with a public key, version
    2 `oauth_jwt_bearer_private_key_jwt` (issuer: the token endpoint, audience: the sharing
    endpoint; the recipient puts the path of its private key in `privateKeyFile`)."""
    if recipient is not None and recipient.public_key is not None:
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
