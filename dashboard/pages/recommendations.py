"""Recommendations: every kind, filterable, sorted by savings; evidence; accept / dismiss; CSV.

Filters are applied to the scoped frame in polars (choices from fixed lists, never SQL). A decision
is written through ``warehouse.recommendation_store.record_decision`` on a short-lived writer, scoped to the
viewer's teams, with the viewer as the actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import streamlit as st

from gpufinops.dashboard import evidence, labels, views
from gpufinops.dashboard.common import cached_call, cached_query, connection, db_path, money, page_header
from gpufinops.dashboard.recommendation_list import DEFAULT_STATUSES, csv_bytes, in_list_order, listed
from gpufinops.kernel.labels import NO_TEAM, team_label
from gpufinops.kernel.labels import label as code_label
from gpufinops.models import kind_coverage, plans
from gpufinops.warehouse import db, recommendation_store

TABLE_COLUMNS = (
    "monthly_savings_usd",
    "plan",
    "kind",
    "team",
    "provider",
    "resource",
    "action",
    "confidence",
    "status",
    "decision",
    "workload",
    "risk",
    "change",
    "model_version",
    "created_at",
    "id",
    "resource_id",
)
HIDDEN = ("resource_id",)  # kept in the frame (the CSV, the detail view); the list shows the short name
NONE = "(none)"  # a finding without a team or provider (fleet-wide) is still listed
DECISIONS = {"Accept": "accept", "Dismiss": "dismiss", "Mark applied": "apply", "Reopen": "reopen"}
NOTICE = "recs_notice"  # the last decision's confirmation, shown after the rerun that refreshes the counts


def option_label(col: str) -> Callable[[str], str]:
    """How a filter's option reads: a code by its label, a finding without a team as NO_TEAM."""

    def shown(value: str) -> str:
        return NO_TEAM if value == NONE and col == "team" else str(labels.value_label(col, value))

    return shown


def filtered(recs: pl.DataFrame) -> pl.DataFrame:
    """The sidebar filters applied; choices come from the scoped frame itself."""
    side = st.sidebar
    picks = {}
    for col, default in (("kind", None), ("status", DEFAULT_STATUSES), ("team", None), ("provider", None)):
        options = sorted(recs[col].fill_null(NONE).unique().to_list())
        chosen_default = [d for d in (default or options) if d in options]
        picks[col] = side.multiselect(
            col.capitalize(),
            options,
            default=chosen_default,
            key=f"recs_{col}",
            format_func=option_label(col),
        )
    out = recs
    for col, chosen in picks.items():
        out = out.filter(pl.col(col).fill_null(NONE).is_in(chosen))
    return in_list_order(out)


def decide(rec_id: str, decision: str, reason: str, ctx) -> None:
    """Record the decision; on success rerun the page so every count and total shows it at once."""
    try:
        with db.writer(db_path(), retry_seconds=10) as con:
            status = recommendation_store.record_decision(
                con, rec_id, decision, reason, ctx.scope.actor, teams=ctx.teams
            )
    except recommendation_store.UnknownRecommendation:
        st.error("That recommendation no longer exists (or is not yours to decide).")
    except db.WarehouseBusy:
        st.error("The warehouse is busy with an ingest: try again in a moment.")
    else:
        now = code_label(status, "status").lower()
        st.session_state[NOTICE] = f"Recorded: {decision} by {ctx.scope.actor}; the recommendation is now {now}."
        st.rerun()


def decision_form(rec: dict, ctx) -> None:
    with st.form(f"decide_{rec['id']}", clear_on_submit=True):
        st.markdown(f"**Decide** (currently *{code_label(rec['status'], 'status').lower()}*)")
        # nothing preselected: a decision is a person's choice, never a default a click records
        label = st.radio("Decision", list(DECISIONS), horizontal=True, key="decision_choice", index=None)
        reason = st.text_input("Reason", max_chars=500, key="decision_reason")
        if st.form_submit_button("Record decision"):
            if label is None:
                st.error("Choose a decision first: accept or dismiss.")
            elif DECISIONS[label] == "dismiss" and not reason.strip():
                st.error("Say why it is dismissed: the reason is kept with the decision.")
            else:
                decide(rec["id"], DECISIONS[label], reason.strip(), ctx)


def unknown_list(blind: list[kind_coverage.KindsUnknown]) -> None:
    """The kinds whose inputs are missing: unknown, why, and the source that would complete them."""
    for group in blind:
        st.warning(labels.config_words(f"Unknown findings: {group.line()}"))


def withheld_list(con, ctx) -> None:
    """What the models examined and did not recommend: the reason, the missing fact, its source."""
    withheld = cached_query(con, "withheld_findings", team=ctx.teams)
    if withheld.is_empty():
        return
    counts = withheld.group_by("reason").len().sort("len", "reason", descending=[True, False])
    summary = ", ".join(f"{n} {code_label(reason, 'reason').lower()}" for reason, n in counts.iter_rows())
    # read and drawn only when opened (a rerun): most loads never open it
    box = st.expander(
        f"Withheld: {withheld.height} finding(s) the models could not price or prove ({summary})",
        key="recs_withheld",
        on_change="rerun",
    )
    if not box.open:
        return
    with box:
        labels.table(
            st,
            withheld.select("kind", "team", "resource_id", "reason", "detail", "missing", "source_hint"),
            overrides={
                "source_hint": st.column_config.TextColumn("Source that provides it"),
                "detail": st.column_config.TextColumn("Why", width="large"),
            },
        )


