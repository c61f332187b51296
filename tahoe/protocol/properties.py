"""Table properties (`metaData.configuration`) as writers see them: which `delta.*` keys exist and
what values they take, and which table features a table's properties and schema require.

Owns:
  * `normalize_properties` — validates user-supplied properties the way delta-spark does: known
    `delta.*` keys are matched case-insensitively and respelled canonically, their values typed
    (booleans, integers, `interval 7 days`, enumerations) and stored in canonical form; an unknown
    `delta.` key is an InvalidTableOperationError naming it; keys outside `delta.` pass untouched;
  * `split_protocol_properties` — the pseudo-properties that change the protocol instead of the
    configuration (`delta.feature.<name>=supported`, `delta.minReaderVersion`,
    `delta.minWriterVersion`); they are never stored in the configuration;
  * `features_for_metadata` — the table features a configuration and schema need (column mapping,
    CDF, deletion vectors, row tracking, timestamp_ntz columns, identity/generated columns, CHECK
    constraints, ...);
  * small readers of the configuration used at commit time (`is_true`, `parse_interval_ms`,
    `isolation_level`) and the identity-column high-water-mark helper.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from ..errors import InvalidTableOperationError, SchemaError
from .intervals import parse_interval_ms
from .schema import ArrayType, DataType, MapType, PrimitiveType, StructField, StructType
from .table_features import FEATURES, canonical_feature_name

__all__ = [
    "TABLE_PROPERTIES", "CONSTRAINT_PREFIX", "FEATURE_PREFIX", "normalize_properties",
    "normalize_property", "split_protocol_properties", "features_for_metadata",
    "features_for_schema", "is_true", "parse_interval_ms", "isolation_level",
    "ISOLATION_LEVELS", "SERIALIZABLE", "WRITE_SERIALIZABLE", "SNAPSHOT_ISOLATION",
    "constraint_key", "constraints_of", "identity_columns", "check_identity_columns",
    "advance_identity_high_water_mark",
    "IDENTITY_START", "IDENTITY_STEP", "IDENTITY_HIGH_WATER_MARK",
    "IDENTITY_ALLOW_EXPLICIT_INSERT", "GENERATION_EXPRESSION", "INVARIANTS",
    "ROW_ID_COLUMN_PROP", "ROW_COMMIT_VERSION_COLUMN_PROP",
]

CONSTRAINT_PREFIX = "delta.constraints."
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
TYPE_CHANGES = "delta.typeChanges"

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


def _size(v: str) -> str:
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?b?)?\s*", v.lower())
    if not m or int(m.group(1)) <= 0:
        raise ValueError("expected a positive size in bytes, e.g. 134217728 or 128mb")
    return v.strip()


def _non_empty(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


def _semver(v: str) -> str:
    from .parquet_format import resolve_format_version

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


# Known delta.* table properties (delta-spark's DeltaConfigs that this client understands).
TABLE_PROPERTIES: dict[str, Callable[[str], str]] = {
    "delta.appendOnly": _boolean,
    "delta.enableChangeDataFeed": _boolean,
    "delta.enableDeletionVectors": _boolean,
    "delta.enableRowTracking": _boolean,
    "delta.rowTrackingSuspended": _boolean,
    "delta.enableInCommitTimestamps": _boolean,
    "delta.enableTypeWidening": _boolean,
    "delta.enableExpiredLogCleanup": _boolean,
    "delta.checkpoint.writeStatsAsJson": _boolean,
    "delta.checkpoint.writeStatsAsStruct": _boolean,
    "delta.compatibility.symlinkFormatManifest.enabled": _boolean,
    "delta.randomizeFilePrefixes": _boolean,
    "delta.randomPrefixLength": _int(1),
    "delta.autoOptimize.optimizeWrite": _boolean,
    "delta.autoOptimize.autoCompact": _enum("auto", "legacy", "true", "false"),
    "delta.tuneFileSizesForRewrites": _boolean,
    "delta.targetFileSize": _size,
    "delta.columnMapping.mode": _enum("none", "name", "id"),
    "delta.columnMapping.maxColumnId": _int(0),
    "delta.isolationLevel": _enum(*ISOLATION_LEVELS),
    "delta.checkpointInterval": _int(1),
    "delta.checkpointPolicy": _enum("classic", "v2"),
    "delta.logRetentionDuration": _interval,
    "delta.deletedFileRetentionDuration": _interval,
    "delta.setTransactionRetentionDuration": _interval,
    "delta.checkpointRetentionDuration": _interval,
    "delta.dataSkippingNumIndexedCols": _int(-1),
    "delta.dataSkippingStatsColumns": _column_list,
    "delta.dataSkippingStringPrefixLength": _int(0),
    "delta.checkpoint.partSize": _int(1),
    "delta.minReaderVersion": _int(1, 3),
    "delta.minWriterVersion": _int(1, 7),
    ROW_ID_COLUMN_PROP: _non_empty,
    ROW_COMMIT_VERSION_COLUMN_PROP: _non_empty,
    "delta.inCommitTimestampEnablementVersion": _int(0),
    "delta.inCommitTimestampEnablementTimestamp": _int(),
    "delta.requireCheckpointProtectionBeforeVersion": _int(0),
    "delta.enableVariantShredding": _boolean,
    # parquet data files (tahoe.protocol.parquet_format)
    "delta.parquet.compression.codec": _enum("uncompressed", "snappy", "gzip", "lz4", "zstd"),
    "delta.parquet.format.version": _semver,
    # Iceberg compatibility / UniForm (tahoe.uniform)
    "delta.enableIcebergCompatV1": _boolean,
    "delta.enableIcebergCompatV2": _boolean,
    "delta.universalFormat.enabledFormats": _formats,
}
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
    is an unknown `delta.` key or the value is invalid for it."""
    if not isinstance(key, str) or not key:
        raise InvalidTableOperationError(f"invalid table property name {key!r}")
    if value is None:
        raise InvalidTableOperationError(f"table property '{key}' has no value (None)")
    text = _stringify(key, value)
    if not key.lower().startswith("delta."):
        return key, text
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
    canon = _BY_LOWER.get(low)
    if canon is None:
        raise InvalidTableOperationError(
            f"unknown configuration was specified: '{key}' (not a Delta table property this "
            f"client knows; properties outside the 'delta.' namespace are allowed)")
    try:
        return canon, TABLE_PROPERTIES[canon](text)
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
                from ..errors import UnsupportedFeatureError

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

def is_true(conf: dict[str, str] | None, key: str) -> bool:
    return str((conf or {}).get(key, "")).strip().lower() == "true"


def isolation_level(conf: dict[str, str] | None) -> str:
    """The table's default isolation level for data-changing commits."""
    raw = (conf or {}).get("delta.isolationLevel")
    if not raw:
        return WRITE_SERIALIZABLE
    for lvl in ISOLATION_LEVELS:
        if raw.strip().lower() == lvl.lower():
            return lvl
    return WRITE_SERIALIZABLE


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
    column defaults, recorded type changes, variant columns."""
    out: set[str] = set()
    for f, dt in _walk(schema):
        if isinstance(dt, PrimitiveType):
            if dt.name == "timestamp_ntz":
                out.add("timestampNtz")
            elif dt.name == "variant":
                out.add("variantType")  # not implemented: protocol derivation will refuse it
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
