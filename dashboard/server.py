"""``python -m dashboard.server APP [streamlit options]``: Streamlit's own server, started only after the
dashboard's modules are imported.

Streamlit imports a page's modules on the first visit, inside that visit's script run: on a
fresh server the first reader paid ~0.7 s of imports (polars, DuckDB, numpy, the forecast model,
Streamlit's element modules) before a figure appeared. Importing them here, before the server
listens, moves that cost to start-up. ``gpufinops dashboard`` starts this module as its child.
"""

from __future__ import annotations

import importlib
import sys

# Imported before serving: what every page's first run would otherwise import (dashboard.common
# pulls streamlit, polars, DuckDB and the warehouse queries; spend the forecast model and numpy).
WARM_MODULES = ("dashboard.common", "dashboard.charts", "dashboard.labels", "dashboard.spend", "dashboard.evidence",
                "dashboard.recommendation_list", "models.forecast", "streamlit.elements.vega_charts",
                "streamlit.elements.arrow", "streamlit.elements.metric", "streamlit.elements.widgets.selectbox",
                "streamlit.elements.widgets.multiselect")


def warm_imports() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    warm_imports()
    from streamlit.web import cli

    return cli.main(args=["run", *args], prog_name="streamlit", standalone_mode=True)


if __name__ == "__main__":
    sys.exit(main())
