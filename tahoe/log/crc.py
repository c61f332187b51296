"""Version checksum files (`_delta_log/<v>.crc`, spec "Version Checksum File"; content model
`tahoe.protocol.version_checksum`).

  1. `read_version_checksum`: None when absent; unreadable is None with a warning, CorruptLogError if `strict`.
  2. `compute_checksum`: of a replayed snapshot, in Arrow.
  3. `checksum_after_commit`: derived from the previous checksum and the commit's actions, never a replay.
  4. `write_version_checksum`: put-if-absent, after the commit.
  5. `validate_snapshot` (spec "State Validation"): VersionChecksumMismatchError in strict mode, a warning
     otherwise; loads validate when `TAHOE_VALIDATE_CHECKSUMS` is `strict` or `warn`."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Iterable, Protocol as Structural

from ..errors import CorruptLogError, VersionChecksumMismatchError
from ..protocol.actions import (
    Action, AddFile, CommitInfo, DomainMetadata, Metadata, Protocol, RemoveFile, SetTransaction,
)
from ..protocol.filenames import crc_file_name
from ..protocol.properties import bool_property, raw_property
from ..protocol.table_features import is_feature_supported
from ..protocol.version_checksum import (
    FILE_SIZE_BINS, DeletedRecordCountsHistogram, FileChange, FileSizeHistogram, VersionChecksum,
    derive_next, empty_checksum, limit_domains, limit_set_transactions, mismatches,
)
from ..storage.base import LogStore

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pyarrow as pa

    from .segment import LogSegment

# numpy, pyarrow and the Arrow file-action helpers are imported where the file list is computed
# on: reading a `.crc` (a snapshot's size and file count) needs none of them.

_logger = logging.getLogger(__name__)

__all__ = ["read_version_checksum", "write_version_checksum", "compute_checksum",
           "checksum_after_commit", "validate_snapshot", "validation_mode", "VALIDATION_ENV"]

VALIDATION_ENV = "TAHOE_VALIDATE_CHECKSUMS"


class SnapshotState(Structural):
    """What a checksum is computed from and checked against: a replayed table state — a
    `tahoe.log.snapshot.Snapshot`, which reads `.crc` files through this module (so this module
    names what it needs instead of importing it)."""
    store: LogStore
    table_root: str
    segment: "LogSegment"
    version: int
    metadata: Metadata
    protocol: Protocol
    timestamp: int
    set_transactions: dict[str, SetTransaction]
    domain_metadata: dict[str, DomainMetadata]
    version_checksum: VersionChecksum | None

    def files_table(self, columns: Any = None) -> "pa.Table": ...


def validation_mode() -> str | None:
    """"strict", "warn" or None (no automatic validation), from TAHOE_VALIDATE_CHECKSUMS."""
    v = os.environ.get(VALIDATION_ENV, "").strip().lower()
    if v in ("", "0", "off", "false", "no"):
        return None
    if v in ("strict", "warn"):
        return v
    raise ValueError(f"{VALIDATION_ENV} must be strict, warn or off, got {v!r}")


def read_version_checksum(store: LogStore, log_dir: str, version: int, strict: bool = False) -> VersionChecksum | None:
    path = store.join(log_dir, crc_file_name(version))
    try:
        data = store.read(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return VersionChecksum.from_json(data, where=path)
    except CorruptLogError as e:
        if strict:
            raise
        _logger.warning("ignoring unreadable version checksum: %s", e)
        return None


def write_version_checksum(store: LogStore, log_dir: str, version: int, crc: VersionChecksum) -> bool:
    """Write `<version>.crc` unless it exists (never overwritten); True when written."""
    path = store.join(log_dir, crc_file_name(version))
    try:
        # optional for readers (an unreadable .crc is ignored): no fsyncs (`LogStore.write_optional`)
        store.write_optional(path, (crc.to_json() + "\n").encode("utf-8"))
        return True
    except FileExistsError:
        _logger.info("version checksum %s already exists; keeping it", path)
        return False


def _dv_flags(protocol: Protocol, metadata: Metadata) -> tuple[bool, bool]:
    readable = is_feature_supported(protocol, "deletionVectors")
    return readable, readable and bool(bool_property(metadata.configuration, "delta.enableDeletionVectors"))


def _txn_retention_set(metadata: Metadata) -> bool:
    return raw_property(metadata.configuration, "delta.setTransactionRetentionDuration") is not None


def _histogram(sizes: np.ndarray) -> FileSizeHistogram:
    import numpy as np

    bins = np.asarray(FILE_SIZE_BINS, dtype=np.int64)
    idx = np.searchsorted(bins, sizes, side="right") - 1
    ok = idx >= 0
    counts = np.bincount(idx[ok], minlength=len(bins))
    total = np.zeros(len(bins), dtype=np.int64)
    np.add.at(total, idx[ok], sizes[ok])
    return FileSizeHistogram(FILE_SIZE_BINS, [int(x) for x in counts], [int(x) for x in total])


def compute_checksum(snapshot: "SnapshotState") -> VersionChecksum:
    """The checksum of `snapshot`'s replayed state (what its `.crc` should say)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from .arrow_build import empty, int_numpy, scalar

    # (no Python values handed to pyarrow: its converter would import pandas)
    files = snapshot.files_table(["size", "deletionVector"])
    sizes = int_numpy(files.column("size")).astype(np.int64) if files.num_rows else np.zeros(0, np.int64)
    md, proto = snapshot.metadata, snapshot.protocol
    readable, _ = _dv_flags(proto, md)
    n_dv = n_deleted = dhist = None
    if readable:
        dvs = files.column("deletionVector")
        card = pc.struct_field(dvs.combine_chunks(), "cardinality") if files.num_rows else empty(pa.int64())
        has = pc.is_valid(dvs.combine_chunks()) if files.num_rows else empty(pa.bool_())
        n_dv = int(pc.sum(pc.cast(has, pa.int64())).as_py() or 0)
        zero = scalar(0, card.type)
        cards = int_numpy(pc.if_else(has, pc.fill_null(card, zero), zero)).astype(np.int64) \
            if files.num_rows else np.zeros(0, np.int64)
        n_deleted = int(cards.sum())
        dhist = DeletedRecordCountsHistogram()
        for c in cards:
            dhist.insert(int(c))
    ict = None
    if bool_property(md.configuration, "delta.enableInCommitTimestamps"):
        ict = snapshot.timestamp
    return VersionChecksum(
        table_size_bytes=int(sizes.sum()), num_files=len(sizes), metadata=md, protocol=proto,
        in_commit_timestamp=ict,
        set_transactions=limit_set_transactions(snapshot.set_transactions.values(), _txn_retention_set(md)),
        domain_metadata=limit_domains(snapshot.domain_metadata.values()),
        file_size_histogram=_histogram(sizes), num_deleted_records=n_deleted, num_deletion_vectors=n_dv,
        deleted_record_counts_histogram=dhist)


