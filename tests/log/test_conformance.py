"""Every conformance table through the log core and the Spark-free reader."""

from __future__ import annotations

import pytest

from tahoe import DeltaLog, Table
from tahoe.errors import CorruptLogError, DeltaError
from tahoe.protocol.table_features import reader_features_of
from tests.conftest import GOLDEN, assert_rows_equal, manifest_params, read_expected


@pytest.mark.parametrize("entry", manifest_params())
def test_conformance_table(entry):
    path = str(GOLDEN / entry["table"])
    if entry["expect"] == "error":
        with pytest.raises(DeltaError) as ei:
            Table(path).to_arrow()
        assert str(ei.value), "the error must say what is wrong"
        return
    t = Table(path)
    assert t.version == entry["latest_version"]
    p = entry["protocol"]
    assert t.protocol.min_reader_version == p["minReaderVersion"]
    assert t.protocol.min_writer_version == p["minWriterVersion"]
    if p["readerFeatures"] is not None:
        assert reader_features_of(t.protocol) == set(p["readerFeatures"]) or \
            {f.lower() for f in reader_features_of(t.protocol)} == {f.lower() for f in p["readerFeatures"]}
    files = t.files()
    if entry["partition_columns"] is None:
        # a hand-written log with no metaData: it loads, but anything needing the schema says why not
        with pytest.raises(CorruptLogError, match="no metaData"):
            t.schema
    elif t.metadata.schema_string is None:
        assert t.partition_columns == entry["partition_columns"]
        with pytest.raises(CorruptLogError, match="no schemaString"):
            t.schema
    else:
        assert t.partition_columns == entry["partition_columns"]
        assert len(t.schema.fields) > 0
    assert files.num_rows == t.snapshot.num_files
    if entry["expect"] == "rows":
        assert_rows_equal(t.to_arrow(), read_expected(entry), entry["name"])


@pytest.mark.conformance
def test_every_version_of_every_table_loads():
    """Time travel: each version still reconstructable from the log loads (or fails with a DeltaError
    for the negative tables)."""
    from tests.conftest import MANIFEST

    for entry in MANIFEST:
        if entry["expect"] == "error":
            continue
        log = DeltaLog.for_table(str(GOLDEN / entry["table"]))
        for v in range(entry["latest_version"] + 1):
            try:
                snap = log.snapshot(version=v)
            except DeltaError as e:
                # versions before the earliest checkpoint of a log whose commits were cleaned up
                assert "cannot reconstruct" in str(e) or "no protocol" in str(e), (entry["name"], v, e)
                continue
            assert snap.version == v
