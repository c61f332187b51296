"""UniForm (Iceberg): Iceberg metadata for a Delta table's data files, generated after each commit
(delta-spark's IcebergConverter), so Iceberg readers read the same rows without copying data.

  1. Layout: Iceberg's path-based "Hadoop table" under `<table>/metadata/` (`v<N>.metadata.json`,
     `version-hint.text`, manifest lists and manifests).
  2. Mapping: column-mapping ids as field ids, identity partitions from `partitionValues`, properties
     `delta-version` / `delta-timestamp`.
  3. Incremental: one Iceberg snapshot per Delta commit; a full conversion when partitioning changed, a
     commit is missing, more than `MAX_INCREMENTAL_COMMITS` are behind, or there is no metadata yet.
  4. A metadata file is put-if-absent; a failed conversion leaves the last good version and never fails
     the Delta commit (the next commit or `sync_iceberg` catches up)."""

from __future__ import annotations

import io
import json
import logging
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

import fastavro

from ..errors import DeltaError, IcebergCompatViolationError, InvalidTableOperationError
from ..log.delta_log import DeltaLog
from ..log.file_actions import read_commit
from ..log.snapshot import Snapshot
from ..protocol import column_mapping
from ..protocol.actions import Metadata
from ..protocol.filenames import commit_file_name
from ..protocol.iceberg_compat import uniform_iceberg_enabled
from ..protocol.partition_values import parse_partition_value
from ..protocol.schema import ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructField, StructType
from ..protocol.timestamps import now_ms
from ..storage import resolve_data_path

__all__ = ["METADATA_DIR", "DELTA_VERSION_PROPERTY", "DELTA_TIMESTAMP_PROPERTY", "convert_after_commit",
           "sync_iceberg", "latest_metadata_path", "IcebergConversionError", "MAX_INCREMENTAL_COMMITS"]

log = logging.getLogger(__name__)

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
DELTA_VERSION_PROPERTY = "delta-version"
DELTA_TIMESTAMP_PROPERTY = "delta-timestamp"
MAX_INCREMENTAL_COMMITS = 100
_PARTITION_ID_BASE = 1000
_ADDED, _EXISTING, _DELETED = 1, 0, 2


class IcebergConversionError(DeltaError):
    """The Iceberg metadata of a version could not be generated."""


# --- schema -------------------------------------------------------------------------------------

_PRIMITIVES = {"byte": "int", "short": "int", "integer": "int", "long": "long", "float": "float",
               "double": "double", "string": "string", "binary": "binary", "boolean": "boolean",
               "date": "date", "timestamp": "timestamptz", "timestamp_ntz": "timestamp"}


def _field_id(f: StructField) -> int:
    fid = column_mapping.field_id(f)
    if fid is None:
        raise IcebergConversionError(
            f"column '{f.name}' has no column mapping id (delta.columnMapping.id): Iceberg needs one per field")
    return fid


def _iceberg_type(dt: DataType) -> Any:
    if isinstance(dt, DecimalType):
        return f"decimal({dt.precision}, {dt.scale})"
    if isinstance(dt, PrimitiveType) and dt.name in _PRIMITIVES:
        return _PRIMITIVES[dt.name]
    if isinstance(dt, StructType):
        return {"type": "struct", "fields": [
            {"id": _field_id(f), "name": f.name, "required": not f.nullable, "type": _iceberg_type(f.type)}
            for f in dt.fields]}
    if isinstance(dt, (ArrayType, MapType)):
        raise IcebergCompatViolationError(
            f"Iceberg conversion of {dt.simple_string()} needs nested field ids tahoe does not assign",
            "DELTA_ICEBERG_COMPAT_VIOLATION.UNSUPPORTED_DATA_TYPE")
    raise IcebergCompatViolationError(f"Iceberg has no type for {dt.simple_string()}",
                                      "DELTA_ICEBERG_COMPAT_VIOLATION.UNSUPPORTED_DATA_TYPE")


def _max_id(dt: DataType) -> int:
    if isinstance(dt, StructType):
        return max((max(_field_id(f), _max_id(f.type)) for f in dt.fields), default=0)
    return 0


def iceberg_schema(schema: StructType, schema_id: int) -> dict:
    out = _iceberg_type(schema)
    return {"type": "struct", "schema-id": schema_id, "fields": out["fields"]}


