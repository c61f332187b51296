"""The options of the `delta` data source: which names exist, which tahoe implements, and a refusal
naming every other one — an option is never silently ignored.

Owns `read_options(options)` / `write_options(options)` (the checks `format("delta")` runs before it
does anything), `table_path(options)` (the one table path Spark hands the source) and
`check_properties_apply(options, snapshot)` (a `delta.*` writer option must not be dropped on the
floor when the table already exists).

Rules (names are case-insensitive, as Spark hands them over lower-cased):
  1. Spark's own: `path` (`load(path)` / `save(path)`) and `paths` (`load([p, ...])`: one table
     only, as delta-spark refuses several load paths).
  2. Reading implements `versionAsOf` (a non-negative integer), `timestampAsOf` (not both) and
     `storage.<key>` (storage options of tahoe's storage layer).
  3. Writing implements `partitionBy`, `replaceWhere`, `mergeSchema`, `overwriteSchema` ('true' or
     'false'), `partitionOverwriteMode`, `userMetadata`, `txnAppId` + `txnVersion`, `saveMode`
     (tahoe's, set by `register`'s save wrapper), `storage.<key>` and `delta.<property>` (a known
     Delta table property, validated like every property: the table properties of a table the
     write creates; on an existing table it must agree with the table — see
     `check_properties_apply`). Four delta-spark options are accepted where their value is what
     tahoe's writer does anyway (`dataChange=true`, `compression=snappy`, `optimizeWrite=false`,
     `writePartitionColumns=false`) and refused otherwise.
  4. Every other option delta-spark's DeltaOptions knows is refused by name with
     UnsupportedFeatureError, saying which feature it belongs to (change data feed reads,
     streaming, ...) and what to use instead; a reader option on a write (or a writer option on a
     read) is refused the same way (it would do nothing).
  5. A name neither tahoe nor delta-spark knows is an InvalidOptionError listing what is accepted.
  6. No path, or the options a session catalog passes for a table by name (`provider`,
     `location`, ...): UnsupportedFeatureError — tahoe has no catalog yet; the message says to use
     paths.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ..errors import InvalidOptionError, UnsupportedFeatureError

from .write import SAVE_MODE_OPTION, SESSION_AUTO_COMPACT_OPTION, SESSION_OVERWRITE_MODE_OPTION

__all__ = ["read_options", "write_options", "table_path", "check_properties_apply", "READ_OPTIONS",
           "WRITE_OPTIONS", "CATALOG_MESSAGE"]

STORAGE_PREFIX = "storage."
PROPERTY_PREFIX = "delta."

READ_OPTIONS = ("path", "paths", "versionAsOf", "timestampAsOf")
WRITE_OPTIONS = ("path", "partitionBy", "replaceWhere", "mergeSchema", "overwriteSchema",
                 "partitionOverwriteMode", "userMetadata", "txnAppId", "txnVersion", SAVE_MODE_OPTION)
_INTERNAL_WRITE = ("__partition_columns", SESSION_OVERWRITE_MODE_OPTION, SESSION_AUTO_COMPACT_OPTION)

# delta-spark options whose one value tahoe's writer implements: {name: (accepted value, what it does)}
_WRITE_DEFAULTS = {
    "dataChange": ("true", "tahoe's writes always change data (dataChange=false, a rearrange-only "
                           "commit such as a compaction, is not implemented)"),
    "compression": ("snappy", "tahoe writes snappy-compressed parquet (another codec is not implemented)"),
    "optimizeWrite": ("false", "format('delta') writes go through Spark's Python data source, whose tasks "
                               "write the rows they are given: it cannot shuffle them first. Optimized "
                               "writes are implemented by tahoe.spark.write_delta(df, path, "
                               "optimize_write=True)"),
    "writePartitionColumns": ("false", "tahoe does not write partition columns into data files"),
}

_CDF = ("the change data feed reads are not implemented by tahoe's `delta` data source yet; "
        "without Spark, tahoe.read.changes.read_changes_arrow(tahoe.Table(path).log, start, end) "
        "returns the change rows as Arrow")
_STREAM = ("streaming (spark.readStream / writeStream) is not implemented by tahoe's `delta` data "
           "source yet; read versions with versionAsOf / timestampAsOf instead")

# every other option name delta-spark's DeltaOptions knows: {name: (feature, what instead)}
_UNSUPPORTED: dict[str, str] = {
    "readChangeFeed": _CDF, "readChangeData": _CDF,
    "startingVersion": _CDF + "; for streaming: " + _STREAM,
    "startingTimestamp": _CDF + "; for streaming: " + _STREAM,
    "endingVersion": _CDF, "endingTimestamp": _CDF,
    **{n: _STREAM for n in ("maxFilesPerTrigger", "maxBytesPerTrigger", "ignoreFileDeletion", "ignoreChanges",
                            "ignoreDeletes", "skipChangeCommits", "failOnDataLoss", "excludeRegex",
                            "schemaTrackingLocation", "schemaLocation", "streamingSourceTrackingId",
                            "allowSourceColumnDrop", "allowSourceColumnRename", "allowSourceColumnTypeChange",
                            "queryName", "checkpointLocation")},
    "replaceOn": "INSERT ... REPLACE ON is not implemented by tahoe; use replaceWhere",
    "replaceUsing": "INSERT ... REPLACE USING is not implemented by tahoe; use replaceWhere or "
                    "partitionOverwriteMode=dynamic",
    "targetAlias": "aliases in replaceWhere are not implemented by tahoe; name the columns directly",
    "useNullIntolerantEqualityWithDPO": "INSERT ... REPLACE USING is not implemented by tahoe",
    "maxRecordsPerFile": "tahoe's writer does not split a task's rows by a record count",
    "__v1_save_as_table_overwrite": "saveAsTable is not supported: tahoe has no catalog (use save(path))",
}

CATALOG_MESSAGE = (
    "tables by name are not supported: tahoe has no catalog yet, so CREATE TABLE ... USING delta, "
    "saveAsTable, insertInto, writeTo and INSERT INTO / SELECT FROM a table name cannot reach a Delta "
    "table. Use paths instead: df.write.format('delta').save(path), spark.read.format('delta').load(path), "
    "DeltaTable.create(spark).location(path)...execute() (or tahoe.Table.create(path, schema)) to create "
    "an empty table")

# what a session catalog passes for a table by name (never passed by load()/save())
_CATALOG_KEYS = ("provider", "location", "owner")

_CANON = {n.lower(): n for n in (*READ_OPTIONS, *WRITE_OPTIONS, *_INTERNAL_WRITE, *_WRITE_DEFAULTS,
                                 *_UNSUPPORTED)}
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


def read_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Check the options of a `spark.read.format("delta")` (rules 1, 2, 4, 5, 6); returns
    {"path", "version", "timestamp", "storage_options"}."""
    opts = _lower(options)
    path = table_path(options)
    for original in options:
        key = str(original).lower()
        if key.startswith(STORAGE_PREFIX) or key in (n.lower() for n in READ_OPTIONS):
            continue
        name = _CANON.get(key, str(original))
        if key.startswith(PROPERTY_PREFIX):
            raise UnsupportedFeatureError(
                f"option '{name}' is a table property; a read cannot set it (set table properties with "
                "tahoe.Table(path).set_properties({...}) or `tahoe set-property`, or as a writer option "
                "of the write that creates the table)")
        if key in _KNOWN_UNSUPPORTED:
            raise UnsupportedFeatureError(f"option '{name}' is not supported: {_KNOWN_UNSUPPORTED[key]}")
        if key in _CANON:
            raise UnsupportedFeatureError(
                f"option '{name}' is a writer option of format('delta'); a read does nothing with it "
                f"(reader options: {', '.join(READ_OPTIONS[2:])}, storage.<key>)")
        _refuse_unknown(name, READ_OPTIONS, "read")
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
    if timestamp is not None:
        from ..log.delta_log import parse_timestamp

        try:
            parse_timestamp(timestamp)
        except ValueError as e:
            raise InvalidOptionError(f"option timestampAsOf: {e}") from None
    storage = {k[len(STORAGE_PREFIX):]: v for k, v in options.items() if str(k).lower().startswith(STORAGE_PREFIX)}
    return {"path": path, "version": version, "timestamp": timestamp, "storage_options": storage or None}


