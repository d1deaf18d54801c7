"""``gpufinops doctor``: is this installation ready for this config? One line per check, with its fix.

Checks, in order: the config loads; the optional extras its sources need are installed; the
cloud credentials resolve through the SDKs' default chains (boto3's session chain, google-auth's
Application Default Credentials; never printed); every configured source answers within the
timeout (``interfaces.doctor_sources``); the warehouse opens and its schema is current. Exit 1 if any
check fails (warnings do not fail).
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpufinops.ingest.core import extras
from gpufinops.interfaces import doctor_sources as sources
from gpufinops.interfaces.doctor_sources import FAIL, OK, SKIP, WARN
from gpufinops.jobs.output import emit, terminal_width

STYLES = {OK: "green", WARN: "yellow", FAIL: "bold red", SKIP: "dim"}


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str | None = None


def check_config(path: str | None, db: str | None):
    from gpufinops.jobs import config as config_mod

    chosen = (
        path or os.environ.get("GPUFINOPS_CONFIG") or ("gpufinops.toml" if Path("gpufinops.toml").exists() else None)
    )
    try:
        cfg = config_mod.load(path, db=db)
    except config_mod.ConfigError as exc:
        return None, Check(
            "config", FAIL, str(exc), f"edit {chosen or 'the config'} (`gpufinops init` writes a new one)"
        )
    from gpufinops.ingest.core import scrub

    scrub.remember(cfg.secrets())  # what the checks print is scrubbed of them too (the CLI's streams)
    if cfg.path is None:
        return cfg, Check(
            "config",
            WARN,
            "no config file: built-in defaults, no sources",
            "gpufinops init (writes ./gpufinops.toml), or --config PATH",
        )
    return cfg, Check("config", OK, f"{cfg.path}: {len(cfg.sources)} source(s)")


def check_extras(cfg) -> list[Check]:
    needed: dict[str, list[str]] = {}
    for source in cfg.sources.values() if cfg else []:
        extra = sources.needs_extra(source)
        if extra:
            needed.setdefault(extra, []).append(source.name)
    out = []
    for extra in extras.EXTRAS:
        missing = extras.missing_modules(extra)
        users = needed.get(extra, [])
        purpose = (
            f"needed by {', '.join(users)}"
            if users
            else ("for `gpufinops dashboard`" if extra == "dashboard" else "not needed by this config")
        )
        if not missing:
            out.append(Check(f"extra {extra}", OK, f"installed ({purpose})"))
        elif users or extra == "dashboard":
            out.append(
                Check(
                    f"extra {extra}",
                    FAIL if users else WARN,
                    f"{', '.join(missing)} not installed ({purpose})",
                    extras.install_hint(extra),
                )
            )
        else:
            out.append(Check(f"extra {extra}", SKIP, f"{', '.join(missing)} not installed ({purpose})"))
    return out


def aws_credentials() -> Check:
    import boto3

    credentials = boto3.session.Session().get_credentials()
    if credentials is None:
        return Check(
            "credentials aws",
            FAIL,
            "boto3's default chain found no credentials",
            "set AWS_PROFILE (after `aws configure` or `aws sso login`), or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or run where an instance / pod role applies",
        )
    return Check("credentials aws", OK, f"found by boto3 ({credentials.method})")


def gcp_credentials(cfg) -> Check:
    """The credentials the Google Cloud API sources use: a source's ``credentials_file``, none where every
    one names an emulator ``endpoint``, else Application Default Credentials (``GcpClientOptions``)."""
    from gpufinops.ingest.gcp.gcp_common import GcpClientOptions

    api = {s.name: s.parsed for s in cfg.sources.values() if sources.needs_extra(s) == "gcp"}
    clients = {name: opts for name, opts in api.items() if isinstance(opts, GcpClientOptions)}
    keyed = [(name, opts.credentials_file) for name, opts in clients.items() if opts.credentials_file]
    anonymous = [name for name, opts in clients.items() if opts.endpoint and not opts.credentials_file]
    if keyed:
        name, credentials_file = keyed[0]
        path = Path(os.path.expanduser(credentials_file))
        path = path if path.is_absolute() else cfg.base_dir / path
        if not path.is_file():
            return Check(
                "credentials gcp",
                FAIL,
                f"credentials_file {path} does not exist",
                f"fix sources.{name}.credentials_file",
            )
        return Check("credentials gcp", OK, f"credentials_file {path}")
    if len(anonymous) == len(api):
        return Check("credentials gcp", OK, "anonymous (the sources name an emulator endpoint)")
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        _, project = google.auth.default()
    except DefaultCredentialsError:
        return Check(
            "credentials gcp",
            FAIL,
            "no Application Default Credentials",
            "gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS=/path/key.json",
        )
    return Check("credentials gcp", OK, f"Application Default Credentials{f' (project {project})' if project else ''}")


def check_credentials(cfg) -> list[Check]:
    wanted = {sources.needs_extra(s) for s in cfg.sources.values()} if cfg else set()
    out = []
    for extra, check in (("aws", aws_credentials), ("gcp", lambda: gcp_credentials(cfg))):
        if extra not in wanted:
            continue
        if extras.missing_modules(extra):
            out.append(Check(f"credentials {extra}", SKIP, f"the {extra} extra is not installed"))
            continue
        out.append(check())
    return out


def check_source(source, base_dir: Path, timeout: float, no_credentials: Set[str] = frozenset()) -> Check:
    name = f"source {source.name}"
    check = sources.check_of(source.type)  # the check its spec names
    if not source.enabled:
        return Check(name, SKIP, f"{source.type}: disabled (enabled = false)")
    if check is None:
        return Check(name, SKIP, f"{source.type}: no reachability check for this type yet")
    extra = sources.needs_extra(source)
    if extra and extras.missing_modules(extra):
        return Check(name, SKIP, f"{source.type}: the {extra} extra is not installed")
    if extra in no_credentials:
        return Check(name, SKIP, f"{source.type}: not tried without {extra} credentials (see above)")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(check, source, base_dir, timeout)
    try:
        status, detail, fix = future.result(timeout=timeout * 3 + 5)  # a hung DNS lookup or TLS handshake
    except concurrent.futures.TimeoutError:
        return Check(name, FAIL, f"{source.type}: no answer within {timeout:g} s", "check the network path to it")
    except Exception as exc:  # the call's own error, one line (SDK errors never carry credentials)
        message = " ".join(str(exc).split())[:300] or type(exc).__name__
        return Check(
            name,
            FAIL,
            f"{source.type}: {sources._aws_error(exc) if hasattr(exc, 'response') else message}",
            "check the source's settings and the credentials' permissions",
        )
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return Check(name, status, f"{source.type}: {detail}", fix)


def check_warehouse(cfg) -> Check:
    import duckdb

    from gpufinops.warehouse import db
    from gpufinops.warehouse.schema import SCHEMA_VERSION

    path = cfg.warehouse_path if cfg else Path("data/gpufinops.duckdb").resolve()
    if not path.exists():
        parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
        if parent is None or not os.access(parent, os.W_OK):
            return Check("warehouse", FAIL, f"{path}: {parent} is not writable", "choose [warehouse] path elsewhere")
        return Check("warehouse", WARN, f"{path} does not exist yet", "gpufinops ingest creates it")
    try:
        with db.reader(path, retry_seconds=2) as con:
            version = con.execute("SELECT max(version) FROM schema_version").fetchall()[0][0]
            lines = con.execute("SELECT count(*) FROM cost_line_items").fetchall()[0][0]
    except db.WarehouseBusy:
        return Check("warehouse", WARN, f"{path}: a job is writing it (locked)", "try again when the ingest ends")
    except duckdb.Error as exc:
        return Check("warehouse", FAIL, f"{path}: {str(exc).splitlines()[0]}", "is it a gpufinops DuckDB file?")
    if version > SCHEMA_VERSION:
        return Check(
            "warehouse",
            FAIL,
            f"{path}: schema version {version}, newer than this gpufinops ({SCHEMA_VERSION})",
            "upgrade gpufinops",
        )
    upgrade = (
        f" (upgraded to {SCHEMA_VERSION} by `{db.UPGRADE_COMMAND}` or the next command's start)"
        if version < SCHEMA_VERSION
        else ""
    )
    return Check("warehouse", OK, f"{path}: schema version {version}{upgrade}, {lines:,} cost lines")


def checks(path: str | None, db: str | None, timeout: float):
    """Every check, yielded as it completes (the output streams)."""
    cfg, config_check = check_config(path, db)
    yield config_check
    yield from check_extras(cfg)
    if cfg is None:
        return
    no_credentials = set()
    for check in check_credentials(cfg):
        if check.status == FAIL:
            no_credentials.add(check.name.split()[-1])
        yield check
    for source in cfg.sources.values():
        yield check_source(source, cfg.base_dir, timeout, no_credentials)
    yield check_warehouse(cfg)


def detail(check: Check) -> Text:
    text = Text(check.detail)
    if check.fix and check.status in (FAIL, WARN):
        text.append(f"  → fix: {check.fix}", style="cyan")
    return text


def _name_width(path: str | None, db: str | None) -> int:
    """The check-name column: as wide as the longest ``source <name>`` (names are never cut)."""
    from gpufinops.jobs import config as config_mod

    try:
        names = list(config_mod.load(path, db=db).sources)
    except config_mod.ConfigError:
        names = []
    return max([len("credentials aws"), len("extra dashboard")] + [len(f"source {n}") for n in names]) + 1


def _features(path: str | None, db: str | None, console: Console) -> None:
    """The features the configured sources leave unknown (interfaces/doctor_features.py), after the checks."""
    from gpufinops.interfaces import doctor_features
    from gpufinops.jobs import config as config_mod

    try:
        table = doctor_features.matrix(config_mod.load(path, db=db))
    except config_mod.ConfigError:
        return
    if table is not None:
        console.print()
        emit(console, table)


def run(path: str | None, *, db: str | None = None, timeout: float = 10.0, out: IO[str] | None = None) -> int:
    """Print one row per check as it completes (status, what was checked, what was found and its fix);
    exit 1 if any check failed."""
    target = out or sys.stdout
    console = Console(file=target, width=terminal_width(target), highlight=False)
    name_width = _name_width(path, db)
    failed = warned = 0
    for check in checks(path, db, timeout):
        row = Table.grid(padding=(0, 1))
        row.add_column(width=5, no_wrap=True)
        row.add_column(width=name_width, no_wrap=True)
        row.add_column(overflow="fold")
        row.add_row(Text(check.status, style=STYLES[check.status]), Text(check.name, style="bold"), detail(check))
        emit(console, row)
        failed += check.status == FAIL
        warned += check.status == WARN
    _features(path, db, console)
    console.print(
        f"\n{failed} check(s) failed, {warned} warning(s)." if failed or warned else "\nEverything checks out."
    )
    return 1 if failed else 0
