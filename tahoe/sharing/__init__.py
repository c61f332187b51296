"""Delta Sharing: a protocol server over tahoe tables (`server`), its configuration and recipients
(`config`), signed URLs and tokens (`signing`), file pruning by predicate hints (`predicates`), the
per-table response builder (`tables`), a small Python client (`client`) and the `tahoe sharing` CLI
(`cli`)."""
