"""Deletion vectors (spec "Deletion Vectors", "Deletion Vector Descriptor Schema", "Deletion Vector
Format"): the descriptor carried by add/remove actions, the Z85 codec, the bitmap codec and the DV
file layout.

Owns, with no I/O of its own (bytes come in through a `read_range` callable):
  * `DeletionVectorDescriptor` — parsing/serializing, `unique_id`, the DV file's absolute path;
  * the bitmap codec — writes the spec's layout (little-endian magic 1681511377 + portable 64-bit
    roaring bitmap) and reads it plus delta-spark's older "native" layout (magic 1681511376, a count
    and length-prefixed 32-bit bitmaps, in either byte order: the spec's inline example is big-endian);
  * the DV file layout — version byte 1, then per DV: big-endian size, bitmap bytes, big-endian CRC-32;
  * turning a loaded bitmap into a boolean "deleted" mask over a data file's rows.
Every decoding problem raises `DeletionVectorError` naming the problem (and the file when known).
"""

from __future__ import annotations

import string
import uuid
import zlib
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Callable, Iterable
from urllib.parse import unquote

from ..errors import DeletionVectorError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from pyroaring import BitMap64

# numpy and pyroaring are imported by the codecs that use them, not with the descriptor: every
# action model imports this module, and reading a table's metadata needs neither.

__all__ = [
    "z85_encode", "z85_decode", "DeletionVectorDescriptor", "serialize_bitmap",
    "deserialize_bitmap", "read_dv_from_file_bytes", "encode_dv_file", "load_deletion_vector",
    "new_dv_path_component", "inline_dv", "deleted_mask", "PORTABLE_MAGIC", "NATIVE_MAGIC",
    "DV_FILE_FORMAT_VERSION",
]

PORTABLE_MAGIC = 1681511377   # spec layout: little-endian magic + portable 64-bit roaring bitmap
NATIVE_MAGIC = 1681511376     # delta-spark's older "native" RoaringBitmapArray layout
DV_FILE_FORMAT_VERSION = 1
_UUID_Z85_LEN = 20            # 16 bytes of UUID -> 20 Z85 characters
_MAX_ROW_INDEX = (1 << 63) - 1  # every 32-bit key must have a 0 most significant bit


# --- Z85 ------------------------------------------------------------------------------------------

_Z85_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


@cache
def _z85_tables() -> tuple:
    """(encode table, decode table, powers of 85) as numpy arrays."""
    import numpy as np

    enc = np.frombuffer(_Z85_ALPHABET, dtype=np.uint8)
    dec = np.full(256, 255, dtype=np.uint8)
    dec[enc] = np.arange(85, dtype=np.uint8)
    return enc, dec, np.array([85 ** 4, 85 ** 3, 85 ** 2, 85, 1], dtype=np.uint64)


def z85_encode(data: bytes) -> str:
    """ZeroMQ Z85 encoding of `data` (its length must be a multiple of 4)."""
    if len(data) % 4:
        raise ValueError(f"Z85 input length must be a multiple of 4, got {len(data)}")
    if not data:
        return ""
    import numpy as np

    enc, _, _ = _z85_tables()
    vals = np.frombuffer(bytes(data), dtype=">u4").astype(np.uint64)
    digits = np.empty((vals.size, 5), dtype=np.uint8)
    for i in range(4, -1, -1):
        digits[:, i] = vals % 85
        vals //= 85
    return enc[digits].tobytes().decode("ascii")


def z85_decode(text: str) -> bytes:
    """Decode ZeroMQ Z85 text (length a multiple of 5) to bytes; DeletionVectorError if invalid."""
    if len(text) % 5:
        raise DeletionVectorError(f"Z85 text length must be a multiple of 5, got {len(text)}")
    if not text:
        return b""
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError as e:
        raise DeletionVectorError(f"Z85 text contains a non-ASCII character: {text!r}") from e
    import numpy as np

    _, dec, pow85 = _z85_tables()
    idx = dec[np.frombuffer(raw, dtype=np.uint8)]
    if (idx == 255).any():
        bad = chr(raw[int(np.argmax(idx == 255))])
        raise DeletionVectorError(f"Z85 text contains an invalid character {bad!r}")
    vals = idx.reshape(-1, 5).astype(np.uint64) @ pow85
    if (vals > 0xFFFFFFFF).any():
        raise DeletionVectorError("Z85 text encodes a value that does not fit in 32 bits")
    return vals.astype(">u4").tobytes()


# --- descriptor -----------------------------------------------------------------------------------

