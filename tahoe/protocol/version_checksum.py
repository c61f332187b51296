"""Version checksum files (`<v>.crc`, spec "Version Checksum File"): the content (`VersionChecksum`), its JSON
form as delta-spark writes it, the histograms, deriving v's checksum from v-1's and commit v, and comparing
with a replay (spec "State Validation"). Pure: the I/O is `tahoe.log.crc`.

  1. The histogram is written as `fileSizeHistogram`, read under that or delta-spark's `histogramOpt`.
  2. Absent optional fields mean "not recorded", never "empty": `setTransactions` only with at most 100 and
     no `delta.setTransactionRetentionDuration`, `domainMetadata` only with at most 10 domains."""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from ..errors import CorruptLogError
from .actions import DomainMetadata, Metadata, Protocol, SetTransaction

__all__ = [
    "VersionChecksum", "FileSizeHistogram", "DeletedRecordCountsHistogram", "FileChange",
    "FILE_SIZE_BINS", "MAX_SET_TRANSACTIONS", "MAX_DOMAIN_METADATA", "derive_next",
    "empty_checksum", "mismatches", "limit_set_transactions", "limit_domains",
]

_KB = 1024
_MB = 1024 * _KB
_GB = 1024 * _MB

# delta-spark's FileSizeHistogram.DEFAULT_BINS (exponential, finer around 128 MB)
FILE_SIZE_BINS: tuple[int, ...] = (
    0,
    8 * _KB, 16 * _KB, 32 * _KB, 64 * _KB, 128 * _KB, 256 * _KB, 512 * _KB, 1 * _MB, 2 * _MB, 4 * _MB,
    8 * _MB, 12 * _MB, 16 * _MB, 20 * _MB, 24 * _MB, 28 * _MB, 32 * _MB, 36 * _MB, 40 * _MB,
    48 * _MB, 56 * _MB, 64 * _MB, 72 * _MB, 80 * _MB, 88 * _MB, 96 * _MB, 104 * _MB, 112 * _MB, 120 * _MB,
    124 * _MB, 128 * _MB, 132 * _MB, 136 * _MB, 140 * _MB, 144 * _MB,
    160 * _MB, 176 * _MB, 192 * _MB, 208 * _MB, 224 * _MB, 240 * _MB, 256 * _MB, 272 * _MB, 288 * _MB,
    304 * _MB, 320 * _MB, 336 * _MB, 352 * _MB, 368 * _MB, 384 * _MB, 400 * _MB, 416 * _MB, 432 * _MB,
    448 * _MB, 464 * _MB, 480 * _MB, 496 * _MB, 512 * _MB, 528 * _MB, 544 * _MB, 560 * _MB, 576 * _MB,
    640 * _MB, 704 * _MB, 768 * _MB, 832 * _MB, 896 * _MB, 960 * _MB,
    1024 * _MB, 1088 * _MB, 1152 * _MB, 1216 * _MB, 1280 * _MB, 1344 * _MB, 1408 * _MB,
    1536 * _MB, 1664 * _MB, 1792 * _MB, 1920 * _MB, 2048 * _MB,
    2304 * _MB, 2560 * _MB, 2816 * _MB, 3072 * _MB, 3328 * _MB, 3584 * _MB, 3840 * _MB, 4 * _GB,
    8 * _GB, 16 * _GB, 32 * _GB, 64 * _GB, 128 * _GB, 256 * _GB,
)

# delta-spark's setTransactionsInCrc.maxAllowed / domainMetadatasInCrc.maxAllowed
MAX_SET_TRANSACTIONS = 100
MAX_DOMAIN_METADATA = 10

# DeletedRecordCountsHistogram: the lower bound of each of its 10 bins (spec)
_DELETED_RECORD_BINS = (0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000, 2_147_483_647)


def _long(d: dict, key: str, where: str) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool):
        raise CorruptLogError(f"{where}: '{key}' must be an integer, got {v!r}")
    return v


def _opt_long(d: dict, key: str, where: str) -> int | None:
    return None if d.get(key) is None else _long(d, key, where)


