"""`tahoe.Table`: the Spark-free facade over one Delta table (in the spirit of delta-rs's
`DeltaTable`). Open a table at its latest version, a version or a timestamp; ask for its schema,
protocol, metadata, files and history; read its rows as Arrow or pandas.

    t = Table("/data/events")
    t.version, t.schema, t.files()
    t.to_arrow(columns=["id"])
    t.to_arrow(filter="day = 'mon' AND id > 10")   # skips files by partition values and stats
    Table("/data/events", version=3).to_pandas()

Creating and evolving tables (each call is one commit, see `tahoe.txn.table_ops`):

    t = Table.create("/data/events", "id BIGINT, day DATE, v DOUBLE", partition_columns=["day"],
                     properties={"delta.enableChangeDataFeed": "true"})
    t.set_properties({"delta.appendOnly": "true"}); t.add_constraint("pos", "v >= 0")
    t.detail()                                   # like DESCRIBE DETAIL
    txn = t.transaction("WRITE"); txn.add_files(adds); txn.commit()
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from .log import DeltaLog, Snapshot
from .read import Scan, plan_files

__all__ = ["Table"]


class Table:
    def __init__(self, uri: str, version: int | None = None, timestamp: Any = None,
                 storage_options: dict | None = None):
        self.uri = uri
        self.log = DeltaLog.for_table(uri, storage_options)
        self.snapshot: Snapshot = self.log.snapshot(version=version, timestamp=timestamp)

    @classmethod
    def _from_snapshot(cls, log: DeltaLog, snapshot: Snapshot) -> "Table":
        t = cls.__new__(cls)
        t.uri = log.table_root
        t.log = log
        t.snapshot = snapshot
        return t

    # --- the version -------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.snapshot.version

    @property
    def table_root(self) -> str:
        return self.log.table_root

    def load_version(self, version: int) -> "Table":
        return Table._from_snapshot(self.log, self.log.snapshot(version=version))

    def load_as_of(self, timestamp: Any) -> "Table":
        return Table._from_snapshot(self.log, self.log.snapshot(timestamp=timestamp))

    def refresh(self) -> "Table":
        self.snapshot = self.log.snapshot()
        return self

    # --- metadata ----------------------------------------------------------------------------
    @property
    def schema(self):
        return self.snapshot.schema

    @property
    def protocol(self):
        return self.snapshot.protocol

    @property
    def metadata(self):
        return self.snapshot.metadata

    @property
    def partition_columns(self) -> list[str]:
        return self.snapshot.partition_columns

    def files(self, columns: Iterable[str] | None = None, filter: Any = None) -> pa.Table:
        """The active files (Arrow, ADD_SCHEMA columns); with `filter` (see `to_arrow`) only the
        files that may hold a matching row."""
        return plan_files(self.snapshot, filter, columns=columns)

    def file_uris(self, filter: Any = None) -> list[str]:
        from .storage import resolve_data_path

        return [resolve_data_path(self.table_root, p)
                for p in self.files(["path"], filter=filter).column("path").to_pylist()]

    def history(self, limit: int | None = None) -> list[dict]:
        return [e.to_dict() for e in self.log.history(limit)]

    # --- rows --------------------------------------------------------------------------------
    def scan(self, columns: Iterable[str] | None = None, filter: Any = None, **kw) -> Scan:
        """A `tahoe.read.Scan` of this version (plan the files, then read them)."""
        return Scan(self.snapshot, columns=columns, filter=filter, **kw)

    def to_arrow(self, columns: Iterable[str] | None = None, filter: Any = None) -> pa.Table:
        """The rows (all columns, or `columns`). `filter` — SQL text (`"day = 'mon' AND id > 10"`),
        a `tahoe.expressions` tree, or delta-rs DNF tuples (`[("day", "=", "mon")]`) — keeps the
        rows where it is TRUE and opens only the files whose partition values and stats allow a
        match (AnalysisException for an unknown column, ParseException for bad SQL)."""
        return self.scan(columns, filter=filter).to_arrow()

    def to_pandas(self, columns: Iterable[str] | None = None, filter: Any = None):
        return self.to_arrow(columns, filter=filter).to_pandas()

    # --- the change data feed (tahoe.read.changes) --------------------------------------------
    def changes(self, start: int | None = None, end: int | None = None, *, starting_timestamp: Any = None,
                ending_timestamp: Any = None, columns: Iterable[str] | None = None, filter: Any = None,
                allow_out_of_range: bool = False) -> pa.Table:
        """The change data feed of versions `start..end` (inclusive; `end` defaults to this
        table's version) or of the versions committed between the timestamps: the table's columns
        (in this version's schema) plus `_change_type` (insert, delete, update_preimage,
        update_postimage), `_commit_version` and `_commit_timestamp`, version by version. Rows
        come from the versions' change data files where they have them, else from their added
        and removed files (deletion vectors accounted for). Errors as delta-spark's: CDF off in
        the range (`CdfNotEnabledError`, DELTA_MISSING_CHANGE_DATA), a start after this version
        or an end before the start (`ChangeDataRangeError`), a column dropped, renamed or retyped
        inside the range (`ChangeDataFeedError`); `allow_out_of_range` gives no rows for a start
        after this version and reads to this version for an end timestamp after it. `columns`
        keeps those columns (CDF columns included); `filter` (SQL text or a tahoe expression)
        keeps the rows where it is TRUE."""
        from .expressions import Scope, as_expression, matches
        from .read.changes import read_changes_arrow

        if start is None and starting_timestamp is None:
            start = 0
        t = read_changes_arrow(self.log, start, end, starting_timestamp=starting_timestamp,
                               ending_timestamp=ending_timestamp, read_snapshot=self.snapshot,
                               allow_out_of_range=allow_out_of_range)
        expr = as_expression(filter)
        if expr is not None and t.num_rows:
            t = t.filter(matches(expr, Scope.of(t)))
        if columns is not None:
            by_lower = {n.lower(): n for n in t.column_names}
            missing = [c for c in columns if c.lower() not in by_lower]
            if missing:
                raise ValueError(f"unknown column(s) {missing}; the change feed has {t.column_names}")
            t = t.select([by_lower[c.lower()] for c in columns])
        return t

    def load_cdf(self, starting_version: int = 0, ending_version: int | None = None,
                 starting_timestamp: str | None = None, ending_timestamp: str | None = None,
                 columns: list[str] | None = None, predicate: str | None = None,
                 allow_out_of_range: bool = False) -> pa.RecordBatchReader:
        """delta-rs's `DeltaTable.load_cdf`, same arguments (a timestamp is used when its version
        is not given): the change data feed (see `changes`) as a RecordBatchReader."""
        t = self.changes(None if starting_timestamp is not None and not starting_version else starting_version,
                         ending_version, starting_timestamp=starting_timestamp,
                         ending_timestamp=ending_timestamp if ending_version is None else None,
                         columns=columns, filter=predicate, allow_out_of_range=allow_out_of_range)
        return pa.RecordBatchReader.from_batches(t.schema, t.to_batches())

    # --- creating and evolving (tahoe.txn) -----------------------------------------------------
    @classmethod
    def create(cls, uri: str, schema: Any, partition_columns: Iterable[str] = (),
               properties: dict | None = None, name: str | None = None,
               description: str | None = None, storage_options: dict | None = None,
               mode: str = "error", protocol: Any = None) -> "Table":
        """Create a table (`schema`: a StructType, a pyarrow schema, Delta JSON or a DDL column
        list such as "id BIGINT, name STRING"); mode "error" | "ignore" | "overwrite"."""
        from .txn import create_table

        log = DeltaLog.for_table(uri, storage_options)
        snap = create_table(log, schema, partition_columns, properties, name=name,
                            description=description, mode=mode, protocol=protocol)
        return cls._from_snapshot(log, snap)

    def _evolved(self, snap: Snapshot) -> "Table":
        self.snapshot = snap
        return self

    def set_properties(self, properties: dict) -> "Table":
        from .txn import set_properties

        return self._evolved(set_properties(self.log, properties))

    def unset_properties(self, keys: Iterable[str], if_exists: bool = False) -> "Table":
        from .txn import unset_properties

        return self._evolved(unset_properties(self.log, keys, if_exists=if_exists))

    def add_constraint(self, name: str, expression: str, validate: Any = None) -> "Table":
        """Add a CHECK constraint; `validate(expression) -> int` counts existing violating rows
        (nonzero: ConstraintViolationError, nothing committed)."""
        from .txn import add_constraint

        return self._evolved(add_constraint(self.log, name, expression, validate=validate))

    def drop_constraint(self, name: str, if_exists: bool = True) -> "Table":
        from .txn import drop_constraint

        return self._evolved(drop_constraint(self.log, name, if_exists=if_exists))

    def add_feature(self, name: str) -> "Table":
        from .txn import add_feature

        return self._evolved(add_feature(self.log, name))

    def upgrade_protocol(self, reader_version: int | None = None, writer_version: int | None = None) -> "Table":
        from .txn import upgrade_protocol

        return self._evolved(upgrade_protocol(self.log, reader_version, writer_version))

    def update_schema(self, schema: Any, merge: bool = True) -> "Table":
        from .txn import update_schema

        return self._evolved(update_schema(self.log, schema, merge=merge))

    def rename_column(self, column: str, new_name: str) -> "Table":
        from .txn import rename_column

        return self._evolved(rename_column(self.log, column, new_name))

    def drop_column(self, column: str) -> "Table":
        from .txn import drop_column

        return self._evolved(drop_column(self.log, column))

    def transaction(self, operation: str, operation_parameters: dict | None = None,
                    isolation_level: str | None = None, engine_info: str | None = None,
                    max_retries: int = 50):
        """A `tahoe.txn.Transaction` reading this table's snapshot."""
        from .txn import Transaction

        return Transaction(self.log, operation, operation_parameters, snapshot=self.snapshot,
                           isolation_level=isolation_level, engine_info=engine_info,
                           max_retries=max_retries)

    def detail(self) -> dict:
        """The table's details, like delta-spark's DESCRIBE DETAIL."""
        from .protocol.table_features import reader_features_of, writer_features_of

        snap = self.snapshot
        md = snap.metadata
        p = snap.protocol
        return {
            "format": "delta",
            "id": md.id,
            "name": md.name,
            "description": md.description,
            "location": self.table_root,
            "createdAt": md.created_time,
            "lastModified": snap.timestamp,
            "version": snap.version,
            "partitionColumns": list(md.partition_columns),
            "numFiles": snap.num_files,
            "sizeInBytes": snap.size_in_bytes,
            "properties": dict(md.configuration),
            "minReaderVersion": p.min_reader_version,
            "minWriterVersion": p.min_writer_version,
            "tableFeatures": sorted(reader_features_of(p) | writer_features_of(p)),
        }

    def __repr__(self) -> str:
        return f"Table({self.table_root!r}, version={self.version})"
