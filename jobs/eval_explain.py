"""What ``gpufinops evaluate`` says about each finding on the second generator, beyond the counts.

* :func:`findings_of`: every scored finding (conditional ones apart) with its shown and raw confidence
  and whether the generator's truth holds it — the input of the confidence calibration.
* :func:`explain`: per kind, the false positives with their evidence and the false negatives with the
  truth, what the model saw of the resource and why it withheld it (``evaluate --explain KIND``).
* :func:`calibration`: the calibration (:mod:`models.calibration`) fitted on the training seeds (all
  but the last) and checked, per confidence band, on the held-out last seed.
"""

from __future__ import annotations

from typing import Any

from gpufinops.models import calibration as calib

EVIDENCE_KEYS = (
    "util_p95",
    "util_peak_daily",
    "mem_max_gib",
    "mem_needed_gib",
    "predicted_target_util_p95",
    "throughput_model",
    "peer_ratio",
    "other_classes_ratio",
    "busy_gpus",
    "busy_util_p95",
    "route",
    "idle_hours",
    "idle_share",
    "pattern",
    "spot_ratio",
    "spot_price_source",
)
RESOURCE_KEYS = ("instance_type", "gpu_model", "workload", "precision", "util_p95", "util_peak_daily", "active")


def _planted(truth: dict) -> tuple[dict, dict]:
    items = truth["planted"] + truth.get("commitments", [])
    planted = {(p["kind"], p["resource_id"]): p for p in items}
    members = {(p["kind"], rid): p["resource_id"] for p in items for rid in p.get("resource_ids", [])}
    return planted, members


def _scored(recs) -> list:
    return [r for r in recs if not (r.evidence or {}).get("conditional")]


def findings_of(recs, truth: dict, names: dict) -> list[dict[str, Any]]:
    planted, members = _planted(truth)
    out = []
    for r in _scored(recs):
        rid = members.get((r.kind, r.resource_id), r.resource_id)
        out.append(
            {
                "kind": r.kind,
                "machine": names.get(rid, rid),
                "confidence": r.confidence,
                "confidence_raw": (r.evidence or {}).get("confidence_raw", r.confidence),
                "right": (r.kind, rid) in planted,
            }
        )
    return out


def explain(recs, withheld, resources: list[dict], truth: dict, names: dict) -> dict[str, dict[str, list]]:
    """kind -> {"false_positives": [...], "false_negatives": [...]}, each entry with its evidence."""
    planted, members = _planted(truth)
    found = {(r.kind, members.get((r.kind, r.resource_id), r.resource_id)): r for r in _scored(recs)}
    by_resource = {row["resource_id"]: row for row in resources}
    out: dict[str, dict[str, list]] = {}
    for (kind, rid), r in sorted(found.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if (kind, rid) in planted:
            continue
        ev = {k: r.evidence[k] for k in EVIDENCE_KEYS if k in (r.evidence or {})}
        out.setdefault(kind, {"false_positives": [], "false_negatives": []})["false_positives"].append(
            {"machine": names.get(rid, rid), "action": r.proposed.get("action"), "confidence": r.confidence, **ev}
        )
    for (kind, rid), p in sorted(planted.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        if (kind, rid) in found:
            continue
        row = by_resource.get(rid, {})
        out.setdefault(kind, {"false_positives": [], "false_negatives": []})["false_negatives"].append(
            {
                "machine": names.get(rid, rid),
                "truth": {k: v for k, v in p.items() if k.startswith("target") or k in ("monthly_savings_usd",)},
                "seen": {k: row.get(k) for k in RESOURCE_KEYS if k in row},
                "withheld": [w.detail for w in withheld if w.kind == kind and w.resource_id == rid],
            }
        )
    return out


def calibration(fleets: list[dict]) -> dict[str, Any]:
    """Fitted on every seed but the last, checked on the last (needs two seeds or more)."""
    if len(fleets) < 2:
        every = [f for fl in fleets for f in fl["findings"]]
        return {"shipped": calibration_bands(every, None), "held_out_seed": None}
    training = [f for fl in fleets[:-1] for f in fl["findings"]]
    held = fleets[-1]["findings"]
    table = calib.fit(training)
    return {
        "training_seeds": [fl["seed"] for fl in fleets[:-1]],
        "held_out_seed": fleets[-1]["seed"],
        "fitted": table,
        "held_out": calibration_bands(held, table),
        "shipped": calibration_bands([f for fl in fleets for f in fl["findings"]], None),
    }


def calibration_bands(findings: list[dict], table: dict | None) -> list[dict]:
    return calib.bands(findings, table)


def render_calibration(section: dict[str, Any]) -> list[str]:
    lines = ["  confidence calibration (shown confidence vs the share of findings that were right)"]

    def rows(label: str, bands: list[dict]) -> None:
        for b in bands:
            lines.append(
                f"    {label:<34} band {b['band']}: {b['findings']:>3} findings, {b['share_right']:.0%} right, "
                f"mean confidence {b['mean_confidence']:.0%} (gap {b['gap_points']:g} points)"
            )

    if section.get("held_out_seed") is not None:
        fitted = ", ".join(f"{k} ({v[0]:.3f}, {v[1]:.3f})" for k, v in section["fitted"].items())
        lines.append(f"    fitted calibration on seeds {section['training_seeds']}: {fitted}")
        rows(f"fitted, held-out seed {section['held_out_seed']}", section["held_out"])
    rows("as shipped (models/calibration.py)", section["shipped"])
    return lines


def render_explain(fleets: list[dict], kind: str) -> str:
    lines = [f"\nWhy {kind} is wrong where it is wrong (second generator)"]
    for fl in fleets:
        entry = fl.get("explain", {}).get(kind, {"false_positives": [], "false_negatives": []})
        lines.append(
            f"  seed {fl['seed']}: {len(entry['false_positives'])} false positive(s), "
            f"{len(entry['false_negatives'])} false negative(s)"
        )
        for fp in entry["false_positives"]:
            rest = ", ".join(f"{k} {v}" for k, v in fp.items() if k not in ("machine", "action"))
            lines.append(f"    FP {fp['machine']}: {fp['action']} — {rest}")
        for fn in entry["false_negatives"]:
            lines.append(f"    FN {fn['machine']}: truth {fn['truth']}; seen {fn['seen']}")
            for w in fn["withheld"]:
                lines.append(f"       withheld: {w}")
            if not fn["withheld"]:
                lines.append("       nothing withheld: the model's rules did not consider it")
    return "\n".join(lines) + "\n"
