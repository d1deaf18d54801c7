"""docs/api.md's endpoint table against the app's own routes: every route the API serves is documented,
every documented endpoint is served, with its method (the page once left out /v1/unit-costs and
/v1/carbon)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_api import TOKENS, make_config

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
DOCUMENTED = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`?\s]*)")
PARAM = re.compile(r"\{[^}]*\}")  # a path parameter, whatever the page or the code calls it


def documented(text: str) -> set[tuple[str, str]]:
    """(method, path) of each row of the page's endpoint table (the query string left out)."""
    return {(m.group(1), PARAM.sub("{}", m.group(2))) for line in text.splitlines() if (m := DOCUMENTED.match(line))}


def served(tmp_path, warehouse) -> set[tuple[str, str]]:
    from fastapi.routing import APIRoute

    from gpufinops.interfaces.api import create_app

    app = create_app(make_config(tmp_path, warehouse), environ=TOKENS)
    return {
        (method, PARAM.sub("{}", r.path))
        for r in app.routes
        if isinstance(r, APIRoute)
        for method in (r.methods or set()) - {"HEAD"}
    }


def test_the_endpoint_table_is_the_app_s_routes(tmp_path, warehouse):
    routes = served(tmp_path, warehouse)
    assert {("GET", "/v1/unit-costs"), ("GET", "/v1/carbon"), ("GET", "/v1/costs")} <= routes
    assert documented(API_DOC.read_text()) == routes


def test_a_route_left_out_of_the_table_is_caught(tmp_path, warehouse):
    text = "\n".join(line for line in API_DOC.read_text().splitlines() if "/v1/carbon" not in line)
    assert ("GET", "/v1/carbon") in served(tmp_path, warehouse) - documented(text)
