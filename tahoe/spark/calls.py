"""What tahoe adds to PySpark's reader and writer calls for `format("delta")`, in the user's process: what
delta-spark users write that reaches no Python data source is carried to it as options.

  1. Save modes: `ErrorIfExists` (the default) and `Ignore` become `append` plus `saveMode=error|ignore`;
     the session's `spark.sql.sources.partitionOverwriteMode` is handed over (an explicit option wins).
  2. Partitioning: `partitionBy` of `write` and `writeStream` becomes the `__partition_columns` option.
  3. Reads: filter pushdown turned on and said (`__tahoe_filterPushdown`, also for `deltaSharing`) where
     Spark keeps each scan's pushdown plan to that scan (`internals.python_scans_scoped`: not Spark 4.3), the
     session time zone (`__tahoe_sessionTimeZone`) and batch or stream (`__tahoe_readKind`) handed over.
  4. Optimized writes: `optimizeWrite`, `spark.databricks.delta.optimizeWrite.enabled` or the table property
     `delta.autoOptimize.optimizeWrite` shuffles the DataFrame before saving (`__tahoe_optimizedWrite`).
  5. Native scans: a plain batch load of a table Spark's JVM reaches is the native parquet scan of the
     snapshot; `spark.tahoe.read.nativeScan=false` keeps every read on the data source.
  6. Native streaming sink: `writeStream.format("delta").start()` on a classic session, to a table Spark's JVM
     reaches, in append or complete mode, with options the sink takes, runs as `foreachBatch` with
     `tahoe.spark.streaming.NativeStreamSink` (Spark's parquet writer, the same commit);
     `spark.tahoe.write.nativeStreamingSink=false` keeps every stream on the data source's sink.
  7. Native streaming source: `readStream.format("delta").load()` on a classic session, of a table Spark's JVM
     reaches, without a schema or the change data feed, is `tahoe.spark.streaming.NativeStreamSource` (Spark's
     parquet reader); `spark.tahoe.read.nativeStreamingSource=false` keeps every stream read on the data source.
The wrappers (`tahoe.spark.patches`) act only where the session's `delta` source is tahoe's."""

from __future__ import annotations

import json
from typing import Any

from . import internals

__all__ = ["tahoe_owns_delta", "writer_state", "partition_columns", "MAPPED_MODES", "NATIVE_READ_CONF",
           "NATIVE_STREAM_SINK_CONF", "NATIVE_STREAM_SOURCE_CONF"]

PARTITION_COLUMNS_OPTION = "__partition_columns"
MAPPED_MODES = {"errorifexists": "error", "error": "error", "default": "error", "ignore": "ignore"}
_DELTA_SPARK_CLASS = "org.apache.spark.sql.delta.sources.DeltaDataSource"
# rule 5 on/off: "false" sends every format("delta") batch read through the Python data source
NATIVE_READ_CONF = "spark.tahoe.read.nativeScan"
# rule 6 on/off: "false" sends every format("delta") streaming write through the Python data source's sink
NATIVE_STREAM_SINK_CONF = "spark.tahoe.write.nativeStreamingSink"
# rule 7 on/off: "false" sends every format("delta") streaming read through the Python data source
NATIVE_STREAM_SOURCE_CONF = "spark.tahoe.read.nativeStreamingSource"
_owns: dict[int, bool] = {}


def tahoe_owns_delta(spark: Any) -> bool:
    """Whether `format("delta")` in this session is tahoe's source (not delta-spark's, whose
    classes a classic session's JVM may have). Spark Connect: assumed (the server decides)."""
    if internals.is_connect(spark):
        return True
    key = id(spark)
    if key not in _owns:
        _owns[key] = not internals.jvm_has_class(spark, _DELTA_SPARK_CLASS)
    return _owns[key]


def format_of(obj: Any) -> str:
    """The format a reader/writer was given (recorded by the `format` wrapper; else asked of the
    object itself)."""
    fmt = obj.__dict__.get("_tahoe_format")
    if fmt is not None:
        return fmt
    name = internals._pyspark_class(obj).__name__
    if name == "DataFrameWriter":
        return internals.writer_format(obj)
    if name == "DataStreamWriter":
        return internals.stream_writer_format(obj)
    return internals.reader_format(obj)


def _is_delta(obj: Any) -> bool:
    return format_of(obj) == "delta" and tahoe_owns_delta(internals.session_of(obj))


_SHARING_SPARK_CLASS = "io.delta.sharing.spark.DeltaSharingDataSource"


