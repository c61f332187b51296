"""The keys replay reconciles file actions by (spec "Action Reconciliation": a logical file is
its path and deletion vector), over whole path columns — expected keys derived by hand."""

from __future__ import annotations

import pyarrow as pa

from tahoe.log.file_actions import DV_TYPE, file_keys, root_uri


def test_keys_of_relative_absolute_and_uri_paths():
    root = root_uri("/tbl")
    paths = pa.array(["a.parquet", "p=10:00/b.parquet", "/tbl/c.parquet", "file:/tbl/d.parquet",
                      "file:///tbl/e.parquet", "/elsewhere/f.parquet", "s3://bucket/g.parquet", None])
    assert file_keys(paths, None, root).to_pylist() == [
        "a.parquet", "p=10:00/b.parquet",            # relative, a colon in a partition value is no scheme
        "c.parquet", "d.parquet", "e.parquet",        # under the root: relative keys
        "/elsewhere/f.parquet", "s3://bucket/g.parquet", None]


def test_keys_of_sliced_columns_look_only_at_their_rows():
    """A slice of a column (an offset into shared buffers) is keyed by its own rows: a scheme or
    absolute path outside it changes nothing, one inside it is keyed as such."""
    root = root_uri("/tbl")
    assert file_keys(pa.array(["s3://b/x", "rel/y", "rel/z"]).slice(1), None, root).to_pylist() == ["rel/y", "rel/z"]
    assert file_keys(pa.array(["rel/a", "file:/tbl/b"]).slice(0, 1), None, root).to_pylist() == ["rel/a"]
    assert file_keys(pa.array(["rel/a", "file:/tbl/b"]).slice(1), None, root).to_pylist() == ["b"]
    assert file_keys(pa.array(["rel/a", "/tbl/q/r"]).slice(1), None, root).to_pylist() == ["q/r"]
    assert file_keys(pa.array(["", "", "x"]).slice(0, 2), None, root).to_pylist() == ["", ""]


def test_keys_of_a_scheme_far_into_a_long_column():
    """A path with a scheme after megabytes of relative ones (the colon scan goes a MB at a
    time), in the first, a middle and the last place of a sliced column."""
    root = root_uri("/tbl")
    rel = [f"p={i % 7}/part-{i:08d}-0123456789abcdef.parquet" for i in range(60_000)]   # ~2.6 MB
    for at in (0, 31_234, len(rel) - 1):
        paths = list(rel)
        paths[at] = "file:/tbl/x.parquet"      # under the root: keyed relative
        got = file_keys(pa.array(["s3://b/outside"] + paths).slice(1), None, root).to_pylist()
        assert got == rel[:at] + ["x.parquet"] + rel[at + 1:]
    assert file_keys(pa.array(rel), None, root).to_pylist() == rel


def test_keys_carry_the_deletion_vector_id():
    dvs = pa.array([{"storageType": "u", "pathOrInlineDv": "ab^cd", "offset": 1, "sizeInBytes": 40,
                     "cardinality": 2}, None,
                    {"storageType": "i", "pathOrInlineDv": "wi5b", "offset": None, "sizeInBytes": 8,
                     "cardinality": 1}], DV_TYPE)
    got = file_keys(pa.array(["a", "b", "c"]), dvs, root_uri("/tbl")).to_pylist()
    assert got == ["a\x00uab^cd@1", "b", "c\x00iwi5b"]


def test_all_distinct_is_exact():
    import numpy as np
    import pyarrow as pa

    from tahoe.log.arrow_build import all_distinct

    paths = [f"day=2024-01-{d:02d}/part-00000-{u:08x}.c000.snappy.parquet" for d in range(1, 29) for u in range(300)]
    assert all_distinct(pa.array(paths))
    # the same file name in two partitions, one repeated path, long and short strings, nulls
    assert not all_distinct(pa.chunked_array([pa.array(paths[:5000]), pa.array(paths[4999:])]))
    assert all_distinct(pa.chunked_array([pa.array(paths[:5000]), pa.array(paths[5000:])]))
    assert not all_distinct(pa.array(["a", "b", "a"])) and all_distinct(pa.array(["a", "b", "c"]))
    assert not all_distinct(pa.array(["x" * 100 + "y", "x" * 100 + "y"]))
    assert all_distinct(pa.array(["x" * 100 + "y", "x" * 100 + "z", "x" * 101]))
    assert not all_distinct(pa.array([None, "abcdefghij", None]))
    assert all_distinct(pa.array([], pa.string())) and all_distinct(pa.chunked_array([], pa.string()))
    # every pair of a random set of equal-length strings that differ in one byte anywhere
    rng = np.random.default_rng(3)
    base = "".join(rng.choice(list("abcdef"), 64))
    variants = sorted({base[:i] + c + base[i + 1:] for i in range(64) for c in "abcdef"})
    assert all_distinct(pa.array(variants)) and not all_distinct(pa.array(variants + [variants[17]]))
    # sliced arrays look only at their own values
    arr = pa.array(["dup-dup-dup", "one-one-one", "two-two-two", "dup-dup-dup"])
    assert all_distinct(arr.slice(0, 3)) and all_distinct(arr.slice(1, 3)) and not all_distinct(arr)
    # equal values in chunks of different widths (a value's digest is its own)
    assert not all_distinct(pa.chunked_array([pa.array(["p" * 74, "q" * 9]), pa.array(["r" * 98, "p" * 74])]))
    # a chunk of one width (its values read at a fixed stride) against one of several widths
    for w in (72, 74):
        one_width = pa.array(["p" * w, "s" * w, "t" * (w - 1) + "u"])
        assert not all_distinct(pa.chunked_array([one_width, pa.array(["r" * 98, "p" * w])]))
        assert not all_distinct(pa.chunked_array([pa.array(["r" * 98, "t" * (w - 1) + "u"]), one_width.slice(1)]))
        assert all_distinct(pa.chunked_array([one_width, pa.array(["r" * 98, "p" * (w - 1) + "q"])]))


def test_null_columns_share_no_writable_memory():
    import numpy as np
    import pyarrow as pa

    from tahoe.log.arrow_build import null_array
    from tahoe.log.file_actions import ADD_SCHEMA

    for f in ADD_SCHEMA:
        a = null_array(f.type, 50_000)
        a.validate(full=True)
        assert a.equals(pa.nulls(50_000, f.type)) and a.slice(7, 3).to_pylist() == [None] * 3, f.name
        for b in a.buffers():     # the shared zeros (a map's empty entries have small buffers of their own)
            assert b is None or b.size < 50_000 // 8 or not b.is_mutable
    import pytest

    with pytest.raises(ValueError):
        np.frombuffer(null_array(pa.int64(), 10).buffers()[1], np.int64)[0] = 1   # read-only
