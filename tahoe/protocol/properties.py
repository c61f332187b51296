"""Table properties (`metaData.configuration`) as writers see them: which `delta.*` keys exist and take what
values, and which table features properties and schema require.

  1. `normalize_properties`: delta-spark's validation; an unknown `delta.` key is an
     InvalidTableOperationError naming it; keys outside `delta.` pass untouched.
  2. `split_protocol_properties`: `delta.feature.<name>=supported`, `delta.minReaderVersion`,
     `delta.minWriterVersion` change the protocol and are never stored.
  3. `features_for_metadata`: the features a configuration and schema need.
  4. `TABLE_PROPERTIES`: the one table of known properties, kind and delta-spark default.
  5. Typed readers (`bool_property`, `int_property`, ...): an invalid stored value refused naming it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NamedTuple

from ..errors import InvalidTableOperationError, SchemaError, UnsupportedFeatureError
from .intervals import parse_interval_ms
from .parquet_format import DEFAULT_CODEC, FORMAT_VERSIONS, ParquetWriteOptions, resolve_format_version
from .schema import TYPE_CHANGES, ArrayType, DataType, GeoType, MapType, PrimitiveType, StructField, StructType
from .table_features import FEATURES, canonical_feature_name

__all__ = [
    "TABLE_PROPERTIES", "TableProperty", "raw_property", "bool_property", "int_property",
    "interval_property_ms", "enum_property", "text_property", "data_skipping_settings",
    "DataSkippingSettings", "CONSTRAINT_PREFIX", "FEATURE_PREFIX", "normalize_properties",
    "normalize_property", "split_protocol_properties", "features_for_metadata",
    "features_for_schema", "parquet_write_options", "parse_interval_ms", "isolation_level",
    "ISOLATION_LEVELS", "SERIALIZABLE", "WRITE_SERIALIZABLE", "SNAPSHOT_ISOLATION",
    "constraint_key", "constraints_of", "identity_columns", "check_identity_columns",
    "advance_identity_high_water_mark",
    "IDENTITY_START", "IDENTITY_STEP", "IDENTITY_HIGH_WATER_MARK",
    "IDENTITY_ALLOW_EXPLICIT_INSERT", "GENERATION_EXPRESSION", "INVARIANTS",
    "ROW_ID_COLUMN_PROP", "ROW_COMMIT_VERSION_COLUMN_PROP", "ENABLE_ROW_TRACKING",
    "ENABLE_DELETION_VECTORS", "DEFAULT_NUM_INDEXED_COLS", "DEFAULT_STRING_PREFIX_LENGTH",
    "TAHOE_PREFIX", "CHECKPOINT_JSON_SIZE_THRESHOLD", "parse_size", "size_property",
]

CONSTRAINT_PREFIX = "delta.constraints."
TAHOE_PREFIX = "tahoe."
CHECKPOINT_JSON_SIZE_THRESHOLD = "tahoe.checkpoint.jsonSizeThreshold"
# defaults of delta.dataSkippingNumIndexedCols / delta.dataSkippingStringPrefixLength (also the
# defaults of tahoe.protocol.stats, which imports them from here)
DEFAULT_NUM_INDEXED_COLS = 32
DEFAULT_STRING_PREFIX_LENGTH = 32
FEATURE_PREFIX = "delta.feature."

SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"
ISOLATION_LEVELS = (SERIALIZABLE, WRITE_SERIALIZABLE)

IDENTITY_START = "delta.identity.start"
IDENTITY_STEP = "delta.identity.step"
IDENTITY_HIGH_WATER_MARK = "delta.identity.highWaterMark"
IDENTITY_ALLOW_EXPLICIT_INSERT = "delta.identity.allowExplicitInsert"
GENERATION_EXPRESSION = "delta.generationExpression"
INVARIANTS = "delta.invariants"
COLUMN_DEFAULT = "CURRENT_DEFAULT"

ENABLE_ROW_TRACKING = "delta.enableRowTracking"
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
ROW_ID_COLUMN_PROP = "delta.rowTracking.materializedRowIdColumnName"
ROW_COMMIT_VERSION_COLUMN_PROP = "delta.rowTracking.materializedRowCommitVersionColumnName"


# --- value validators: each returns the canonical string or raises ValueError(reason) ---------

def _boolean(v: str) -> str:
    low = v.strip().lower()
    if low not in ("true", "false"):
        raise ValueError("expected true or false")
    return low


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str], str]:
    def check(v: str) -> str:
        try:
            n = int(v.strip())
        except ValueError:
            raise ValueError("expected an integer") from None
        if lo is not None and n < lo:
            raise ValueError(f"must be >= {lo}")
        if hi is not None and n > hi:
            raise ValueError(f"must be <= {hi}")
        return str(n)
    return check


def _enum(*choices: str) -> Callable[[str], str]:
    def check(v: str) -> str:
        for c in choices:
            if v.strip().lower() == c.lower():
                return c
        raise ValueError(f"expected one of {', '.join(choices)}")
    return check


def _interval(v: str) -> str:
    parse_interval_ms(v)
    return v.strip()


_SIZE_RE = re.compile(r"\s*(\d+)\s*([kmgtp]?)(i?b?)\s*")


def parse_size(text: str) -> int:
    """Bytes from a size as the JVM writes them: `134217728`, `128mb`, `1g`, `64KiB` (binary
    multiples, as delta-spark reads delta.targetFileSize); ValueError(reason) otherwise."""
    m = _SIZE_RE.fullmatch(str(text).lower())
    if not m:
        raise ValueError("expected a size in bytes, e.g. 134217728 or 128mb")
    return int(m.group(1)) * 1024 ** "_kmgtp".index(m.group(2) or "_")


def _size(v: str) -> str:
    if parse_size(v) <= 0:
        raise ValueError("expected a positive size in bytes, e.g. 134217728 or 128mb")
    return v.strip()


def _size_or_zero(v: str) -> str:
    parse_size(v)
    return v.strip()


def _non_empty(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


def _semver(v: str) -> str:
    resolve_format_version(v)
    return v.strip()


def _formats(v: str) -> str:
    parts = [p.strip().lower() for p in v.split(",") if p.strip()]
    bad = [p for p in parts if p not in ("iceberg", "hudi")]
    if bad:
        raise ValueError(f"unknown format(s) {bad}; expected a comma-separated list of iceberg, hudi")
    return ",".join(parts)


def _column_list(v: str) -> str:
    if any(not p.strip() for p in v.split(",")):
        raise ValueError("expected a comma-separated list of column names")
    return v


@dataclass(frozen=True)
class TableProperty:
    """One known table property: delta-spark's `delta.*` ones, and tahoe's own `tahoe.*` ones.

    `kind` is how its value is read (`bool`, `int`, `interval`, `enum`, `size`, `text`,
    `columns`); `default` is the value in effect when the configuration does not set it, in the
    property's own string form (delta-spark's `DeltaConfigs` default; None: no default, the
    property is simply unset); `check` validates a user-given value and returns its canonical
    string form (ValueError(reason) otherwise)."""

    key: str
    kind: str
    default: str | None
    check: Callable[[str], str]
    choices: tuple[str, ...] = ()


def _prop(key: str, kind: str, default: str | None, check: Callable[[str], str] | None = None,
          choices: tuple[str, ...] = ()) -> TableProperty:
    if check is None:
        check = {"bool": _boolean, "interval": _interval, "size": _size, "text": _non_empty,
                 "columns": _column_list}[kind]
    return TableProperty(key, kind, default, check, choices)


def _enum_prop(key: str, default: str | None, *choices: str) -> TableProperty:
    return _prop(key, "enum", default, _enum(*choices), choices)


# The known delta.* table properties (delta-spark's DeltaConfigs that this client understands),
# with delta-spark's defaults. Every reader of a table property goes through this table.
_KNOWN: tuple[TableProperty, ...] = (
    _prop("delta.appendOnly", "bool", "false"),
    _prop("delta.enableChangeDataFeed", "bool", "false"),
    _prop(ENABLE_DELETION_VECTORS, "bool", "false"),
    _prop(ENABLE_ROW_TRACKING, "bool", "false"),
    _prop("delta.rowTrackingSuspended", "bool", "false"),
    _prop("delta.enableInCommitTimestamps", "bool", "false"),
    _prop("delta.enableTypeWidening", "bool", "false"),
    _prop("delta.enableExpiredLogCleanup", "bool", "true"),
    _prop("delta.checkpoint.writeStatsAsJson", "bool", "true"),
    # unset differs from both values: partitionValues_parsed only (see tahoe.log.checkpoint_schema)
    _prop("delta.checkpoint.writeStatsAsStruct", "bool", None),
    _prop("delta.compatibility.symlinkFormatManifest.enabled", "bool", "false"),
    _prop("delta.randomizeFilePrefixes", "bool", "false"),
    _prop("delta.randomPrefixLength", "int", "2", _int(1)),
    _prop("delta.autoOptimize.optimizeWrite", "bool", None),
    _enum_prop("delta.autoOptimize.autoCompact", None, "auto", "legacy", "true", "false"),
    _prop("delta.tuneFileSizesForRewrites", "bool", None),
    _prop("delta.targetFileSize", "size", None),
    _enum_prop("delta.columnMapping.mode", "none", "none", "name", "id"),
    _prop("delta.columnMapping.maxColumnId", "int", "0", _int(0)),
    _enum_prop("delta.isolationLevel", WRITE_SERIALIZABLE, *ISOLATION_LEVELS),
    _prop("delta.checkpointInterval", "int", "10", _int(1)),
    _enum_prop("delta.checkpointPolicy", "classic", "classic", "v2"),
    _prop("delta.logRetentionDuration", "interval", "interval 30 days"),
    _prop("delta.deletedFileRetentionDuration", "interval", "interval 1 week"),
    _prop("delta.setTransactionRetentionDuration", "interval", None),
    _prop("delta.checkpointRetentionDuration", "interval", "interval 2 days"),
    _prop("delta.dataSkippingNumIndexedCols", "int", str(DEFAULT_NUM_INDEXED_COLS), _int(-1)),
    _prop("delta.dataSkippingStatsColumns", "columns", None),
    _prop("delta.dataSkippingStringPrefixLength", "int", str(DEFAULT_STRING_PREFIX_LENGTH), _int(0)),
    # actions per checkpoint part: the table-property form of delta-spark's session conf
    # spark.databricks.delta.checkpoint.partSize (tahoe's default: one million)
    _prop("delta.checkpoint.partSize", "int", "1000000", _int(1)),
    _prop("delta.minReaderVersion", "int", None, _int(1, 3)),
    _prop("delta.minWriterVersion", "int", None, _int(1, 7)),
    _prop(ROW_ID_COLUMN_PROP, "text", None),
    _prop(ROW_COMMIT_VERSION_COLUMN_PROP, "text", None),
    _prop("delta.inCommitTimestampEnablementVersion", "int", None, _int(0)),
    _prop("delta.inCommitTimestampEnablementTimestamp", "int", None, _int()),
    _prop("delta.requireCheckpointProtectionBeforeVersion", "int", "0", _int(0)),
    # the log retention DROP FEATURE ... TRUNCATE HISTORY cleans up with (tahoe.maintenance.features)
    _prop("delta.dropFeatureTruncateHistory.retentionDuration", "interval", "interval 24 hours"),
    _prop("delta.enableVariantShredding", "bool", "false"),
    # parquet data files (tahoe.protocol.parquet_format)
    _enum_prop("delta.parquet.compression.codec", None, "uncompressed", "snappy", "gzip", "lz4", "zstd"),
    _prop("delta.parquet.format.version", "text", None, _semver),
    # Iceberg compatibility / UniForm (tahoe.uniform)
    _prop("delta.enableIcebergCompatV1", "bool", "false"),
    _prop("delta.enableIcebergCompatV2", "bool", "false"),
    _prop("delta.universalFormat.enabledFormats", "text", None, _formats),
    # tahoe's own (no delta-spark equivalent; ignored by other engines): after a commit, write a
    # checkpoint when the JSON commits since the last checkpoint hold at least this many bytes,
    # whatever delta.checkpointInterval says — a few large commits otherwise leave readers
    # parsing hundreds of MB of JSON until the Nth commit (tahoe.log.checkpoint_policy). 0: off.
    _prop(CHECKPOINT_JSON_SIZE_THRESHOLD, "size", "32mb", _size_or_zero),
)
TABLE_PROPERTIES: dict[str, TableProperty] = {p.key: p for p in _KNOWN}
_BY_LOWER = {k.lower(): k for k in TABLE_PROPERTIES}


def _stringify(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    raise InvalidTableOperationError(
        f"table property '{key}' must be a string (or bool/number), got {type(value).__name__}")


def normalize_property(key: str, value: Any) -> tuple[str, str]:
    """One property → (canonical key, canonical value); InvalidTableOperationError when the key
    is an unknown `delta.` or `tahoe.` key or the value is invalid for it."""
    if not isinstance(key, str) or not key:
        raise InvalidTableOperationError(f"invalid table property name {key!r}")
    if value is None:
        raise InvalidTableOperationError(f"table property '{key}' has no value (None)")
    text = _stringify(key, value)
    low = key.lower()
    if low.startswith(CONSTRAINT_PREFIX.lower()):
        name = key[len(CONSTRAINT_PREFIX):]
        if not name:
            raise InvalidTableOperationError(f"table property '{key}' names no constraint")
        if not text.strip():
            raise InvalidTableOperationError(f"CHECK constraint '{name}' has an empty expression")
        return CONSTRAINT_PREFIX + name.lower(), text
    if low.startswith(FEATURE_PREFIX.lower()):
        name = key[len(FEATURE_PREFIX):]
        if text.strip().lower() not in ("supported", "enabled"):
            raise InvalidTableOperationError(
                f"invalid value '{text}' for table property '{key}': expected 'supported' or 'enabled'")
        return FEATURE_PREFIX + name, "supported"
    if not low.startswith(("delta.", TAHOE_PREFIX)):
        return key, text
    # delta-spark's namespace and tahoe's own: known keys only
    canon = _BY_LOWER.get(low)
    if canon is None:
        if low.startswith(TAHOE_PREFIX):
            known = ", ".join(k for k in TABLE_PROPERTIES if k.startswith(TAHOE_PREFIX))
            raise InvalidTableOperationError(
                f"unknown configuration was specified: '{key}' (the 'tahoe.' namespace holds tahoe's "
                f"own table properties: {known})")
        raise InvalidTableOperationError(
            f"unknown configuration was specified: '{key}' (not a Delta table property this "
            f"client knows; properties outside the 'delta.' namespace are allowed)")
    try:
        return canon, TABLE_PROPERTIES[canon].check(text)
    except ValueError as e:
        raise InvalidTableOperationError(f"invalid value '{text}' for table property '{canon}': {e}") from None


def normalize_properties(props: dict[str, Any] | None) -> dict[str, str]:
    """Validate and canonicalize user-supplied table properties (see the module docstring)."""
    out: dict[str, str] = {}
    for k, v in (props or {}).items():
        ck, cv = normalize_property(k, v)
        if ck in out and out[ck] != cv:
            raise InvalidTableOperationError(f"table property '{ck}' is given twice with different values")
        out[ck] = cv
    return out


def split_protocol_properties(conf: dict[str, str]) -> tuple[dict[str, str], set[str], int | None, int | None]:
    """Separate the protocol pseudo-properties from a configuration: returns (the configuration
    without them, features named by `delta.feature.<name>`, delta.minReaderVersion,
    delta.minWriterVersion)."""
    rest: dict[str, str] = {}
    features: set[str] = set()
    reader = writer = None
    for k, v in conf.items():
        low = k.lower()
        if low.startswith(FEATURE_PREFIX.lower()):
            name = canonical_feature_name(k[len(FEATURE_PREFIX):])
            if name not in FEATURES:
                raise UnsupportedFeatureError(
                    f"unknown table feature '{k[len(FEATURE_PREFIX):]}' in property '{k}'; known "
                    f"features: {', '.join(sorted(FEATURES))}")
            features.add(name)
        elif low == "delta.minreaderversion":
            reader = int(v)
        elif low == "delta.minwriterversion":
            writer = int(v)
        else:
            rest[k] = v
    return rest, features, reader, writer


# --- reading the configuration -------------------------------------------------------------
#
# Readers of a table's configuration (`metaData.configuration`): one per kind, each returning the
# typed value of a known property, its default (TABLE_PROPERTIES) when unset, and an
# InvalidTableOperationError naming the property when the stored value is not valid for it.

def raw_property(conf: dict[str, str] | None, key: str) -> str | None:
    """The stored string of property `key` (exact key first, then case-insensitively, as other
    writers may spell it), or None when unset."""
    conf = conf or {}
    if key in conf:
        v = conf[key]
        return None if v is None else str(v)
    low = key.lower()
    for k, v in conf.items():
        if k.lower() == low:
            return None if v is None else str(v)
    return None


def _known(key: str, kind: str) -> TableProperty:
    prop = TABLE_PROPERTIES.get(key)
    if prop is None:
        raise KeyError(f"'{key}' is not a known table property")
    if prop.kind != kind:
        raise TypeError(f"table property '{key}' is read as {prop.kind}, not {kind}")
    return prop


def _read(conf: dict[str, str] | None, prop: TableProperty, parse: Callable[[str], Any]) -> Any:
    raw = raw_property(conf, prop.key)
    if raw is None:
        return None if prop.default is None else parse(prop.default)
    try:
        return parse(prop.check(raw))
    except ValueError as e:
        raise InvalidTableOperationError(
            f"table property '{prop.key}' has an invalid value '{raw}': {e}") from None


def bool_property(conf: dict[str, str] | None, key: str) -> bool | None:
    """A boolean property (None only for those without a default, e.g.
    delta.checkpoint.writeStatsAsStruct, when unset)."""
    return _read(conf, _known(key, "bool"), lambda v: v == "true")


def int_property(conf: dict[str, str] | None, key: str) -> int | None:
    """An integer property, range-checked as delta-spark checks it."""
    return _read(conf, _known(key, "int"), int)


def interval_property_ms(conf: dict[str, str] | None, key: str) -> int | None:
    """A duration property (`interval 1 week`, ...) in milliseconds."""
    return _read(conf, _known(key, "interval"), parse_interval_ms)


def enum_property(conf: dict[str, str] | None, key: str) -> str | None:
    """An enumerated property, in its canonical spelling (e.g. `WriteSerializable`)."""
    return _read(conf, _known(key, "enum"), str)


def text_property(conf: dict[str, str] | None, key: str) -> str | None:
    """A free-form property (sizes, column names), as stored."""
    prop = TABLE_PROPERTIES.get(key)
    if prop is None or prop.kind not in ("text", "size", "columns"):
        raise KeyError(f"'{key}' is not a known text table property")
    return _read(conf, prop, str)


def size_property(conf: dict[str, str] | None, key: str) -> int | None:
    """A size property in bytes (`128mb`, `134217728`)."""
    return _read(conf, _known(key, "size"), parse_size)


class DataSkippingSettings(NamedTuple):
    """Which columns get statistics (delta.dataSkippingNumIndexedCols / StatsColumns) and how long
    string min/max prefixes are (delta.dataSkippingStringPrefixLength)."""
    num_indexed_cols: int
    stats_columns: list[str] | None      # None: the first `num_indexed_cols` leaves
    string_prefix_length: int


def data_skipping_settings(conf: dict[str, str] | None) -> DataSkippingSettings:
    cols = text_property(conf, "delta.dataSkippingStatsColumns")
    return DataSkippingSettings(
        int_property(conf, "delta.dataSkippingNumIndexedCols"),
        [c.strip() for c in cols.split(",") if c.strip()] if cols is not None else None,
        int_property(conf, "delta.dataSkippingStringPrefixLength"))


def parquet_write_options(conf: dict[str, str] | None) -> ParquetWriteOptions:
    """How the table's data files are written (`tahoe.protocol.parquet_format`): the codec
    (delta.parquet.compression.codec, else snappy), the Parquet writer version
    (delta.parquet.format.version: the highest known format version not above it, else 1) and
    whether variants may be shredded (delta.enableVariantShredding)."""
    version = text_property(conf, "delta.parquet.format.version")
    writer = dict(FORMAT_VERSIONS)[resolve_format_version(version)] if version is not None else 1
    return ParquetWriteOptions(enum_property(conf, "delta.parquet.compression.codec") or DEFAULT_CODEC, writer,
                               bool(bool_property(conf, "delta.enableVariantShredding")))


def isolation_level(conf: dict[str, str] | None) -> str:
    """The table's default isolation level for data-changing commits (delta.isolationLevel)."""
    return enum_property(conf, "delta.isolationLevel")


