"""Floors measured beside tahoe in the benchmarks: the least any implementation of the same
read can cost on this Spark, built from Spark's and pyarrow's own parts with nothing of tahoe's.

  - `python_floor_source(paths, schema, constants)`: a minimal Python data source (PySpark's
    `DataSource` API, which a jar-free reader of files the JVM cannot open must use) reading local
    files with pyarrow and yielding its record batches as they come, packed into ~128 MB input
    partitions as `spark.read.parquet` packs them. Used by bench/sharing (`format("deltaSharing")`)
    and bench/spark_scan_write (the data-source path of `format("delta")`).
  - `row_index_floor(spark, files, schema, base_path, modulus)`: `spark.read.parquet` of the files
    with the row index Spark's parquet reader fills (`_tmp_metadata_row_index`) and a per-row
    filter on it dropping one row in `modulus` — the least a deletion-vector scan on Spark does
    (produce each row's index, test it, drop the deleted), with no file lookup and no bitmap.
"""

from __future__ import annotations

import os

ROW_INDEX = "_tmp_metadata_row_index"


def python_floor_source(paths: list[str], schema=None, constants: dict | None = None):
    """The floor data source class (register it with `spark.dataSource.register`; its name is
    `benchPythonFloor`). `schema`: the Spark schema of the rows (default: the sharing bench's
    id / value / name). `constants`: per path, {column: value} appended to each of its batches
    (partition values taken from the file's directory). Defined in a function so that Spark's
    workers receive it by value."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    if schema is None:
        schema = StructType([StructField("id", LongType()), StructField("value", DoubleType()),
                             StructField("name", StringType())])
    constants = dict(constants or {})

    class _Part(InputPartition):
        def __init__(self, files):
            super().__init__(None)
            self.files = files

    class _Reader(DataSourceReader):
        def __init__(self, schema_json):
            self.schema_json = schema_json

        def partitions(self):
            parts, cur, size = [], [], 0
            for p in sorted(paths, key=lambda p: -os.path.getsize(p)):
                s = os.path.getsize(p)
                if cur and size + s > 128 << 20:
                    parts.append(_Part(cur))
                    cur, size = [], 0
                cur.append(p)
                size += s + (4 << 20)
            return parts + ([_Part(cur)] if cur else [])

        def read(self, part):
            import json as _json

            import pyarrow as _pa
            import pyarrow.parquet as _pq
            from pyspark.sql.pandas.types import to_arrow_schema
            from pyspark.sql.types import StructType as _ST

            target = to_arrow_schema(_ST.fromJson(_json.loads(self.schema_json)), timezone="UTC")
            for p in part.files:
                extra = constants.get(p, {})
                names = [n for n in target.names if n not in extra]
                read_as = _pa.schema([target.field(n) for n in names])
                for b in _pq.ParquetFile(p).iter_batches(batch_size=1 << 17, columns=names):
                    b = b.select(names).cast(read_as)
                    if extra:
                        cols = {n: b.column(n) for n in names}
                        cols.update({n: _pa.array([v] * b.num_rows, target.field(n).type) for n, v in extra.items()})
                        b = _pa.RecordBatch.from_arrays([cols[n] for n in target.names], schema=target)
                    yield b

    class _Floor(DataSource):
        @classmethod
        def name(cls):
            return "benchPythonFloor"

        def schema(self):
            return schema

        def reader(self, schema):
            return _Reader(schema.json())

    return _Floor


def row_index_floor(spark, files: list[str], schema, base_path: str | None = None, modulus: int = 10):
    """`spark.read.parquet(files)` (with `schema` plus the row index column; `base_path` for
    partition discovery) keeping the rows whose index in their file is not a multiple of
    `modulus` — 1 / modulus of the rows dropped by a per-row test of the row index."""
    from pyspark.sql.types import LongType, StructField, StructType

    reader = spark.read.schema(StructType(list(schema.fields) + [StructField(ROW_INDEX, LongType(), True)]))
    if base_path is not None:
        reader = reader.option("basePath", base_path)
    return reader.parquet(*files).filter(f"`{ROW_INDEX}` % {modulus} != 0").drop(ROW_INDEX)
