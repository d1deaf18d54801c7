"""The independent half of ``gpufinops evaluate``: the second fleet and the published throughput ratios.

* :func:`run_fleet` generates a :mod:`simulator.eval_fleet` fleet, ingests it with every ingestor (metrics
  first, then bills; then the restated month's second delivery), runs every model, and scores each
  kind against the generator's own truth beside its baselines (:mod:`jobs.eval_baselines`): precision,
  recall, savings error, look-alikes flagged, right target. It also checks that the warehouse holds
  the restated bill exactly (no delivery counted twice).
* :func:`real_ratio_mae` scores the throughput predictors on the published MLPerf / TensorRT-LLM
  ratios the generator did not use: util_B = util_A × throughput_A / throughput_B.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

UTIL_LEVELS = (10, 20, 30, 40, 50, 60, 70, 80)  # source utilisations the real ratios are read at


def used_groups() -> set:
    from gpufinops.simulator import eval_laws

    return set().union(*(eval_laws.service_throughput(s)[1] for s in eval_laws.SERVICES.values()))


def real_ratio_mae(model, specs: dict[str, dict]) -> dict[str, Any]:
    """MAE (utilisation points) of each predictor on the real ratios, per suite and overall."""
    from gpufinops.models import gpu_type
    from gpufinops.simulator import eval_benchmarks

    errors: dict[str, dict[str, list[float]]] = {}
    pairs = eval_benchmarks.real_pairs(exclude=used_groups())
    for pair in pairs:
        group = pair["group"]
        ratios = gpu_type.log_ratio(specs.get(pair["gpu_a"]), specs.get(pair["gpu_b"]), group.precision)
        if ratios is None:
            continue
        for util in UTIL_LEVELS:
            truth = util * pair["t_a"] / pair["t_b"]
            if truth >= gpu_type.SATURATED_PCT:
                continue
            predictions = {gpu_type.SPEC_RATIO: gpu_type.baseline(util, ratios), gpu_type.NO_CHANGE: float(util)}
            if model is not None and model.fitted is not None:
                predictions[gpu_type.REGRESSION] = model.regression(util, ratios)
            for suite in (group.suite, "all"):
                for name, value in predictions.items():
                    errors.setdefault(suite, {}).setdefault(name, []).append(abs(value - truth))
    out = {}
    for suite, by in errors.items():
        maes = {name: round(float(np.mean(v)), 2) for name, v in by.items()}
        out[suite] = {
            "points": len(next(iter(by.values()))),
            "mae_pct": maes,
            "best": min(maes, key=lambda name: maes[name]),
            "groups": len({(p["group"]) for p in pairs if suite in ("all", p["group"].suite)}),
        }
    return out


def lookalikes_flagged(recs, truth: dict) -> dict[str, list[str]]:
    found = {(r.kind, r.resource_id) for r in recs}
    out: dict[str, list[str]] = {}
    for x in truth["lookalikes"]:
        out.setdefault(x["kind"], [])
        if (x["kind"], x["resource_id"]) in found:
            out[x["kind"]].append(x["machine"])
    return out


def right_targets(recs, truth: dict) -> dict[str, dict[str, int]]:
    """Per kind with a target: hits whose proposed instance type is the truth's."""
    targets = {(p["kind"], p["resource_id"]): p.get("target_instance_type") for p in truth["planted"]}
    out: dict[str, dict[str, int]] = {}
    for r in recs:
        want = targets.get((r.kind, r.resource_id))
        if want is None:
            continue
        tally = out.setdefault(r.kind, {"hits": 0, "right_target": 0})
        tally["hits"] += 1
        tally["right_target"] += int(r.proposed.get("instance_type") == want)
    return out


def _names(truth: dict) -> dict[str | None, str]:
    return {m["resource_id"]: m["name"] for m in truth["machines"]}


def _named(score: dict, names: dict[str | None, str]) -> dict:
    return {
        kind: {**s, "missed": [names.get(r, r) for r in s["missed"]], "extra": [names.get(r, r) for r in s["extra"]]}
        for kind, s in score.items()
    }


