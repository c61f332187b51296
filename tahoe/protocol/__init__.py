"""The Delta protocol as pure code: actions, file names, table features, deletion vectors and
checksums. No I/O here; callers pass bytes in (or a callable that reads them)."""
