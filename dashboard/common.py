"""What every page shares: who is looking (their Scope), a read-only connection per render, money.

Settings and the warehouse path are read from the environment on every render (the CLI sets them),
never cached at import, so one Streamlit process (or one AppTest run) always sees the current ones.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import duckdb
import polars as pl
import streamlit as st

from gpufinops.dashboard import access, precomputed
from gpufinops.dashboard.precomputed import DEFAULT_WINDOW_DAYS as DEFAULT_WINDOW_DAYS
from gpufinops.dashboard.precomputed import WINDOW_CHOICES as WINDOW_CHOICES
from gpufinops.dashboard.precomputed import month_bounds as month_bounds
from gpufinops.dashboard.precomputed import window_start as window_start
from gpufinops.warehouse import db, queries
from gpufinops.warehouse.scope import Scope

DEFAULT_DB = "data/gpufinops.duckdb"
T = TypeVar("T")


@dataclass(frozen=True)
class PageContext:
    settings: access.Settings
    scope: Scope

    @property
    def teams(self) -> list[str] | None:
        """The team filter every query of the page gets (None: every team)."""
        return self.scope.team_filter


def db_path() -> Path:
    return Path(os.environ.get("GPUFINOPS_DB", DEFAULT_DB))


@st.cache_resource(show_spinner=False)
def prepared(path: str) -> int | None:
    """Migrations and reference data once per server process (warehouse.db.prepare), not per render (the
    app calls it on every render; the server's warm-up, before the first reader)."""
    return db.prepare(path, retry_seconds=10)


READ_RETRY_SECONDS = 20.0  # an ingest holds the file for one load (seconds); wait it out, then say so


@contextlib.contextmanager
def connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for one render: an ingest may write between two renders.

    While a writer holds the file the open is retried; if it stays locked the page says so and
    stops cleanly (no exception box), and the next render tries again.
    """
    with contextlib.ExitStack() as stack:
        try:
            con = stack.enter_context(db.reader(db_path(), retry_seconds=READ_RETRY_SECONDS))
        except db.WarehouseBusy:
            st.warning("An ingest is writing to the warehouse right now: reload in a few seconds.")
            st.stop()
        _VERSIONS[id(con)] = None
        try:
            yield con
        finally:
            _VERSIONS.pop(id(con), None)


_VERSIONS: dict[int, tuple | None] = {}  # the data version of each open render connection, read once


def data_version(con: duckdb.DuckDBPyConnection) -> tuple:
    """``queries.dashboard_data_version``, read once per render connection (a render asks for it on every
    cached query); a connection not opened by ``connection()`` reads it every time."""
    if id(con) not in _VERSIONS:
        return queries.dashboard_data_version(con)
    version = _VERSIONS[id(con)]
    if version is None:
        version = _VERSIONS[id(con)] = queries.dashboard_data_version(con)
    return version


def _request_identity(settings: access.Settings) -> str | None:
    headers = dict(st.context.headers) if settings.auth == "header" else None
    user = st.user.to_dict() if settings.auth == "oidc" else None
    return access.identity(settings, headers=headers, user=user)


def page_context() -> PageContext:
    """The viewer's scope, or stop the page: a bad config, no login, or an unknown user sees nothing."""
    try:
        settings = access.settings_from_env()
    except ValueError as exc:
        st.error(f"Dashboard configuration error: {exc}")
        st.stop()
    try:
        scope = access.scope_for(settings, _request_identity(settings))
    except access.AccessDenied as exc:
        if settings.auth == "oidc" and not _request_identity(settings):
            st.info("Sign in to see GPU spend.")
            st.button("Sign in", on_click=st.login, args=(settings.oidc_provider,) if settings.oidc_provider else ())
        else:
            st.error(f"Access denied: {exc}")
        st.stop()
    return PageContext(settings, scope)


def banner(ctx: PageContext) -> None:
    """Say plainly who this is and what they see; shout when nobody is authenticated."""
    if not ctx.settings.authenticated:
        st.warning(
            "No authentication is configured: this dashboard shows every team (demo mode). "
            'Set `[dashboard] auth` to "oidc" or "header" before sharing it.'
        )
    else:
        seen = "every team" if ctx.teams is None else "team(s) " + ", ".join(ctx.teams)
        st.caption(f"Signed in as {ctx.scope.actor} ({ctx.scope.role}): showing {seen}.")


def money(value: Decimal | float | int | None) -> str:
    """Currency text for any amount: $1,234.57, -$12.00; an unknown amount is an em dash."""
    if value is None:
        return "—"
    amount = float(value)
    return f"-${-amount:,.2f}" if amount < 0 else f"${amount:,.2f}"


def money_frame(frame: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """Money columns as floats, for charts and on-screen tables only (the warehouse keeps DECIMAL)."""
    return frame.with_columns([pl.col(c).cast(pl.Float64) for c in cols if c in frame.columns])


def total(frame: pl.DataFrame, col: str) -> Decimal:
    """The exact sum of a DECIMAL column (0 for an empty frame)."""
    if frame.is_empty():
        return Decimal(0)
    value = frame[col].sum()
    return Decimal(str(value)) if value is not None else Decimal(0)


def page_header(title: str) -> PageContext:
    """Every page starts here: the viewer's scope (or a stop), the auth banner, the title."""
    ctx = page_context()
    banner(ctx)
    st.title(title)
    return ctx


@st.cache_data(ttl=900, max_entries=512, show_spinner=False)
def _cached_query(_con: duckdb.DuckDBPyConnection, db_file: str, version: tuple, name: str, kwargs: dict):
    stored = precomputed.stored_query(_con, name, kwargs)  # what the load job computed for these arguments
    return stored if stored is not None else getattr(queries, name)(_con, **kwargs)


def cached_query(con: duckdb.DuckDBPyConnection, name: str, **kwargs):
    """``queries.<name>(con, **kwargs)``: the result the load job stored for these arguments on the data
    held now (``dashboard.precomputed.STORED_QUERIES``), else the query's own; reused across renders while
    the warehouse's data version (``queries.dashboard_data_version``) is unchanged, so the heavy scans of
    10M line items run once per ingest, not once per click. The key holds every argument, the viewer's
    teams included."""
    return _cached_query(con, str(db_path().resolve()), data_version(con), name, kwargs)


@st.cache_data(ttl=900, max_entries=512, show_spinner=False)
def _cached_call(
    _con: duckdb.DuckDBPyConnection, _read: Callable, db_file: str, version: tuple, name: str, kwargs: dict
):
    return _read(_con, **kwargs)


def cached_call(con: duckdb.DuckDBPyConnection, read: Callable[..., T], **kwargs) -> T:
    """``read(con, **kwargs)`` (a warehouse read other than a ``queries`` function: the allocation, carbon
    and unit-cost builders), reused across renders while the warehouse's data version is unchanged, as
    ``cached_query`` is; keyed by the function's module and name and every argument, the viewer's teams
    included."""
    name = f"{read.__module__}.{read.__qualname__}"
    return _cached_call(con, read, str(db_path().resolve()), data_version(con), name, kwargs)
