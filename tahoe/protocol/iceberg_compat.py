"""Iceberg compatibility (spec "Iceberg Compatibility V1/V2"; delta-spark's IcebergCompat): the rules a commit
keeps with `delta.enableIcebergCompatV1/V2`, and UniForm's need of them. Pure. `creating_defaults` gives a new
table column mapping `name`; `check_commit` raises IcebergCompatViolationError / UniversalFormatViolationError:

  1. UniForm iceberg needs V1 or V2 (DELTA_UNIVERSAL_FORMAT_VIOLATION); Hudi is UnsupportedFeatureError.
  2. VERSION_MUTUAL_EXCLUSIVE; WRONG_REQUIRED_TABLE_PROPERTY (mapping `name`/`id`);
     MISSING_REQUIRED_TABLE_FEATURE (columnMapping); DELETION_VECTORS_SHOULD_BE_DISABLED.
  3. UNSUPPORTED_DATA_TYPE: V1 no array, map or void; V2 allow-listed types; under UniForm no arrays or maps.
  4. REPLACE_TABLE_CHANGE_PARTITION_NAMES; CHANGE_VERSION_NEED_REWRITE (V2 only on create or replace).
  5. Every added file has numRecords in its stats."""

from __future__ import annotations

from typing import Iterable

from ..errors import IcebergCompatViolationError, UniversalFormatViolationError, UnsupportedFeatureError
from .actions import AddFile, Metadata, Protocol
from .properties import ENABLE_DELETION_VECTORS, bool_property, enum_property, raw_property, text_property
from .schema import ArrayType, DataType, DecimalType, MapType, PrimitiveType, StructType

__all__ = ["COMPAT_KEYS", "ENABLED_FORMATS_KEY", "enabled_compat_version", "uniform_iceberg_enabled",
           "creating_defaults", "check_commit"]

COMPAT_KEYS = {1: "delta.enableIcebergCompatV1", 2: "delta.enableIcebergCompatV2"}
ENABLED_FORMATS_KEY = "delta.universalFormat.enabledFormats"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
_V2_ALLOWED = {"byte", "short", "integer", "long", "float", "double", "string", "binary", "boolean",
               "timestamp", "timestamp_ntz", "date"}
_VIOLATION = "DELTA_ICEBERG_COMPAT_VIOLATION"


def enabled_compat_version(conf: dict | None) -> int | None:
    """The IcebergCompat version the configuration enables (the lowest, if several)."""
    conf = conf or {}
    for v, key in sorted(COMPAT_KEYS.items()):
        if bool_property(conf, key):
            return v
    return None


def enabled_formats(conf: dict | None) -> set[str]:
    raw = text_property(conf, ENABLED_FORMATS_KEY) or ""
    return {p.strip().lower() for p in raw.split(",") if p.strip()}


def uniform_iceberg_enabled(conf: dict | None) -> bool:
    return "iceberg" in enabled_formats(conf)


def creating_defaults(conf: dict) -> dict:
    """A new table's configuration with what IcebergCompat auto-sets when absent: column mapping
    `name` (delta-spark's RequireColumnMapping autoSetValue)."""
    if enabled_compat_version(conf) is not None and raw_property(conf, COLUMN_MAPPING_MODE) is None:
        return {**conf, COLUMN_MAPPING_MODE: "name"}
    return conf


def _bad_type(dt: DataType, version: int, uniform: bool) -> DataType | None:
    if isinstance(dt, StructType):
        for f in dt.fields:
            bad = _bad_type(f.type, version, uniform)
            if bad is not None:
                return bad
        return None
    if isinstance(dt, (ArrayType, MapType)):
        if version == 1 or uniform:
            return dt
        inner = [dt.element_type] if isinstance(dt, ArrayType) else [dt.key_type, dt.value_type]
        for t in inner:
            bad = _bad_type(t, version, uniform)
            if bad is not None:
                return bad
        return None
    if isinstance(dt, DecimalType):
        return None
    if isinstance(dt, PrimitiveType):
        if dt.name == "void" or (version == 2 and dt.name not in _V2_ALLOWED):
            return dt
        if version == 1 and dt.name == "variant":
            return dt
        return None
    return dt


