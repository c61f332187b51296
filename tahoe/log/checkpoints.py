"""Writing checkpoints (spec "Checkpoints", "Checkpoint Format", "Checkpoint Schema", "Last
Checkpoint File") and cleaning up expired log files (delta-spark's metadata cleanup / log
retention).

Owns: the checkpoint parquet schema (delta-spark's: top-level struct columns `txn`, `add`,
`remove`, `metaData`, `protocol`, `domainMetadata`, plus `checkpointMetadata`/`sidecar` for
v2Checkpoint tables), building it column-wise from a snapshot's Arrow file tables (never one
Python object per file), writing it as one file, as a multi-part set, or — on
`delta.checkpointPolicy=v2` tables — as a UUID-named V2 checkpoint with sidecar files,
`_last_checkpoint`, the post-commit hook `checkpoint_if_needed`, `cleanup_expired_logs`, and
`cleanup_unreferenced_sidecars` (the V2 part of metadata cleanup).

Invariants of a written checkpoint:
  1. it is the state of a committed version: `write_checkpoint` loads that snapshot, so a version
     the log cannot reconstruct raises VersionNotFoundError;
  2. one action per row; adds and removes carry `dataChange = false`; only tombstones younger than
     `delta.deletedFileRetentionDuration` are kept;
  3. each file appears whole or not at all (put-if-absent through the log store: temp file + link
     locally, one PUT on S3); an existing checkpoint file of the same name is kept as it is;
  4. a multi-part set is hash-partitioned by file path exactly as delta-spark partitions it
     (`checkpoint_part_of`): a file's part depends on its path and the number of parts only, so
     the parts of two writers of the same version (a retry, two checkpointers, tahoe and
     delta-spark) are interchangeable — any mix of them holds every active file exactly once,
     whichever tombstones each writer's clock kept; `_last_checkpoint` is written only after
     every part exists;
  5. a table with the v2Checkpoint feature never gets a multi-part checkpoint; a V2 checkpoint's
     sidecars are all written before its top-level file, which is written before
     `_last_checkpoint` (a reader sees the checkpoint complete or not at all).

Table properties honoured (delta-spark names and defaults): `delta.checkpointInterval` (10),
`delta.checkpoint.writeStatsAsJson` (true), `delta.checkpoint.writeStatsAsStruct` (unset: only
`partitionValues_parsed`, like delta-spark; true: also `stats_parsed`; false: neither),
`delta.checkpoint.partSize` (file actions per part, as delta-spark counts them; default 1,000,000 — the table-property form of
delta-spark's `spark.databricks.delta.checkpoint.partSize`), `delta.deletedFileRetentionDuration`
(`interval 1 week`), `delta.logRetentionDuration` (`interval 30 days`),
`delta.enableExpiredLogCleanup` (true), `delta.checkpointPolicy` (classic; v2: V2 checkpoints);
and tahoe's own `tahoe.checkpoint.jsonSizeThreshold` (32mb; 0: off): a commit after which the JSON
commits since the newest checkpoint hold at least that many bytes is checkpointed too, so a table
written in a few large commits does not leave its readers parsing hundreds of MB of JSON.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CorruptLogError, InvalidTableOperationError, VersionNotFoundError
from ..protocol import timestamps
from ..protocol.filenames import (
    SIDECAR_DIR, LogFileKind, checkpoint_file_name, commit_file_name, multipart_checkpoint_file_names,
    parse_log_file_name, sidecar_file_name, v2_checkpoint_file_name,
)
from ..protocol.properties import (
    CHECKPOINT_JSON_SIZE_THRESHOLD, bool_property, enum_property, int_property,
    interval_property_ms, raw_property, size_property,
)
from ..protocol.schema import from_arrow_schema
from ..protocol.table_features import check_writable, is_feature_supported
from .checkpoint_schema import CheckpointLayout, build_checkpoint_with_layout, non_file_batch, sidecar_schema
from .checkpoint_parts import partition_file_actions, split_parts
from .last_checkpoint import LastCheckpoint, read_last_checkpoint, write_last_checkpoint
from .replay import SHARED_SOURCE_MAX_BYTES, read_commit, replay_checkpoint_table
from .segment import Checkpoint, LogFile, LogSegment, complete_checkpoints, list_log
from .snapshot import Snapshot

_logger = logging.getLogger(__name__)

__all__ = [
    "write_checkpoint", "checkpoint_if_needed", "checkpoint_due", "json_tail_bytes", "cleanup_expired_logs",
    "cleanup_unreferenced_sidecars",
    "V2_SIDECAR_PART_SIZE",
]


# --- writing -----------------------------------------------------------------------------------

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
    return _write_checkpoint(log, version, parts, now_ms, v2_format, snapshot)[0]


def _write_checkpoint(log: Any, version: int | None, parts: int | None, now_ms: int | None,
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
    from .crc import validate_snapshot

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
    import uuid

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


# --- post-commit hook --------------------------------------------------------------------------

_conf_cache: dict[tuple[int, str], tuple[int, dict]] = {}
_conf_lock = threading.Lock()


def _configuration_at(log: Any, version: int) -> dict:
    """The table configuration at `version`, cheaply: the cached configuration of an earlier
    version brought forward by the metaData actions of the commits in between (usually one small
    file); a full snapshot load only the first time or when a commit is missing."""
    key = (id(log.store), log.table_root)
    with _conf_lock:
        cached = _conf_cache.get(key)
    conf = None
    if cached is not None and cached[0] <= version and version - cached[0] <= 100:
        conf = dict(cached[1])
        try:
            for v in range(cached[0] + 1, version + 1):
                for obj in read_commit(log.store, log.store.join(log.log_dir, commit_file_name(v))):
                    md = obj.get("metaData")
                    if isinstance(md, dict):
                        conf = {k: x for k, x in (md.get("configuration") or {}).items() if x is not None}
        except (FileNotFoundError, CorruptLogError):
            conf = None
    if conf is None:
        conf = log.snapshot(version=version).configuration
    with _conf_lock:
        _conf_cache[key] = (version, conf)
        if len(_conf_cache) > 1024:
            _conf_cache.pop(next(iter(_conf_cache)))
    return conf


def json_tail_bytes(log: Any, version: int) -> int:
    """Bytes of JSON a reader of `version` replays after its newest checkpoint: the commits (or
    log compaction files standing for them) of its log segment."""
    from .segment import LogSegment

    return sum(f.status.size for f in LogSegment.for_version(log.store, log.table_root, version).deltas)


def checkpoint_due(conf: dict, version: int, tail_bytes: "int | Callable[[], int]") -> bool:
    """Whether a commit of `version` is followed by a checkpoint: `version` > 0 and a multiple of
    `delta.checkpointInterval` (as delta-spark), or — tahoe's own rule, the table property
    `tahoe.checkpoint.jsonSizeThreshold` (default 32mb, 0: off) — the JSON a reader replays after
    the newest checkpoint (`tail_bytes`, or a callable computing it) has reached the threshold."""
    if version <= 0:
        return False
    if version % int_property(conf, "delta.checkpointInterval") == 0:
        return True
    threshold = size_property(conf, CHECKPOINT_JSON_SIZE_THRESHOLD)
    if not threshold:
        return False
    return (tail_bytes() if callable(tail_bytes) else tail_bytes) >= threshold


def checkpoint_if_needed(log: Any, version: int, configuration: dict | None = None,
                         tail_bytes: int | None = None, snapshot: Snapshot | None = None) -> LastCheckpoint | None:
    """Post-commit hook: when `checkpoint_due` (every `delta.checkpointInterval` commits, or once
    the JSON since the last checkpoint reaches `tahoe.checkpoint.jsonSizeThreshold`), write the
    checkpoint of `version`, then (if `delta.enableExpiredLogCleanup`) clean up expired log files.
    Returns the checkpoint written, or None. Never raises — the commit already succeeded — but
    logs a warning. `configuration`: the table configuration at `version` when the caller knows it
    (saves a read); `tail_bytes`: the JSON bytes after the newest checkpoint up to `version` when
    the caller knows them (else the log is listed, only when the interval alone does not decide);
    `snapshot`: the snapshot of `version` when the caller has it (saves loading it)."""
    try:
        conf = configuration if configuration is not None else _configuration_at(log, version)
        if not checkpoint_due(conf, version, tail_bytes if tail_bytes is not None
                              else (lambda: json_tail_bytes(log, version))):
            return None
        given = snapshot if snapshot is not None and snapshot.version == version else None
        lc, rebased = _write_checkpoint(log, version, None, None, None, given)
        if given is not None and rebased is not None:
            # the writer's kept snapshot, rebased on the checkpoint as a fresh load would be
            from .snapshot_cache import remember

            rebased.known_checksum(given.version_checksum)
            remember(rebased)
    except Exception as e:  # noqa: BLE001 - a failed checkpoint never fails the commit
        _logger.warning("checkpoint of %s at version %s failed: %s: %s",
                        getattr(log, "table_root", "?"), version, type(e).__name__, e)
        return None
    try:
        if bool_property(conf, "delta.enableExpiredLogCleanup"):
            cleanup_expired_logs(log, configuration=conf)
            cleanup_unreferenced_sidecars(log, configuration=conf)
    except Exception as e:  # noqa: BLE001
        _logger.warning("log cleanup of %s after version %s failed: %s: %s",
                        getattr(log, "table_root", "?"), version, type(e).__name__, e)
    return lc


# --- metadata cleanup --------------------------------------------------------------------------

def cleanup_expired_logs(log: Any, now_ms: int | None = None, configuration: dict | None = None, *,
                         retention_ms: int | None = None) -> list[str]:
    """Delete the log files (commits, checkpoints, version checksums, compactions) that no version
    within `delta.logRetentionDuration` (or `retention_ms`: DROP FEATURE ... TRUNCATE HISTORY's
    shorter one) needs, and return their paths.

    Let B be the first version whose commit is younger than the retention boundary (the latest
    version if none is) and C the newest complete checkpoint at or before B. Every version >= B is
    rebuilt from C and the commits after it, so exactly the files of versions < C whose
    modification time is older than the boundary are deleted — commit files first, then the
    checkpoints and the rest (spec, Checkpoint Protection (d): commits go before the checkpoints
    that stand for them). Without such a checkpoint nothing is deleted. Checkpoint protection
    (the `checkpointProtection` writer feature): when C is below
    `delta.requireCheckpointProtectionBeforeVersion`, nothing is deleted — the log is cleaned up
    to that version in one go or not at all, and no checkpoint before it goes. `configuration`:
    the table's, when the caller has it (saves loading the snapshot when nothing is old enough)."""
    now_ms = timestamps.now_ms() if now_ms is None else now_ms
    store = log.store

    def cutoff_of(conf: dict) -> int:
        return now_ms - (interval_property_ms(conf, "delta.logRetentionDuration") if retention_ms is None
                         else retention_ms)

    if configuration is not None and _nothing_expired(store, log.log_dir, cutoff_of(configuration)):
        return []
    files = list_log(store, log.log_dir, 0)
    commits = sorted((f for f in files if f.name.kind == LogFileKind.COMMIT), key=lambda f: f.version)
    if not commits:
        return []
    snapshot = None
    if configuration is None:
        snapshot = log.snapshot()
        configuration = snapshot.configuration
    conf = configuration
    cutoff = cutoff_of(conf)
    if min(f.status.modification_time for f in files) > cutoff:
        return []   # nothing is old enough
    boundary = next((c.version for c in commits if c.status.modification_time > cutoff), commits[-1].version)
    checkpoints = [v for v in complete_checkpoints(files) if v <= boundary]
    if not checkpoints:
        return []
    keep_from = max(checkpoints)
    protected_before = int_property(conf, "delta.requireCheckpointProtectionBeforeVersion")
    if protected_before > 0:
        protocol = (snapshot or log.snapshot()).protocol
        # Spec, Checkpoint Protection: clean up to the protected version in one go, or not at all
        # (never in chunks that would leave the protected checkpoints' history half gone).
        if is_feature_supported(protocol, "checkpointProtection") and keep_from < protected_before:
            return []
    local = type(store).__name__ == "LocalLogStore"
    deleted: list[str] = []
    order = sorted(files, key=lambda f: (f.name.kind != LogFileKind.COMMIT, f.version, f.name.name))
    for f in order:
        last_version = f.name.end_version if f.name.kind == LogFileKind.COMPACTION else f.version
        if last_version is None or last_version >= keep_from:
            continue
        if f.status.modification_time > cutoff:
            continue
        store.delete(f.path)
        deleted.append(f.path)
        if local:  # Hadoop's side checksum file, if a JVM writer left one
            d, _, name = f.path.rpartition("/")
            store.delete(store.join(d, f".{name}.crc"))
    return deleted


