"""``python -m gpufinops.dashboard.server APP [streamlit options]``: Streamlit's own server, warmed before the
first reader arrives. ``gpufinops dashboard`` starts this module as its child.

Profiled on the demo (docs/dashboard.md, *Page loads*), a fresh server's first page spent its time on
one-time work, not on its queries: imports inside the first script run (pandas, pulled in by the
first ``st.dataframe``: 0.56 s; Altair: 0.32 s, since removed; polars, DuckDB, numpy, the forecast
model), Streamlit's check whether it runs in a REPL (``inspect.stack()`` over every loaded
module: 0.2 s, once per process) and the forecast fit on a cold file cache (0.33 s). Here the
imports happen before the server listens, the REPL check is marked done (we are never a REPL),
and a background thread computes the default Overview (every team, the default window: spend,
forecast, anomalies), then the other pages' cached reads at their defaults (``warm_pages``), into
Streamlit's own cache as soon as the runtime exists. Nothing here
holds a connection: the warm-up opens one read-only connection, briefly, and skips a busy or
missing warehouse.

Two costs came back on every render (profiled in the server on the demo): Streamlit's full garbage
collection after each script run (``runner.postScriptGC``) walked the ~110,000 objects of the imported
modules, 70-190 ms holding the interpreter lock, so the finished page's last messages waited for it;
and the first text with a non-ASCII character (a dash in an ``st.warning``) imported Streamlit's emoji
table, compiling its pattern, inside a page (0.05 s, 0.3 s under load). It is imported here with the
rest, and the objects that live as long as the process (modules, the warmed caches) are moved out of the
collector's reach (``gc.freeze``) once imported and again once the warm-up is done: the collection after
a run then walks only what that run made.
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
import threading
import time
from pathlib import Path

# Imported before serving: what every page's first run would otherwise import (dashboard.common
# pulls streamlit, polars, DuckDB and the warehouse queries; spend the forecast model and numpy).
WARM_MODULES = (
    "pandas",
    "pyarrow.pandas_compat",
    "gpufinops.dashboard.common",
    "gpufinops.dashboard.charts",
    "gpufinops.dashboard.spend_charts",
    "gpufinops.dashboard.gpu_charts",
    "gpufinops.dashboard.price_charts",
    "gpufinops.dashboard.labels",
    "gpufinops.dashboard.spend",
    "gpufinops.dashboard.evidence",
    "gpufinops.dashboard.recommendation_list",
    "gpufinops.models.forecast",
    "streamlit.elements.vega_charts",
    "streamlit.elements.arrow",
    "streamlit.elements.metric",
    "streamlit.elements.widgets.selectbox",
    "streamlit.elements.widgets.multiselect",
    "streamlit.emojis",
)


log = logging.getLogger("gpufinops.dashboard")


def warm_imports() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)
    from streamlit import delta_generator

    if hasattr(delta_generator, "_use_warning_has_been_displayed"):  # the once-per-process REPL check
        delta_generator._use_warning_has_been_displayed = True


def warm_cache(wait_s: float = 120.0) -> None:
    """The default Overview's figures into Streamlit's cache, once the runtime is up."""
    from streamlit.runtime import Runtime

    deadline = time.monotonic() + wait_s
    while not Runtime.exists():
        if time.monotonic() > deadline:
            return
        time.sleep(0.05)
    from gpufinops.dashboard import common
    from gpufinops.warehouse import db

    # this thread is no script run: Streamlit's "missing ScriptRunContext" warning does not apply
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    started = time.monotonic()
    warm_page_scripts(Runtime.instance())
    try:
        common.prepared(str(common.db_path()))  # what the app's first render would do first
        with db.reader(common.db_path(), retry_seconds=0) as con:
            warm_overview(con)
            overview = time.monotonic() - started
            warm_pages(con)
    except (FileNotFoundError, db.WarehouseError):
        return  # nothing to warm yet, an ingest is writing, or a warehouse the page itself reports on
    except Exception:  # never let the warm-up take the server down; the first reader computes it
        log.warning("dashboard cache warm-up failed", exc_info=True)
        return
    gc.freeze()  # the runtime and the warmed caches live as long as the process
    print(
        f"gpufinops dashboard: the default Overview computed in {overview:.2f} s, "
        f"every page's defaults in {time.monotonic() - started:.2f} s",
        file=sys.stderr,
        flush=True,
    )


def warm_page_scripts(runtime) -> None:
    """Every page's script compiled into the runtime's script cache (Streamlit's magic rewrite of its
    syntax tree, then ``compile``: 30-40 ms a page on the demo host, paid by each page's first reader
    otherwise). A Streamlit without that cache skips this; a page that does not compile is left for its
    own first run to report."""
    here = Path(__file__).resolve().parent  # app.py and pages/, as app.py names them (importing it runs it)
    cache = getattr(runtime, "_script_cache", None)
    if cache is None or not hasattr(cache, "get_bytecode"):
        return
    for script in [here / "app.py", *sorted((here / "pages").glob("*.py"))]:
        try:
            cache.get_bytecode(str(script))
        except Exception:  # a syntax error is the page's own to show
            log.debug("page %s not compiled ahead", script, exc_info=True)


def warm_overview(con) -> None:
    """The Overview's reads at its default period (the newest data's month) for a viewer of every team."""
    from gpufinops.dashboard import common, period, spend, spend_table
    from gpufinops.warehouse import coverage, freshness

    as_of = common.cached_query(con, "latest_charge_day", team=None)
    if as_of is None:
        return
    window = period.default(as_of)
    common.cached_call(con, period.months_with_data, teams=None)
    spend.load_current(con, None, period.days_back(window, as_of))
    spend_table.cached(con, None, window)
    # the coverage of its KPIs (one scan of the bill and the metrics: seconds on a large fleet)
    common.cached_call(con, coverage.gpu_hours, team=None, start=window.start, end=period.query_end(window, as_of))
    common.cached_call(con, freshness.newest_by_source)  # its stale-data warning's newest rows (Data health's too)


def warm_pages(con) -> None:
    """The cached reads of the other pages at their defaults for a viewer of every team (the Team page's
    first team, the default window): the same calls with the same arguments as the pages make, so a
    page's first render finds them in Streamlit's cache."""
    from gpufinops.dashboard import common, period, recommendation_list, spend, unit_costs_view
    from gpufinops.dashboard.precomputed import IDLE_UTIL_PCT
    from gpufinops.derived import unit_costs
    from gpufinops.warehouse import allocation_queries, coverage
    from gpufinops.warehouse.queries import carbon as carbon_queries

    cached_call, cached_query = common.cached_call, common.cached_query
    # GPU fleet (dashboard/pages/fleet.py), at its default period: the newest data's month
    as_of = cached_query(con, "latest_charge_day", team=None)
    if as_of is None:
        cached_query(con, "gpu_count_disagreements")
        return
    window = period.default(as_of)
    start, end = window.start, period.query_end(window, as_of)
    cached_call(con, period.months_with_data, teams=None)
    span = {"start": start} if end is None else {"start": start, "end": end}
    cached_query(con, "fleet_utilisation", team=None, **span)
    cached_query(con, "idle_gpu_cost", team=None, idle_util_pct=IDLE_UTIL_PCT, **span)
    cached_query(con, "unattributed_gpu_hours", **span)
    cached_query(con, "gpu_hours_attribution", **span)
    cached_call(con, coverage.gpu_hours, team=None, start=start, end=end)
    cached_call(con, carbon_queries.carbon_summary, by="team", team=None, start=start, end=end)
    cached_call(con, carbon_queries.sources, team=None, start=start, end=end)
    # Recommendations (dashboard/pages/recommendations.py): the kinds that could not look
    from gpufinops.models import kind_coverage

    cached_call(con, kind_coverage.unknown_kinds, team=None)
    warm_recommendations(con)
    # Data health (dashboard/pages/health.py)
    cached_query(con, "gpu_count_disagreements")
    # Unit costs (dashboard/pages/unit_costs.py), per the first grouping
    by = next(iter(unit_costs.GROUPINGS))
    cached_call(con, unit_costs_view.load, teams=None, start=window.start, by=by, end=window.end)
    # Team (dashboard/pages/team.py): its first team
    teams = cached_query(con, "cost_teams", team=None)
    if not teams:
        return
    team = [teams[0]]
    team_as_of = cached_query(con, "latest_charge_day", team=team)
    if team_as_of is None:
        return
    window = period.default(team_as_of)
    start, end = window.start, period.query_end(window, team_as_of)
    cached_call(con, period.months_with_data, teams=team)
    spend.load_current(con, team, period.days_back(window, team_as_of))
    cached_query(con, "fleet_utilisation", team=team, start=start, end=end)
    cached_call(con, allocation_queries.allocation_by_workload, team=team, start=start, end=end)
    cached_call(con, allocation_queries.unallocated_by_node, team=team, start=start, end=end)
    cached_call(con, carbon_queries.carbon_summary, by="resource", team=team, start=start, end=end)
    cached_call(con, carbon_queries.sources, team=team, start=start, end=end)
    cached_call(con, unit_costs_view.load, teams=team, start=start, end=end)
    cached_call(con, coverage.gpu_hours, team=team, start=start, end=end)
    cached_call(con, recommendation_list.listed, team=team)


def warm_recommendations(con) -> None:
    """The Recommendations page's reads for a viewer of every team: the list, the withheld findings, and the
    finding it details by default with its utilisation scan and its decisions."""
    from gpufinops.dashboard import common, recommendation_list

    recs = common.cached_call(con, recommendation_list.listed, team=None)
    common.cached_query(con, "withheld_findings", team=None)
    first = recommendation_list.first_shown(recs)
    if first is None:
        return
    common.cached_query(con, "dashboard_recommendation", recommendation_id=first["id"], team=None)
    common.cached_query(con, "decisions_log", team=None, recommendation_id=first["id"])
    if first["resource_id"]:
        common.cached_query(con, "resource_utilisation", resource_id=first["resource_id"])


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    warm_imports()
    gc.freeze()  # what the imports made lives as long as the process: no collection walks it again
    threading.Thread(target=warm_cache, name="gpufinops-warm-cache", daemon=True).start()
    from streamlit.web import cli

    return cli.main(args=["run", *args], prog_name="streamlit", standalone_mode=True)


if __name__ == "__main__":
    sys.exit(main())