def check_commit(prev: Metadata | None, new: Metadata, protocol: Protocol, adds: Iterable[AddFile], *,
                 creating: bool, features: set[str]) -> None:
    """Refuse a commit that breaks Iceberg compatibility (see the module docstring). `prev`: the
    metadata before the commit (None for a new table); `new`: after it; `features`: the
    protocol's supported features; `creating`: the table is created or replaced."""
    conf = new.configuration
    formats = enabled_formats(conf)
    if "hudi" in formats:
        raise UnsupportedFeatureError(
            f"{ENABLED_FORMATS_KEY}=hudi: tahoe generates Iceberg metadata only (UniForm iceberg)")
    version = enabled_compat_version(conf)
    if "iceberg" in formats and version is None:
        raise UniversalFormatViolationError(
            f"The validation of Universal Format (iceberg) has failed: {ENABLED_FORMATS_KEY}=iceberg "
            f"requires IcebergCompatV1 or IcebergCompatV2 ('delta.enableIcebergCompatV2' = 'true').")
    if version is None:
        return
    if sum(1 for key in COMPAT_KEYS.values() if bool_property(conf, key)) > 1:
        raise IcebergCompatViolationError(
            "Only one IcebergCompat version can be enabled, please explicitly disable all other "
            "IcebergCompat versions that are not needed.", f"{_VIOLATION}.VERSION_MUTUAL_EXCLUSIVE")
    mode = enum_property(conf, COLUMN_MAPPING_MODE)
    if mode not in ("name", "id"):
        raise IcebergCompatViolationError(
            f"IcebergCompatV{version} requires table property '{COLUMN_MAPPING_MODE}' to be set to 'name'. "
            f"Current value: '{mode}'.", f"{_VIOLATION}.WRONG_REQUIRED_TABLE_PROPERTY")
    if "columnMapping" not in features:
        raise IcebergCompatViolationError(
            f"IcebergCompatV{version} requires feature columnMapping to be supported and enabled.",
            f"{_VIOLATION}.MISSING_REQUIRED_TABLE_FEATURE")
    if "deletionVectors" in features and bool_property(conf, ENABLE_DELETION_VECTORS):
        raise IcebergCompatViolationError(
            f"IcebergCompatV{version} requires Deletion Vectors to be disabled on the table first "
            f"('delta.enableDeletionVectors' = 'false').", f"{_VIOLATION}.DELETION_VECTORS_SHOULD_BE_DISABLED")
    adds = list(adds)
    for a in adds:
        if a.deletion_vector is not None:
            raise IcebergCompatViolationError(
                f"IcebergCompatV{version} requires Deletion Vectors to be completely purged from the "
                f"table; add {a.path} has one.", f"{_VIOLATION}.DELETION_VECTORS_NOT_PURGED")
    bad = _bad_type(new.schema, version, "iceberg" in formats)
    if bad is not None:
        reason = ""
        if isinstance(bad, (ArrayType, MapType)) and version == 2:
            reason = (" (tahoe's Iceberg conversion does not assign the nested field ids of arrays and "
                      "maps that Iceberg readers resolve them by)")
        raise IcebergCompatViolationError(
            f"IcebergCompatV{version} does not support the data type {bad.simple_string()} in your "
            f"schema{reason}. Your schema: {new.schema.simple_string()}", f"{_VIOLATION}.UNSUPPORTED_DATA_TYPE")
    for pc in new.partition_columns:
        f = new.schema.get(pc)
        if f is not None and isinstance(f.type, PrimitiveType) and f.type.name in ("binary", "variant", "void"):
            raise IcebergCompatViolationError(
                f"IcebergCompatV{version} does not support the data type {f.type.simple_string()} for "
                f"partition columns in your schema.", f"{_VIOLATION}.UNSUPPORTED_PARTITION_DATA_TYPE")
    if prev is not None and prev.partition_columns and list(prev.partition_columns) != list(new.partition_columns):
        raise IcebergCompatViolationError(
            f"IcebergCompatV{version} doesn't support replacing partitioned tables with a "
            f"differently-named partition spec. Prev Partition Spec: {list(prev.partition_columns)} "
            f"New Partition Spec: {list(new.partition_columns)}", f"{_VIOLATION}.REPLACE_TABLE_CHANGE_PARTITION_NAMES")
    if not creating and prev is not None:
        old = enabled_compat_version(prev.configuration) or 0
        allowed = {0: {0, 1}, 1: {0, 1}, 2: {0, 1, 2}}.get(old, set())
        if version not in allowed:
            raise IcebergCompatViolationError(
                f"Changing to IcebergCompatV{version} requires rewriting the table (create or replace "
                f"it with the property set).", f"{_VIOLATION}.CHANGE_VERSION_NEED_REWRITE")
    for a in adds:
        if a.num_records is None:
            raise IcebergCompatViolationError(
                f"IcebergCompatV{version} requires all AddFiles to contain the numRecords statistic. "
                f"AddFile {a.path} is missing this statistic. Stats: {a.stats}", f"{_VIOLATION}.MISSING_STATS")
