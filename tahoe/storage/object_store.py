"""`ObjectStoreLogStore`: the log store and data-file I/O for S3 (and compatible endpoints), Azure Blob / ADLS
Gen2 and GCS, on obstore (the binding of the Rust `object_store` crate delta-rs uses: same keys, same
requests), the one maintained library with put-if-absent, ranged reads, bulk deletes and URL signing on all three.

  1. Paths are full URIs (`s3://`, `az://`, `abfss://`, `gs://`); one obstore store per bucket or container.
  2. A path of another store is read through a store of its own (`tahoe.storage.store_for`).
  3. Failures become the `StorageError` family (`_translate`); a missing object stays FileNotFoundError, a
     lost put-if-absent race FileExistsError. Secrets never reach a message (`options.redact`).
  4. Picklable: rebuilt from its kind and options (Spark tasks)."""

from __future__ import annotations

import errno
import io
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any

from ..errors import (BucketNotFoundError, CommitFailedException, StorageAccessDeniedError, StorageConfigError,
                      StorageCredentialsError, StorageError, StorageThrottledError, StorageUnreachableError)
from .base import FileStatus, LogStore
from .options import Location, StoreConfig, kind_of, parse_location, redact, store_config

__all__ = ["ObjectStoreLogStore"]

# A file of at most this many bytes is read in one request (parquet would ask for its footer,
# then its column chunks: two or three round trips).
WHOLE_READ_BYTES = 8 << 20
# A larger file up to this size is fetched whole, in parts of PART_BYTES at once (reads of data
# files mostly want every column); a larger one is read by ranges as the parquet reader asks.
PARALLEL_READ_BYTES = 512 << 20
PART_BYTES = 8 << 20
_KIND_NAMES = {"s3": "S3", "azure": "Azure Blob Storage", "gcs": "Google Cloud Storage"}
_MISSING_BUCKET = re.compile(r"NoSuchBucket|ContainerNotFound|The specified container does not exist|"
                             r"bucket does not exist|no bucket named|AccountNotFound|"
                             r"\"reason\":\s*\"notFound\".*bucket", re.I)
_BAD_CREDENTIALS = re.compile(r"SignatureDoesNotMatch|InvalidAccessKeyId|AuthenticationFailed|"
                              r"InvalidAuthenticationInfo|ExpiredToken|InvalidToken|NoAuthenticationInformation|"
                              r"AuthorizationFailure|Unauthenticated|\b401\b", re.I)
_UNREACHABLE = re.compile(r"error sending request|connection|connect|dns|timed out|timeout|"
                          r"broken pipe|reset by peer|unexpected eof|channel closed", re.I)
_THROTTLED = re.compile(r"\b503\b|SlowDown|\b429\b|ServerBusy|TooManyRequests|rateLimitExceeded|"
                        r"Please reduce your request rate", re.I)
_NO_CREDENTIALS = re.compile(r"Missing (?:SecretAccessKey|AccessKeyId|region)|token request|credential|"
                             r"Account must be specified|service account", re.I)


_RETRIED = re.compile(r"after [1-9]\d* retries")


def _message(e: BaseException) -> str:
    """obstore's message without its `Debug source:` dump."""
    return str(e).split("\n\nDebug source:", 1)[0].strip()


