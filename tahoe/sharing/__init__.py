"""Delta Sharing: a protocol server over tahoe tables (`server`, assembling the routers of `routes`
over a shared `context`), authentication that fails closed (`auth`), its configuration and
recipients (`config`, with `locks` for the recipients file), protocol errors (`errors`), signed
URLs and tokens (`signing`), file pruning by predicate hints (`predicates`), the per-table response
builder (`tables`), a small Python client (`client`), the official client run from a recipient's
own environment (`official_client`) and the `tahoe sharing` CLI (`cli`)."""
