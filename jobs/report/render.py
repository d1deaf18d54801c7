"""``render(con, week, scope) -> Report``: the weekly report as data, nothing sent, nothing written.

Delivery (``deliver.py``: SMTP, a file) is separate ("render, then deliver"), so
``gpufinops report weekly --out`` previews exactly what is mailed. The HTML refers to its charts by
``cid:`` (inline MIME parts); ``Report.standalone_html`` swaps them for ``data:`` URIs for a browser.
"""

from __future__ import annotations

import base64
import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import jinja2

from gpufinops.jobs.report import charts
from gpufinops.jobs.report.figures import WeekFigures, collect
from gpufinops.jobs.report.weeks import Week
from gpufinops.kernel import labels
from gpufinops.models import kind_coverage
from gpufinops.warehouse.scope import Scope

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
CSV_COLUMNS = (
    "id",
    "kind",
    "team",
    "provider",
    "resource_id",
    "action",
    "pattern",
    "monthly_savings_usd",
    "current_monthly_cost_usd",
    "confidence",
    "risk",
    "created_at",
    "plan",
    "plan_id",
    "status",
    "decision",
)


@dataclass(frozen=True)
class Image:
    cid: str  # Content-ID, without the angle brackets
    title: str
    png: bytes


@dataclass
class Report:
    week: Week
    scope: Scope
    subject: str
    html: str  # the mail's HTML: images as cid: references
    text: str  # the plain-text alternative
    images: list[Image]
    csv_name: str
    csv_bytes: bytes
    figures: WeekFigures = field(repr=False)

    def standalone_html(self) -> str:
        """The same HTML with each image inlined as a data: URI (opens in any browser)."""
        html = self.html
        for image in self.images:
            data = base64.b64encode(image.png).decode()
            html = html.replace(f"cid:{image.cid}", f"data:image/png;base64,{data}")
        return html


def scope_label(scope: Scope) -> str:
    if scope.teams is None:
        return "all teams"
    return ("team " if len(scope.teams) == 1 else "teams ") + ", ".join(scope.teams)


def usd(value: Decimal | float | int | None, cents: bool = False) -> str:
    """$12,345 (whole dollars read best in a summary); cents below $100 or when asked."""
    if value is None:
        return "–"
    number = float(value)
    if number == 0:
        return "$0"
    sign = "-" if number < 0 else ""
    if cents or abs(number) < 100:
        return f"{sign}${abs(number):,.2f}"
    return f"{sign}${abs(number):,.0f}"


def pct(value: float | None) -> str:
    if value is None:
        return "–"
    return "0.0%" if abs(value) < 0.05 else f"{value:+.1f}%"


def savings(amount: Decimal, blind: list[kind_coverage.KindsUnknown]) -> str:
    """Open savings beside the kinds that could not look: "$1,234", "at least $1,234" or "unknown", never a
    $0 that only means the blind kinds found nothing."""
    return kind_coverage.savings_value(usd(amount), bool(amount), blind)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["usd"] = usd
    env.filters["pct"] = pct
    env.filters["savings"] = savings
    env.globals["could_not_look"] = kind_coverage.could_not_look
    return env


def _short_resource(resource_id: str | None) -> str:
    """The readable tail of a resource id (GCP ids are long paths)."""
    if not resource_id:
        return "-"
    tail = resource_id.rstrip("/").split("/")[-1]
    return tail if len(tail) <= 32 else tail[:29] + "…"


def _gpus(current: dict[str, Any]) -> str:
    count, model = current.get("gpu_count"), current.get("gpu_model")
    return f"{count}× {model}" if count and model else (model or "")