def _is_sharing(obj: Any) -> bool:
    """A `format("deltaSharing")` read whose source is tahoe's (not the official Spark connector,
    whose classes a classic session's JVM may have)."""
    if format_of(obj) != "deltasharing":
        return False
    return not internals.jvm_has_class(internals.session_of(obj), _SHARING_SPARK_CLASS)


def writer_state(w: Any) -> tuple[str, str]:
    """(format, save mode) of a DataFrameWriter, classic or Spark Connect."""
    return format_of(w), internals.writer_mode(w)


def partition_columns(cols: Any) -> list[str]:
    """`partitionBy(...)`'s arguments as a list of column names."""
    if cols is None:
        return []
    if isinstance(cols, str):
        return [cols]
    if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
        cols = cols[0]
    return [str(c) for c in cols]


# --- the behaviours tahoe.spark.patches installs: function(original, self, *args, **kwargs) ---

def remember_format(original: Any, self: Any, source: Any) -> Any:
    out = original(self, source)
    self.__dict__["_tahoe_format"] = str(source).lower()
    return out


def remember_partition_by(original: Any, self: Any, *cols: Any) -> Any:
    out = original(self, *cols)
    self.__dict__["_tahoe_partition_by"] = partition_columns(cols)
    return out


def remember_read_option(original: Any, self: Any, key: Any, value: Any) -> Any:
    """A reader's options, recorded with lower-cased names (`_tahoe_options`)."""
    out = original(self, key, value)
    self.__dict__.setdefault("_tahoe_options", {})[str(key).lower()] = value
    return out


def remember_read_options(original: Any, self: Any, **opts: Any) -> Any:
    out = original(self, **opts)
    self.__dict__.setdefault("_tahoe_options", {}).update({str(k).lower(): v for k, v in opts.items()})
    return out


def remember_write_option(original: Any, self: Any, key: Any, value: Any) -> Any:
    """A writer's options, recorded with names as given (`_tahoe_write_options`: delta.* keys)."""
    out = original(self, key, value)
    self.__dict__.setdefault("_tahoe_write_options", {})[str(key)] = value
    return out


def remember_write_options(original: Any, self: Any, **opts: Any) -> Any:
    out = original(self, **opts)
    self.__dict__.setdefault("_tahoe_write_options", {}).update({str(k): v for k, v in opts.items()})
    return out


def _hand_over_partitioning(w: Any, partition_by: Any) -> None:
    """`.partitionBy(...)` / `partitionBy=` of a delta write as the `__partition_columns` option,
    Spark's own partitioning cleared (rule 2 of the module docstring)."""
    cols = partition_columns(partition_by) if partition_by is not None else w.__dict__.get("_tahoe_partition_by")
    if cols:
        w.option(PARTITION_COLUMNS_OPTION, json.dumps(cols))
        type(w).partitionBy(w)   # no columns: Spark's partitioning cleared
        w.__dict__["_tahoe_partition_by"] = None


def save(original: Any, self: Any, path=None, format=None, mode=None, partitionBy=None, **options):
    if format is not None:
        self.format(format)
    if mode is not None:
        self.mode(mode)
    if not _is_delta(self):
        return original(self, path, None, None, partitionBy, **options)
    from .options import SAVE_MODE_OPTION, SESSION_AUTO_COMPACT_OPTION, SESSION_OVERWRITE_MODE_OPTION
    from .session import session_overwrite_mode

    spark = internals.session_of(self)
    mapped = MAPPED_MODES.get(internals.writer_mode(self).lower())
    if mapped is not None:
        self.mode("append").option(SAVE_MODE_OPTION, mapped)
    session_mode = session_overwrite_mode(spark)
    if session_mode is not None:
        self.option(SESSION_OVERWRITE_MODE_OPTION, session_mode)
    auto_compact = _session_auto_compact(spark)
    if auto_compact is not None:
        self.option(SESSION_AUTO_COMPACT_OPTION, auto_compact)
    _hand_over_time_zone(self, spark)
    _hand_over_replace_where(self, spark)
    _hand_over_utc_partition_values(self, spark)
    _hand_over_partitioning(self, partitionBy)
    if options:
        self.options(**options)
    _hand_over_storage(self, spark, path, internals.writer_options(self))
    target = _optimized_write(self, path)
    return original(target, path, None, None, None)


def _target_metadata(path: str, opts: dict[str, str]) -> Any:
    """The metaData of the table a write goes to, or None when it does not exist yet."""
    from ..log import DeltaLog

    from .options import storage_options_of

    log = DeltaLog.for_table(path, storage_options_of({**opts, "path": path}))
    return log.snapshot().metadata if log.exists() else None


