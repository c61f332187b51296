"""A table version as a `pyarrow.dataset.Dataset` (deltalake's `DeltaTable.to_pyarrow_dataset`):
one parquet fragment per active file, its partition values as the fragment's partition
expression, the table's schema as the dataset's.

  1. What a pyarrow dataset cannot express is refused with deltalake's DeltaProtocolError (tahoe's
     UnsupportedFeatureError): deletion vectors and column mapping (pyarrow would show deleted
     rows / physical column names), and reader features whose files pyarrow would misread.
  2. Files are read through the table's own store (`tahoe.storage.arrow_fs`), or through the
     pyarrow file system given, rooted at the table (relative paths, as deltalake does).
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pa_fs

from ..errors import UnsupportedFeatureError
from ..protocol.partition_values import parse_partition_value
from ..protocol.schema import StructType
from ..storage import resolve_data_path
from ..storage.arrow_fs import arrow_filesystem

__all__ = ["to_pyarrow_dataset", "check_dataset_readable"]

# reader features whose tables a plain parquet dataset reads correctly
DATASET_READER_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "checkpointProtection"}


def check_dataset_readable(protocol: Any) -> None:
    """UnsupportedFeatureError (deltalake's DeltaProtocolError) for what a dataset cannot express."""
    features = set(protocol.reader_features or ())
    for name in ("columnMapping", "deletionVectors"):
        if name in features:
            raise UnsupportedFeatureError(
                f"The table requires reader feature '{name}' but this is not supported using pyarrow Datasets.")
    if protocol.min_reader_version == 2:
        raise UnsupportedFeatureError(
            "The table requires reader feature 'columnMapping' but this is not supported using pyarrow Datasets.")
    missing = features - DATASET_READER_FEATURES
    if missing:
        raise UnsupportedFeatureError(f"The table has set these reader features: {sorted(missing)} but these are "
                                      f"not supported using pyarrow Datasets (read it with to_pyarrow_table)")


def to_pyarrow_dataset(snapshot: Any, files: pa.Table, filesystem: Any = None,
                       parquet_read_options: Any = None, schema: pa.Schema | None = None,
                       as_large_types: bool = False) -> ds.FileSystemDataset:
    """The dataset of `files` (rows of the snapshot's add actions: path, partitionValues)."""
    check_dataset_readable(snapshot.protocol)
    table_schema: StructType = snapshot.schema
    if schema is None:
        schema = table_schema.to_arrow(as_large_types=as_large_types)
    fmt = ds.ParquetFileFormat(read_options=parquet_read_options,
                               default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))
    to_path: Callable[[str], str]
    if filesystem is None:
        filesystem, fs_path = arrow_filesystem(snapshot.store)
        root = snapshot.table_root
        to_path = lambda p: fs_path(resolve_data_path(root, p))   # noqa: E731
    else:
        if isinstance(filesystem, str):
            filesystem, _ = pa_fs.FileSystem.from_uri(filesystem)
        to_path = _relative
    pcols = [table_schema.field(c) for c in snapshot.partition_columns]
    fragments = []
    for path, pv in zip(files.column("path").to_pylist(), files.column("partitionValues").to_pylist()):
        values = dict(pv or [])
        expr = None
        for f in pcols:
            v = parse_partition_value(values.get(f.name), f.type)
            field_type = schema.field(f.name).type
            term = ds.field(f.name).is_null() if v is None else ds.field(f.name) == pa.scalar(v, field_type)
            expr = term if expr is None else expr & term
        fragments.append(fmt.make_fragment(to_path(path), filesystem=filesystem, partition_expression=expr))
    dictionary_columns = fmt.read_options.dictionary_columns or set()
    for i, f in enumerate(schema):
        if f.name in dictionary_columns:
            schema = schema.set(i, f.with_type(pa.dictionary(pa.int32(), f.type)))
    return ds.FileSystemDataset(fragments, schema, fmt, filesystem)


def _relative(path: str) -> str:
    if "://" in path or path.startswith(("/", "file:")):
        raise UnsupportedFeatureError(f"the table names a file outside its directory ({path}): give no `filesystem` "
                                      f"to to_pyarrow_dataset so that tahoe resolves it")
    return unquote(path)
