"""The `delta` Python data source: `spark.read.format("delta")` / `df.write.format("delta")`.

Owns the data-source path. Reading: the driver plans the snapshot's files (with partition pruning
and stats skipping from pushed-down filters) and splits them into input partitions of about
128 MB (small files packed together, large files split into runs of row groups); executors read
them as Arrow one row group at a time with tahoe's Spark-free reader
(`tahoe.read.ArrowFileReader`: column mapping, DVs, partition values) — so it reaches any store
tahoe's storage layer reaches (s3:// via pyarrow) even when the JVM cannot. Writing: executors
write parquet files with pyarrow under the table root and send back AddFile actions; the
driver-side `commit` makes one transaction (`tahoe.spark.write`: the same plan and commit as
`write_delta` — schema rules, generated/identity columns, constraints, stats).

Options (`tahoe.spark.options`, checked before any work): reading `versionAsOf`, `timestampAsOf`,
`storage.<key>`, and the change data feed (`readChangeFeed` with `startingVersion` /
`startingTimestamp` / `endingVersion` / `endingTimestamp`: `DeltaChangesReader`, planned by
`tahoe.read.changes`); writing `partitionBy`, `replaceWhere` (every row must match; rows outside
it fail the job, nothing is committed), `mergeSchema`, `overwriteSchema`, `partitionOverwriteMode`
(`dynamic`: an overwrite replaces only the partitions the data writes to), `userMetadata`,
`txnAppId` + `txnVersion` (idempotent writes), `delta.<property>` (table properties of a table the
write creates, as delta-spark's DataFrameWriter; on an existing table they must agree with it),
`storage.<key>`, `saveMode`. `readStream` / `writeStream` are `tahoe.spark.streaming`'s
(`streamReader` / `streamWriter`), with the streaming options. Every other option is refused by
name. Tables by name never reach this source in a session with Delta SQL on (`tahoe.spark.sql`
resolves them to their paths); elsewhere Spark hands it no path and it refuses with what to do
(`register` installs the same refusal up front for `CREATE TABLE ... USING delta` and
`saveAsTable`, before Spark records a catalog table nothing could reach). Spark finds this source by itself in any session where tahoe is installed
(`pyspark_tahoe_delta` defines it as `DefaultSource`); `register` is for tahoe shipped otherwise.

Save modes: Spark hands a Python data source only append/overwrite; `ErrorIfExists` — also the
default when `.mode()` is not called — and `Ignore` are refused at analysis
(UNSUPPORTED_DATA_SOURCE_SAVE_MODE) before any Python runs. `tahoe.spark.calls` (installed when
`tahoe.spark` is imported) therefore wraps `DataFrameWriter.save` (classic and Spark Connect): for
`format("delta")` in a session where the `delta` source is tahoe's, those modes become `append` plus the option `saveMode=error|ignore`, which
the writer enforces like delta-spark — error: refuse an existing table; ignore: leave it alone
(the job still runs, its tasks write nothing); either creates a missing table. The option can be
given directly where the wrapper is not installed. The wrapper also hands the writer the session's
`spark.sql.sources.partitionOverwriteMode` (the writer runs in a Python worker that cannot read the
session's confs); an explicit `partitionOverwriteMode` option wins over it, as in delta-spark.
Executors need tahoe importable (see `tahoe.spark` on shipping it to a cluster).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader, InputPartition

from .options import PUSHDOWN_OPTION, READ_KIND_OPTION, check_properties_apply, read_options, table_path, write_options

__all__ = ["DeltaDataSource", "DefaultSource", "register", "read_via_datasource", "TableFiles", "FilesPartition",
           "ChangesPartition", "change_partitions", "pack_by_size", "spark_read_schema"]

# about what one task reads (Spark's spark.sql.files.maxPartitionBytes default)
_PARTITION_BYTES = 128 << 20
_OPEN_COST_BYTES = 4 << 20  # Spark's spark.sql.files.openCostInBytes default


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


def pack_by_size(pieces: list[tuple[Any, int]]) -> list[list[Any]]:
    """Pieces (entry, bytes) packed as Spark packs file splits: sorted largest first, each into the
    open group while it fits in about `_PARTITION_BYTES` (counting `_OPEN_COST_BYTES` a piece),
    else into the next."""
    pieces = sorted(pieces, key=lambda x: -x[1])
    groups, cur, cur_size = [], [], 0
    for entry, size in pieces:
        if cur and cur_size + size > _PARTITION_BYTES:
            groups.append(cur)
            cur, cur_size = [], 0
        cur.append(entry)
        cur_size += size + _OPEN_COST_BYTES
    if cur:
        groups.append(cur)
    return groups


def spark_read_schema(snap, cdf: bool = False):
    """The Spark schema `format("delta")` reads a snapshot with (void columns left out, all
    nullable, no metadata) — with the change data feed's three columns when `cdf`."""
    from pyspark.sql.types import LongType, StringType, StructField as SparkField, StructType as SparkStruct, \
        TimestampType

    from ..protocol.schema import StructType, is_void
    from .types import to_spark_schema

    fields = [f for f in snap.schema.fields if not is_void(f.type)]
    s = to_spark_schema(StructType(fields), strip_metadata=True, nullable=True)
    if cdf:
        s = SparkStruct(list(s.fields) + [SparkField("_change_type", StringType(), True),
                                          SparkField("_commit_version", LongType(), True),
                                          SparkField("_commit_timestamp", TimestampType(), True)])
    return s