class ObjectStoreLogStore(LogStore):
    """Log store on an object store (see the module docstring). Thread-safe."""

    puts_may_land_late = True
    delete_concurrency = 8

    def __init__(self, kind: str, options: dict | None = None) -> None:
        if kind not in _KIND_NAMES:
            raise ValueError(f"unknown object store kind {kind!r}")
        self.kind = kind
        self.options = dict(options or {})
        self.cfg: StoreConfig = store_config(kind, self.options)
        self._stores: dict[tuple, Any] = {}
        self._lock = threading.Lock()
        self._credential_provider = None
        self._check_http(dict(self.cfg.config))   # a bad endpoint / allow_http is refused now

    # --- identity ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        ep = self.endpoint
        return f"{type(self).__name__}({self.kind!r}{', endpoint=' + repr(ep) if ep else ''})"

    def __reduce__(self):
        return (_rebuild, (type(self), self.kind, self.options))

    @property
    def endpoint(self) -> str | None:
        """The custom endpoint the options or environment name, if any."""
        c = self.cfg
        if self.kind == "s3":
            return c.get("aws_endpoint_url_s3", "aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint")
        if self.kind == "azure":
            ep = c.get("azure_storage_endpoint", "azure_endpoint", "endpoint")
            if ep is None and (c.get("azure_storage_use_emulator", "use_emulator", "azure_use_emulator") or "").lower() \
                    in ("true", "1", "yes"):
                import os

                ep = os.environ.get("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:10000")
            return ep
        return c.get("google_base_url", "base_url")

    def describe(self, loc: Location | None = None) -> str:
        """The store, for messages: e.g. `S3 bucket 'lake' at http://127.0.0.1:9000`."""
        what = _KIND_NAMES[self.kind]
        if loc is not None:
            if self.kind == "azure":
                acct = loc.account or self.cfg.get("azure_storage_account_name", "account_name") or "?"
                what += f" container '{loc.bucket}' (account '{acct}')"
            else:
                what += f" bucket '{loc.bucket}'"
        ep = self.endpoint
        if ep:
            what += f" at {redact(ep, self.cfg.secrets)}"
        return what

    def owns(self, path: str) -> bool:
        return kind_of(path) == self.kind

    # --- clients -------------------------------------------------------------------------------

    def _loc(self, path: str) -> Location:
        loc = parse_location(path)
        if loc.kind != self.kind:
            raise ValueError(f"{path!r} is not a {_KIND_NAMES[self.kind]} path")
        return loc

    def _store(self, loc: Location) -> Any:
        key = loc.store_key
        st = self._stores.get(key)
        if st is not None:
            return st
        with self._lock:
            st = self._stores.get(key)
            if st is None:
                st = self._make(loc)
                self._stores[key] = st
            return st

    def _make(self, loc: Location) -> Any:
        from obstore.store import AzureStore, GCSStore, S3Store

        config = dict(self.cfg.config)
        self._check_http(config)
        try:
            if self.kind == "s3":
                kw: dict[str, Any] = {}
                if self.cfg.profile:
                    kw["credential_provider"] = self._profile_provider()
                return S3Store(loc.bucket, config=config, retry_config=self.cfg.retry, **kw)
            if self.kind == "azure":
                if loc.account and not any(k in config for k in ("azure_storage_account_name", "account_name",
                                                                 "azure_account_name")):
                    config["account_name"] = loc.account
                return AzureStore(loc.bucket, config=config, retry_config=self.cfg.retry)
            return GCSStore(loc.bucket, config=config, retry_config=self.cfg.retry)
        except Exception as e:  # noqa: BLE001 - translated
            raise self._translate(e, "configure", None, loc) from None

    _ENDPOINT_KEYS = {"s3": ("aws_endpoint_url_s3", "aws_endpoint_url", "aws_endpoint", "endpoint_url", "endpoint"),
                      "azure": ("azure_storage_endpoint", "azure_endpoint", "endpoint"),
                      "gcs": ("google_base_url", "base_url")}

    def _check_http(self, config: dict) -> None:
        """An endpoint given as `host:port` gets a scheme: http when `allow_http` is true, else
        https. An `http://` endpoint is allowed unless `allow_http` is explicitly false (as tahoe
        always did; object_store itself wants `allow_http=true` as well)."""
        import os

        names = ("aws_allow_http", "allow_http") if self.kind == "s3" else \
            ("azure_allow_http", "allow_http") if self.kind == "azure" else ("google_allow_http", "allow_http")
        given = next((config[n] for n in names if n in config), None)
        if given is None:
            given = os.environ.get(names[0].upper()) or None
        allow = None if given is None else str(given).strip().lower() in ("true", "1", "yes", "on")
        for k in self._ENDPOINT_KEYS[self.kind]:
            v = config.get(k)
            if v is None and k.upper() in os.environ and self.kind == "s3":
                v = os.environ[k.upper()]
                if v and "://" not in v:
                    config[k] = v
            if v and "://" not in v:
                config[k] = ("http://" if allow else "https://") + v.strip()
        ep = self.endpoint
        if ep and "://" not in ep:
            ep = ("http://" if allow else "https://") + ep
        if not ep or not ep.lower().startswith("http://"):
            return
        if allow is None:
            config["allow_http"] = "true"
        elif not allow:
            raise StorageConfigError(f"the endpoint {ep} uses http but allow_http is false",
                                     store=_KIND_NAMES[self.kind])

    def _profile_provider(self):
        try:
            import boto3
            from obstore.auth.boto3 import Boto3CredentialProvider
        except ImportError as e:  # pragma: no cover - boto3 is a dependency
            raise StorageConfigError(f"AWS_PROFILE needs boto3: {e}") from None
        if self._credential_provider is None:
            try:
                self._credential_provider = Boto3CredentialProvider(boto3.Session(profile_name=self.cfg.profile))
            except Exception as e:  # noqa: BLE001
                raise StorageCredentialsError(f"AWS profile {self.cfg.profile!r}: {e}", store="S3") from None
        return self._credential_provider

    # --- errors --------------------------------------------------------------------------------

    def _translate(self, e: BaseException, op: str, path: str | None, loc: Location | None = None) -> BaseException:
        """`e` (from obstore) as the exception the LogStore contract names: FileNotFoundError,
        FileExistsError, or a StorageError naming the store and the cause."""
        from obstore import exceptions as ox

        if isinstance(e, StorageError):
            return e
        msg = redact(_message(e), self.cfg.secrets)
        where = self.describe(loc)
        what = f"{where}: cannot {op}{' ' + path if path else ''}"
        if isinstance(e, (ox.AlreadyExistsError, ox.PreconditionError)):
            if self.kind == "s3" and "ConditionalRequestConflict" in msg:
                # S3: another conditional write of the key is in flight — not a loss (yet)
                return StorageError(f"{what}: 409 ConditionalRequestConflict ({msg})", store=where, path=path)
            return FileExistsError(errno.EEXIST, "file already exists", path)
        # a put never fails for a missing key: a 404 to a write is the bucket's
        if (_MISSING_BUCKET.search(msg) and isinstance(e, (FileNotFoundError, ox.GenericError, ox.PermissionDeniedError))) \
                or (op == "write" and isinstance(e, FileNotFoundError)):
            kind = "container" if self.kind == "azure" else "bucket"
            return BucketNotFoundError(f"{where}: the {kind} does not exist ({msg})", store=where, path=path)
        if isinstance(e, FileNotFoundError):
            return FileNotFoundError(errno.ENOENT, "no such file", path)
        if isinstance(e, ox.UnknownConfigurationKeyError):
            return StorageConfigError(f"{where}: {msg}", store=where, path=path)
        if isinstance(e, ox.UnauthenticatedError) or (isinstance(e, ox.PermissionDeniedError)
                                                       and _BAD_CREDENTIALS.search(msg)):
            return StorageCredentialsError(f"{what}: the store refused the credentials ({msg})", store=where, path=path)
        if isinstance(e, ox.PermissionDeniedError):
            return StorageAccessDeniedError(f"{what}: access denied (403) ({msg})", store=where, path=path)
        if _THROTTLED.search(msg) and "status code" in msg:
            return StorageThrottledError(f"{what}: the store kept throttling the request after retries ({msg})",
                                         store=where, path=path)
        if _NO_CREDENTIALS.search(msg):
            return StorageCredentialsError(
                f"{what}: no usable credentials — give them in storage_options or the environment ({msg})",
                store=where, path=path)
        if "builder error" in msg.lower():
            return StorageConfigError(f"{what}: the client cannot make the request — is the endpoint a URL, "
                                      f"and allow_http set for an http:// endpoint? ({msg})", store=where, path=path)
        if isinstance(e, ox.GenericError) and _UNREACHABLE.search(msg.replace("retry_timeout", "")) \
                and "status code" not in msg:
            return StorageUnreachableError(f"{what}: the store cannot be reached ({msg})", store=where, path=path)
        if isinstance(e, ox.BaseError):
            return StorageError(f"{what}: {msg}", store=where, path=path)
        if isinstance(e, (OSError, ValueError)):
            return e
        return StorageError(f"{what}: {type(e).__name__}: {msg}", store=where, path=path)

    def _call(self, op: str, path: str | None, loc: Location, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - translated
            err = self._translate(e, op, path, loc)
            if isinstance(err, StorageError):
                # the client sent the request more than once: an earlier attempt may have landed
                err.retried = bool(_RETRIED.search(_message(e)))
            raise err from None
        except BaseException as e:
            if type(e).__name__ == "PanicException":   # the Rust client gave up on a bad request
                raise StorageConfigError(f"{self.describe(loc)}: cannot {op} {path or ''}: the client failed on "
                                         f"the request ({redact(_message(e), self.cfg.secrets)}) — check the "
                                         f"endpoint and options", store=self.describe(loc), path=path) from None
            raise

    # --- listing -------------------------------------------------------------------------------

    def _list(self, loc: Location, prefix: str, offset: str | None = None) -> list[dict]:
        import obstore

        st = self._store(loc)

        def run():
            out: list[dict] = []
            stream = obstore.list(st, prefix or None, offset=offset, chunk_size=1000) if offset else \
                obstore.list(st, prefix or None, chunk_size=1000)
            for chunk in stream:
                out.extend(chunk)
            return out
        return self._call("list", loc.prefix + "/" + prefix, loc, run)

    def _dir_missing(self, loc: Location, prefix: str) -> bool:
        import obstore

        st = self._store(loc)

        def run():
            for chunk in obstore.list(st, prefix or None, chunk_size=1):
                if chunk:
                    return False
            return True
        return self._call("list", loc.prefix + "/" + prefix, loc, run)

    def _status(self, loc: Location, meta: dict) -> FileStatus:
        return FileStatus(f"{loc.prefix}/{meta['path']}", int(meta["size"]),
                          int(meta["last_modified"].timestamp() * 1000))

    def list_from(self, path: str) -> Iterator[FileStatus]:
        loc = self._loc(path)
        key = loc.key
        cut = key.rfind("/") + 1
        prefix, start = key[:cut], key[cut:]
        # `offset` lists keys after it (exclusive): start just below `start`
        offset = prefix + start[:-1] if start else None
        metas = self._list(loc, prefix, offset)
        if not metas and prefix and self._dir_missing(loc, prefix):
            raise FileNotFoundError(errno.ENOENT, "no such directory", f"{loc.prefix}/{prefix}")
        out = []
        for m in metas:
            name = m["path"][len(prefix):]
            if not name or "/" in name or name.startswith(".") or name < start:
                continue
            out.append(self._status(loc, m))
        out.sort(key=lambda f: f.path)
        return iter(out)

    def walk(self, dir_path: str) -> Iterator[FileStatus]:
        loc = self._loc(dir_path)
        prefix = loc.key.rstrip("/") + "/" if loc.key.strip("/") else ""
        metas = self._list(loc, prefix)
        if not metas and prefix:
            raise FileNotFoundError(errno.ENOENT, "no such directory", f"{loc.prefix}/{prefix}")
        out = [self._status(loc, m) for m in metas if not m["path"].endswith("/")]
        out.sort(key=lambda f: f.path)
        return iter(out)

    # --- reading -------------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        other = self._foreign(path)
        if other is not None:
            return other.read(path)
        import obstore

        loc = self._loc(path)
        st = self._store(loc)
        return self._call("read", path, loc, lambda: bytes(obstore.get(st, loc.key).bytes()))

    def read_buffer(self, path: str):
        """The whole file as a pyarrow Buffer (no copy of obstore's bytes)."""
        import obstore
        import pyarrow as pa

        loc = self._loc(path)
        st = self._store(loc)
        return self._call("read", path, loc, lambda: pa.py_buffer(obstore.get(st, loc.key).bytes()))

    def read_range(self, path: str, start: int, length: int) -> bytes:
        other = self._foreign(path)
        if other is not None:
            return other.read_range(path, start, length)
        import obstore

        if start < 0 or length < 0:
            raise ValueError(f"invalid range start={start} length={length}")
        loc = self._loc(path)
        st = self._store(loc)
        size = self._head(loc, path)["size"] if length == 0 or start > 0 else None
        if length == 0:
            return b""
        if size is not None:
            if start >= size:
                return b""
            length = min(length, size - start)
        try:
            return bytes(obstore.get_range(st, loc.key, start=start, length=length))
        except Exception as e:  # noqa: BLE001
            err = self._translate(e, "read", path, loc)
            if isinstance(err, StorageError) and "range" in str(err).lower() and size is None:
                size = self._head(loc, path)["size"]
                if start >= size:
                    return b""
                return bytes(obstore.get_range(st, loc.key, start=start, length=min(length, size - start)))
            raise err from None

    def _head(self, loc: Location, path: str) -> dict:
        import obstore

        st = self._store(loc)
        return self._call("read", path, loc, lambda: obstore.head(st, loc.key))

    def exists(self, path: str) -> bool:
        """True for an object, or for a "directory" (a prefix with objects under it)."""
        other = self._foreign(path)
        if other is not None:
            return other.exists(path)
        loc = self._loc(path)
        if loc.key.strip("/"):
            try:
                self._head(loc, path)
                return True
            except FileNotFoundError:
                pass
            return not self._dir_missing(loc, loc.key.rstrip("/") + "/")
        try:
            self._dir_missing(loc, "")   # a listing of the bucket: it exists when that works
            return True
        except BucketNotFoundError:
            return False

    def status(self, path: str) -> FileStatus | None:
        other = self._foreign(path)
        if other is not None:
            return other.status(path)
        loc = self._loc(path)
        if not loc.key or loc.key.endswith("/"):
            return None
        try:
            meta = self._head(loc, path)
        except FileNotFoundError:
            return None
        return FileStatus(path, int(meta["size"]), int(meta["last_modified"].timestamp() * 1000))

    def open_input_file(self, path: str, size: int | None = None):
        other = self._foreign(path)
        if other is not None:
            return other.open_input_file(path, size)
        import pyarrow as pa

        loc = self._loc(path)
        if size is None:
            size = int(self._head(loc, path)["size"])
        if size <= WHOLE_READ_BYTES:
            return pa.BufferReader(self.read_buffer(path))
        if size <= PARALLEL_READ_BYTES:
            return pa.BufferReader(self._read_parallel(loc, path, size))
        return pa.PythonFile(_RangeFile(self, loc, path, size), mode="r")

    def _read_parallel(self, loc: Location, path: str, size: int):
        """The whole object in parts of PART_BYTES fetched at once (obstore's `get_ranges`),
        into one buffer."""
        import obstore
        import pyarrow as pa

        st = self._store(loc)
        starts = list(range(0, size, PART_BYTES))
        ends = [min(s + PART_BYTES, size) for s in starts]
        parts = self._call("read", path, loc, lambda: obstore.get_ranges(st, loc.key, starts=starts, ends=ends))
        out = bytearray(size)
        view = memoryview(out)
        for s, p in zip(starts, parts):
            b = memoryview(p)
            view[s:s + len(b)] = b
        return pa.py_buffer(out)

    # --- writing -------------------------------------------------------------------------------

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        import obstore

        loc = self._loc(path)
        if not loc.key or loc.key.endswith("/"):
            raise ValueError(f"cannot write to a directory path: {path!r}")
        st = self._store(loc)
        if overwrite:
            self._call("write", path, loc, lambda: obstore.put(st, loc.key, data, mode="overwrite"))
            return
        retries = self.cfg.conflict_retries
        for attempt in range(retries + 1):
            try:
                self._call("write", path, loc, lambda: obstore.put(st, loc.key, data, mode="create"))
                return
            except (FileExistsError, StorageError) as err:
                if isinstance(err, FileExistsError):
                    # The client retries a put whose answer was lost (5xx, a dropped connection):
                    # the object that blocks us may be our own first attempt — same bytes: ours.
                    if self._holds(loc, path, data):
                        return
                    raise err from None
                if isinstance(err, StorageError) and "ConditionalRequestConflict" in str(err):
                    # S3: a concurrent conditional write of the same key is in flight
                    if attempt < retries:
                        time.sleep(0.05 * (2 ** attempt) * (0.5 + random.random()))
                        continue
                    raise CommitFailedException(
                        f"conditional write of {path} kept conflicting with concurrent writes "
                        f"(409 ConditionalRequestConflict) after {attempt + 1} attempts") from None
                raise err from None

    def _holds(self, loc: Location, path: str, data: bytes) -> bool:
        try:
            return self.read(path) == bytes(data)
        except FileNotFoundError:
            return False

    def write_data(self, path: str, data) -> None:
        """A data file (parquet, a deletion vector): one put — multipart when large — that appears
        whole or not at all."""
        import obstore

        loc = self._loc(path)
        st = self._store(loc)
        view = data if isinstance(data, bytes) else memoryview(data).cast("B")
        big = len(view) > 64 << 20
        self._call("write", path, loc, lambda: obstore.put(st, loc.key, view, mode="overwrite",
                                                            use_multipart=big, chunk_size=16 << 20,
                                                            max_concurrency=8))

    def open_output_stream(self, path: str):
        """A stream whose bytes become the file at `path` when it is closed (nothing is visible
        before; on an error inside `with`, nothing is written)."""
        return _PutOnClose(self, path)

    def delete(self, path: str) -> None:
        import obstore

        loc = self._loc(path)
        if not loc.key:
            raise ValueError(f"cannot delete a bucket: {path!r}")
        st = self._store(loc)
        try:
            self._call("delete", path, loc, lambda: obstore.delete(st, loc.key))
        except FileNotFoundError:
            pass

    def delete_many(self, paths: Sequence[str], max_workers: int | None = None,
                    progress: Callable[[int], None] | None = None) -> int:
        """Bulk deletes (S3 DeleteObjects of up to 1000 keys; the other stores one request a key,
        several at once), missing files being fine; `progress(n)` after each batch."""
        if not paths:
            return 0
        import obstore

        by_store: dict[tuple, tuple[Location, list[str]]] = {}
        for p in paths:
            loc = self._loc(p)
            if not loc.key:
                raise ValueError(f"cannot delete a bucket: {p!r}")
            by_store.setdefault(loc.store_key, (loc, []))[1].append(loc.key)
        done = 0
        if self.kind != "s3":
            return super().delete_many(paths, max_workers or 16, progress)
        for loc, keys in by_store.values():
            st = self._store(loc)
            for i in range(0, len(keys), 1000):
                batch = keys[i:i + 1000]
                try:
                    self._call("delete", f"{len(batch)} objects under {loc.prefix}", loc,
                               lambda: obstore.delete(st, batch))
                except FileNotFoundError:
                    pass
                done += len(batch)
                if progress is not None:
                    progress(done)
        return done

    def mkdirs(self, dir_path: str) -> None:
        self._loc(dir_path)   # validate only: directories are implicit

    def copy(self, src: str, dst: str) -> None:
        """Copy a file: server-side within one bucket / container, else read and put."""
        import obstore

        if self.owns(src):
            s, d = self._loc(src), self._loc(dst)
            if s.store_key == d.store_key:
                st = self._store(s)
                self._call("copy", src, s, lambda: obstore.copy(st, s.key, d.key, overwrite=True))
                return
        src_store = self._foreign(src) or self
        self.write_data(dst, src_store.read_buffer(src))

    # --- signing -------------------------------------------------------------------------------

    def sign(self, path: str, method: str = "GET", expires: int | float | timedelta = 3600) -> str:
        """A URL that lets its holder `method` (GET, HEAD, PUT) the object at `path` until it
        expires, without credentials: S3 pre-signed (SigV4), Azure SAS, GCS V4 signed."""
        import obstore

        method = method.upper()
        if method not in ("GET", "HEAD", "PUT", "DELETE"):
            raise ValueError(f"cannot sign a {method!r} request")
        loc = self._loc(path)
        ttl = expires if isinstance(expires, timedelta) else timedelta(seconds=float(expires))
        if self.kind == "azure" and method in ("GET", "HEAD") and self._azure_key() is not None:
            return self._call("sign a URL for", path, loc, lambda: self._azure_sas_url(loc, ttl))
        if self.kind == "gcs" and self._gcs_signer() is not None:
            return self._call("sign a URL for", path, loc, lambda: self._gcs_signed_url(loc, method, ttl))
        st = self._store(loc)
        return self._call("sign a URL for", path, loc, lambda: obstore.sign(st, method, loc.key, ttl))

    # Azure and GCS URLs are signed with the clouds' own libraries where the key is at hand:
    # object_store signs a name that needs escaping (a space, `%`, non-ASCII: partition values
    # hold them) unescaped, and Azurite and GCS then refuse the URL.

    def _azure_key(self) -> str | None:
        return self.cfg.get("azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
                            "access_key", "account_key", "master_key")

    def azure_account(self, loc: Location | None = None) -> str:
        acct = (loc.account if loc is not None else None) or self.cfg.get(
            "azure_storage_account_name", "account_name", "azure_account_name")
        if not acct:
            raise StorageConfigError("Azure: no storage account named (AZURE_STORAGE_ACCOUNT_NAME, or an "
                                     "abfss://container@account.dfs.core.windows.net URI)", store="Azure Blob Storage")
        return acct

    def azure_blob_url(self, container: str, key: str = "", loc: Location | None = None) -> str:
        """The Blob service URL of `container`/`key` (the endpoint option's — an emulator's, whose
        URL holds the account — else the account's public one), the name percent-encoded."""
        from urllib.parse import quote

        ep = self.endpoint
        base = ep.rstrip("/") if ep else f"https://{self.azure_account(loc)}.blob.core.windows.net"
        return f"{base}/{container}" + (f"/{quote(key, safe='/~')}" if key else "")

    def _azure_sas_url(self, loc: Location, ttl: timedelta) -> str:
        """A read-only service SAS of one blob (azure-storage-blob's `generate_blob_sas`)."""
        from datetime import datetime, timezone

        from azure.storage.blob import BlobSasPermissions, generate_blob_sas

        sas = generate_blob_sas(self.azure_account(loc), loc.bucket, loc.key, account_key=self._azure_key(),
                                permission=BlobSasPermissions(read=True),
                                expiry=datetime.now(timezone.utc) + ttl)
        return f"{self.azure_blob_url(loc.bucket, loc.key, loc)}?{sas}"

    def _gcs_signer(self):
        """(service-account credentials, the API endpoint) when the options or the environment
        give a service-account key, else None (object_store then signs through IAM signBlob)."""
        cached = self.__dict__.get("_gcs_signing", False)
        if cached is not False:
            return cached
        import json
        import os

        info = None
        key = self.cfg.get("google_service_account_key", "service_account_key")
        path = self.cfg.get("google_service_account", "google_service_account_path", "service_account",
                            "service_account_path", "google_application_credentials")
        path = path or os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        try:
            if key:
                info = json.loads(key)
            elif path:
                with open(path) as f:
                    info = json.load(f)
        except (OSError, ValueError):
            info = None
        out = None
        if isinstance(info, dict) and info.get("type") == "service_account" and info.get("private_key"):
            from google.oauth2 import service_account

            info = dict(info)
            info.setdefault("token_uri", "https://oauth2.googleapis.com/token")
            endpoint = self.cfg.get("google_base_url", "base_url") or info.get("gcs_base_url") or \
                "https://storage.googleapis.com"
            out = (service_account.Credentials.from_service_account_info(info), endpoint.rstrip("/"))
        self.__dict__["_gcs_signing"] = out
        return out

    def _gcs_signed_url(self, loc: Location, method: str, ttl: timedelta) -> str:
        """A V4 signed URL (google-cloud-storage's `Blob.generate_signed_url`, signed locally with
        the service account's key)."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        creds, endpoint = self._gcs_signer()
        blob = storage.Client(project="-", credentials=AnonymousCredentials()).bucket(loc.bucket).blob(loc.key)
        return blob.generate_signed_url(version="v4", expiration=ttl, method=method, credentials=creds,
                                        api_access_endpoint=endpoint)

    # --- paths ---------------------------------------------------------------------------------

    def join(self, *parts: str) -> str:
        if not parts:
            raise TypeError("join() needs at least one part")
        out = parts[0]
        for p in parts[1:]:
            out = out.rstrip("/") + "/" + p.lstrip("/")
        return out


def _rebuild(cls, kind: str, options: dict):
    obj = cls.__new__(cls)
    ObjectStoreLogStore.__init__(obj, kind, options)
    return obj


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of one object through ranged GETs (its size known), for
    pyarrow (`pa.PythonFile`)."""

    def __init__(self, store: ObjectStoreLogStore, loc: Location, path: str, size: int):
        super().__init__()
        self._store, self._loc, self._path, self._size = store, loc, path, size
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def size(self) -> int:
        return self._size

    def read(self, n: int = -1) -> bytes:
        import obstore

        if n is None or n < 0:
            n = self._size - self._pos
        n = min(n, self._size - self._pos)
        if n <= 0:
            return b""
        st = self._store._store(self._loc)
        start = self._pos
        data = self._store._call("read", self._path, self._loc,
                                 lambda: obstore.get_range(st, self._loc.key, start=start, length=n))
        self._pos += len(data)
        return bytes(data)

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


class _PutOnClose(io.RawIOBase):
    """Bytes written are kept in memory and put as the file on close; an exception inside the
    `with` block writes nothing."""

    def __init__(self, store: ObjectStoreLogStore, path: str):
        super().__init__()
        self._store, self._path = store, path
        self._buf = io.BytesIO()
        self._failed = False

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        return self._buf.write(b)

    def __exit__(self, exc_type, exc, tb):
        self._failed = exc_type is not None
        return super().__exit__(exc_type, exc, tb)

    def close(self) -> None:
        if self.closed:
            return
        try:
            if not self._failed:
                self._store.write_data(self._path, self._buf.getvalue())
        finally:
            self._buf = io.BytesIO()
            super().close()
