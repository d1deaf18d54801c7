"""Every paginated API call an ingestor makes is bounded: pages, wall time, and any token seen before.

A service that keeps answering the same ``NextToken``, or tokens that cycle (A, B, A, …; A, B, C, A, …),
would make a naive ``while token:`` loop run forever, and the daemon runs one job at a time.
:class:`Pages` follows the tokens of one listing and stops it, naming the source, the call and the bound,
when a token comes back that this listing saw before (at any distance, not only the last one), when it
has read ``max_pages`` pages, or when it has paged ``max_listing_s`` seconds (``ingest.core.transport``'s
``Bounds``: 5,000 pages and 5 minutes unless the source sets them; the runner hands each run its own). :meth:`Pages.each` bounds an iterator
of pages (a boto3 paginator, a google-cloud pager) the same way, reading each page's next token with
``token_of`` (boto3's page dicts are read by default). Every paginator of every ingestor goes through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from gpufinops.ingest.core.transport import Bounds, BoundTripped, current

T = TypeVar("T")
# the continuation fields of AWS's (and Google's JSON) answers: a page's next token, whatever the call
TOKEN_FIELDS = (
    "NextToken",
    "nextToken",
    "NextContinuationToken",
    "NextMarker",
    "NextKeyMarker",
    "NextPageToken",
    "nextPageToken",
)


def page_token(page: Any) -> str | None:
    """The next token a page answered (a boto3 page dict, or an object with ``next_page_token``)."""
    if isinstance(page, dict):
        found = [str(page[f]) for f in TOKEN_FIELDS if page.get(f)]
        return "|".join(found) or None
    return getattr(page, "next_page_token", None) or None


def _cut(token: str) -> str:
    """A token as a sentence quotes it: a long one keeps its start and end."""
    return token if len(token) <= 40 else f"{token[:24]}…{token[-12:]}"


class Pages:
    def __init__(
        self,
        source: str,
        what: str,
        *,
        bounds: Bounds | None = None,
        max_pages: int | None = None,
        max_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source, self.what = source, what
        bounds = bounds or current()  # the running source's own (ingest.core.transport.running)
        self.max_pages = max_pages if max_pages is not None else bounds.max_pages
        self.max_seconds = max_seconds if max_seconds is not None else bounds.max_listing_s
        self._clock = clock
        self._started = clock()
        self._seen: dict[str, int] = {}
        self.pages = 0

    def _count(self) -> None:
        self.pages += 1
        if self.pages > self.max_pages:
            raise BoundTripped(
                f"{self.source}: {self.what} answered more than {self.max_pages} pages (max_pages); stopped",
                "max_pages",
            )
        elapsed = self._clock() - self._started
        if elapsed > self.max_seconds:
            raise BoundTripped(
                f"{self.source}: {self.what} still paging after {elapsed:.0f} s, {self.pages} pages "
                f"(max_listing_s {self.max_seconds:g}); stopped",
                "max_listing_s",
            )

    def _check(self, token: str | None) -> str | None:
        if not token:
            return None
        if token in self._seen:
            period = self.pages - self._seen[token]
            raise BoundTripped(
                f"{self.source}: {self.what} answered a page token it answered {period} page(s) before "
                f"({_cut(token)!r}, page {self.pages}): the listing loops; stopped",
                "page token",
            )
        self._seen[token] = self.pages
        return token

    def follow(self, token: str | None) -> str | None:
        """The next page's token after a page that answered ``token`` (None or empty: the last page)."""
        self._count()
        return self._check(token)

    def each(self, pages: Iterable[T], token_of: Callable[[T], str | None] = page_token) -> Iterator[T]:
        """``pages`` (a boto3 paginator's, a google pager's ``.pages``), each counted against the bounds and
        its next token (``token_of(page)``) checked against every token this listing answered before."""
        for page in pages:
            self._count()
            self._check(token_of(page))
            yield page
