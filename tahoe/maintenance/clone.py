"""CLONE: a new table that starts as a copy of a version of another (delta-spark's CloneTableCommand:
`DeltaTable.clone`, `cloneAtVersion`, `cloneAtTimestamp`); `clone_parquet` is the shallow CLONE of a parquet
directory (read as CONVERT TO DELTA reads it).

  1. ONE commit (`CLONE`, parameters `source`, `sourceVersion`): the source's protocol and metaData
     (`properties` overriding), one add per file; delta-spark's metrics.
  2. Shallow: adds point at the source's files by absolute URI (DVs too); deep: files copied in parallel.
  3. Row ids, in-commit-timestamp enablement and checkpoint protection are not carried over.
  4. Refused, nothing written: an existing Delta target unless `replace` (TableAlreadyExistsError; the
     column mapping mode must not change), a target directory holding other files, a version the log
     cannot rebuild. Files copied for a commit that surely did not land are deleted."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from ..errors import InvalidOptionError, InvalidTableOperationError, TableAlreadyExistsError, TableNotFoundError
from ..log import DeltaLog, Snapshot
from ..log.replay import canonical_key, root_uri
from ..protocol import column_mapping
from ..protocol.actions import AddFile, Metadata
from ..protocol.deletion_vectors import DeletionVectorDescriptor, new_dv_path_component
from ..protocol.properties import normalize_properties
from ..protocol.table_features import merge_protocols, reader_features_of, writer_features_of
from ..protocol.timestamps import now_ms
from ..storage import resolve_data_path
from ..storage.base import LogStore
from ..txn import Transaction
from ..write.commit import commit_new_files
from ..storage import absolute_uri, encode_log_path
from .convert import scan_parquet

__all__ = ["clone", "clone_parquet", "CLONE_METRICS"]

CLONE_METRICS = ("sourceTableSize", "sourceNumOfFiles", "numRemovedFiles", "numCopiedFiles",
                 "removedFilesSize", "copiedFilesSize")
# properties that describe the source's history, not the clone's
_NOT_CLONED = ("delta.inCommitTimestampEnablementVersion", "delta.inCommitTimestampEnablementTimestamp",
               "delta.requireCheckpointProtectionBeforeVersion")

Progress = Callable[[str, int, int], None]


def _target_relative(source_root: str, path_in_log: str) -> str:
    """Where a deep clone puts a source file, relative to the target root (log-encoded)."""
    if "://" not in path_in_log and not path_in_log.startswith(("/", "file:")):
        return path_in_log
    full = resolve_data_path(source_root, path_in_log)
    digest = hashlib.sha1(full.encode()).hexdigest()[:12]
    return encode_log_path(f"{digest}-{full.replace(chr(92), '/').rsplit('/', 1)[-1]}")


def _copy(src_store: LogStore, src: str, dst_store: LogStore, dst: str) -> None:
    """Copy one file between two tables' stores (server-side where both are one bucket)."""
    parent = dst.rsplit("/", 1)[0] if "/" in dst else dst
    dst_store.mkdirs(parent)
    if src_store is dst_store or type(src_store) is type(dst_store) and src_store.owns(src) and dst_store.owns(src) \
            and getattr(src_store, "options", None) == getattr(dst_store, "options", None):
        dst_store.copy(src, dst)
    else:
        dst_store.write_data(dst, src_store.read_buffer(src))


def _cloned_metadata(source: Snapshot, target: Snapshot | None, properties: dict[str, str]):
    md = source.metadata
    conf = {k: v for k, v in md.configuration.items() if k not in _NOT_CLONED}
    conf.update(properties)
    new_mode = column_mapping.mode(conf)
    if column_mapping.mode(md.configuration) != new_mode:
        raise InvalidTableOperationError(
            f"CLONE cannot change the column mapping mode from '{column_mapping.mode(md.configuration)}' "
            f"to '{new_mode}' (the cloned files are written in the source's mode)")
    if target is not None and column_mapping.mode(target.configuration) != new_mode:
        raise InvalidTableOperationError(
            f"CLONE cannot replace a table whose column mapping mode is "
            f"'{column_mapping.mode(target.configuration)}' with one in mode '{new_mode}'")
    return dataclasses.replace(
        md, id=target.metadata.id if target is not None else str(uuid.uuid4()),
        name=target.metadata.name if target is not None else None,
        description=target.metadata.description if target is not None else None,
        configuration=conf, created_time=now_ms())


