"""Spark-free DELETE by copy-on-write, through one `Transaction`.

    delete("/data/events", "country = 'FR' AND amount < 10")   # -> metrics dict

Every active file that may hold a matching row (data skipping by partition values and stats,
`tahoe.expressions.file_mask`) is read (deletion vectors applied, partition columns included); rows
matching the predicate (SQL, evaluated in Arrow by `tahoe.expressions`; NULL counts as not
matching, as in SQL) are dropped: a file with no match is left alone, a file with only matches is removed, any other file is removed and its
remaining rows rewritten into a new file of the same partition. With change data feed enabled the
deleted rows are also written as a cdc file (`_change_type = 'delete'`) under `_change_data/`.
The commit records that the whole table was read, so a concurrent change to it conflicts.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidTableOperationError
from ..log import DeltaLog
from ..protocol import column_mapping
from ..protocol.actions import AddCDCFile
from ..protocol.parquet_format import ParquetWriteOptions
from ..protocol.partition_values import partition_path
from ..protocol.properties import bool_property
from ..read.arrow_reader import ArrowFileReader
from ..txn import Transaction
from ..expressions import Scope, check_columns, file_mask, matches, parse
from .files import encode_log_path, parquet_bytes, write_data_files

__all__ = ["delete"]

CDC_DIR = "_change_data"


def _write_cdc(log: DeltaLog, snapshot, rows: pa.Table, partition_values: dict) -> AddCDCFile:
    """Deleted rows of one file as a change data file (data columns in physical names)."""
    mode = snapshot.column_mapping_mode
    part_cols = {c.lower() for c in snapshot.partition_columns}
    fields = [f for f in snapshot.schema.fields if f.name.lower() not in part_cols]
    data = rows.select([f.name for f in fields])
    if mode != "none":
        data = data.rename_columns([column_mapping.physical_name(f) for f in fields])
    data = data.append_column("_change_type", pa.repeat(pa.scalar("delete"), rows.num_rows))
    sub = partition_path(list(snapshot.partition_columns), partition_values) if snapshot.partition_columns else ""
    options = ParquetWriteOptions.for_configuration(snapshot.metadata.configuration)
    rel = "/".join(p for p in (CDC_DIR, sub, f"cdc-{uuid.uuid4()}.c000{options.file_suffix}.parquet") if p)
    full = log.store.join(log.table_root, rel)
    buf = parquet_bytes(data, options)
    log.store.write(full, buf.to_pybytes())
    return AddCDCFile(path=encode_log_path(rel), partition_values=dict(partition_values), size=buf.size)


def delete(uri: str, predicate: str | None = None, storage_options: dict | None = None) -> dict[str, Any]:
    """Delete the rows matching `predicate` (all rows when None). Returns delta-spark's DELETE
    metrics (numDeletedRows, numRemovedFiles, numAddedFiles, numCopiedRows, ...) and the version."""
    start = time.perf_counter()
    log = DeltaLog.for_table(uri, storage_options)
    params = {"predicate": json.dumps([predicate] if predicate else [])}
    txn = Transaction(log, "DELETE", params)
    snap = txn.read_snapshot
    if snap is None:
        raise InvalidTableOperationError(f"cannot DELETE from {uri}: the table does not exist")
    conf = snap.configuration
    if bool_property(conf, "delta.appendOnly"):
        raise InvalidTableOperationError("cannot DELETE from an append-only table (delta.appendOnly=true)")
    node = parse(predicate) if predicate else None
    if node is not None:   # an unknown column is refused before anything is read
        check_columns(node, snap.schema)
    txn.read_whole_table()
    reader = ArrowFileReader(snap.store, snap.table_root, snap.schema, snap.partition_columns,
                             snap.column_mapping_mode)
    now = int(time.time() * 1000)
    removed, added, cdcs = [], [], []
    deleted_rows = copied_rows = 0
    adds = snap.add_files()
    if node is not None and adds:   # files that cannot hold a matching row are left alone unread
        files = snap.files_table(["partitionValues", "stats"])
        keep = file_mask(node, files, snap.schema, snap.partition_columns, snap.column_mapping_mode)
        adds = [a for a, k in zip(adds, keep) if k]
    for add in adds:
        if node is None:  # delete everything: counts from stats unless the rows are needed
            n = add.num_records
            if n is not None and add.deletion_vector is not None:
                n -= add.deletion_vector.cardinality
            if n is None or bool_property(conf, "delta.enableChangeDataFeed"):
                rows = reader.read_file(add.path, add.partition_values, add.deletion_vector)
                n = rows.num_rows
                if bool_property(conf, "delta.enableChangeDataFeed") and n:
                    cdcs.append(_write_cdc(log, snap, rows, add.partition_values))
            removed.append(add.remove(now))
            deleted_rows += n
            continue
        rows = reader.read_file(add.path, add.partition_values, add.deletion_vector)
        if rows.num_rows == 0:
            continue
        match = matches(node, Scope.of(rows))
        n_match = pc.sum(match).as_py() or 0
        if n_match == 0:
            continue
        removed.append(add.remove(now))
        deleted_rows += n_match
        if bool_property(conf, "delta.enableChangeDataFeed"):
            cdcs.append(_write_cdc(log, snap, rows.filter(match), add.partition_values))
        keep = rows.filter(pc.invert(match))
        if keep.num_rows:
            copied_rows += keep.num_rows
            added.extend(write_data_files(log.store, log.table_root, keep, snap.schema, snap.partition_columns,
                                          snap.column_mapping_mode, conf))
    metrics = {
        "numDeletedRows": deleted_rows,
        "numRemovedFiles": len(removed),
        "numAddedFiles": len(added),
        "numCopiedRows": copied_rows,
        "numAddedChangeFiles": len(cdcs),
        "executionTimeMs": int((time.perf_counter() - start) * 1000),
    }
    if not removed:
        metrics["version"] = snap.version
        return metrics
    txn.remove_files(removed)
    txn.add_files(added)
    if cdcs:
        txn.add_cdc_files(cdcs)
    metrics["version"] = txn.commit(operation_metrics=metrics)
    return metrics

