"""The sharing server's routes, one APIRouter per area: `listing` (shares, schemas, tables),
`table` (version, metadata, query, changes) and `files` (the server's own signed file URLs).
`tahoe.sharing.server.create_app` mounts them under the configured endpoint."""