def _optimized_write(w: Any, path: str | None) -> Any:
    """Rule 4: the writer to save — `w` itself, or a new writer of the shuffled DataFrame."""
    from ..protocol.properties import normalize_property
    from .optimized_write import optimize_write_enabled, optimized_write
    from .options import OPTIMIZED_WRITE_OPTION

    opts = internals.writer_options(w)
    low = {k.lower(): v for k, v in opts.items()}
    option: Any = low.get("optimizewrite")
    if option is not None:
        if option.strip().lower() not in ("true", "false"):
            return w                     # the source refuses the value by name
        option = option.strip().lower() == "true"
    table = path or low.get("path")
    if not table:
        return w                         # the source refuses a write without a path
    known: dict[str, Any] = {}

    def metadata() -> Any:
        if "md" not in known:
            known["md"] = _target_metadata(str(table), opts)
        return known["md"]

    def configuration() -> dict:
        md = metadata()
        if md is not None:
            return dict(md.configuration or {})
        try:
            return dict(normalize_property(k, v) for k, v in opts.items() if k.lower().startswith("delta."))
        except Exception:  # noqa: BLE001 - a bad property: the source refuses it by name
            return {}

    enabled = optimize_write_enabled(internals.session_of(w), configuration, option)
    w.option(OPTIMIZED_WRITE_OPTION, "true" if enabled else "false")
    if not enabled:
        return w
    given = low.get(PARTITION_COLUMNS_OPTION.lower()) or low.get("partitionby")
    if given:
        cols = json.loads(given) if given.startswith("[") else [c.strip() for c in given.split(",") if c.strip()]
    else:
        md = metadata()
        cols = list(md.partition_columns) if md is not None else []
    df = internals.writer_dataframe(w)
    target = optimized_write(df, cols).write
    target.format("delta").mode(writer_state(w)[1])
    for k, v in internals.writer_options(w).items():
        target.option(k, v)
    return target


def _session_auto_compact(spark: Any) -> str | None:
    """The session's auto compaction confs as JSON for the data source's commit (None: none set;
    a Python data source cannot read the session's confs itself)."""
    import dataclasses
    import json

    from ..write.auto_compact import AutoCompactSettings
    from .session import auto_compact_session_value, auto_compact_settings

    enabled = auto_compact_session_value(spark)
    settings = auto_compact_settings(spark)
    if enabled is None and settings == AutoCompactSettings():
        return None
    return json.dumps({"enabled": enabled, "settings": dataclasses.asdict(settings)})


def _hand_over_storage(rw: Any, spark: Any, path: Any, given: dict) -> None:
    """The session's Hadoop file-system confs as `storage.<key>` options of a delta read or write
    (`tahoe.spark.storage.hand_over`: options the caller gave win)."""
    from .storage import hand_over

    hand_over(rw, spark, str(path) if path else None, given)


def stream_start(original: Any, self: Any, path=None, format=None, outputMode=None, partitionBy=None,
                 queryName=None, **options):
    if format is not None:
        self.format(format)
    if _is_delta(self):
        _hand_over_partitioning(self, partitionBy)
        partitionBy = None
        given = {**self.__dict__.get("_tahoe_write_options", {}), **options}
        _hand_over_storage(self, internals.session_of(self), path or given.get("path"), given)
        _hand_over_time_zone(self, internals.session_of(self))
        _hand_over_utc_partition_values(self, internals.session_of(self))
        sink = _native_stream_sink(self, path, outputMode, options)
        if sink is not None:
            internals.clear_stream_partitioning(self)   # handed over above; foreachBatch takes none
            self.foreachBatch(sink)
            return original(self, None, None, outputMode, None, queryName, **options)
    return original(self, path, None, outputMode, partitionBy, queryName, **options)


def _conf_flag(spark: Any, name: str) -> bool:
    """A tahoe on/off session conf (default true); another value is refused, naming the conf."""
    value = str(spark.conf.get(name, "true")).strip().lower()
    if value not in ("true", "false"):
        from ..errors import InvalidOptionError

        raise InvalidOptionError(f"the session conf {name} takes true or false, got {value!r}")
    return value == "true"


