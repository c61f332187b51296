"""Table features (spec "Table Features", "Valid Feature Names"; seed 002 "Table Features"):
the registry of features, the legacy protocol versions each is bundled with, and the checks a
client makes before it reads or writes a table.

Names: current delta-spark/delta-rs spell features as written here (`timestampNtz`, `rowTracking`);
older drafts of the spec spell them `timestampNTZ` and `rowIds`. Reading accepts both spellings
(`canonical_feature_name`), writing uses the current one.

A legacy protocol (reader < 3, writer < 7) implies the features bundled up to its versions
(`implied_features`); a reader-3 / writer-7 protocol lists them explicitly. `Protocol` objects are
never mutated: `protocol_for_features` and `merge_protocols` build new ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..errors import UnsupportedFeatureError
from .actions import Protocol

__all__ = [
    "Feature", "FEATURES", "canonical_feature_name", "implied_features", "reader_features_of",
    "writer_features_of", "check_readable", "check_writable", "protocol_for_features",
    "merge_protocols", "is_feature_supported", "SUPPORTED_READER_FEATURES",
    "SUPPORTED_WRITER_FEATURES", "MAX_READER_VERSION", "MAX_WRITER_VERSION",
]

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7


@dataclass(frozen=True)
class Feature:
    name: str
    reader_writer: bool           # True: listed in readerFeatures and writerFeatures
    legacy_reader: int            # min legacy reader version that bundles it (3 = table features only)
    legacy_writer: int            # min legacy writer version that bundles it (7 = table features only)
    requires: tuple[str, ...] = ()
    property_enables: tuple[tuple[str, str], ...] = ()  # metadata properties that turn it on


FEATURES: dict[str, Feature] = {f.name: f for f in [
    Feature("appendOnly", False, 1, 2, property_enables=(("delta.appendOnly", "true"),)),
    Feature("invariants", False, 1, 2),
    Feature("checkConstraints", False, 1, 3),
    Feature("changeDataFeed", False, 1, 4, property_enables=(("delta.enableChangeDataFeed", "true"),)),
    Feature("generatedColumns", False, 1, 4),
    Feature("columnMapping", True, 2, 5,
            property_enables=(("delta.columnMapping.mode", "name"), ("delta.columnMapping.mode", "id"))),
    Feature("identityColumns", False, 1, 6),
    Feature("deletionVectors", True, 3, 7, property_enables=(("delta.enableDeletionVectors", "true"),)),
    Feature("timestampNtz", True, 3, 7),
    Feature("domainMetadata", False, 1, 7),
    Feature("rowTracking", False, 1, 7, requires=("domainMetadata",),
            property_enables=(("delta.enableRowTracking", "true"),)),
    Feature("v2Checkpoint", True, 3, 7, property_enables=(("delta.checkpointPolicy", "v2"),)),
    Feature("inCommitTimestamp", False, 1, 7,
            property_enables=(("delta.enableInCommitTimestamps", "true"),)),
    Feature("vacuumProtocolCheck", True, 3, 7),
    Feature("typeWidening", True, 3, 7, property_enables=(("delta.enableTypeWidening", "true"),)),
    Feature("typeWidening-preview", True, 3, 7),
    Feature("checkpointProtection", False, 1, 7),
    Feature("clustering", False, 1, 7, requires=("domainMetadata",)),
    Feature("allowColumnDefaults", False, 1, 7),
    Feature("variantType", True, 3, 7),
    Feature("variantType-preview", True, 3, 7),
    Feature("variantShredding", True, 3, 7, requires=("variantType",),
            property_enables=(("delta.enableVariantShredding", "true"),)),
    Feature("variantShredding-preview", True, 3, 7),
    Feature("geospatial", True, 3, 7),
    Feature("geospatial-dev", True, 3, 7),
    Feature("icebergCompatV1", False, 1, 7, requires=("columnMapping",),
            property_enables=(("delta.enableIcebergCompatV1", "true"),)),
    Feature("icebergCompatV2", False, 1, 7, requires=("columnMapping",),
            property_enables=(("delta.enableIcebergCompatV2", "true"),)),
]}

# Spellings of older drafts / other writers → the canonical name.
_ALIASES = {
    "timestampntz": "timestampNtz",
    "rowids": "rowTracking",
}

# What this client implements. Reading: every feature in the registry (each one's reader
# requirements are honoured by the log core and the readers). Writing: the writer side lives in
# tahoe.txn, which narrows this set to what it enforces.
SUPPORTED_READER_FEATURES: frozenset[str] = frozenset(n for n, f in FEATURES.items() if f.reader_writer)
SUPPORTED_WRITER_FEATURES: frozenset[str] = frozenset(FEATURES)


def canonical_feature_name(name: str) -> str:
    if name in FEATURES:
        return name
    lowered = name.lower()
    if lowered in _ALIASES:
        return _ALIASES[lowered]
    for n in FEATURES:
        if n.lower() == lowered:
            return n
    return name


def implied_features(min_reader_version: int, min_writer_version: int) -> set[str]:
    """Features bundled with a legacy protocol version pair (versions 3/7 imply nothing by
    themselves: their features are listed)."""
    if min_writer_version >= 7:
        return set()
    return {f.name for f in FEATURES.values()
            if f.legacy_writer < 7 and f.legacy_writer <= min_writer_version
            and (not f.reader_writer or f.legacy_reader <= min_reader_version)}


def reader_features_of(p: Protocol) -> set[str]:
    """The reader features a client must support to read a table with this protocol."""
    if p.min_reader_version >= 3:
        return {canonical_feature_name(n) for n in (p.reader_features or ())}
    if p.min_reader_version >= 2:
        return {"columnMapping"}
    return set()


def writer_features_of(p: Protocol) -> set[str]:
    """The writer features a client must support to write a table with this protocol (reader
    features included, since writers read)."""
    if p.min_writer_version >= 7:
        feats = {canonical_feature_name(n) for n in (p.writer_features or ())}
    else:
        feats = implied_features(p.min_reader_version, p.min_writer_version)
    return feats | reader_features_of(p)


_canonical_sets: dict[int, tuple[object, frozenset[str]]] = {}


def _canonical_set(names: Iterable[str]) -> frozenset[str]:
    """`names` canonicalized; remembered for the module's own (immutable) feature sets."""
    cached = _canonical_sets.get(id(names))
    if cached is not None and cached[0] is names:
        return cached[1]
    out = frozenset(canonical_feature_name(s) for s in names)
    if names is SUPPORTED_READER_FEATURES or names is SUPPORTED_WRITER_FEATURES:
        _canonical_sets[id(names)] = (names, out)
    return out