def _nothing_expired(store: Any, log_dir: str, cutoff: int) -> bool:
    """A cheap sufficient condition for `cleanup_expired_logs` to delete nothing, without the
    status of every log file: the earliest commit C is younger than `cutoff` and no log file
    belongs to a version before C. (Then the retention boundary is C, the checkpoint kept is at
    or before C, and only files of versions before C could go.) One listing of names and one
    status; False whenever that does not settle it (the full rule then decides)."""
    try:
        names = store.list_names(log_dir)
    except (FileNotFoundError, NotADirectoryError):
        return True
    first_commit = None
    before: list[int] = []
    for n in names:   # sorted by name: by version first (the 20-digit prefix)
        parsed = parse_log_file_name(n)
        if parsed is None:
            continue
        if parsed.kind == LogFileKind.COMMIT:
            first_commit = parsed
            break
        before.append(parsed.version)
    if first_commit is None or any(v < first_commit.version for v in before):
        return False
    st = store.status(store.join(log_dir, first_commit.name))
    return st is not None and st.modification_time > cutoff


# --- sidecar cleanup (v2 checkpoints) ------------------------------------------------------------

_DAY_MS = 24 * 3600 * 1000


def _sidecar_refs(store: Any, path: str, ext: str) -> set[str]:
    """The file names of the sidecars a checkpoint file references."""
    if ext == "json":
        return {str(o["sidecar"]["path"]).rsplit("/", 1)[-1] for o in read_commit(store, path)
                if isinstance(o.get("sidecar"), dict) and o["sidecar"].get("path")}
    with store.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        if "sidecar" not in pf.schema_arrow.names:
            return set()
        col = pf.read(columns=["sidecar.path"]).column("sidecar")
    paths = pc.struct_field(col.combine_chunks(), "path").drop_null().to_pylist()
    return {p.rsplit("/", 1)[-1] for p in paths}


