"""Fixtures for the storage tests: a session-wide moto S3 server, a scoped AWS environment
pointing at it, and a fresh bucket per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fixtures.moto import TEST_CREDENTIALS, start_moto_server


@pytest.fixture(scope="session")
def moto_server() -> Iterator[str]:
    """Endpoint URL of moto's S3 server on 127.0.0.1 (one per test session)."""
    url, stop = start_moto_server()
    yield url
    stop()


@pytest.fixture
def s3_env(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """AWS environment pointing at the moto server, isolated from the user's AWS config and
    restored after the test. Returns the endpoint URL."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL_S3",
                "AWS_ALLOW_HTTP", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/tahoe-test-aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/tahoe-test-aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEST_CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEST_CREDENTIALS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_DEFAULT_REGION", TEST_CREDENTIALS["region"])
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server)
    return moto_server


@pytest.fixture
def s3_bucket(s3_env: str) -> str:
    """A new, empty bucket on the moto server; returns its name."""
    import boto3

    name = f"tahoe-test-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_store(s3_bucket: str):
    """(S3LogStore configured from the scoped environment, table root "s3://<bucket>/t")."""
    from tahoe.storage import log_store_for

    return log_store_for(f"s3://{s3_bucket}/t")


# --- every object store: the emulators (see tests/fixtures/emulators.py) ------------------------

STORE_KINDS = ["s3", "azure", "gcs"]


class Emulators:
    """The emulators of one test session, each started on first use and stopped at the end."""

    def __init__(self) -> None:
        self._running: dict = {}

    def get(self, kind: str):
        from tests.fixtures import emulators

        if kind not in self._running:
            start = {"s3": emulators.start_s3, "azure": emulators.start_azurite, "gcs": emulators.start_gcs}[kind]
            self._running[kind] = start()
        return self._running[kind]

    def stop(self) -> None:
        for em in self._running.values():
            em.stop()


@pytest.fixture(scope="session")
def emulators() -> Iterator[Emulators]:
    ems = Emulators()
    yield ems
    ems.stop()


@pytest.fixture(params=STORE_KINDS)
def em(request, emulators):
    """One object-store emulator (S3: moto, Azure: Azurite, GCS: fake-gcs-server), per param."""
    return emulators.get(request.param)


def new_bucket(em) -> str:
    name = f"tahoe-{uuid.uuid4().hex[:12]}"
    em.make_bucket(name)
    return name