def write_options(options: Mapping[str, Any]) -> None:
    """Check the options of a `df.write.format("delta")` (rules 1, 3, 4, 5, 6) before any work: every
    name implemented or refused, booleans 'true'/'false', `delta.*` keys known Delta table
    properties with valid values."""
    from ..protocol.properties import normalize_property

    opts = _lower(options)
    table_path(options)
    for original, value in options.items():
        key = str(original).lower()
        if key.startswith(STORAGE_PREFIX) or key in (n.lower() for n in (*WRITE_OPTIONS, *_INTERNAL_WRITE)):
            continue
        name = _CANON.get(key, str(original))
        if key.startswith(PROPERTY_PREFIX):
            normalize_property(name, value)   # an unknown property or a bad value: refused by name
            continue
        if key in (n.lower() for n in _WRITE_DEFAULTS):
            accepted, what = _WRITE_DEFAULTS[name]
            if str(value).strip().lower() != accepted:
                raise UnsupportedFeatureError(f"option {name}={value!r} is not supported: {what}")
            continue
        if key in _KNOWN_UNSUPPORTED:
            raise UnsupportedFeatureError(f"option '{name}' is not supported: {_KNOWN_UNSUPPORTED[key]}")
        if key in _CANON:
            raise UnsupportedFeatureError(
                f"option '{name}' is a reader option of format('delta'); a write does nothing with it")
        _refuse_unknown(name, WRITE_OPTIONS, "write")
    _boolean(opts, "mergeSchema")
    _boolean(opts, "overwriteSchema")


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