# --- constraints ---------------------------------------------------------------------------

def constraint_key(name: str) -> str:
    return CONSTRAINT_PREFIX + name.lower()


def constraints_of(conf: dict[str, str] | None) -> dict[str, str]:
    """CHECK constraints of a configuration: name → SQL expression."""
    return {k[len(CONSTRAINT_PREFIX):]: v for k, v in (conf or {}).items()
            if k.lower().startswith(CONSTRAINT_PREFIX)}


# --- features required by metadata ----------------------------------------------------------

def _walk(dt: DataType) -> Iterable[tuple[StructField | None, DataType]]:
    if isinstance(dt, StructType):
        for f in dt.fields:
            yield f, f.type
            yield from _walk(f.type)
    elif isinstance(dt, ArrayType):
        yield None, dt.element_type
        yield from _walk(dt.element_type)
    elif isinstance(dt, MapType):
        yield None, dt.key_type
        yield from _walk(dt.key_type)
        yield None, dt.value_type
        yield from _walk(dt.value_type)


def features_for_schema(schema: StructType) -> set[str]:
    """Features a schema needs: timestamp_ntz columns, identity/generated columns, invariants,
    column defaults, recorded type changes, variant columns, geometry / geography columns."""
    out: set[str] = set()
    for f, dt in _walk(schema):
        if isinstance(dt, PrimitiveType):
            if dt.name == "timestamp_ntz":
                out.add("timestampNtz")
            elif dt.name == "variant":
                out.add("variantType")  # not implemented: protocol derivation will refuse it
        elif isinstance(dt, GeoType):
            out.add("geospatial")
        if f is None:
            continue
        md = f.metadata
        if any(k in md for k in (IDENTITY_START, IDENTITY_STEP, IDENTITY_HIGH_WATER_MARK)):
            out.add("identityColumns")
        if GENERATION_EXPRESSION in md:
            out.add("generatedColumns")
        if INVARIANTS in md:
            out.add("invariants")
        if COLUMN_DEFAULT in md:
            out.add("allowColumnDefaults")
        if TYPE_CHANGES in md:
            out.add("typeWidening")
    return out