def _partition_fields(schema: StructType, partition_columns: list[str]) -> list[dict]:
    return [{"name": c, "transform": "identity", "source-id": _field_id(schema.field(c)),
             "field-id": _PARTITION_ID_BASE + i} for i, c in enumerate(partition_columns)]


# --- Avro ---------------------------------------------------------------------------------------

def _avro_name(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        ok = ch.isascii() and (ch.isalpha() or ch == "_" or (i > 0 and ch.isdigit()))
        out.append(ch if ok else f"_x{ord(ch):X}")
    return "".join(out) or "_"


def _decimal_bytes(precision: int) -> int:
    n = 1
    while 2 ** (8 * n - 1) <= 10 ** precision:
        n += 1
    return n


def _avro_type(dt: DataType) -> Any:
    if isinstance(dt, DecimalType):
        return {"type": "fixed", "name": f"decimal_{dt.precision}_{dt.scale}", "size": _decimal_bytes(dt.precision),
                "logicalType": "decimal", "precision": dt.precision, "scale": dt.scale}
    name = dt.name  # type: ignore[attr-defined]
    if name in ("byte", "short", "integer"):
        return "int"
    if name == "date":
        return {"type": "int", "logicalType": "date"}
    if name == "timestamp":
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}
    if name == "timestamp_ntz":
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": False}
    return {"string": "string", "long": "long", "float": "float", "double": "double",
            "boolean": "boolean", "binary": "bytes"}[name]


def _manifest_schema(part_fields: list[tuple[dict, DataType]]) -> dict:
    partition = {"type": "record", "name": "r102", "fields": [
        {"name": _avro_name(pf["name"]), "type": ["null", _avro_type(dt)], "default": None, "field-id": pf["field-id"]}
        for pf, dt in part_fields]}
    data_file = {"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": partition, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {"name": "snapshot_id", "type": ["null", "long"], "default": None, "field-id": 1},
        {"name": "sequence_number", "type": ["null", "long"], "default": None, "field-id": 3},
        {"name": "file_sequence_number", "type": ["null", "long"], "default": None, "field-id": 4},
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]}


_MANIFEST_LIST_SCHEMA = fastavro.parse_schema({"type": "record", "name": "manifest_file", "fields": [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "content", "type": "int", "field-id": 517},
    {"name": "sequence_number", "type": "long", "field-id": 515},
    {"name": "min_sequence_number", "type": "long", "field-id": 516},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    {"name": "added_files_count", "type": "int", "field-id": 504},
    {"name": "existing_files_count", "type": "int", "field-id": 505},
    {"name": "deleted_files_count", "type": "int", "field-id": 506},
    {"name": "added_rows_count", "type": "long", "field-id": 512},
    {"name": "existing_rows_count", "type": "long", "field-id": 513},
    {"name": "deleted_rows_count", "type": "long", "field-id": 514},
]})


def _avro_bytes(schema: dict, records: list[dict], metadata: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema) if "__fastavro_parsed" not in schema else schema,
                    records, codec="deflate", metadata=metadata)
    return buf.getvalue()


def _read_avro(data: bytes) -> list[dict]:
    return list(fastavro.reader(io.BytesIO(data)))


# --- the table state ----------------------------------------------------------------------------

@dataclass
class _Entry:
    """One live data file of a manifest."""
    status: int
    snapshot_id: int
    sequence_number: int
    file_sequence_number: int
    data_file: dict


