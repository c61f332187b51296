"""Table features: legacy versions, reader/writer checks, choosing and upgrading protocols."""

from __future__ import annotations

import pytest

from tahoe.errors import UnsupportedFeatureError
from tahoe.protocol.actions import Protocol
from tahoe.protocol.table_features import (
    canonical_feature_name, check_readable, check_writable, implied_features, merge_protocols,
    protocol_for_features, reader_features_of, writer_features_of,
)


def test_legacy_versions_imply_features():
    assert implied_features(1, 2) == {"appendOnly", "invariants"}
    assert implied_features(1, 4) == {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}
    assert "columnMapping" in implied_features(2, 5)
    assert "columnMapping" not in implied_features(1, 5)
    assert "identityColumns" in implied_features(2, 6)
    assert reader_features_of(Protocol(2, 5)) == {"columnMapping"}


def test_old_spellings_are_accepted():
    assert canonical_feature_name("timestampNTZ") == "timestampNtz"
    assert canonical_feature_name("rowIds") == "rowTracking"
    check_readable(Protocol(3, 7, ("timestampNTZ",), ("timestampNTZ",)))


def test_unsupported_reader_version_and_feature_are_named():
    with pytest.raises(UnsupportedFeatureError, match="reader version 99"):
        check_readable(Protocol(99, 7, (), ()))
    with pytest.raises(UnsupportedFeatureError, match=r"\[DELTA_UNSUPPORTED_FEATURES_FOR_READ\] Unable to read this table .*futureThing"):
        check_readable(Protocol(3, 7, ("futureThing",), ("futureThing",)))
    with pytest.raises(UnsupportedFeatureError, match="no readerFeatures"):
        check_readable(Protocol(3, 7, None, ()))
    with pytest.raises(UnsupportedFeatureError, match=r"\[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE\] Unable to write this table because it requires writer table feature.*futureWriter"):
        check_writable(Protocol(1, 7, None, ("futureWriter",)))
    with pytest.raises(UnsupportedFeatureError, match="writer version 8"):
        check_writable(Protocol(1, 8))


def test_lowest_protocol_for_features():
    assert protocol_for_features([]) == Protocol(1, 2)
    assert protocol_for_features(["changeDataFeed"]) == Protocol(1, 4)
    assert protocol_for_features(["columnMapping"]) == Protocol(2, 5)
    # 002's example: CDF (legacy 1/4), then deletion vectors → 3/7 keeping the 1/4 bundle
    p = protocol_for_features(["changeDataFeed", "deletionVectors"])
    assert (p.min_reader_version, p.min_writer_version) == (3, 7)
    assert set(p.reader_features) == {"deletionVectors"}
    assert set(p.writer_features) == {"appendOnly", "invariants", "checkConstraints", "changeDataFeed",
                                      "generatedColumns", "deletionVectors"}
    # a writer-only table feature needs no reader features
    p = protocol_for_features(["domainMetadata"])
    assert (p.min_reader_version, p.min_writer_version, p.reader_features) == (1, 7, None)
    assert set(p.writer_features) == {"appendOnly", "invariants", "domainMetadata"}
    # rowTracking requires domainMetadata
    assert "domainMetadata" in protocol_for_features(["rowTracking"]).writer_features
    with pytest.raises(UnsupportedFeatureError, match="unknown table feature 'nope'"):
        protocol_for_features(["nope"])


def test_upgrades_never_remove_features():
    p = Protocol(1, 4)
    q = merge_protocols(p, ["deletionVectors"])
    assert q.min_reader_version == 3 and q.min_writer_version == 7
    assert writer_features_of(p) <= writer_features_of(q)
    assert merge_protocols(q, ["changeDataFeed"]) is q
    r = merge_protocols(Protocol(2, 5), ["identityColumns"])
    assert (r.min_reader_version, r.min_writer_version) == (2, 6)