def _int_field(d: dict, key: str, required: bool) -> int | None:
    v = d.get(key)
    if v is None:
        if required:
            raise DeletionVectorError(f"deletion vector descriptor lacks required field '{key}': {d!r}")
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise DeletionVectorError(f"deletion vector descriptor field '{key}' is not a non-negative "
                                  f"integer: {v!r}")
    return v


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The `deletionVector` struct of an add/remove action."""

    storage_type: str          # 'u' (relative, UUID), 'i' (inline), 'p' (absolute path)
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "DeletionVectorDescriptor":
        if not isinstance(d, dict):
            raise DeletionVectorError(f"deletion vector descriptor is not a JSON object: {d!r}")
        st = d.get("storageType")
        if st not in ("u", "i", "p"):
            raise DeletionVectorError(f"deletion vector descriptor has an invalid storageType: {st!r}")
        p = d.get("pathOrInlineDv")
        if not isinstance(p, str):
            raise DeletionVectorError(f"deletion vector descriptor has an invalid pathOrInlineDv: {p!r}")
        if st == "u" and len(p) < _UUID_Z85_LEN:
            raise DeletionVectorError(f"deletion vector descriptor with storageType 'u' has a "
                                      f"pathOrInlineDv shorter than {_UUID_Z85_LEN} characters: {p!r}")
        return cls(
            storage_type=st,
            path_or_inline_dv=p,
            size_in_bytes=_int_field(d, "sizeInBytes", True),
            cardinality=_int_field(d, "cardinality", True),
            offset=_int_field(d, "offset", False),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline_dv}
        if self.offset is not None:
            d["offset"] = self.offset
        d["sizeInBytes"] = self.size_in_bytes
        d["cardinality"] = self.cardinality
        return d

    @property
    def unique_id(self) -> str:
        """spec "Derived Fields": `<storageType><pathOrInlineDv>[@<offset>]`."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def is_inline(self) -> bool:
        return self.storage_type == "i"

    @property
    def is_on_disk(self) -> bool:
        return self.storage_type in ("u", "p")

    def uuid(self) -> uuid.UUID:
        """The UUID of a 'u' DV (from the last 20 characters of pathOrInlineDv)."""
        if self.storage_type != "u":
            raise DeletionVectorError(f"deletion vector with storageType {self.storage_type!r} has no UUID")
        encoded = self.path_or_inline_dv[-_UUID_Z85_LEN:]
        if len(encoded) != _UUID_Z85_LEN:
            raise DeletionVectorError(f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} is "
                                      f"shorter than {_UUID_Z85_LEN} characters")
        try:
            return uuid.UUID(bytes=z85_decode(encoded))
        except DeletionVectorError as e:
            raise DeletionVectorError(f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} does "
                                      f"not end in a Z85-encoded UUID: {e}") from e

    def relative_path(self) -> str:
        """For 'u': `<prefix>/deletion_vector_<uuid>.bin` (no prefix directory when it is empty)."""
        name = f"deletion_vector_{self.uuid()}.bin"
        prefix = self.path_or_inline_dv[:-_UUID_Z85_LEN]
        return f"{prefix}/{name}" if prefix else name

    def absolute_path(self, table_root: str) -> str | None:
        """The DV file's path ('u': under `table_root`; 'p': the decoded URI), None when inline."""
        if self.storage_type == "i":
            return None
        if self.storage_type == "p":
            return unquote(self.path_or_inline_dv)
        root = table_root.rstrip("/")
        return f"{root}/{self.relative_path()}"


# --- bitmap codec ---------------------------------------------------------------------------------

def serialize_bitmap(bitmap: BitMap64 | Iterable[int]) -> bytes:
    """The spec's layout: little-endian magic 1681511377 + portable 64-bit roaring bitmap."""
    from pyroaring import BitMap64

    if not isinstance(bitmap, BitMap64):
        bitmap = BitMap64(bitmap)
    if bitmap and bitmap.max() > _MAX_ROW_INDEX:
        raise ValueError(f"row index {bitmap.max()} does not fit a deletion vector (max {_MAX_ROW_INDEX})")
    return PORTABLE_MAGIC.to_bytes(4, "little") + bitmap.serialize()


def _deserialize_portable(payload: bytes, where: str) -> BitMap64:
    from pyroaring import BitMap64

    try:
        bm = BitMap64.deserialize(payload)
    except (ValueError, IndexError, OverflowError) as e:
        raise DeletionVectorError(f"deletion vector{where}: invalid portable 64-bit roaring bitmap "
                                  f"({len(payload)} bytes): {e}") from e
    if bm and bm.max() > _MAX_ROW_INDEX:
        raise DeletionVectorError(f"deletion vector{where}: bitmap holds a negative (>= 2^63) row index")
    return bm


