"""What an overwrite replaces: replaceWhere predicates and the file selection of overwrites,
shared by every writer (the Arrow executor `tahoe.write.writer`, the Spark executors
`tahoe.spark.write`, the commit step `tahoe.write.commit`).

Owns: `parse_replace_where` (a replaceWhere predicate, refused unless it names partition
columns only — or, for a writer that replaces rows (the Spark executor), any column),
`files_with_matches` (the files such a predicate may select rows of), `check_replace_where` (rows written with replaceWhere must satisfy it),
`files_to_replace` (which active files an overwrite removes — all of them, those of the partitions
matching the predicate, or those of the partitions the new files are in) and `stage_overwrite`
(those removes staged in a transaction, with what it records as read so that the conflict checker
catches concurrent writers into the replaced data).

The WRITE operation itself (`tahoe.write_table`) is planned by `tahoe.write.plan` and executed by
`tahoe.write.writer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ReplaceWhereMismatchError, UnsupportedFeatureError
from ..log.snapshot import Snapshot, add_files_from_table
from ..protocol.actions import AddFile
from ..protocol.partition_values import parse_partition_value, partition_values_to_arrow
from ..protocol.schema import StructType, to_arrow_type
from ..protocol.timestamps import normalize_zone_name
from ..expressions import Expression, Scope, check_columns, file_mask, matches, parse

if TYPE_CHECKING:  # pragma: no cover
    from ..txn import Transaction

__all__ = ["parse_replace_where", "check_replace_where", "files_to_replace", "stage_overwrite", "partition_predicate",
           "reads_data_columns", "files_with_matches"]


# --- replaceWhere ------------------------------------------------------------------------------

def _typed_partitions(files: pa.Table, schema: StructType, partition_columns: list[str], mode: str,
                      time_zone: str | None = None) -> pa.Table:
    """The typed partition values of `files` (Arrow: logical names)."""
    cols = partition_values_to_arrow(files.column("partitionValues"), [schema.field(n) for n in partition_columns], mode,
                                     time_zone=time_zone)
    return pa.table(cols) if cols else pa.table({"_": pa.nulls(files.num_rows)}).drop(["_"])


def parse_replace_where(predicate: str, schema: StructType, partition_columns: list[str],
                        data_columns: bool = False) -> Expression:
    """The parsed replaceWhere predicate; UnsupportedFeatureError when it reads a column that is
    not a partition column (ParseException when it does not parse). `data_columns`: any column of
    the table may be read (delta-spark's default, replaceWhere.dataColumns.enabled; for writers
    that replace rows) — an unknown one is an AnalysisException."""
    node = parse(predicate)
    lower = {c.lower() for c in partition_columns}
    if data_columns:
        check_columns(node, Scope.of_schema(schema))
        return node
    for c in node.columns():
        if len(c.parts) != 1 or c.parts[0].lower() not in lower:
            raise UnsupportedFeatureError(
                f"replaceWhere predicate {predicate!r} refers to '{c.name}', which is not a "
                f"partition column ({partition_columns}); only predicates on partition columns are supported")
    return node


def reads_data_columns(node: Expression, partition_columns: list[str]) -> bool:
    """Whether a replaceWhere predicate reads a column that is not a partition column."""
    lower = {c.lower() for c in partition_columns}
    return any(len(c.parts) != 1 or c.parts[0].lower() not in lower for c in node.columns())


def files_with_matches(snap: Snapshot, node: Expression, time_zone: str | None = None) -> list[AddFile]:
    """The active files that may hold a row matching `node` (partition values and stats; zone-less
    timestamps in `time_zone`, default UTC)."""
    files = snap.files_table(["path", "partitionValues", "size", "modificationTime", "stats", "tags",
                              "deletionVector", "baseRowId", "defaultRowCommitVersion"])
    if not files.num_rows:
        return []
    keep = file_mask(node, files, snap.schema, list(snap.partition_columns), snap.column_mapping_mode,
                     time_zone=normalize_zone_name(time_zone))
    return add_files_from_table(files.filter(pa.array(keep, pa.bool_())))


def check_replace_where(rows: pa.Table, node: Expression, predicate: str, time_zone: str | None = None) -> None:
    """Refuse (ReplaceWhereMismatchError, delta-spark's DELTA_REPLACE_WHERE_MISMATCH, naming a
    row) data written with replaceWhere that does not satisfy the predicate (zone-less timestamps
    in `time_zone`, default UTC). Shared by the Arrow writer and the data-source writer's tasks."""
    if not rows.num_rows:
        return
    bad = pc.invert(matches(node, Scope.of(rows), time_zone=normalize_zone_name(time_zone)))
    if pc.any(bad).as_py():
        row = int(pc.index(bad, True).as_py())
        raise ReplaceWhereMismatchError(predicate, f"A row that does not match the replaceWhere predicate: {rows.slice(row, 1).to_pylist()[0]}")


