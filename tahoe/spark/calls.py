"""What tahoe adds to PySpark's own reader and writer calls for `format("delta")`, in the user's
process. The `delta` data source runs in Spark's Python workers and sees only its options; some
of what delta-spark users write reaches no data source, so tahoe carries it there as options:

  1. Save modes. Spark hands a Python data source only append/overwrite; `ErrorIfExists` — also
     the default when `.mode()` is not called — and `Ignore` are refused at analysis
     (UNSUPPORTED_DATA_SOURCE_SAVE_MODE). `save` maps them to `append` plus the option
     `saveMode=error|ignore`, which the writer enforces like delta-spark. It also hands the writer
     the session's `spark.sql.sources.partitionOverwriteMode` (an explicit option wins).
  2. Partitioning. Spark refuses `df.write.partitionBy(...)` for a Python data source ("the
     partitioning does not match the existing table's") and silently drops
     `df.writeStream.partitionBy(...)`. `partitionBy` is recorded and, on `save` / `start` of a
     `delta` write, handed over as the `__partition_columns` option (what delta-spark's own
     DataFrameWriter passes), Spark's partitioning cleared.
  3. Reads. `load` turns filter pushdown on for the session (`spark.sql.python.filterPushdown.
     enabled`, with the other runtime confs of `tahoe.spark.session.configure`) and tells the
     source so (`__tahoe_filterPushdown`: without it the source reads without pushed filters,
     since a reader that takes them fails in a session where pushdown is off), and passes
     delta-spark's `spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled` when the
     session sets it, the session time zone (`__tahoe_sessionTimeZone`: zone-less timestamps in
     options, partition values and conditions are wall-clock time in it, as in delta-spark; the
     save wrapper hands it over too), and whether the load is a batch or a streaming one (`__tahoe_readKind`: the
     source then refuses the other kind's options at `load`, when Spark asks its schema; without
     it, at the query's start). A batch `format("deltaSharing")` load gets the same filter
     pushdown treatment (its pushed filters become jsonPredicateHints); without it the
     `deltaSharing` source reads without pushed filters. A batch load given `startingVersion` / `startingTimestamp` /
     `endingVersion` / `endingTimestamp` without `readChangeFeed` reads the snapshot, as
     delta-spark does (it ignores them): the wrapper says so with a `UserWarning` (the reader's
     options are recorded by wrapping `option` / `options`).
  4. Optimized writes. The source's tasks write the rows Spark hands them and cannot shuffle
     them, so `save` decides as delta-spark does — the writer option `optimizeWrite`, else the
     session's `spark.databricks.delta.optimizeWrite.enabled`, else the table property
     `delta.autoOptimize.optimizeWrite` (of the existing table, read only when needed, or among
     the `delta.*` options of a write that creates it) — and, when on, saves the DataFrame
     shuffled by the partition columns (`tahoe.spark.optimized_write`: each partition's
     rows in one task, so one file per partition; unpartitioned, tasks of about
     `spark.databricks.delta.optimizeWrite.binSize`) through a new writer with the same format,
     mode and options. The decision is handed over as `__tahoe_optimizedWrite`, without which the
     source refuses `optimizeWrite=true`.
  5. Native scans. A batch `format("delta")` load of a table Spark's JVM reaches (local disk,
     `file:` URIs; not object stores without a Hadoop connector), with no schema given, no change data feed
     or `storage.*` options, returns the native parquet scan of the snapshot
     (`tahoe.spark.read.read_snapshot`, as `DeltaTable.toDF()` and delta-spark's own reads) instead
     of the Python data source: the same rows at Spark's parquet speed (the data source moves
     every row through a Python worker and Arrow IPC, about 2x the native scan here). Filters
     applied later get Spark's partition pruning and parquet row-group skipping (the source
     would skip whole files by the log's stats instead). Bad options and missing tables still
     fail through the source, with its errors; the session conf `spark.tahoe.read.nativeScan=false`
     keeps every read on the source. Spark Connect reads keep the source.

`install()` wraps these calls — classic and Spark Connect `DataFrameReader.format/option/options/load`,
`DataFrameWriter.format/partitionBy/save`, `DataStreamReader.format/load`,
`DataStreamWriter.format/partitionBy/start` — once; importing `tahoe.spark` runs it. The wrappers
act only on `format("delta")` in a session where the `delta` source is tahoe's: a classic session
whose JVM has delta-spark's classes is left to delta-spark. A process that never imports tahoe
gets them too where tahoe is installed: its `tahoe-pyspark-hook.pth` shims these methods at
PySpark's import and installs the wrappers at the first call (`_tahoe_pyspark_hook`). Only where
the hook is off (`TAHOE_PYSPARK_HOOK=0`, or a Spark Connect client without tahoe installed) do
`format("delta")` writes need `.mode("append"/"overwrite")` or the `saveMode` option and the
`partitionBy` option — `writeStream.partitionBy` is then dropped by Spark itself.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Iterator

__all__ = ["install", "tahoe_owns_delta", "writer_state", "partition_columns", "MAPPED_MODES", "NATIVE_READ_CONF"]

PARTITION_COLUMNS_OPTION = "__partition_columns"
MAPPED_MODES = {"errorifexists": "error", "error": "error", "default": "error", "ignore": "ignore"}
_DELTA_SPARK_CLASS = "org.apache.spark.sql.delta.sources.DeltaDataSource"
# rule 5 on/off: "false" sends every format("delta") batch read through the Python data source
NATIVE_READ_CONF = "spark.tahoe.read.nativeScan"
_owns: dict[int, bool] = {}


def tahoe_owns_delta(spark: Any) -> bool:
    """Whether `format("delta")` in this session is tahoe's source (not delta-spark's, whose
    classes a classic session's JVM may have). Spark Connect: assumed (the server decides)."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return True
    key = id(jvm)
    if key not in _owns:
        try:
            jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(_DELTA_SPARK_CLASS)
            _owns[key] = False
        except Exception:  # noqa: BLE001 - ClassNotFoundException: no delta-spark here
            _owns[key] = True
    return _owns[key]