def _native_stream_sink(w: Any, path: Any, output_mode: Any, options: dict) -> Any:
    """Rule 6: the `foreachBatch` function of a delta streaming write the native path takes, or None
    where the data source's sink writes it (Spark Connect, the conf off, update mode, options it
    refuses — the data source then reports them as it always does —, a store Spark's JVM does not
    reach)."""
    if internals.is_connect(w):
        return None
    spark = internals.session_of(w)
    if not _conf_flag(spark, NATIVE_STREAM_SINK_CONF):
        return None
    try:
        mode = str(output_mode or internals.stream_writer_output_mode(w)).strip().lower()
    except internals.PySparkInternalsError:
        return None
    if mode not in ("append", "complete"):
        return None
    from .options import table_path, write_options
    from .read import jvm_reaches
    from .streaming import NativeStreamSink

    given = {**w.__dict__.get("_tahoe_write_options", {}), **{str(k): v for k, v in options.items()}}
    if path is not None:
        given = {k: v for k, v in given.items() if k.lower() != "path"}
        given["path"] = path
    try:
        write_options(given, streaming=True)
        table = table_path(given)
        if not table or not jvm_reaches(str(table), spark):
            return None
    except Exception:  # noqa: BLE001 - the data source's sink refuses it by name, at the first batch
        return None
    return NativeStreamSink(str(table), given, mode == "complete")


_CDF_RANGE = ("startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp")


def _hand_over_time_zone(obj: Any, spark: Any) -> None:
    """The session's spark.sql.session.timeZone as the source's SESSION_TIME_ZONE_OPTION (the
    source runs in a Python worker that cannot read the session's confs; classic and Spark Connect
    sessions alike answer `spark.conf.get`)."""
    from .options import SESSION_TIME_ZONE_OPTION
    from .session import session_time_zone

    obj.option(SESSION_TIME_ZONE_OPTION, session_time_zone(spark))


def _hand_over_replace_where(w: Any, spark: Any) -> None:
    """delta-spark's replaceWhere confs of the session (constraint check, data columns) as the
    writer's SESSION_REPLACE_WHERE_OPTION; a bad value is refused here, naming the conf."""
    from .options import SESSION_REPLACE_WHERE_OPTION
    from .session import replace_where_settings

    check, data_columns = replace_where_settings(spark)
    w.option(SESSION_REPLACE_WHERE_OPTION, f"{str(check).lower()},{str(data_columns).lower()}")


def _hand_over_utc_partition_values(w: Any, spark: Any) -> None:
    """delta-spark's spark.databricks.delta.write.utcTimestampPartitionValues of the session, when
    false, as the writer's SESSION_UTC_PARTITION_VALUES_OPTION; a bad value is refused here, naming
    the conf."""
    from .options import SESSION_UTC_PARTITION_VALUES_OPTION
    from .session import utc_timestamp_partition_values

    if not utc_timestamp_partition_values(spark):
        w.option(SESSION_UTC_PARTITION_VALUES_OPTION, "false")


def _warn_ignored_range(given: dict) -> None:
    """A batch read with a change range but no readChangeFeed reads the snapshot (as delta-spark)."""
    import warnings

    cdf = any(str(given.get(k, "")).strip().lower() == "true" for k in ("readchangefeed", "readchangedata"))
    named = [n for n in _CDF_RANGE if n.lower() in given]
    if named and not cdf:
        warnings.warn(f"format('delta'): option(s) {', '.join(named)} have no effect without "
                      f"option('readChangeFeed', 'true'): this read returns the table's snapshot, as delta-spark's "
                      f"does. Add readChangeFeed to read the change data feed, or use versionAsOf / timestampAsOf "
                      f"to read an older version.", UserWarning, stacklevel=3)


def _load(original: Any, self: Any, batch: bool, path=None, format=None, schema=None, **options):
    if format is not None:
        self.format(format)
    ours = _is_delta(self)
    sharing = not ours and _is_sharing(self)
    if sharing and batch:   # deltaSharing: filter pushdown on, and said (rule 3)
        from .options import PUSHDOWN_OPTION
        from .session import configure

        spark = internals.session_of(self)
        configure(spark)
        if internals.python_scans_scoped(spark):   # else one scan's hints may pick another scan's files
            self.option(PUSHDOWN_OPTION, "true")
    if sharing:   # its timestamp options are read in the session zone, as the official connector's
        _hand_over_time_zone(self, internals.session_of(self))
    if ours:
        from ..read.changes import CDF_TIMESTAMP_OUT_OF_RANGE_CONF
        from .options import CDF_OUT_OF_RANGE_OPTION, PARALLELISM_OPTION, PUSHDOWN_OPTION, READ_KIND_OPTION
        from .session import configure, default_parallelism, session_conf

        spark = internals.session_of(self)
        configure(spark)
        if batch:
            _warn_ignored_range({**self.__dict__.get("_tahoe_options", {}),
                                 **{str(k).lower(): v for k, v in options.items()}})
        self.option(READ_KIND_OPTION, "batch" if batch else "stream")
        if batch:
            if internals.python_scans_scoped(spark):   # else pushed filters may pick another scan's files
                self.option(PUSHDOWN_OPTION, "true")
            parallelism = default_parallelism(spark)
            if parallelism:
                self.option(PARALLELISM_OPTION, str(parallelism))
        out_of_range = session_conf(spark, CDF_TIMESTAMP_OUT_OF_RANGE_CONF)
        if out_of_range is not None:
            self.option(CDF_OUT_OF_RANGE_OPTION, str(out_of_range).strip().lower())
        _hand_over_time_zone(self, spark)
        if batch and schema is None:
            native = _native_read(self, spark, path, options)
            if native is not None:
                return native
        given = {**self.__dict__.get("_tahoe_options", {}), **{str(k).lower(): v for k, v in options.items()}}
        _hand_over_storage(self, spark, path if isinstance(path, str) else given.get("path"), given)
        if not batch and schema is None:
            native = _native_stream_source(self, spark, path, options)
            if native is not None:
                return native
        if batch and internals.is_connect(self):
            # Spark Connect analyses a plan only when it is used: resolve it now (one round trip,
            # the schema kept by the DataFrame), so that a missing table, a version out of range
            # or a bad option fails load() as on classic Spark — named by tahoe and by
            # delta-spark's error class (`surfaced`), not at the first action as a bare
            # PYTHON_DATA_SOURCE_ERROR
            df = original(self, path, None, schema, **options)
            df.schema  # noqa: B018 - the round trip is the point
            return df
    return original(self, path, None, schema, **options)