class _Converter:
    """One conversion: the Iceberg metadata it starts from and the one it builds."""

    def __init__(self, dlog: DeltaLog):
        self.dlog = dlog
        self.store = dlog.store
        self.root = dlog.table_root.rstrip("/")
        self.meta_dir = self.store.join(self.root, METADATA_DIR)

    # -- locations --
    def _uri(self, path: str) -> str:
        """The location Iceberg metadata records for a file at `path` (local: a file:// URI)."""
        if "://" in path:
            return path
        return "file://" + path

    def _path(self, location: str) -> str:
        return location[len("file://"):] if location.startswith("file://") else location

    # -- reading the current Iceberg state --
    def latest(self) -> tuple[int, dict] | None:
        hint = self.store.join(self.meta_dir, VERSION_HINT)
        n = 0
        try:
            n = int(self.store.read(hint).decode().strip())
        except (FileNotFoundError, ValueError):
            n = 0
        found = None
        # the hint may lag behind (written after the metadata): walk forward
        probe = max(n, 1)
        if n == 0:
            probe = 1
        while True:
            path = self.store.join(self.meta_dir, f"v{probe}.metadata.json")
            try:
                data = self.store.read(path)
            except FileNotFoundError:
                break
            found = (probe, json.loads(data))
            probe += 1
        if found is None and n > 1:
            raise IcebergConversionError(f"{hint} names version {n} but v{n}.metadata.json is missing")
        return found

    def manifests_of(self, md: dict) -> list[dict]:
        sid = md.get("current-snapshot-id")
        if sid is None or sid == -1:
            return []
        snap = next(s for s in md["snapshots"] if s["snapshot-id"] == sid)
        return _read_avro(self.store.read(self._path(snap["manifest-list"])))

    # -- writing --
    def write_manifest(self, entries: list[_Entry], spec: dict, schema_json: dict, part_fields) -> dict:
        schema = _manifest_schema(part_fields)
        records = [{"status": e.status, "snapshot_id": e.snapshot_id,
                    "sequence_number": None if e.status == _ADDED else e.sequence_number,
                    "file_sequence_number": None if e.status == _ADDED else e.file_sequence_number,
                    "data_file": e.data_file} for e in entries]
        data = _avro_bytes(schema, records, {
            "schema": json.dumps(schema_json), "schema-id": str(schema_json["schema-id"]),
            "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": str(spec["spec-id"]),
            "format-version": "2", "content": "data"})
        path = self.store.join(self.meta_dir, f"{uuid.uuid4()}-m0.avro")
        self.store.write(path, data, overwrite=False)
        return {"manifest_path": self._uri(path), "manifest_length": len(data),
                "partition_spec_id": spec["spec-id"], "content": 0}

    def read_entries(self, mf: dict) -> list[_Entry]:
        out = []
        for r in _read_avro(self.store.read(self._path(mf["manifest_path"]))):
            if r["status"] == _DELETED:
                continue
            seq = r.get("sequence_number")
            fseq = r.get("file_sequence_number")
            out.append(_Entry(r["status"], r.get("snapshot_id") or mf["added_snapshot_id"],
                              mf["sequence_number"] if seq is None else seq,
                              mf["sequence_number"] if fseq is None else fseq, r["data_file"]))
        return out


def _data_file(conv: _Converter, add: dict, part_types: list[tuple[str, str, DataType]]) -> dict:
    pv = add.get("partitionValues") or {}
    partition = {}
    for name, key, dt in part_types:
        partition[name] = parse_partition_value(pv.get(key), dt)
    stats = add.get("stats")
    n = None
    if stats:
        try:
            n = json.loads(stats).get("numRecords")
        except ValueError:
            n = None
    if n is None:
        raise IcebergCompatViolationError(
            f"IcebergCompatV requires all AddFiles to contain the numRecords statistic. AddFile "
            f"{add['path']} is missing this statistic.", "DELTA_ICEBERG_COMPAT_VIOLATION.MISSING_STATS")
    return {"content": 0, "file_path": conv._uri(resolve_data_path(conv.root, add["path"])),
            "file_format": "PARQUET", "partition": partition, "record_count": int(n),
            "file_size_in_bytes": int(add["size"])}


def _summary(operation: str, added: list[dict], deleted: list[dict], delta_version: int) -> dict:
    s = {"operation": operation, "delta-version": str(delta_version)}
    if added:
        s["added-data-files"] = str(len(added))
        s["added-records"] = str(sum(d["record_count"] for d in added))
        s["added-files-size"] = str(sum(d["file_size_in_bytes"] for d in added))
    if deleted:
        s["deleted-data-files"] = str(len(deleted))
        s["deleted-records"] = str(sum(d["record_count"] for d in deleted))
        s["removed-files-size"] = str(sum(d["file_size_in_bytes"] for d in deleted))
    return s


def _new_snapshot_id(md: dict | None) -> int:
    used = {s["snapshot-id"] for s in (md or {}).get("snapshots", [])}
    while True:
        sid = random.getrandbits(62) + 1
        if sid not in used:
            return sid


# --- conversion ---------------------------------------------------------------------------------

