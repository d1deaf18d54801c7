"""A page's views: tabs under the page's KPIs, the open one named in the URL (``/team?view=Forecast``: a link
to it opens it) and the only one the page reads and draws.

A long page drawn whole made every load pay for what a reader scrolls to last: the Team page drew nine
charts and tables below its KPIs before the first was readable. Each view is what one question needs
(spend, the forecast, anomalies, alerts, shared GPUs, …), and switching views reruns the page for that one
(``st.tabs(on_change="rerun")``). What the KPIs above the views state covers the whole page; a view only
breaks it down.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

KEY = "view"  # the query parameter and the widget key: one per page run, the same name on every page
# Each page's views, by its file under dashboard/pages/, the first open by default. The browser tests and
# the page-load bench read every view from here (each is a screen of its own, by its URL).
PAGES: dict[str, tuple[str, ...]] = {
    "overview": ("Spend", "Forecast", "Anomalies", "Alerts"),
    "team": (
        "Spend",
        "Forecast",
        "Shared GPUs",
        "GPU fleet",
        "Energy and emissions",
        "Unit costs",
        "Recommendations",
        "Alerts",
    ),
    "fleet": ("Utilisation", "Idle GPUs", "Energy and emissions", "Unattributed"),
    "recommendations": ("List", "Detail"),
    "spot": ("Prices", "Interruption frequency"),
}


def open_view(page: str) -> tuple[str, Any]:
    """``page``'s views as tabs; (the open view's name, its tab to draw into). The first is open unless
    the URL names another."""
    names = PAGES[page]
    tabs = st.tabs(list(names), key=KEY, on_change="rerun", bind="query-params")
    for name, tab in zip(names, tabs, strict=True):
        if tab.open:
            return name, tab
    return names[0], tabs[0]


def link(page: str, view: str) -> str:
    """The URL path (under the dashboard's root) that opens ``view`` of ``page``."""
    from urllib.parse import urlencode

    if view not in PAGES[page]:
        raise ValueError(f"{page} has no view {view!r}: it has {', '.join(PAGES[page])}")
    path = "" if page == "overview" else page
    return path if view == PAGES[page][0] else f"{path}?{urlencode({KEY: view})}"
