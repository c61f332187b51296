"""`S3LogStore`: the log store for Amazon S3 and S3-compatible object stores, via boto3.

Put-if-absent uses S3 conditional writes (`PutObject` with `If-None-Match: *`): S3 answers
412 PreconditionFailed when the key exists (→ FileExistsError) and 409
ConditionalRequestConflict while a concurrent conditional write of the same key is in flight
(→ retried a few times, then CommitFailedException). An object appears whole or not at all, so
atomic creation comes with S3 itself. A store that ignores `If-None-Match` would silently
overwrite: only point this at stores that support conditional writes (AWS S3 since 2024-08,
MinIO, moto's server, ...).

Paths are `s3://bucket/key` (`s3a://` and `s3n://` accepted); "directories" are key prefixes
ending in "/". Settings come from `options` first, then the usual AWS environment variables:

  option key              environment
  aws_access_key_id       AWS_ACCESS_KEY_ID
  aws_secret_access_key   AWS_SECRET_ACCESS_KEY
  aws_session_token       AWS_SESSION_TOKEN
  region                  AWS_REGION, AWS_DEFAULT_REGION
  endpoint_url            AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
  allow_http              AWS_ALLOW_HTTP

Without explicit keys, boto3's (and pyarrow's) default credential chain applies (profiles,
instance metadata, ...). `allow_http`: an endpoint given without a scheme uses http only when it
is true; an explicit `http://` endpoint is refused only when it is explicitly false. Settings are
read once, when the store is made.
"""

from __future__ import annotations

import datetime as _dt
import errno
import itertools
import os
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tahoe.errors import CommitFailedException
from tahoe.storage.base import FileStatus, LogStore

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow.fs

__all__ = ["S3LogStore", "split_s3_path"]

_S3_PATH = re.compile(r"^(?:s3|s3a|s3n)://([^/]+)/?(.*)$", re.IGNORECASE | re.DOTALL)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)

# Accepted spellings of option keys (case-insensitive) → canonical key.
_OPTION_ALIASES = {
    "aws_access_key_id": "aws_access_key_id", "access_key_id": "aws_access_key_id",
    "aws_secret_access_key": "aws_secret_access_key",
    "secret_access_key": "aws_secret_access_key",
    "aws_session_token": "aws_session_token", "session_token": "aws_session_token",
    "region": "region", "aws_region": "region", "aws_default_region": "region",
    "endpoint_url": "endpoint_url", "endpoint": "endpoint_url", "aws_endpoint_url": "endpoint_url",
    "aws_endpoint_url_s3": "endpoint_url",
    "allow_http": "allow_http", "aws_allow_http": "allow_http",
}
_ENV = {
    "aws_access_key_id": ("AWS_ACCESS_KEY_ID",),
    "aws_secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "aws_session_token": ("AWS_SESSION_TOKEN",),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "allow_http": ("AWS_ALLOW_HTTP",),
}


def split_s3_path(path: str) -> tuple[str, str]:
    """`s3://bucket/some/key` → ("bucket", "some/key"). ValueError if not an S3 URI."""
    m = _S3_PATH.match(path)
    if not m:
        raise ValueError(f"not an S3 path (expected s3://bucket/key): {path!r}")
    return m.group(1), m.group(2)


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _resolve_settings(options: dict | None) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for k, v in (options or {}).items():
        canon = _OPTION_ALIASES.get(str(k).lower())
        if canon is not None and v is not None and v != "":
            given[canon] = v
    settings: dict[str, Any] = {}
    for key, envs in _ENV.items():
        value = given.get(key)
        if value is None:
            value = next((os.environ[e] for e in envs if os.environ.get(e)), None)
        settings[key] = value

    allow_http = None if settings["allow_http"] is None else _as_bool(settings["allow_http"])
    endpoint = settings["endpoint_url"]
    scheme = "https"
    host = None
    if endpoint:
        endpoint = str(endpoint).rstrip("/")
        if "://" in endpoint:
            scheme, host = endpoint.split("://", 1)
            scheme = scheme.lower()
            if scheme == "http" and allow_http is False:
                raise ValueError(f"endpoint {endpoint!r} uses http but allow_http is false")
        else:
            host = endpoint
            scheme = "http" if allow_http else "https"
            endpoint = f"{scheme}://{host}"
    settings["endpoint_url"] = endpoint
    settings["endpoint_host"] = host
    settings["scheme"] = scheme
    settings["allow_http"] = allow_http
    return settings


def _ms(t: _dt.datetime) -> int:
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return (t - _EPOCH) // _dt.timedelta(milliseconds=1)


def _status_and_code(e: Exception) -> tuple[int | None, str]:
    resp = getattr(e, "response", None) or {}
    return (resp.get("ResponseMetadata", {}).get("HTTPStatusCode"),
            str(resp.get("Error", {}).get("Code", "")))