def _layout(metadata: Metadata):
    schema = metadata.schema
    pcols = list(metadata.partition_columns)
    mode = column_mapping.mode(metadata.configuration)
    part_types = []
    part_fields = []
    for pf, c in zip(_partition_fields(schema, pcols), pcols):
        f = schema.field(c)
        key = column_mapping.physical_name(f) if mode in ("name", "id") else f.name
        part_types.append((_avro_name(c), key, f.type))
        part_fields.append((pf, f.type))
    return schema, pcols, part_types, part_fields


def _convert(dlog: DeltaLog, target: int) -> int | None:
    """Bring the Iceberg metadata to Delta version `target`; returns the Iceberg metadata version
    written (None when it was already there)."""
    conv = _Converter(dlog)
    for _attempt in range(5):
        state = conv.latest()
        if state is not None:
            done = int(state[1].get("properties", {}).get(DELTA_VERSION_PROPERTY, -1))
            if done >= target:
                return None
        written = _convert_from(conv, state, target)
        if written is not None:
            return written
        time.sleep(random.uniform(0, 0.05))   # lost the race for v<N+1>: read it and go on
    raise IcebergConversionError(f"could not write the Iceberg metadata of version {target}: other "
                                 f"writers kept winning the next metadata version")


def _convert_from(conv: _Converter, state: tuple[int, dict] | None, target: int) -> int | None:
    snap: Snapshot = conv.dlog.snapshot(target)
    if not uniform_iceberg_enabled(snap.metadata.configuration):
        return None
    now = now_ms()
    metadata = snap.metadata
    schema, pcols, part_types, part_fields = _layout(metadata)
    n, md = (state if state is not None else (0, None))
    done = int(md["properties"].get(DELTA_VERSION_PROPERTY, -1)) if md is not None else -1

    # which commits to replay incrementally (None: a full conversion)
    commits: list[tuple[int, list[dict]]] | None = None
    if md is not None and md.get("table-uuid") == metadata.id and 0 <= target - done <= MAX_INCREMENTAL_COMMITS:
        commits = []
        spec_cols = [pf["name"] for pf in md["partition-specs"][-1]["fields"]]
        for v in range(done + 1, target + 1):
            try:
                actions = read_commit(conv.store, conv.store.join(conv.dlog.log_dir, commit_file_name(v)))
            except FileNotFoundError:
                commits = None
                break
            if any("metaData" in a and list(a["metaData"].get("partitionColumns") or []) != spec_cols for a in actions):
                commits = None
                break
            commits.append((v, actions))

    new_md = dict(md) if md is not None else {
        "format-version": 2, "table-uuid": metadata.id, "location": conv._uri(conv.root),
        "last-sequence-number": 0, "last-updated-ms": now, "last-column-id": 0, "schemas": [],
        "current-schema-id": 0, "partition-specs": [], "default-spec-id": 0, "last-partition-id": _PARTITION_ID_BASE - 1,
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
        "snapshots": [], "snapshot-log": [], "metadata-log": [], "refs": {}}
    new_md["snapshots"] = list(new_md.get("snapshots", []))
    new_md["snapshot-log"] = list(new_md.get("snapshot-log", []))
    new_md["schemas"] = list(new_md["schemas"])
    new_md["partition-specs"] = list(new_md["partition-specs"])
    if md is None or md.get("table-uuid") != metadata.id:
        # a new (or replaced, another id) table: Iceberg metadata starts over
        new_md["table-uuid"] = metadata.id
        new_md["schemas"], new_md["partition-specs"] = [], []
        new_md["snapshots"], new_md["snapshot-log"], new_md["refs"] = [], [], {}
        new_md.pop("current-snapshot-id", None)
        commits = None

    # the schema and partition spec of the target version
    schema_json = iceberg_schema(schema, 0)
    same = [s for s in new_md["schemas"] if s["fields"] == schema_json["fields"]]
    if same:
        schema_json = same[0]
    else:
        schema_json["schema-id"] = max((s["schema-id"] for s in new_md["schemas"]), default=-1) + 1
        new_md["schemas"].append(schema_json)
    new_md["current-schema-id"] = schema_json["schema-id"]
    new_md["last-column-id"] = max(int(new_md.get("last-column-id", 0)), _max_id(schema))
    spec_fields = [pf for pf, _dt in part_fields]
    specs = [s for s in new_md["partition-specs"] if s["fields"] == spec_fields]
    if specs:
        spec = specs[0]
    else:
        spec = {"spec-id": max((s["spec-id"] for s in new_md["partition-specs"]), default=-1) + 1, "fields": spec_fields}
        new_md["partition-specs"].append(spec)
    new_md["default-spec-id"] = spec["spec-id"]
    new_md["last-partition-id"] = max(int(new_md["last-partition-id"]), _PARTITION_ID_BASE - 1 + len(spec_fields))

    seq = int(new_md.get("last-sequence-number", 0))
    parent = new_md.get("current-snapshot-id")
    if parent == -1:
        parent = None

    def add_snapshot(manifests: list[dict], operation: str, added: list[dict], deleted: list[dict],
                     delta_version: int, sid: int, seq_no: int) -> None:
        nonlocal parent
        ml_path = conv.store.join(conv.meta_dir, f"snap-{sid}-1-{uuid.uuid4()}.avro")
        data = _avro_bytes(_MANIFEST_LIST_SCHEMA, manifests, {
            "snapshot-id": str(sid), "parent-snapshot-id": str(parent) if parent is not None else "null",
            "sequence-number": str(seq_no), "format-version": "2"})
        conv.store.write(ml_path, data, overwrite=False)
        snapshot = {"snapshot-id": sid, "sequence-number": seq_no, "timestamp-ms": now,
                    "summary": _summary(operation, added, deleted, delta_version),
                    "manifest-list": conv._uri(ml_path), "schema-id": schema_json["schema-id"]}
        if parent is not None:
            snapshot["parent-snapshot-id"] = parent
        new_md["snapshots"].append(snapshot)
        new_md["snapshot-log"].append({"timestamp-ms": now, "snapshot-id": sid})
        new_md["current-snapshot-id"] = sid
        new_md["refs"] = {"main": {"snapshot-id": sid, "type": "branch"}}
        parent = sid

    def manifest_record(info: dict, entries: list[_Entry], sid: int, seq_no: int) -> dict:
        return {**info, "sequence_number": seq_no,
                "min_sequence_number": min((e.sequence_number if e.status != _ADDED else seq_no for e in entries),
                                           default=seq_no),
                "added_snapshot_id": sid,
                "added_files_count": sum(1 for e in entries if e.status == _ADDED),
                "existing_files_count": sum(1 for e in entries if e.status == _EXISTING),
                "deleted_files_count": sum(1 for e in entries if e.status == _DELETED),
                "added_rows_count": sum(e.data_file["record_count"] for e in entries if e.status == _ADDED),
                "existing_rows_count": sum(e.data_file["record_count"] for e in entries if e.status == _EXISTING),
                "deleted_rows_count": sum(e.data_file["record_count"] for e in entries if e.status == _DELETED)}

    if commits is None:
        # full conversion: every active file of the target version, one snapshot
        files = snap.files_table(["path", "partitionValues", "size", "stats"]).to_pylist()
        seq += 1
        sid = _new_snapshot_id(new_md)
        entries = [_Entry(_ADDED, sid, seq, seq, _data_file(conv, {**f, "partitionValues": dict(f["partitionValues"] or {})}, part_types))
                   for f in files]
        manifests = []
        if entries:
            info = conv.write_manifest(entries, spec, schema_json, part_fields)
            manifests.append(manifest_record(info, entries, sid, seq))
        add_snapshot(manifests, "overwrite" if state is not None else "append",
                     [e.data_file for e in entries], [], target, sid, seq)
    else:
        current = conv.manifests_of(new_md) if parent is not None else []
        for v, actions in commits:
            adds = [a["add"] for a in actions if "add" in a]
            removes = [a["remove"] for a in actions if "remove" in a]
            if not adds and not removes:
                continue
            seq += 1
            sid = _new_snapshot_id(new_md)
            removed_paths = {conv._uri(resolve_data_path(conv.root, r["path"])) for r in removes}
            # an add and a remove of the same path in one commit (a DV update) is a replacement
            new_manifests = []
            deleted_files: list[dict] = []
            found: set[str] = set()
            for mf in current:
                if not removed_paths:
                    new_manifests.append(mf)
                    continue
                entries = conv.read_entries(mf)
                hit = [e for e in entries if e.data_file["file_path"] in removed_paths]
                if not hit:
                    new_manifests.append(mf)
                    continue
                rewritten = []
                for e in entries:
                    if e.data_file["file_path"] in removed_paths:
                        found.add(e.data_file["file_path"])
                        deleted_files.append(e.data_file)
                        rewritten.append(_Entry(_DELETED, sid, e.sequence_number, e.file_sequence_number, e.data_file))
                    else:
                        rewritten.append(_Entry(_EXISTING, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                                                e.data_file))
                info = conv.write_manifest(rewritten, spec, schema_json, part_fields)
                new_manifests.append(manifest_record(info, rewritten, sid, seq))
            missing = removed_paths - found
            if missing:
                # the Iceberg state does not list a file Delta removes: rebuild from the snapshot
                return _convert_full_instead(conv, state, target)
            added_entries = [_Entry(_ADDED, sid, seq, seq, _data_file(conv, a, part_types)) for a in adds]
            if added_entries:
                info = conv.write_manifest(added_entries, spec, schema_json, part_fields)
                new_manifests.insert(0, manifest_record(info, added_entries, sid, seq))
            op = "append" if not removes else ("delete" if not adds else "overwrite")
            add_snapshot(new_manifests, op, [e.data_file for e in added_entries], deleted_files, v, sid, seq)
            current = new_manifests

    new_md["last-sequence-number"] = seq
    new_md["last-updated-ms"] = now
    props = dict(new_md.get("properties", {}))
    props[DELTA_VERSION_PROPERTY] = str(target)
    props[DELTA_TIMESTAMP_PROPERTY] = str(snap.timestamp)
    props["format-version"] = "2"
    new_md["properties"] = props
    if state is not None:
        new_md["metadata-log"] = list(new_md.get("metadata-log", [])) + [
            {"timestamp-ms": int(md.get("last-updated-ms", now)),
             "metadata-file": conv._uri(conv.store.join(conv.meta_dir, f"v{n}.metadata.json"))}]
    path = conv.store.join(conv.meta_dir, f"v{n + 1}.metadata.json")
    try:
        conv.store.write(path, json.dumps(new_md, indent=2).encode(), overwrite=False)
    except FileExistsError:
        return None
    conv.store.write(conv.store.join(conv.meta_dir, VERSION_HINT), str(n + 1).encode(), overwrite=True)
    return n + 1