def _session(obj: Any) -> Any:
    for name in ("_spark", "_session", "_client"):
        s = getattr(obj, name, None)
        if s is not None:
            return s
    return None


def _format_of(obj: Any) -> str:
    """The format a reader/writer was given (recorded by the `format` wrapper; else asked of the
    object itself)."""
    fmt = getattr(obj, "_tahoe_format", None)
    if fmt is None:
        try:
            if hasattr(obj, "_jwrite"):
                fmt = str(obj._jwrite.source())
            elif hasattr(obj, "_write"):
                fmt = str(obj._write.source or "")
            elif hasattr(obj, "_write_proto"):
                fmt = str(obj._write_proto.format or "")
            elif hasattr(obj, "_format"):
                fmt = str(obj._format or "")
        except Exception:  # noqa: BLE001 - an unexpected PySpark layout: not ours to touch
            fmt = ""
    return (fmt or "").lower()


def _is_delta(obj: Any) -> bool:
    if _format_of(obj) != "delta":
        return False
    spark = _session(obj)
    return spark is not None and tahoe_owns_delta(spark)


_SHARING_SPARK_CLASS = "io.delta.sharing.spark.DeltaSharingDataSource"


def _is_sharing(obj: Any) -> bool:
    """A `format("deltaSharing")` read whose source is tahoe's (not the official Spark connector,
    whose classes a classic session's JVM may have)."""
    if _format_of(obj) != "deltasharing":
        return False
    spark = _session(obj)
    jvm = getattr(spark, "_jvm", None)
    if spark is None:
        return False
    if jvm is None:
        return True
    try:
        jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass(_SHARING_SPARK_CLASS)
        return False
    except Exception:  # noqa: BLE001 - ClassNotFoundException: no official connector here
        return True


def writer_state(w: Any) -> tuple[str, str]:
    """(format, save mode) of a DataFrameWriter, classic or Spark Connect (`source` / `curmode`
    of the classic JVM writer are Spark-internal accessors; should they go away, the wrapper
    stands aside and Spark's own UNSUPPORTED_DATA_SOURCE_SAVE_MODE error stands)."""
    if hasattr(w, "_jwrite"):
        return _format_of(w) or str(w._jwrite.source()), str(w._jwrite.curmode().toString())
    return _format_of(w) or str(w._write.source or ""), str(w._write.mode or "errorifexists")


def _mark(fn: Any, original: Any, flag: str) -> Any:
    fn.__doc__ = original.__doc__
    setattr(fn, flag, True)
    fn._tahoe_surfacing = getattr(original, "_tahoe_surfacing", False)  # type: ignore[attr-defined]
    return fn


def _wrap_format(cls: Any) -> None:
    original = cls.format
    if getattr(original, "_tahoe_calls", False):
        return

    def format(self, source):
        out = original(self, source)
        self._tahoe_format = str(source).lower()
        return out

    cls.format = _mark(format, original, "_tahoe_calls")