def cleanup_unreferenced_sidecars(log: Any, now_ms: int | None = None,
                                  configuration: dict | None = None) -> list[str]:
    """Spec "Metadata Cleanup" steps 4-5 for V2 checkpoints: delete the files in
    `_delta_log/_sidecars/` that no checkpoint left in the log references and that are older than
    the cleanup boundary — `delta.logRetentionDuration` before now, truncated to midnight UTC as
    delta-spark does, and never within the last day (a checkpoint being written has its sidecars
    before it is itself visible). Returns the deleted paths. Fails closed: a checkpoint that
    cannot be read means the referenced set is unknown, and nothing is deleted."""
    now_ms = timestamps.now_ms() if now_ms is None else now_ms
    store = log.store
    sidecar_dir = store.join(log.log_dir, SIDECAR_DIR)
    try:
        sidecars = list(store.list_dir(sidecar_dir))
    except (FileNotFoundError, NotADirectoryError):
        return []
    if not sidecars:
        return []
    conf = configuration if configuration is not None else log.snapshot().configuration
    boundary = now_ms - interval_property_ms(conf, "delta.logRetentionDuration")
    cutoff = min(boundary - boundary % _DAY_MS, now_ms - now_ms % _DAY_MS - _DAY_MS)
    candidates = [st for st in sidecars if st.modification_time < cutoff]
    if not candidates:
        return []
    referenced: set[str] = set()
    for f in list_log(store, log.log_dir, 0):
        if f.name.kind in (LogFileKind.V2_CHECKPOINT, LogFileKind.CHECKPOINT):
            try:
                referenced |= _sidecar_refs(store, f.path, f.name.ext)
            except FileNotFoundError:
                continue   # deleted meanwhile (another cleanup): it references nothing any more
            except Exception as e:  # noqa: BLE001 - fail closed
                _logger.warning("sidecar cleanup of %s skipped: cannot read checkpoint %s: %s: %s",
                                log.table_root, f.path, type(e).__name__, e)
                return []
    deleted = []
    for st in candidates:
        if st.name not in referenced:
            store.delete(st.path)
            deleted.append(st.path)
    return deleted