def _target(tgt_log: DeltaLog, source_root: str, replace: bool) -> Snapshot | None:
    """The clone target's current table (None: there is none), refused when it is the source,
    when it is a table and `replace` is off, or when its directory holds other files."""
    if tgt_log.table_root.rstrip("/") == source_root.rstrip("/"):
        raise InvalidTableOperationError(f"cannot clone {source_root} onto itself")
    try:
        existing: Snapshot | None = tgt_log.snapshot()
    except TableNotFoundError:
        existing = None
    if existing is not None and not replace:
        raise TableAlreadyExistsError(
            f"cannot clone to {tgt_log.table_root}: a Delta table exists there (version {existing.version}); "
            f"pass replace=True to replace it")
    if existing is None:
        try:
            stray = next(iter(tgt_log.store.walk(tgt_log.table_root)), None)
        except (FileNotFoundError, NotADirectoryError):
            stray = None
        if stray is not None:
            raise InvalidTableOperationError(
                f"cannot clone to {tgt_log.table_root}: the directory is not empty and holds no Delta "
                f"table (found {stray.path})")
    return existing


def clone(source: str | DeltaLog, target: str, *, version: int | None = None, timestamp: Any = None,
          shallow: bool = False, replace: bool = False, properties: dict[str, str] | None = None,
          storage_options: dict | None = None, target_storage_options: dict | None = None,
          max_workers: int = 8, progress: Progress | None = None) -> dict[str, Any]:
    """CLONE a version of `source` to `target` (see the module docstring). Returns delta-spark's
    metrics (sourceTableSize, sourceNumOfFiles, numRemovedFiles, numCopiedFiles, removedFilesSize,
    copiedFilesSize) plus `version` (the target's CLONE commit) and `sourceVersion`."""
    if not isinstance(target, str) or not target:
        raise InvalidOptionError(f"the clone target must be a path, got {target!r}")
    if properties is not None and (not isinstance(properties, dict) or
                                   not all(isinstance(k, str) and isinstance(v, str) for k, v in properties.items())):
        raise InvalidOptionError("properties must be a dict of str to str")
    if max_workers < 1:
        raise InvalidOptionError(f"max_workers must be >= 1, got {max_workers}")
    src_log = source if isinstance(source, DeltaLog) else DeltaLog.for_table(source, storage_options)
    src = src_log.snapshot(version=version, timestamp=timestamp)
    tgt_log = DeltaLog.for_table(target, target_storage_options if target_storage_options is not None
                                 else storage_options)
    existing = _target(tgt_log, src_log.table_root, replace)
    props = normalize_properties(properties or {})
    md = _cloned_metadata(src, existing, props)
    files = src.add_files()
    src_size = sum(a.size for a in files)
    root_key = root_uri(tgt_log.table_root)
    taken: set[str] = set()        # target paths the replaced table knows (its files and tombstones)
    if existing is not None:
        for t in (existing.files_table(["path"]), existing.tombstones_table(["path"])):
            taken.update(canonical_key(p, None, root_key) for p in t.column("path").to_pylist())
    adds: list[AddFile] = []
    copies: list[tuple[str, str]] = []        # (source full path, target full path)
    copied_size = 0
    if shallow:
        for a in files:
            dv = a.deletion_vector
            if dv is not None and dv.storage_type == "u":
                dv = dataclasses.replace(dv, storage_type="p", path_or_inline_dv=absolute_uri(
                    src_log.table_root, encode_log_path(dv.relative_path())))
            adds.append(dataclasses.replace(a, path=absolute_uri(src_log.table_root, a.path), deletion_vector=dv,
                                            data_change=True, base_row_id=None, default_row_commit_version=None))
    else:
        dv_map: dict[str, DeletionVectorDescriptor] = {}
        for a in files:
            rel = _target_relative(src_log.table_root, a.path)
            if canonical_key(rel, None, root_key) in taken:   # never overwrite a file the old table knows
                d, _, name = rel.rpartition("/")
                rel = (d + "/" if d else "") + f"clone-{uuid.uuid4().hex[:8]}-{name}"
            copies.append((resolve_data_path(src_log.table_root, a.path), resolve_data_path(tgt_log.table_root, rel)))
            copied_size += a.size
            dv = a.deletion_vector
            if dv is not None and dv.is_on_disk:
                src_dv = dv.absolute_path(src_log.table_root)
                if src_dv not in dv_map:   # a fresh DV file name: never one the old table knows
                    pid, _ = new_dv_path_component()
                    fresh = dataclasses.replace(dv, storage_type="u", path_or_inline_dv=pid)
                    copies.append((src_dv, resolve_data_path(tgt_log.table_root, fresh.relative_path())))
                    dv_map[src_dv] = fresh
                dv = dataclasses.replace(dv, storage_type="u", path_or_inline_dv=dv_map[src_dv].path_or_inline_dv)
            adds.append(dataclasses.replace(a, path=rel, deletion_vector=dv, data_change=True,
                                            modification_time=now_ms(),
                                            base_row_id=None, default_row_commit_version=None))
    removed = existing.add_files() if existing is not None else []
    if existing is not None and shallow:   # files both tables name (a re-clone) stay as they are

        def key(a: AddFile) -> str:
            return canonical_key(a.path, a.deletion_vector.unique_id if a.deletion_vector else None, root_key)

        new_keys, old_keys = {key(a) for a in adds}, {key(a) for a in removed}
        adds = [a for a in adds if key(a) not in old_keys]
        removed = [a for a in removed if key(a) not in new_keys]
    new_protocol = merge_protocols(src.protocol, reader_features_of(existing.protocol) | writer_features_of(existing.protocol)) \
        if existing is not None else src.protocol
    txn = Transaction(tgt_log, "CLONE", {"source": f"delta.`{src_log.table_root}`", "sourceVersion": src.version},
                      snapshot=existing, new_table=existing is None)
    metrics = {
        "sourceTableSize": src_size,
        "sourceNumOfFiles": len(files),
        "numRemovedFiles": len(removed),
        "numCopiedFiles": 0 if shallow else len(files),
        "removedFilesSize": sum(a.size for a in removed),
        "copiedFilesSize": 0 if shallow else copied_size,
    }

    stage = _stage(existing, removed, md, adds, metrics, new_protocol)

    new_files: list[AddFile] = []
    if copies:
        done = [0]

        def one(pair: tuple[str, str]) -> None:
            _copy(src_log.store, pair[0], tgt_log.store, pair[1])
            done[0] += 1
            if progress is not None and done[0] % 50 == 0:
                progress("copying", done[0], len(copies))

        if progress is not None:
            progress("copying", 0, len(copies))
        try:
            with ThreadPoolExecutor(max_workers=max_workers) as ex:
                list(ex.map(one, copies))
        except BaseException:
            tgt_log.store.delete_many([dst for _, dst in copies], max_workers)
            raise
        if progress is not None:
            progress("copying", len(copies), len(copies))
        new_files = adds
    committed = commit_new_files(txn, new_files, stage)
    return {**metrics, "version": committed, "sourceVersion": src.version}


