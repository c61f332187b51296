"""The `delta` Python data source: `spark.read.format("delta")` / `df.write.format("delta")`.

  1. Reads: the driver plans the snapshot's files (partition pruning, stats skipping) into input partitions
     of about 128 MB; executors read them with `tahoe.read.ArrowFileReader`, so any store tahoe reaches works.
  2. Writes: executors write parquet with pyarrow and return AddFiles; the driver commits once
     (`tahoe.spark.write`). Streams are `tahoe.spark.streaming`'s.
  3. Options are checked first (`tahoe.spark.options`); every other option is refused by name.
  4. Tables by name: resolved to paths with Delta SQL on (`tahoe.spark.sql`), else refused, saying what to do.
  5. Spark finds the source by itself where tahoe is installed (`pyspark_tahoe_delta.DefaultSource`).
  6. Save modes `ErrorIfExists` / `Ignore` arrive as `saveMode=error|ignore` (`tahoe.spark.calls`); either
     creates a missing table.
Executors need tahoe importable (see `tahoe.spark`)."""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceReader

from .options import PARALLELISM_OPTION, PUSHDOWN_OPTION, READ_KIND_OPTION, check_properties_apply, read_options, table_path, write_options
from .scan import ChangesPartition, FilesPartition, TableFiles, change_partitions, spark_read_schema

__all__ = ["DeltaDataSource", "DefaultSource", "register", "read_via_datasource"]

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
            self._time_zone = opts["time_zone"]
            log = DeltaLog.for_table(opts["path"], self._storage)
            self._snap = log.snapshot(version=opts.get("version"), timestamp=opts.get("timestamp"))
            self._cdf = opts["cdf"]
        return self._snap

    def _cdf_read(self, opts: dict):
        """(log, read snapshot, start, end) of a batch change feed read: the range and the read
        schema's snapshot (`tahoe.read.changes` rules 5, 6), resolved once."""
        if getattr(self, "_cdf_plan", None) is None:
            from ..log import DeltaLog
            from ..read.changes import change_read_snapshot, resolve_change_range

            snap = self._snapshot()
            log = DeltaLog.for_table(snap.table_root, opts["storage_options"])
            rng = resolve_change_range(log, snap.version, opts["starting_version"], opts["ending_version"],
                                       opts["starting_timestamp"], opts["ending_timestamp"],
                                       opts["allow_out_of_range"], time_zone=opts["time_zone"])
            start, end = rng or (None, None)
            read = change_read_snapshot(log, snap, start, end, opts["ending_version"] is not None
                                        or opts["ending_timestamp"] is not None)
            self._cdf_plan = (log, read, start, end)
        return self._cdf_plan

    def _cdf_units(self, opts: dict) -> list:
        """The planned change units of a batch change feed read (its CDF and schema checks
        passed), once."""
        if getattr(self, "_cdf_units_", None) is None:
            from ..read.changes import plan_changes

            log, read, start, end = self._cdf_read(opts)
            self._cdf_units_ = plan_changes(log, read, start, end).units
        return self._cdf_units_

    def schema(self):
        snap = self._snapshot()
        kind = str(self.options.get(READ_KIND_OPTION, "")).lower()
        ends = any(str(k).lower() in ("endingversion", "endingtimestamp") for k in self.options)
        if self._cdf and kind == "batch":
            # planned now, at load(): its errors reach the caller there (delta-spark's come at
            # load() or at the first action)
            opts = read_options(self.options)
            self._cdf_units(opts)
            snap = self._cdf_read(opts)[1]
        elif self._cdf and kind != "stream" and ends:   # only a batch read names an end (a stream refuses it)
            snap = self._cdf_read(read_options(self.options))[1]
        return spark_read_schema(snap, self._cdf)

    def reader(self, schema):
        opts = read_options(self.options)   # a batch read: batch options only
        if opts["cdf"]:
            return DeltaChangesReader(self._cdf_read(opts)[1], self._cdf_units(opts), opts, schema)
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
        self.files = TableFiles(snap, source._storage, schema, [f.name for f in schema.fields],
                                time_zone=source._time_zone)
        self._time_zone = source._time_zone
        self._snap = snap
        self._filters: list = []
        try:   # the session's parallelism, handed over by tahoe's load wrapper (tahoe.spark.calls)
            self._min_partitions = int(source.options.get(PARALLELISM_OPTION) or 0) or None
        except ValueError:
            self._min_partitions = None

    def __getstate__(self):
        # what the executors' read() needs: not the snapshot nor the filters (driver-side planning)
        return {k: v for k, v in self.__dict__.items() if k not in ("_snap", "_filters")}

    def partitions(self):
        from .skipping import plan_files

        files = plan_files(self._snap, self._filters, self._time_zone)
        entries = [(p, dict(pv) if pv else {}, dict(dv) if dv else None, sz)
                   for p, pv, dv, sz in zip(files.column("path").to_pylist(),
                                            files.column("partitionValues").to_pylist(),
                                            files.column("deletionVector").to_pylist(),
                                            files.column("size").to_pylist())]
        return self.files.partitions(entries, min_partitions=self._min_partitions) or [FilesPartition([])]

    def read(self, partition: FilesPartition) -> Iterator:
        return self.files.read(partition)


