"""Delta log actions (spec "Actions") as typed models.

Owns: one dataclass per action — protocol, metaData (with format), add, remove, cdc, txn,
commitInfo, rowIdHighWaterMark, domainMetadata, checkpointMetadata, sidecar — their parsing from
the log's JSON (unknown fields and unknown actions ignored, explicit JSON nulls read as absent) and
their serialization back to the exact JSON the spec defines (optional fields omitted when unset).

Invariants stated and checked at construction (`from_dict`):
  1. required fields are present and of the right JSON type, else CorruptLogError names the action
     and the field;
  2. a single log line holds exactly one action key we know, or only unknown keys (skipped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..errors import CorruptLogError
from .deletion_vectors import DeletionVectorDescriptor
from .schema import StructType

__all__ = [
    "Action", "Protocol", "Format", "Metadata", "AddFile", "RemoveFile", "AddCDCFile",
    "SetTransaction", "CommitInfo", "RowIdHighWaterMark", "DomainMetadata", "CheckpointMetadata",
    "Sidecar", "parse_action", "parse_actions", "actions_to_json_lines", "file_key",
]


def _req(d: dict, key: str, kind: str, types: tuple | type) -> Any:
    v = d.get(key)
    if v is None or not isinstance(v, types) or (types is int and isinstance(v, bool)):
        raise CorruptLogError(f"{kind} action has a missing or invalid required field '{key}': {v!r}")
    return v


def _opt_str(d: dict, key: str, kind: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise CorruptLogError(f"{kind} action has an invalid field '{key}': {v!r}")
    return v


def _opt_map(v: Any) -> dict[str, str | None] | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise CorruptLogError(f"expected a JSON object, got {v!r}")
    return v


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


class Action:
    """Base class: every action serializes to `{<key>: {...}}`."""

    key: str = ""

    def to_dict(self) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError

    def to_action_dict(self) -> dict:
        return {self.key: self.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_action_dict(), separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Protocol(Action):
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None
    key = "protocol"

    def __post_init__(self) -> None:
        # feature lists are sets: kept sorted so equal protocols compare equal
        for name in ("reader_features", "writer_features"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, tuple(sorted(set(v))))

    @classmethod
    def from_dict(cls, d: dict) -> "Protocol":
        rf = d.get("readerFeatures")
        wf = d.get("writerFeatures")
        return cls(
            _req(d, "minReaderVersion", "protocol", int),
            _req(d, "minWriterVersion", "protocol", int),
            tuple(rf) if rf is not None else None,
            tuple(wf) if wf is not None else None,
        )

    def to_dict(self) -> dict:
        d: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            d["readerFeatures"] = sorted(self.reader_features)
        if self.writer_features is not None:
            d["writerFeatures"] = sorted(self.writer_features)
        return d


@dataclass(frozen=True)
class Format:
    provider: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict | None) -> "Format":
        if not d:
            return cls()
        return cls(d.get("provider") or "parquet", dict(d.get("options") or {}))

    def to_dict(self) -> dict:
        return {"provider": self.provider, "options": dict(self.options)}


@dataclass(frozen=True)
class Metadata(Action):
    id: str
    schema_string: str | None          # required by the spec; old hand-written logs omit it
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    format: Format = field(default_factory=Format)
    name: str | None = None
    description: str | None = None
    created_time: int | None = None
    key = "metaData"

    @classmethod
    def from_dict(cls, d: dict) -> "Metadata":
        pcs = d.get("partitionColumns")
        if pcs is None:
            pcs = []
        if not isinstance(pcs, list):
            raise CorruptLogError(f"metaData.partitionColumns must be a list, got {pcs!r}")
        conf = _opt_map(d.get("configuration")) or {}
        return cls(
            id=_req(d, "id", "metaData", str),
            schema_string=_opt_str(d, "schemaString", "metaData"),
            partition_columns=tuple(pcs),
            configuration={k: v for k, v in conf.items() if v is not None},
            format=Format.from_dict(d.get("format")),
            name=d.get("name"),
            description=d.get("description"),
            created_time=d.get("createdTime"),
        )

    def to_dict(self) -> dict:
        d: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            d["name"] = self.name
        if self.description is not None:
            d["description"] = self.description
        d["format"] = self.format.to_dict()
        d["schemaString"] = self.schema_string
        d["partitionColumns"] = list(self.partition_columns)
        d["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            d["createdTime"] = self.created_time
        return d

    @property
    def schema(self):
        """The table's logical schema (a `tahoe.protocol.schema.StructType`), parsed once."""
        cached = self.__dict__.get("_schema")
        if cached is None:
            if self.schema_string is None:
                raise CorruptLogError(f"the table's metaData (id {self.id}) has no schemaString")
            cached = StructType.from_json(self.schema_string)
            object.__setattr__(self, "_schema", cached)
        return cached