def partition_columns(cols: Any) -> list[str]:
    """`partitionBy(...)`'s arguments as a list of column names."""
    if cols is None:
        return []
    if isinstance(cols, str):
        return [cols]
    if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
        cols = cols[0]
    return [str(c) for c in cols]


def _wrap_partition_by(cls: Any) -> None:
    original = cls.partitionBy
    if getattr(original, "_tahoe_calls", False):
        return

    def partitionBy(self, *cols):
        out = original(self, *cols)
        self._tahoe_partition_by = partition_columns(cols)
        return out

    cls.partitionBy = _mark(partitionBy, original, "_tahoe_calls")


def _hand_over_partitioning(w: Any, partition_by: Any) -> None:
    """`.partitionBy(...)` / `partitionBy=` of a delta write as the `__partition_columns` option,
    Spark's own partitioning cleared (rule 2 of the module docstring)."""
    cols = partition_columns(partition_by) if partition_by is not None else getattr(w, "_tahoe_partition_by", None)
    if cols:
        w.option(PARTITION_COLUMNS_OPTION, json.dumps(cols))
        type(w).partitionBy(w)   # no columns: Spark's partitioning cleared
        w._tahoe_partition_by = None


def _wrap_save(cls: Any) -> None:
    original = cls.save
    if getattr(original, "_tahoe_calls", False):
        return

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options):
        from .session import session_overwrite_mode
        from .options import SAVE_MODE_OPTION, SESSION_AUTO_COMPACT_OPTION, SESSION_OVERWRITE_MODE_OPTION

        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        try:
            ours = _is_delta(self)
            current = writer_state(self)[1] if ours else ""
        except Exception:  # noqa: BLE001 - an unexpected writer: leave it to Spark
            ours, current = False, ""
        if ours:
            mapped = MAPPED_MODES.get(current.lower())
            if mapped is not None:
                self.mode("append").option(SAVE_MODE_OPTION, mapped)
            session_mode = session_overwrite_mode(_session(self))
            if session_mode is not None:
                self.option(SESSION_OVERWRITE_MODE_OPTION, session_mode)
            auto_compact = _session_auto_compact(_session(self))
            if auto_compact is not None:
                self.option(SESSION_AUTO_COMPACT_OPTION, auto_compact)
            _hand_over_time_zone(self, _session(self))
            _hand_over_replace_where(self, _session(self))
            _hand_over_partitioning(self, partitionBy)
            partitionBy = None
            if options:
                self.options(**options)
                options = {}
            _hand_over_storage(self, _session(self), path, _writer_options(self))
            target = _optimized_write(self, path)
            return original(target, path, None, None, None)
        return original(self, path, None, None, partitionBy, **options)

    cls.save = _mark(save, original, "_tahoe_calls")


def _writer_options(w: Any) -> dict[str, str]:
    """The options given to a DataFrameWriter so far, names as given (classic: the JVM writer's
    `extraOptions`, a Spark-internal accessor; Spark Connect: the write operation's options)."""
    if hasattr(w, "_jwrite"):
        m = w._jwrite.extraOptions().originalMap()
        out, it = {}, m.iterator()
        while it.hasNext():
            e = it.next()
            out[str(e._1())] = str(e._2())
        return out
    return {str(k): str(v) for k, v in w._write.options.items() if v is not None}


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

    opts = _writer_options(w)
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

    enabled = optimize_write_enabled(_session(w), configuration, option)
    w.option(OPTIMIZED_WRITE_OPTION, "true" if enabled else "false")
    if not enabled:
        return w
    given = low.get(PARTITION_COLUMNS_OPTION.lower()) or low.get("partitionby")
    if given:
        cols = json.loads(given) if given.startswith("[") else [c.strip() for c in given.split(",") if c.strip()]
    else:
        md = metadata()
        cols = list(md.partition_columns) if md is not None else []
    if hasattr(w, "_jwrite"):
        df = w._df
    else:
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

        df = ConnectDataFrame(w._df, w._spark)
    target = optimized_write(df, cols).write
    target.format("delta").mode(writer_state(w)[1])
    for k, v in _writer_options(w).items():
        target.option(k, v)
    return target


def _hand_over_storage(rw: Any, spark: Any, path: Any, given: dict) -> None:
    """The session's Hadoop file-system confs as `storage.<key>` options of a delta read or write
    (`tahoe.spark.storage.hand_over`); an unexpected session or layout hands nothing over."""
    from .storage import hand_over

    try:
        hand_over(rw, spark, str(path) if path else None, given)
    except Exception:  # noqa: BLE001 - the source refuses bad options by name itself
        pass


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


