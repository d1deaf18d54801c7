"""Peer replicas: the same workload class measured on two GPU models is the throughput ratio itself.

Replicas of one service behind one load balancer on different GPU models serve the same request
stream, so how busy each is measures what a spec sheet can only estimate: a workload class
(``workload`` and ``precision`` tags) that keeps an L4 76 % busy while its A10G sibling reads 25 %
needs ~76 % of an L4, whatever the FLOPS ratio says. gpu_type and quantization read this first where
the class runs on both the resource's GPU and the target's at the same precision; elsewhere the
throughput predictor of :mod:`models.gpu_type` decides, overruled only upwards by :func:`other_classes`:
where other workload classes run on both GPUs and say the target is slower than the predictor
claims, their median ratio is used (a measurement that a target is slower wins; one that says it is
faster is another workload's, and is not relied on).

The prediction is the resource's p95 × the median, over the utilisation quantiles (10th … 95th), of
target ÷ source for the class; a target side at or above the saturation level reads as a lower
bound (the class is flat out there: it does not fit).
"""

from __future__ import annotations

import statistics

import numpy as np
import polars as pl

PEER_PREDICTOR, OTHER_CLASSES = "peer_replicas", "other_workloads_on_both_gpus"


def table(res: pl.DataFrame, idle_util_pct: float) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(workload, precision or "any") -> GPU model -> the class's mean utilisation quantiles there."""
    if res.is_empty():
        return {}
    usable = res.filter(
        pl.col("util_quantiles").is_not_null()
        & (pl.col("util_p95") >= idle_util_pct)
        & pl.col("workload").is_not_null()
        & pl.col("gpu_model").is_not_null()
    )
    out: dict[tuple[str, str], dict[str, list[list[float]]]] = {}
    for r in usable.with_columns(pl.col("precision").fill_null("any")).iter_rows(named=True):
        q = [float(v) for v in r["util_quantiles"]]
        out.setdefault((r["workload"], r["precision"]), {}).setdefault(r["gpu_model"], []).append(q)
    return {
        cls: {gpu: [float(v) for v in np.mean(np.array(qs), axis=0)] for gpu, qs in by.items()}
        for cls, by in out.items()
    }


def predict(
    peers: dict, row: dict, target_gpu: str | None, util: float, saturated_pct: float
) -> tuple[float, dict] | None:
    """(predicted p95 on ``target_gpu``, the evidence) from peer replicas, or None without them."""
    cls = peers.get((row.get("workload"), row.get("precision") or "any"))
    src_gpu = row.get("gpu_model")
    if not cls or target_gpu is None or src_gpu == target_gpu or src_gpu not in cls or target_gpu not in cls:
        return None
    src, tgt = cls[src_gpu], cls[target_gpu]
    ratios = [t / s for s, t in zip(src, tgt) if s > 0]
    if not ratios:
        return None
    ratio = statistics.median(ratios)
    predicted = util * ratio
    if tgt[-1] >= saturated_pct:
        predicted = max(predicted, tgt[-1])
    evidence = {
        "peer_class": f"{row.get('workload')}/{row.get('precision') or 'any'}",
        "peer_source_p95": round(src[-1], 1),
        "peer_target_p95": round(tgt[-1], 1),
        "peer_ratio": round(ratio, 3),
    }
    return predicted, evidence


def other_classes(peers: dict, row: dict, target_gpu: str | None, util: float) -> tuple[float, dict] | None:
    """(p95 on ``target_gpu`` by the median p95 ratio of the other classes measured on both GPUs, evidence)."""
    own, src_gpu = (row.get("workload"), row.get("precision") or "any"), row.get("gpu_model")
    ratios = [
        by[target_gpu][-1] / by[src_gpu][-1]
        for cls, by in peers.items()
        if cls != own and src_gpu in by and target_gpu in by and by[src_gpu][-1] > 0
    ]
    if not ratios or target_gpu == src_gpu:
        return None
    ratio = statistics.median(ratios)
    return util * ratio, {"other_classes_on_both_gpus": len(ratios), "other_classes_ratio": round(ratio, 3)}
