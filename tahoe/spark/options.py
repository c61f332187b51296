"""The options of the `delta` data source: which exist, which tahoe implements, and a refusal naming every
other one. Names are case-insensitive. Rules:
  1. Spark's own `path` and `paths` (one table only).
  2. Batch reads: `versionAsOf`, `timestampAsOf`, `storage.<key>`, `readChangeFeed` (`readChangeData`) with
     `startingVersion`/`startingTimestamp`/`endingVersion`/`endingTimestamp` (without it they change nothing).
  3. Streaming reads: see `stream_read_options`; batch-only options are refused in a stream and back.
  4. Writes: see `write_options`; `delta.<property>` on an existing table must agree with it
     (`check_properties_apply`).
  5. Any other option delta-spark's DeltaOptions knows, or one of the wrong direction: UnsupportedFeatureError.
  6. A name nobody knows: InvalidOptionError listing what is accepted.
  7. No path, or a catalog's options (`provider`, `location`, ...): UnsupportedFeatureError (use paths)."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping

from ..storage.hadoop import is_hadoop_key, storage_options_from_hadoop
from ..errors import InvalidOptionError, UnsupportedFeatureError

# how a write's save mode reaches the data-source writer (see tahoe.spark.datasource)
SAVE_MODE_OPTION = "saveMode"
# set by the `register` save wrapper: the session's delta-spark auto compaction confs (the commit
# runs in a Python worker without the user's session)
SESSION_AUTO_COMPACT_OPTION = "__tahoe_sessionAutoCompact"
# set by the `register` save wrapper: the session's partitionOverwriteMode, which the data source
# cannot read itself (its writer runs in a Python worker without the user's session)
SESSION_OVERWRITE_MODE_OPTION = "__tahoe_sessionPartitionOverwriteMode"
# set by the `register` save wrapper: whether it decided on an optimized write (writer option
# `optimizeWrite`, else the session's spark.databricks.delta.optimizeWrite.enabled, else the table's
# delta.autoOptimize.optimizeWrite) and shuffled the DataFrame for it ("true" / "false")
OPTIMIZED_WRITE_OPTION = "__tahoe_optimizedWrite"

__all__ = ["read_options", "stream_read_options", "write_options", "table_path",
           "check_properties_apply", "READ_OPTIONS", "STREAM_READ_OPTIONS", "WRITE_OPTIONS", "STREAM_WRITE_OPTIONS",
           "CATALOG_MESSAGE", "CDF_OUT_OF_RANGE_OPTION", "PUSHDOWN_OPTION", "PARALLELISM_OPTION",
           "READ_KIND_OPTION", "SAVE_MODE_OPTION", "SESSION_AUTO_COMPACT_OPTION", "SESSION_OVERWRITE_MODE_OPTION",
           "SESSION_TIME_ZONE_OPTION", "SESSION_REPLACE_WHERE_OPTION", "SESSION_UTC_PARTITION_VALUES_OPTION",
           "option_time_zone"]

STORAGE_PREFIX = "storage."
PROPERTY_PREFIX = "delta."

READ_OPTIONS = ("path", "paths", "versionAsOf", "timestampAsOf", "readChangeFeed", "readChangeData",
                "startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp")
STREAM_READ_OPTIONS = ("maxFilesPerTrigger", "maxBytesPerTrigger", "ignoreDeletes", "ignoreChanges",
                       "skipChangeCommits", "ignoreFileDeletion", "failOnDataLoss", "excludeRegex")
WRITE_OPTIONS = ("path", "partitionBy", "replaceWhere", "mergeSchema", "overwriteSchema",
                 "partitionOverwriteMode", "userMetadata", "txnAppId", "txnVersion", "optimizeWrite",
                 SAVE_MODE_OPTION)
STREAM_WRITE_OPTIONS = ("checkpointLocation",)
_BATCH_ONLY_WRITE = ("replaceWhere", "partitionOverwriteMode", "txnAppId", "txnVersion", SAVE_MODE_OPTION)
_BATCH_ONLY_READ = ("versionAsOf", "timestampAsOf", "endingVersion", "endingTimestamp")
# set by tahoe's load and save wrappers: the session's spark.sql.session.timeZone (a Python data
# source cannot read the session's confs), where zone-less timestamps are wall-clock time —
# timestampAsOf, startingTimestamp / endingTimestamp, timestamp partition values, replaceWhere
# (tahoe.protocol.timestamps); without it (no wrapper in the driver) UTC
SESSION_TIME_ZONE_OPTION = "__tahoe_sessionTimeZone"
# set by tahoe's save wrapper: delta-spark's replaceWhere confs of the session
# (replaceWhere.constraintCheck.enabled, replaceWhere.dataColumns.enabled) as "true,false"
SESSION_REPLACE_WHERE_OPTION = "__tahoe_sessionReplaceWhere"
# set by tahoe's save and stream-start wrappers when the session has delta-spark's
# spark.databricks.delta.write.utcTimestampPartitionValues=false: "false" (zone-less timestamp
# partition values written as session-zone wall-clock time, as delta-spark < 3.3 wrote them)
SESSION_UTC_PARTITION_VALUES_OPTION = "__tahoe_utcTimestampPartitionValues"
_INTERNAL_WRITE = ("__partition_columns", SESSION_OVERWRITE_MODE_OPTION, SESSION_AUTO_COMPACT_OPTION,
                   OPTIMIZED_WRITE_OPTION, SESSION_TIME_ZONE_OPTION, SESSION_REPLACE_WHERE_OPTION,
                   SESSION_UTC_PARTITION_VALUES_OPTION)
# set by tahoe's load wrapper from the session conf delta-spark reads
# (spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled): a Python data source cannot
# read the session's confs
CDF_OUT_OF_RANGE_OPTION = "__tahoe_cdfTimestampOutOfRange"
# set by tahoe's load wrapper where it turned filter pushdown on (tahoe.spark.calls)
PUSHDOWN_OPTION = "__tahoe_filterPushdown"
# set by tahoe's load wrappers: "batch" (spark.read) or "stream" (spark.readStream), so that the
# source checks the options of its kind when Spark asks the schema (before it says which it is)
READ_KIND_OPTION = "__tahoe_readKind"
# set by tahoe's batch load wrapper: the session's default parallelism (a Python data source cannot
# read it), so that a small table is split into at least that many tasks, as Spark splits files
PARALLELISM_OPTION = "__tahoe_parallelism"
_INTERNAL_READ = (CDF_OUT_OF_RANGE_OPTION.lower(), PUSHDOWN_OPTION.lower(), READ_KIND_OPTION.lower(),
                  PARALLELISM_OPTION.lower(), SESSION_TIME_ZONE_OPTION.lower())

# delta-spark options whose one value tahoe's writer implements: {name: (accepted value, what it does)}
_WRITE_DEFAULTS = {
    "dataChange": ("true", "tahoe's writes always change data (dataChange=false, a rearrange-only "
                           "commit such as a compaction, is not implemented)"),
    "compression": ("snappy", "tahoe writes snappy-compressed parquet (another codec is not implemented)"),
    "writePartitionColumns": ("false", "tahoe does not write partition columns into data files"),
}

_SCHEMA_TRACKING = ("non-additive schema evolution of a streaming source (delta-spark's schema tracking "
                    "log) is not implemented by tahoe: a stream stops at a schema change and, restarted, reads "
                    "on in the new schema when the change only added columns; after a column drop, rename or "
                    "type change restart it with a new checkpoint location (and startingVersion after the "
                    "change)")

# every other option name delta-spark's DeltaOptions knows: {name: (feature, what instead)}
_UNSUPPORTED: dict[str, str] = {
    **{n: _SCHEMA_TRACKING for n in ("schemaTrackingLocation", "schemaLocation", "streamingSourceTrackingId",
                                      "allowSourceColumnDrop", "allowSourceColumnRename",
                                      "allowSourceColumnTypeChange")},
    "replaceOn": "INSERT ... REPLACE ON is not implemented by tahoe; use replaceWhere",
    "replaceUsing": "INSERT ... REPLACE USING is not implemented by tahoe; use replaceWhere or "
                    "partitionOverwriteMode=dynamic",
    "targetAlias": "aliases in replaceWhere are not implemented by tahoe; name the columns directly",
    "useNullIntolerantEqualityWithDPO": "INSERT ... REPLACE USING is not implemented by tahoe",
    "maxRecordsPerFile": "tahoe's writer does not split a task's rows by a record count",
    "__v1_save_as_table_overwrite": "saveAsTable reached the data source directly: call tahoe.spark.enable(spark) "
                                    "first (tahoe's SQL layer runs saveAsTable on Delta tables)",
}

CATALOG_MESSAGE = (
    "Delta tables by name (CREATE TABLE ... USING delta, saveAsTable, insertInto, writeTo, spark.table, SQL on a "
    "table name) go through tahoe's SQL layer, which this session does not have: call tahoe.spark.enable(spark) "
    "once (or build the session with tahoe.spark.configure_spark_with_delta_pip(builder)). Paths need nothing: "
    "df.write.format('delta').save(path), spark.read.format('delta').load(path)")

# what a session catalog passes for a table by name (never passed by load()/save())
_CATALOG_KEYS = ("provider", "location", "owner")

_CANON = {n.lower(): n for n in (*READ_OPTIONS, *STREAM_READ_OPTIONS, *WRITE_OPTIONS, *STREAM_WRITE_OPTIONS,
                                 *_INTERNAL_WRITE, *_WRITE_DEFAULTS, *_UNSUPPORTED)}
_KNOWN_UNSUPPORTED = {k.lower(): v for k, v in _UNSUPPORTED.items()}


def _lower(options: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in options.items()}


def table_path(options: Mapping[str, Any]) -> str:
    """The one table path of a read or write (rule 1, rule 6)."""
    opts = _lower(options)
    if any(k in opts for k in _CATALOG_KEYS):
        raise UnsupportedFeatureError(CATALOG_MESSAGE)
    path = opts.get("path")
    if not path and opts.get("paths"):
        try:
            paths = json.loads(opts["paths"])
        except ValueError:
            paths = [opts["paths"]]
        if len(paths) > 1:
            raise InvalidOptionError(
                f"format('delta') reads one table, got {len(paths)} paths {paths}: load the table's root "
                "path (with filters on its partition columns), or union the DataFrames of several tables")
        path = paths[0] if paths else None
    if not path:
        raise UnsupportedFeatureError("format('delta') needs a path: .load(path) / .save(path). " + CATALOG_MESSAGE)
    return str(path)


def _refuse_unknown(name: str, implemented: tuple[str, ...], what: str) -> None:
    raise InvalidOptionError(
        f"unknown option '{name}' for format('delta') {what}s; tahoe implements: "
        f"{', '.join(n for n in implemented if n != 'paths')}, storage.<key>"
        f"{', delta.<table property>' if what == 'write' else ''}")


def _boolean(opts: dict, name: str) -> None:
    v = opts.get(name.lower())
    if v is not None and str(v).strip().lower() not in ("true", "false"):
        raise InvalidOptionError(f"option {name} must be 'true' or 'false', got {v!r}")


def _check_read_names(options: Mapping[str, Any], accepted: tuple[str, ...], what: str) -> None:
    for original in options:
        key = str(original).lower()
        if key.startswith(STORAGE_PREFIX) or is_hadoop_key(key) or key in (n.lower() for n in accepted) \
                or key in _INTERNAL_READ:
            continue
        name = _CANON.get(key, str(original))
        if key.startswith(PROPERTY_PREFIX):
            raise UnsupportedFeatureError(
                f"option '{name}' is a table property; a read cannot set it (set table properties with "
                "tahoe.Table(path).set_properties({...}) or `tahoe set-property`, or as a writer option "
                "of the write that creates the table)")
        if key in _KNOWN_UNSUPPORTED:
            raise UnsupportedFeatureError(f"option '{name}' is not supported: {_KNOWN_UNSUPPORTED[key]}")
        if what == "stream" and name in _BATCH_ONLY_READ:
            raise InvalidOptionError(f"option '{name}' applies to batch reads (spark.read), not to a stream: a stream "
                                     "starts at startingVersion / startingTimestamp and never ends")
        if what == "batch" and name in STREAM_READ_OPTIONS:
            raise InvalidOptionError(f"option '{name}' applies to streaming reads (spark.readStream) only; a batch "
                                     "read does nothing with it")
        if key in _CANON:
            raise UnsupportedFeatureError(
                f"option '{name}' is a writer option of format('delta'); a read does nothing with it "
                f"(reader options: {', '.join(accepted[2:])}, storage.<key>)")
        _refuse_unknown(name, accepted, "read")


def _flag_value(opts: dict, name: str, default: bool = False) -> bool:
    v = opts.get(name.lower())
    if v is None:
        return default
    s = str(v).strip().lower()
    if s not in ("true", "false"):
        raise InvalidOptionError(f"Invalid value '{v}' for option '{name}', must be 'true' or 'false'")
    return s == "true"


def option_time_zone(options: Mapping[str, Any]) -> str:
    """The session time zone tahoe's wrappers handed the source (SESSION_TIME_ZONE_OPTION), else
    UTC; an unknown zone is an InvalidOptionError naming it."""
    from ..protocol.timestamps import normalize_zone_name, zone

    tz = normalize_zone_name(_lower(options).get(SESSION_TIME_ZONE_OPTION.lower()))
    try:
        zone(tz)
    except ValueError as e:
        raise InvalidOptionError(f"spark.sql.session.timeZone: {e}") from None
    return tz


def _cdf_read(opts: dict) -> dict[str, Any]:
    cdf = _flag_value(opts, "readChangeFeed") or _flag_value(opts, "readChangeData")
    return {"cdf": cdf, "starting_version": opts.get("startingversion"),
            "starting_timestamp": opts.get("startingtimestamp"), "ending_version": opts.get("endingversion"),
            "ending_timestamp": opts.get("endingtimestamp"),
            "allow_out_of_range": _flag_value(opts, CDF_OUT_OF_RANGE_OPTION)}


def read_options(options: Mapping[str, Any], streaming: bool | None = False) -> dict[str, Any]:
    """Check the options of a `spark.read.format("delta")` (rules 1, 2, 5, 6, 7) — with
    `streaming=None` the permissive union of batch and streaming options (the schema is asked
    before Spark says which it is); returns {"path", "version", "timestamp", "storage_options",
    "cdf", "starting_version", "starting_timestamp", "ending_version", "ending_timestamp",
    "allow_out_of_range", "time_zone"} — `timestamp` as epoch ms, a zone-less `timestampAsOf`
    read in the session time zone (`time_zone`, see SESSION_TIME_ZONE_OPTION)."""
    opts = _lower(options)
    path = table_path(options)
    if streaming:
        return stream_read_options(options)
    accepted = READ_OPTIONS + (STREAM_READ_OPTIONS if streaming is None else ())
    _check_read_names(options, accepted, "any" if streaming is None else "batch")
    version = opts.get("versionasof")
    timestamp = opts.get("timestampasof")
    if version is not None and timestamp is not None:
        raise InvalidOptionError("give versionAsOf or timestampAsOf, not both")
    if version is not None:
        try:
            version = int(str(version).strip())
        except ValueError:
            version = -1
        if version < 0:
            raise InvalidOptionError(f"option versionAsOf must be a non-negative integer, got {opts['versionasof']!r}")
    time_zone = option_time_zone(options)
    if timestamp is not None:
        from ..log.delta_log import parse_timestamp

        try:
            timestamp = parse_timestamp(str(timestamp), time_zone)
        except ValueError as e:
            raise InvalidOptionError(f"option timestampAsOf: {e}") from None
    out = {"path": path, "version": version, "timestamp": timestamp, "storage_options": _storage(options),
           **_cdf_read(opts), "time_zone": time_zone}
    if streaming is False:
        ranged = [n for n in ("startingVersion", "startingTimestamp", "endingVersion", "endingTimestamp")
                  if n.lower() in opts]
        if out["cdf"] and (version is not None or timestamp is not None):
            raise InvalidOptionError("versionAsOf / timestampAsOf cannot be combined with readChangeFeed: a change "
                                     "data feed read is given its versions by startingVersion / endingVersion "
                                     "(or the timestamps)")
        if ranged and not out["cdf"]:
            # delta-spark's batch read reads the snapshot and leaves these alone (its DeltaDataSource
            # passes them on only to a change feed read): so does tahoe, saying so where it can
            # (tahoe.spark.calls warns in the user's process)
            for k in ("starting_version", "starting_timestamp", "ending_version", "ending_timestamp"):
                out[k] = None
        elif out["cdf"] and str(opts.get("startingversion", "")).strip().lower() == "latest":
            raise InvalidOptionError("startingVersion 'latest' applies to streaming reads only")
    return out


def storage_options_of(options: Mapping[str, Any]) -> dict | None:
    """The storage options of a read or write: its `storage.<key>` options, over the Hadoop
    file-system keys delta-spark users give as options (`fs.s3a.access.key`,
    `fs.azure.account.key.<account>.dfs.core.windows.net`, ...: `tahoe.storage.hadoop`; a key
    that cannot be mapped is refused by name)."""
    storage = {k[len(STORAGE_PREFIX):]: v for k, v in options.items() if str(k).lower().startswith(STORAGE_PREFIX)}
    hadoop = {k: v for k, v in options.items() if is_hadoop_key(str(k))}
    if hadoop:
        path = _lower(options).get("path")
        storage = {**storage_options_from_hadoop(hadoop, str(path) if path else None), **storage}
    return storage or None


_storage = storage_options_of


_SIZE = re.compile(r"^\s*(\d+)\s*([kmgtp]?)b?\s*$", re.I)


def _positive(opts: dict, name: str) -> int | None:
    v = opts.get(name.lower())
    if v is None:
        return None
    try:
        n = int(str(v).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise InvalidOptionError(f"Invalid value '{v}' for option '{name}', must be a positive integer")
    return n


def stream_read_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Check the options of a `spark.readStream.format("delta")` (rules 1, 3, 5, 6, 7); returns
    {"path", "storage_options", "cdf", "starting_version" (int | "latest" | None),
    "starting_timestamp", "max_files", "max_bytes", "ignore_deletes", "ignore_changes",
    "skip_change_commits", "fail_on_data_loss", "exclude_regex", "allow_out_of_range", "time_zone"}
    (a zone-less startingTimestamp is read in the session time zone, `time_zone`). Implemented:
    `startingVersion` (or `latest`), `startingTimestamp`, `maxFilesPerTrigger`, `maxBytesPerTrigger` (`10g`),
    `ignoreDeletes`, `ignoreChanges`, `ignoreFileDeletion`, `skipChangeCommits`, `failOnDataLoss`,
    `excludeRegex`, `readChangeFeed`, `storage.<key>`."""
    opts = _lower(options)
    path = table_path(options)
    _check_read_names(options, READ_OPTIONS + STREAM_READ_OPTIONS, "stream")
    out: dict[str, Any] = {"path": path, "storage_options": _storage(options), **_cdf_read(opts),
                           "time_zone": option_time_zone(options)}
    sv, st = opts.get("startingversion"), opts.get("startingtimestamp")
    if sv is not None and st is not None:
        raise InvalidOptionError("Please either provide 'startingVersion' or 'startingTimestamp'")
    if sv is not None:
        if str(sv).strip().lower() == "latest":
            out["starting_version"] = "latest"
        else:
            try:
                out["starting_version"] = int(str(sv).strip())
            except ValueError:
                out["starting_version"] = -1
            if out["starting_version"] < 0:
                raise InvalidOptionError(f"Invalid value '{sv}' for option 'startingVersion', must be greater than or "
                                         f"equal to zero, or 'latest'")
    if st is not None:
        from ..log.delta_log import parse_timestamp

        try:
            parse_timestamp(str(st), out["time_zone"])
        except ValueError:
            raise InvalidOptionError(f"The provided timestamp ({st}) cannot be converted to a valid timestamp "
                                     f"(option startingTimestamp)") from None
    out["max_files"] = _positive(opts, "maxFilesPerTrigger")
    mb = opts.get("maxbytespertrigger")
    if mb is not None:
        m = _SIZE.match(str(mb))
        if not m or int(m.group(1)) <= 0:
            raise InvalidOptionError(f"Invalid value '{mb}' for option 'maxBytesPerTrigger', must be a size "
                                     f"configuration such as '10g'")
        out["max_bytes"] = int(m.group(1)) * (1024 ** " kmgtp".index(m.group(2).lower() or " "))
    else:
        out["max_bytes"] = None
    out["ignore_file_deletion"] = _flag_value(opts, "ignoreFileDeletion")
    out["ignore_deletes"] = _flag_value(opts, "ignoreDeletes")
    out["ignore_changes"] = _flag_value(opts, "ignoreChanges")
    out["skip_change_commits"] = _flag_value(opts, "skipChangeCommits")
    out["fail_on_data_loss"] = _flag_value(opts, "failOnDataLoss", True)
    rx = opts.get("excluderegex")
    if rx is not None:
        try:
            re.compile(str(rx))
        except re.error:
            raise InvalidOptionError(f"Please recheck your syntax for 'excludeRegex': {rx!r}") from None
    out["exclude_regex"] = rx
    return out