class DeltaFilteringReader(DeltaReader):
    """A DeltaReader that takes Spark's pushed filters for file skipping — only where the session
    has filter pushdown on (Spark refuses a reader with `pushFilters` otherwise), which tahoe's
    `load` wrapper sees to and tells the source (`tahoe.spark.options.PUSHDOWN_OPTION`) — and only
    where Spark keeps the partitions planned after a pushdown with that one scan
    (`tahoe.spark.internals.python_scans_scoped`; Spark 4.3 shares them among every scan of one
    DataFrame, so a self-join's scans would read each other's skipped file lists)."""

    def pushFilters(self, filters):
        # Spark re-applies every filter; tahoe uses the supported ones for file skipping only.
        from .skipping import pushed_filter

        for f in filters:
            expr = pushed_filter(f)
            if expr is not None:
                self._filters.append(expr)
            yield f


class DeltaChangesReader(DataSourceReader):
    """`readChangeFeed`: the driver resolves the range and plans its change units
    (`tahoe.read.changes`: delta-spark's range rules and errors, the CDF and schema checks); the
    executors read them (cdc files, or added/removed files with their deletion vectors) with
    tahoe's Arrow reader. The rows are in the read schema of `tahoe.read.changes` rule 6 (the
    latest version's, or the end version's on a table with column mapping), fixed when the
    DataFrame was made."""

    def __init__(self, snap, units: list, opts: dict, schema):
        self._units = units
        data = [f.name for f in schema.fields if f.name not in ("_change_type", "_commit_version", "_commit_timestamp")]
        self.files = TableFiles(snap, opts["storage_options"], schema, data, time_zone=opts["time_zone"])

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_units"}

    def partitions(self):
        return change_partitions(self._units) or [ChangesPartition([])]

    def read(self, partition: ChangesPartition) -> Iterator:
        return self.files.read_changes(partition)


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
    from .patches import install
    from .session import configure, mark_registered, registered

    configure(spark)
    if registered(spark):
        return
    from .sharing import DeltaSharingDataSource   # format("deltaSharing") too

    _register_source(spark, DeltaDataSource)
    _register_source(spark, DeltaSharingDataSource)
    mark_registered(spark)
    install()


def _register_source(spark, source) -> None:
    """`spark.dataSource.register(source)`, with `spark` the JVM's active session while it
    runs: Spark checks the name against the *active* session's sources, so registering in a second
    session of one JVM (`spark.newSession()`) otherwise fails with DATA_SOURCE_ALREADY_EXISTS."""
    from .internals import with_active_session

    with_active_session(spark, lambda: spark.dataSource.register(source))


def read_via_datasource(spark, path: str, version: int | None = None, options: dict | None = None):
    register(spark)
    r = spark.read.format("delta")
    if version is not None:
        r = r.option("versionAsOf", str(version))
    for k, v in (options or {}).items():
        r = r.option(f"storage.{k}", v)
    return r.load(path)