def _deserialize_native(data: bytes, order: str, where: str) -> BitMap64:
    """delta-spark's "native" RoaringBitmapArray layout, after the 4-byte magic:
    int32 count, then per bitmap (index = high 32 bits of its values): int32 length + a standard
    32-bit roaring bitmap of that length. All int32s in `order` (the magic's byte order)."""
    from pyroaring import BitMap

    if len(data) < 8:
        raise DeletionVectorError(f"deletion vector{where}: native bitmap truncated (no bitmap count)")
    count = int.from_bytes(data[4:8], order, signed=True)
    if count < 0:
        raise DeletionVectorError(f"deletion vector{where}: native bitmap has a negative count {count}")
    pos = 8
    buckets: list[bytes] = []
    for index in range(count):
        if pos + 4 > len(data):
            raise DeletionVectorError(f"deletion vector{where}: native bitmap truncated at bitmap {index}")
        size = int.from_bytes(data[pos:pos + 4], order, signed=True)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise DeletionVectorError(f"deletion vector{where}: native bitmap {index} has an invalid "
                                      f"length {size}")
        try:
            bm32 = BitMap.deserialize(data[pos:pos + size])
        except (ValueError, IndexError, OverflowError) as e:
            raise DeletionVectorError(f"deletion vector{where}: invalid 32-bit roaring bitmap "
                                      f"{index} in native layout: {e}") from e
        pos += size
        if bm32:
            if index > 0x7FFFFFFF:
                raise DeletionVectorError(f"deletion vector{where}: native bitmap key {index} too large")
            buckets.append(index.to_bytes(4, "little") + bm32.serialize())
    if pos != len(data):
        raise DeletionVectorError(f"deletion vector{where}: {len(data) - pos} trailing bytes after "
                                  f"native bitmap")
    # Re-assemble as the portable 64-bit format and let the library build the bitmap.
    return _deserialize_portable(len(buckets).to_bytes(8, "little") + b"".join(buckets), where)


def deserialize_bitmap(data: bytes, path: str = "") -> BitMap64:
    """Decode a serialized DV bitmap (spec layout, or the native layout in either byte order)."""
    where = f" in {path}" if path else ""
    data = bytes(data)
    if len(data) < 4:
        raise DeletionVectorError(f"deletion vector{where}: bitmap too short ({len(data)} bytes)")
    le = int.from_bytes(data[:4], "little")
    be = int.from_bytes(data[:4], "big")
    if le == PORTABLE_MAGIC:
        return _deserialize_portable(data[4:], where)
    if be == NATIVE_MAGIC:
        return _deserialize_native(data, "big", where)
    if le == NATIVE_MAGIC:
        return _deserialize_native(data, "little", where)
    raise DeletionVectorError(f"deletion vector{where}: bad magic number {le} (little-endian) / "
                              f"{be} (big-endian); expected {PORTABLE_MAGIC}")


# --- DV files -------------------------------------------------------------------------------------

def _read_record(data: bytes, pos: int, size_in_bytes: int, path: str) -> BitMap64:
    """Decode one DV record (size, bitmap, CRC) starting at `pos` of `data`."""
    where = f" in {path}" if path else ""
    end = pos + 4 + size_in_bytes + 4
    if pos < 0 or end > len(data):
        raise DeletionVectorError(f"deletion vector{where} at offset {pos} is truncated: need {end} "
                                  f"bytes, have {len(data)}")
    size = int.from_bytes(data[pos:pos + 4], "big")
    if size != size_in_bytes:
        raise DeletionVectorError(f"deletion vector{where} at offset {pos}: stored size {size} does "
                                  f"not match sizeInBytes {size_in_bytes}")
    payload = bytes(data[pos + 4:pos + 4 + size])
    stored_crc = int.from_bytes(data[pos + 4 + size:end], "big")
    actual_crc = zlib.crc32(payload) & 0xFFFFFFFF
    if stored_crc != actual_crc:
        raise DeletionVectorError(f"deletion vector{where} at offset {pos}: CRC-32 mismatch "
                                  f"(stored {stored_crc:#010x}, computed {actual_crc:#010x})")
    return deserialize_bitmap(payload, path)