def clone_parquet(source: str, target: str, *, replace: bool = False, properties: dict[str, str] | None = None,
                  storage_options: dict | None = None, max_workers: int = 8) -> dict[str, Any]:
    """A shallow CLONE of the parquet table (directory of parquet files) at `source` to the Delta
    table `target` (see the module docstring); delta-spark's metrics plus `version`."""
    scan = scan_parquet(source, None, storage_options=storage_options, max_workers=max_workers)
    tgt_log = DeltaLog.for_table(target, storage_options)
    existing = _target(tgt_log, scan.root, replace)
    conf = normalize_properties(properties or {})
    if existing is not None and column_mapping.mode(existing.configuration) != column_mapping.mode(conf):
        raise InvalidTableOperationError("CLONE cannot replace a table whose column mapping mode differs from the "
                                         "clone's")
    md = Metadata(id=existing.metadata.id if existing is not None else str(uuid.uuid4()),
                  schema_string=scan.schema.to_json(), partition_columns=tuple(scan.partition_columns),
                  configuration=conf, name=existing.metadata.name if existing is not None else None,
                  description=existing.metadata.description if existing is not None else None,
                  created_time=now_ms())
    adds = [dataclasses.replace(a, path=absolute_uri(scan.root, a.path)) for a in scan.adds]
    removed = existing.add_files() if existing is not None else []
    metrics = {"sourceTableSize": sum(a.size for a in adds), "sourceNumOfFiles": len(adds),
               "numRemovedFiles": len(removed), "numCopiedFiles": 0, "removedFilesSize": sum(a.size for a in removed),
               "copiedFilesSize": 0}
    txn = Transaction(tgt_log, "CLONE", {"source": f"parquet.`{scan.root}`"}, snapshot=existing,
                      new_table=existing is None)

    stage = _stage(existing, removed, md, adds, metrics)

    committed = commit_new_files(txn, [], stage)
    return {**metrics, "version": committed}


def _stage(existing: Any, removed: list[AddFile], md: Any, adds: list[AddFile], metrics: dict,
           protocol: Any = None):
    """The staging of a CLONE / CONVERT-as-clone commit: replacing the target table when it exists
    (its files removed, the whole table read), then the new metadata (and protocol) and files."""
    def stage(t: Transaction) -> dict:
        if existing is not None:
            t.replace_table()
            t.read_whole_table()
            t.remove_files(removed)
        t.update_metadata(md)
        if protocol is not None:
            t.update_protocol(protocol)
        t.add_files(adds)
        return metrics

    return stage
