"""The Recommendation record (CONTRACT.md) every model produces."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

KINDS = ("idle_gpu", "gpu_count", "gpu_type", "quantization", "spot_mix", "commitment", "onprem_vs_cloud")


def stable_id(kind: str, *parts: str | None) -> str:
    """The same finding gets the same id on every run (decisions attach to it)."""
    text = "|".join([kind, *[p or "" for p in parts]])
    return f"{kind}-{hashlib.sha1(text.encode()).hexdigest()[:16]}"


def provider_code(provider_name: str | None) -> str | None:
    """FOCUS ProviderName → the short code recommendations use (aws | gcp | onprem | …)."""
    if not provider_name:
        return None
    name = provider_name.lower()
    for needle, code in (("amazon", "aws"), ("aws", "aws"), ("google", "gcp"), ("gcp", "gcp"),
                         ("microsoft", "azure"), ("azure", "azure"), ("oracle", "oci"), ("onprem", "onprem"),
                         ("on-prem", "onprem")):
        if needle in name:
            return code
    return name


def money(value: Decimal | float | int) -> Decimal:
    return Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _plain(value: Any) -> Any:
    """JSON-safe plain Python: Decimals become floats, numpy scalars their Python values."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return value.item()
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return value


@dataclass
class Recommendation:
    id: str
    kind: str
    team: str | None
    provider: str | None
    resource_id: str | None
    workload: str | None
    current: dict[str, Any]
    proposed: dict[str, Any]
    monthly_savings_usd: Decimal
    confidence: float
    risk: str
    evidence: dict[str, Any]
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    status: str = "open"

    def to_dict(self) -> dict[str, Any]:
        return _plain(asdict(self))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False)