def _long_list(d: dict, key: str, where: str) -> list[int]:
    v = d.get(key)
    # JSON gives exact ints (never subclasses other than bool): one pass over the element types
    if not isinstance(v, list) or not {type(x) for x in v} <= {int}:
        raise CorruptLogError(f"{where}: '{key}' must be a list of integers")
    return list(v)


@dataclass
class FileSizeHistogram:
    """Files and bytes per size bin: bin i holds sizes in [bounds[i], bounds[i+1])."""
    sorted_bin_boundaries: tuple[int, ...] = FILE_SIZE_BINS
    file_counts: list[int] = field(default_factory=lambda: [0] * len(FILE_SIZE_BINS))
    total_bytes: list[int] = field(default_factory=lambda: [0] * len(FILE_SIZE_BINS))

    def _bin(self, size: int) -> int:
        return bisect.bisect_right(self.sorted_bin_boundaries, size) - 1

    def insert(self, size: int) -> None:
        i = self._bin(size)
        if i >= 0:
            self.file_counts[i] += 1
            self.total_bytes[i] += size

    def remove(self, size: int) -> None:
        i = self._bin(size)
        if i >= 0:
            self.file_counts[i] -= 1
            self.total_bytes[i] -= size

    @classmethod
    def of_sizes(cls, sizes: Iterable[int]) -> "FileSizeHistogram":
        h = cls()
        for s in sizes:
            h.insert(int(s))
        return h

    def copy(self) -> "FileSizeHistogram":
        return FileSizeHistogram(tuple(self.sorted_bin_boundaries), list(self.file_counts), list(self.total_bytes))

    def to_dict(self) -> dict:
        return {"sortedBinBoundaries": list(self.sorted_bin_boundaries), "fileCounts": list(self.file_counts),
                "totalBytes": list(self.total_bytes)}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "FileSizeHistogram":
        if not isinstance(d, dict):
            raise CorruptLogError(f"{where}: fileSizeHistogram must be an object")
        bounds = _long_list(d, "sortedBinBoundaries", where)
        counts = _long_list(d, "fileCounts", where)
        total = _long_list(d, "totalBytes", where)
        if not bounds or bounds[0] != 0 or bounds != sorted(bounds) or not len(bounds) == len(counts) == len(total):
            raise CorruptLogError(f"{where}: fileSizeHistogram bins must start at 0, be sorted and "
                                  f"match fileCounts and totalBytes in length")
        return cls(tuple(bounds), counts, total)


@dataclass
class DeletedRecordCountsHistogram:
    """Files per number of rows their deletion vector deletes (10 bins, spec)."""
    deleted_record_counts: list[int] = field(default_factory=lambda: [0] * 10)

    def insert(self, n: int) -> None:
        self.deleted_record_counts[bisect.bisect_right(_DELETED_RECORD_BINS, n) - 1] += 1

    def remove(self, n: int) -> None:
        self.deleted_record_counts[bisect.bisect_right(_DELETED_RECORD_BINS, n) - 1] -= 1

    def copy(self) -> "DeletedRecordCountsHistogram":
        return DeletedRecordCountsHistogram(list(self.deleted_record_counts))

    def to_dict(self) -> dict:
        return {"deletedRecordCounts": list(self.deleted_record_counts)}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> "DeletedRecordCountsHistogram":
        if not isinstance(d, dict):
            raise CorruptLogError(f"{where}: deletedRecordCountsHistogramOpt must be an object")
        counts = _long_list(d, "deletedRecordCounts", where)
        if len(counts) != 10:
            raise CorruptLogError(f"{where}: deletedRecordCounts must have 10 bins, got {len(counts)}")
        return cls(counts)