def check_readable(p: Protocol, supported: Iterable[str] = SUPPORTED_READER_FEATURES) -> None:
    """Refuse (UnsupportedFeatureError naming them) a protocol this reader cannot read."""
    if p.min_reader_version > MAX_READER_VERSION or p.min_reader_version < 1:
        raise UnsupportedFeatureError(
            f"Delta protocol version is not supported by this version of Delta Lake: table requires "
            f"reader version {p.min_reader_version}; tahoe supports reader versions 1 to {MAX_READER_VERSION}",
            error_class="DELTA_INVALID_PROTOCOL_VERSION")
    if p.min_reader_version == 3 and p.reader_features is None:
        raise UnsupportedFeatureError("protocol has reader version 3 but no readerFeatures list")
    supported = _canonical_set(supported)
    missing = sorted(f for f in reader_features_of(p) if f not in supported)
    if missing:
        raise UnsupportedFeatureError(
            f"Unable to read this table because it requires reader table feature(s) that are unsupported by this "
            f"version of Delta Lake: {', '.join(missing)}.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_READ")


def check_writable(p: Protocol, supported: Iterable[str] = SUPPORTED_WRITER_FEATURES) -> None:
    """Refuse (UnsupportedFeatureError naming them) a protocol this writer cannot write."""
    check_readable(p)
    if p.min_writer_version > MAX_WRITER_VERSION or p.min_writer_version < 1:
        raise UnsupportedFeatureError(
            f"Delta protocol version is not supported by this version of Delta Lake: table requires "
            f"writer version {p.min_writer_version}; tahoe supports writer versions 1 to {MAX_WRITER_VERSION}",
            error_class="DELTA_INVALID_PROTOCOL_VERSION")
    if p.min_writer_version == 7 and p.writer_features is None:
        raise UnsupportedFeatureError("protocol has writer version 7 but no writerFeatures list")
    supported = _canonical_set(supported)
    missing = sorted(f for f in writer_features_of(p) if f not in supported)
    if missing:
        raise UnsupportedFeatureError(
            f"Unable to write this table because it requires writer table feature(s) that are unsupported by this "
            f"version of Delta Lake: {', '.join(missing)}.", error_class="DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")