def _wrap_start(cls: Any) -> None:
    original = cls.start
    if getattr(original, "_tahoe_calls", False):
        return

    def start(self, path=None, format=None, outputMode=None, partitionBy=None, queryName=None, **options):
        if format is not None:
            self.format(format)
        try:
            ours = _is_delta(self)
        except Exception:  # noqa: BLE001
            ours = False
        if ours:
            _hand_over_partitioning(self, partitionBy)
            partitionBy = None
            try:
                given = _writer_options(self)
            except Exception:  # noqa: BLE001 - an unexpected writer layout: the session's options stay out
                given = None
            if given is not None:
                _hand_over_storage(self, _session(self), path or given.get("path"), {**given, **options})
        return original(self, path, None, outputMode, partitionBy, queryName, **options)

    cls.start = _mark(start, original, "_tahoe_calls")


def remember_options(cls: Any, attr: str, flag: str, lower: bool) -> None:
    """Wrap `cls.option` / `cls.options` (a reader's or writer's) to record the options given on
    the instance, in the dict `attr` (names lower-cased when `lower`); `flag` marks the wrappers
    so that installing twice wraps once."""
    original, original_many = cls.option, cls.options
    if getattr(original, flag, False):
        return

    def name(key: Any) -> str:
        return str(key).lower() if lower else str(key)

    def option(self, key, value):
        out = original(self, key, value)
        self.__dict__.setdefault(attr, {})[name(key)] = value
        return out

    def options(self, **opts):
        out = original_many(self, **opts)
        self.__dict__.setdefault(attr, {}).update({name(k): v for k, v in opts.items()})
        return out

    for fn, orig in ((option, original), (options, original_many)):
        for k, v in vars(orig).items():   # the other installers' marks stay visible (idempotence)
            if k.startswith("_tahoe_"):
                setattr(fn, k, v)
        setattr(cls, fn.__name__, _mark(fn, orig, flag))


def _wrap_option(cls: Any) -> None:
    """Record a reader's options (lower-cased names) on it, for the load wrapper's checks."""
    remember_options(cls, "_tahoe_options", "_tahoe_calls", lower=True)


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


def _wrap_load(cls: Any, batch: bool) -> None:
    original = cls.load
    if getattr(original, "_tahoe_calls", False):
        return

    def load(self, path=None, format=None, schema=None, **options):
        if format is not None:
            self.format(format)
        try:
            ours = _is_delta(self)
            sharing = not ours and batch and _is_sharing(self)
        except Exception:  # noqa: BLE001
            ours = sharing = False
        if sharing:   # deltaSharing: filter pushdown on, and said, as for delta (rule 3)
            from .options import PUSHDOWN_OPTION
            from .session import configure

            configure(_session(self))
            self.option(PUSHDOWN_OPTION, "true")
        try:
            sharing_any = not ours and _is_sharing(self)
        except Exception:  # noqa: BLE001
            sharing_any = False
        if sharing_any:   # its timestamp options are read in the session zone, as the official connector's
            _hand_over_time_zone(self, _session(self))
        if ours:
            from ..read.changes import CDF_TIMESTAMP_OUT_OF_RANGE_CONF
            from .options import CDF_OUT_OF_RANGE_OPTION, PARALLELISM_OPTION, PUSHDOWN_OPTION, READ_KIND_OPTION
            from .session import configure, default_parallelism

            spark = _session(self)
            configure(spark)
            if batch:
                _warn_ignored_range({**getattr(self, "_tahoe_options", {}),
                                     **{str(k).lower(): v for k, v in options.items()}})
            self.option(READ_KIND_OPTION, "batch" if batch else "stream")
            if batch:
                self.option(PUSHDOWN_OPTION, "true")
                parallelism = default_parallelism(spark)
                if parallelism:
                    self.option(PARALLELISM_OPTION, str(parallelism))
            try:
                out_of_range = spark.conf.get(CDF_TIMESTAMP_OUT_OF_RANGE_CONF, None)
            except Exception:  # noqa: BLE001 - a server that does not answer confs
                out_of_range = None
            if out_of_range is not None:
                self.option(CDF_OUT_OF_RANGE_OPTION, str(out_of_range).strip().lower())
            _hand_over_time_zone(self, spark)
            if batch and schema is None:
                native = _native_read(self, spark, path, options)
                if native is not None:
                    return native
            given = {**getattr(self, "_tahoe_options", {}), **{str(k).lower(): v for k, v in options.items()}}
            _hand_over_storage(self, spark, path if isinstance(path, str) else given.get("path"), given)
        return original(self, path, None, schema, **options)

    cls.load = _mark(load, original, "_tahoe_calls")