@dataclass(frozen=True)
class VersionChecksum:
    """The content of one `.crc` file. JSON fields in delta-spark's order: txnId, tableSizeBytes, numFiles,
    numDeletedRecordsOpt, numDeletionVectorsOpt, numMetadata, numProtocol, inCommitTimestampOpt,
    setTransactions, domainMetadata, metadata, protocol, fileSizeHistogram, deletedRecordCountsHistogramOpt,
    allFiles."""
    table_size_bytes: int
    num_files: int
    metadata: Metadata
    protocol: Protocol
    num_metadata: int = 1
    num_protocol: int = 1
    txn_id: str | None = None
    in_commit_timestamp: int | None = None
    set_transactions: tuple[SetTransaction, ...] | None = None
    domain_metadata: tuple[DomainMetadata, ...] | None = None
    file_size_histogram: FileSizeHistogram | None = None
    num_deleted_records: int | None = None
    num_deletion_vectors: int | None = None
    deleted_record_counts_histogram: DeletedRecordCountsHistogram | None = None
    all_files: tuple[dict, ...] | None = None      # read only: tahoe does not write allFiles

    def to_dict(self) -> dict:
        d: dict[str, Any] = {}
        if self.txn_id is not None:
            d["txnId"] = self.txn_id
        d["tableSizeBytes"] = self.table_size_bytes
        d["numFiles"] = self.num_files
        if self.num_deleted_records is not None:
            d["numDeletedRecordsOpt"] = self.num_deleted_records
        if self.num_deletion_vectors is not None:
            d["numDeletionVectorsOpt"] = self.num_deletion_vectors
        d["numMetadata"] = self.num_metadata
        d["numProtocol"] = self.num_protocol
        if self.in_commit_timestamp is not None:
            d["inCommitTimestampOpt"] = self.in_commit_timestamp
        if self.set_transactions is not None:
            d["setTransactions"] = [t.to_dict() for t in self.set_transactions]
        if self.domain_metadata is not None:
            d["domainMetadata"] = [m.to_dict() for m in self.domain_metadata]
        d["metadata"] = self.metadata.to_dict()
        d["protocol"] = self.protocol.to_dict()
        if self.file_size_histogram is not None:
            d["fileSizeHistogram"] = self.file_size_histogram.to_dict()
        if self.deleted_record_counts_histogram is not None:
            d["deletedRecordCountsHistogramOpt"] = self.deleted_record_counts_histogram.to_dict()
        if self.all_files is not None:
            d["allFiles"] = list(self.all_files)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str | bytes, where: str = ".crc file") -> "VersionChecksum":
        """Parse a `.crc` file's content; CorruptLogError naming `where` when it is not one."""
        try:
            obj = json.loads(text)
        except ValueError as e:
            raise CorruptLogError(f"{where} is not valid JSON: {e}") from None
        return cls.from_dict(obj, where)

    @classmethod
    def from_dict(cls, d: Any, where: str = ".crc file") -> "VersionChecksum":
        if not isinstance(d, dict):
            raise CorruptLogError(f"{where} must hold one JSON object")
        md, proto = d.get("metadata"), d.get("protocol")
        if not isinstance(md, dict) or not isinstance(proto, dict):
            raise CorruptLogError(f"{where} has no metadata or protocol object")
        try:
            metadata = Metadata.from_dict(md)
            protocol = Protocol.from_dict(proto)
            txns = d.get("setTransactions")
            doms = d.get("domainMetadata")
            hist = d.get("fileSizeHistogram", d.get("histogramOpt"))
            dhist = d.get("deletedRecordCountsHistogramOpt")
            files = d.get("allFiles")
            txn_id = d.get("txnId")
            return cls(
                table_size_bytes=_long(d, "tableSizeBytes", where),
                num_files=_long(d, "numFiles", where),
                metadata=metadata,
                protocol=protocol,
                num_metadata=_long(d, "numMetadata", where),
                num_protocol=_long(d, "numProtocol", where),
                txn_id=txn_id if isinstance(txn_id, str) else None,
                in_commit_timestamp=_opt_long(d, "inCommitTimestampOpt", where),
                set_transactions=None if txns is None else tuple(SetTransaction.from_dict(t) for t in txns),
                domain_metadata=None if doms is None else tuple(DomainMetadata.from_dict(x) for x in doms),
                file_size_histogram=None if hist is None else FileSizeHistogram.from_dict(hist, where),
                num_deleted_records=_opt_long(d, "numDeletedRecordsOpt", where),
                num_deletion_vectors=_opt_long(d, "numDeletionVectorsOpt", where),
                deleted_record_counts_histogram=None if dhist is None else DeletedRecordCountsHistogram.from_dict(dhist, where),
                all_files=None if files is None else tuple(files),
            )
        except CorruptLogError:
            raise
        except (TypeError, AttributeError, KeyError, ValueError) as e:
            raise CorruptLogError(f"{where} is not a valid version checksum: {e}") from None


