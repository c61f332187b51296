"""The variant encoding and the reassembly of shredded variants (tahoe.protocol.variant).

Oracles: bytes Spark 4's `parse_json` produced (recorded from a PySpark session), and the examples
of Parquet's VariantShredding.md (the spec's own table of shredded rows and the values they mean)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from tahoe.errors import CorruptLogError
from tahoe.protocol import variant as V
from tahoe.protocol.schema import VARIANT, from_arrow_type, to_arrow_type

# parse_json(...) in PySpark 4.3, (metadata, value) as Spark encoded them
SPARK = {
    '{"a":1,"b":"x"}': (b"\x01\x02\x00\x01\x02ab", b"\x02\x02\x00\x01\x00\x02\x04\x0c\x01\x05x"),
    '[1,2.5,null]': (b"\x01\x00\x00", b"\x03\x03\x00\x02\x08\t\x0c\x01 \x01\x19\x00\x00\x00\x00"),
}


@pytest.mark.parametrize("doc", sorted(SPARK))
def test_encode_json_matches_spark(doc):
    assert V.encode_json(doc) == SPARK[doc]
    assert json.loads(V.to_json(*SPARK[doc])) == json.loads(doc)


def test_arrow_type_round_trips_through_delta_schema():
    assert from_arrow_type(to_arrow_type(VARIANT)) == VARIANT
    assert V.is_variant_type(V.ARROW_TYPE)
    # an untagged metadata/value struct stays a struct (only the tag names a variant)
    plain = pa.struct([pa.field("metadata", pa.binary()), pa.field("value", pa.binary())])
    assert from_arrow_type(plain) != VARIANT


def _object(md_keys: list[str], fields: dict[str, bytes]) -> bytes:
    """An object value by hand (VariantEncoding.md): 1-byte ids and offsets."""
    ordered = sorted(fields)
    data = b""
    offs = []
    for k in ordered:
        offs.append(len(data))
        data += fields[k]
    offs.append(len(data))
    return bytes([0x02, len(ordered)] + [md_keys.index(k) for k in ordered] + offs) + data


def test_shredded_object_rows_of_the_spec():
    """VariantShredding.md "Objects": the `event` column with event_type (string) and event_ts
    (timestamp with zone, micros) shredded — each row reassembles to the object the spec lists."""
    keys = ["event_type", "event_ts", "email", "error_msg"]
    md = bytes([0x01, len(keys)]) + bytes([0] + list(_cumulative(keys))) + "".join(keys).encode()
    s = lambda text: bytes([(len(text) << 2) | 1]) + text.encode()   # short string
    field_t = lambda tv: pa.struct([pa.field("value", pa.binary()), pa.field("typed_value", tv)])
    typed_t = pa.struct([pa.field("event_type", field_t(pa.string()), nullable=False),
                         pa.field("event_ts", field_t(pa.timestamp("us", tz="UTC")), nullable=False)])
    rows = [  # (value, typed_value)
        (None, {"event_type": {"value": None, "typed_value": "noop"},
                "event_ts": {"value": None, "typed_value": 1729794114937}}),
        (_object(keys, {"email": s("user@example.com")}),
         {"event_type": {"value": None, "typed_value": "login"},
          "event_ts": {"value": None, "typed_value": 1729794146402}}),
        (_object(keys, {"error_msg": s("malformed: ...")}),
         {"event_type": {"value": None, "typed_value": None}, "event_ts": {"value": None, "typed_value": None}}),
        (s("malformed: not an object"), None),
        (None, {"event_type": {"value": b"\x00", "typed_value": None},
                "event_ts": {"value": None, "typed_value": 1729794954163}}),
        (None, {"event_type": {"value": None, "typed_value": "noop"},
                "event_ts": {"value": s("2024-10-24"), "typed_value": None}}),
        (None, {"event_type": {"value": None, "typed_value": None}, "event_ts": {"value": None, "typed_value": None}}),
        (b"\x00", None),
    ]
    ts = lambda us: (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us))
    expected = [
        {"event_type": "noop", "event_ts": ts(1729794114937)},
        {"event_type": "login", "event_ts": ts(1729794146402), "email": "user@example.com"},
        {"error_msg": "malformed: ..."},
        "malformed: not an object",
        {"event_type": None, "event_ts": ts(1729794954163)},
        {"event_type": "noop", "event_ts": "2024-10-24"},
        {},
        None,
    ]
    # the file's stored timestamps are micros; pyarrow hands them over as datetimes
    typed = pa.array([r[1] for r in rows], typed_t)
    group = pa.StructArray.from_arrays(
        [pa.array([md] * len(rows), pa.binary()), pa.array([r[0] for r in rows], pa.binary()), typed],
        names=["metadata", "value", "typed_value"])
    out = V.from_parquet(group)
    assert out.type == V.ARROW_TYPE
    got = [V.to_python(x["metadata"], x["value"]) for x in out.to_pylist()]
    assert got == expected


def test_shredded_array_and_null_rows():
    """VariantShredding.md "Arrays": tags shredded as a list of strings; a null element is a
    variant null in `value`; a SQL-null row stays null."""
    elem = pa.struct([pa.field("value", pa.binary()), pa.field("typed_value", pa.string())])
    typed = pa.array([[{"value": None, "typed_value": "comedy"}, {"value": None, "typed_value": "drama"}],
                      [{"value": None, "typed_value": "horror"}, {"value": b"\x00", "typed_value": None}],
                      None, None], pa.list_(pa.field("element", elem, nullable=False)))
    group = pa.StructArray.from_arrays(
        [pa.array([V.EMPTY_METADATA] * 4, pa.binary()), pa.array([None, None, b"\x00", None], pa.binary()), typed],
        names=["metadata", "value", "typed_value"], mask=pa.array([False, False, False, True]))
    out = V.from_parquet(group)
    assert [None if x is None else V.to_python(x["metadata"], x["value"]) for x in out.to_pylist()] == \
        [["comedy", "drama"], ["horror", None], None, None]
    assert out.is_null().to_pylist() == [False, False, False, True]
    out.validate(full=True)   # the non-null children hold no nulls


def test_shredded_field_missing_from_the_dictionary_is_added():
    """A shredded key the row's metadata lacks still gets a field id (the dictionary grows)."""
    field_t = pa.struct([pa.field("value", pa.binary()), pa.field("typed_value", pa.int64())])
    group = pa.StructArray.from_arrays(
        [pa.array([V.EMPTY_METADATA], pa.binary()), pa.array([None], pa.binary()),
         pa.array([{"k": {"value": None, "typed_value": 300}}], pa.struct([pa.field("k", field_t, nullable=False)]))],
        names=["metadata", "value", "typed_value"])
    x = V.from_parquet(group).to_pylist()[0]
    assert V.to_python(x["metadata"], x["value"]) == {"k": 300}


def test_not_a_variant_group():
    with pytest.raises(CorruptLogError, match="metadata"):
        V.from_parquet(pa.array([{"value": b"\x00"}]))


def _cumulative(keys):
    total = 0
    for k in keys:
        total += len(k)
        yield total