def read_dv_from_file_bytes(data: bytes, offset: int, size_in_bytes: int, path: str = "") -> BitMap64:
    """Decode the DV stored at `offset` of a whole DV file's bytes, checking version, size and CRC."""
    where = f" {path}" if path else ""
    if not data:
        raise DeletionVectorError(f"deletion vector file{where} is empty")
    if data[0] != DV_FILE_FORMAT_VERSION:
        raise DeletionVectorError(f"deletion vector file{where} has unsupported format version {data[0]}")
    if offset < 1:
        raise DeletionVectorError(f"deletion vector offset {offset} in{where or ' file'} points into "
                                  f"the file header")
    return _read_record(data, offset, size_in_bytes, path)


def encode_dv_file(bitmaps: list[BitMap64]) -> tuple[bytes, list[tuple[int, int]]]:
    """Bytes of a DV file holding `bitmaps`, and each one's (offset, sizeInBytes) for descriptors."""
    out = bytearray([DV_FILE_FORMAT_VERSION])
    placements: list[tuple[int, int]] = []
    for bm in bitmaps:
        payload = serialize_bitmap(bm)
        placements.append((len(out), len(payload)))
        out += len(payload).to_bytes(4, "big")
        out += payload
        out += (zlib.crc32(payload) & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(out), placements


def load_deletion_vector(dv: DeletionVectorDescriptor, table_root: str,
                         read_range: Callable[[str, int, int], bytes]) -> BitMap64:
    """Load the bitmap of `dv`. `read_range(path, start, length)` returns bytes of a DV file."""
    if dv.is_inline:
        raw = z85_decode(dv.path_or_inline_dv)
        if len(raw) < dv.size_in_bytes:
            raise DeletionVectorError(f"inline deletion vector decodes to {len(raw)} bytes, fewer "
                                      f"than sizeInBytes {dv.size_in_bytes}")
        bitmap = deserialize_bitmap(raw[:dv.size_in_bytes], "inline deletion vector")
        where = "inline deletion vector"
    else:
        path = dv.absolute_path(table_root)
        assert path is not None
        offset = 1 if dv.offset is None else dv.offset
        record_len = 4 + dv.size_in_bytes + 4
        if offset == 1:   # the common case: one read also covers the version byte
            data = read_range(path, 0, 1 + record_len)
            bitmap = read_dv_from_file_bytes(data, 1, dv.size_in_bytes, path)
        else:
            data = read_range(path, offset, record_len)
            try:
                bitmap = _read_record(data, 0, dv.size_in_bytes, path)
            except DeletionVectorError as e:
                raise DeletionVectorError(f"{e} (record read at file offset {offset})") from e
        where = f"deletion vector in {path} at offset {offset}"
    n = len(bitmap)
    if n != dv.cardinality:
        raise DeletionVectorError(f"{where}: holds {n} row indexes but its descriptor says "
                                  f"cardinality {dv.cardinality}")
    return bitmap


# --- writers' helpers -----------------------------------------------------------------------------

_PREFIX_ALPHABET = string.ascii_letters + string.digits


def new_dv_path_component(prefix_len: int = 2) -> tuple[str, str]:
    """A fresh (pathOrInlineDv, uuid string) for a new 'u' DV file, with a random alphanumeric
    prefix of `prefix_len` characters (the file goes to `<table>/<prefix>/deletion_vector_<uuid>.bin`)."""
    u = uuid.uuid4()
    import secrets   # on first use: it pulls in hashlib and random, which a reader never needs

    prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(prefix_len))
    return prefix + z85_encode(u.bytes), str(u)


def inline_dv(bitmap: BitMap64 | Iterable[int]) -> DeletionVectorDescriptor:
    """An inline ('i') descriptor holding `bitmap` (Z85 input zero-padded to a multiple of 4)."""
    from pyroaring import BitMap64

    if not isinstance(bitmap, BitMap64):
        bitmap = BitMap64(bitmap)
    payload = serialize_bitmap(bitmap)
    padded = payload + b"\0" * (-len(payload) % 4)
    return DeletionVectorDescriptor("i", z85_encode(padded), len(payload), len(bitmap))


def deleted_mask(bitmap: BitMap64, num_rows: int) -> np.ndarray:
    """Boolean array of length `num_rows`, True at deleted rows (indexes >= num_rows ignored)."""
    import numpy as np

    mask = np.zeros(num_rows, dtype=bool)
    if num_rows <= 0 or not bitmap:
        return mask
    to_array = getattr(bitmap, "to_array", None)
    if to_array is not None:
        rows = np.asarray(to_array())   # sorted, uint64 (uint32 for a 32-bit BitMap)
    else:  # pragma: no cover - older pyroaring
        rows = np.fromiter(bitmap, dtype=np.uint64, count=len(bitmap))
    if rows.size and rows[-1] >= num_rows:
        rows = rows[:np.searchsorted(rows, num_rows)]
    mask[rows] = True
    return mask
