"""Reading a table's data files into Arrow, Spark-free (spec "Reader Requirements" of column
mapping, deletion vectors, timestampNtz; "Partition Value Serialization").

For each logical file: read the parquet file with pyarrow; resolve every logical column to the
file's column (by name, by physical name in column-mapping name mode, by parquet field id in id
mode — recursively inside structs, arrays and maps); cast to the table's logical Arrow type (INT96
and millisecond timestamps, narrower integers after type widening, decimals); fill columns missing
from the file with nulls; add partition columns typed from `partitionValues`; drop rows whose
index is in the file's deletion vector; drop `void` columns. Variant columns come back in
tahoe's Arrow form (`tahoe.protocol.variant`), shredded files reassembled.

The output schema is `logical_arrow_schema(schema)`: every non-void column of the table schema in
schema order, named by its logical name.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import CorruptLogError, DataFilesMissingError, DeletionVectorError
from ..protocol import column_mapping
from ..protocol.deletion_vectors import DeletionVectorDescriptor, deleted_mask, load_deletion_vector
from ..protocol.partition_values import partition_values_to_arrow
from ..protocol.schema import (
    VARIANT, ArrayType, DataType, MapType, StructField, StructType, is_void, to_arrow_type,
)
from ..protocol.variant import from_parquet as variant_from_parquet, is_variant_type
from ..storage import resolve_data_path
from ..storage.base import LogStore

__all__ = ["ArrowFileReader", "logical_arrow_schema"]

_FIELD_ID = b"PARQUET:field_id"
SMALL_FILE_BYTES = 1 << 20     # data files up to this size are read whole, in one call


def _relax(t: pa.DataType) -> pa.DataType:
    """`t` with every nested field nullable (map keys excepted): a NOT NULL field inside a
    nullable struct, list or map is null wherever its parent is, which Arrow must be able to hold.
    A variant keeps its layout (its null slots hold empty bytes, see tahoe.protocol.variant)."""
    if is_variant_type(t):
        return t
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _relax(f.type), nullable=True, metadata=f.metadata) for f in t])
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _relax(t.value_type), nullable=True))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, pa.field(t.item_field.name, _relax(t.item_type), nullable=True))
    return t


def _out_type(dt: DataType) -> pa.DataType:
    return _relax(to_arrow_type(dt))


def logical_arrow_schema(schema: StructType, columns: Iterable[str] | None = None) -> pa.Schema:
    fields = [f for f in schema.fields if not is_void(f.type)]
    if columns is not None:
        wanted = {c.lower() for c in columns}
        fields = [f for f in fields if f.name.lower() in wanted]
    return pa.schema([pa.field(f.name, _out_type(f.type), nullable=f.nullable) for f in fields])


def _field_id_of(f: pa.Field) -> int | None:
    md = f.metadata or {}
    v = md.get(_FIELD_ID)
    return int(v) if v is not None else None


class ArrowFileReader:
    """Reads logical files of one table version. Thread-safe; one per scan."""

    def __init__(self, store: LogStore, table_root: str, schema: StructType, partition_columns: list[str],
                 mode: str = "none", columns: Iterable[str] | None = None, *, time_zone: str | None = None):
        self.store = store
        self.time_zone = time_zone   # zone-less timestamp partition values are read in it (default UTC)
        self.table_root = table_root
        self.schema = schema
        self.mode = mode
        self.partition_columns = list(partition_columns)
        pcs_lower = {p.lower() for p in self.partition_columns}
        wanted = None if columns is None else {c.lower() for c in columns}
        if wanted is not None:
            unknown = wanted - {f.name.lower() for f in schema.fields}
            if unknown:
                raise ValueError(f"unknown column(s) {sorted(unknown)}; the table has {schema.names}")
        self.out_fields = [f for f in schema.fields if not is_void(f.type)
                           and (wanted is None or f.name.lower() in wanted)]
        self.data_fields = [f for f in self.out_fields if f.name.lower() not in pcs_lower]
        self.out_schema = pa.schema([pa.field(f.name, _out_type(f.type), nullable=True) for f in self.out_fields])
        # per-file work that depends only on the file's schema (the files of a table mostly share
        # one): the column resolution of the last few file schemas seen, and each logical type's
        # Arrow type (by the identity of the schema's type objects, which live as long as it)
        self._resolved: list[tuple[pa.Schema, list, list[str], bool]] = []
        self._types: dict[int, pa.DataType] = {}

    # --- one file ------------------------------------------------------------------------------
    def read_file(self, path: str, partition_values: dict[str, str | None] | None,
                  deletion_vector: dict | DeletionVectorDescriptor | None = None, *,
                  row_index: str | None = None, extra_columns: dict[str, pa.DataType] | None = None,
                  size: int | None = None) -> pa.Table:
        """The logical rows of one data file, in one table. `row_index`: name of a column to
        append holding each row's position in the file (counted before deleted rows are dropped:
        what a deletion vector indexes). `extra_columns`: physical columns outside the table
        schema to append as they are in the file (null where the file lacks them) — the
        materialized row-tracking columns. `size`: the file's size from the log (saves asking
        an object store for it)."""
        full, pf, resolved, names = self._open(path, size)
        num_rows = pf.metadata.num_rows
        if not extra_columns and row_index is None and not deletion_vector and self._lookup(pf.schema_arrow)[2]:
            try:   # the common case: the file's columns are the logical table (no per-column work)
                t = pf.read(use_threads=False)
            except (pa.ArrowInvalid, OSError) as e:
                raise CorruptLogError(f"cannot read data file {full}: {e}") from None
            return pa.Table.from_arrays(t.columns, schema=self.out_schema)
        extras: dict[str, pa.DataType] = dict(extra_columns or {})
        present = set(pf.schema_arrow.names)
        wanted = names + [n for n in extras if n in present and n not in names]
        try:
            t = pf.read(columns=wanted, use_threads=False) if wanted else None
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptLogError(f"cannot read data file {full}: {e}") from None
        deleted = self._deleted(full, deletion_vector, num_rows)
        appended: dict[str, pa.Array] = {}
        for name, typ in extras.items():
            appended[name] = t.column(name).combine_chunks().cast(typ) if t is not None and name in present \
                else pa.nulls(num_rows, typ)
        if row_index is not None:
            appended[row_index] = pa.array(np.arange(num_rows, dtype=np.int64))
        return self._assemble(t, resolved, num_rows, path, partition_values, deleted, appended)

    def read_row_groups(self, path: str, partition_values: dict[str, str | None] | None,
                        deletion_vector: dict | DeletionVectorDescriptor | None = None,
                        row_groups: Iterable[int] | None = None) -> Iterator[pa.Table]:
        """The logical rows of one data file one parquet row group at a time (all of them, or
        `row_groups`, ascending indexes): memory stays at a row group, and a large file can be
        read by several tasks. Deletion vectors apply by the rows' positions in the file."""
        full, pf, _resolved, _names = self._open(path)
        deleted = self._deleted(full, deletion_vector, pf.metadata.num_rows)
        return self.read_parquet(pf, path, partition_values, deleted, row_groups, where=full)

    def read_parquet(self, pf: pq.ParquetFile, path: str, partition_values: dict[str, str | None] | None,
                     deleted=None, row_groups: Iterable[int] | None = None,
                     where: str | None = None, batch_rows: int | None = None) -> Iterator[pa.Table]:
        """The logical rows of an already opened data file (`pf`, from any source — e.g. bytes
        downloaded through a sharing URL), one row group at a time: `path` names it in errors,
        `deleted` is its deletion-vector mask (`deleted_mask`, or None), `row_groups` as in
        `read_row_groups`. With `batch_rows`, each row group is decoded and yielded in pieces of
        at most that many rows (memory and cache stay at a piece)."""
        where = where or path
        resolved, names = self._resolve(pf)
        md = pf.metadata
        starts = [0] * (md.num_row_groups + 1)
        for i in range(md.num_row_groups):
            starts[i + 1] = starts[i] + md.row_group(i).num_rows
        for i in (range(md.num_row_groups) if row_groups is None else row_groups):
            if not 0 <= i < md.num_row_groups:
                raise CorruptLogError(f"data file {where} has {md.num_row_groups} row groups, not a row group {i}")
            n = starts[i + 1] - starts[i]
            if batch_rows and names:
                yield from self._row_group_pieces(pf, i, names, resolved, starts[i], path, where,
                                                  partition_values, deleted, batch_rows)
                continue
            try:
                t = pf.read_row_group(i, columns=names, use_threads=False) if names else None
            except (pa.ArrowInvalid, OSError) as e:
                raise CorruptLogError(f"cannot read data file {where}: {e}") from None
            yield self._assemble(t, resolved, n, path, partition_values,
                                 None if deleted is None else deleted[starts[i]:starts[i + 1]])

    def _row_group_pieces(self, pf: pq.ParquetFile, i: int, names: list[str], resolved, start: int, path: str,
                          where: str, partition_values, deleted, batch_rows: int) -> Iterator[pa.Table]:
        """Row group `i` (its first row at `start` in the file) in pieces of <= `batch_rows` rows."""
        off = start
        try:
            for b in pf.iter_batches(batch_size=batch_rows, row_groups=[i], columns=names, use_threads=False):
                n = b.num_rows
                yield self._assemble(pa.Table.from_batches([b]), resolved, n, path, partition_values,
                                     None if deleted is None else deleted[off:off + n])
                off += n
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptLogError(f"cannot read data file {where}: {e}") from None
        expected = pf.metadata.row_group(i).num_rows
        if off - start != expected:
            raise CorruptLogError(f"data file {where}: row group {i} holds {off - start} rows, its footer says "
                                  f"{expected}")

    def row_group_bytes(self, path: str) -> list[int]:
        """The compressed size of each row group of a data file (from its footer): how a scan
        splits a large file into parts of about equal size."""
        _full, pf, _resolved, _names = self._open(path)
        md = pf.metadata
        return [sum(md.row_group(i).column(j).total_compressed_size for j in range(md.num_columns))
                for i in range(md.num_row_groups)]

    def _open(self, path: str, size: int | None = None):
        """(full path, ParquetFile, [(logical field, the file's column name for it | None)],
        the file's columns to read)."""
        full = resolve_data_path(self.table_root, path)
        try:
            source = self.store.open_input_file(full, size)
            if source.size() <= SMALL_FILE_BYTES:
                # a small file in one read: the footer and column chunks read one by one cost
                # more than the decoding (1k-row files: 40 % of the read time)
                with source:
                    source = pa.BufferReader(source.read())
            pf = pq.ParquetFile(source)
        except FileNotFoundError:
            raise DataFilesMissingError(f"data file {full} listed in the log does not exist (vacuumed, or "
                                        f"deleted outside Delta)") from None
        except (pa.ArrowInvalid, OSError) as e:
            raise CorruptLogError(f"cannot read data file {full}: {e}") from None
        resolved, names = self._resolve(pf)
        return full, pf, resolved, names

    def _resolve(self, pf: pq.ParquetFile):
        """([(logical field, the file's column name for it | None)], the file's columns to read)."""
        resolved, names, _plain = self._lookup(pf.schema_arrow)
        return resolved, names

    def _lookup(self, file_schema: pa.Schema) -> tuple[list, list[str], bool]:
        """`_resolve`'s answer for a file schema, and whether the file's columns already are the
        logical table, as is (`plain`: no column mapping, no partition columns, the same names in
        the same order, the same types)."""
        for known, resolved, names, plain in self._resolved:
            if known.equals(file_schema, check_metadata=True):
                return resolved, names, plain
        found = [(f, self._find(file_schema, f)) for f in self.data_fields]
        names = [file_schema.field(i).name for i in sorted({i for _, i in found if i is not None})]
        resolved = [(f, None if i is None else file_schema.field(i).name) for f, i in found]
        plain = (self.mode == "none" and len(self.out_fields) == len(self.data_fields) == len(file_schema)
                 and [f.name for f in file_schema] == [f.name for f in self.data_fields]
                 and all(f.type == o.type and not is_variant_type(o.type)
                         for f, o in zip(file_schema, self.out_schema)))
        self._resolved = [(file_schema, resolved, names, plain)] + self._resolved[:3]   # replaced, never mutated
        return resolved, names, plain

    def _out_type(self, dt: DataType) -> pa.DataType:
        t = self._types.get(id(dt))
        if t is None:
            t = self._types[id(dt)] = _out_type(dt)
        return t

    def _deleted(self, full: str, deletion_vector, num_rows: int):
        """The file's deleted rows as a boolean mask (None: no deletion vector)."""
        if not deletion_vector:
            return None
        dv = deletion_vector if isinstance(deletion_vector, DeletionVectorDescriptor) \
            else DeletionVectorDescriptor.from_dict(deletion_vector)
        try:
            bitmap = load_deletion_vector(dv, self.table_root, self._read_range)
        except DeletionVectorError as e:
            raise DeletionVectorError(f"deletion vector of {full}: {e}") from None
        return deleted_mask(bitmap, num_rows)

    def _assemble(self, t: pa.Table | None, resolved, num_rows: int, path: str,
                  partition_values, deleted, appended: dict[str, pa.Array] | None = None) -> pa.Table:
        """The logical table of `num_rows` rows read into `t` (the file's columns): columns
        conformed to the logical types, missing ones null, partition columns added, `appended`
        columns after them, rows marked in `deleted` dropped."""
        cols: dict[str, pa.Array] = {}
        for f, name in resolved:
            if name is None:
                cols[f.name] = pa.nulls(num_rows, self._out_type(f.type))
            else:
                arr = t.column(name)
                arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
                cols[f.name] = self._conform(arr, f.type)
        part_fields = [f for f in self.out_fields if f.name not in cols]
        if part_fields:
            try:
                typed = partition_values_to_arrow([partition_values], part_fields, self.mode,
                                                  time_zone=self.time_zone)
            except CorruptLogError as e:
                raise CorruptLogError(f"invalid partition value in {path}: {e}") from None
            for f in part_fields:
                cols[f.name] = pa.repeat(typed[f.name][0].cast(self._out_type(f.type)), num_rows)
        table = pa.table([cols[f.name] for f in self.out_fields], schema=self.out_schema) if self.out_fields \
            else pa.table({"__rows": pa.nulls(num_rows)}).drop(["__rows"])
        for name, arr in (appended or {}).items():
            table = table.append_column(name, arr)
        if deleted is not None and deleted.any():
            keep = ~deleted
            table = table.filter(pa.array(keep)) if table.num_columns else table.slice(0, int(keep.sum()))
        return table

    def _read_range(self, path: str, start: int, length: int) -> bytes:
        return self.store.read_range(path, start, length)


    # --- column resolution ---------------------------------------------------------------------
    def _find(self, file_schema_or_type, f: StructField) -> int | None:
        """Index of the file's field that holds logical field `f` (None: absent from the file)."""
        n = file_schema_or_type.num_fields if isinstance(file_schema_or_type, pa.StructType) else len(file_schema_or_type)
        fields = [file_schema_or_type.field(i) for i in range(n)]
        if self.mode == "id":
            fid = column_mapping.field_id(f)
            if fid is not None:
                for i, ff in enumerate(fields):
                    if _field_id_of(ff) == fid:
                        return i
        target = column_mapping.physical_name(f) if self.mode in ("name", "id") else f.name
        for i, ff in enumerate(fields):
            if ff.name == target:
                return i
        low = target.lower()
        for i, ff in enumerate(fields):
            if ff.name.lower() == low:
                return i
        return None

    def _conform(self, arr: pa.Array, dt: DataType) -> pa.Array:
        target = self._out_type(dt)
        if dt == VARIANT:   # unshredded or shredded (typed_value reassembled)
            return variant_from_parquet(arr)
        if isinstance(dt, StructType):
            if not pa.types.is_struct(arr.type):
                raise CorruptLogError(f"expected a struct column, the file has {arr.type}")
            children, fields = [], []
            for f in dt.fields:
                if is_void(f.type):
                    continue
                i = self._find(arr.type, f)
                ct = self._out_type(f.type)
                children.append(pa.nulls(len(arr), ct) if i is None else self._conform(_child(arr, i), f.type))
                fields.append(pa.field(f.name, ct, nullable=True))
            mask = arr.is_null() if arr.null_count else None
            return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
        if isinstance(dt, ArrayType):
            if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
                raise CorruptLogError(f"expected a list column, the file has {arr.type}")
            arr = arr.cast(pa.list_(arr.type.value_field)) if pa.types.is_large_list(arr.type) else arr
            values = self._conform(arr.values, dt.element_type)
            offsets = arr.offsets
            out = pa.ListArray.from_arrays(offsets, values, type=target, mask=arr.is_null() if arr.null_count else None)
            return out
        if isinstance(dt, MapType):
            if not pa.types.is_map(arr.type):
                raise CorruptLogError(f"expected a map column, the file has {arr.type}")
            keys = self._conform(arr.keys, dt.key_type)
            items = self._conform(arr.items, dt.value_type)
            return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target,
                                           mask=arr.is_null() if arr.null_count else None)
        if arr.type == target:
            return arr
        if pa.types.is_timestamp(target) and pa.types.is_timestamp(arr.type):
            if arr.type.tz is None and target.tz is not None:
                arr = pc.assume_timezone(arr, "UTC") if arr.type.unit else arr
            return arr.cast(target, safe=False)
        try:
            return arr.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise CorruptLogError(f"cannot read a {arr.type} column as {dt}: {e}") from None

    # --- many files ----------------------------------------------------------------------------
    def read_files(self, files: pa.Table, threads: int = 4) -> Iterator[pa.Table]:
        """Tables of the given active files (a table with path, partitionValues, deletionVector
        columns), in file order."""
        paths = files.column("path").to_pylist()
        pvs = files.column("partitionValues").to_pylist() if "partitionValues" in files.column_names else [None] * len(paths)
        dvs = files.column("deletionVector").to_pylist() if "deletionVector" in files.column_names else [None] * len(paths)
        sizes = files.column("size").to_pylist() if "size" in files.column_names else [None] * len(paths)
        jobs = [(p, dict(pv) if pv else {}, dv, sz) for p, pv, dv, sz in zip(paths, pvs, dvs, sizes)]
        if threads <= 1 or len(jobs) <= 1:
            for p, pv, dv, sz in jobs:
                yield self.read_file(p, pv, dv, size=sz)
            return
        with ThreadPoolExecutor(max_workers=threads) as ex:
            yield from ex.map(lambda j: self.read_file(j[0], j[1], j[2], size=j[3]), jobs)


def _child(arr: pa.StructArray, i: int) -> pa.Array:
    # `field(i)` ignores the parent's validity; flatten() applies it. Either works for us since the
    # parent's mask is re-applied; flatten keeps offsets right for sliced arrays.
    return arr.flatten()[i] if arr.offset else arr.field(i)