def _rec_rows(figures: WeekFigures) -> list[dict[str, Any]]:
    rows = []
    for rec in figures.top_recommendations:
        rows.append(
            {
                "kind": rec["kind"],
                "kind_label": labels.label(rec["kind"], "kind"),
                "team": labels.team_label(rec["team"]),
                "provider": labels.label(rec["provider"], "provider") if rec["provider"] else "-",
                "resource": _short_resource(rec["resource_id"]),
                "resource_id": rec["resource_id"],
                "action": rec["proposed"].get("action") or labels.label(rec["kind"], "kind"),
                "pattern": labels.label(rec["evidence"].get("pattern"), "pattern")
                if rec["evidence"].get("pattern")
                else "",
                "monthly_savings_usd": rec["monthly_savings_usd"],
                "confidence": rec["confidence"],
                "gpu": _gpus(rec["current"]),
            }
        )
    return rows


def _images(figures: WeekFigures, recs: list[dict[str, Any]]) -> list[Image]:
    week = str(figures.week)
    made = [
        (
            "spend-trend",
            f"Spend per week, last {len({r['week'] for r in figures.spend_trend})} weeks",
            charts.spend_trend(figures.spend_trend, week),
        ),
        (
            "top-recommendations",
            "Largest open savings (per month)",
            charts.top_recommendations(
                [
                    {
                        "label": f"{r['team']} · {r['resource']} · {r['kind_label']}",
                        "kind": r["kind"],
                        "usd": float(r["monthly_savings_usd"]),
                    }
                    for r in recs
                ]
            ),
        ),
        ("idle-gpu-cost", "Cost of idle GPU-hours per week", charts.idle_cost(figures.idle_trend, week)),
    ]
    return [Image(f"{cid}-{week}@gpufinops", title, png) for cid, title, png in made if png is not None]


def _csv(figures: WeekFigures) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for rec in figures.open_recommendations:
        created = rec["created_at"]
        writer.writerow(
            [
                rec["id"],
                rec["kind"],
                rec["team"] or "",
                rec["provider"] or "",
                rec["resource_id"] or "",
                rec["proposed"].get("action", ""),
                rec["evidence"].get("pattern", ""),
                f"{Decimal(str(rec['monthly_savings_usd'])):.2f}",
                rec["current"].get("monthly_cost_usd", ""),
                rec["confidence"],
                rec["risk"] or "",
                created.astimezone(UTC).isoformat() if isinstance(created, datetime) else created,
                rec.get("plan") or "",
                rec.get("plan_id") or "",
                rec.get("status") or "",
                rec.get("decision") or "",
            ]
        )
    return buffer.getvalue().encode()


def render(
    con: duckdb.DuckDBPyConnection,
    week: Week,
    scope: Scope,
    *,
    tz: str = "UTC",
    dashboard_url: str | None = None,
    now: datetime | None = None,
) -> Report:
    """The weekly report for one scope: its teams only, in every number, chart and row."""
    figures = collect(con, week, scope, tz)
    recs = _rec_rows(figures)
    images = _images(figures, recs)
    label = scope_label(scope)
    context: dict[str, Any] = {
        "f": figures,
        "week": str(week),
        "scope_label": label,
        "recs": recs,
        "images": images,
        "first_day": week.days[0],
        "last_day": week.days[-1],
        "tz": tz,
        "dashboard_url": dashboard_url,
        "generated_at": (now or datetime.now(UTC)).astimezone(UTC),
        "csv_name": f"open-recommendations-{week}.csv",
    }
    env = _environment()
    to_save = savings(figures.open_savings, figures.unknown_kinds)
    spent = "unknown (no bill loaded yet)" if figures.no_bill else f"{usd(figures.spend)}, {pct(figures.change_pct)}"
    subject = f"GPU spend {week} ({label}): {spent} week on week; " + (
        "savings unknown (kinds could not look)" if to_save == "unknown" else f"{to_save}/month to save"
    )
    return Report(
        week=week,
        scope=scope,
        subject=subject,
        html=env.get_template("weekly.html.j2").render(context),
        text=env.get_template("weekly.txt.j2").render(context),
        images=images,
        csv_name=context["csv_name"],
        csv_bytes=_csv(figures),
        figures=figures,
    )