def run_fleet(home: Path, seed: int, days: int) -> dict[str, Any]:
    """Generate, ingest (with the restatement), analyse and score one second-generator fleet."""
    from gpufinops.jobs import config as config_mod
    from gpufinops.jobs import eval_baselines, eval_explain
    from gpufinops.jobs.eval_score import score
    from gpufinops.jobs.ingest_run import run_configured
    from gpufinops.models import features, gpu_type, run_reads
    from gpufinops.models.registry import KINDS, predictor_kinds, scored_kinds
    from gpufinops.models.run import analyse
    from gpufinops.simulator import eval_fleet
    from gpufinops.warehouse import db

    fleet = eval_fleet.generate(home, seed=seed, days=days)
    cfg = config_mod.load(fleet.config_path)
    for step in ("first deliveries", "restated month"):
        if step == "restated month":
            eval_fleet.restate(fleet)  # the month's second delivery, after everything else was loaded
        failed = [r for r in run_configured(cfg) if not r.ok]
        if failed:
            raise RuntimeError(f"evaluation fleet ingest ({step}) failed: {failed[0].source}: {failed[0].error}")
    truth = json.loads(fleet.truth_path.read_text())
    names = _names(truth)
    # one read scope (models/run_reads.py): the fit and the baselines reuse the frames the models' run read
    with db.writer(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con, run_reads.scope(con):
        run = analyse(con)
        totals = dict(
            con.execute(
                "SELECT CASE WHEN \"ProviderName\" = 'AWS' THEN 'aws' ELSE 'gcp' END, "
                'sum("EffectiveCost") FROM cost_line_items GROUP BY 1'
            ).fetchall()
        )
        s = features.RightsizingSettings()
        model = gpu_type.fit(gpu_type.observations(features.resources(con, s), features.specs(con), s.idle_util_pct))
        specs = features.specs(con)
        baselines = eval_baselines.all_baselines(con)
        resources = features.resources(con, s).select("resource_id", *eval_explain.RESOURCE_KEYS).to_dicts()
    recs = run.recommendations  # every candidate; score() reads each one's standalone saving
    kinds = set(KINDS)
    return {
        "name": f"second generator, seed {seed}",
        "seed": seed,
        "days": days,
        "machines": len(truth["machines"]),
        "bill_reconciled": {
            p: {
                "warehouse": str(Decimal(str(totals.get(p, 0))).quantize(Decimal("0.01"))),
                "generator": str(Decimal(v).quantize(Decimal("0.01"))),
            }
            for p, v in truth["cost_by_provider_usd"].items()
        },
        "kinds": _named(score(recs, truth, set(scored_kinds())), names),
        "baselines": {
            kind: {name: _named(score(found, truth, {kind}), names).get(kind) for name, found in by.items()}
            for kind, by in baselines.items()
        },
        "lookalikes_flagged": lookalikes_flagged(recs, truth),
        "lookalikes": {k: len([x for x in truth["lookalikes"] if x["kind"] == k]) for k in kinds},
        "right_targets": right_targets(recs, truth),
        "withheld": run.withheld_counts(),
        "findings": eval_explain.findings_of(recs, truth, names),
        "explain": eval_explain.explain(recs, run.withheld, resources, truth, names),
        "evidence_predictors": [
            {
                "kind": r.kind,
                "machine": names.get(r.resource_id, r.resource_id),
                "throughput_model": r.evidence.get("throughput_model"),
                "mae_pct": r.evidence.get("throughput_predictor_mae_pct"),
            }
            for r in recs
            if r.kind in predictor_kinds()
        ],
        "throughput_model": model.quality,
        "real_ratios": real_ratio_mae(model, specs),
        "truth_checks": {
            "lookalikes_that_are_positive": truth["lookalikes_that_are_positive"],
            "roles_not_positive": truth["roles_not_positive"],
        },
    }


def _pool(scores: list[dict | None]) -> dict[str, Any] | None:
    present = [s for s in scores if s]
    if not present:
        return None
    planted, found, hits = (sum(s[k] for s in present) for k in ("planted", "found", "hits"))
    priced = [s for s in present if s["truth_monthly_savings_usd"] is not None]
    truth = sum(s["truth_monthly_savings_usd"] for s in priced)
    est = sum(s["found_monthly_savings_usd"] for s in priced)
    return {
        "planted": planted,
        "found": found,
        "hits": hits,
        "precision": hits / found if found else (1.0 if not planted else 0.0),
        "recall": hits / planted if planted else 1.0,
        "truth_monthly_savings_usd": round(truth, 2),
        "found_monthly_savings_usd": round(est, 2),
        "savings_error": (est - truth) / truth if truth else None,
        "extra": sorted({x for s in present for x in s["extra"]}),
        "missed": sorted({x for s in present for x in s["missed"]}),
    }


def summarise(fleets: list[dict]) -> dict[str, Any]:
    """Per kind, pooled over the seeds: the model and each baseline; look-alikes and targets summed."""
    kinds = sorted({k for f in fleets for k in f["kinds"]})
    out: dict[str, Any] = {}
    for kind in kinds:
        names = sorted({n for f in fleets for n in f["baselines"].get(kind, {})})
        flagged = sum(len(f["lookalikes_flagged"].get(kind, [])) for f in fleets)
        targets = [f["right_targets"].get(kind) for f in fleets if f["right_targets"].get(kind)]
        out[kind] = {
            "model": _pool([f["kinds"].get(kind) for f in fleets]),
            "baselines": {n: _pool([f["baselines"][kind].get(n) for f in fleets]) for n in names},
            "lookalikes": sum(f["lookalikes"].get(kind, 0) for f in fleets),
            "lookalikes_flagged": flagged,
            "right_target": (sum(t["right_target"] for t in targets), sum(t["hits"] for t in targets))
            if targets
            else None,
        }
    return out


def _row(label: str, s: dict | None) -> str:
    if s is None:
        return f"  {label:<44} (nothing to score)"
    money = (
        f"{s['truth_monthly_savings_usd']:>11,.0f} {s['found_monthly_savings_usd']:>11,.0f} {s['savings_error']:>+7.1%}"
        if s["savings_error"] is not None
        else f"{'':>11} {'':>11} {'n/a':>7}"
    )
    return f"  {label:<44} {s['planted']:>4} {s['found']:>5} {s['precision']:>5.2f} {s['recall']:>6.2f} {money}"


def render(fleets: list[dict], summary: dict) -> str:
    lines = [
        f"\nSecond generator (simulator/eval_fleet.py: MLPerf throughput laws, prices moving mid-window, partial "
        f"months, a restated month), seeds {', '.join(str(f['seed']) for f in fleets)} × {fleets[0]['days']} days, "
        f"{fleets[0]['machines']} machines each; truth from the generator's laws, pooled over the seeds"
    ]
    for f in fleets:
        rec = ", ".join(f"{p} ${v['warehouse']} (generator ${v['generator']})" for p, v in f["bill_reconciled"].items())
        lines.append(f"  seed {f['seed']}: warehouse EffectiveCost after the restatement: {rec}")
    lines.append(
        f"  {'kind / baseline':<44} {'true':>4} {'found':>5} {'prec.':>5} {'recall':>6} "
        f"{'truth $/mo':>11} {'found $/mo':>11} {'error':>7}"
    )
    for kind, k in summary.items():
        lines.append(_row(kind, k["model"]))
        extra = f"look-alikes flagged {k['lookalikes_flagged']} of {k['lookalikes']}"
        if k["right_target"]:
            extra += f"; right target on {k['right_target'][0]} of {k['right_target'][1]} hits"
        lines.append(f"  {'':<4}{extra}")
        for name, s in k["baselines"].items():
            lines.append(_row(f"  vs {name}", s))
    for f in fleets:
        q = f["throughput_model"]
        lines.append(
            f"  seed {f['seed']} throughput predictors, held out by GPU pair ({q.get('pairs')} pairs over "
            f"{q.get('gpu_pairs')} GPU pairs): regression {q.get('regression_mae_pct')}, spec-ratio "
            f"{q.get('spec_ratio_mae_pct')}, no-change {q.get('no_change_mae_pct')} util points -> "
            f"{q.get('predictor')} used"
        )
        for suite, r in sorted(f["real_ratios"].items()):
            maes = ", ".join(f"{n.replace('_baseline', '')} {v}" for n, v in r["mae_pct"].items())
            lines.append(
                f"    on published {suite} ratios the generator did not use ({r['groups']} groups, "
                f"{r['points']} points): {maes} -> best {r['best']}"
            )
    return "\n".join(lines) + "\n"
