"""Every conformance table through the log core and the Spark-free reader."""

from __future__ import annotations

import json

import pytest

from tahoe import DeltaLog, Table
from tahoe.errors import CorruptLogError, DeltaError
from tahoe.protocol.table_features import reader_features_of
from tests.conftest import GOLDEN, assert_rows_equal, manifest_params, read_expected
from tests.fixtures.conformance_oracle import expected_error, expected_files, expected_schema


@pytest.mark.parametrize("entry", manifest_params())
def test_conformance_table(entry):
    """Oracles: the manifest (version, protocol, partition columns, expected rows), delta-rs (active
    files with sizes, schema) or, where delta-rs is no oracle, files read off the log by hand; for
    the error tables, the error the manifest's note names."""
    path = str(GOLDEN / entry["table"])
    if entry["expect"] == "error":
        cls, pattern = expected_error(entry)
        with pytest.raises(cls, match=pattern):
            Table(path).to_arrow()
        return
    t = Table(path)
    assert t.version == entry["latest_version"]
    p = entry["protocol"]
    assert t.protocol.min_reader_version == p["minReaderVersion"]
    assert t.protocol.min_writer_version == p["minWriterVersion"]
    if p["readerFeatures"] is not None:
        assert reader_features_of(t.protocol) == set(p["readerFeatures"]) or \
            {f.lower() for f in reader_features_of(t.protocol)} == {f.lower() for f in p["readerFeatures"]}
    files = t.files(["path", "size"])
    assert dict(zip(files.column("path").to_pylist(), files.column("size").to_pylist())) == expected_files(entry)
    assert files.num_rows == t.snapshot.num_files
    schema = expected_schema(entry)
    if entry["partition_columns"] is None:
        # a hand-written log with no metaData: it loads, but anything needing the schema says why not
        assert schema is None
        with pytest.raises(CorruptLogError, match="no metaData"):
            t.schema
    elif t.metadata.schema_string is None:
        assert schema is None
        assert t.partition_columns == entry["partition_columns"]
        with pytest.raises(CorruptLogError, match="no schemaString"):
            t.schema
    else:
        assert t.partition_columns == entry["partition_columns"]
        assert json.loads(t.schema.to_json()) == schema
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
