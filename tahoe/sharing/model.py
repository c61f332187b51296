"""What a Delta Sharing recipient holds and is told, as the official Python connector
(`delta_sharing` 1.4) names it: the profile (`DeltaSharingProfile`, spec "Profile File Format"),
shares, schemas and tables (`Share`, `Schema`, `Table`), and a table's `Protocol`, `Format` and
`Metadata` as `/metadata` and `/query` answer them (spec "API Response Format" in parquet and in
delta). Same class names, fields and `from_json`/`read_from_file` constructors, so code written
against `delta_sharing.protocol` reads them unchanged.

Profiles: `shareCredentialsVersion` 1 (`endpoint`, `bearerToken`, optional `expirationTime`) and 2
with `type` `bearer_token`, `oauth_client_credentials` (`tokenEndpoint`, `clientId`,
`clientSecret`, optional `scope`), `oauth_jwt_bearer_private_key_jwt` (an `auth` object:
`tokenEndpoint`, `clientId`, `issuer`, `audience`, optional `scope`, and `privateKey`:
`privateKeyFile`, `keyId`, optional `algorithm`, default RS256) or `basic` (`username`,
`password`) — the fields the official connector reads, where it reads them. A version above 2 and
an unknown type are refused by name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Dict, List, Optional, Sequence, Union

from ..errors import DeltaError, UnsupportedFeatureError

__all__ = ["DeltaSharingProfile", "ProfileError", "UnsupportedProtocolError", "Share", "Schema", "Table", "Protocol", "Format", "Metadata",
           "OAUTH_CLIENT_CREDENTIALS", "OAUTH_JWT_BEARER", "BASIC", "BEARER_TOKEN", "PROFILE_TYPES"]

BEARER_TOKEN = "bearer_token"
OAUTH_CLIENT_CREDENTIALS = "oauth_client_credentials"
OAUTH_JWT_BEARER = "oauth_jwt_bearer_private_key_jwt"
BASIC = "basic"
PROFILE_TYPES = (BEARER_TOKEN, OAUTH_CLIENT_CREDENTIALS, OAUTH_JWT_BEARER, BASIC)


class ProfileError(DeltaError, ValueError):
    """A profile file that cannot be used (unreadable, malformed, an unsupported version or type)."""


class UnsupportedProtocolError(UnsupportedFeatureError, ValueError):
    """The table needs a newer reader version than this client reads (a ValueError, as the
    official connector raises)."""


def _loads(doc: Any) -> dict:
    if isinstance(doc, (bytes, bytearray)):
        doc = doc.decode("utf-8")
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError as e:
            raise ProfileError(f"the profile is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ProfileError("the profile must be a JSON object")
    return doc


@dataclass(frozen=True)
class DeltaSharingProfile:
    """A recipient's credentials file (spec "Profile File Format"; version 2 adds OAuth)."""
    CURRENT: ClassVar[int] = 2

    share_credentials_version: int
    endpoint: str
    bearer_token: Optional[str] = None
    expiration_time: Optional[str] = None
    type: Optional[str] = None
    token_endpoint: Optional[str] = None
    client_id: Optional[str] = None
    client_secret: Optional[str] = field(default=None, repr=False)
    scope: Optional[str] = None
    username: Optional[str] = None
    password: Optional[str] = field(default=None, repr=False)
    issuer: Optional[str] = None
    audience: Optional[str] = None
    # oauth_jwt_bearer_private_key_jwt: {"privateKeyFile", "keyId", "algorithm"} (as the official connector)
    private_key: Optional[Dict[str, Optional[str]]] = field(default=None, hash=False, compare=False)

    def __post_init__(self):
        if self.share_credentials_version > DeltaSharingProfile.CURRENT:
            raise ProfileError(
                f"'shareCredentialsVersion' in the profile is {self.share_credentials_version} which is too new: "
                f"this client supports version {DeltaSharingProfile.CURRENT} and below. Please upgrade tahoe.")

    @property
    def auth_type(self) -> str:
        return self.type or BEARER_TOKEN

    @staticmethod
    def read_from_file(profile: Union[str, IO, Path, "os.PathLike[str]"]) -> "DeltaSharingProfile":
        """A profile from a local path (or a `file:` URI), an open file, or — with fsspec
        installed — any URL fsspec opens (as the official connector)."""
        if hasattr(profile, "read"):
            return DeltaSharingProfile.from_json(profile.read())
        path = os.fspath(profile)
        if path.startswith("file://"):
            path = path[len("file://"):]
        elif "://" in path:
            try:
                import fsspec
            except ImportError:
                raise ProfileError(f"cannot open profile {path}: reading a profile from a URL needs fsspec "
                                   f"(pip install fsspec)") from None
            with fsspec.open(path, "rb") as f:
                return DeltaSharingProfile.from_json(f.read())
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ProfileError(f"cannot read profile file {path}: {e.strerror or e}") from None
        return DeltaSharingProfile.from_json(data)

    @staticmethod
    def from_json(doc: Any) -> "DeltaSharingProfile":
        d = _loads(doc)

        def need(key: str) -> str:
            v = d.get(key)
            if not isinstance(v, str) or not v:
                raise ProfileError(f"the profile has no '{key}'")
            return v

        try:
            version = int(d["shareCredentialsVersion"])
        except (KeyError, TypeError, ValueError):
            raise ProfileError("the profile has no valid 'shareCredentialsVersion'") from None
        if version > DeltaSharingProfile.CURRENT or version < 1:
            if version < 1:
                raise ProfileError(f"'shareCredentialsVersion' {version} is not valid")
            return DeltaSharingProfile(version, "")  # __post_init__ refuses it with the upgrade hint
        endpoint = need("endpoint").rstrip("/")
        if version == 1:
            return DeltaSharingProfile(1, endpoint, bearer_token=need("bearerToken"),
                                       expiration_time=d.get("expirationTime"))
        typ = d.get("type")
        if typ is None or typ == BEARER_TOKEN:
            return DeltaSharingProfile(2, endpoint, bearer_token=need("bearerToken"),
                                       expiration_time=d.get("expirationTime"), type=BEARER_TOKEN)
        if typ == OAUTH_CLIENT_CREDENTIALS:
            return DeltaSharingProfile(2, endpoint, type=typ, token_endpoint=need("tokenEndpoint").rstrip("/"),
                                       client_id=need("clientId"), client_secret=need("clientSecret"),
                                       scope=d.get("scope") or None)
        if typ == BASIC:
            return DeltaSharingProfile(2, endpoint, type=typ, username=need("username"), password=need("password"))
        if typ == OAUTH_JWT_BEARER:
            auth = d.get("auth")
            if not isinstance(auth, dict):
                raise ProfileError(f"a {OAUTH_JWT_BEARER} profile needs an 'auth' object")

            def need_auth(key: str) -> str:
                v = auth.get(key)
                if not isinstance(v, str) or not v:
                    raise ProfileError(f"the profile's 'auth' has no '{key}'")
                return v
            pk = auth.get("privateKey")
            if not isinstance(pk, dict) or not isinstance(pk.get("privateKeyFile"), str) or not pk["privateKeyFile"]:
                raise ProfileError("the profile's 'auth' has no 'privateKey' with a 'privateKeyFile'")
            return DeltaSharingProfile(2, endpoint, type=typ, token_endpoint=need_auth("tokenEndpoint").rstrip("/"),
                                       client_id=need_auth("clientId"), issuer=need_auth("issuer"),
                                       audience=need_auth("audience"), scope=auth.get("scope") or None,
                                       private_key={"privateKeyFile": pk["privateKeyFile"], "keyId": pk.get("keyId"),
                                                    "algorithm": pk.get("algorithm")})
        raise ProfileError(f"unknown profile type {typ!r}; supported: {', '.join(PROFILE_TYPES)}")

    @staticmethod
    def of(profile: Any) -> "DeltaSharingProfile":
        """A profile from what users pass around: a profile, a path, an open file or a dict."""
        if isinstance(profile, DeltaSharingProfile):
            return profile
        if isinstance(profile, dict):
            return DeltaSharingProfile.from_json(profile)
        return DeltaSharingProfile.read_from_file(profile)

    def to_json(self) -> dict:
        """The profile as its file holds it (what is shipped to Spark executors)."""
        d: Dict[str, Any] = {"shareCredentialsVersion": self.share_credentials_version, "endpoint": self.endpoint}
        if self.share_credentials_version >= 2:
            d["type"] = self.auth_type
        if self.auth_type == OAUTH_CLIENT_CREDENTIALS:
            d.update({"tokenEndpoint": self.token_endpoint, "clientId": self.client_id,
                      "clientSecret": self.client_secret})
            if self.scope:
                d["scope"] = self.scope
        elif self.auth_type == BASIC:
            d.update({"username": self.username, "password": self.password})
        elif self.auth_type == OAUTH_JWT_BEARER:
            auth: Dict[str, Any] = {"tokenEndpoint": self.token_endpoint, "clientId": self.client_id,
                                    "issuer": self.issuer, "audience": self.audience,
                                    "privateKey": {k: v for k, v in (self.private_key or {}).items() if v is not None}}
            if self.scope:
                auth["scope"] = self.scope
            d["auth"] = auth
        else:
            d["bearerToken"] = self.bearer_token
            if self.expiration_time:
                d["expirationTime"] = self.expiration_time
        return d