def write_options(options: Mapping[str, Any], streaming: bool = False) -> None:
    """Check the options of a `df.write.format("delta")` — or, `streaming`, a
    `df.writeStream.format("delta")` — (rules 1, 4, 5, 6, 7) before any work: every name
    implemented or refused, booleans 'true'/'false', `delta.*` keys known Delta table properties
    with valid values.

    Batch writes implement `partitionBy`, `replaceWhere`, `mergeSchema`, `overwriteSchema`,
    `partitionOverwriteMode`, `userMetadata`, `txnAppId` + `txnVersion`, `saveMode` (set by the save
    wrapper), `storage.<key>`, `delta.<property>` and `optimizeWrite` ('true' only when the driver's save
    wrapper marked the write; refused on a stream). `dataChange=true`, `compression=snappy` and
    `writePartitionColumns=false` are accepted, other values refused. Streaming writes need
    `checkpointLocation` and refuse replaceWhere, partitionOverwriteMode and txnAppId/txnVersion."""
    from ..protocol.properties import normalize_property

    opts = _lower(options)
    table_path(options)
    accepted = (*WRITE_OPTIONS, *_INTERNAL_WRITE) if not streaming else \
        (*(n for n in WRITE_OPTIONS if n not in _BATCH_ONLY_WRITE), *STREAM_WRITE_OPTIONS, *_INTERNAL_WRITE)
    for original, value in options.items():
        key = str(original).lower()
        if key.startswith(STORAGE_PREFIX) or is_hadoop_key(key) or key in (n.lower() for n in accepted):
            continue
        name = _CANON.get(key, str(original))
        if key.startswith(PROPERTY_PREFIX):
            normalize_property(name, value)   # an unknown property or a bad value: refused by name
            continue
        if key in (n.lower() for n in _WRITE_DEFAULTS):
            only, what = _WRITE_DEFAULTS[name]
            if str(value).strip().lower() != only:
                raise UnsupportedFeatureError(f"option {name}={value!r} is not supported: {what}")
            continue
        if key in _KNOWN_UNSUPPORTED:
            raise UnsupportedFeatureError(f"option '{name}' is not supported: {_KNOWN_UNSUPPORTED[key]}")
        if streaming and name in _BATCH_ONLY_WRITE:
            raise InvalidOptionError(
                f"option '{name}' applies to batch writes, not to a streaming write"
                + (" (the sink commits each micro-batch with its own transaction id: the query's id and the "
                   "batch id)" if name in ("txnAppId", "txnVersion") else ""))
        if not streaming and name in STREAM_WRITE_OPTIONS:
            raise InvalidOptionError(f"option '{name}' applies to streaming writes (df.writeStream) only")
        if key in _CANON:
            raise UnsupportedFeatureError(
                f"option '{name}' is a reader option of format('delta'); a write does nothing with it")
        _refuse_unknown(name, accepted, "write")
    _boolean(opts, "mergeSchema")
    _boolean(opts, "overwriteSchema")
    _boolean(opts, "optimizeWrite")
    if str(opts.get("optimizewrite", "")).strip().lower() == "true":
        if streaming:
            raise UnsupportedFeatureError(
                "option optimizeWrite=true is not supported on a streaming write: tahoe's sink writes the rows "
                "each micro-batch's tasks hand it (repartition the stream by the partition columns instead)")
        if OPTIMIZED_WRITE_OPTION.lower() not in opts:
            raise UnsupportedFeatureError(
                "option optimizeWrite=true needs tahoe's save wrapper in the driver, which shuffles the rows "
                "before the data source writes them (the data source's tasks write the rows they are given): "
                "install tahoe in the driver's Python (its PySpark hook installs the wrapper) or "
                "`import tahoe.spark` there")


