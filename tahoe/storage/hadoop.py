"""Hadoop file-system settings, as delta-spark users write them (session confs `spark.hadoop.fs.*`, reader and
writer options, `forPath`'s `hadoopConf`), turned into delta-rs's `storage_options`
(`storage_options_from_hadoop`).

  1. S3A: `fs.s3a.access.key`, `.secret.key`, `.session.token`, `.endpoint`, `.endpoint.region` / `.region`,
     `.path.style.access`, `.aws.credentials.provider`; `fs.s3a.bucket.<bucket>.<key>`.
  2. ABFS / WASB: account keys, SAS keys (`fs.azure.sas.*`), the OAuth client-credentials keys.
  3. GCS: `fs.gs.auth.service.account.json.keyfile`, `fs.gs.auth.type`.
  4. Other keys do nothing for tahoe: refused by name with `strict`, left unread in session confs.
Explicit `storage_options` win over mapped ones."""

from __future__ import annotations

import re
from typing import Any, Mapping
from urllib.parse import urlsplit

from ..errors import InvalidOptionError

__all__ = ["storage_options_from_hadoop", "is_hadoop_key", "HADOOP_PREFIXES"]

HADOOP_PREFIXES = ("fs.", "google.cloud.auth.")
_SPARK_HADOOP = "spark.hadoop."

_S3 = {"access.key": "aws_access_key_id", "secret.key": "aws_secret_access_key",
       "session.token": "aws_session_token", "endpoint.region": "aws_region", "region": "aws_region"}
# S3A credential providers whose credentials object_store finds the same way (the keys above, the
# environment, the instance's role) — any other provider class is refused by name
_S3_PROVIDERS = {
    "org.apache.hadoop.fs.s3a.simpleawscredentialsprovider": None,
    "org.apache.hadoop.fs.s3a.temporaryawscredentialsprovider": None,
    "org.apache.hadoop.fs.s3a.anonymousawscredentialsprovider": ("aws_skip_signature", "true"),
    "com.amazonaws.auth.environmentvariablecredentialsprovider": None,
    "software.amazon.awssdk.auth.credentials.environmentvariablecredentialsprovider": None,
    "com.amazonaws.auth.defaultawscredentialsproviderchain": None,
    "software.amazon.awssdk.auth.credentials.defaultcredentialsprovider": None,
    "org.apache.hadoop.fs.s3a.auth.iaminstancecredentialsprovider": None,
    "com.amazonaws.auth.instanceprofilecredentialsprovider": None,
    "software.amazon.awssdk.auth.credentials.instanceprofilecredentialsprovider": None,
}
_AZURE_HOST = r"(?P<account>[a-z0-9]+)\.(?:dfs|blob)\.core\.(?:windows\.net|chinacloudapi\.cn|usgovcloudapi\.net)"
_AZURE_KEY = re.compile(rf"^fs\.azure\.account\.key\.{_AZURE_HOST}$")
_AZURE_WASB_SAS = re.compile(rf"^fs\.azure\.sas\.(?P<container>[^.]+)\.{_AZURE_HOST}$")
_AZURE_FIXED_SAS = re.compile(rf"^fs\.azure\.sas\.fixed\.token(?:\.{_AZURE_HOST})?$")
_AZURE_OAUTH = re.compile(rf"^fs\.azure\.account\.oauth2\.client\.(?P<what>id|secret|endpoint)(?:\.{_AZURE_HOST})?$")
_AZURE_AUTH_TYPE = re.compile(rf"^fs\.azure\.account\.auth\.type(?:\.{_AZURE_HOST})?$")
_AZURE_PROVIDER = re.compile(rf"^fs\.azure\.account\.oauth\.provider\.type(?:\.{_AZURE_HOST})?$")
_GCS_KEYFILE = ("fs.gs.auth.service.account.json.keyfile", "google.cloud.auth.service.account.json.keyfile")
# keys that only configure the connector itself: nothing to map, nothing lost
_CONNECTOR_ONLY = re.compile(r"^fs\.(?:s3a|azure|gs|abfss?|wasbs?)\.impl$|^fs\.abstractfilesystem\.[a-z0-9]+\.impl$|"
                             r"^fs\.gs\.project\.id$")


def is_hadoop_key(key: str) -> bool:
    """Whether an option name is a Hadoop file-system key (`fs.*`, `spark.hadoop.fs.*`)."""
    k = key.strip().lower()
    if k.startswith(_SPARK_HADOOP):
        k = k[len(_SPARK_HADOOP):]
    return k.startswith(HADOOP_PREFIXES)


