"""Temporary table credentials for directory-based access (spec "Access Modes", "Generate Temporary Table
Credential"): short-lived credentials reading one shared table's directory and nothing else.

  1. S3: AssumeRole of `temporaryCredentials.roleArn`, else GetFederationToken, always with the session policy
     (`session_policy`) limiting them to the table's prefix; answered as `awsTempCredentials`.
  2. Azure (`vend_azure`): a read + list SAS as `azureUserDelegationSas`; GCS tables get no directory access.
  3. Vended credentials are checked by the cloud alone and outlive a revoked recipient until they expire:
     keep `durationSeconds` short."""

from __future__ import annotations

import json
import logging

from ..storage.s3 import S3LogStore, split_s3_path
from .config import CredentialsConfig
from .errors import SharingError
from ..storage.options import parse_location

__all__ = ["CredentialVendor", "session_policy", "SESSION_NAME"]

log = logging.getLogger("tahoe.sharing")

SESSION_NAME = "delta-sharing-table"


def _partition(region: str | None) -> str:
    r = (region or "").lower()
    if r.startswith("cn-"):
        return "aws-cn"
    if r.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def session_policy(location: str, region: str | None = None) -> str:
    """The IAM session policy that allows reading the objects under `location` (an s3:// table
    root) and listing only its keys."""
    bucket, key = split_s3_path(location)
    prefix = key.strip("/")
    part = _partition(region)
    objects = f"arn:{part}:s3:::{bucket}/{prefix}/*" if prefix else f"arn:{part}:s3:::{bucket}/*"
    listing = {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": f"arn:{part}:s3:::{bucket}"}
    if prefix:
        listing["Condition"] = {"StringLike": {"s3:prefix": [f"{prefix}/*"]}}
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": objects}, listing]}, separators=(",", ":"))


class CredentialVendor:
    """Vends temporary credentials per `temporaryCredentials`, with the table's storage credentials (its
    `storageOptions`, else the AWS environment). The session policy intersects what the role or user may do.
    Answer: `{"credentials": {"location", "awsTempCredentials": {"accessKeyId", "secretAccessKey",
    "sessionToken"} | "azureUserDelegationSas": {"sasToken"}, "expirationTime"}}` (epoch ms)."""

    def __init__(self, cfg: CredentialsConfig):
        self.cfg = cfg

    def vend(self, store, location: str) -> dict:
        """The credentials for reading `location` (see the module docstring), signed or asked with
        `store`'s credentials. SharingError 500 (logged) when the cloud refuses."""
        if getattr(store, "kind", "s3") == "azure":
            return self.vend_azure(store, location)
        return self.vend_s3(store, location)

    def vend_azure(self, store, location: str) -> dict:
        """`{"location", "azureUserDelegationSas": {"sasToken"}, "expirationTime"}`: a read + list
        SAS signed with the account key: a directory SAS of the table's prefix (`sr=d`, depth `sdd`; honoured
        with a hierarchical namespace), or a container SAS (`sr=c`) when the table is the container's root or
        `temporaryCredentials.azureScope: container` asks for it. `location`: the table's abfss:// URI."""
        from datetime import datetime, timedelta, timezone

        loc = parse_location(location)
        prefix = loc.key.strip("/")
        account = store.azure_account(loc)
        key = store._azure_key()
        expiry = datetime.now(timezone.utc) + timedelta(seconds=self.cfg.duration_seconds)
        try:
            if not prefix or self.cfg.azure_scope == "container":
                from azure.storage.blob import ContainerSasPermissions, generate_container_sas

                sas = generate_container_sas(account, loc.bucket, account_key=key,
                                             permission=ContainerSasPermissions(read=True, list=True), expiry=expiry)
            else:
                from azure.storage.filedatalake import DirectorySasPermissions, generate_directory_sas

                sas = generate_directory_sas(account, loc.bucket, prefix, key,
                                             permission=DirectorySasPermissions(read=True, list=True), expiry=expiry)
        except Exception:
            log.exception("cannot sign a SAS for a shared table")
            raise SharingError(500, "INTERNAL_ERROR", "") from None
        return {"location": location, "azureUserDelegationSas": {"sasToken": sas},
                "expirationTime": int(expiry.timestamp() * 1000)}

    def vend_s3(self, store: S3LogStore, location: str) -> dict:
        """`{"location", "awsTempCredentials", "expirationTime"}` for reading `location`, STS
        called with `store`'s credentials. SharingError 500 (logged) when STS refuses."""
        cfg = self.cfg
        region = cfg.region or store.region or "us-east-1"
        policy = session_policy(location, region)
        try:
            sts = store.aws_client("sts", endpoint_url=cfg.sts_endpoint, region=region)
            if cfg.role_arn:
                kw = {"RoleArn": cfg.role_arn, "RoleSessionName": SESSION_NAME,
                      "DurationSeconds": cfg.duration_seconds, "Policy": policy}
                if cfg.external_id:
                    kw["ExternalId"] = cfg.external_id
                c = sts.assume_role(**kw)["Credentials"]
            else:
                c = sts.get_federation_token(Name=SESSION_NAME, DurationSeconds=cfg.duration_seconds,
                                             Policy=policy)["Credentials"]
        except Exception:
            log.exception("STS refused temporary credentials for a shared table")
            raise SharingError(500, "INTERNAL_ERROR", "") from None
        return {"location": location,
                "awsTempCredentials": {"accessKeyId": c["AccessKeyId"], "secretAccessKey": c["SecretAccessKey"],
                                       "sessionToken": c["SessionToken"]},
                "expirationTime": int(c["Expiration"].timestamp() * 1000)}
