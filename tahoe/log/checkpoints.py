"""Writing checkpoints (spec "Checkpoints", "Checkpoint Format", "Last Checkpoint File"): classic (one file or
multi-part) or, with `delta.checkpointPolicy=v2`, UUID-named V2 with sidecars; then `_last_checkpoint`.

  1. It is the state of a committed version; one the log cannot rebuild raises VersionNotFoundError.
  2. Each file appears whole or not at all (put-if-absent); an existing one is kept.
  3. Multi-part sets are hash-partitioned as delta-spark's (`tahoe.log.checkpoint_parts`); `_last_checkpoint`
     comes after every part; `delta.checkpoint.partSize` (1,000,000 actions; 50,000 per V2 sidecar).
  4. v2Checkpoint tables never get multi-part checkpoints; sidecars before the top file, before
     `_last_checkpoint`.
When to checkpoint: `tahoe.log.checkpoint_policy`; cleanup: `tahoe.log.metadata_cleanup`."""

from __future__ import annotations

import json
import logging
import math
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptLogError, InvalidTableOperationError, VersionNotFoundError
from ..protocol import timestamps
from ..protocol.filenames import (
    SIDECAR_DIR, LogFileKind, checkpoint_file_name, multipart_checkpoint_file_names, parse_log_file_name,
    sidecar_file_name, v2_checkpoint_file_name,
)
from ..protocol.properties import enum_property, int_property, raw_property
from ..protocol.schema import from_arrow_schema
from ..protocol.table_features import check_writable, is_feature_supported
from .checkpoint_parts import partition_file_actions, split_parts
from .checkpoint_schema import CheckpointLayout, build_checkpoint_with_layout, non_file_batch, sidecar_schema
from .crc import validate_snapshot
from .last_checkpoint import LastCheckpoint, read_last_checkpoint, write_last_checkpoint
from .replay import SHARED_SOURCE_MAX_BYTES, replay_checkpoint_table
from .segment import Checkpoint, LogFile, LogSegment
from .snapshot import Snapshot

_logger = logging.getLogger(__name__)

__all__ = ["write_checkpoint", "write_checkpoint_and_snapshot", "V2_SIDECAR_PART_SIZE"]


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy", row_group_size=1 << 20,
                   write_statistics=["add.path", "remove.path"])
    return sink.getvalue().to_pybytes()


def _put_if_absent(store, path: str, data: bytes) -> tuple[int, bool]:
    """Write `data` unless the file exists; the size of the file now at `path`, and whether it
    holds `data` (False: another writer's file was there)."""
    try:
        store.write(path, data, overwrite=False)
        return len(data), True
    except FileExistsError:
        _logger.info("checkpoint file %s already exists; keeping it", path)
        name = path.replace("\\", "/").rsplit("/", 1)[-1]
        for st in store.list_from(path):
            return (st.size if st.name == name else len(data)), False
        return len(data), False


def write_checkpoint(log: Any, version: int | None = None, parts: int | None = None, *,
                     now_ms: int | None = None, v2_format: str | None = None,
                     snapshot: Snapshot | None = None) -> LastCheckpoint:
    """Write a checkpoint of the latest version (or `version`) of the table of `log` (a DeltaLog),
    then update `_last_checkpoint` (unless it already names a newer checkpoint).

    Tables with `delta.checkpointPolicy=v2` (the `v2Checkpoint` feature) get a UUID-named V2
    checkpoint (see `write_v2_checkpoint`): the file actions in sidecar files, a top-level file in
    `v2_format` ("json", delta-spark's default, or "parquet"). Other tables get a classic
    checkpoint; with the v2Checkpoint feature (policy classic) it is one classic-named file
    following the V2 spec (a checkpointMetadata row, file actions inline) — never multi-part.

    `parts`: None → one file, or `ceil(file actions / delta.checkpoint.partSize)` parts when the
    adds and kept tombstones exceed that size (delta-spark's rule); an explicit number > 1 →
    exactly that many parts (classic multi-part; on a v2 policy table: that many sidecars).
    `now_ms` is the clock for tombstone retention (tests). `snapshot`: the snapshot of `version`
    when the caller has it (a writer right after its commit), instead of loading it."""
    if version is not None and version < 0:
        raise VersionNotFoundError(f"version must be >= 0, got {version}")
    if parts is not None and parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if v2_format is not None and v2_format not in ("json", "parquet"):
        raise ValueError(f"v2_format must be 'json' or 'parquet', got {v2_format!r}")
    return write_checkpoint_and_snapshot(log, version, parts, now_ms, v2_format, snapshot)[0]


