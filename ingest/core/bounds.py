"""What one source's network reads may take: the defaults and the per-source ``Bounds`` (the options that
set them are ``ingest.core.spec.TransportOptions``; the layer that enforces them ``ingest.core.transport``
and ``ingest.core.paging``; the table of them docs/sources/loads.md#network-bounds)."""

from __future__ import annotations

from dataclasses import dataclass

CONNECT_TIMEOUT_S = 10.0
DEADLINE_S = 120.0
MAX_BODY_MB = 256.0
MAX_PAGES = 5_000
MAX_LISTING_S = 300.0


@dataclass(frozen=True)
class Bounds:
    """What one source's network reads may take (every field a source option: ``TransportOptions``)."""

    connect_timeout_s: float = CONNECT_TIMEOUT_S
    timeout_s: float = DEADLINE_S  # the whole request: connect, headers and body
    max_body_mb: float = MAX_BODY_MB
    max_pages: int = MAX_PAGES  # pages of one listing
    max_listing_s: float = MAX_LISTING_S  # wall time of one listing, all its pages

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 2**20)


DEFAULT = Bounds()