def _convert_full_instead(conv: _Converter, state, target: int) -> int | None:
    log.warning("UniForm: the Iceberg metadata of %s does not list a file Delta removes; converting "
                "version %s in full", conv.root, target)
    n, md = state
    md = {**md, "properties": {**md.get("properties", {}), DELTA_VERSION_PROPERTY: str(-MAX_INCREMENTAL_COMMITS - 10)}}
    return _convert_from(conv, (n, md), target)


def convert_after_commit(dlog: DeltaLog, version: int) -> int | None:
    """The post-commit step of a UniForm table: Iceberg metadata up to Delta `version` (catching
    up every version a failed or skipped conversion missed). Returns the Iceberg metadata version
    written, None when there was nothing to do."""
    return _convert(dlog, version)


def sync_iceberg(path: str, storage_options: dict | None = None) -> int | None:
    """Generate the Iceberg metadata of the latest version of a UniForm table now (what a
    failed post-commit conversion left undone; delta-spark's `REORG ... UPGRADE UNIFORM` /
    `MSCK REPAIR TABLE ... SYNC METADATA` role). Returns the Iceberg metadata version written,
    None when it was current. A table without UniForm is refused."""
    dlog = DeltaLog.for_table(path, storage_options)
    snap = dlog.snapshot()
    if not uniform_iceberg_enabled(snap.metadata.configuration):
        raise InvalidTableOperationError(
            f"{path} is not a UniForm table (delta.universalFormat.enabledFormats does not name iceberg)")
    return _convert(dlog, snap.version)


def latest_metadata_path(path: str, storage_options: dict | None = None) -> str | None:
    """The newest `metadata/v<N>.metadata.json` of a UniForm table (what an Iceberg reader opens,
    e.g. pyiceberg's `StaticTable.from_metadata`), None when there is none yet."""
    conv = _Converter(DeltaLog.for_table(path, storage_options))
    state = conv.latest()
    if state is None:
        return None
    return conv.store.join(conv.meta_dir, f"v{state[0]}.metadata.json")
