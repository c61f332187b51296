"""Column mapping (spec "Column Mapping"): logical column names vs the physical names and field
ids used in data files, partition values and statistics.

Owns: reading the mode from the table configuration, a field's physical name and id, the
physical schema (Delta and Arrow) a reader resolves and a writer writes with, and the writer-side
schema operations — assigning ids/physical names to new columns, renaming and dropping columns
while keeping physical names stable — and telling whether a schema change renamed or dropped a
column (`renames_or_drops`: what readers of several versions must refuse).

Field ids: delta-spark writes Parquet field ids (and the `parquet.field.id` metadata in its
physical schema) in both `name` and `id` mode, so this module does too whenever a field has an
id; in `id` mode every field must have one.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Iterable

from ..errors import InvalidTableOperationError, SchemaError
from .properties import enum_property, int_property
from .schema import ArrayType, DataType, MapType, StructField, StructType, to_arrow_type
from .iceberg_compat import creating_defaults
from .table_features import reader_features_of

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

    from .actions import Protocol

__all__ = [
    "MODE_KEY", "MAX_COLUMN_ID_KEY", "ID_KEY", "PHYSICAL_NAME_KEY", "PARQUET_FIELD_ID_KEY",
    "ARROW_FIELD_ID_KEY", "mode", "effective_mode", "physical_name", "field_id", "to_physical_schema",
    "physical_arrow_schema", "logical_to_physical_names", "assign_ids", "max_field_id",
    "rename_column", "drop_column", "assign_ids_for_table", "renames_or_drops",
]

MODE_KEY = "delta.columnMapping.mode"
MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
ID_KEY = "delta.columnMapping.id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
PARQUET_FIELD_ID_KEY = "parquet.field.id"
ARROW_FIELD_ID_KEY = b"PARQUET:field_id"

_MODES = ("none", "name", "id")


def mode(configuration: dict | None) -> str:
    """'none', 'name' or 'id' from `delta.columnMapping.mode` (absent → 'none'; case-insensitive)."""
    try:
        return enum_property(configuration, MODE_KEY)
    except InvalidTableOperationError as e:
        raise SchemaError(str(e)) from None


def effective_mode(configuration: dict | None, protocol: "Protocol | None") -> str:
    """The mode in effect for reading and writing the table's files: `mode(configuration)` when
    the protocol supports column mapping — reader version 2, or reader version 3 listing
    `columnMapping` in readerFeatures — else 'none' (spec "Column Mapping": the property is
    allowed but ignored without the feature; delta-kernel-rs's `column_mapping_mode` alike).
    delta-rs 1.6 writes such tables: `delta.columnMapping.mode` set, physical names in the schema,
    a 3/7 protocol without the feature, and data files with the logical names."""
    m = mode(configuration)
    if m == "none" or protocol is None:
        return m
    return m if "columnMapping" in reader_features_of(protocol) else "none"


def physical_name(field: StructField) -> str:
    """The name of the column in data files, partition values and stats under name/id mode."""
    v = field.metadata.get(PHYSICAL_NAME_KEY)
    return v if isinstance(v, str) and v else field.name


def field_id(field: StructField) -> int | None:
    v = field.metadata.get(ID_KEY)
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        raise SchemaError(f"column '{field.name}' has an invalid {ID_KEY}: {v!r}") from None


def _check_mode(m: str) -> None:
    if m not in _MODES:
        raise SchemaError(f"invalid column mapping mode '{m}'; expected one of {list(_MODES)}")


# --- physical schema ---------------------------------------------------------------------------

def _physical_type(dt: DataType, m: str, path: str) -> DataType:
    if isinstance(dt, StructType):
        return StructType([_physical_field(f, m, f"{path}.{f.name}" if path else f.name) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return ArrayType(_physical_type(dt.element_type, m, f"{path}.element"), dt.contains_null)
    if isinstance(dt, MapType):
        return MapType(_physical_type(dt.key_type, m, f"{path}.key"),
                       _physical_type(dt.value_type, m, f"{path}.value"), dt.value_contains_null)
    return dt


def _physical_field(f: StructField, m: str, path: str) -> StructField:
    pname = f.metadata.get(PHYSICAL_NAME_KEY)
    if not isinstance(pname, str) or not pname:
        raise SchemaError(f"column '{path}' has no {PHYSICAL_NAME_KEY} but the table uses "
                          f"column mapping mode '{m}'")
    fid = field_id(f)
    if fid is None and m == "id":
        raise SchemaError(f"column '{path}' has no {ID_KEY} but the table uses column mapping mode 'id'")
    md = dict(f.metadata)
    if fid is not None:
        md[PARQUET_FIELD_ID_KEY] = fid
    return StructField(pname, _physical_type(f.type, m, path), f.nullable, md)


def to_physical_schema(logical: StructType, mode: str) -> StructType:
    """The schema as stored in data files: in name/id mode every field (nested ones too) renamed
    to its physical name, keeping its column-mapping metadata and adding `parquet.field.id`.
    In 'none' mode the logical schema itself."""
    _check_mode(mode)
    if mode == "none":
        return logical
    out = _physical_type(logical, mode, "")
    assert isinstance(out, StructType)
    return out


def _arrow_field(f: StructField, with_ids: bool) -> pa.Field:
    import pyarrow as pa

    md = None
    if with_ids:
        fid = field_id(f)
        if fid is not None:
            md = {ARROW_FIELD_ID_KEY: str(fid).encode()}
    return pa.field(f.name, _arrow_type(f.type, with_ids), nullable=f.nullable, metadata=md)


def _arrow_type(dt: DataType, with_ids: bool) -> pa.DataType:
    import pyarrow as pa

    if isinstance(dt, StructType):
        return pa.struct([_arrow_field(f, with_ids) for f in dt.fields])
    if isinstance(dt, ArrayType):
        return pa.list_(pa.field("element", _arrow_type(dt.element_type, with_ids), nullable=dt.contains_null))
    if isinstance(dt, MapType):
        return pa.map_(pa.field("key", _arrow_type(dt.key_type, with_ids), nullable=False),
                       pa.field("value", _arrow_type(dt.value_type, with_ids), nullable=dt.value_contains_null))
    return to_arrow_type(dt)


def physical_arrow_schema(logical: StructType, mode: str) -> pa.Schema:
    """The Arrow schema to write data files with: physical names, and under name/id mode every
    field carrying `PARQUET:field_id` metadata so pyarrow writes the Parquet field ids."""
    import pyarrow as pa

    phys = to_physical_schema(logical, mode)
    with_ids = mode in ("name", "id")
    return pa.schema([_arrow_field(f, with_ids) for f in phys.fields])


def logical_to_physical_names(logical: StructType, mode: str) -> dict[str, str]:
    """Top-level logical column name → physical name (the key used in partitionValues and stats).
    Identity in 'none' mode."""
    _check_mode(mode)
    if mode == "none":
        return {f.name: f.name for f in logical.fields}
    return {f.name: _physical_field(f, mode, f.name).name for f in logical.fields}


# --- writers -----------------------------------------------------------------------------------

def _walk_fields(dt: DataType) -> Iterable[StructField]:
    if isinstance(dt, StructType):
        for f in dt.fields:
            yield f
            yield from _walk_fields(f.type)
    elif isinstance(dt, ArrayType):
        yield from _walk_fields(dt.element_type)
    elif isinstance(dt, MapType):
        yield from _walk_fields(dt.key_type)
        yield from _walk_fields(dt.value_type)


def max_field_id(schema: StructType) -> int:
    """The largest `delta.columnMapping.id` in the schema (0 when none)."""
    return max((field_id(f) or 0 for f in _walk_fields(schema)), default=0)


def assign_ids(schema: StructType, max_column_id: int, *,
               physical_names_from_logical: bool = False) -> tuple[StructType, int]:
    """Give every field (nested in structs, arrays and maps too) that lacks one a fresh
    `delta.columnMapping.id` (counting up from the larger of `max_column_id` and the ids already
    present) and a `delta.columnMapping.physicalName` of `col-<uuid4>`. Returns the new schema
    and the new maximum id (store it as `delta.columnMapping.maxColumnId`).

    `physical_names_from_logical=True` names new physical columns after their current logical
    names instead — what delta-spark does when column mapping is enabled on an existing table,
    so the existing data files stay readable."""
    counter = [max(int(max_column_id), max_field_id(schema))]

    def fix_type(dt: DataType) -> DataType:
        if isinstance(dt, StructType):
            return StructType([fix_field(f) for f in dt.fields])
        if isinstance(dt, ArrayType):
            return ArrayType(fix_type(dt.element_type), dt.contains_null)
        if isinstance(dt, MapType):
            return MapType(fix_type(dt.key_type), fix_type(dt.value_type), dt.value_contains_null)
        return dt

    def fix_field(f: StructField) -> StructField:
        md = dict(f.metadata)
        if field_id(f) is None:
            counter[0] += 1
            md[ID_KEY] = counter[0]
        pname = md.get(PHYSICAL_NAME_KEY)
        if not isinstance(pname, str) or not pname:
            md[PHYSICAL_NAME_KEY] = f.name if physical_names_from_logical else f"col-{uuid.uuid4()}"
        return StructField(f.name, fix_type(f.type), f.nullable, md)

    out = fix_type(schema)
    assert isinstance(out, StructType)
    return out, counter[0]


def _split(path: str | list[str] | tuple[str, ...]) -> list[str]:
    parts = path.split(".") if isinstance(path, str) else list(path)
    if not parts or any(not p for p in parts):
        raise SchemaError(f"invalid column path {path!r}")
    return parts


def _transform_at(schema: StructType, parts: list[str], fn, what: str) -> StructType:
    """Apply `fn(struct, index) -> StructType` to the struct holding the last path element."""
    def go(dt: DataType, i: int) -> DataType:
        if isinstance(dt, StructType):
            idx = dt.index_of(parts[i], case_insensitive=True)
            if idx < 0:
                raise SchemaError(f"cannot {what} column '{'.'.join(parts)}': '{parts[i]}' not found "
                                  f"among {dt.names}")
            if i == len(parts) - 1:
                return fn(dt, idx)
            f = dt.fields[idx]
            fields = list(dt.fields)
            fields[idx] = f.with_type(go(f.type, i + 1))
            return StructType(fields)
        if isinstance(dt, ArrayType) and parts[i] == "element":
            return ArrayType(go(dt.element_type, i + 1), dt.contains_null)
        if isinstance(dt, MapType) and parts[i] in ("key", "value"):
            if parts[i] == "key":
                return MapType(go(dt.key_type, i + 1), dt.value_type, dt.value_contains_null)
            return MapType(dt.key_type, go(dt.value_type, i + 1), dt.value_contains_null)
        raise SchemaError(f"cannot {what} column '{'.'.join(parts)}': '{'.'.join(parts[:i])}' "
                          f"is {dt.simple_string()}, not a struct")

    out = go(schema, 0)
    assert isinstance(out, StructType)
    return out


def _require_mapping(f: StructField, path: str, what: str) -> None:
    for g in [f, *_walk_fields(f.type)]:
        if not isinstance(g.metadata.get(PHYSICAL_NAME_KEY), str):
            raise SchemaError(f"cannot {what} column '{path}' without column mapping: field "
                              f"'{g.name}' has no {PHYSICAL_NAME_KEY} (enable column mapping first)")


def rename_column(schema: StructType, path: str | list[str], new_name: str) -> StructType:
    """A new logical schema with the column at `path` (dotted string or list; nested fields
    allowed) renamed to `new_name`. Metadata — physical name and id — is kept, so data files need
    no rewrite. Requires column mapping metadata on the field; the new name may not clash
    (case-insensitively) with a sibling."""
    parts = _split(path)
    if not new_name:
        raise SchemaError("new column name must not be empty")

    def do(struct: StructType, idx: int) -> StructType:
        f = struct.fields[idx]
        _require_mapping(f, ".".join(parts), "rename")
        clash = struct.index_of(new_name, case_insensitive=True)
        if clash >= 0 and clash != idx:
            raise SchemaError(f"cannot rename column '{'.'.join(parts)}' to '{new_name}': a column "
                              f"'{struct.fields[clash].name}' already exists")
        fields = list(struct.fields)
        fields[idx] = f.with_name(new_name)
        return StructType(fields)

    return _transform_at(schema, parts, do, "rename")


def drop_column(schema: StructType, path: str | list[str]) -> StructType:
    """A new logical schema without the column at `path` (nested fields allowed). The other
    fields keep their physical names and ids; the dropped id is never reused (maxColumnId does not
    go down). Requires column mapping metadata on the field; dropping the last column of the table
    or of a struct is refused."""
    parts = _split(path)

    def do(struct: StructType, idx: int) -> StructType:
        _require_mapping(struct.fields[idx], ".".join(parts), "drop")
        if len(struct.fields) == 1:
            where = "the table" if len(parts) == 1 else f"struct '{'.'.join(parts[:-1])}'"
            raise SchemaError(f"cannot drop column '{'.'.join(parts)}': it is the only column of {where}")
        return StructType([f for i, f in enumerate(struct.fields) if i != idx])

    return _transform_at(schema, parts, do, "drop")


def assign_ids_for_table(schema: StructType, configuration: dict) -> tuple[StructType, dict]:
    """`schema` with ids and physical names for fields that lack them, and `configuration` with
    `delta.columnMapping.maxColumnId` advanced, when the table uses column mapping (unchanged
    otherwise). What every writer does before it commits a new or evolved schema. A table with
    Iceberg compatibility but no mode set gets mode `name` here (delta-spark auto-sets it when
    such a table is created; an existing compat table has a mode already)."""
    configuration = creating_defaults(configuration)
    if mode(configuration) == "none":
        return schema, configuration
    prev = int_property(configuration, MAX_COLUMN_ID_KEY)
    schema, new_max = assign_ids(schema, prev)
    return schema, {**configuration, MAX_COLUMN_ID_KEY: str(max(prev, new_max))}


def _physical_paths(dt: DataType, prefix: tuple = ()) -> dict[tuple, tuple]:
    """{physical path: logical path} of every field nested in `dt`."""
    out: dict[tuple, tuple] = {}
    if isinstance(dt, StructType):
        for f in dt.fields:
            phys = prefix + (physical_name(f),)
            out[phys] = (f.name,)
            for p, logical in _physical_paths(f.type, phys).items():
                out[p] = (f.name,) + logical
    elif isinstance(dt, ArrayType):
        out.update(_physical_paths(dt.element_type, prefix + ("element",)))
    elif isinstance(dt, MapType):
        out.update(_physical_paths(dt.key_type, prefix + ("key",)))
        out.update(_physical_paths(dt.value_type, prefix + ("value",)))
    return out


def renames_or_drops(new: StructType, new_mode: str, old: StructType, old_mode: str) -> bool:
    """Whether going from `old` to `new` renamed or dropped a column under column mapping
    (delta-spark's `hasNoColumnMappingSchemaChanges`, negated): a physical name of `old` missing
    from `new` (a drop — also a drop and re-add under the same logical name), or present under
    another logical name (a rename). False when either schema has no column mapping."""
    if new_mode == "none" or old_mode == "none":
        return False
    new_paths = {k: tuple(x.lower() for x in v) for k, v in _physical_paths(new).items()}
    for phys, logical in _physical_paths(old).items():
        if phys not in new_paths or new_paths[phys] != tuple(x.lower() for x in logical):
            return True
    return False
