"""Delta Sharing: a protocol server over tahoe tables, and a recipient's client that is a drop-in for the
official `delta_sharing` connector (`import tahoe.sharing as delta_sharing`).

  1. Client: `client`, `model`, `rest`, `reader`, `download`, `credentials`, `retry`.
  2. Server: `server` (the FastAPI app over `routes` and `context`), `auth`, `config`, `errors`, `signing`,
     `predicates`, `tables`; the `tahoe sharing` CLI (`cli`); `official_client` for tests and the demo.
  3. The connector's names are attributes of this package, imported on first use."""

from importlib import import_module
from typing import Any

__version__ = "1.4.2"   # the official connector version whose API this package follows

_CLIENT = ("SharingClient", "load_as_pandas", "load_as_arrow", "load_as_batches", "load_as_spark",
           "load_table_changes_as_pandas", "load_table_changes_as_arrow", "load_table_changes_as_batches",
           "load_table_changes_as_spark", "get_table_version", "get_table_metadata", "get_table_protocol")
_MODEL = ("Share", "Schema", "Table", "Protocol", "Metadata", "Format", "DeltaSharingProfile")
_REST = ("SharingHTTPError",)

__all__ = list(_CLIENT + _MODEL + _REST) + ["__version__"]


def __getattr__(name: str) -> Any:
    for mod, names in (("tahoe.sharing.client", _CLIENT), ("tahoe.sharing.model", _MODEL),
                       ("tahoe.sharing.rest", _REST)):
        if name in names:
            value = getattr(import_module(mod), name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'tahoe.sharing' has no attribute {name!r}")
