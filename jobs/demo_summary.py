"""What ``gpufinops demo`` prints: the ingest, the spend, every finding checked against the planted
ground truth, and the next commands, each of which works as printed (an extra they need that is
not installed is named, with its install command, before them)."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.text import Text

from gpufinops.ingest.core import extras
from gpufinops.jobs import cells, output, tables
from gpufinops.jobs.cells import ID, MONEY, PCT, RATIO, TEXT, WRAP, Col
from gpufinops.kernel import labels

SPEND_COLUMNS = (
    Col("provider", "Provider", TEXT, no_wrap=True),
    Col("effective_cost", "Spend (EffectiveCost)", MONEY),
    Col("gpu_share", "GPU share", PCT),
)
IDLE_COLUMNS = (
    Col("provider", "Cloud", TEXT, no_wrap=True),
    Col("team", "Team", TEXT, no_wrap=True),
    Col("resource_id", "Resource", ID, max_width=44),
    Col("pattern", "Pattern", TEXT, no_wrap=True),
    Col("idle", "Idle h / measured", TEXT, no_wrap=True),
    Col("monthly_savings_usd", "Savings/mo", MONEY),
    Col("confidence", "Conf.", RATIO),
)
FINDING_COLUMNS = (
    Col("kind", "Kind", TEXT),  # (wraps a long label, "Checkpoint lifecycle", before an id is elided)
    Col("plan", "Plan", TEXT, no_wrap=True),
    Col("provider", "Cloud", TEXT, no_wrap=True),
    Col("team", "Team", TEXT, no_wrap=True),
    Col("resource_id", "Resource", ID, max_width=44),
    Col("action", "Action", WRAP),
    Col("monthly_savings_usd", "Savings/mo", MONEY),
    Col("confidence", "Conf.", RATIO, hide_below=100),
)
ONPREM_COLUMNS = (
    Col("provider", "Cloud", TEXT, no_wrap=True),
    Col("team", "Team", TEXT, no_wrap=True),
    Col("resource_id", "Resource", ID, max_width=44),
    Col("action", "Advice", WRAP),
    Col("monthly_savings_usd", "Savings/mo", MONEY),
)
TRUTH_COLUMNS = (
    Col("found", "Found", TEXT, no_wrap=True),
    Col("variant", "Planted", TEXT, no_wrap=True),
    Col("resource_id", "Resource", ID, max_width=44),
    Col("truth_idle_cost_usd", "True idle cost", MONEY),
    Col("found_idle_cost_usd", "Found idle cost", MONEY),
)


def exe_name() -> str:
    """How to call gpufinops again, runnable as printed: its bare name when that name on the PATH is
    this program, else the path it was run by (``.venv/bin/gpufinops``), else ``python -m``."""
    import shutil

    argv0 = Path(sys.argv[0])
    on_path = shutil.which("gpufinops")
    if argv0.name == "gpufinops":
        if on_path and Path(on_path).resolve() == argv0.resolve():
            return "gpufinops"
        shown = os.path.relpath(argv0)
        if shown.startswith(".."):
            return str(argv0.absolute())
        return shown if os.sep in shown else f".{os.sep}{shown}"
    if on_path:
        return "gpufinops"
    return f"{os.path.relpath(sys.executable)} -m gpufinops.interfaces.cli"


def shown_path(path: Path) -> str:
    """A path relative to the working directory when it lies below it (``demo/gpufinops.toml``)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _rec_row(rec) -> dict[str, Any]:
    return {
        # labels, never codes: a code has no space to wrap at, so a narrow column split it mid-word
        "kind": labels.label(rec.kind, "kind"),
        "plan": labels.label(rec.plan, "plan") if getattr(rec, "plan", None) else None,
        "provider": labels.label(rec.provider, "provider") if rec.provider else None,
        "team": rec.team or "(cluster)",
        "resource_id": rec.resource_id or rec.workload or cells.MISSING,
        "action": rec.proposed.get("action"),
        "monthly_savings_usd": rec.monthly_savings_usd,
        "confidence": rec.confidence,
        "status": rec.status,
    }


STATUS = Col("status", "Status", TEXT, no_wrap=True)


def _with_status(columns: tuple[Col, ...], recs) -> tuple[Col, ...]:
    """The columns, with the stored status beside the kind once any finding has been decided on."""
    if all(r.status == "open" for r in recs):
        return columns
    return (columns[0], STATUS, *columns[1:])