def batch_load(original: Any, self: Any, path=None, format=None, schema=None, **options):
    return _load(original, self, True, path, format, schema, **options)


def stream_load(original: Any, self: Any, path=None, format=None, schema=None, **options):
    return _load(original, self, False, path, format, schema, **options)


def _native_snapshot(reader: Any, spark: Any, path: Any, options: dict, conf: str, parse: Any,
                     snapshot: Any) -> tuple[dict, Any] | None:
    """Rules 5 and 7: (the read's options, its snapshot) when the native path reads it, else None
    — Spark Connect, `conf` off, a schema given, several paths, the change data feed, a store the
    JVM does not reach, and options or a table that are wrong, so that the source reports them as
    it always does. `parse`: the options' check; `snapshot(log, opts)`: the snapshot read."""
    if internals.is_connect(reader) or (path is not None and not isinstance(path, str)):
        return None
    if not _conf_flag(spark, conf) or internals.reader_schema_given(reader):
        return None
    from ..log import DeltaLog
    from .read import jvm_reaches

    given = {**reader.__dict__.get("_tahoe_options", {}), **{str(k).lower(): v for k, v in options.items()}}
    if path is not None:
        given["path"] = path
    if not given.get("path"):
        return None
    try:
        opts = parse(given)
        if opts["cdf"] or not jvm_reaches(str(opts["path"]), spark):
            return None
        return given, snapshot(DeltaLog.for_table(opts["path"], opts["storage_options"]), opts)
    except Exception:  # noqa: BLE001 - bad options, no table, ...: the source fails with its error
        return None


def _native_stream_source(reader: Any, spark: Any, path: Any, options: dict) -> Any:
    """Rule 7: the streaming DataFrame of `NativeStreamSource`, or None where the data source reads
    the stream (as `_native_snapshot`; also Spark without the classes it needs, a table whose
    native read differs from the declared schema)."""
    from .options import stream_read_options
    from .scan import spark_read_schema
    from .streaming import NativeStreamSource

    found = _native_snapshot(reader, spark, path, options, NATIVE_STREAM_SOURCE_CONF, stream_read_options,
                             lambda log, opts: log.snapshot())
    if found is None:
        return None
    given, snap = found
    try:
        schema = spark_read_schema(snap)
        source = NativeStreamSource(spark, given, schema, str(snap.table_root))
        if not source.reads_as_declared(snap):
            return None
        return internals.jvm_stream_source_dataframe(spark, source, schema)
    except Exception:  # noqa: BLE001 - the data source reads it, and reports what is wrong
        return None


def _native_read(reader: Any, spark: Any, path: Any, options: dict) -> Any:
    """Rule 5: a batch snapshot read of a table Spark's JVM reaches, as the native parquet scan
    (`tahoe.spark.read.read_snapshot`, what `DeltaTable.toDF()` returns); None where the data
    source reads it (`_native_snapshot`)."""
    from .options import read_options
    from .row_tracking import read_table

    found = _native_snapshot(reader, spark, path, options, NATIVE_READ_CONF, read_options,
                             lambda log, opts: log.snapshot(version=opts["version"], timestamp=opts["timestamp"]))
    if found is None:
        return None
    return read_table(spark, found[1])   # `_metadata.row_id` / `row_commit_version` on row-tracking tables