def _true(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes")


def storage_options_from_hadoop(conf: Mapping[str, Any], uri: str | None = None, strict: bool = True) -> dict[str, str]:
    """The storage options Hadoop keys `conf` stand for (see the module docstring); `uri` (the
    table's location) picks per-bucket S3A keys. `strict`: a key that cannot be mapped raises
    InvalidOptionError naming it."""
    bucket = None
    if uri and "://" in uri:
        bucket = urlsplit(uri).netloc.split("@", 1)[0] or None
    out: dict[str, str] = {}
    ssl: bool | None = None
    refused: list[str] = []
    items = []
    for raw, value in conf.items():
        if value is None:
            continue
        key = str(raw).strip()
        low = key.lower()
        if low.startswith(_SPARK_HADOOP):
            key, low = key[len(_SPARK_HADOOP):], low[len(_SPARK_HADOOP):]
        items.append((key, low, str(value)))
    # per-bucket S3A keys of the table's bucket win over the general ones (as in S3A)
    per_bucket = f"fs.s3a.bucket.{bucket.lower()}." if bucket else None
    items.sort(key=lambda kv: bool(per_bucket and kv[1].startswith(per_bucket)))
    for key, low, value in items:
        if low.startswith("fs.s3a.bucket."):
            if per_bucket is None or not low.startswith(per_bucket):
                continue   # another bucket's: not this table's
            low = "fs.s3a." + low[len(per_bucket):]
        if low.startswith("fs.s3a."):
            name = low[len("fs.s3a."):]
            if name in _S3:
                out[_S3[name]] = value
            elif name == "endpoint":
                out["aws_endpoint_url"] = value
            elif name == "connection.ssl.enabled":
                ssl = _true(value)
            elif name == "path.style.access":
                out["aws_virtual_hosted_style_request"] = "false" if _true(value) else "true"
            elif name == "aws.credentials.provider":
                for cls in (c.strip() for c in value.split(",") if c.strip()):
                    if cls.lower() not in _S3_PROVIDERS:
                        refused.append(f"{key}={cls}")
                    elif _S3_PROVIDERS[cls.lower()]:
                        k, v = _S3_PROVIDERS[cls.lower()]
                        out[k] = v
            elif not _CONNECTOR_ONLY.match(low):
                refused.append(key)
            continue
        if low.startswith("fs.azure."):
            if m := _AZURE_KEY.match(low):
                out["azure_storage_account_name"] = m.group("account")
                out["azure_storage_account_key"] = value
            elif m := _AZURE_WASB_SAS.match(low):
                out["azure_storage_account_name"] = m.group("account")
                out["azure_storage_sas_key"] = value
            elif m := _AZURE_FIXED_SAS.match(low):
                if m.group("account"):
                    out["azure_storage_account_name"] = m.group("account")
                out["azure_storage_sas_key"] = value
            elif m := _AZURE_OAUTH.match(low):
                if m.group("account"):
                    out["azure_storage_account_name"] = m.group("account")
                what = m.group("what")
                if what == "endpoint":
                    # https://login.microsoftonline.com/<tenant>/oauth2/token
                    parts = [p for p in urlsplit(value).path.split("/") if p]
                    if not parts:
                        refused.append(f"{key}={value}")
                        continue
                    out["azure_storage_tenant_id"] = parts[0]
                else:
                    out[f"azure_storage_client_{what}"] = value
            elif _AZURE_AUTH_TYPE.match(low):
                if value.strip().lower() not in ("sharedkey", "oauth", "sas"):
                    refused.append(f"{key}={value}")
            elif _AZURE_PROVIDER.match(low):
                if not value.strip().lower().endswith(".clientcredstokenprovider"):
                    refused.append(f"{key}={value}")
            elif not _CONNECTOR_ONLY.match(low):
                refused.append(key)
            continue
        if low in _GCS_KEYFILE:
            out["google_service_account"] = value
            continue
        if low == "fs.gs.auth.type":
            if value.strip().upper() not in ("SERVICE_ACCOUNT_JSON_KEYFILE", "APPLICATION_DEFAULT",
                                             "COMPUTE_ENGINE"):
                refused.append(f"{key}={value}")
            continue
        if _CONNECTOR_ONLY.match(low):
            continue
        refused.append(key)
    if ssl is not None:
        ep = out.get("aws_endpoint_url")
        if ep and "://" not in ep:
            out["aws_endpoint_url"] = ("https://" if ssl else "http://") + ep
        if not ssl:
            out["aws_allow_http"] = "true"
    if refused and strict:
        raise InvalidOptionError(
            f"Hadoop file-system setting(s) {', '.join(sorted(refused))}: tahoe has no Hadoop connector and "
            f"cannot map them to its storage options. It maps the credential and endpoint keys of S3A "
            f"(fs.s3a.access.key, secret.key, session.token, endpoint, endpoint.region, path.style.access, "
            f"connection.ssl.enabled, aws.credentials.provider), ABFS/WASB (fs.azure.account.key.<account>..., "
            f"fs.azure.sas..., fs.azure.account.oauth2.client.*) and the GCS connector "
            f"(fs.gs.auth.service.account.json.keyfile); give anything else as storage.<key> (delta-rs's "
            f"storage_options keys)")
    return out