@dataclass(frozen=True)
class DemoOutcome:
    """What the demo ran and found, as the summary prints it."""

    fleet: Any  # the simulated fleet (simulator.demo_fleet)
    results: list  # one ingest run per source
    totals: Any  # spend per provider (warehouse.queries.cost_totals)
    recs: list  # the recommendations of the run
    report: list[dict[str, Any]]  # found / missed per planted waste (demo.evaluate)
    planted: list[dict[str, Any]]
    config_path: Path
    comparison: Any = ()  # the models' comparison rows, when any


def print_summary(out: IO[str], outcome: DemoOutcome) -> None:
    from gpufinops.models import plans

    fleet, results, totals, recs = outcome.fleet, outcome.results, outcome.totals, outcome.recs
    report, planted, config_path, comparison = outcome.report, outcome.planted, outcome.config_path, outcome.comparison

    width = output.terminal_width(out)
    p = lambda text="": print(text, file=out)  # noqa: E731
    p("\nIngest:")
    tables.print_runs(results, out=out, width=width, brief=True)
    p(
        f"\nFleet: {fleet.machines} machines, {fleet.gpus} GPUs, {fleet.line_items:,} cost lines, "
        f"{fleet.metric_rows:,} nvidia-smi samples\n"
    )
    spend = [
        {
            "provider": labels.label(r["provider"], "provider") if r["provider"] else None,
            "effective_cost": r["effective_cost"],
            "gpu_share": float(r["gpu_cost"] / r["effective_cost"] * 100) if r["effective_cost"] else 0.0,
        }
        for r in totals.iter_rows(named=True)
    ]
    output.print_table(spend, SPEND_COLUMNS, out=out, width=width)
    counted = [r for r in recs if plans.counted(r)]
    alternatives = sum(1 for r in recs if r.plan not in plans.COUNTED)
    p(
        f"\nSavings: {cells.money(plans.total(recs))}/month in {len({r.plan_id for r in counted})} plan(s), one per "
        f"resource or workload's GPUs ({len(counted)} action(s); {alternatives} alternative(s) listed, never added)"
    )
    dropped = plans.left_out(recs)
    if dropped:  # the warehouse's decisions (a re-run keeps them)
        p(f"  left out of the total because of decisions: {len(dropped)} finding(s) dismissed or applied")
    idle_kinds = frees_idle_hours()
    others, idle = [r for r in recs if r.kind not in idle_kinds], [r for r in recs if r.kind in idle_kinds]
    p(f"\nIdle GPUs: {len(idle)} finding(s), {cells.money(plans.total(idle))}/month")
    output.print_table(
        [
            {
                **_rec_row(r),
                "pattern": labels.label(r.evidence["pattern"], "pattern"),
                # a pod's finding (allocated_idle) counts the hours the pod was on its GPU
                "idle": f"{r.evidence['idle_hours']:,} / "
                f"{r.evidence.get('measured_hours', r.evidence.get('present_hours', 0)):,}",
            }
            for r in idle
        ],
        _with_status(IDLE_COLUMNS, idle),
        out=out,
        width=width,
    )
    onprem = list(comparison) + [r for r in others if _moves_onprem(r)]
    listed = [r for r in others if not _moves_onprem(r)]
    if others:
        below = " (on-prem vs cloud below)" if onprem else ""
        p(f"\nOther findings: {len(others)}, {cells.money(plans.total(others))}/month counted{below}")
        if listed:
            output.print_table(
                [_rec_row(r) for r in listed], _with_status(FINDING_COLUMNS, listed), out=out, width=width
            )
    if onprem:  # the whole sentence: it carries the cost per used GPU-hour and the break-even utilisation
        p("\nOn-prem vs cloud (cost per used GPU-hour, break-even utilisation):")
        facts = {id(r) for r in comparison}  # verdicts, not savings: no saving to show
        output.print_table(
            [{**_rec_row(r), "monthly_savings_usd": None if id(r) in facts else r.monthly_savings_usd} for r in onprem],
            ONPREM_COLUMNS,
            out=out,
            width=width,
        )
    _print_truth(out, width, fleet, idle, others, report, planted)
    _print_next(out, config_path)


