"""fsspec filesystems from URLs, with S3 settings taken from the standard AWS environment."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import fsspec
from fsspec.core import url_to_fs

from pipelines.rows import sql_path
from pipelines.settings import HTTP_TIMEOUT_S


def http_timeout_s() -> int:
    """Connect and read timeout of every object-store request, in seconds (``TRACELAKE_HTTP_TIMEOUT_S``)."""
    return int(HTTP_TIMEOUT_S.number())


@dataclass(frozen=True)
class S3Access:
    """How to reach an S3 store: explicit options win over the standard AWS environment. The one translation of
    credentials and endpoint, for fsspec (:func:`storage_options_for`), DuckDB (:meth:`duckdb_secret`) and Polars
    (:meth:`polars_options`)."""

    key: str | None
    secret: str | None
    token: str | None
    region: str
    endpoint_url: str | None

    @classmethod
    def of(cls, options: dict[str, Any] | None) -> S3Access:
        """From fsspec ``options`` (``key``, ``secret``, ``token``, ``client_kwargs.endpoint_url``) and the AWS_*
        variables."""
        options = options or {}
        env = os.environ.get
        return cls(
            key=options.get("key") or env("AWS_ACCESS_KEY_ID"),
            secret=options.get("secret") or env("AWS_SECRET_ACCESS_KEY"),
            token=options.get("token") or env("AWS_SESSION_TOKEN"),
            region=env("AWS_REGION") or env("AWS_DEFAULT_REGION") or "us-east-1",
            endpoint_url=(options.get("client_kwargs") or {}).get("endpoint_url") or options.get("endpoint_url")
            or env("AWS_ENDPOINT_URL_S3") or env("AWS_ENDPOINT_URL"),
        )

    def duckdb_secret(self) -> str:
        """``CREATE TEMPORARY SECRET`` for DuckDB's httpfs: held by the connection, never stored in a catalog."""
        fields: dict[str, str | bool | None] = {"key_id": self.key, "secret": self.secret,
                                                "session_token": self.token, "region": self.region}
        if self.endpoint_url:
            parsed = urlsplit(self.endpoint_url)
            fields |= {"endpoint": parsed.netloc, "use_ssl": parsed.scheme == "https", "url_style": "path"}
        body = ", ".join(
            f"{key} {value}" if isinstance(value, bool) else f"{key} {sql_path(value)}"
            for key, value in fields.items() if value not in (None, "")
        )
        return f"create or replace temporary secret tracelake_s3 (type s3, {body})"

    def polars_options(self) -> dict[str, str]:
        """The same in the form of Polars' native object-store client."""
        out = {"aws_region": self.region}
        if self.endpoint_url:
            out |= {"aws_endpoint_url": self.endpoint_url, "aws_allow_http": str(self.endpoint_url.startswith("http://")).lower()}
        for value, name in ((self.key, "aws_access_key_id"), (self.secret, "aws_secret_access_key"),
                            (self.token, "aws_session_token")):
            if value:
                out[name] = value
        return out


S3_CALL_ATTEMPTS = 2
"""Tries of each s3fs call that times out or breaks off mid-read (s3fs's default: 5), each of which botocore makes up
to three requests (``max_attempts`` 2: retries after the first): on an endpoint that accepts connections and never
answers, an ingest waited out 15 timeouts before its error (7.5 min at the default timeout), now 6."""