def limit_set_transactions(txns: Iterable[SetTransaction], retention_set: bool) -> tuple[SetTransaction, ...] | None:
    """The setTransactions to record: all of them sorted by appId, or None (not recorded) when a
    retention duration makes them time-dependent or there are more than the limit."""
    if retention_set:
        return None
    out = tuple(sorted(txns, key=lambda t: t.app_id))
    return out if len(out) <= MAX_SET_TRANSACTIONS else None


def limit_domains(domains: Iterable[DomainMetadata]) -> tuple[DomainMetadata, ...] | None:
    out = tuple(sorted((d for d in domains if not d.removed), key=lambda d: d.domain))
    return out if len(out) <= MAX_DOMAIN_METADATA else None


def empty_checksum(metadata: Metadata, protocol: Protocol, dv_metrics: bool) -> VersionChecksum:
    """The state before version 0: no files, no transactions, no domains."""
    return VersionChecksum(
        table_size_bytes=0, num_files=0, metadata=metadata, protocol=protocol,
        set_transactions=(), domain_metadata=(), file_size_histogram=FileSizeHistogram(),
        num_deleted_records=0 if dv_metrics else None, num_deletion_vectors=0 if dv_metrics else None,
        deleted_record_counts_histogram=DeletedRecordCountsHistogram() if dv_metrics else None)


@dataclass(frozen=True)
class FileChange:
    """One logical file entering (+1) or leaving (-1) the active set: its size and the number of
    rows its deletion vector deletes (None: no deletion vector)."""
    sign: int
    size: int
    dv_cardinality: int | None = None


def derive_next(prev: VersionChecksum, changes: Iterable[FileChange], *, metadata: Metadata | None,
                protocol: Protocol | None, txns: Iterable[SetTransaction], domains: Iterable[DomainMetadata],
                in_commit_timestamp: int | None, txn_id: str | None, dv_metrics: bool,
                txn_retention_set: bool) -> VersionChecksum:
    """The checksum of version v from `prev` (version v-1's) and what commit v changed: the
    active-set `changes`, the new metaData/protocol (None: unchanged), its txn and domainMetadata
    actions, its inCommitTimestamp. DV metrics are carried when `dv_metrics` (deletion vectors
    writable, or readable and already counted) and `prev` has them; the histograms when `prev`
    has them."""
    size, n = prev.table_size_bytes, prev.num_files
    hist = prev.file_size_histogram.copy() if prev.file_size_histogram is not None else None
    keep_dv = dv_metrics and prev.num_deletion_vectors is not None and prev.num_deleted_records is not None
    n_dv = prev.num_deletion_vectors if keep_dv else None
    n_deleted = prev.num_deleted_records if keep_dv else None
    dhist = prev.deleted_record_counts_histogram.copy() \
        if keep_dv and prev.deleted_record_counts_histogram is not None else None
    for c in changes:
        size += c.sign * c.size
        n += c.sign
        if hist is not None:
            (hist.insert if c.sign > 0 else hist.remove)(c.size)
        if n_dv is not None and n_deleted is not None:
            card = c.dv_cardinality or 0
            n_dv += c.sign * (1 if c.dv_cardinality is not None else 0)
            n_deleted += c.sign * card
            if dhist is not None:
                (dhist.insert if c.sign > 0 else dhist.remove)(card)
    txns = list(txns)
    set_txns = None
    if prev.set_transactions is not None:
        by_app = {t.app_id: t for t in prev.set_transactions}
        by_app.update({t.app_id: t for t in txns})
        set_txns = limit_set_transactions(by_app.values(), txn_retention_set)
    dom = None
    if prev.domain_metadata is not None:
        by_name = {d.domain: d for d in prev.domain_metadata}
        for d in domains:
            if d.removed:
                by_name.pop(d.domain, None)
            else:
                by_name[d.domain] = d
        dom = limit_domains(by_name.values())
    return replace(
        prev, table_size_bytes=size, num_files=n, num_metadata=1, num_protocol=1,
        metadata=metadata if metadata is not None else prev.metadata,
        protocol=protocol if protocol is not None else prev.protocol,
        txn_id=txn_id, in_commit_timestamp=in_commit_timestamp, set_transactions=set_txns,
        domain_metadata=dom, file_size_histogram=hist, num_deleted_records=n_deleted,
        num_deletion_vectors=n_dv, deleted_record_counts_histogram=dhist, all_files=None)