def _dv(v: Any) -> DeletionVectorDescriptor | None:
    return DeletionVectorDescriptor.from_dict(v) if v else None


def file_key(path: str, dv: DeletionVectorDescriptor | None) -> tuple[str, str | None]:
    """The primary key of a logical file: (path, deletionVector.uniqueId or None)."""
    return (path, dv.unique_id if dv is not None else None)


@dataclass(frozen=True)
class AddFile(Action):
    path: str
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None
    key = "add"

    @classmethod
    def from_dict(cls, d: dict) -> "AddFile":
        return cls(
            path=_req(d, "path", "add", str),
            partition_values=_opt_map(d.get("partitionValues")) or {},
            size=_req(d, "size", "add", int),
            modification_time=d.get("modificationTime") or 0,
            data_change=bool(d.get("dataChange", True)),
            stats=d.get("stats"),
            tags=_opt_map(d.get("tags")),
            deletion_vector=_dv(d.get("deletionVector")),
            base_row_id=d.get("baseRowId"),
            default_row_commit_version=d.get("defaultRowCommitVersion"),
            clustering_provider=d.get("clusteringProvider"),
        )

    def to_dict(self) -> dict:
        return _drop_none({
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
            "stats": self.stats,
            "tags": self.tags,
            "deletionVector": self.deletion_vector.to_dict() if self.deletion_vector else None,
            "baseRowId": self.base_row_id,
            "defaultRowCommitVersion": self.default_row_commit_version,
            "clusteringProvider": self.clustering_provider,
        })

    @property
    def key_tuple(self) -> tuple[str, str | None]:
        return file_key(self.path, self.deletion_vector)

    @property
    def num_records(self) -> int | None:
        if not self.stats:
            return None
        try:
            return json.loads(self.stats).get("numRecords")
        except ValueError:
            return None

    def remove(self, deletion_timestamp: int, data_change: bool = True) -> "RemoveFile":
        """The tombstone that logically deletes this file (extended metadata carried over)."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=deletion_timestamp,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            tags=self.tags,
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
            stats=self.stats,
        )


@dataclass(frozen=True)
class RemoveFile(Action):
    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    tags: dict[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    stats: str | None = None
    key = "remove"

    @classmethod
    def from_dict(cls, d: dict) -> "RemoveFile":
        return cls(
            path=_req(d, "path", "remove", str),
            deletion_timestamp=d.get("deletionTimestamp"),
            data_change=bool(d.get("dataChange", True)),
            extended_file_metadata=d.get("extendedFileMetadata"),
            partition_values=_opt_map(d.get("partitionValues")),
            size=d.get("size"),
            tags=_opt_map(d.get("tags")),
            deletion_vector=_dv(d.get("deletionVector")),
            base_row_id=d.get("baseRowId"),
            default_row_commit_version=d.get("defaultRowCommitVersion"),
            stats=d.get("stats"),
        )

    def to_dict(self) -> dict:
        return _drop_none({
            "path": self.path,
            "deletionTimestamp": self.deletion_timestamp,
            "dataChange": self.data_change,
            "extendedFileMetadata": self.extended_file_metadata,
            "partitionValues": self.partition_values,
            "size": self.size,
            "tags": self.tags,
            "deletionVector": self.deletion_vector.to_dict() if self.deletion_vector else None,
            "baseRowId": self.base_row_id,
            "defaultRowCommitVersion": self.default_row_commit_version,
            "stats": self.stats,
        })

    @property
    def key_tuple(self) -> tuple[str, str | None]:
        return file_key(self.path, self.deletion_vector)


@dataclass(frozen=True)
class AddCDCFile(Action):
    path: str
    partition_values: dict[str, str | None]
    size: int
    data_change: bool = False
    tags: dict[str, str | None] | None = None
    key = "cdc"

    @classmethod
    def from_dict(cls, d: dict) -> "AddCDCFile":
        return cls(
            path=_req(d, "path", "cdc", str),
            partition_values=_opt_map(d.get("partitionValues")) or {},
            size=_req(d, "size", "cdc", int),
            data_change=bool(d.get("dataChange", False)),
            tags=_opt_map(d.get("tags")),
        )

    def to_dict(self) -> dict:
        return _drop_none({
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "dataChange": self.data_change,
            "tags": self.tags,
        })


@dataclass(frozen=True)
class SetTransaction(Action):
    app_id: str
    version: int
    last_updated: int | None = None
    key = "txn"

    @classmethod
    def from_dict(cls, d: dict) -> "SetTransaction":
        return cls(_req(d, "appId", "txn", str), _req(d, "version", "txn", int), d.get("lastUpdated"))

    def to_dict(self) -> dict:
        return _drop_none({"appId": self.app_id, "version": self.version, "lastUpdated": self.last_updated})


@dataclass(frozen=True)
class CommitInfo(Action):
    """Free-form provenance. `values` keeps every field as written (implementations may store any
    JSON); the common ones are exposed as properties."""

    values: dict[str, Any]
    key = "commitInfo"

    @classmethod
    def from_dict(cls, d: dict) -> "CommitInfo":
        if not isinstance(d, dict):
            raise CorruptLogError(f"commitInfo must be a JSON object, got {d!r}")
        return cls(dict(d))

    def to_dict(self) -> dict:
        return dict(self.values)

    @property
    def timestamp(self) -> int | None:
        return self.values.get("timestamp")

    @property
    def in_commit_timestamp(self) -> int | None:
        return self.values.get("inCommitTimestamp")

    @property
    def operation(self) -> str | None:
        return self.values.get("operation")


@dataclass(frozen=True)
class RowIdHighWaterMark(Action):
    high_water_mark: int
    preserved_row_ids: bool = False
    key = "rowIdHighWaterMark"

    @classmethod
    def from_dict(cls, d: dict) -> "RowIdHighWaterMark":
        return cls(_req(d, "highWaterMark", "rowIdHighWaterMark", int), bool(d.get("preservedRowIds", False)))

    def to_dict(self) -> dict:
        return {"highWaterMark": self.high_water_mark, "preservedRowIds": self.preserved_row_ids}


@dataclass(frozen=True)
class DomainMetadata(Action):
    domain: str
    configuration: str
    removed: bool = False
    key = "domainMetadata"

    @classmethod
    def from_dict(cls, d: dict) -> "DomainMetadata":
        return cls(
            _req(d, "domain", "domainMetadata", str),
            d.get("configuration") or "",
            bool(d.get("removed", False)),
        )

    def to_dict(self) -> dict:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}


@dataclass(frozen=True)
class CheckpointMetadata(Action):
    version: int
    tags: dict[str, str | None] | None = None
    key = "checkpointMetadata"

    @classmethod
    def from_dict(cls, d: dict) -> "CheckpointMetadata":
        return cls(_req(d, "version", "checkpointMetadata", int), _opt_map(d.get("tags")))

    def to_dict(self) -> dict:
        return _drop_none({"version": self.version, "tags": self.tags})


@dataclass(frozen=True)
class Sidecar(Action):
    path: str
    size_in_bytes: int
    modification_time: int
    tags: dict[str, str | None] | None = None
    key = "sidecar"

    @classmethod
    def from_dict(cls, d: dict) -> "Sidecar":
        return cls(
            _req(d, "path", "sidecar", str),
            _req(d, "sizeInBytes", "sidecar", int),
            d.get("modificationTime") or 0,
            _opt_map(d.get("tags")),
        )

    def to_dict(self) -> dict:
        return _drop_none({
            "path": self.path, "sizeInBytes": self.size_in_bytes,
            "modificationTime": self.modification_time, "tags": self.tags,
        })


_PARSERS: dict[str, Any] = {
    c.key: c for c in (
        Protocol, Metadata, AddFile, RemoveFile, AddCDCFile, SetTransaction, CommitInfo,
        RowIdHighWaterMark, DomainMetadata, CheckpointMetadata, Sidecar,
    )
}


def parse_action(obj: dict) -> Action | None:
    """One log line's object → its action, or None when it holds only unknown actions."""
    if not isinstance(obj, dict):
        raise CorruptLogError(f"a log line must be a JSON object, got {type(obj).__name__}")
    found = None
    for k, v in obj.items():
        cls = _PARSERS.get(k)
        if cls is None or v is None:
            continue
        if found is not None:
            raise CorruptLogError(f"a log line holds more than one action: {sorted(obj)}")
        if not isinstance(v, dict):
            raise CorruptLogError(f"action '{k}' must be a JSON object, got {v!r}")
        found = cls.from_dict(v)
    return found


def parse_actions(data: bytes | str, source: str = "<log>") -> Iterator[Action]:
    """Parse a newline-delimited JSON commit file. A malformed line raises CorruptLogError naming
    `source` and the line number."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise CorruptLogError(f"{source}: line {lineno} is not valid JSON: {e}") from None
        try:
            a = parse_action(obj)
        except CorruptLogError as e:
            raise CorruptLogError(f"{source}: line {lineno}: {e}") from None
        if a is not None:
            yield a


def actions_to_json_lines(actions: Iterable[Action]) -> bytes:
    """Serialize actions as a commit file body (one JSON object per line)."""
    return ("\n".join(a.to_json() for a in actions) + "\n").encode("utf-8")
