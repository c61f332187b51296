"""What a Spark read of a Delta table hands its tasks, shared by the batch source
(`tahoe.spark.datasource`), the streaming source (`tahoe.spark.streaming`) and the sharing source
(`tahoe.spark.sharing`): input partitions (`FilesPartition`: files or runs of their row groups;
`ChangesPartition`: change-data units), how pieces are packed into them (`pack_by_size`, as Spark
packs file splits), the Spark schema a snapshot is read with (`spark_read_schema`) and
`TableFiles` — the picklable part of a reader that executors use to read a partition's files
with tahoe's Arrow reader.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql.datasource import InputPartition
from ..protocol.geospatial import to_spark_arrow

__all__ = ["TableFiles", "FilesPartition", "ChangesPartition", "change_partitions", "pack_by_size", "max_split_bytes",
           "spark_read_schema", "PARTITION_BYTES", "OPEN_COST_BYTES"]

# about what one task reads (Spark's spark.sql.files.maxPartitionBytes default)
PARTITION_BYTES = 128 << 20
OPEN_COST_BYTES = 4 << 20  # Spark's spark.sql.files.openCostInBytes default


class FilesPartition(InputPartition):
    """What one task reads: [(path, partition values, DV descriptor, row groups | None)]."""

    def __init__(self, files: list[tuple[str, dict, Any, Any]]):
        super().__init__(None)
        self.files = files


class ChangesPartition(InputPartition):
    """What one task of a change data feed read reads: `tahoe.read.changes.ChangeUnit`s."""

    def __init__(self, units: list):
        super().__init__(None)
        self.units = units


def max_split_bytes(sizes: list[int], min_partitions: int | None) -> int:
    """Spark's `FilePartition.maxSplitBytes`: at most `PARTITION_BYTES`, and — so that a small
    table still gives every core a task — at most the bytes per core (`min_partitions`: the
    session's default parallelism), counting `OPEN_COST_BYTES` a file, but never below that."""
    if not min_partitions:
        return PARTITION_BYTES
    per_core = (sum(sizes) + len(sizes) * OPEN_COST_BYTES) // max(1, min_partitions)
    return min(PARTITION_BYTES, max(OPEN_COST_BYTES, per_core))


def pack_by_size(pieces: list[tuple[Any, int]], limit: int = PARTITION_BYTES) -> list[list[Any]]:
    """Pieces (entry, bytes) packed as Spark packs file splits: sorted largest first, each into the
    open group while it fits in about `limit` (counting `OPEN_COST_BYTES` a piece), else into the
    next."""
    pieces = sorted(pieces, key=lambda x: -x[1])
    groups, cur, cur_size = [], [], 0
    for entry, size in pieces:
        if cur and cur_size + size > limit:
            groups.append(cur)
            cur, cur_size = [], 0
        cur.append(entry)
        cur_size += size + OPEN_COST_BYTES
    if cur:
        groups.append(cur)
    return groups


def spark_read_schema(snap, cdf: bool = False):
    """The Spark schema `format("delta")` reads a snapshot with (void columns left out, all
    nullable, only the user's metadata) — with the change data feed's three columns when `cdf`."""
    from pyspark.sql.types import LongType, StringType, StructField as SparkField, StructType as SparkStruct, \
        TimestampType

    from ..protocol.schema import StructType, is_void
    from .types import to_spark_schema, user_metadata

    fields = [f for f in snap.schema.fields if not is_void(f.type)]
    s = to_spark_schema(StructType(fields), strip_metadata=True, nullable=True)
    # the user's column metadata (a comment) kept, as in delta-spark's DataFrames
    s = SparkStruct([SparkField(sf.name, sf.dataType, sf.nullable, user_metadata(f.metadata))
                     for sf, f in zip(s.fields, fields)])
    if cdf:
        s = SparkStruct(list(s.fields) + [SparkField("_change_type", StringType(), True),
                                          SparkField("_commit_version", LongType(), True),
                                          SparkField("_commit_timestamp", TimestampType(), True)])
    return s


class TableFiles:
    """What the executors need to read a table's files (picklable): the table, its schema,
    partitioning and column mapping, the columns to read and the Spark schema to hand back."""

    def __init__(self, snap, storage_options: dict | None, spark_schema, columns: list[str] | None = None, *,
                 time_zone: str | None = None):
        self.table_root = snap.table_root
        self.time_zone = time_zone   # the session's: zone-less timestamp partition values are read in it
        self.schema_json = snap.schema.to_json()
        self.partition_columns = list(snap.partition_columns)
        self.mode = snap.column_mapping_mode
        self.storage_options = storage_options
        self.columns = columns
        self.out_schema_json = spark_schema.json()

    def arrow_reader(self):
        from ..protocol.schema import StructType
        from ..read.arrow_reader import ArrowFileReader
        from ..storage import log_store_for

        store, root = log_store_for(self.table_root, self.storage_options)
        return ArrowFileReader(store, root, StructType.from_json(self.schema_json), self.partition_columns,
                               self.mode, self.columns, time_zone=getattr(self, "time_zone", None))

    def target(self):
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType as SparkStruct

        return to_arrow_schema(SparkStruct.fromJson(json.loads(self.out_schema_json)), timezone="UTC")

    def partitions(self, files: list[tuple[str, dict, Any, int]], reader=None,
                   min_partitions: int | None = None) -> list[FilesPartition]:
        """Input partitions of at most about `max_split_bytes` (128 MB, less on a small table:
        `min_partitions`, the session's parallelism, tasks at least) over (path, partition values,
        DV, size) entries: a file larger than that is cut into runs of its row groups (its footer
        read here; a single larger row group is a run of its own); see `pack_by_size`."""
        limit = max_split_bytes([sz or 0 for *_, sz in files], min_partitions)
        pieces = []  # ((path, partition values, DV, row groups | None), bytes)
        for p, pv, dv, sz in files:
            if (sz or 0) <= limit:
                pieces.append(((p, pv, dv, None), sz or 0))
                continue
            reader = reader or self.arrow_reader()
            run, run_size = [], 0
            for i, b in enumerate(reader.row_group_bytes(p)):
                if run and run_size + b > limit:
                    pieces.append(((p, pv, dv, run), run_size))
                    run, run_size = [], 0
                run.append(i)
                run_size += b
            if run:
                pieces.append(((p, pv, dv, run), run_size))
        return [FilesPartition(g) for g in pack_by_size(pieces, limit)]

    def read(self, partition: FilesPartition) -> Iterator:
        """Record batches of a partition's files (DVs applied), in the Spark schema."""
        reader = self.arrow_reader()
        target = self.target()
        for path, pv, dv, row_groups in partition.files:
            for t in reader.read_row_groups(path, pv, dv, row_groups):
                t = t.select(target.names) if target.names else t
                yield from to_spark_arrow(t, target).cast(target).to_batches(max_chunksize=65536)

    def read_changes(self, partition: ChangesPartition) -> Iterator:
        """Record batches of the change rows of a partition's units, in the Spark schema."""
        from ..read.changes import StoreChangeFiles, unit_rows

        files = StoreChangeFiles(self.arrow_reader())
        target = self.target()
        for u in partition.units:
            for t in unit_rows(files, u):
                yield from to_spark_arrow(t.select(target.names), target).cast(target).to_batches(max_chunksize=65536)


def change_partitions(units: list) -> list[ChangesPartition]:
    """Change units packed into input partitions (`pack_by_size`; several empty ones — a version
    of an empty table — make one)."""
    return [ChangesPartition(g) for g in pack_by_size([(u, u.size) for u in units])]
