"""Parquet writer settings set around an operation (deltalake's `WriterProperties` and
`target_file_size`), used by every data file the operation writes (`tahoe.write.files`).

  1. `ParquetTuning`: codec and level, page and row group limits, and per column (leaf path)
     dictionary, statistics level, encoding and bloom filter — as pyarrow `ParquetWriter` arguments.
  2. `target_file_bytes`: files rolled at about that many bytes of unencoded (Arrow) data, as
     delta-rs estimates a file's size; `table_target`: else the table's `delta.targetFileSize`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from contextvars import ContextVar
from typing import Any, Iterator

import pyarrow as pa

from ..protocol.properties import parse_size, text_property

__all__ = ["ColumnTuning", "ParquetTuning", "WriteSettings", "write_settings", "current_write_settings",
           "leaf_paths"]

# pyarrow codec name -> the codec part of a data file's name (Spark's names)
_SUFFIX = {"none": "", "snappy": ".snappy", "gzip": ".gz", "brotli": ".br", "zstd": ".zstd", "lz4_raw": ".lz4raw"}
STATISTICS_LEVELS = ("NONE", "CHUNK", "PAGE")


@dataclasses.dataclass(frozen=True)
class ColumnTuning:
    dictionary: bool | None = None
    statistics: str | None = None        # NONE / CHUNK / PAGE (None: PAGE, the Rust writer's default)
    encoding: str | None = None          # the encoding when not dictionary-encoded
    bloom: dict | None = None            # {"ndv": int, "fpp": float}: a bloom filter


@dataclasses.dataclass(frozen=True)
class ParquetTuning:
    codec: str = "none"                  # pyarrow's codec name
    level: int | None = None
    data_page_size: int | None = None
    dictionary_page_size: int | None = None
    page_rows: int | None = None
    write_batch_size: int | None = None
    row_group_rows: int | None = None
    default: ColumnTuning = ColumnTuning()
    columns: dict[str, ColumnTuning] = dataclasses.field(default_factory=dict)

    @property
    def file_suffix(self) -> str:
        return _SUFFIX[self.codec]

    def column(self, leaf: str, names: dict[str, str]) -> ColumnTuning:
        """The settings of a physical leaf path: the default's, overridden field by field by those
        given for the column (by its logical path, or a parent of it)."""
        logical = names.get(leaf, leaf)
        out = self.default
        for path, col in self.columns.items():
            if logical == path or logical.startswith(path + "."):
                out = dataclasses.replace(out, **{f.name: getattr(col, f.name) for f in dataclasses.fields(col)
                                                  if getattr(col, f.name) is not None})
        return out

    def pyarrow_kwargs(self, table: pa.Table, names: dict[str, str]) -> dict[str, Any]:
        """`pyarrow.parquet.write_table` arguments for `table` (physical columns; `names`: physical
        leaf path -> logical leaf path). As the Rust writer's defaults: a column is dictionary-encoded
        unless given an encoding (pyarrow too falls back to plain past the dictionary page limit),
        with page statistics (a page index)."""
        leaves = leaf_paths(table.schema)
        use_dict, stats, encodings, blooms = [], [], {}, {}
        page_index = False
        for leaf in leaves:
            col = self.column(leaf, names)
            on = col.dictionary if col.dictionary is not None else col.encoding is None
            if on:
                use_dict.append(leaf)
            elif col.encoding is not None:
                encodings[leaf] = col.encoding
            level = col.statistics or "PAGE"
            if level != "NONE":
                stats.append(leaf)
            page_index = page_index or level == "PAGE"
            if col.bloom is not None:
                blooms[leaf] = dict(col.bloom)
        kw: dict[str, Any] = {"compression": self.codec, "use_dictionary": use_dict, "write_statistics": stats,
                              "write_page_index": page_index}
        if self.level is not None:
            kw["compression_level"] = self.level
        for key, value in (("data_page_size", self.data_page_size), ("dictionary_pagesize_limit",
                           self.dictionary_page_size), ("max_rows_per_page", self.page_rows),
                           ("write_batch_size", self.write_batch_size), ("row_group_size", self.row_group_rows)):
            if value is not None:
                kw[key] = value
        if encodings:
            kw["column_encoding"] = encodings
        if blooms:
            kw["bloom_filter_options"] = blooms
        return kw


def leaf_paths(schema: pa.Schema) -> list[str]:
    """The parquet column paths of an Arrow schema's leaves (`s.x`, `l.list.element`,
    `m.key_value.key`), as pyarrow's per-column writer options name them."""
    out: list[str] = []

    def walk(prefix: str, t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(f"{prefix}.{t.field(i).name}", t.field(i).type)
        elif pa.types.is_map(t):
            walk(f"{prefix}.key_value.key", t.key_type)
            walk(f"{prefix}.key_value.value", t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(f"{prefix}.list.element", t.value_type)
        else:
            out.append(prefix)
    for f in schema:
        walk(f.name, f.type.storage_type if isinstance(f.type, pa.BaseExtensionType) else f.type)
    return out


@dataclasses.dataclass(frozen=True)
class WriteSettings:
    tuning: ParquetTuning | None = None
    target_file_bytes: int | None = None
    table_target: bool = False

    def file_bytes(self, configuration: dict | None) -> int | None:
        """The target size of a data file, or None (tahoe's row count decides)."""
        if self.target_file_bytes is not None:
            return self.target_file_bytes
        text = text_property(configuration or {}, "delta.targetFileSize") if self.table_target else None
        return parse_size(text) if text is not None else None


_CURRENT: ContextVar[WriteSettings | None] = ContextVar("tahoe_write_settings", default=None)


@contextlib.contextmanager
def write_settings(tuning: ParquetTuning | None = None, target_file_bytes: int | None = None,
                   table_target: bool = False) -> Iterator[WriteSettings]:
    """The settings for every data file written inside the block (this thread / task)."""
    if target_file_bytes is not None and (not isinstance(target_file_bytes, int) or target_file_bytes < 1):
        raise ValueError(f"target_file_size must be a positive number of bytes, not {target_file_bytes!r}")
    settings = WriteSettings(tuning, target_file_bytes, table_target)
    token = _CURRENT.set(settings)
    try:
        yield settings
    finally:
        _CURRENT.reset(token)


def current_write_settings() -> WriteSettings | None:
    return _CURRENT.get()