def features_for_metadata(configuration: dict[str, str], schema: StructType) -> set[str]:
    """Every table feature the configuration and schema of a table need."""
    out = features_for_schema(schema)
    conf_lower = {k.lower(): str(v).strip().lower() for k, v in configuration.items()}
    for f in FEATURES.values():
        for key, value in f.property_enables:
            if conf_lower.get(key.lower()) == value.lower():
                out.add(f.name)
    if any(k.startswith(CONSTRAINT_PREFIX) for k in conf_lower):
        out.add("checkConstraints")
    return out


# --- identity columns -----------------------------------------------------------------------

def identity_columns(schema: StructType) -> dict[str, StructField]:
    """Top-level identity columns by name."""
    return {f.name: f for f in schema.fields
            if IDENTITY_START in f.metadata or IDENTITY_STEP in f.metadata}


def check_identity_columns(schema: StructType, partition_columns: Iterable[str] = ()) -> None:
    """The rules delta-spark applies when a table gets identity columns: BIGINT only, a step
    other than 0, no generation expression besides, and not a partition column. SchemaError
    naming the column otherwise."""
    parts = {p.lower() for p in partition_columns}
    for f in identity_columns(schema).values():
        if not (isinstance(f.type, PrimitiveType) and f.type.name == "long"):
            raise SchemaError(f"identity column '{f.name}' has type {f.type.simple_string()}; "
                              f"identity columns must be BIGINT")
        try:
            step = int(f.metadata.get(IDENTITY_STEP, 1))
            int(f.metadata.get(IDENTITY_START, 1))
        except (TypeError, ValueError):
            raise SchemaError(f"identity column '{f.name}' has a start or step that is not an integer") from None
        if step == 0:
            raise SchemaError(f"identity column '{f.name}' has step 0; the step cannot be 0")
        if GENERATION_EXPRESSION in f.metadata:
            raise SchemaError(f"identity column '{f.name}' cannot also have a generation expression")
        if f.name.lower() in parts:
            raise SchemaError(f"identity column '{f.name}' cannot be a partition column")


