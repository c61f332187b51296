"""Delta Sharing: a protocol server over tahoe tables, and a recipient's client that is a drop-in
for the official `delta_sharing` Python connector:

    import tahoe.sharing as delta_sharing
    delta_sharing.load_as_pandas("profile.share#share.schema.table")

Client (recipient side): `client` (the connector's functions and `SharingClient`, plus Arrow:
`load_as_arrow`, `load_as_batches`, `load_table_changes_as_arrow`), `model` (profiles and the
`Share`/`Schema`/`Table`/`Protocol`/`Metadata` records), `rest` (REST calls, errors), `reader`
(files to Arrow), `download` (file downloads), `credentials` (bearer and OAuth tokens), `retry`.

Server (provider side): `server` (the FastAPI app, assembling the routers of `routes` over a shared
`context`), authentication that fails closed (`auth`), configuration and recipients (`config`,
with `locks` for the recipients file), protocol errors (`errors`), `signing` (signed URLs and
tokens), `predicates` (pruning files by predicate hints; also applied to rows by the client),
`tables` (per-table response lines), and the `tahoe sharing` CLI (`cli`, both sides). The official
client run from a recipient's own environment, for tests and the demo: `official_client`.

The connector's names are attributes of this package, imported on first use (so the server does
not load the client and vice versa).
"""

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
