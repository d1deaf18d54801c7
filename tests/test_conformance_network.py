"""Every registered source that declares a network transport, driven through servers that misbehave.

For each source type whose spec declares ``transport`` (ingest/core/registry.py ``Transport``), the source
is loaded honestly once from its conformance input (tests/test_conformance.py's FIXTURES), then pointed
(its spec's ``endpoint`` option) at a loopback server (tests/hostile_servers.py) that cycles page tokens
with period 1, 2 and 3, never ends a body, stalls after its headers, or answers a huge body. Each run must
fail within seconds with one sentence naming the source, the call and the bound it tripped, and leave the
warehouse's table and the source's cursor (ingest_state) exactly as the honest load left them. A server
that answers 503 once and then the real answer must be retried into a successful load. Sources that
declare no transport (or read files in this configuration) are run with sockets refused. A new source
is covered by registering it: nothing here names a source type except where its conformance input
reads local files and network mode needs other keys (``NETWORK_MODE``).
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest

from gpufinops.ingest.core.registry import default_registry
from gpufinops.ingest.core.runner import run_source
from tests.aws_loopback import DUMMY_CREDENTIALS
from tests.azure_focuscost_data import FOLDER as AZURE_EXPORT_FOLDER
from tests.conftest import query, table_digest
from tests.hostile_servers import Hostile, serve
from tests.test_conformance import FIXTURES, TYPES

REGISTRY = default_registry()
NETWORKED = [t for t in TYPES if REGISTRY.get(t).meta.transport is not None]
# Bounds small enough to trip in 1-2 s: each is a source option (docs/sources/loads.md#network-bounds).
TIGHT = {"connect_timeout_s": 1.0, "timeout_s": 1.5, "max_body_mb": 0.5, "max_pages": 50, "max_listing_s": 20.0}
QUICK_RETRIES = {"max_attempts": 3, "initial_backoff_s": 0.05, "retries": 3}  # a 503 retried at once
ONE_TRY = {"max_attempts": 1, "retries": 1}  # a bound tripped is not tried again: the test stays short
# The keys network mode needs where a conformance input reads a local copy instead (its spec's ``unless``).
NETWORK_MODE = {
    "aws_cur": {"bucket": "cur-bucket", "prefix": "cur"},
    "gcp_billing_export": {"project": "my-project", "dataset": "billing", "table": "gcp_billing_export_v1_0000"},
    # a SAS token from the environment (a dummy: these servers check none), the export's root folder
    "azure_cost_export": {"container": "billing", "prefix": AZURE_EXPORT_FOLDER, "sas_token_env": "GPUFINOPS_TEST_SAS"},
}
# The container a Blob Storage source's local copy is served as (``Hostile.container``), where its client is "azure".
AZURE_CONTAINER = "billing"
BOUNDED_S = 15.0  # every hostile run ends well inside this, whatever it tripped
_LOADED: dict[str, tuple[dict, Path]] = {}


def a_bound_sentence(error: str) -> bool:
    """One short sentence: the source, the call, the bound (the run's error as the ledger records it)."""
    return error.startswith("conf: ") and "\n" not in error and len(error) <= 300 and "stopped" in error


def network_options(source_type: str, fixture: dict, url: str, bounds: dict = TIGHT, retries: dict = ONE_TRY) -> dict:
    """The conformance input's options in network mode, reaching ``url``, with the tight bounds."""
    meta = REGISTRY.get(source_type).meta
    transport = meta.transport
    assert transport is not None
    declared = {f.name for f in meta.options.fields()}
    options = {k: v for k, v in fixture.items() if k != transport.unless}
    options.update(NETWORK_MODE.get(source_type, {}) if transport.unless in fixture else {})
    options[transport.endpoint] = [f"{url}/metrics"] if transport.endpoint == "targets" else url
    options.update({k: v for k, v in {**bounds, **retries}.items() if k in declared})
    return options


def loaded(source_type: str, root: Path) -> tuple[dict, Path]:
    """(the conformance input's options, a warehouse holding its honest load), built once per type."""
    if source_type not in _LOADED:
        folder = root / source_type
        (folder / "input").mkdir(parents=True)
        options, _ = FIXTURES[source_type](folder / "input")
        warehouse = folder / "wh" / "gpufinops.duckdb"
        honest = run_source(REGISTRY, warehouse, "conf", source_type, options)
        assert honest.status == "succeeded", honest.error
        _LOADED[source_type] = options, warehouse
    return _LOADED[source_type]


def snapshot(warehouse: Path, source_type: str) -> tuple:
    table = REGISTRY.get(source_type).meta.target_table
    return table_digest(warehouse, table), query(warehouse, "SELECT source, state FROM ingest_state ORDER BY source")


def hostile_run(source_type: str, state: Hostile, root: Path, tmp_path: Path) -> tuple[str, float]:
    """The source run against ``state``'s server on a copy of its honest warehouse: (error, seconds)."""
    fixture, honest = loaded(source_type, root)
    warehouse = tmp_path / "wh" / "gpufinops.duckdb"
    warehouse.parent.mkdir(parents=True)
    shutil.copy(honest, warehouse)
    before = snapshot(warehouse, source_type)
    with serve(state) as server:
        started = time.monotonic()
        result = run_source(REGISTRY, warehouse, "conf", source_type, network_options(source_type, fixture, server.url))
        elapsed = time.monotonic() - started
    assert result.status == "failed", (source_type, state.mode, result)
    assert snapshot(warehouse, source_type) == before, "the warehouse or the cursor changed"
    assert state.requests, f"{source_type} never reached the server"
    error = result.error or ""
    assert error.startswith("conf: ") and "\n" not in error, error
    print(f"{source_type} [{state.mode}{state.period if state.mode == 'cycle' else ''}] {elapsed:.1f} s: {error}")
    return error, elapsed


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("network")


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs sign with dummies: these tests never reach a cloud."""
    for name, value in DUMMY_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPUFINOPS_TEST_SAS", "sv=2024-11-04&ss=b&srt=co&sp=rl&sig=dummy")
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)  # it would win over the SAS token


def test_every_networked_source_is_driven():
    assert NETWORKED, "no registered source declares a transport"
    for source_type in NETWORKED:
        transport = REGISTRY.get(source_type).meta.transport
        declared = {f.name for f in REGISTRY.get(source_type).meta.options.fields()}
        assert transport.endpoint in declared and set(TIGHT) <= declared, source_type


@pytest.mark.parametrize("period", [1, 2, 3])
@pytest.mark.parametrize("source_type", NETWORKED)
def test_page_tokens_that_cycle_stop_the_listing(source_type, period, root, tmp_path):
    error, elapsed = hostile_run(source_type, Hostile("cycle", period=period), root, tmp_path)
    assert elapsed < BOUNDED_S, error
    if REGISTRY.get(source_type).meta.transport.paged:  # one that pages no listing fails on the odd answer
        assert f"answered a page token it answered {period} page(s) before" in error, error
        assert a_bound_sentence(error), error


@pytest.mark.parametrize(
    ("mode", "bound"), [("endless", "(timeout_s)"), ("stall", "(timeout_s)"), ("huge", "(max_body_mb)")]
)
@pytest.mark.parametrize("source_type", NETWORKED)
def test_a_body_that_never_ends_stalls_or_is_huge_is_cut_at_its_bound(source_type, mode, bound, root, tmp_path):
    error, elapsed = hostile_run(source_type, Hostile(mode), root, tmp_path)
    assert bound in error and a_bound_sentence(error), error
    assert elapsed < BOUNDED_S, error


@pytest.mark.parametrize("source_type", NETWORKED)
def test_a_503_then_the_answer_is_retried_into_a_load(source_type, tmp_path):
    transport = REGISTRY.get(source_type).meta.transport
    (tmp_path / "input").mkdir()
    fixture, _ = FIXTURES[source_type](tmp_path / "input")
    endpoint = fixture.get(transport.endpoint)
    state = Hostile("flaky")
    if isinstance(endpoint, str) and endpoint.startswith("http"):
        state.upstream = endpoint
    elif transport.client == "http":  # the input is local files: served over HTTP instead
        files = sorted(_local_files(fixture.get(transport.unless or transport.endpoint)))
        state.files = {f"/metrics{i}": path.read_bytes() for i, path in enumerate(files)}
    elif transport.client == "azure" and transport.unless:  # a copy of a container: served as Blob Storage
        folder = Path(fixture[transport.unless])
        state.container = AZURE_CONTAINER
        state.files = {
            f"/{AZURE_CONTAINER}/{p.relative_to(folder).as_posix()}": p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file()
        }
    else:
        pytest.skip(f"{source_type}'s conformance input is a local copy and its API has no loopback server here")
    with serve(state) as server:
        options = network_options(source_type, fixture, server.url, {}, QUICK_RETRIES)  # default bounds: a real load
        if state.files and not state.container:
            urls = [f"{server.url}{path}" for path in state.files]
            options[transport.endpoint] = urls if transport.endpoint == "targets" else urls[0]
        result = run_source(REGISTRY, tmp_path / "wh" / "gpufinops.duckdb", "conf", source_type, options)
    assert result.status == "succeeded" and result.rows > 0, result.error
    assert len(state.requests) >= 2, state.requests  # the 503, then the retried request and the rest


def _local_files(value: str | list[str] | None) -> list[Path]:
    patterns = [value] if isinstance(value, str) else list(value or [])
    return [p for pattern in patterns for p in Path("/").glob(pattern.lstrip("/"))]


def _reads_no_network(source_type: str, options: dict) -> bool:
    transport = REGISTRY.get(source_type).meta.transport
    if transport is None:
        return True
    endpoint = options.get(transport.endpoint)
    local_endpoint = isinstance(endpoint, list) and not any("://" in str(e) for e in endpoint)
    return bool(transport.unless and options.get(transport.unless)) or local_endpoint


@pytest.mark.parametrize("source_type", TYPES)
def test_a_source_reading_files_makes_no_network_call(source_type, tmp_path, monkeypatch):
    (tmp_path / "input").mkdir()
    options, _ = FIXTURES[source_type](tmp_path / "input")
    if not _reads_no_network(source_type, options):
        pytest.skip(f"{source_type}'s conformance input is read over the network")
    attempts: list[object] = []

    def refused(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise ConnectionRefusedError(f"sockets are blocked in this test ({address})")

    monkeypatch.setattr(socket.socket, "connect", refused)
    monkeypatch.setattr(socket.socket, "connect_ex", refused)
    result = run_source(REGISTRY, tmp_path / "wh" / "gpufinops.duckdb", "conf", source_type, options)
    assert attempts == [] and result.status == "succeeded", (attempts, result.error)