def advance_identity_high_water_mark(schema: StructType, column: str, value: int) -> StructType | None:
    """The schema with `delta.identity.highWaterMark` of identity column `column` moved to
    `value` — only forward in the direction of the column's step (a larger value for a positive
    step, a smaller one for a negative step). Returns None when `value` does not advance it.
    SchemaError when the column is not an identity column or `value` is not on the column's
    sequence (start + k * step, k >= 0)."""
    f = schema.get(column, case_insensitive=True)
    if f is None:
        raise SchemaError(f"column '{column}' not found; available columns: {schema.names}")
    md = f.metadata
    if IDENTITY_START not in md and IDENTITY_STEP not in md:
        raise SchemaError(f"column '{f.name}' is not an identity column")
    start = int(md.get(IDENTITY_START, 1))
    step = int(md.get(IDENTITY_STEP, 1))
    if step == 0:
        raise SchemaError(f"identity column '{f.name}' has step 0")
    value = int(value)
    if (value - start) % step != 0 or (value - start) // step < 0:
        raise SchemaError(
            f"value {value} is not generated by identity column '{f.name}' (start {start}, step {step})")
    current = md.get(IDENTITY_HIGH_WATER_MARK)
    if current is not None:
        current = int(current)
        if (step > 0 and value <= current) or (step < 0 and value >= current):
            return None
    new_md = dict(md)
    new_md[IDENTITY_HIGH_WATER_MARK] = value
    fields = [g.with_metadata(new_md) if g is f else g for g in schema.fields]
    return StructType(fields)