def detail_labels(shown: pl.DataFrame) -> dict[str, str]:
    labels_by_id = {
        row["id"]: f"{money(row['monthly_savings_usd'])}/mo · {code_label(row['kind'], 'kind')} · "
        f"{team_label(row['team'])} · "
        f"{row['resource'] or row['id']}"
        for row in shown.iter_rows(named=True)
    }
    if len(set(labels_by_id.values())) < len(labels_by_id):  # keep every choice distinct
        labels_by_id = {rid: f"{text} · {rid}" for rid, text in labels_by_id.items()}
    return labels_by_id


def main() -> None:
    ctx = page_header("Recommendations")
    if NOTICE in st.session_state:
        st.success(st.session_state.pop(NOTICE))
    try:
        # one read-only connection for the whole render (each open reads the catalog: 20-60 ms), closed
        # before the decision form, whose writer it would otherwise block
        with connection() as con:
            found = listing(con, ctx)
    except FileNotFoundError as exc:
        st.error(str(exc))
        return
    if found is None:
        return
    tab, rec, log = found
    with tab:
        decision_form(rec, ctx)
        if log is not None and not log.is_empty():
            st.markdown("**Decisions**")
            labels.table(st, log)


def listing(con, ctx) -> tuple[Any, dict, pl.DataFrame] | None:
    """The filters and totals above the views; the List view (the findings, what was withheld) or the
    Detail view (one finding's evidence). (the Detail view's tab, the finding it shows, its decisions),
    or None where no finding is detailed."""
    recs = cached_call(con, listed, team=ctx.teams)  # the list's text built once per data version
    blind = cached_call(con, kind_coverage.unknown_kinds, team=ctx.teams)
    if recs.is_empty():
        withheld = cached_query(con, "withheld_findings", team=ctx.teams).height
        if withheld or blind:  # the models ran (or could not look): "none yet" would read as "no waste"
            st.info(
                "No recommendations where the models could see the data"
                + (f"; {withheld:,} finding(s) withheld (below)." if withheld else ".")
            )
        else:
            st.info("No recommendations yet: run `gpufinops recommend`.")
        unknown_list(blind)
        withheld_list(con, ctx)
        return None
    unknown_list(blind)
    shown = filtered(recs)
    totals(shown, recs)
    view, tab = views.open_view("recommendations")
    with tab:  # only the open view is read and drawn
        if view == "List":
            findings(shown)
            withheld_list(con, ctx)  # after the list, so what was found comes first
            return None
        return detail(con, ctx, shown, tab)


def totals(shown: pl.DataFrame, recs: pl.DataFrame) -> None:
    cols = st.columns(3)
    cols[0].metric("Shown", f"{shown.height} of {recs.height}")
    cols[1].metric(
        "Monthly savings shown",
        f"{money(plans.total(shown.to_dicts()))}/month",
        help="primary and step objects of each resource's plan, open or accepted; alternatives are shown, "
        "never added, and a dismissed or applied finding is never in a total",
    )
    cols[2].download_button(
        "Download CSV",
        lambda: csv_bytes(shown),  # written when clicked, not on every render
        file_name="recommendations.csv",
        mime="text/csv",
        help="the columns of `gpufinops recommend --format csv`",
    )


def findings(shown: pl.DataFrame) -> None:
    labels.table(
        st,
        shown.select(TABLE_COLUMNS),
        hide=HIDDEN,
        overrides={
            "confidence": st.column_config.ProgressColumn("Confidence", min_value=0.0, max_value=1.0, format="percent"),
            "action": st.column_config.TextColumn("Action", width="large"),
            "resource": st.column_config.TextColumn("Resource", width="medium"),
        },
    )
    if not shown.is_empty():
        st.caption("A finding's evidence, and the decision on it: the Detail view.")


def detail(con, ctx, shown: pl.DataFrame, tab) -> tuple[Any, dict, pl.DataFrame] | None:
    """One finding of the list (the largest by default): its evidence and charts."""
    if shown.is_empty():
        st.info("No finding matches the filters in the sidebar.")
        return None
    labels_by_id = detail_labels(shown)
    by_label = {text: rid for rid, text in labels_by_id.items()}
    chosen = by_label[st.selectbox("Finding", list(by_label), key="recs_detail")]
    found = cached_query(con, "dashboard_recommendation", recommendation_id=chosen, team=ctx.teams)
    if found.is_empty():
        st.error("That recommendation is gone.")
        return None
    rec = found.row(0, named=True)
    st.subheader(labels_by_id[chosen])
    st.caption(
        f"risk: {rec['risk'] or '—'} · confidence {rec['confidence'] or 0:.0%} · "
        f"resource {rec['resource_id'] or '—'} · id {rec['id']}"
    )
    evidence.render(con, rec)
    return tab, rec, cached_query(con, "decisions_log", team=ctx.teams, recommendation_id=chosen)


main()