def write_checkpoint_and_snapshot(log: Any, version: int | None, parts: int | None, now_ms: int | None,
                      v2_format: str | None, snapshot: Snapshot | None) -> tuple[LastCheckpoint, Snapshot | None]:
    """`write_checkpoint`; also the snapshot a fresh load of the version now builds — from the
    checkpoint just written and no commit after it — when that is a classic one-file checkpoint
    of at most `SHARED_SOURCE_MAX_BYTES` holding this writer's bytes (made from the Arrow table
    written, not read back: `tahoe.log.replay.replay_checkpoint_table`), else None."""
    if snapshot is None or (version is not None and snapshot.version != version):
        snapshot = log.snapshot(version=version)
    check_writable(snapshot.protocol)
    v2 = is_feature_supported(snapshot.protocol, "v2Checkpoint")
    v2_policy = v2 and enum_property(snapshot.configuration, "delta.checkpointPolicy") == "v2"
    if v2_format is not None and not v2_policy:
        raise InvalidTableOperationError(
            f"v2_format={v2_format!r}: table {log.table_root} does not write V2 checkpoints (set "
            f"delta.checkpointPolicy=v2 first)")
    table, n_non_file, n_adds, layout = build_checkpoint_with_layout(snapshot, now_ms)
    _validate_version_checksum(snapshot)   # (after the build: the file columns it needs are read)
    ours = False
    if v2_policy:
        lc = _write_v2(log, snapshot, table, n_non_file, n_adds, layout, parts, v2_format or "json")
    else:
        lc, ours = _write_classic(log, snapshot, table, n_non_file, n_adds, parts, v2)
    current = read_last_checkpoint(log.store, log.log_dir)
    if current is None or current.version <= snapshot.version:
        write_last_checkpoint(log.store, log.log_dir, lc)
    rebased = None
    if ours and lc.parts is None and (lc.size_in_bytes or 0) <= SHARED_SOURCE_MAX_BYTES:
        rebased = _rebased(log, snapshot, table)
    return lc, rebased


def _rebased(log: Any, snapshot: Snapshot, table: pa.Table) -> Snapshot | None:
    """The snapshot of `snapshot.version` as a fresh load builds it from the one-file checkpoint
    just written (holding `table`), or None when that file cannot be seen."""
    store = log.store
    name = checkpoint_file_name(snapshot.version)
    st = store.status(store.join(log.log_dir, name))
    parsed = parse_log_file_name(name)
    if st is None or parsed is None:
        return None
    cp = Checkpoint(snapshot.version, LogFileKind.CHECKPOINT, (LogFile(st, parsed),))
    segment = LogSegment(snapshot.segment.log_dir, snapshot.version, cp, (), snapshot.segment.version_commit, ())
    state = replay_checkpoint_table(store, snapshot.table_root, st.path, table)
    return Snapshot(store, snapshot.table_root, segment, state)


def _validate_version_checksum(snapshot: Snapshot) -> None:
    """As delta-spark before writing a checkpoint: the state must agree with the version's `.crc`
    file when there is one; a disagreement is logged (the checkpoint is still the log's state)."""
    try:
        validate_snapshot(snapshot, strict=False)
    except Exception as e:  # noqa: BLE001 - validation never stops a checkpoint
        _logger.warning("could not validate version %s of %s against its .crc file: %s: %s",
                        snapshot.version, snapshot.table_root, type(e).__name__, e)


def _write_classic(log: Any, snapshot: Snapshot, table: pa.Table, n_non_file: int, n_adds: int,
                   parts: int | None, v2: bool) -> tuple[LastCheckpoint, bool]:
    """A classic checkpoint (one file or parts); and whether every file holds this writer's bytes."""
    store = log.store
    v = snapshot.version
    n_rows = table.num_rows
    if parts is None:
        # delta-spark's rule: file actions (adds and kept tombstones) per part
        part_size = int_property(snapshot.configuration, "delta.checkpoint.partSize")
        parts = max(1, math.ceil((n_rows - n_non_file) / part_size))
    if v2:
        if parts > 1:
            _logger.info("table %s has the v2Checkpoint feature: writing one checkpoint file "
                         "instead of %d parts (multi-part checkpoints are forbidden)", log.table_root, parts)
        parts = 1
    if parts == 1:
        names = [checkpoint_file_name(v)]
        tables = [table]
    else:
        names = multipart_checkpoint_file_names(v, parts)
        tables = split_parts(table, n_non_file, parts)
    size_in_bytes = 0
    ours = True
    for name, t in zip(names, tables):
        size, mine = _put_if_absent(store, store.join(log.log_dir, name), _parquet_bytes(t))
        size_in_bytes += size
        ours = ours and mine
    return LastCheckpoint(version=v, size=n_rows, parts=parts if parts > 1 else None,
                          size_in_bytes=size_in_bytes, num_of_add_files=n_adds), ours