def _previous_files(snapshot: "SnapshotState", keys: set[str]) -> dict[str, tuple[int, int | None]]:
    """key → (size, DV cardinality) of those of `keys` that are active in `snapshot`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .file_actions import file_keys, root_uri

    t = snapshot.files_table(["path", "deletionVector", "size"])
    if not t.num_rows or not keys:
        return {}
    k = file_keys(t.column("path").combine_chunks(), t.column("deletionVector").combine_chunks(),
                  root_uri(snapshot.table_root))
    mask = pc.fill_null(pc.is_in(k, value_set=pa.array(sorted(keys), pa.string())), False)
    if not pc.any(mask).as_py():
        return {}
    hit = t.filter(mask)
    hk = k.filter(mask).to_pylist()
    sizes = hit.column("size").to_pylist()
    dvs = hit.column("deletionVector").to_pylist()
    return {key: (s, (dv or {}).get("cardinality") if dv else None) for key, s, dv in zip(hk, sizes, dvs)}


def _dv_card(a: AddFile | RemoveFile) -> int | None:
    return a.deletion_vector.cardinality if a.deletion_vector is not None else None


def checksum_after_commit(store: LogStore, log_dir: str, table_root: str, version: int,
                          actions: Iterable[Action], read_snapshot: "SnapshotState | None") -> VersionChecksum | None:
    """The checksum of `version` from its commit's `actions` and the previous version's checksum (its `.crc`,
    else `read_snapshot` when at that version), as delta-spark derives it; None when it cannot be derived
    without a replay (a dataChange=false action or a size-less remove, with no read snapshot to check)."""
    from .file_actions import canonical_key, root_uri

    actions = list(actions)
    metadata = next((a for a in actions if isinstance(a, Metadata)), None)
    protocol = next((a for a in actions if isinstance(a, Protocol)), None)
    fresh = read_snapshot is not None and read_snapshot.version == version - 1
    if version == 0:
        if metadata is None or protocol is None:
            return None
        prev = empty_checksum(metadata, protocol, _dv_flags(protocol, metadata)[1])
    else:
        # the read snapshot's own (read once, or known to the writer that derived it)
        prev = read_snapshot.version_checksum if fresh and read_snapshot is not None \
            else read_version_checksum(store, log_dir, version - 1)
        if prev is None and fresh:
            assert read_snapshot is not None
            prev = compute_checksum(read_snapshot)
        if prev is None:
            return None
    md = metadata or prev.metadata
    proto = protocol or prev.protocol
    key_root = root_uri(table_root)

    def key(a: AddFile | RemoveFile) -> str:
        return canonical_key(a.path, a.deletion_vector.unique_id if a.deletion_vector else None, key_root)

    adds = [a for a in actions if isinstance(a, AddFile)]
    removes = [a for a in actions if isinstance(a, RemoveFile)]
    removed_keys = {key(r) for r in removes}
    uncertain = {key(a) for a in adds if not a.data_change and key(a) not in removed_keys}
    uncertain |= {key(r) for r in removes if not r.data_change or r.size is None}
    known: dict[str, tuple[int, int | None]] = {}
    if uncertain:
        if not fresh:
            return None
        assert read_snapshot is not None
        known = _previous_files(read_snapshot, uncertain)
    changes: list[FileChange] = []
    for r in removes:
        k = key(r)
        if k in uncertain:
            if k in known:
                size, card = known[k]
                changes.append(FileChange(-1, size, card))
        else:
            assert r.size is not None
            changes.append(FileChange(-1, r.size, _dv_card(r)))
    for a in adds:
        k = key(a)
        if k in uncertain and k in known:     # a re-add of an active file: replaces it
            size, card = known[k]
            changes.append(FileChange(-1, size, card))
        changes.append(FileChange(1, a.size, _dv_card(a)))
    readable, writable = _dv_flags(proto, md)
    ci = next((a for a in actions if isinstance(a, CommitInfo)), None)
    ict = ci.in_commit_timestamp if ci is not None and bool_property(md.configuration, "delta.enableInCommitTimestamps") else None
    txn_id = ci.values.get("txnId") if ci is not None and isinstance(ci.values.get("txnId"), str) else None
    return derive_next(
        prev, changes, metadata=metadata, protocol=protocol,
        txns=[a for a in actions if isinstance(a, SetTransaction)],
        domains=[a for a in actions if isinstance(a, DomainMetadata)],
        in_commit_timestamp=int(ict) if ict is not None else None, txn_id=txn_id,
        dv_metrics=writable or readable, txn_retention_set=_txn_retention_set(md))


def validate_snapshot(snapshot: "SnapshotState", strict: bool = True,
                      checksum: VersionChecksum | None = None) -> dict[str, str]:
    """Compare `snapshot` with its version's `.crc` (or `checksum`): field → message for each
    disagreement (empty when they agree or there is no `.crc`). `strict`: a disagreement, or an
    unreadable `.crc`, raises VersionChecksumMismatchError; otherwise it is logged as a warning."""
    if checksum is None:
        try:
            checksum = read_version_checksum(snapshot.store, snapshot.segment.log_dir, snapshot.version, strict=strict)
        except CorruptLogError as e:
            raise VersionChecksumMismatchError(
                f"The transaction log has failed integrity checks. Failed verification at version "
                f"{snapshot.version} of {snapshot.table_root}: {e}") from None
    if checksum is None:
        return {}
    found = mismatches(checksum, compute_checksum(snapshot))
    if found:
        where = crc_file_name(snapshot.version)
        msg = (f"The transaction log has failed integrity checks. Failed verification at version "
               f"{snapshot.version} of {snapshot.table_root} (its {where} disagrees with the log):\n"
               + "\n".join(found.values()))
        if strict:
            raise VersionChecksumMismatchError(msg)
        _logger.warning("%s", msg)
    return found
