"""delta-spark's Hadoop file-system keys mapped to storage options (`tahoe.storage.hadoop`): the
keys S3A, ABFS / WASB and the GCS connector document, each mapped to the object_store key that
means the same (oracle: the connectors' documented meaning, and object_store accepting the result
for its store), per-bucket S3A keys, and refusal by name of what cannot be mapped."""

from __future__ import annotations

import pytest

from tahoe.errors import InvalidOptionError
from tahoe.storage.hadoop import is_hadoop_key, storage_options_from_hadoop
from tahoe.storage.options import store_config


def test_s3a_keys():
    got = storage_options_from_hadoop({
        "spark.hadoop.fs.s3a.access.key": "AK", "fs.s3a.secret.key": "SK", "fs.s3a.session.token": "ST",
        "fs.s3a.endpoint": "minio.local:9000", "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.path.style.access": "true", "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"})
    assert got == {"aws_access_key_id": "AK", "aws_secret_access_key": "SK", "aws_session_token": "ST",
                   "aws_endpoint_url": "http://minio.local:9000", "aws_allow_http": "true",
                   "aws_virtual_hosted_style_request": "false", "aws_region": "eu-west-1"}
    assert store_config("s3", got).config   # object_store takes every key
    anon = storage_options_from_hadoop(
        {"fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"})
    assert anon == {"aws_skip_signature": "true"}


def test_per_bucket_keys_apply_to_their_bucket_only():
    conf = {"fs.s3a.access.key": "general", "fs.s3a.bucket.lake.access.key": "lake-key",
            "fs.s3a.bucket.other.secret.key": "not-ours"}
    assert storage_options_from_hadoop(conf, "s3a://lake/t") == {"aws_access_key_id": "lake-key"}
    assert storage_options_from_hadoop(conf, "s3://else/t") == {"aws_access_key_id": "general"}


def test_azure_keys():
    got = storage_options_from_hadoop({"fs.azure.account.key.acct.dfs.core.windows.net": "KEY"})
    assert got == {"azure_storage_account_name": "acct", "azure_storage_account_key": "KEY"}
    got = storage_options_from_hadoop({"fs.azure.sas.cont.acct.blob.core.windows.net": "sv=1&sig=x"})
    assert got == {"azure_storage_account_name": "acct", "azure_storage_sas_key": "sv=1&sig=x"}
    got = storage_options_from_hadoop({
        "fs.azure.account.auth.type.acct.dfs.core.windows.net": "OAuth",
        "fs.azure.account.oauth.provider.type.acct.dfs.core.windows.net":
            "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider",
        "fs.azure.account.oauth2.client.id.acct.dfs.core.windows.net": "app",
        "fs.azure.account.oauth2.client.secret.acct.dfs.core.windows.net": "secret",
        "fs.azure.account.oauth2.client.endpoint.acct.dfs.core.windows.net":
            "https://login.microsoftonline.com/tenant-1/oauth2/token"})
    assert got == {"azure_storage_account_name": "acct", "azure_storage_client_id": "app",
                   "azure_storage_client_secret": "secret", "azure_storage_tenant_id": "tenant-1"}
    assert store_config("azure", got).config


def test_gcs_keys():
    got = storage_options_from_hadoop({"fs.gs.auth.service.account.json.keyfile": "/k.json",
                                       "fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE", "fs.gs.project.id": "p"})
    assert got == {"google_service_account": "/k.json"}


@pytest.mark.parametrize("key,value", [
    ("fs.s3a.assumed.role.arn", "arn:aws:iam::1:role/r"),
    ("fs.s3a.connection.maximum", "100"),
    ("fs.s3a.aws.credentials.provider", "com.example.MyProvider"),
    ("fs.azure.account.oauth.provider.type", "org.apache.hadoop.fs.azurebfs.oauth2.MsiTokenProvider"),
    ("fs.gs.auth.type", "USER_CREDENTIALS"),
    ("fs.hdfs.impl.disable.cache", "true"),
])
def test_unmappable_keys_are_refused_by_name(key, value):
    with pytest.raises(InvalidOptionError, match=key.replace(".", r"\.")):
        storage_options_from_hadoop({key: value})
    # session confs may serve Spark's own connectors: left unread, not refused
    assert storage_options_from_hadoop({key: value}, strict=False) == {}


def test_is_hadoop_key():
    assert is_hadoop_key("fs.s3a.access.key") and is_hadoop_key("spark.hadoop.fs.gs.auth.type")
    assert is_hadoop_key("google.cloud.auth.service.account.json.keyfile")
    assert not is_hadoop_key("storage.aws_region") and not is_hadoop_key("versionAsOf")