@dataclass(frozen=True)
class Share:
    name: str

    @staticmethod
    def from_json(doc) -> "Share":
        return Share(name=_loads(doc)["name"])


@dataclass(frozen=True)
class Schema:
    name: str
    share: str

    @staticmethod
    def from_json(doc) -> "Schema":
        d = _loads(doc)
        return Schema(name=d["name"], share=d["share"])


@dataclass(frozen=True)
class Table:
    name: str
    share: str
    schema: str

    @staticmethod
    def from_json(doc) -> "Table":
        d = _loads(doc)
        return Table(name=d["name"], share=d["share"], schema=d["schema"])


@dataclass(frozen=True)
class Protocol:
    """A table's protocol: parquet format gives only `minReaderVersion`; delta format the whole
    Delta protocol."""
    CURRENT: ClassVar[int] = 3

    min_reader_version: int
    min_writer_version: Optional[int] = None
    reader_features: Optional[List[str]] = None
    writer_features: Optional[List[str]] = None

    def __post_init__(self):
        if self.min_reader_version > Protocol.CURRENT:
            raise UnsupportedProtocolError(
                f"the table requires reader version {self.min_reader_version}; tahoe's sharing client supports "
                f"{Protocol.CURRENT} and below")

    @staticmethod
    def from_json(doc) -> "Protocol":
        d = _loads(doc)
        if "deltaProtocol" in d:
            p = d["deltaProtocol"]
            return Protocol(int(p["minReaderVersion"]), int(p.get("minWriterVersion", 0)) or None,
                            p.get("readerFeatures"), p.get("writerFeatures"))
        return Protocol(int(d["minReaderVersion"]))


