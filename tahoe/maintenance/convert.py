"""CONVERT TO DELTA: a directory of parquet files becomes a Delta table in place, no data file rewritten
(delta-spark's ConvertToDeltaCommand; delta-rs's `convert_to_deltalake`).

  1. Listed files (hidden `_`/`.` names skipped) must be parquet, under the Hive directories of
     `partition_by` in order; only footers are read.
  2. Schema: the files' merged (a type differing between files is a SchemaError naming both), all nullable;
     INT96 is `timestamp`, other zone-less timestamps `timestamp_ntz`.
  3. Stats from footers unless `collect_stats=False`; ONE commit, version 0, operation `CONVERT`.
  4. Refused, nothing written: an existing Delta table (TableAlreadyExistsError; `mode="ignore"` leaves it),
     no parquet files, a non-parquet file, a misplaced file (InvalidTableOperationError)."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import (
    CorruptLogError, InvalidOptionError, InvalidTableOperationError, SchemaError, TableAlreadyExistsError,
)
from ..log import DeltaLog
from ..protocol.actions import AddFile, Metadata
from ..protocol.partition_values import (
    HIVE_DEFAULT_PARTITION, parse_partition_value, serialize_partition_value, unescape_path_name,
)
from ..protocol.properties import data_skipping_settings, normalize_properties
from ..protocol.schema import (
    TIMESTAMP, ArrayType, DataType, MapType, StructField, StructType, from_arrow_type,
)
from ..protocol.stats import stats_columns
from ..protocol.timestamps import now_ms
from ..storage import DirStatus
from ..txn import Transaction, parse_ddl
from ..storage import encode_log_path
from ..write.footer_stats import footer_stats
from .vacuum import is_hidden

__all__ = ["convert_to_delta", "scan_parquet", "ParquetScan", "parse_partition_schema"]

Progress = Callable[[str, int, int], None]


def parse_partition_schema(partition_by: Any) -> StructType | None:
    """The partition schema from DDL text (`"day DATE, country STRING"`), a tahoe StructType or
    a pyarrow Schema (as delta-rs takes it); None for an unpartitioned table."""
    if partition_by is None:
        return None
    if isinstance(partition_by, StructType):
        return partition_by
    if isinstance(partition_by, pa.Schema):
        return StructType([StructField(f.name, from_arrow_type(f.type), True) for f in partition_by])
    if isinstance(partition_by, str):
        if not partition_by.strip():
            return None

        return parse_ddl(partition_by)
    raise InvalidOptionError(
        f"partition schema must be DDL text ('day DATE, country STRING'), a StructType or a pyarrow "
        f"Schema; got {type(partition_by).__name__}")


def _merge(a: DataType, b: DataType, column: str, files: tuple[str, str]) -> DataType:
    if a == b:
        return a
    if isinstance(a, StructType) and isinstance(b, StructType):
        return _merge_structs(a, b, column + ".", files)
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(_merge(a.element_type, b.element_type, column + ".element", files), True)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return MapType(_merge(a.key_type, b.key_type, column + ".key", files),
                       _merge(a.value_type, b.value_type, column + ".value", files), True)
    raise SchemaError(
        f"cannot convert to Delta: the parquet files' schemas do not merge — column '{column}' is "
        f"{a.simple_string()} in {files[0]} and {b.simple_string()} in {files[1]}")


def _merge_structs(a: StructType, b: StructType, prefix: str, files: tuple[str, str]) -> StructType:
    fields = {f.name: f for f in a.fields}
    order = [f.name for f in a.fields]
    for f in b.fields:
        if f.name in fields:
            merged = _merge(fields[f.name].type, f.type, prefix + f.name, files)
            fields[f.name] = StructField(f.name, merged, True)
        else:
            fields[f.name] = StructField(f.name, f.type, True)
            order.append(f.name)
    return StructType([fields[n] for n in order])


def _nullable(dt: DataType) -> DataType:
    if isinstance(dt, StructType):
        return StructType([StructField(f.name, _nullable(f.type), True) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_nullable(dt.element_type), True)
    if isinstance(dt, MapType):
        return MapType(_nullable(dt.key_type), _nullable(dt.value_type), True)
    return dt


def _file_schema(md: pq.FileMetaData, where: str) -> StructType:
    arrow = md.schema.to_arrow_schema()
    int96 = {md.schema.column(i).path for i in range(len(md.schema))
             if md.schema.column(i).physical_type == "INT96"}
    fields = []
    for f in arrow:
        try:
            dt = TIMESTAMP if f.name in int96 else from_arrow_type(f.type)
        except SchemaError as e:
            raise SchemaError(f"cannot convert {where} to Delta: column '{f.name}': {e}") from None
        fields.append(StructField(f.name, _nullable(dt), True))
    return StructType(fields)


def _partition_values(rel: str, part: StructType | None) -> dict[str, str | None]:
    dirs = rel.split("/")[:-1]
    names = [f.name for f in part.fields] if part is not None else []
    found = [d.partition("=")[0] for d in dirs]
    if len(dirs) != len(names) or any("=" not in d for d in dirs) or \
            [unescape_path_name(n).lower() for n in found] != [n.lower() for n in names]:
        raise InvalidTableOperationError(
            f"cannot convert to Delta: {rel} is not in the partition directories "
            f"{'/'.join(n + '=...' for n in names) or '(none: files at the top of the directory)'}; "
            f"expecting {len(names)} partition column(s) {names}, found "
            f"{[unescape_path_name(n) for n in found if n]} from its path"
            + ("" if part is not None else " — give the partition schema (e.g. 'day DATE')"))
    out: dict[str, str | None] = {}
    for d, f in zip(dirs, part.fields if part is not None else []):
        raw = unescape_path_name(d.partition("=")[2])
        if raw == HIVE_DEFAULT_PARTITION or raw == "":
            out[f.name] = None
            continue
        try:
            value = parse_partition_value(raw, f.type)
        except CorruptLogError:
            raise InvalidTableOperationError(
                f"cannot convert to Delta: partition directory '{d}' of {rel}: {raw!r} is not a valid "
                f"{f.type.simple_string()} value for partition column '{f.name}'") from None
        out[f.name] = serialize_partition_value(value, f.type)
    return out


@dataclasses.dataclass
class ParquetScan:
    """A directory of parquet files read as a Delta table would hold them: its schema, partition
    columns and one AddFile per file (paths relative to `root`)."""

    root: str
    schema: StructType
    partition_columns: list[str]
    adds: list[AddFile]
    configuration: dict[str, str]
    records: int | None          # None: no stats collected


def convert_to_delta(path: str, partition_by: Any = None, *, collect_stats: bool = True, mode: str = "error",
                     name: str | None = None, description: str | None = None,
                     configuration: dict[str, str] | None = None, storage_options: dict | None = None,
                     max_workers: int = 8, progress: Progress | None = None) -> dict[str, Any]:
    """CONVERT the parquet files under `path` to a Delta table (see the module docstring).
    Returns {"numConvertedFiles", "version", "partitionColumns", "sizeInBytes", "numRecords" (when
    stats were collected)}; with mode="ignore" and a table already there, {"version": its version,
    "numConvertedFiles": 0}."""
    if mode not in ("error", "ignore"):
        raise InvalidOptionError(f"mode must be 'error' or 'ignore', got {mode!r}")
    log = DeltaLog.for_table(path, storage_options)
    if log.exists():
        if mode == "ignore":
            return {"numConvertedFiles": 0, "version": log.snapshot().version}
        raise TableAlreadyExistsError(f"cannot convert {log.table_root} to Delta: it is already a Delta table "
                                      f"(version {log.snapshot().version})")
    scan = scan_parquet(path, partition_by, collect_stats=collect_stats, configuration=configuration,
                        storage_options=storage_options, max_workers=max_workers, progress=progress)
    adds, part_names = scan.adds, scan.partition_columns
    md = Metadata(id=str(uuid.uuid4()), schema_string=scan.schema.to_json(), partition_columns=tuple(part_names),
                  configuration=scan.configuration, name=name, description=description,
                  created_time=now_ms())
    params = {"numFiles": len(adds), "partitionedBy": json.dumps(part_names), "collectStats": collect_stats,
              "sourceFormat": "parquet"}
    txn = Transaction(log, "CONVERT", params, new_table=True)
    txn.update_metadata(md)
    txn.add_files(adds)
    version = txn.commit(operation_metrics={"numConvertedFiles": len(adds)})
    out: dict[str, Any] = {"numConvertedFiles": len(adds), "version": version, "partitionColumns": part_names,
                           "sizeInBytes": sum(a.size for a in adds)}
    if collect_stats:
        out["numRecords"] = scan.records
    return out


def scan_parquet(path: str, partition_by: Any = None, *, collect_stats: bool = True,
                 configuration: dict[str, str] | None = None, storage_options: dict | None = None,
                 max_workers: int = 8, progress: Progress | None = None) -> ParquetScan:
    """The parquet files under `path` as a Delta table's schema and AddFiles (the listing,
    footers, partition values and stats of CONVERT; nothing is written). Shared by CONVERT TO
    DELTA and a shallow CLONE of a parquet table."""
    if max_workers < 1:
        raise InvalidOptionError(f"max_workers must be >= 1, got {max_workers}")
    part = parse_partition_schema(partition_by)
    log = DeltaLog.for_table(path, storage_options)
    store, root = log.store, log.table_root
    part_names = [f.name for f in part.fields] if part is not None else []
    try:
        listing = list(store.walk_tree(root, lambda n: is_hidden(n, part_names)))
    except (FileNotFoundError, NotADirectoryError):
        raise InvalidTableOperationError(f"cannot convert {root} to Delta: no such directory") from None
    files = sorted((st for st in listing if not isinstance(st, DirStatus)), key=lambda st: st.path)
    if not files:
        raise InvalidTableOperationError(f"cannot convert {root} to Delta: it holds no parquet files")
    rel_root = len(root.rstrip("/\\")) + 1

    def rel_of(p: str) -> str:
        return p[rel_root:].replace(os.sep, "/")

    pvs = {st.path: _partition_values(rel_of(st.path), part) for st in files}   # before any footer is read
    done = [0]

    def footer(st) -> pq.FileMetaData:
        try:
            with store.open_input_file(st.path, st.size) as f:
                md = pq.ParquetFile(f).metadata
        except (pa.ArrowInvalid, OSError) as e:
            raise InvalidTableOperationError(
                f"cannot convert {root} to Delta: {rel_of(st.path)} is not a parquet file ({e})") from None
        done[0] += 1
        if progress is not None and done[0] % 100 == 0:
            progress("reading footers", done[0], len(files))
        return md

    if progress is not None:
        progress("reading footers", 0, len(files))
    with ThreadPoolExecutor(max_workers=max_workers) as ex:
        footers = list(ex.map(footer, files))
    if progress is not None:
        progress("reading footers", len(files), len(files))
    schema: StructType | None = None
    first = ""
    for st, md in zip(files, footers):
        fs = _file_schema(md, rel_of(st.path))
        schema = fs if schema is None else _merge_structs(schema, fs, "", (first, rel_of(st.path)))
        first = first or rel_of(st.path)
    assert schema is not None
    if part is not None:
        data_names = {f.name.lower() for f in schema.fields}
        clash = [f.name for f in part.fields if f.name.lower() in data_names]
        if clash:
            raise SchemaError(f"cannot convert {root} to Delta: partition column(s) {clash} are also "
                              f"columns of the parquet files")
        schema = StructType(list(schema.fields) + [StructField(f.name, f.type, True) for f in part.fields])
    conf = normalize_properties(configuration or {})
    skipping = data_skipping_settings(conf)
    stats_schema = stats_columns(schema, skipping.num_indexed_cols, skipping.stats_columns, part_names)
    adds = []
    records = 0
    for st, md in zip(files, footers):
        stats = None
        if collect_stats:
            stats, _ = footer_stats(md, stats_schema, False, skipping.string_prefix_length)
            records += md.num_rows
        adds.append(AddFile(path=encode_log_path(rel_of(st.path)), partition_values=pvs[st.path], size=st.size,
                            modification_time=st.modification_time, data_change=True, stats=stats))
    return ParquetScan(root, schema, part_names, adds, conf, records if collect_stats else None)