def mismatches(recorded: VersionChecksum, computed: VersionChecksum) -> dict[str, str]:
    """Field → message for every field where a recorded checksum disagrees with one computed by
    replay (spec "State Validation"); optional fields are compared when both sides have them."""
    out: dict[str, str] = {}

    def cmp(name: str, title: str, expected: Any, found: Any) -> None:
        if expected is not None and found is not None and expected != found:
            out[name] = f"{title} - Expected: {expected} Computed: {found}"

    cmp("tableSizeBytes", "Table size (bytes)", recorded.table_size_bytes, computed.table_size_bytes)
    cmp("numFiles", "Number of files", recorded.num_files, computed.num_files)
    cmp("numMetadata", "Metadata updates", recorded.num_metadata, 1)
    cmp("numProtocol", "Protocol updates", recorded.num_protocol, 1)
    if recorded.metadata != computed.metadata:
        out["metadata"] = f"Metadata mismatch - Expected: {recorded.metadata.to_json()} Computed: {computed.metadata.to_json()}"
    if recorded.protocol != computed.protocol:
        out["protocol"] = f"Protocol mismatch - Expected: {recorded.protocol.to_json()} Computed: {computed.protocol.to_json()}"
    cmp("numDeletedRecordsOpt", "Number of deleted records", recorded.num_deleted_records, computed.num_deleted_records)
    cmp("numDeletionVectorsOpt", "Number of deletion vectors", recorded.num_deletion_vectors, computed.num_deletion_vectors)
    if recorded.set_transactions is not None and computed.set_transactions is not None and \
            set(recorded.set_transactions) != set(computed.set_transactions):
        out["setTransactions"] = "SetTransaction mismatch"
    if recorded.domain_metadata is not None and computed.domain_metadata is not None and \
            set(recorded.domain_metadata) != set(computed.domain_metadata):
        out["domainMetadata"] = "domainMetadata mismatch"
    rh, ch = recorded.file_size_histogram, computed.file_size_histogram
    if rh is not None and ch is not None:
        if tuple(rh.sorted_bin_boundaries) == tuple(ch.sorted_bin_boundaries):
            if rh.file_counts != ch.file_counts:
                out["fileSizeHistogram"] = "FileSizeHistogram mismatch in file counts"
            elif rh.total_bytes != ch.total_bytes:
                out["fileSizeHistogram"] = "FileSizeHistogram mismatch in file sizes"
        else:   # another writer's bins: the totals must still agree
            if sum(rh.file_counts) != computed.num_files or sum(rh.total_bytes) != computed.table_size_bytes:
                out["fileSizeHistogram"] = "FileSizeHistogram totals disagree with the files"
    rd, cd = recorded.deleted_record_counts_histogram, computed.deleted_record_counts_histogram
    if rd is not None and cd is not None and rd.deleted_record_counts != cd.deleted_record_counts:
        out["deletedRecordCountsHistogramOpt"] = "DeletedRecordCountsHistogram mismatch"
    cmp("inCommitTimestampOpt", "In-commit timestamp", recorded.in_commit_timestamp, computed.in_commit_timestamp)
    if recorded.all_files is not None:
        found = computed.all_files
        if found is not None:
            want = sorted((str(f.get("path")), f.get("size")) for f in recorded.all_files if isinstance(f, dict))
            have = sorted((str(f.get("path")), f.get("size")) for f in found)
            if want != have:
                out["allFiles"] = f"allFiles mismatch - Expected {len(want)} files, computed {len(have)}"
    return out
