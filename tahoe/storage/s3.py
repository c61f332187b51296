"""`S3LogStore`: the S3 flavour of `ObjectStoreLogStore` (AWS S3 and S3-compatible endpoints:
MinIO, R2, Ceph, moto, ...), plus what only S3 has: the region, and boto3 clients of other AWS
services (STS, for the credentials Delta Sharing vends) with the store's credentials.

Put-if-absent uses S3 conditional writes (`PutObject` with `If-None-Match: *`): S3 answers 412
when the key exists (→ FileExistsError) and 409 ConditionalRequestConflict while a concurrent
conditional write of the same key is in flight (→ retried, then CommitFailedException). A store
that ignores `If-None-Match` would silently overwrite: only point tahoe at stores that support
conditional writes (AWS S3 since 2024-08, MinIO, R2, moto's server, ...).

Options: the keys delta-rs takes (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_REGION`,
`AWS_ALLOW_HTTP`, ..., any case; see `tahoe.storage.options`), and the AWS environment variables.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .object_store import ObjectStoreLogStore

__all__ = ["S3LogStore", "split_s3_path"]

_S3_PATH = re.compile(r"^(?:s3|s3a|s3n)://([^/]+)/?(.*)$", re.IGNORECASE | re.DOTALL)


def split_s3_path(path: str) -> tuple[str, str]:
    """`s3://bucket/some/key` → ("bucket", "some/key"). ValueError if not an S3 URI."""
    m = _S3_PATH.match(path)
    if not m:
        raise ValueError(f"not an S3 path (expected s3://bucket/key): {path!r}")
    return m.group(1), m.group(2)


class S3LogStore(ObjectStoreLogStore):
    """Log store on S3 (see the module docstring)."""

    def __init__(self, options: dict | None = None) -> None:
        super().__init__("s3", options)

    def __reduce__(self):
        return (S3LogStore, (self.options,))

    @property
    def region(self) -> str | None:
        """The region the options or the environment name, if any."""
        return self.cfg.get("aws_region", "region", "aws_default_region", "default_region") or \
            os.environ.get("AWS_DEFAULT_REGION") or None

    def aws_client(self, service: str, endpoint_url: str | None = None, region: str | None = None) -> Any:
        """A boto3 client of another AWS service (e.g. "sts") with this store's credentials and
        region; its endpoint is `endpoint_url` when given, else boto3's own resolution
        (AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, or the service's public endpoint) — never
        the S3 endpoint of the store."""
        import boto3

        c = self.cfg
        session = boto3.session.Session(
            aws_access_key_id=c.get("aws_access_key_id", "access_key_id"),
            aws_secret_access_key=c.get("aws_secret_access_key", "secret_access_key"),
            aws_session_token=c.get("aws_session_token", "aws_token", "session_token", "token"),
            region_name=region or self.region,
            profile_name=c.profile,
        )
        return session.client(service, endpoint_url=endpoint_url)