def _native_read(reader: Any, spark: Any, path: Any, options: dict) -> Any:
    """Rule 5: a batch snapshot read of a table Spark's JVM reaches, as the native parquet scan
    (`tahoe.spark.read.read_snapshot`, what `DeltaTable.toDF()` returns); None where the data
    source reads it (Spark Connect, a schema given, several paths, the change data feed,
    `storage.*` options, a store the JVM cannot reach) — and where the options or the table
    are wrong, so that the source reports it as it always does."""
    if not hasattr(spark, "_jsparkSession") or not hasattr(reader, "_jreader"):
        return None
    if path is not None and not isinstance(path, str):
        return None
    try:
        native = str(spark.conf.get(NATIVE_READ_CONF, "true")).strip().lower()
    except Exception:  # noqa: BLE001
        return None
    if native not in ("true", "false"):
        from ..errors import InvalidOptionError

        raise InvalidOptionError(f"the session conf {NATIVE_READ_CONF} takes true or false, got {native!r}")
    if native == "false":
        return None
    try:
        if reader._jreader.userSpecifiedSchema().isDefined():
            return None
    except Exception:  # noqa: BLE001 - cannot tell: the source decides
        return None
    from ..log import DeltaLog
    from .options import read_options
    from .read import jvm_reaches

    given = {**getattr(reader, "_tahoe_options", {}), **{str(k).lower(): v for k, v in options.items()}}
    if path is not None:
        given["path"] = path
    if not given.get("path"):
        return None
    try:
        opts = read_options(given)
        if opts["cdf"] or not jvm_reaches(str(opts["path"]), spark):
            return None
        snap = DeltaLog.for_table(opts["path"], opts["storage_options"]).snapshot(
            version=opts["version"], timestamp=opts["timestamp"])
    except Exception:  # noqa: BLE001 - bad options, no table, ...: the source fails with its error
        return None
    from .row_tracking import read_table

    return read_table(spark, snap)   # `_metadata.row_id` / `row_commit_version` on row-tracking tables


_TARGETS = (
    ("pyspark.sql.readwriter", "DataFrameReader", ("format", "option", "load_batch")),
    ("pyspark.sql.readwriter", "DataFrameWriter", ("format", "partitionBy", "save")),
    ("pyspark.sql.streaming.readwriter", "DataStreamReader", ("format", "option", "load_stream")),
    ("pyspark.sql.streaming.readwriter", "DataStreamWriter", ("format", "partitionBy", "start")),
    ("pyspark.sql.connect.readwriter", "DataFrameReader", ("format", "option", "load_batch")),
    ("pyspark.sql.connect.readwriter", "DataFrameWriter", ("format", "partitionBy", "save")),
    ("pyspark.sql.connect.streaming.readwriter", "DataStreamReader", ("format", "option", "load_stream")),
    ("pyspark.sql.connect.streaming.readwriter", "DataStreamWriter", ("format", "partitionBy", "start")),
)


def pyspark_classes(targets: Iterable[tuple[str, str, Any]]) -> Iterator[tuple[Any, Any]]:
    """(class, what) for each (module, class name, what) of `targets` that can be wrapped now:
    Spark Connect's classes only once something imported `pyspark.sql.connect.session`
    (importing them costs seconds); a class an unexpected PySpark layout (or no Connect extras)
    lacks is skipped."""
    import importlib

    for module, cls_name, what in targets:
        if ".connect." in module and "pyspark.sql.connect.session" not in sys.modules:
            continue
        try:
            cls = getattr(importlib.import_module(module), cls_name)
        except Exception:  # noqa: BLE001 - an unexpected PySpark layout (or no Connect extras)
            continue
        yield cls, what


def install() -> None:
    """Wrap the calls of the module docstring (idempotent). Spark Connect's classes only once
    something imported them (as `tahoe.spark.surfacing.install`)."""
    hook = sys.modules.get("_tahoe_pyspark_hook")
    if hook is not None:   # its shims off first: these wrappers wrap PySpark's own methods
        hook.restore()
    for cls, what in pyspark_classes(_TARGETS):
        for w in what:
            if w == "format":
                _wrap_format(cls)
            elif w == "option":
                _wrap_option(cls)
            elif w == "partitionBy":
                _wrap_partition_by(cls)
            elif w == "save":
                _wrap_save(cls)
            elif w == "start":
                _wrap_start(cls)
            elif w == "load_batch":
                _wrap_load(cls, True)
            elif w == "load_stream":
                _wrap_load(cls, False)
