"""`delta.parquet.compression.codec` / `delta.parquet.format.version` honoured by the Arrow writer
(and its change data files). Oracles: the written files' parquet footers (pyarrow's reader of the
footer, independent of the writer's options), delta-rs reading the files."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tahoe
from tahoe.errors import InvalidTableOperationError, UnsupportedFeatureError
from tests.write.test_writer import delta_rs_rows, same_rows


def _codecs(path: str) -> set[str]:
    out = set()
    for d, _s, files in os.walk(path):
        for f in files:
            if f.endswith(".parquet") and "_delta_log" not in d:
                md = pq.ParquetFile(os.path.join(d, f)).metadata
                out |= {md.row_group(i).column(j).compression for i in range(md.num_row_groups)
                        for j in range(md.num_columns)}
    return out


DATA = pa.table({"id": pa.array(range(100), pa.int64()), "s": [f"v{i % 7}" for i in range(100)]})


@pytest.mark.parametrize("codec, footer", [("zstd", "ZSTD"), ("gzip", "GZIP"), ("uncompressed", "UNCOMPRESSED"),
                                           (None, "SNAPPY")])
def test_codec_in_footers(tmp_path, codec, footer):
    path = str(tmp_path / "t")
    props = {"delta.parquet.compression.codec": codec} if codec else {}
    tahoe.write_table(path, DATA, properties=props)
    assert _codecs(path) == {footer}
    same_rows(DATA, delta_rs_rows([path], tmp_path)[path])


def test_codec_changed_later_and_cdc_files(tmp_path):
    path = str(tmp_path / "t")
    tahoe.write_table(path, DATA, properties={"delta.enableChangeDataFeed": "true"})
    tahoe.Table(path).set_properties({"delta.parquet.compression.codec": "zstd",
                                      "delta.parquet.format.version": "2.12.0"})
    tahoe.write_table(path, DATA, mode="append")
    tahoe.delete(path, "id < 5")
    names = [f for _d, _s, fs in os.walk(path) for f in fs if f.endswith(".parquet")]
    assert any(n.endswith(".zstd.parquet") for n in names) and any(n.endswith(".snappy.parquet") for n in names)
    cdc_dir = os.path.join(path, "_change_data")
    assert _codecs(cdc_dir) == {"ZSTD"}
    assert tahoe.Table(path).to_arrow().num_rows == 190


def test_bad_values_refused(tmp_path):
    with pytest.raises(InvalidTableOperationError, match="compression.codec"):
        tahoe.write_table(str(tmp_path / "a"), DATA, properties={"delta.parquet.compression.codec": "brotli"})
    with pytest.raises(InvalidTableOperationError, match="format.version"):
        tahoe.write_table(str(tmp_path / "b"), DATA, properties={"delta.parquet.format.version": "0.9.0"})
    with pytest.raises(UnsupportedFeatureError, match="lz4"):
        tahoe.write_table(str(tmp_path / "c"), DATA, properties={"delta.parquet.compression.codec": "lz4"})
    assert not os.path.exists(str(tmp_path / "c" / "_delta_log" / "00000000000000000000.json"))


def test_dictionary_only_where_it_pays(tmp_path):
    """A column is dictionary-encoded when at most half its values are distinct (hand-counted
    below: `city` 4 values, `bucket` 250, an all-null `note`), written plain when they are all or
    mostly distinct (`id`, `amount`, `token`); a table with a nested column keeps pyarrow's
    default for every column. Two columns need the 64k-row sample, their 4k first sample being
    neither at most half nor nearly all distinct (expected counts for n draws from k values:
    k(1 - e^(-n/k))): `mid`, 20,000 values drawn at random — ~90 % distinct in 4k rows, ~29 % in
    the 66,667-row sample (every third row): a dictionary; `many`, 50,000 values — ~96 % and
    ~55 %: plain. Oracle: the encodings in the files' footers (pyarrow's reader)."""
    import numpy as np

    n = 200_000
    rng = np.random.default_rng(11)
    data = pa.table({"id": pa.array(np.arange(n), pa.int64()),
                     "amount": pa.array(rng.random(n)),
                     "token": pa.array([f"t{i:07d}" for i in rng.permutation(n)]),
                     "city": pa.array(["Oslo", "Lima", "Pune", "Kyiv"] * (n // 4)),
                     "bucket": pa.array(np.arange(n) % 250, pa.int64()),
                     "note": pa.nulls(n, pa.string()),
                     "mid": pa.array(rng.integers(0, 20_000, n), pa.int64()),
                     "many": pa.array(rng.integers(0, 50_000, n), pa.int64())})
    path = str(tmp_path / "t")
    tahoe.write_table(path, data)

    def encodings(p):
        (f,) = [os.path.join(d, x) for d, _s, fs in os.walk(p) for x in fs if x.endswith(".parquet") and "_delta_log" not in d]
        md = pq.ParquetFile(f).metadata
        return {md.schema.column(j).name: set(md.row_group(0).column(j).encodings) for j in range(md.num_columns)}

    enc = encodings(path)
    for name in ("city", "bucket", "note", "mid"):
        assert "RLE_DICTIONARY" in enc[name] or "PLAIN_DICTIONARY" in enc[name], (name, enc[name])
    for name in ("id", "amount", "token", "many"):
        assert not enc[name] & {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}, (name, enc[name])
    same_rows(data, delta_rs_rows([path], tmp_path)[path])
    nested = str(tmp_path / "nested")
    tahoe.write_table(nested, pa.table({"id": pa.array(np.arange(1000), pa.int64()),
                                        "s": pa.array([{"a": i} for i in range(1000)])}))
    assert "RLE_DICTIONARY" in encodings(nested)["id"]      # pyarrow's default: a dictionary, then fallback