def check_properties_apply(options: Mapping[str, Any], snapshot) -> None:
    """`delta.*` writer options on a write to an existing table: delta-spark applies them only
    when the write creates the table and drops them otherwise; tahoe accepts them where the table
    already agrees and refuses the rest, naming the property and how to set it."""
    from ..protocol.properties import normalize_property, split_protocol_properties
    from ..protocol.table_features import is_feature_supported

    given = dict(normalize_property(k, v) for k, v in options.items() if str(k).lower().startswith(PROPERTY_PREFIX))
    conf, features, reader, writer = split_protocol_properties(given)
    p = snapshot.protocol
    differs = [k for k, v in conf.items() if snapshot.configuration.get(k) != v]
    differs += [f"delta.feature.{f}" for f in sorted(features) if not is_feature_supported(p, f)]
    if reader is not None and reader > p.min_reader_version:
        differs.append("delta.minReaderVersion")
    if writer is not None and writer > p.min_writer_version:
        differs.append("delta.minWriterVersion")
    if differs:
        pairs = ", ".join(f"{k}={given.get(k, 'supported')!r}" for k in differs)
        raise InvalidOptionError(
            f"option(s) {pairs}: a delta.* writer option sets a table property only when the write creates "
            f"the table, and the table at {snapshot.table_root} exists without it. Set it first with "
            "tahoe.Table(path).set_properties({...}) (or `tahoe set-property PATH k=v`), then write without "
            "the option")
