"""Deletion vectors: Z85, descriptors, the bitmap codec (spec and native layouts), DV files, and the
real on-disk DVs of the conformance tables."""

from __future__ import annotations

import glob
import json
import os
import string
import uuid
import zlib

import numpy as np
import pytest
from pyroaring import BitMap, BitMap64

from tahoe.errors import CorruptLogError, DeletionVectorError
from tahoe.protocol.deletion_vectors import (
    NATIVE_MAGIC, PORTABLE_MAGIC, DeletionVectorDescriptor, deleted_mask, deserialize_bitmap,
    encode_dv_file, inline_dv, load_deletion_vector, new_dv_path_component, read_dv_from_file_bytes,
    serialize_bitmap, z85_decode, z85_encode,
)

from tests.conftest import GOLDEN

ROWS = [3, 4, 7, 11, 18, 29]
NATIVE_INLINE = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
SPEC_INLINE = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
ON_DISK = "ab^-aqEH.-t@S}K{vb[*k^"
ON_DISK_UUID = "d2c639aa-8816-431a-aaf6-d3fe2512ff61"


def no_reads(path, start, length):  # pragma: no cover - must not be called
    raise AssertionError(f"unexpected read of {path}")


def local_read_range(path: str, start: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(length)


def memory_reader(files: dict[str, bytes], calls: list | None = None):
    def read_range(path, start, length):
        if calls is not None:
            calls.append((path, start, length))
        return files[path][start:start + length]
    return read_range


# --- Z85 ------------------------------------------------------------------------------------------

def test_z85_known_vectors():
    # ZeroMQ RFC 32 test vector
    assert z85_encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    assert z85_encode(b"") == "" and z85_decode("") == b""
    # the spec's on-disk example: prefix "ab" + Z85 of the UUID's 16 big-endian bytes
    assert z85_encode(uuid.UUID(ON_DISK_UUID).bytes) == ON_DISK[2:]
    assert z85_encode(b"\0\0\0\0") == "00000"
    assert z85_encode(b"\xff\xff\xff\xff") == "%nSc0"


def test_z85_round_trip():
    rng = np.random.default_rng(7)
    for n in (4, 8, 16, 40, 44, 1024):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        text = z85_encode(data)
        assert len(text) == n // 4 * 5
        assert z85_decode(text) == data


def test_z85_errors():
    with pytest.raises(ValueError):
        z85_encode(b"abc")
    with pytest.raises(DeletionVectorError, match="multiple of 5"):
        z85_decode("abcd")
    with pytest.raises(DeletionVectorError, match="invalid character"):
        z85_decode("abc d")
    with pytest.raises(DeletionVectorError, match="non-ASCII"):
        z85_decode("abcdé")
    with pytest.raises(DeletionVectorError, match="32 bits"):
        z85_decode("#####")


# --- descriptor -----------------------------------------------------------------------------------

def test_descriptor_dict_round_trip_and_nulls():
    d = {"storageType": "u", "pathOrInlineDv": ON_DISK, "offset": 4, "sizeInBytes": 40,
         "cardinality": 6}
    dv = DeletionVectorDescriptor.from_dict(d)
    assert dv == DeletionVectorDescriptor("u", ON_DISK, 40, 6, 4)
    assert dv.to_dict() == d
    inline = DeletionVectorDescriptor.from_dict(
        {"storageType": "i", "pathOrInlineDv": SPEC_INLINE, "offset": None, "sizeInBytes": 44,
         "cardinality": 6})
    assert inline.offset is None and inline.is_inline and not dv.is_inline
    assert "offset" not in inline.to_dict()


@pytest.mark.parametrize("bad", [
    {"storageType": "x", "pathOrInlineDv": "abc", "sizeInBytes": 1, "cardinality": 1},
    {"storageType": "i", "pathOrInlineDv": 5, "sizeInBytes": 1, "cardinality": 1},
    {"storageType": "i", "pathOrInlineDv": "abc", "cardinality": 1},
    {"storageType": "i", "pathOrInlineDv": "abc", "sizeInBytes": "1", "cardinality": 1},
    {"storageType": "i", "pathOrInlineDv": "abc", "sizeInBytes": 1, "cardinality": -1},
    {"storageType": "u", "pathOrInlineDv": "tooshort", "sizeInBytes": 1, "cardinality": 1},
    "not a dict",
])
def test_descriptor_rejects_bad_fields(bad):
    with pytest.raises(DeletionVectorError):
        DeletionVectorDescriptor.from_dict(bad)
    assert issubclass(DeletionVectorError, CorruptLogError)


def test_unique_id():
    assert DeletionVectorDescriptor("u", ON_DISK, 40, 6, 4).unique_id == "u" + ON_DISK + "@4"
    assert DeletionVectorDescriptor("i", SPEC_INLINE, 44, 6).unique_id == "i" + SPEC_INLINE
    assert DeletionVectorDescriptor("p", "s3://t/x.bin", 40, 6, 1).unique_id == "ps3://t/x.bin@1"


def test_absolute_paths():
    dv = DeletionVectorDescriptor("u", ON_DISK, 40, 6, 4)
    name = f"deletion_vector_{ON_DISK_UUID}.bin"
    assert dv.absolute_path("/data/t") == f"/data/t/ab/{name}"
    assert dv.absolute_path("s3://mytable/") == f"s3://mytable/ab/{name}"
    assert dv.uuid() == uuid.UUID(ON_DISK_UUID)
    no_prefix = DeletionVectorDescriptor("u", ON_DISK[2:], 40, 6, 1)
    assert no_prefix.absolute_path("s3://bucket/t") == f"s3://bucket/t/{name}"
    p = DeletionVectorDescriptor("p", "file:/tmp/my%20table/deletion_vector_x.bin", 40, 6, 1)
    assert p.absolute_path("/ignored") == "file:/tmp/my table/deletion_vector_x.bin"
    s3 = DeletionVectorDescriptor("p", "s3://mytable/" + name, 40, 6, 4)
    assert s3.absolute_path("/ignored") == "s3://mytable/" + name
    assert DeletionVectorDescriptor("i", SPEC_INLINE, 44, 6).absolute_path("/t") is None
    bad = DeletionVectorDescriptor("u", "ab" + "~" * 20, 40, 6, 1)
    with pytest.raises(DeletionVectorError, match="UUID"):
        bad.absolute_path("/t")


# --- bitmap codec ---------------------------------------------------------------------------------

def test_spec_layout_serialization_matches_vector():
    data = serialize_bitmap(BitMap64(ROWS))
    assert data[:4] == PORTABLE_MAGIC.to_bytes(4, "little")
    assert len(data) == 44
    assert z85_encode(data) == SPEC_INLINE
    dv = inline_dv(BitMap64(ROWS))
    assert dv == DeletionVectorDescriptor("i", SPEC_INLINE, 44, 6)


@pytest.mark.parametrize("text,size", [(NATIVE_INLINE, 40), (SPEC_INLINE, 44)])
def test_inline_vectors(text, size):
    assert list(deserialize_bitmap(z85_decode(text))) == ROWS
    dv = DeletionVectorDescriptor.from_dict(
        {"storageType": "i", "pathOrInlineDv": text, "sizeInBytes": size, "cardinality": 6})
    assert list(load_deletion_vector(dv, "/t", no_reads)) == ROWS


def test_native_layout_is_big_endian_in_spec_example():
    raw = z85_decode(NATIVE_INLINE)
    assert int.from_bytes(raw[:4], "big") == NATIVE_MAGIC
    assert int.from_bytes(raw[4:8], "big") == 1          # one 32-bit bitmap
    assert int.from_bytes(raw[8:12], "big") == len(raw) - 12
    assert BitMap.deserialize(raw[12:]) == BitMap(ROWS)


@pytest.mark.parametrize("order", ["big", "little"])
def test_native_layout_multiple_buckets(order):
    buckets = [BitMap([1, 2]), BitMap(), BitMap([0, 70000, 2**32 - 1])]
    data = NATIVE_MAGIC.to_bytes(4, order) + len(buckets).to_bytes(4, order)
    for b in buckets:
        s = b.serialize()
        data += len(s).to_bytes(4, order) + s
    expect = [1, 2, (2 << 32) + 0, (2 << 32) + 70000, (2 << 32) + 2**32 - 1]
    assert list(deserialize_bitmap(data)) == expect
    with pytest.raises(DeletionVectorError, match="trailing"):
        deserialize_bitmap(data + b"\0")
    with pytest.raises(DeletionVectorError):
        deserialize_bitmap(data[:-3])


def test_bitmap_round_trip_large_and_runs():
    bm = BitMap64(range(1000, 200000))
    bm.update([5, 2**33 + 7, 2**62])
    bm.run_optimize()
    assert deserialize_bitmap(serialize_bitmap(bm)) == bm
    assert deserialize_bitmap(serialize_bitmap(BitMap64())) == BitMap64()
    with pytest.raises(ValueError):
        serialize_bitmap(BitMap64([2**63]))


def test_inline_dv_pads_odd_sizes():
    bm = BitMap64(range(0, 100))
    bm.run_optimize()
    payload = serialize_bitmap(bm)
    assert len(payload) % 4 != 0   # a run container makes an odd-sized payload
    dv = inline_dv(bm)
    assert dv.size_in_bytes == len(payload) and dv.cardinality == 100
    assert len(dv.path_or_inline_dv) % 5 == 0
    assert load_deletion_vector(dv, "/t", no_reads) == bm


def test_bad_magic():
    with pytest.raises(DeletionVectorError, match="bad magic"):
        deserialize_bitmap(b"\x01\x02\x03\x04" + BitMap64(ROWS).serialize())
    with pytest.raises(DeletionVectorError, match="too short"):
        deserialize_bitmap(b"\x01")
    with pytest.raises(DeletionVectorError, match="portable"):
        deserialize_bitmap(PORTABLE_MAGIC.to_bytes(4, "little") + b"\x01\x00garbage")
    dv = DeletionVectorDescriptor("i", z85_encode(b"\x01\x02\x03\x04" * 3), 12, 0)
    with pytest.raises(DeletionVectorError, match="bad magic"):
        load_deletion_vector(dv, "/t", no_reads)


# --- DV files -------------------------------------------------------------------------------------

def test_file_round_trip_several_dvs():
    bitmaps = [BitMap64(ROWS), BitMap64([0]), BitMap64(range(500, 90000)), BitMap64([2**40, 5])]
    data, placements = encode_dv_file(bitmaps)
    assert data[0] == 1
    assert placements[0][0] == 1
    for (offset, size), bm in zip(placements, bitmaps):
        assert read_dv_from_file_bytes(data, offset, size, "/t/x.bin") == bm
    path_or_dv, uid = new_dv_path_component()
    root = "s3://bucket/table"
    files = {}
    calls: list = []
    for (offset, size), bm in zip(placements, bitmaps):
        dv = DeletionVectorDescriptor("u", path_or_dv, size, len(bm), offset)
        files[dv.absolute_path(root)] = data
        assert load_deletion_vector(dv, root, memory_reader(files, calls)) == bm
    path = f"{root}/{path_or_dv[:2]}/deletion_vector_{uid}.bin"
    assert {c[0] for c in calls} == {path}
    # the first DV is read together with the version byte; later ones read just their record
    assert calls[0] == (path, 0, 1 + 4 + placements[0][1] + 4)
    assert calls[1] == (path, placements[1][0], 4 + placements[1][1] + 4)
    # absolute-path ('p') DVs read the same way
    pdv = DeletionVectorDescriptor("p", "file:/x/my%20dv.bin", placements[2][1], len(bitmaps[2]),
                                   placements[2][0])
    assert load_deletion_vector(pdv, root, memory_reader({"file:/x/my dv.bin": data})) == bitmaps[2]


def test_missing_offset_defaults_to_one():
    data, [(offset, size)] = encode_dv_file([BitMap64(ROWS)])
    dv = DeletionVectorDescriptor("u", ON_DISK, size, 6, None)
    files = {dv.absolute_path("/t"): data}
    assert list(load_deletion_vector(dv, "/t", memory_reader(files))) == ROWS


def test_crc_corruption():
    data, [(offset, size)] = encode_dv_file([BitMap64(ROWS)])
    corrupt = bytearray(data)
    corrupt[offset + 4 + 20] ^= 0x01           # flip a bit inside the bitmap bytes
    with pytest.raises(DeletionVectorError, match=r"CRC-32 mismatch") as e:
        read_dv_from_file_bytes(bytes(corrupt), offset, size, "/t/ab/dv.bin")
    assert "/t/ab/dv.bin" in str(e.value)
    dv = DeletionVectorDescriptor("u", ON_DISK, size, 6, offset)
    path = dv.absolute_path("/t")
    with pytest.raises(DeletionVectorError, match="CRC-32") as e:
        load_deletion_vector(dv, "/t", memory_reader({path: bytes(corrupt)}))
    assert path in str(e.value)
    bad_crc = data[:-1] + bytes([data[-1] ^ 0xFF])
    with pytest.raises(DeletionVectorError, match="CRC-32"):
        read_dv_from_file_bytes(bad_crc, offset, size)


def test_file_header_size_and_truncation_errors():
    data, [(offset, size)] = encode_dv_file([BitMap64(ROWS)])
    with pytest.raises(DeletionVectorError, match="format version 2"):
        read_dv_from_file_bytes(b"\x02" + data[1:], offset, size, "/t/x.bin")
    with pytest.raises(DeletionVectorError, match="does not match sizeInBytes"):
        read_dv_from_file_bytes(data[:-4] + b"\0" * 4 + b"\0" * 4, offset, size - 4)
    with pytest.raises(DeletionVectorError, match="truncated"):
        read_dv_from_file_bytes(data[:-2], offset, size, "/t/x.bin")
    with pytest.raises(DeletionVectorError, match="empty"):
        read_dv_from_file_bytes(b"", 1, size)
    # a record whose CRC is right but whose bitmap has a bad magic
    payload = b"\x00\x11\x22\x33" + BitMap64(ROWS).serialize()
    rec = b"\x01" + len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
    with pytest.raises(DeletionVectorError, match="bad magic"):
        read_dv_from_file_bytes(rec, 1, len(payload), "/t/x.bin")


def test_cardinality_mismatch():
    data, [(offset, size)] = encode_dv_file([BitMap64(ROWS)])
    dv = DeletionVectorDescriptor("u", ON_DISK, size, 5, offset)
    with pytest.raises(DeletionVectorError, match="cardinality 5"):
        load_deletion_vector(dv, "/t", memory_reader({dv.absolute_path("/t"): data}))
    with pytest.raises(DeletionVectorError, match="cardinality 7"):
        load_deletion_vector(DeletionVectorDescriptor("i", SPEC_INLINE, 44, 7), "/t", no_reads)
    with pytest.raises(DeletionVectorError, match="fewer than sizeInBytes"):
        load_deletion_vector(DeletionVectorDescriptor("i", SPEC_INLINE, 48, 6), "/t", no_reads)


# --- writers' helpers and masks -------------------------------------------------------------------

def test_new_dv_path_component():
    path_or_dv, uid = new_dv_path_component()
    assert len(path_or_dv) == 22 and all(c in string.ascii_letters + string.digits
                                         for c in path_or_dv[:2])
    dv = DeletionVectorDescriptor("u", path_or_dv, 44, 6, 1)
    assert dv.absolute_path("/t") == f"/t/{path_or_dv[:2]}/deletion_vector_{uid}.bin"
    bare, uid2 = new_dv_path_component(prefix_len=0)
    assert len(bare) == 20 and uid2 != uid
    assert DeletionVectorDescriptor("u", bare, 1, 1, 1).absolute_path("/t") == \
        f"/t/deletion_vector_{uid2}.bin"


def test_deleted_mask():
    m = deleted_mask(BitMap64([0, 3, 9, 10, 2**40]), 10)
    assert m.dtype == bool and m.shape == (10,)
    assert np.flatnonzero(m).tolist() == [0, 3, 9]
    assert not deleted_mask(BitMap64(), 4).any()
    assert deleted_mask(BitMap64([1]), 0).shape == (0,)
    big = BitMap64(range(0, 1_000_000, 3))
    assert deleted_mask(big, 1_000_000).sum() == len(big)


# --- the conformance tables' on-disk DVs ----------------------------------------------------------

def _log_descriptors(table: str) -> list[dict]:
    out = []
    for f in sorted(glob.glob(os.path.join(GOLDEN, table, "delta", "_delta_log", "*.json"))):
        with open(f) as fh:
            for line in fh:
                if not line.strip():
                    continue
                action = json.loads(line)
                for key in ("add", "remove"):
                    dv = (action.get(key) or {}).get("deletionVector")
                    if dv:
                        out.append(dv)
    return out


@pytest.mark.parametrize("table", ["dv-partitioned-with-checkpoint", "dv-with-columnmapping"])
def test_conformance_on_disk_dvs(golden, table):
    root = os.path.join(golden, table, "delta")
    descriptors = _log_descriptors(table)
    assert len(descriptors) >= 10
    seen = set()
    for d in descriptors:
        dv = DeletionVectorDescriptor.from_dict(d)
        assert dv.to_dict() == d
        assert dv.storage_type == "u"
        path = dv.absolute_path(root)
        assert os.path.isfile(path), path
        bm = load_deletion_vector(dv, root, local_read_range)
        assert len(bm) == dv.cardinality
        # the whole-file reader agrees with the ranged one
        with open(path, "rb") as fh:
            assert read_dv_from_file_bytes(fh.read(), dv.offset, dv.size_in_bytes, path) == bm
        seen.add(dv.unique_id)
    assert len(seen) >= 5
