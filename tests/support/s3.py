"""An S3 endpoint on loopback that tests share: the server, credentials it accepts, and helpers."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
from botocore.config import Config

from tests.support.servers import free_port


@dataclass(frozen=True)
class S3Server:
    """An S3 endpoint on loopback and credentials it accepts."""

    endpoint: str
    access_key: str
    secret_key: str

    def client(self, secret_key: str | None = None):
        """A boto3 client for this server (optionally with another secret, to provoke auth errors)."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
            region_name="us-east-1",
            config=Config(retries={"max_attempts": 1}),
        )

    def env(self, **overrides: str) -> dict[str, str]:
        """The standard AWS variables pointing at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
            **overrides,
        }

    def make_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (tests use one bucket each, so servers can be shared)."""
        self.client().create_bucket(Bucket=bucket)

    def upload_folder(self, bucket: str, prefix: str, local: Path) -> list[str]:
        """Upload every file under ``local`` to ``s3://bucket/prefix/<relative path>``; returns the keys."""
        client = self.client()
        keys = []
        for path in sorted(p for p in local.rglob("*") if p.is_file()):
            key = f"{prefix.strip('/')}/{path.relative_to(local).as_posix()}"
            client.upload_file(str(path), bucket, key)
            keys.append(key)
        return keys

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under ``prefix`` (all pages)."""
        keys = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return sorted(keys)

    def read(self, bucket: str, key: str) -> bytes:
        """The bytes of one object."""
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()


@contextmanager
def moto_server() -> Iterator[S3Server]:
    """moto's threaded S3 server on a free loopback port (no auth checks, in memory)."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3Server(f"http://127.0.0.1:{port}", "AKIAMOTOTESTKEY", "moto-secret-Zq81xWv3")
    finally:
        server.stop()
