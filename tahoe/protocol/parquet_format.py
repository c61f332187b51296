"""How data files are written, from the table properties (spec "Parquet Compression Codec";
delta-spark's `delta.parquet.format.version`), for every writer. The properties are read by
`tahoe.protocol.properties.parquet_write_options(conf)`, which gives a `ParquetWriteOptions`:

  * `delta.parquet.compression.codec` — `uncompressed`, `snappy`, `gzip`, `lz4` (deprecated: the
    Hadoop LZ4 framing) or `zstd`; absent → `snappy`, as the spec recommends and delta-spark does;
  * `delta.parquet.format.version` — a 3-part version resolved as delta-spark resolves it: the
    highest known format version not above it (`1.0.0` → Parquet writer version 1: data page V1;
    `2.12.0` and above → writer version 2: data page V2 and the V2 encodings); absent → `1.0.0`.
    Below `1.0.0`, or not a 3-part version → invalid.

`ParquetWriteOptions` is the choice; `pyarrow_kwargs()` the arguments of
`pyarrow.parquet.write_table`, `spark_options()` the options of Spark's parquet writer, and
`file_suffix` the codec part of a data file name (`part-...-c000.zstd.parquet`), as Spark names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import UnsupportedFeatureError

__all__ = ["DEFAULT_CODEC", "CODECS", "FORMAT_VERSIONS", "resolve_format_version", "ParquetWriteOptions"]

DEFAULT_CODEC = "snappy"
CODECS = ("uncompressed", "snappy", "gzip", "lz4", "zstd")
# known format versions, ascending, with the Parquet writer version each means
FORMAT_VERSIONS: tuple[tuple[tuple[int, int, int], int], ...] = (((1, 0, 0), 1), ((2, 12, 0), 2))
_SEMVER = re.compile(r"^\s*(\d+)\.(\d+)\.(\d+)\s*$")


def resolve_format_version(text: str) -> tuple[int, int, int]:
    """The known format version a `delta.parquet.format.version` value stands for (the highest
    one not above it); ValueError when it is not a 3-part version or below every known one."""
    m = _SEMVER.match(text or "")
    if not m:
        raise ValueError(f"invalid Parquet version string '{text}': expected MAJOR.MINOR.PATCH, e.g. 1.0.0 or 2.12.0")
    target = tuple(int(g) for g in m.groups())
    for v, _writer in reversed(FORMAT_VERSIONS):
        if v <= target:
            return v
    raise ValueError(f"no Parquet format version <= {text}; known versions: "
                     f"{', '.join('.'.join(map(str, v)) for v, _ in FORMAT_VERSIONS)}")


@dataclass(frozen=True)
class ParquetWriteOptions:
    codec: str = DEFAULT_CODEC
    writer_version: int = 1       # Parquet writer version: 1 (data page V1) or 2 (data page V2)
    variant_shredding: bool = False   # delta.enableVariantShredding: writers may shred variants

    @property
    def file_suffix(self) -> str:
        """The codec part of a data file's name, as Spark writes it (`.snappy.parquet`,
        `.zstd.parquet`, `.gz.parquet`, `.lz4hadoop.parquet`; none when uncompressed)."""
        return {"uncompressed": "", "snappy": ".snappy", "gzip": ".gz", "lz4": ".lz4hadoop",
                "zstd": ".zstd"}[self.codec]

    def pyarrow_kwargs(self) -> dict:
        """Arguments of `pyarrow.parquet.write_table` / `ParquetWriter`. pyarrow cannot write the
        deprecated Hadoop-framed `lz4` (its `lz4` is LZ4_RAW, another codec): refused by name, as
        the spec allows a writer to."""
        if self.codec == "lz4":
            raise UnsupportedFeatureError(
                "delta.parquet.compression.codec=lz4 (the deprecated Hadoop LZ4 framing) cannot be written by the Arrow "
                "writer; use zstd, snappy, gzip or uncompressed (Spark's writer supports lz4)")
        codec = {"uncompressed": "none"}.get(self.codec, self.codec)
        return {"compression": codec, "data_page_version": "2.0" if self.writer_version == 2 else "1.0"}

    def spark_options(self) -> dict[str, str]:
        """Options of Spark's parquet writer (`df.write.options(...)`; `parquet.writer.version`
        reaches parquet-mr through the write's Hadoop configuration). Spark (4.1+) shreds variant
        columns by default; the spec allows it only with `delta.enableVariantShredding=true`, so
        the write's `spark.sql.variant.inferShreddingSchema` follows the property (as delta-spark
        passes it)."""
        return {"compression": {"uncompressed": "none"}.get(self.codec, self.codec),
                "parquet.writer.version": "PARQUET_2_0" if self.writer_version == 2 else "PARQUET_1_0",
                "spark.sql.variant.inferShreddingSchema": "true" if self.variant_shredding else "false"}
