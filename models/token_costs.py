"""A GPU-type or quantization move in $ per 1M tokens: the evidence of findings on resources that serve tokens.

For each finding of a kind whose throughput is kept by a predictor (its spec's ``predictor``: ``gpu_type``,
``quantization``) whose resource served tokens (``serving_metrics_hourly``,
charged to the resource as ``derived.unit_costs`` charges them), the evidence gains the tokens served per
month (the window's tokens, over the finding's ``window_days`` ending at the last serving hour, scaled to a
month) and the GPU cost per 1M tokens now and after the move, the same tokens served on the proposed
configuration (the move's own rules keep the throughput): ``usd_per_1m_tokens_current``,
``usd_per_1m_tokens_proposed`` and ``usd_per_1m_tokens_saved``. Resources that serve no tokens are unchanged.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import duckdb

from gpufinops.derived import unit_costs
from gpufinops.models import registry
from gpufinops.models.recommendation import Recommendation

DAYS_PER_MONTH = 30.4375


def _per_million(monthly_cost: object, tokens_per_month: float) -> float | None:
    if monthly_cost is None or tokens_per_month <= 0:
        return None
    return round(float(Decimal(str(monthly_cost))) * 1e6 / tokens_per_month, 4)


def annotate(con: duckdb.DuckDBPyConnection, recommendations: list[Recommendation]) -> list[Recommendation]:
    """``recommendations`` with the $ per 1M tokens of each move on a serving resource in its evidence."""
    moves = set(registry.predictor_kinds())  # the same tokens served on the proposed configuration
    wanted = [r for r in recommendations if r.kind in moves and r.resource_id]
    if not wanted:
        return recommendations
    last = con.execute("SELECT max(hour) FROM serving_metrics_hourly").fetchall()[0][0]
    if last is None:
        return recommendations
    served: dict[float, dict[str, float]] = {}
    for rec in wanted:
        days = float(rec.evidence.get("window_days") or 14)
        if days not in served:
            frame = unit_costs.tokens_by_resource(con, start=last - timedelta(days=days), end=last + timedelta(hours=1))
            served[days] = {
                row["resource_id"]: (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
                for row in frame.iter_rows(named=True)
            }
        tokens = served[days].get(rec.resource_id or "", 0.0)
        if tokens <= 0:
            continue
        per_month = tokens * DAYS_PER_MONTH / days
        now = _per_million(rec.current.get("monthly_cost_usd"), per_month)
        after = _per_million(rec.proposed.get("monthly_cost_usd"), per_month)
        rec.evidence.update(
            served_tokens_per_month=round(per_month),
            usd_per_1m_tokens_current=now,
            usd_per_1m_tokens_proposed=after,
            usd_per_1m_tokens_saved=round(now - after, 4) if now is not None and after is not None else None,
        )
    return recommendations
