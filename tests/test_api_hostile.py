"""The HTTP API over loopback (uvicorn on 127.0.0.1, tests/test_api.py's server) answering hostile
arguments: a 1 MB argument, CR/NUL, NaN/inf and wrong types each get a status 4xx with one short (≤ 200
characters) escaped sentence naming the call and the parameter, and the server's log holds no traceback."""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.conftest import check_sentence
from tests.test_api import FINANCE, VISION, api  # noqa: F401  # the loopback server fixture

HUGE = "n" * 1_000_000 + "\r\n\x00"
CASES = [
    ("GET", "/v1/costs/daily", {"team": "vision\r\nBcc: x\x00" + "y" * 20_000}, None),
    ("GET", "/v1/costs", {"month": "2026-1O\r\n"}, None),
    ("GET", "/v1/costs/daily", {"from": "NaN"}, None),
    ("GET", "/v1/recommendations", {"kind": "inf", "status": "x" * 20_000}, None),
    ("POST", "/v1/recommendations/rec-1/decision", None, {"status": "accepted", "reason": HUGE}),
    ("POST", "/v1/recommendations/rec-1/decision", None, {"status": float("nan"), "reason": ["a", 1]}),
    ("POST", "/v1/recommendations/rec-1/decision", None, {"status": 1e309}),
]


@pytest.mark.parametrize(("method", "path", "params", "body"), CASES)
def test_a_hostile_argument_gets_a_short_sentence_and_no_traceback(api, caplog, method, path, params, body):  # noqa: F811
    url, _ = api
    caplog.set_level(logging.DEBUG)  # everything the server logs: uvicorn, FastAPI, ours
    headers = {**(FINANCE if method == "GET" else VISION), "Content-Type": "application/json"}
    import json

    content = None if body is None else json.dumps(body, allow_nan=True).replace("Infinity", "1e309")
    answer = httpx.request(method, url + path, params=params, content=content, headers=headers, timeout=30)
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text[:300])
    detail = answer.json()["detail"]
    assert isinstance(detail, str) and check_sentence(detail) == [], detail
    assert len(answer.text) < 400 and "\r" not in detail and "\x00" not in detail, answer.text[:400]
    server = "\n".join(  # what the server logged (the test's own HTTP client logs its request too)
        r.getMessage() + (str(r.exc_info) if r.exc_info else "")
        for r in caplog.records
        if r.name.startswith(("uvicorn", "fastapi", "starlette", "gpufinops"))
    )
    assert "Traceback" not in server and "exc_info" not in server and len(server) < 2_000, server[-2000:]