# V2 checkpoints (spec "V2 Spec", "UUID-named checkpoint", "Sidecar Files"), as delta-spark writes
# them: file actions hash-partitioned by path into sidecars of at most 50,000 actions each
# (delta-spark's part size for v2; `delta.checkpoint.partSize` when the table sets it), named
# `<v>.checkpoint.<part>.<parts>.<uuid>.parquet` under `_delta_log/_sidecars/`; then the top-level
# `<v>.checkpoint.<uuid>.json|parquet` holding checkpointMetadata (tags: sidecarNumActions,
# sidecarSizeInBytes, numOfAddFiles, sidecarFileSchema), the sidecar actions and every non-file
# action; then `_last_checkpoint` with its `v2Checkpoint` entry (the non-file actions and sidecar
# list embedded when each holds at most 30 entries, delta-spark's thresholds). Sidecars are
# written first and the top-level file last, so a reader never sees a checkpoint whose sidecars
# are not all there; a failure in between leaves only unreferenced sidecars, which
# `cleanup_unreferenced_sidecars` removes once they are older than the log retention.

V2_SIDECAR_PART_SIZE = 50_000
_LAST_CHECKPOINT_V2_THRESHOLD = 30


def _write_v2(log: Any, snapshot: Snapshot, table: pa.Table, n_non_file: int, n_adds: int,
              layout: CheckpointLayout, parts: int | None, fmt: str) -> LastCheckpoint:
    store = log.store
    v = snapshot.version
    sc_schema = sidecar_schema(layout)
    files = table.slice(n_non_file).select(["add", "remove"])
    n_files = files.num_rows
    if parts is None:
        conf = snapshot.configuration
        part_size = int_property(conf, "delta.checkpoint.partSize") \
            if raw_property(conf, "delta.checkpoint.partSize") is not None else V2_SIDECAR_PART_SIZE
        parts = math.ceil(n_files / part_size)
    parts = min(parts, n_files)     # no empty sidecars; none at all without file actions
    sidecar_dir = store.join(log.log_dir, SIDECAR_DIR)
    written: list[str] = []
    for i, chunk in enumerate(partition_file_actions(files, parts) if parts else []):
        name = sidecar_file_name(v, i + 1, parts, str(uuid.uuid4()))
        store.write(store.join(sidecar_dir, name), _parquet_bytes(chunk.cast(sc_schema)), overwrite=False)
        written.append(name)
    sidecars: list[dict] = []
    if written:
        status = {st.name: st for st in store.list_from(store.join(sidecar_dir, f"{v:020d}.checkpoint."))}
        for name in written:
            st = status.get(name)
            if st is None:
                raise CorruptLogError(f"sidecar {name} of the checkpoint of version {v} is not listed after "
                                      f"it was written to {sidecar_dir}")
            sidecars.append({"path": name, "sizeInBytes": st.size, "modificationTime": st.modification_time})
    sidecar_bytes = sum(sc["sizeInBytes"] for sc in sidecars)
    tags = {"sidecarNumActions": str(n_files if sidecars else 0),
            "sidecarSizeInBytes": str(sidecar_bytes),
            "numOfAddFiles": str(n_adds),
            "sidecarFileSchema": from_arrow_schema(sc_schema).to_json() if sidecars else ""}
    cp_meta = {"version": v, "tags": tags}
    non_file = _non_file_actions(snapshot)
    name = v2_checkpoint_file_name(v, str(uuid.uuid4()), fmt)
    if fmt == "json":
        lines = [{"checkpointMetadata": cp_meta}, *({"sidecar": sc} for sc in sidecars), *non_file]
        data = "".join(json.dumps(a, separators=(",", ":"), ensure_ascii=False) + "\n" for a in lines).encode("utf-8")
        n_top = len(lines)
    else:
        top = pa.Table.from_batches([non_file_batch(snapshot, layout, tags, sidecars)], schema=layout.schema)
        data = _parquet_bytes(top)
        n_top = top.num_rows
    path = store.join(log.log_dir, name)
    store.write(path, data, overwrite=False)
    top_status = next((st for st in store.list_from(path) if st.name == name), None)
    mtime = top_status.modification_time if top_status is not None else timestamps.now_ms()
    embedded_actions = [*non_file, {"checkpointMetadata": cp_meta}]
    v2_info: dict[str, Any] = {"path": name, "sizeInBytes": len(data), "modificationTime": mtime}
    if len(embedded_actions) <= _LAST_CHECKPOINT_V2_THRESHOLD:
        v2_info["nonFileActions"] = embedded_actions
    if len(sidecars) <= _LAST_CHECKPOINT_V2_THRESHOLD:
        v2_info["sidecarFiles"] = sidecars
    return LastCheckpoint(version=v, size=n_files + n_top, size_in_bytes=sidecar_bytes + len(data),
                          num_of_add_files=n_adds, v2_checkpoint_file=name, v2_checkpoint=v2_info)


def _non_file_actions(snapshot: Snapshot) -> list[dict]:
    """The non-file actions of a checkpoint of `snapshot`, as JSON action objects: protocol,
    metaData, txns (by appId), domain metadata (by domain)."""
    out: list[dict] = [snapshot.protocol.to_action_dict(), snapshot.metadata.to_action_dict()]
    txns = snapshot.set_transactions
    out.extend(txns[a].to_action_dict() for a in sorted(txns))
    domains = snapshot.domain_metadata
    out.extend(domains[d].to_action_dict() for d in sorted(domains))
    return out