def is_feature_supported(p: Protocol, name: str) -> bool:
    """Whether `name` is supported (enabled in the protocol) by this table."""
    name = canonical_feature_name(name)
    return name in writer_features_of(p) or name in reader_features_of(p)


def _closure(names: Iterable[str]) -> set[str]:
    out: set[str] = set()
    todo = [canonical_feature_name(n) for n in names]
    while todo:
        n = todo.pop()
        if n in out:
            continue
        if n not in FEATURES:
            raise UnsupportedFeatureError(f"unknown table feature '{n}'; known features: {', '.join(sorted(FEATURES))}")
        out.add(n)
        todo.extend(FEATURES[n].requires)
    return out


def protocol_for_features(names: Iterable[str]) -> Protocol:
    """The lowest protocol that supports `names` (and what they require), following 002: legacy
    versions when every feature is bundled by one; otherwise reader 3 (if a reader-writer feature
    needs table features; else the legacy reader version that covers the others) and writer 7 with
    explicit lists that keep the legacy bundle the table would otherwise have had."""
    feats = _closure(names)
    # The legacy baseline every table gets: 1/2 (appendOnly, invariants).
    feats |= {"appendOnly", "invariants"}
    legacy_writer = max(FEATURES[f].legacy_writer for f in feats)
    legacy_reader = max((FEATURES[f].legacy_reader for f in feats if FEATURES[f].reader_writer), default=1)
    if legacy_writer < 7:
        bundle = implied_features(legacy_reader, legacy_writer)
        if feats <= bundle:
            return Protocol(legacy_reader, legacy_writer)
    # Table features: keep everything the nearest legacy bundle would hold, plus the new ones.
    legacy_w = max((FEATURES[f].legacy_writer for f in feats if FEATURES[f].legacy_writer < 7), default=2)
    legacy_r = max((FEATURES[f].legacy_reader for f in feats if FEATURES[f].reader_writer and FEATURES[f].legacy_reader < 3), default=1)
    writer = feats | implied_features(legacy_r, legacy_w)
    rw = {f for f in writer if FEATURES[f].reader_writer}
    needs_reader_features = any(FEATURES[f].legacy_reader >= 3 for f in rw)
    if needs_reader_features:
        return Protocol(3, 7, tuple(sorted(rw)), tuple(sorted(writer)))
    return Protocol(legacy_r, 7, None, tuple(sorted(writer)))


def merge_protocols(current: Protocol, wanted: Iterable[str]) -> Protocol:
    """`current` upgraded to also support `wanted` features. Never removes a feature, never lowers a
    version. Returns `current` itself when nothing changes."""
    have = writer_features_of(current) | reader_features_of(current)
    want = _closure(wanted) - have
    if not want:
        return current
    target = protocol_for_features(have | want)
    reader = max(current.min_reader_version, target.min_reader_version)
    writer = max(current.min_writer_version, target.min_writer_version)
    if writer < 7 and reader < 3:
        return Protocol(reader, writer)
    all_feats = have | want
    writer = 7
    wf = tuple(sorted(all_feats))
    rw = tuple(sorted(f for f in all_feats if f in FEATURES and FEATURES[f].reader_writer))
    if reader >= 3 or any(FEATURES[f].legacy_reader >= 3 for f in rw):
        return Protocol(3, 7, rw, wf)
    return Protocol(reader, 7, None, wf)