def _is_not_found(e: Exception) -> bool:
    status, code = _status_and_code(e)
    return status == 404 or code in ("NoSuchKey", "NoSuchBucket", "NotFound", "404")


class S3LogStore(LogStore):
    """Log store on S3. Thread-safe (one boto3 client, which is thread-safe); picklable
    (the client is rebuilt from the resolved settings) unless a client was injected."""

    def __init__(self, options: dict | None = None, *, client: Any = None,
                 page_size: int = 1000, conflict_retries: int = 5,
                 conflict_backoff: float = 0.05) -> None:
        self._settings = _resolve_settings(options)
        self._page_size = page_size
        self._conflict_retries = conflict_retries
        self._conflict_backoff = conflict_backoff
        self._injected = client is not None
        self._client = client if client is not None else self._make_client()
        self._fs: pyarrow.fs.FileSystem | None = None
        self._fs_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"S3LogStore(endpoint={self._settings['endpoint_url']!r}, region={self._settings['region']!r})"

    def __getstate__(self) -> dict:
        if self._injected:
            raise TypeError("an S3LogStore with an injected client cannot be pickled")
        return {"settings": self._settings, "page_size": self._page_size,
                "conflict_retries": self._conflict_retries,
                "conflict_backoff": self._conflict_backoff}

    def __setstate__(self, state: dict) -> None:
        self._settings = state["settings"]
        self._page_size = state["page_size"]
        self._conflict_retries = state["conflict_retries"]
        self._conflict_backoff = state["conflict_backoff"]
        self._injected = False
        self._client = self._make_client()
        self._fs = None
        self._fs_lock = threading.Lock()

    def _make_client(self) -> Any:
        import boto3
        from botocore.config import Config

        s = self._settings
        # SigV4 everywhere: boto3 may fall back to SigV2 query auth for presigned URLs on custom
        # endpoints, and Delta Sharing clients only accept `X-Amz-Signature=` URLs as presigned.
        cfg: dict[str, Any] = {"retries": {"max_attempts": 5, "mode": "standard"}, "signature_version": "s3v4"}
        if s["endpoint_url"]:
            # S3-compatible endpoints: path-style addressing, and no default CRC checksums
            # (not every compatible store understands them).
            cfg["s3"] = {"addressing_style": "path"}
            cfg["request_checksum_calculation"] = "when_required"
            cfg["response_checksum_validation"] = "when_required"
        session = boto3.session.Session(
            aws_access_key_id=s["aws_access_key_id"],
            aws_secret_access_key=s["aws_secret_access_key"],
            aws_session_token=s["aws_session_token"],
            region_name=s["region"],
        )
        return session.client("s3", endpoint_url=s["endpoint_url"], config=Config(**cfg))

    @property
    def client(self) -> Any:
        """The underlying boto3 S3 client."""
        return self._client

    @property
    def region(self) -> str | None:
        """The region the store was configured with (options or environment), if any."""
        return self._settings["region"]

    def aws_client(self, service: str, endpoint_url: str | None = None, region: str | None = None) -> Any:
        """A boto3 client of another AWS service (e.g. "sts") with this store's credentials and
        region; its endpoint is `endpoint_url` when given, else boto3's own resolution
        (AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, or the service's public endpoint) — never
        the S3 endpoint of the store."""
        import boto3

        s = self._settings
        session = boto3.session.Session(
            aws_access_key_id=s["aws_access_key_id"],
            aws_secret_access_key=s["aws_secret_access_key"],
            aws_session_token=s["aws_session_token"],
            region_name=region or s["region"],
        )
        return session.client(service, endpoint_url=endpoint_url)

    # --- helpers -------------------------------------------------------------------------

    @staticmethod
    def _uri(bucket: str, key: str) -> str:
        return f"s3://{bucket}/{key}"

    def _pages(self, bucket: str, prefix: str, *, delimiter: str | None = None,
               start_after: str | None = None, max_keys: int | None = None) -> Iterator[dict]:
        from botocore.exceptions import ClientError

        kw: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix,
                              "MaxKeys": max_keys or self._page_size}
        if delimiter:
            kw["Delimiter"] = delimiter
        if start_after:
            kw["StartAfter"] = start_after
        while True:
            try:
                resp = self._client.list_objects_v2(**kw)
            except ClientError as e:
                if _is_not_found(e):
                    raise FileNotFoundError(errno.ENOENT, f"no such bucket ({e})",
                                            self._uri(bucket, prefix)) from None
                raise
            yield resp
            token = resp.get("NextContinuationToken")
            if not resp.get("IsTruncated") or not token or max_keys:
                return
            kw["ContinuationToken"] = token

    @staticmethod
    def _page_count(page: dict) -> int:
        return len(page.get("Contents") or ()) + len(page.get("CommonPrefixes") or ())

    def _prefix_exists(self, bucket: str, prefix: str) -> bool:
        page = next(self._pages(bucket, prefix, max_keys=1))
        return self._page_count(page) > 0

    # --- listing -------------------------------------------------------------------------

    def list_from(self, path: str) -> Iterator[FileStatus]:
        bucket, key = split_s3_path(path)
        cut = key.rfind("/") + 1
        prefix, start = key[:cut], key[cut:]
        # StartAfter is exclusive: start just below `start` and filter the few extra names.
        start_after = prefix + start[:-1] if start else None
        pages = self._pages(bucket, prefix, delimiter="/", start_after=start_after)
        first = next(pages)  # eager: errors surface on the call
        if self._page_count(first) == 0 and prefix and not self._prefix_exists(bucket, prefix):
            raise FileNotFoundError(errno.ENOENT, "no such directory", self._uri(bucket, prefix))
        return self._direct_files(bucket, prefix, start, itertools.chain([first], pages))

    def _direct_files(self, bucket: str, prefix: str, start: str,
                      pages: Iterable[dict]) -> Iterator[FileStatus]:
        for page in pages:
            for obj in page.get("Contents") or ():
                name = obj["Key"][len(prefix):]
                if not name or "/" in name or name.startswith(".") or name < start:
                    continue
                yield FileStatus(self._uri(bucket, obj["Key"]), int(obj["Size"]),
                                 _ms(obj["LastModified"]))

    def walk(self, dir_path: str) -> Iterator[FileStatus]:
        bucket, key = split_s3_path(dir_path)
        prefix = key.rstrip("/") + "/" if key.strip("/") else ""
        pages = self._pages(bucket, prefix)
        first = next(pages)
        if self._page_count(first) == 0 and prefix:
            raise FileNotFoundError(errno.ENOENT, "no such directory", self._uri(bucket, prefix))
        return self._all_files(bucket, itertools.chain([first], pages))

    def _all_files(self, bucket: str, pages: Iterable[dict]) -> Iterator[FileStatus]:
        for page in pages:
            for obj in page.get("Contents") or ():
                if obj["Key"].endswith("/"):  # "directory marker" objects
                    continue
                yield FileStatus(self._uri(bucket, obj["Key"]), int(obj["Size"]),
                                 _ms(obj["LastModified"]))

    # --- reading -------------------------------------------------------------------------

    def _get(self, path: str, **kw: Any) -> bytes:
        from botocore.exceptions import ClientError

        bucket, key = split_s3_path(path)
        try:
            resp = self._client.get_object(Bucket=bucket, Key=key, **kw)
        except ClientError as e:
            if _is_not_found(e):
                raise FileNotFoundError(errno.ENOENT, "no such file", path) from None
            raise
        body = resp["Body"]
        try:
            return body.read()
        finally:
            body.close()

    def read(self, path: str) -> bytes:
        return self._get(path)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        from botocore.exceptions import ClientError

        if start < 0 or length < 0:
            raise ValueError(f"invalid range start={start} length={length}")
        if length == 0:
            if not self._head(path):
                raise FileNotFoundError(errno.ENOENT, "no such file", path)
            return b""
        try:
            return self._get(path, Range=f"bytes={start}-{start + length - 1}")
        except ClientError as e:
            status, code = _status_and_code(e)
            if status == 416 or code == "InvalidRange":  # start at/after the end
                return b""
            raise

    def _head(self, path: str) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = split_s3_path(path)
        try:
            if key:
                self._client.head_object(Bucket=bucket, Key=key)
            else:
                self._client.head_bucket(Bucket=bucket)
            return True
        except ClientError as e:
            if _is_not_found(e):
                return False
            raise

    def exists(self, path: str) -> bool:
        """True for an object, or for a "directory" (a prefix with objects under it)."""
        if self._head(path):
            return True
        bucket, key = split_s3_path(path)
        if not key.strip("/"):
            return False
        try:
            return self._prefix_exists(bucket, key.rstrip("/") + "/")
        except FileNotFoundError:
            return False

    # --- writing -------------------------------------------------------------------------

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        from botocore.exceptions import ClientError

        bucket, key = split_s3_path(path)
        if not key or key.endswith("/"):
            raise ValueError(f"cannot write to a directory path: {path!r}")
        if overwrite:
            self._client.put_object(Bucket=bucket, Key=key, Body=data)
            return
        for attempt in range(self._conflict_retries + 1):
            try:
                self._client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return
            except ClientError as e:
                status, code = _status_and_code(e)
                if status == 412 or code == "PreconditionFailed":
                    # If botocore retried our request (e.g. the first response was lost), the
                    # object that blocks us may be our own earlier attempt: same bytes → ours.
                    retried = (e.response.get("ResponseMetadata") or {}).get("RetryAttempts", 0)
                    if retried and self._holds(path, data):
                        return
                    raise FileExistsError(errno.EEXIST, "file already exists", path) from None
                if status == 409 or code == "ConditionalRequestConflict":
                    if attempt < self._conflict_retries:
                        time.sleep(self._conflict_backoff * (2 ** attempt) * (0.5 + random.random()))
                        continue
                    raise CommitFailedException(
                        f"conditional write of {path} kept conflicting with concurrent writes "
                        f"(409 ConditionalRequestConflict) after {attempt + 1} attempts") from e
                raise

    def _holds(self, path: str, data: bytes) -> bool:
        try:
            return self._get(path) == data
        except FileNotFoundError:
            return False

    def delete(self, path: str) -> None:
        bucket, key = split_s3_path(path)
        if not key:
            raise ValueError(f"cannot delete a bucket: {path!r}")
        self._client.delete_object(Bucket=bucket, Key=key)  # S3: missing keys are fine

    def delete_many(self, paths, max_workers: int = 8, progress=None) -> int:
        """Batched: one DeleteObjects request per 1000 keys of a bucket, `max_workers` requests
        at a time. A key S3 reports as not deleted is an error (raised after the others ran).
        `progress(n)` is called (on the calling thread) with the number done so far."""
        if not paths:
            return 0
        from concurrent.futures import ThreadPoolExecutor

        by_bucket: dict[str, list[str]] = {}
        for p in paths:
            bucket, key = split_s3_path(p)
            if not key:
                raise ValueError(f"cannot delete a bucket: {p!r}")
            by_bucket.setdefault(bucket, []).append(key)
        batches = [(b, keys[i:i + 1000]) for b, keys in by_bucket.items() for i in range(0, len(keys), 1000)]
        errors: list[str] = []

        def one(batch: tuple[str, list[str]]) -> int:
            bucket, keys = batch
            resp = self._client.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
            failed = resp.get("Errors") or []
            errors.extend(f"s3://{bucket}/{e.get('Key')}: {e.get('Code')} {e.get('Message')}" for e in failed)
            return len(keys) - len(failed)

        done = 0
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(batches)))) as ex:
            for n in ex.map(one, batches):
                done += n
                if progress is not None:
                    progress(done)
        if errors:
            raise OSError(f"S3 did not delete {len(errors)} object(s), e.g. {errors[0]}")
        return done

    def mkdirs(self, dir_path: str) -> None:
        split_s3_path(dir_path)  # validate only: S3 directories are implicit

    def presign(self, path: str, expires_seconds: int = 3600, method: str = "GET") -> str:
        """A pre-signed HTTPS (or endpoint-scheme) URL for a GET (or HEAD) of the object, valid for
        `expires_seconds`."""
        operations = {"GET": "get_object", "HEAD": "head_object"}
        if method not in operations:
            raise ValueError(f"pre-signed URLs are for GET or HEAD, not {method!r}")
        bucket, key = split_s3_path(path)
        return self._client.generate_presigned_url(
            operations[method], Params={"Bucket": bucket, "Key": key}, ExpiresIn=int(expires_seconds))

    def presign_get(self, path: str, expires_seconds: int = 3600) -> str:
        """A pre-signed GET URL for the object (`presign`)."""
        return self.presign(path, expires_seconds, "GET")

    # --- data files and paths ------------------------------------------------------------

    @property
    def filesystem(self) -> pyarrow.fs.FileSystem:
        with self._fs_lock:
            if self._fs is None:
                import pyarrow.fs

                s = self._settings
                kw: dict[str, Any] = {}
                if s["aws_access_key_id"] and s["aws_secret_access_key"]:
                    kw["access_key"] = s["aws_access_key_id"]
                    kw["secret_key"] = s["aws_secret_access_key"]
                    if s["aws_session_token"]:
                        kw["session_token"] = s["aws_session_token"]
                if s["region"]:
                    kw["region"] = s["region"]
                if s["endpoint_host"]:
                    kw["endpoint_override"] = s["endpoint_host"]
                    kw["scheme"] = s["scheme"]
                self._fs = pyarrow.fs.S3FileSystem(**kw)
            return self._fs

    def to_fs_path(self, path: str) -> str:
        bucket, key = split_s3_path(path)
        key = key.rstrip("/")
        return f"{bucket}/{key}" if key else bucket

    def join(self, *parts: str) -> str:
        if not parts:
            raise TypeError("join() needs at least one part")
        out = parts[0]
        for p in parts[1:]:
            out = out.rstrip("/") + "/" + p.lstrip("/")
        return out
