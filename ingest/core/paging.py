"""Every paginated API call an ingestor makes is bounded: pages, wall time, and a token answered twice.

A service that keeps answering the same ``NextToken`` (or a page token that cycles) would make a naive
``while token:`` loop run forever, and the daemon runs one job at a time. :class:`Pages` follows the
tokens of one listing and stops it, naming the call, when a token comes back a second time, when it
has read ``max_pages`` pages, or when it has run ``max_seconds``; :meth:`Pages.each` bounds an
iterator of pages (a boto3 paginator) the same way. Every paginator of every ingestor goes through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from gpufinops.ingest.core.registry import IngestError

T = TypeVar("T")
MAX_PAGES = 10_000
MAX_SECONDS = 1800.0


class Pages:
    def __init__(
        self,
        source: str,
        what: str,
        *,
        max_pages: int = MAX_PAGES,
        max_seconds: float = MAX_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source, self.what = source, what
        self.max_pages, self.max_seconds = max_pages, max_seconds
        self._clock = clock
        self._started = clock()
        self._seen: set[str] = set()
        self.pages = 0

    def _count(self) -> None:
        self.pages += 1
        if self.pages > self.max_pages:
            raise IngestError(f"{self.source}: {self.what} answered more than {self.max_pages} pages; stopped")
        elapsed = self._clock() - self._started
        if elapsed > self.max_seconds:
            raise IngestError(
                f"{self.source}: {self.what} still paging after {elapsed:.0f} s ({self.pages} pages); stopped"
            )

    def follow(self, token: str | None) -> str | None:
        """The next page's token after a page that answered ``token`` (None or empty: the last page)."""
        self._count()
        if not token:
            return None
        if token in self._seen:
            raise IngestError(
                f"{self.source}: {self.what} answered the same page token twice (after {self.pages} pages): "
                f"the listing loops; stopped"
            )
        self._seen.add(token)
        return token

    def each(self, pages: Iterable[T]) -> Iterator[T]:
        """``pages`` (e.g. a boto3 paginator's), each counted against the bounds."""
        for page in pages:
            self._count()
            yield page