def _partition_keys(partition_values, snap: Snapshot, time_zone: str | None = None) -> list[tuple]:
    """The typed partition values (one tuple per file, in the table's partition-column order) of
    `partition_values` (an Arrow map array or a list of dicts; physical or logical names): equal
    partitions give equal tuples whatever the spelling of their serialized values (timestamps in
    either format, `1` / `01`), and null equals null (delta-spark's null-tolerant matching)."""
    fields = [snap.schema.field(c) for c in snap.partition_columns]
    typed = partition_values_to_arrow(partition_values, fields, snap.column_mapping_mode, time_zone=time_zone)
    return list(zip(*[typed[f.name].to_pylist() for f in fields]))


def files_to_replace(snap: Snapshot, replace_node=None, written: list[AddFile] | None = None,
                     time_zone: str | None = None) -> list[AddFile]:
    """The active files an overwrite removes: all of them; (replaceWhere) those whose partition
    values satisfy the parsed predicate; or (dynamic partition overwrite, `written` = the write's
    new AddFiles) those in a partition a new file is in. Shared by every writer (Arrow and Spark).
    Zone-less timestamps (of the predicate, of partition values) are read in `time_zone`."""
    tz = normalize_zone_name(time_zone)
    files = snap.files_table(["path", "partitionValues", "size", "modificationTime", "stats", "tags",
                              "deletionVector", "baseRowId", "defaultRowCommitVersion"])
    if written is not None and files.num_rows:
        touched = set(_partition_keys([a.partition_values for a in written], snap, tz))
        keep = [k in touched for k in _partition_keys(files.column("partitionValues"), snap, tz)]
        files = files.filter(pa.array(keep, pa.bool_()))
    elif replace_node is not None and files.num_rows:
        typed = _typed_partitions(files, snap.schema, list(snap.partition_columns), snap.column_mapping_mode, tz)
        files = files.filter(matches(replace_node, Scope.of(typed), num_rows=files.num_rows, time_zone=tz))
    return add_files_from_table(files)


def stage_overwrite(txn: Transaction, snap: Snapshot, replace_node=None,
                    written: list[AddFile] | None = None, time_zone: str | None = None) -> list[AddFile]:
    """Stage an overwrite in `txn` (see `files_to_replace` for which files it removes) and return
    the removed files. What the transaction records as read, so that the conflict checker catches
    concurrent writers into the replaced data: the whole table and the files; the replaceWhere
    predicate and the files; or (dynamic) the replaced partitions as a partition predicate — the
    files are not recorded as read, as delta-spark's `filterFiles(partitions)` does not: a
    concurrent delete of one of them is a ConcurrentDeleteDeleteException, as there."""
    removes = files_to_replace(snap, replace_node, written, time_zone)
    if written is not None:
        touched = set(_partition_keys([a.partition_values for a in written], snap, time_zone))
        txn.read_predicate(lambda values: _partition_keys([values], snap, time_zone)[0] in touched)
    elif replace_node is None:
        txn.read_whole_table()
        txn.read_files(removes)
    else:
        txn.read_predicate(partition_predicate(replace_node, snap.schema, list(snap.partition_columns), time_zone))
        txn.read_files(removes)
    txn.remove_files(removes)
    return removes


def partition_predicate(node: Expression, schema: StructType, partition_columns: list[str],
                        time_zone: str | None = None):
    """A predicate on partition columns only (a replaceWhere predicate, the partition part of a
    DML's condition) as the Transaction's partition filter (logical column name → serialized
    value), for conflict detection; zone-less timestamps read in `time_zone` (default UTC)."""
    tz = normalize_zone_name(time_zone)
    fields = {c: schema.field(c) for c in partition_columns}

    def selects(values: dict[str, str | None]) -> bool:
        lower = {k.lower(): v for k, v in values.items()}
        cols = {}
        for c, f in fields.items():
            raw = values.get(c, lower.get(c.lower()))
            cols[c] = pa.array([parse_partition_value(raw, f.type, time_zone=tz)], to_arrow_type(f.type))
        return bool(matches(node, Scope.of(pa.table(cols)), time_zone=tz)[0].as_py())

    return selects