def _print_truth(out, width, fleet, idle, others, report, planted) -> None:
    idle_kinds = frees_idle_hours()
    report = [row for row in report if row["kind"] in idle_kinds]
    found = sum(1 for row in report if row["found"])
    planted_ids = {row["resource_id"] for row in report}
    pods = idle_pods(fleet)
    on_pods = [r for r in idle if (r.resource_id, r.evidence.get("namespace")) in pods]
    extra = [r for r in idle if r.resource_id not in planted_ids and r not in on_pods]
    print(
        f"\nGround truth ({fleet.ground_truth_path.name}): {found}/{len(report)} planted idle GPUs found, "
        f"{len(extra)} finding(s) on machines with nothing planted",
        file=out,
    )
    if pods:
        from gpufinops.models import plans

        primary = sum(1 for r in on_pods if r.plan == "primary")
        print(
            f"  shared node: {len(on_pods)}/{len(pods)} pods holding an idle GPU found, {primary} of them primary "
            f"plans (one per workload's GPUs), {cells.money(plans.total(on_pods))}/month",
            file=out,
        )
    _print_azure(out, idle, planted)
    output.print_table(
        [{**row, "found": "found" if row["found"] else Text("MISSED", style="bold red")} for row in report],
        TRUTH_COLUMNS,
        out=out,
        width=width,
    )
    later = sorted({p["kind"] for p in planted} - idle_kinds - {r.kind for r in others})
    if later:
        print(f"  also planted, for the models still to come: {', '.join(later)}", file=out)


def frees_idle_hours() -> set[str]:
    """The kinds whose change frees a resource's idle hours (their spec's ``carbon``): the summary's idle GPUs."""
    from gpufinops.models import registry

    return {s.kind for s in registry.MODELS if s.carbon == registry.IDLE_HOURS}


def _moves_onprem(rec: Any) -> bool:
    """A cloud finding whose action moves its workload on-prem (its kind's ``export``): the on-prem comparison."""
    from gpufinops.models import registry

    return registry.spec(rec.kind).export == "move_onprem" and rec.provider != "onprem"


def _print_azure(out, idle, planted) -> None:
    """The Azure subscription's planted idle GPUs (simulator/demo_azure.py): what the idle model found on each,
    its size, GPUs and model as the product read them (the bill names the size; the Azure inventory the GPUs)."""
    from gpufinops.models import plans

    azure = [p for p in planted if p["kind"] in frees_idle_hours() and p["provider"] == "azure"]
    if not azure:
        return
    found = {r.resource_id: r for r in idle if r.provider == "azure"}
    hits = [found[p["resource_id"]] for p in azure if p["resource_id"] in found]
    print(
        f"  Azure: {len(hits)}/{len(azure)} planted idle GPUs found, {cells.money(plans.total(hits))}/month",
        file=out,
    )
    for item in azure:
        rec = found.get(item["resource_id"])
        if rec is None:
            print(f"    MISSED  {item['host']} ({item['instance_type']})", file=out)
            continue
        current = rec.current or {}
        print(
            f"    {item['host']}: {current.get('instance_type')}, {current.get('gpu_count')} × "
            f"{current.get('gpu_model')}, idle {rec.evidence['idle_hours']:,} h costing "
            f"{cells.money(rec.evidence.get('idle_cost_usd'))} on its own bill lines",
            file=out,
        )


def idle_pods(fleet) -> set[tuple[str, str]]:
    """(resource id, namespace) of every pod the ground truth's shared nodes left holding an idle GPU."""
    machines = json.loads(fleet.ground_truth_path.read_text())["machines"]
    return {
        (m["resource_id"], namespace)
        for m in machines
        for namespace, hours in (m.get("idle_pod_hours") or {}).items()
        if hours
    }


def _print_next(out, config_path: Path) -> None:
    exe, config = exe_name(), shown_path(config_path)
    print(f"\nEvery kind's precision, recall and savings error: {exe} evaluate", file=out)
    print("\nNext:", file=out)
    if not extras.installed("streamlit"):
        print(f"  the dashboard needs streamlit: {extras.install_hint('dashboard')}", file=out)
    print(
        f"  {exe} --config {config} recommend\n"
        f'  {exe} --config {config} sql "SELECT * FROM ingest_runs"\n'
        f"  {exe} --config {config} dashboard",
        file=out,
    )
    if Path("Makefile").is_file() and config == "demo/gpufinops.toml":
        print("  make dashboard     (the same, from this clone)", file=out)
