"""Where a table lives and how to reach it: a location URI parsed into its store, and delta-rs `storage_options`
turned into that store's configuration.

  1. `parse_location(uri)`: kind (`local`, `s3`, `azure`, `gcs`), bucket / container (+ account) and key.
  2. `store_config(kind, options)`: keys matched case-insensitively, as delta-rs: every key obstore takes for
     that store, delta-rs's retry keys, and the keys delta-rs reads itself (`_DELTA_RS_KEYS`). A key of
     another store is left for it; a key no store takes is refused by name.
  3. Environment variables (`AWS_*`, `AZURE_*`, `GOOGLE_*`) are read by the store itself; options win."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

from ..errors import StorageConfigError, UnsupportedFeatureError, UnsupportedStorageError

__all__ = ["Location", "StoreConfig", "parse_location", "store_config", "redact", "S3_SCHEMES",
           "AZURE_SCHEMES", "GCS_SCHEMES", "OBJECT_SCHEMES"]

S3_SCHEMES = ("s3", "s3a", "s3n")
AZURE_SCHEMES = ("az", "azure", "adl", "abfs", "abfss", "wasb", "wasbs")
GCS_SCHEMES = ("gs",)
OBJECT_SCHEMES = S3_SCHEMES + AZURE_SCHEMES + GCS_SCHEMES
_KIND = {**{s: "s3" for s in S3_SCHEMES}, **{s: "azure" for s in AZURE_SCHEMES}, **{s: "gcs" for s in GCS_SCHEMES}}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://([^/]*)/?(.*)$", re.DOTALL)


@dataclass(frozen=True)
class Location:
    """A parsed location. `authority` is the URI's (bucket, `container`, or
    `container@account.dfs.core.windows.net`); `bucket` the bucket or container; `account` the
    Azure storage account when the URI names it; `key` the object key ("" for the root)."""
    kind: str                 # "local" | "s3" | "azure" | "gcs"
    scheme: str               # lower-cased, as given ("s3a" stays "s3a"; see `root`)
    authority: str
    bucket: str
    account: str | None
    key: str

    @property
    def prefix(self) -> str:
        """`scheme://authority` in the spelling roots use (`s3a://` and `s3n://` become `s3://`)."""
        scheme = "s3" if self.kind == "s3" else self.scheme
        return f"{scheme}://{self.authority}"

    @property
    def root(self) -> str:
        key = self.key.strip("/")
        return f"{self.prefix}/{key}" if key else self.prefix

    @property
    def store_key(self) -> tuple:
        """What tells two object-store clients apart: the bucket, or the account and container."""
        return (self.kind, self.account, self.bucket)


def scheme_of(uri: str) -> str | None:
    """The URI scheme, lower-cased; None for a plain path (a one-letter "scheme" is a Windows
    drive letter)."""
    m = _SCHEME.match(uri)
    if not m or len(m.group(1)) == 1:
        return None
    return m.group(1).lower()


def kind_of(uri: str) -> str:
    """The store kind of a path or URI: "local", "s3", "azure", "gcs", or "" for a scheme no
    store takes."""
    s = scheme_of(uri)
    if s is None or s == "file":
        return "local"
    return _KIND.get(s, "")


def parse_location(uri: str) -> Location:
    """Schemes as delta-rs takes them: `s3://`, `s3a://`, `s3n://`; `az://`, `azure://`, `adl://`, `abfs[s]://`
    (`container@account.dfs.core.windows.net`), `wasb[s]://` (`...blob.core.windows.net`); `gs://`; `file:`
    and plain paths. UnsupportedStorageError for a scheme no store takes;
    StorageConfigError for an object-store URI without a bucket / container."""
    uri = os.fspath(uri)
    scheme = scheme_of(uri)
    if scheme is None or scheme == "file":
        return Location("local", scheme or "", "", "", None, uri)
    kind = _KIND.get(scheme)
    if kind is None:
        raise UnsupportedStorageError(
            f"unsupported URI scheme {scheme!r} in {uri!r}: tahoe reads and writes local paths, file:, "
            f"s3:// (s3a://), az:// (azure://, adl://, abfs[s]://container@account.dfs.core.windows.net, "
            f"wasb[s]://container@account.blob.core.windows.net) and gs://",
            store=scheme, path=uri)
    m = _URI.match(uri)
    if not m or not m.group(2):
        what = "container" if kind == "azure" else "bucket"
        raise StorageConfigError(f"{uri!r} names no {what}: write {scheme}://<{what}>/<path>", store=scheme, path=uri)
    authority, key = m.group(2), m.group(3)
    account = None
    bucket = authority
    if kind == "azure" and "@" in authority:
        bucket, host = authority.split("@", 1)
        account = host.split(".", 1)[0] or None
    return Location(kind, scheme, authority, bucket, account, key)


# --- options ---------------------------------------------------------------------------------------

# Keys delta-rs reads itself (not object_store), lower-cased → what tahoe does with them.
#   "ignore": meaningful to delta-rs only for a mechanism tahoe does not need (tahoe commits with
#             conditional puts on every store, so "unsafe rename" and its knobs never apply);
#   "refuse": a mechanism tahoe does not have and that other writers would rely on;
#   other:    a translation into object_store's keys (see `_translate`).
_DELTA_RS_KEYS: dict[str, str] = {
    "aws_s3_allow_unsafe_rename": "ignore",
    "mount_allow_unsafe_rename": "ignore",
    "aws_s3_locking_provider": "locking",
    "delta_dynamo_table_name": "dynamo", "delta_dynamo_billing_mode": "dynamo",
    "delta_dynamo_max_elapsed_request_time": "dynamo", "aws_endpoint_url_dynamodb": "dynamo",
    "aws_region_dynamodb": "dynamo", "aws_access_key_id_dynamodb": "dynamo",
    "aws_secret_access_key_dynamodb": "dynamo", "aws_session_token_dynamodb": "dynamo",
    "aws_ec2_metadata_disabled": "ignore", "aws_ec2_metadata_timeout": "ignore",
    "aws_force_credential_load": "ignore", "aws_sts_pool_idle_timeout_seconds": "ignore",
    "aws_s3_get_internal_server_error_retries": "ignore",   # object_store retries every 5xx
    "aws_s3_pool_idle_timeout_seconds": "pool_idle_timeout",
    "aws_s3_addressing_style": "addressing_style",
    "aws_profile": "profile",
    "aws_iam_role_arn": "assume_role", "aws_s3_assume_role_arn": "assume_role",
    "aws_iam_role_session_name": "ignore", "aws_s3_role_session_name": "ignore",
    "object_store_concurrency_limit": "concurrency",
}
_RETRY_KEYS = {"max_retries", "retry_timeout", "backoff_config.init_backoff", "backoff_config.max_backoff",
               "backoff_config.base"}
# tahoe's own keys (all stores)
_TAHOE_KEYS = {"tahoe_conflict_retries"}

# what delta-rs (object_store) defaults to: 10 retries with exponential backoff, 3 minutes at most
DEFAULT_RETRY = {"max_retries": 10, "retry_timeout": timedelta(minutes=3),
                 "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=15),
                             "base": 2.0}}

_STORE_NAMES = {"s3": "S3", "azure": "Azure Blob Storage", "gcs": "Google Cloud Storage"}


def _probe_build(kind: str, config: dict) -> BaseException | None:
    """Build a throw-away store of `kind` from `config` (values "true"), made to fail right after
    its keys are parsed (a `timeout` that is no duration): a store that builds makes an HTTP
    client, ~30 ms; parsing alone takes microseconds. Returns the exception (or None)."""
    from obstore.store import AzureStore, GCSStore, S3Store

    cls = {"s3": S3Store, "azure": AzureStore, "gcs": GCSStore}[kind]
    cfg = dict(config)
    if not any("timeout" in k for k in cfg):
        cfg["timeout"] = "tahoe-probe"
    try:
        cls("tahoe-probe", config=cfg)
    except Exception as e:  # noqa: BLE001 - the answer
        return e
    return None


_UNKNOWN_KEY = re.compile(r"Configuration key: '([^']+)' is not valid|Invalid key: ([^\s.]+)")


@functools.lru_cache(maxsize=256)
def _known_keys(kind: str, keys: frozenset[str]) -> tuple[frozenset[str], bool]:
    """(the keys of `keys` object_store takes for a store of `kind`, whether two of them name one
    setting) — asked of obstore itself, so its whole key list and its aliases apply."""
    from obstore.exceptions import UnknownConfigurationKeyError

    remaining = set(keys)
    aliases: set[str] = set()      # second spellings of a setting another key names
    while remaining:
        e = _probe_build(kind, {k: "true" for k in sorted(remaining)})
        m = _UNKNOWN_KEY.search(str(e)) if isinstance(e, (UnknownConfigurationKeyError, ValueError)) else None
        if m is not None:
            bad = (m.group(1) or m.group(2) or "").lower()
            hit = next((k for k in remaining if k == bad or k.lower() == bad), None)
            if hit is None:   # an alias spelled back differently: find it one key at a time
                hit = next(k for k in remaining if isinstance(_probe_build(kind, {k: "true"}),
                                                              (UnknownConfigurationKeyError, ValueError)))
            remaining.discard(hit)
            continue
        if e is not None and "duplicate key" in str(e).lower():
            # parsing stopped at the duplicate: set one spelling aside and look at the rest
            pair = next(((a, b) for a in sorted(remaining) for b in sorted(remaining)
                         if a < b and _same_key(kind, a, b)), None)
            if pair is None:   # pragma: no cover - obstore named a duplicate no pair shows
                return frozenset(remaining | aliases), True
            remaining.discard(pair[1])
            aliases.add(pair[1])
            continue
        return frozenset(remaining | aliases), bool(aliases)
    return frozenset(aliases), bool(aliases)


@functools.lru_cache(maxsize=2048)
def _same_key(kind: str, a: str, b: str) -> bool:
    """Whether two spellings name one object_store key (`aws_allow_http` and `allow_http`,
    `AWS_ENDPOINT_URL` and `endpoint`): obstore refuses such a pair as a duplicate."""
    e = _probe_build(kind, {a: "true", b: "true"})
    return e is not None and "duplicate key" in str(e).lower()


def _duration(value: Any, key: str) -> timedelta:
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)):
        return timedelta(seconds=float(value))
    s = str(value).strip().lower()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|seconds|m|min|mins|minutes|h)?", s)
    if not m:
        raise StorageConfigError(f"storage option {key!r}: {value!r} is not a duration (e.g. 30s, 500ms, 2min)")
    n = float(m.group(1))
    unit = m.group(2) or "s"
    scale = {"ms": 0.001, "m": 60, "min": 60, "mins": 60, "minutes": 60, "h": 3600}.get(unit, 1)
    return timedelta(seconds=n * scale)


def _bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("1", "true", "yes", "on", "t", "y"):
        return True
    if s in ("0", "false", "no", "off", "f", "n", ""):
        return False
    raise StorageConfigError(f"storage option {key!r}: {value!r} is not a boolean")


@dataclass
class StoreConfig:
    """What `store_config` makes of the options for one store kind."""
    kind: str
    config: dict[str, str] = field(default_factory=dict)     # object_store keys, lower-cased
    retry: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_RETRY))
    profile: str | None = None                                # AWS_PROFILE: credentials via boto3
    concurrency: int | None = None
    conflict_retries: int = 5
    secrets: tuple[str, ...] = ()                             # option values never to print

    def get(self, *names: str) -> str | None:
        """The value of the first of `names` (object_store spellings) that is set, in the options
        or else the environment (upper-cased)."""
        for n in names:
            if n in self.config:
                return self.config[n]
        for n in names:
            v = os.environ.get(n.upper())
            if v:
                return v
        return None


_SECRET_HINTS = ("secret", "key", "token", "sas", "password", "credential", "signature")


def store_config(kind: str, options: dict | None) -> StoreConfig:
    """The options for a store of `kind` ("s3", "azure", "gcs"); see the module docstring."""
    out = StoreConfig(kind)
    retry = dict(DEFAULT_RETRY)
    backoff = dict(DEFAULT_RETRY["backoff"])
    secrets = []
    candidates: list[tuple[str, str, str]] = []   # (as given, lower-cased, value) for object_store
    for raw_key, value in (options or {}).items():
        if value is None:
            continue
        key = str(raw_key).strip().lower()
        sval = value if isinstance(value, str) else (str(value).lower() if isinstance(value, bool) else str(value))
        if any(h in key for h in _SECRET_HINTS) and sval:
            secrets.append(sval)
        if key in _RETRY_KEYS:
            if key == "max_retries":
                try:
                    retry["max_retries"] = int(sval)
                except ValueError:
                    raise StorageConfigError(f"storage option {raw_key!r}: {value!r} is not an integer") from None
            elif key == "retry_timeout":
                retry["retry_timeout"] = _duration(value, raw_key)
            elif key == "backoff_config.base":
                backoff["base"] = float(sval)
            else:
                backoff[key.split(".", 1)[1]] = _duration(value, raw_key)
            continue
        if key in _TAHOE_KEYS:
            out.conflict_retries = int(sval)
            continue
        action = _DELTA_RS_KEYS.get(key)
        if action is not None:
            if kind != "s3":
                continue   # delta-rs's own keys are all S3 ones
            _delta_rs_key(out, action, raw_key, sval)
            continue
        candidates.append((raw_key, key, sval))
    _store_keys(out, kind, candidates)
    retry["backoff"] = backoff
    out.retry = retry
    out.secrets = tuple(secrets)
    return out


def _store_keys(out: StoreConfig, kind: str, candidates: list[tuple[str, str, str]]) -> None:
    """Sort the remaining keys: this store's (into `out.config`, one spelling per setting), another
    store's (left for it), or no store's (refused by name)."""
    keys = frozenset(k for _, k, _ in candidates)
    mine, dup = _known_keys(kind, keys) if keys else (frozenset(), False)
    rest = keys - mine
    for other in ("s3", "azure", "gcs"):
        if other != kind and rest:
            rest = rest - _known_keys(other, rest)[0]
    for raw_key, key, sval in candidates:
        if key in rest:
            raise StorageConfigError(
                f"unknown storage option {raw_key!r}: no store (S3, Azure, GCS) takes it. tahoe takes the keys "
                f"delta-rs takes (object_store's configuration keys, in any case, and delta-rs's own such as "
                f"AWS_S3_ALLOW_UNSAFE_RENAME)", store=_STORE_NAMES.get(kind, kind))
        if key not in mine:
            continue   # another store's key: used when a path of that store is opened
        same = next((k for k in out.config if dup and _same_key(kind, k, key)), None)
        if same is not None:
            if out.config[same] != sval:
                raise StorageConfigError(f"storage options {same!r} and {raw_key!r} name one setting of "
                                         f"{_STORE_NAMES[kind]} with different values")
            continue
        out.config[key] = sval


def _delta_rs_key(out: StoreConfig, action: str, raw_key: str, value: str) -> None:
    if action == "ignore" or action == "dynamo":
        return
    if action == "locking":
        if value.strip().lower() in ("", "none"):
            return
        raise UnsupportedFeatureError(
            f"storage option {raw_key}={value!r}: tahoe commits to S3 with conditional puts (If-None-Match), "
            f"not through a DynamoDB lock; writers that lock through DynamoDB would not see tahoe's commits "
            f"coming. Drop the option (delta-rs ≥ 0.22 commits with conditional puts too) or write with delta-rs")
    if action == "pool_idle_timeout":
        out.config["pool_idle_timeout"] = f"{value}s" if value.strip().isdigit() else value
    elif action == "addressing_style":
        v = value.strip().lower()
        if v not in ("path", "virtual"):
            raise StorageConfigError(f"storage option {raw_key}: {value!r} is neither 'path' nor 'virtual'")
        out.config["virtual_hosted_style_request"] = "true" if v == "virtual" else "false"
    elif action == "profile":
        out.profile = value
    elif action == "assume_role":
        raise UnsupportedFeatureError(
            f"storage option {raw_key}: tahoe does not assume IAM roles itself; assume the role outside "
            f"(AWS_PROFILE with a role_arn, or web identity: aws_role_arn + aws_web_identity_token_file) ")
    elif action == "concurrency":
        try:
            out.concurrency = max(1, int(value))
        except ValueError:
            raise StorageConfigError(f"storage option {raw_key}: {value!r} is not an integer") from None


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` without secrets: signature and token query parameters of URLs (SAS `sig=`,
    `X-Amz-Signature=`, `X-Amz-Credential=`, `X-Amz-Security-Token=`, `X-Goog-Signature=`), and any
    of the option values `secrets` (keys, tokens) that appear verbatim."""
    text = re.sub(r"(?i)((?<![A-Za-z0-9_.-])(?:sig|x-amz-signature|x-amz-credential|x-amz-security-token|"
                  r"x-goog-signature|x-goog-credential)=)[^&\s\"'<>]*", r"\1<redacted>", text)
    for s in secrets:
        if len(s) >= 6:
            text = text.replace(s, "<redacted>")
            text = text.replace(unquote(s), "<redacted>") if unquote(s) != s else text
    return text
