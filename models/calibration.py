"""Shown confidence = the share of such findings that were right.

Each model scores its own confidence from its evidence (coverage, days measured, how the target's
utilisation was predicted); those raw scores order findings well but are not probabilities. The shown
confidence rescales them per kind so that, on the second generator's training seeds, the mean shown
confidence equals the share of findings that were right there (shrunk towards the share over every kind
by :data:`PRIOR` findings' worth), keeping a quarter of each raw score's distance from its kind's mean
(the order within a kind). ``gpufinops evaluate`` fits this table on the training seeds and
checks it, per confidence band, on the held-out seed; the raw score stays in the evidence
(``confidence_raw``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpufinops.models.recommendation import Recommendation

# kind -> (share right on the training seeds, smoothed; mean raw confidence there): `gpufinops evaluate`
# prints this table as "fitted calibration" (second generator, seeds 1 and 2, 35 days).
CALIBRATION: dict[str, tuple[float, float]] = {
    "commitment": (0.998, 0.899),
    "gpu_count": (0.993, 0.900),
    "gpu_type": (0.997, 0.748),
    "idle_gpu": (0.995, 0.837),
    "quantization": (0.990, 0.510),
    "spot_mix": (0.995, 0.724),
}
CEILING = 0.95  # never shown above this: a fleet unlike the generator's can be wrong where it was not
BANDS = ((0.0, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01))


SPREAD = 0.25  # how much of a raw score's distance from its kind's mean the shown confidence keeps
PRIOR = 2.0  # findings' worth of the pooled share each kind's share is shrunk towards


def calibrated(kind: str, raw: float) -> float:
    fitted = CALIBRATION.get(kind)
    if fitted is None:
        return raw
    share, mean_raw = fitted
    return round(max(0.05, min(CEILING, share + SPREAD * (raw - mean_raw))), 3)


def apply(recs: list[Recommendation]) -> list[Recommendation]:
    """Each recommendation with its calibrated confidence (the raw one kept in the evidence)."""
    out = []
    for r in recs:
        if r.kind not in CALIBRATION:
            out.append(r)
            continue
        evidence = {**r.evidence, "confidence_raw": r.confidence}
        out.append(dataclasses.replace(r, confidence=calibrated(r.kind, r.confidence), evidence=evidence))
    return out


def fit(findings: list[dict[str, Any]]) -> dict[str, tuple[float, float]]:
    """kind -> (smoothed share right, mean raw confidence) over findings {kind, confidence_raw, right}."""
    by: dict[str, list[dict]] = {}
    for f in findings:
        by.setdefault(f["kind"], []).append(f)
    if not findings:
        return {}
    pooled = (sum(f["right"] for f in findings) + 1) / (len(findings) + 2)
    return {
        kind: (
            round((sum(f["right"] for f in fs) + PRIOR * pooled) / (len(fs) + PRIOR), 4),
            round(sum(f["confidence_raw"] for f in fs) / len(fs), 4),
        )
        for kind, fs in sorted(by.items())
    }


def bands(findings: list[dict[str, Any]], table: dict[str, tuple[float, float]] | None = None) -> list[dict]:
    """Per confidence band: findings, the share right and the mean shown confidence (``table``: the
    calibration to show them with; default the shipped one)."""
    saved = dict(CALIBRATION)
    if table is not None:
        CALIBRATION.clear()
        CALIBRATION.update(table)
    try:
        shown = [(calibrated(f["kind"], f["confidence_raw"]), f["right"]) for f in findings]
    finally:
        CALIBRATION.clear()
        CALIBRATION.update(saved)
    out = []
    for lo, hi in BANDS:
        inside = [(c, r) for c, r in shown if lo <= c < hi]
        if inside:
            right = sum(r for _, r in inside) / len(inside)
            mean = sum(c for c, _ in inside) / len(inside)
            out.append(
                {
                    "band": f"{lo:.1f}–{min(hi, 1.0):.1f}",
                    "findings": len(inside),
                    "share_right": round(right, 3),
                    "mean_confidence": round(mean, 3),
                    "gap_points": round(abs(right - mean) * 100, 1),
                }
            )
    return out
