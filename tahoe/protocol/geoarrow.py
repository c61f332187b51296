"""The `geoarrow.wkb` Arrow extension type of geospatial columns (tahoe.protocol.geospatial):
WKB bytes in a binary column, the GeoArrow metadata (`crs`, `edges`) as the extension's JSON.

Owns:
1. `wkb_type(metadata_json)`: the extension type with that metadata — tahoe registers a minimal
   `geoarrow.wkb` type when no library (geoarrow-pyarrow) has registered one;
2. `wkb_metadata(field)`: the metadata of an Arrow field holding `geoarrow.wkb` (as an extension
   type, or as a binary field carrying the extension's metadata, as arrow-rs passes it), else None.
Knows no Delta types (tahoe.protocol.schema turns the metadata into its GeoType).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["EXTENSION_NAME", "wkb_type", "wkb_metadata"]

EXTENSION_NAME = "geoarrow.wkb"


# --- Arrow ---------------------------------------------------------------------------------------

@cache
def _registered() -> None:
    """Register tahoe's minimal `geoarrow.wkb` extension type unless a library has one."""
    import pyarrow as pa

    probe = pa.schema([pa.field("g", pa.binary(), metadata={b"ARROW:extension:name": EXTENSION_NAME.encode(),
                                                             b"ARROW:extension:metadata": b"{}"})])
    if isinstance(_roundtrip(probe).field("g").type, pa.BaseExtensionType):
        return

    class WkbType(pa.ExtensionType):
        """`geoarrow.wkb`: WKB bytes with the GeoArrow metadata (`crs`, `edges`)."""

        def __init__(self, serialized: bytes = b"{}"):
            self._serialized = serialized or b"{}"
            super().__init__(pa.binary(), EXTENSION_NAME)

        def __arrow_ext_serialize__(self) -> bytes:
            return self._serialized

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return cls(serialized)

        def __reduce__(self):
            return (_wkb_type_from_metadata, (self._serialized,))

    try:
        pa.register_extension_type(WkbType())
    except pa.ArrowKeyError:   # registered meanwhile by another thread or library
        pass


def _roundtrip(schema: "pa.Schema") -> "pa.Schema":
    import pyarrow as pa

    return pa.ipc.read_schema(pa.py_buffer(schema.serialize()))


def _wkb_type_from_metadata(serialized: bytes) -> "pa.DataType":
    import pyarrow as pa

    _registered()
    probe = pa.schema([pa.field("g", pa.binary(), metadata={b"ARROW:extension:name": EXTENSION_NAME.encode(),
                                                             b"ARROW:extension:metadata": serialized})])
    return _roundtrip(probe).field("g").type


@cache
def wkb_type(metadata_json: str) -> "pa.DataType":
    """The `geoarrow.wkb` extension type whose metadata is `metadata_json` (storage: binary)."""
    return _wkb_type_from_metadata(metadata_json.encode())


def wkb_metadata(f: "pa.Field") -> bytes | None:
    """The `geoarrow.wkb` metadata of Arrow field `f` (b"" when it has none), None when `f` does
    not hold `geoarrow.wkb`."""
    import pyarrow as pa

    t = f.type
    if isinstance(t, pa.BaseExtensionType) and t.extension_name == EXTENSION_NAME:
        return t.__arrow_ext_serialize__() or b""
    md = f.metadata or {}
    if md.get(b"ARROW:extension:name") == EXTENSION_NAME.encode() and \
            (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t)):
        return md.get(b"ARROW:extension:metadata") or b""
    return None
