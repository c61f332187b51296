"""The Arrow shapes of file actions and the keys that identify logical files (spec "Action
Reconciliation"), plus parsing one NDJSON commit into action objects.

Shared by the row-wise replay (`tahoe.log.replay`) and the vectorised JSON-commit reader
(`tahoe.log.json_commits`): both key files by (canonical path, deletionVector unique id) and both
produce add/remove tables of `ADD_SCHEMA` / `REMOVE_SCHEMA`.
"""

from __future__ import annotations

import re
from urllib.parse import quote

import numpy as np
import orjson
import pyarrow as pa

from ..errors import CorruptLogError
from ..storage.base import LogStore
from . import compute as pc

__all__ = [
    "ADD_SCHEMA", "REMOVE_SCHEMA", "DV_TYPE", "STRING_MAP", "file_keys", "canonical_key",
    "read_commit", "parse_commit", "root_uri", "dv_unique_id", "is_absolute_path",
]

STRING_MAP = pa.map_(pa.string(), pa.string())
DV_TYPE = pa.struct([
    ("storageType", pa.string()),
    ("pathOrInlineDv", pa.string()),
    ("offset", pa.int32()),
    ("sizeInBytes", pa.int32()),
    ("cardinality", pa.int64()),
    ("maxRowIndex", pa.int64()),
])
ADD_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("stats", pa.string()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("clusteringProvider", pa.string()),
])
REMOVE_SCHEMA = pa.schema([
    ("path", pa.string()),
    ("deletionTimestamp", pa.int64()),
    ("dataChange", pa.bool_()),
    ("extendedFileMetadata", pa.bool_()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("stats", pa.string()),
])

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def root_uri(table_root: str) -> str:
    """The table root as the URI prefix that relative action paths are keyed under."""
    if _SCHEME.match(table_root) and not table_root.startswith("file:"):
        return table_root.rstrip("/")
    root = table_root[5:] if table_root.startswith("file:") else table_root
    root = "/" + root.lstrip("/")
    return quote(root.rstrip("/"), safe="/~@!$&'()*+,;=:")


def is_absolute_path(path: str) -> bool:
    """A log path that names its file on its own (a URI with a scheme, or an absolute local path)."""
    return path.startswith("/") or bool(_SCHEME.match(path))


def canonical_key(path: str, dv_unique_id: str | None, root_uri: str) -> str:
    """The key of a logical file: its path relative to the table root when it lies under it (a
    relative path as written; an absolute one under the root with the root's prefix taken off),
    else its absolute path (`file:` URIs as plain absolute paths); plus "\\x00" and the deletion
    vector's unique id when it has one. Relative keys make the common case — every path
    relative — cost nothing to key (`file_keys`)."""
    if path.startswith("file:"):
        path = "/" + path[5:].lstrip("/")
    if path.startswith("/") or _SCHEME.match(path):
        prefix = root_uri + "/"
        if path.startswith(prefix):
            rest = path[len(prefix):]
            if not rest.startswith("/") and not _SCHEME.match(rest):
                path = rest
    return path if dv_unique_id is None else path + "\x00" + dv_unique_id


def dv_unique_id(dv: dict | None) -> str | None:
    if not dv:
        return None
    uid = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}"
    if dv.get("offset") is not None:
        uid += f"@{dv['offset']}"
    return uid


def _all_relative(paths: pa.Array) -> bool:
    """True when no path starts with "/" and none holds a ":" (so none has a scheme) — read
    off the string buffers directly, the common case of a log of relative paths. Null slots are
    looked at too (a checkpoint's path column is null on its other rows): they are almost always
    empty, and when one is not the answer can only turn False, which is always safe."""
    if not (pa.types.is_string(paths.type) or pa.types.is_large_string(paths.type)):
        return False
    n = len(paths)
    if n == 0:
        return True
    _, off_buf, data_buf = paths.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int64 if pa.types.is_large_string(paths.type) else np.int32,
                            count=paths.offset + n + 1)[paths.offset:]
    lo, hi = int(offsets[0]), int(offsets[-1])
    if hi <= lo:
        return True
    data = np.frombuffer(data_buf, dtype=np.uint8)
    # compared a MB at a time into one mask (one mask as long as the buffer would be faulted in
    # afresh: slower than the compare itself; a regex search of the buffer: 6x slower)
    mask = np.empty(min(hi - lo, 1 << 20), dtype=bool)
    for a in range(lo, hi, len(mask)):
        part = data[a:min(a + len(mask), hi)]
        if np.equal(part, ord(":"), out=mask[:len(part)]).any():
            return False
    starts = offsets[:-1][offsets[1:] > offsets[:-1]]
    return not (data[starts] == ord("/")).any()


def file_keys(paths: pa.Array, dvs: pa.Array | None, root_uri: str) -> pa.Array:
    """Vectorised `canonical_key` over a path column and a deletionVector struct column."""
    from .arrow_build import scalar

    paths = paths.combine_chunks() if isinstance(paths, pa.ChunkedArray) else paths
    if _all_relative(paths):
        absolute = None
    else:
        absolute = pc.starts_with(paths, "/")
    if absolute is not None and pc.any(pc.match_substring(paths, ":")).as_py():   # a scheme: file:, s3:, ...
        if pc.any(pc.starts_with(paths, "file:")).as_py():
            paths = pc.replace_substring_regex(paths, r"^file:/*", "/")
        absolute = pc.or_(pc.starts_with(paths, "/"), pc.match_substring_regex(paths, r"^[A-Za-z][A-Za-z0-9+.\-]*:"))
    if absolute is not None and pc.any(absolute).as_py():
        prefix = root_uri + "/"
        rest = pc.utf8_slice_codeunits(paths, len(prefix))
        under = pc.and_(pc.starts_with(paths, prefix),
                        pc.invert(pc.or_(pc.starts_with(rest, "/"),
                                         pc.match_substring_regex(rest, r"^[A-Za-z][A-Za-z0-9+.\-]*:"))))
        if pc.any(under).as_py():
            paths = pc.if_else(under, rest, paths)
    if dvs is None:
        return paths
    dvs = dvs.combine_chunks() if isinstance(dvs, pa.ChunkedArray) else dvs
    if dvs.null_count == len(dvs):
        return paths
    st = pc.struct_field(dvs, "storageType")
    pid = pc.struct_field(dvs, "pathOrInlineDv")
    off = pc.struct_field(dvs, "offset")
    empty = scalar("")
    off_s = pc.if_else(pc.is_valid(off), pc.binary_join_element_wise(scalar("@"), pc.cast(off, pa.string()), empty), empty)
    uid = pc.binary_join_element_wise(pc.fill_null(st, empty), pc.fill_null(pid, empty), off_s, empty)
    with_dv = pc.binary_join_element_wise(paths, uid, scalar("\x00"))
    return pc.if_else(pc.is_valid(dvs), with_dv, paths)


def read_commit(store: LogStore, path: str) -> list[dict]:
    """A commit (or JSON checkpoint) file as a list of action objects; malformed JSON raises
    CorruptLogError naming the file and line."""
    return parse_commit(store.read(path), path)


def parse_commit(data: bytes, path: str) -> list[dict]:
    """`read_commit` of a file's bytes."""
    out = []
    for lineno, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise CorruptLogError(f"{path}: line {lineno} is not valid JSON: {e}") from None
        if not isinstance(obj, dict):
            raise CorruptLogError(f"{path}: line {lineno} is not a JSON object")
        out.append(obj)
    return out