def storage_options_for(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Return fsspec options for ``url``: explicit ``options`` win over the AWS environment.

    s3fs reads AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY itself; the endpoint is passed explicitly because not every
    botocore build honours AWS_ENDPOINT_URL, and only the endpoint goes in client_kwargs (a region there makes bucket
    creation fail on S3-compatible servers).
    """
    merged = dict(options or {})
    if url.startswith(("s3://", "s3a://")):
        endpoint = S3Access.of(options).endpoint_url
        client_kwargs = dict(merged.get("client_kwargs") or {})
        if endpoint and "endpoint_url" not in merged:
            client_kwargs.setdefault("endpoint_url", endpoint)
        if client_kwargs:
            merged["client_kwargs"] = client_kwargs
        # An endpoint that accepts connections and never answers must fail, not hang for minutes.
        config = dict(merged.get("config_kwargs") or {})
        config.setdefault("connect_timeout", http_timeout_s())
        config.setdefault("read_timeout", http_timeout_s())
        config.setdefault("retries", {"max_attempts": 2})
        merged["config_kwargs"] = config
    return merged


def filesystem(url: str, options: dict[str, Any] | None = None) -> tuple[fsspec.AbstractFileSystem, str]:
    """Return ``(filesystem, path)`` for a local path or fsspec URL."""
    fs, path = url_to_fs(url, **storage_options_for(url, options))
    if url.startswith(("s3://", "s3a://")):
        fs.retries = S3_CALL_ATTEMPTS  # an attribute of s3fs's instances, not an option of its constructor
    return fs, path.rstrip("/") or path


def join(url: str, *parts: str) -> str:
    """Join path segments onto a URL or local path with ``/``."""
    return "/".join([url.rstrip("/"), *(p.strip("/") for p in parts)])


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` is the local filesystem (where renames are atomic)."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol
    return "file" in protocols or "local" in protocols


def full_url(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """Return the URL a user would type for ``path`` on ``fs`` (``s3://b/k`` or a local path)."""
    return path if is_local(fs) else fs.unstrip_protocol(path)


def redact(text: str) -> str:
    """Remove anything that looks like a credential from a message before it is shown or stored."""
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID"):
        value = os.environ.get(name)
        if value:
            text = text.replace(value, "***")
    return re.sub(r"(?i)((?:secret|token|password|key)[\w-]*['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]+", r"\1***", text)


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a storage failure a user can act on (missing bucket or path, no or wrong
    credentials, endpoint down) rather than a bug: such errors are shown as one line, not a traceback."""
    if isinstance(exc, OSError):  # FileNotFoundError, PermissionError, ConnectionError; s3fs maps most here
        return True
    return any(
        klass.__module__.split(".")[0] in ("botocore", "aiobotocore", "s3fs", "aiohttp", "fsspec")
        for klass in type(exc).__mro__
    )


# Failures of the conversation with a store, not of what it holds: refused, reset, timed out, throttled, 5xx.
_TRANSIENT_ERRNOS = {errno.EBUSY, errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNREFUSED, errno.ECONNRESET,
                     errno.ECONNABORTED, errno.EPIPE, errno.EHOSTUNREACH, errno.ENETUNREACH,
                     getattr(errno, "EREMOTEIO", errno.EIO)}
_TRANSIENT_CLASSES = {"EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError", "ConnectTimeoutError",
                      "ResponseStreamingError", "ClientConnectionError", "ServerDisconnectedError",
                      "ClientPayloadError", "ServerTimeoutError", "IncompleteRead", "ProtocolError"}
_TRANSIENT_CODES = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable",
                    "InternalError", "RequestLimitExceeded", "TooManyRequests"}
_NETWORK_MODULES = ("botocore", "aiobotocore", "aiohttp", "urllib3", "http", "s3fs")


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is a failure to talk to a store rather than a file's
    content or absence: another try later may succeed (s3fs and botocore retried it already)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        if isinstance(current, OSError) and current.errno in _TRANSIENT_ERRNOS:
            return True
        for klass in type(current).__mro__:
            if klass.__name__ in _TRANSIENT_CLASSES and klass.__module__.split(".")[0] in _NETWORK_MODULES:
                return True
        response = getattr(current, "response", None)
        if isinstance(response, dict):
            error, meta = response.get("Error") or {}, response.get("ResponseMetadata") or {}
            if error.get("Code") in _TRANSIENT_CODES or int(meta.get("HTTPStatusCode") or 0) >= 500:
                return True
        current = current.__cause__ or current.__context__
    return False


_CREDENTIAL_ERRORS = ("NoCredentialsError", "Unable to locate credentials", "InvalidAccessKeyId",
                      "SignatureDoesNotMatch", "AccessDenied", "ExpiredToken")
CREDENTIALS_HINT = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL for MinIO, SeaweedFS, ...), "
                    "or pass --storage-option key=... --storage-option secret=...")


def describe_error(exc: BaseException) -> str:
    """One redacted line for a storage error: its type and message, and how to give credentials when they failed."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    line = f"{type(exc).__name__}: {message}"
    if any(marker in line for marker in _CREDENTIAL_ERRORS):
        line += f" ({CREDENTIALS_HINT})"
    return redact(line)