@dataclass(frozen=True)
class Format:
    provider: str = "parquet"
    options: Dict[str, str] = field(default_factory=dict)

    @staticmethod
    def from_json(doc) -> "Format":
        d = _loads(doc)
        return Format(provider=d.get("provider", "parquet"), options=d.get("options") or {})


@dataclass(frozen=True)
class Metadata:
    id: Optional[str] = None
    name: Optional[str] = None
    description: Optional[str] = None
    format: Format = field(default_factory=Format)
    schema_string: Optional[str] = None
    configuration: Dict[str, str] = field(default_factory=dict)
    partition_columns: Sequence[str] = field(default_factory=list)
    version: Optional[int] = None
    size: Optional[int] = None
    num_files: Optional[int] = None
    created_time: Optional[int] = None

    @staticmethod
    def from_json(doc) -> "Metadata":
        d = _loads(doc)
        outer = d
        if "deltaMetadata" in d:
            d = d["deltaMetadata"]
        return Metadata(id=d.get("id"), name=d.get("name"), description=d.get("description"),
                        format=Format.from_json(d.get("format") or {}), schema_string=d.get("schemaString"),
                        configuration=d.get("configuration") or {}, partition_columns=d.get("partitionColumns") or [],
                        version=outer.get("version"), size=outer.get("size"), num_files=outer.get("numFiles"),
                        created_time=d.get("createdTime"))
