"""The storage boundary: picking the log store for a table URI, and turning the `path` of a
log action into a location the store (and its pyarrow filesystem) can reach.

    store, root = log_store_for("s3://bucket/tables/t", {"region": "eu-west-1"})
    store.list_from(store.join(root, "_delta_log", "00000000000000000000.json"))
    resolve_data_path(root, add.path)   # e.g. "s3://bucket/tables/t/p=a%3Ab/part-0.parquet"

`S3LogStore` (and boto3) is imported only when an S3 table is opened.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from tahoe.storage.base import DirStatus, FileStatus, LogStore
from tahoe.storage.local import LocalLogStore, file_uri_to_path

if TYPE_CHECKING:  # pragma: no cover
    from tahoe.storage.s3 import S3LogStore

__all__ = ["DirStatus", "FileStatus", "LogStore", "LocalLogStore", "S3LogStore", "log_store_for",
           "resolve_data_path"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_S3_SCHEMES = ("s3", "s3a", "s3n")
# Schemes that mark an action path as an absolute URI even without "//" after the colon.
_KNOWN_SCHEMES = frozenset({"file", "s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb",
                            "wasbs", "adl", "hdfs", "dbfs", "http", "https", "oss", "r2"})


def __getattr__(name: str) -> Any:
    if name == "S3LogStore":
        from tahoe.storage.s3 import S3LogStore

        return S3LogStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _scheme(uri: str) -> str | None:
    """The URI scheme, lower-cased; None for a plain path (a one-letter "scheme" is taken for
    a Windows drive letter)."""
    m = _SCHEME.match(uri)
    if not m or len(m.group(1)) == 1:
        return None
    return m.group(1).lower()


def log_store_for(table_uri: str, options: dict | None = None) -> tuple[LogStore, str]:
    """The log store for `table_uri` and the table root normalized for that store.

    * a local path, `file:/x`, `file:///x` → (LocalLogStore, absolute OS path, no trailing "/")
    * `s3://bucket/prefix`, `s3a://...` → (S3LogStore(options), "s3://bucket/prefix")

    Any other scheme → ValueError naming it.
    """
    uri = os.fspath(table_uri)
    scheme = _scheme(uri)
    if scheme is None or scheme == "file":
        path = file_uri_to_path(uri) if scheme == "file" else uri
        if not path:
            raise ValueError(f"empty table path: {table_uri!r}")
        return LocalLogStore(), os.path.abspath(path)
    if scheme in _S3_SCHEMES:
        from tahoe.storage.s3 import S3LogStore, split_s3_path

        bucket, key = split_s3_path(uri)
        key = key.strip("/")
        root = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
        return S3LogStore(options), root
    raise ValueError(f"unsupported URI scheme {scheme!r} in table location {table_uri!r} "
                     f"(supported: local paths, file:, s3:, s3a:)")


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
