"""The one retry loop: an attempt a step may make again when it fails in a way that another try can get past
(a concurrent writer's conflict, files replaced under a reader).

    for attempt in retrying(5, retry_on=lambda exc: isinstance(exc, duckdb.IOException)):
        with attempt:
            ...

An attempt whose block raises a retryable error is given up silently and the loop goes on; any other error, or
the last attempt's, propagates; a block that ends without error ends the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from types import TracebackType

log = logging.getLogger(__name__)


class Attempt:
    """One try of a block (a context manager)."""

    def __init__(self, number: int, last: bool, retry_on: Callable[[BaseException], bool]) -> None:
        self.number = number
        self.last = last
        """Whether this is the last try: its failure propagates."""
        self._retry_on = retry_on
        self.failed = False

    def __enter__(self) -> Attempt:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> bool:
        if exc is None or self.last or not self._retry_on(exc):
            return False
        self.failed = True
        log.info("attempt %d failed (%s: %s); trying again", self.number, type(exc).__name__, exc)
        return True


def retrying(
    attempts: int, *, retry_on: Callable[[BaseException], bool], pause: Callable[[int], float] = lambda _: 0.0
) -> Iterator[Attempt]:
    """Up to ``attempts`` tries, ``pause(n)`` seconds before try n+1."""
    for number in range(1, attempts + 1):
        attempt = Attempt(number, number == attempts, retry_on)
        yield attempt
        if not attempt.failed:
            return
        time.sleep(pause(number))
