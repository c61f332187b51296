"""A scan of one snapshot: plan (which logical files) separate from execute (their rows).

    scan = Scan(snapshot, columns=["a", "b"], file_filter=...)
    scan.plan_files()   # Arrow table of the active files the scan will read
    scan.to_arrow()     # the rows, as one Arrow table with the logical schema

`file_filter` is a function from the planned files table (ADD_SCHEMA columns) to a boolean mask of
files to keep; data-skipping layers (partition pruning, stats) plug in there and must only drop a
file when it surely holds no matching row.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

import pyarrow as pa

from ..log.snapshot import Snapshot
from .arrow_reader import ArrowFileReader

__all__ = ["Scan"]

FileFilter = Callable[[pa.Table], pa.Array]


class Scan:
    def __init__(self, snapshot: Snapshot, columns: Iterable[str] | None = None,
                 file_filter: FileFilter | None = None, limit: int | None = None):
        self.snapshot = snapshot
        self.columns = list(columns) if columns is not None else None
        self.file_filter = file_filter
        self.limit = limit
        self.reader = ArrowFileReader(snapshot.store, snapshot.table_root, snapshot.schema,
                                      snapshot.partition_columns, snapshot.column_mapping_mode, self.columns)

    @property
    def schema(self) -> pa.Schema:
        return self.reader.out_schema

    def plan_files(self) -> pa.Table:
        files = self.snapshot.files_table()
        if self.file_filter is not None and files.num_rows:
            files = files.filter(self.file_filter(files))
        return files

    def to_batches(self, threads: int = 4) -> Iterator[pa.Table]:
        remaining = self.limit
        for t in self.reader.read_files(self.plan_files(), threads=threads):
            if remaining is not None:
                if remaining <= 0:
                    return
                t = t.slice(0, remaining)
                remaining -= t.num_rows
            yield t

    def to_arrow(self, threads: int = 4) -> pa.Table:
        parts = [t for t in self.to_batches(threads) if t.num_rows]
        if not parts:
            return self.schema.empty_table()
        return pa.concat_tables(parts)
