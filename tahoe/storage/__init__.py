"""The storage boundary: the one place a table's store is made from its location and options
(`store_for`), and the `path` of a log action: turned into a location the store can reach
(`resolve_data_path`), and written for a file (`encode_log_path`, `absolute_uri`).

    store, root = store_for("s3://bucket/tables/t", {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    store.list_from(store.join(root, "_delta_log", "00000000000000000000.json"))
    resolve_data_path(root, add.path)   # e.g. "s3://bucket/tables/t/p=a%3Ab/part-0.parquet"

Local paths and `file:` URIs get a `LocalLogStore`; `s3://` (`s3a://`), `az://` (`azure://`,
`adl://`, `abfs[s]://`) and `gs://` an `ObjectStoreLogStore` (obstore, imported only then); see
`tahoe.storage.options` for the URIs and option keys each takes.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from tahoe.storage.base import DirStatus, FileStatus, LogStore
from tahoe.storage.local import LocalLogStore, file_uri_to_path
from tahoe.storage.options import parse_location, scheme_of

if TYPE_CHECKING:  # pragma: no cover
    from tahoe.storage.object_store import ObjectStoreLogStore
    from tahoe.storage.s3 import S3LogStore

__all__ = ["DirStatus", "FileStatus", "LogStore", "LocalLogStore", "ObjectStoreLogStore", "S3LogStore",
           "store_for", "store_for_path", "log_store_for", "resolve_data_path", "encode_log_path", "absolute_uri"]

# Schemes that mark an action path as an absolute URI even without "//" after the colon.
_KNOWN_SCHEMES = frozenset({"file", "s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "az", "azure",
                            "wasbs", "adl", "hdfs", "dbfs", "http", "https", "oss", "r2"})


def __getattr__(name: str) -> Any:
    if name == "S3LogStore":
        from tahoe.storage.s3 import S3LogStore

        return S3LogStore
    if name == "ObjectStoreLogStore":
        from tahoe.storage.object_store import ObjectStoreLogStore

        return ObjectStoreLogStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_scheme = scheme_of


def store_for(table_uri: str, options: dict | None = None) -> tuple[LogStore, str]:
    """The store for `table_uri` and the table root normalized for that store.

    * a local path, `file:/x`, `file:///x` → (LocalLogStore, absolute OS path, no trailing "/")
    * `s3://bucket/prefix`, `s3a://...` → (S3LogStore, "s3://bucket/prefix")
    * `az://container/p`, `abfss://container@account.dfs.core.windows.net/p`, ... →
      (ObjectStoreLogStore("azure"), the URI without a trailing "/")
    * `gs://bucket/p` → (ObjectStoreLogStore("gcs"), "gs://bucket/p")

    Any other scheme → UnsupportedStorageError naming it. For an object store, options no store
    takes → StorageConfigError naming them (a local table keeps its options unread until a file
    of another store is opened through it, as delta-rs ignores them on local paths).
    """
    uri = os.fspath(table_uri)
    loc = parse_location(uri)
    if loc.kind == "local":
        path = file_uri_to_path(uri) if loc.scheme == "file" else uri
        if not path:
            raise ValueError(f"empty table path: {table_uri!r}")
        return LocalLogStore(options), os.path.abspath(path)
    return store_for_path(uri, options), loc.root


log_store_for = store_for   # the name the store factory had before object stores came


def store_for_path(path: str, options: dict | None = None) -> LogStore:
    """The store that reaches `path` (any file of any store), made from `options`."""
    loc = parse_location(path)
    if loc.kind == "local":
        return LocalLogStore(options)
    if loc.kind == "s3":
        from tahoe.storage.s3 import S3LogStore

        return S3LogStore(options)
    from tahoe.storage.object_store import ObjectStoreLogStore

    return ObjectStoreLogStore(loc.kind, options)


LogStore.make_store = staticmethod(store_for_path)


def _is_absolute_uri(path: str) -> bool:
    scheme = _scheme(path)
    return scheme is not None and (scheme in _KNOWN_SCHEMES or path[len(scheme) + 1:].startswith("//"))


def resolve_data_path(table_root: str, path_in_log: str) -> str:
    """Where the file named by an add/remove/cdc `path` lives (pure string work, no I/O).

    The log path is a URI (RFC 2396): percent-decode it. A relative path is joined to the table
    root; an absolute one (`file:/...`, `file:///...`, `s3://...`, `/abs`) is used as is after
    decoding, file URIs becoming OS paths. Decoding happens once: a partition directory that is
    Hive-escaped on disk (`p=a%3Ab`) appears as `p=a%253Ab` in the log and resolves to
    `.../p=a%3Ab/...`.
    """
    if _scheme(table_root) == "file":
        table_root = file_uri_to_path(table_root)
    root_is_uri = _scheme(table_root) is not None
    if _is_absolute_uri(path_in_log):
        scheme = _scheme(path_in_log)
        if scheme == "file":
            return file_uri_to_path(path_in_log)
        return unquote(path_in_log)

    decoded = unquote(path_in_log)
    if root_is_uri:
        m = re.match(r"^([A-Za-z][A-Za-z0-9+.\-]*://[^/]*)(.*)$", table_root)
        if decoded.startswith("/"):  # path-absolute reference: same bucket/authority
            return (m.group(1) if m else table_root.rstrip("/")) + decoded
        return table_root.rstrip("/") + "/" + decoded
    if decoded.startswith("/") or os.path.isabs(decoded):
        return decoded
    root = table_root.rstrip("/\\") or table_root[:1]
    return os.path.join(root, *decoded.split("/"))


# Characters a URI path keeps as they are (RFC 2396 pchar + "/"); everything else, "%" included,
# is percent-encoded — so a Hive-escaped directory `p=a%3Ab` is `p=a%253Ab` in the log, as
# delta-spark writes it.
_URI_PATH_SAFE = "/!$&'()*+,;=:@~-._"


def encode_log_path(relative_path: str) -> str:
    """The `add.path` of a file at `relative_path` (as on storage) under the table root."""
    return quote(relative_path, safe=_URI_PATH_SAFE)


def absolute_uri(table_root: str, path_in_log: str) -> str:
    """The `path` of an action of the table at `table_root` as an absolute URI another table's log
    can name it by (percent-encoded as log paths are). Local files are named `file:///abs/path`,
    the form every reader resolves (delta-rs takes Hadoop's `file:/abs/path` for a relative path
    and looks for `<table root>/file:/abs/path`): a source path already in the `file:/` or
    `file://localhost/` form is rewritten so."""
    if path_in_log.startswith("file:"):
        rest = path_in_log[len("file:"):]
        if rest.startswith("//"):
            authority, _, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                return path_in_log          # a file URI naming another host: as it is
            return "file:///" + tail
        return "file:///" + rest.lstrip("/")
    if "://" in path_in_log:
        return path_in_log
    if path_in_log.startswith("/"):
        return "file://" + path_in_log
    if "://" in table_root:
        scheme, rest = table_root.split("://", 1)
        bucket, _, key = rest.partition("/")
        base = f"{scheme}://{bucket}" + ("/" + encode_log_path(key.strip("/")) if key.strip("/") else "")
    else:
        base = "file://" + encode_log_path(table_root.replace("\\", "/").rstrip("/"))
    return f"{base}/{path_in_log}"