class TableFiles:
    """What the executors need to read a table's files (picklable): the table, its schema,
    partitioning and column mapping, the columns to read and the Spark schema to hand back."""

    def __init__(self, snap, storage_options: dict | None, spark_schema, columns: list[str] | None = None):
        self.table_root = snap.table_root
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
                               self.mode, self.columns)

    def target(self):
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType as SparkStruct

        return to_arrow_schema(SparkStruct.fromJson(json.loads(self.out_schema_json)), timezone="UTC")

    def partitions(self, files: list[tuple[str, dict, Any, int]], reader=None) -> list[FilesPartition]:
        """Input partitions of at most about `_PARTITION_BYTES` over (path, partition values, DV,
        size) entries: a file larger than that is cut into runs of its row groups (its footer read
        here; a single larger row group is a run of its own); see `pack_by_size`."""
        pieces = []  # ((path, partition values, DV, row groups | None), bytes)
        for p, pv, dv, sz in files:
            if (sz or 0) <= _PARTITION_BYTES:
                pieces.append(((p, pv, dv, None), sz or 0))
                continue
            reader = reader or self.arrow_reader()
            run, run_size = [], 0
            for i, b in enumerate(reader.row_group_bytes(p)):
                if run and run_size + b > _PARTITION_BYTES:
                    pieces.append(((p, pv, dv, run), run_size))
                    run, run_size = [], 0
                run.append(i)
                run_size += b
            if run:
                pieces.append(((p, pv, dv, run), run_size))
        return [FilesPartition(g) for g in pack_by_size(pieces)]

    def read(self, partition: FilesPartition) -> Iterator:
        """Record batches of a partition's files (DVs applied), in the Spark schema."""
        reader = self.arrow_reader()
        target = self.target()
        for path, pv, dv, row_groups in partition.files:
            for t in reader.read_row_groups(path, pv, dv, row_groups):
                t = t.select(target.names) if target.names else t
                yield from t.cast(target).to_batches(max_chunksize=65536)

    def read_changes(self, partition: ChangesPartition) -> Iterator:
        """Record batches of the change rows of a partition's units, in the Spark schema."""
        from ..read.changes import StoreChangeFiles, unit_rows

        files = StoreChangeFiles(self.arrow_reader())
        target = self.target()
        for u in partition.units:
            for t in unit_rows(files, u):
                yield from t.select(target.names).cast(target).to_batches(max_chunksize=65536)


def change_partitions(units: list) -> list[ChangesPartition]:
    """Change units packed into input partitions (`pack_by_size`; several empty ones — a version
    of an empty table — make one)."""
    return [ChangesPartition(g) for g in pack_by_size([(u, u.size) for u in units])]


class DeltaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "delta"

    def _snapshot(self):
        from ..log import DeltaLog

        if getattr(self, "_snap", None) is None:
            # every option implemented or refused by name; those of the other kind of read too
            # where tahoe's load wrapper says which kind this is (else when the reader is made)
            kind = str(self.options.get(READ_KIND_OPTION, "")).lower()
            opts = read_options(self.options, streaming={"batch": False, "stream": True}.get(kind))
            self._storage = opts["storage_options"]
            log = DeltaLog.for_table(opts["path"], self._storage)
            self._snap = log.snapshot(version=opts.get("version"), timestamp=opts.get("timestamp"))
            self._cdf = opts["cdf"]
        return self._snap

    def schema(self):
        snap = self._snapshot()
        return spark_read_schema(snap, self._cdf)

    def reader(self, schema):
        opts = read_options(self.options)   # a batch read: batch options only
        if opts["cdf"]:
            return DeltaChangesReader(self._snapshot(), opts, schema)
        if str(self.options.get(PUSHDOWN_OPTION, "")).lower() == "true":
            return DeltaFilteringReader(self, schema)
        return DeltaReader(self, schema)

    def streamReader(self, schema):
        from .streaming import DeltaStreamReader

        return DeltaStreamReader(dict(self.options), schema)

    def writer(self, schema, overwrite: bool):
        write_options(self.options)   # every option implemented or refused by name, before any work
        return DeltaWriter(table_path(self.options), dict(self.options), schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        from .streaming import DeltaStreamWriter

        write_options(self.options, streaming=True)
        return DeltaStreamWriter(table_path(self.options), dict(self.options), schema, overwrite)


class DeltaReader(DataSourceReader):
    def __init__(self, source: DeltaDataSource, schema):
        snap = source._snapshot()
        self.files = TableFiles(snap, source._storage, schema, [f.name for f in schema.fields])
        self._snap = snap
        self._filters: list = []

    def __getstate__(self):
        # what the executors' read() needs: not the snapshot nor the filters (driver-side planning)
        return {k: v for k, v in self.__dict__.items() if k not in ("_snap", "_filters")}

    def partitions(self):
        from .skipping import plan_files

        files = plan_files(self._snap, self._filters)
        entries = [(p, dict(pv) if pv else {}, dict(dv) if dv else None, sz)
                   for p, pv, dv, sz in zip(files.column("path").to_pylist(),
                                            files.column("partitionValues").to_pylist(),
                                            files.column("deletionVector").to_pylist(),
                                            files.column("size").to_pylist())]
        return self.files.partitions(entries) or [FilesPartition([])]

    def read(self, partition: FilesPartition) -> Iterator:
        return self.files.read(partition)


class DeltaFilteringReader(DeltaReader):
    """A DeltaReader that takes Spark's pushed filters for file skipping — only where the session
    has filter pushdown on (Spark refuses a reader with `pushFilters` otherwise), which tahoe's
    `load` wrapper sees to and tells the source (`tahoe.spark.calls.PUSHDOWN_OPTION`)."""

    def pushFilters(self, filters):
        # Spark re-applies every filter; tahoe uses the supported ones for file skipping only.
        for f in filters:
            sql = _filter_to_sql(f)
            if sql is not None:
                self._filters.append(sql)
            yield f


class DeltaChangesReader(DataSourceReader):
    """`readChangeFeed`: the driver resolves the range and plans its change units
    (`tahoe.read.changes`: delta-spark's range rules and errors, the CDF and schema checks); the
    executors read them (cdc files, or added/removed files with their deletion vectors) with
    tahoe's Arrow reader. The rows are in the schema of the snapshot the DataFrame was made on."""

    def __init__(self, snap, opts: dict, schema):
        from ..log import DeltaLog
        from ..read.changes import plan_changes, resolve_change_range

        log = DeltaLog.for_table(snap.table_root, opts["storage_options"])
        rng = resolve_change_range(log, snap.version, opts["starting_version"], opts["ending_version"],
                                   opts["starting_timestamp"], opts["ending_timestamp"], opts["allow_out_of_range"])
        self._units = plan_changes(log, snap, *(rng or (None, None))).units
        data = [f.name for f in schema.fields if f.name not in ("_change_type", "_commit_version", "_commit_timestamp")]
        self.files = TableFiles(snap, opts["storage_options"], schema, data)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_units"}

    def partitions(self):
        return change_partitions(self._units) or [ChangesPartition([])]

    def read(self, partition: ChangesPartition) -> Iterator:
        return self.files.read_changes(partition)


def _filter_to_sql(f) -> str | None:
    from pyspark.sql import datasource as ds

    def name(attr) -> str | None:
        return "`" + attr[0].replace("`", "``") + "`" if len(attr) == 1 else None

    def lit(v) -> str | None:
        import datetime as dt
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
        if isinstance(v, (dt.date, dt.datetime)):
            return "'" + v.isoformat(sep=" ") + "'" if isinstance(v, dt.datetime) else "'" + v.isoformat() + "'"
        return None

    ops = {ds.EqualTo: "=", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=", ds.LessThan: "<",
           ds.LessThanOrEqual: "<="}
    for cls, op in ops.items():
        if type(f) is cls:
            n, v = name(f.attribute), lit(f.value)
            return f"{n} {op} {v}" if n and v else None
    if isinstance(f, ds.IsNull):
        n = name(f.attribute)
        return f"{n} IS NULL" if n else None
    if isinstance(f, ds.IsNotNull):
        n = name(f.attribute)
        return f"{n} IS NOT NULL" if n else None
    if isinstance(f, ds.In):
        n = name(f.attribute)
        vs = [lit(v) for v in f.value]
        return f"{n} IN ({', '.join(vs)})" if n and vs and all(vs) else None
    return None


DefaultSource = DeltaDataSource


class DeltaWriter(DataSourceArrowWriter):
    def __init__(self, path: str, options: dict, schema, overwrite: bool):
        from .write import prepare_datasource_write

        self.path = path
        self.options = options
        self.overwrite = overwrite
        self.plan = prepare_datasource_write(path, options, schema, overwrite)
        plan = self.plan.plan
        if plan.read_version >= 0 and not plan.skip and any(k.lower().startswith("delta.") for k in options):
            from ..log import DeltaLog

            snap = DeltaLog.for_table(plan.table_root, plan.storage_options).snapshot(version=plan.read_version)
            check_properties_apply(options, snap)

    def write(self, iterator):
        from .write import datasource_write_task

        return datasource_write_task(self.plan, iterator)

    def commit(self, messages):
        from .write import datasource_commit

        datasource_commit(self.plan, [m for m in messages if m is not None])

    def abort(self, messages):
        from .write import datasource_abort

        datasource_abort(self.plan, [m for m in messages if m is not None])




def register(spark) -> None:
    """Register the `delta` data source on `spark` (once per session) — and `deltaSharing`
    (`tahoe.spark.sharing`) —, apply tahoe's confs, map the error/ignore save modes and refuse tables by
    name (see the module docstring)."""
    from .calls import install as install_calls
    from .session import configure, mark_registered, registered
    from .surfacing import install

    configure(spark)
    if registered(spark):
        return
    from .sharing import DeltaSharingDataSource   # format("deltaSharing") too

    _register_source(spark, DeltaDataSource)
    _register_source(spark, DeltaSharingDataSource)
    mark_registered(spark)
    install()
    install_calls()
    from .sql.hooks import install as install_sql

    install_sql()   # tables by name: tahoe's SQL layer in enabled sessions, refused with what to do elsewhere


def _register_source(spark, source) -> None:
    """`spark.dataSource.register(source)`, with `spark` the JVM's active session while it
    runs: Spark checks the name against the *active* session's sources, so registering in a second
    session of one JVM (`spark.newSession()`) otherwise fails with DATA_SOURCE_ALREADY_EXISTS."""
    jsession = getattr(spark, "_jsparkSession", None)
    jvm = getattr(spark, "_jvm", None)
    if jsession is None or jvm is None:  # Spark Connect: the server resolves sources per session
        spark.dataSource.register(source)
        return
    sessions = getattr(jvm, "org.apache.spark.sql.SparkSession")
    previous = sessions.getActiveSession()
    sessions.setActiveSession(jsession)
    try:
        spark.dataSource.register(source)
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


def read_via_datasource(spark, path: str, version: int | None = None, options: dict | None = None):
    register(spark)
    r = spark.read.format("delta")
    if version is not None:
        r = r.option("versionAsOf", str(version))
    for k, v in (options or {}).items():
        r = r.option(f"storage.{k}", v)
    return r.load(path)
