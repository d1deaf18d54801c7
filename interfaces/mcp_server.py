"""`gpufinops mcp`: the warehouse's read tools (interfaces/mcp_tools.py) as a Model Context Protocol server,
over stdio (an assistant on this machine starts it) or streamable HTTP, built on the official SDK
(the ``mcp`` extra, imported only here and only when the command runs).

Who is asking is decided as in `gpufinops api`, from ``[[api.tokens]]`` (finance: every team; lead:
its teams; scheduler: recommendations and plans only):

* over HTTP every request carries ``Authorization: Bearer <token>``, checked by the SDK's bearer
  middleware against the configured tokens (digests compared in constant time; a session answers only
  the token that opened it); without tokens the server refuses to start unless ``--insecure-demo``;
* over stdio the client starts the server with the token in an environment variable named by
  ``--token-env VAR``; its value must be one of the configured tokens (of those whose variables are set
  in the server's environment), whose scope the whole session gets.

Token values are never logged, echoed or put in an error.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import inspect
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpufinops.ingest.core import scrub
from gpufinops.interfaces import mcp_tools
from gpufinops.jobs.config import Config, ConfigError
from gpufinops.warehouse.scope import Scope

log = logging.getLogger("gpufinops.mcp")

INSECURE_WARNING = (
    "gpufinops mcp: --insecure-demo: NO AUTHENTICATION. Every caller gets finance scope "
    "(every team's costs, alerts, budgets and recommendations). Demo use only."
)
INSTRUCTIONS = (
    "gpufinops: GPU spend (USD, by UTC day and team; shared GPUs charged by allocation), shared-GPU "
    "allocation, recommendations with their plans and decisions, alerts and budgets, from the gpufinops "
    "warehouse. Days are YYYY-MM-DD and inclusive. Spend without a team is named "
    f"{mcp_tools.NO_TEAM!r}. Every answer is limited to what the caller's token may see."
)
DEFAULT_PORT = 8001
MISSING_SDK = (
    "gpufinops mcp needs mcp (the Model Context Protocol SDK), which is not installed: install the 'mcp' "
    "extra (in a clone: `.venv/bin/pip install -e '.[mcp]'`; with pip: `pip install 'gpufinops[mcp]'`)"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    mcp = sub.add_parser("mcp", help="a Model Context Protocol server: read tools for assistants (stdio or HTTP)")
    mcp.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="stdio (default) or streamable HTTP"
    )
    mcp.add_argument("--host", default="127.0.0.1", metavar="H", help="http: address to listen on (default: 127.0.0.1)")
    mcp.add_argument(
        "--port", type=int, default=DEFAULT_PORT, metavar="P", help=f"http: port (default: {DEFAULT_PORT})"
    )
    mcp.add_argument(
        "--token-env",
        metavar="VAR",
        help="stdio: the environment variable holding your token (one of [[api.tokens]]): its scope is the session's",
    )
    mcp.add_argument(
        "--insecure-demo",
        action="store_true",
        help="without [[api.tokens]]: serve every caller with finance scope (demo only)",
    )


@dataclass(frozen=True)
class Principal:
    client_id: str  # the token's variable name: unique per token, what a session is bound to
    digest: bytes
    scope: Scope


def principals(cfg: Config, environ: Mapping[str, str], *, strict: bool = True) -> list[Principal]:
    """The configured tokens (``interfaces.api.load_tokens``: unset, short or shared values are config
    errors); ``strict=False`` keeps only the entries whose variables are set (stdio: the client's
    environment holds the user's own token, not everyone's)."""
    from gpufinops.interfaces.api import load_tokens

    entries = cfg.api.tokens if strict else tuple(e for e in cfg.api.tokens if environ.get(e.token_env))
    tokens = load_tokens(replace(cfg, api=replace(cfg.api, tokens=entries)), environ)
    return [Principal(e.token_env, t.digest, t.scope) for e, t in zip(entries, tokens)]


def match(known: list[Principal], presented: str) -> Principal | None:
    """Every token compared (no early exit), each in constant time."""
    digest = hashlib.sha256(presented.encode()).digest()
    found = None
    for principal in known:
        if hmac.compare_digest(digest, principal.digest) and found is None:
            found = principal
    return found


def stdio_scope(cfg: Config, token_env: str | None, *, insecure_demo: bool, environ: Mapping[str, str]) -> Scope:
    """The scope of a stdio session: the configured token held by ``token_env``."""
    if not cfg.api.tokens:
        if insecure_demo:
            return Scope("finance", None, "insecure-demo")
        raise ConfigError(
            "api.tokens: no [[api.tokens]] configured: `gpufinops mcp` refuses to start without them "
            "(--insecure-demo serves every caller with finance scope, for a demo only)"
        )
    if not token_env:
        raise ConfigError(
            "--token-env: name the environment variable that holds your token (one of [[api.tokens]]); "
            "--insecure-demo is ignored while [[api.tokens]] are configured"
        )
    presented = environ.get(token_env, "")
    if not presented:
        raise ConfigError(f"--token-env: environment variable {token_env} is not set")
    found = match(principals(cfg, environ, strict=False), presented)
    if found is None:
        raise ConfigError(f"--token-env: the token in {token_env} is not one of the configured [[api.tokens]]")
    return found.scope


def build(cfg: Config, *, scope: Scope | None = None, known: list[Principal] | None = None):
    """The MCPServer with every tool of ``mcp_tools.registry``: ``scope`` for the whole process
    (stdio, or --insecure-demo), else the scope of the bearer token each HTTP request carries."""
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ToolAnnotations
    from pydantic import AnyHttpUrl

    auth = None
    if known:  # issuer_url: required by the settings, unused without an authorization server
        auth = AuthSettings(issuer_url=AnyHttpUrl("http://localhost"), resource_server_url=None)
    server = MCPServer(
        "gpufinops",
        instructions=INSTRUCTIONS,
        version=_version(),
        token_verifier=_verifier(known) if known else None,
        auth=auth,
        log_level="WARNING",
    )
    caller = _caller_of(scope, {p.client_id: p.scope for p in known or []})
    read_only = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
    for spec in mcp_tools.registry(cfg.alerts.settings.budgets).values():
        server.add_tool(_tool(cfg, spec, caller), name=spec.name, description=spec.description, annotations=read_only)
        _short_validation(server._tool_manager.get_tool(spec.name), spec.name)
    return server


def _short_validation(tool: Any, name: str) -> None:
    """The SDK's refusal of arguments its schema does not take (a string for an integer, an object for a
    boolean) as one short sentence: the tool, the argument, the reason, the value cut (pydantic's own text
    spans lines and a link, 250-350 characters)."""
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    original = tool.run

    async def run(arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await original(arguments, context, convert_result)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            errors: list[Any] = list(exc.__cause__.errors())
            first: dict[str, Any] = dict(errors[0]) if errors else {}
            argument = ".".join(str(part) for part in first.get("loc", ())) or "arguments"
            value = arguments.get(argument) if isinstance(arguments, dict) else None
            said = f"{name}: {argument}: {first.get('msg', 'invalid')} (got {value!r})"
            raise ToolError(scrub.brief(said)) from None

    object.__setattr__(tool, "run", run)


def _verifier(known: list[Principal]):
    """The SDK's token verifier over the configured principals."""
    from mcp.server.auth.provider import AccessToken

    class Verifier:
        async def verify_token(self, token: str) -> AccessToken | None:
            found = match(known, token)
            if found is None:
                return None
            # `token` is a digest, never the value: the SDK keeps this object for the request
            return AccessToken(token=found.digest.hex(), client_id=found.client_id, scopes=[found.scope.role])

    return Verifier()


def _caller_of(scope: Scope | None, by_client: dict[str, Scope]):
    """The scope of a tool call: the process's ``scope``, else that of the request's bearer token."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    def caller(ctx: Context) -> Scope:
        if scope is not None:
            return scope
        request = ctx.request_context.request
        user = getattr(request, "scope", {}).get("user")
        client_id = getattr(getattr(user, "access_token", None), "client_id", None)
        if client_id not in by_client:
            raise ToolError("missing or invalid bearer token")
        return by_client[client_id]

    return caller


def _tool(cfg: Config, spec: mcp_tools.ToolSpec, caller):
    """One tool as the SDK serves it: the query on a read-only connection, in the caller's scope."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    from gpufinops.warehouse import db

    def tool(ctx: Context, **arguments: Any) -> dict[str, Any]:
        who = caller(ctx)
        try:
            with db.reader(cfg.warehouse_path, memory_limit=cfg.memory_limit) as con:
                return mcp_tools.call(spec, con, who, arguments)
        except mcp_tools.ToolRefused as exc:  # one short sentence: a 1 MB argument is cut, CR and NUL escaped
            said = str(exc) if str(exc).startswith(f"{spec.name}: ") else f"{spec.name}: {exc}"
            raise ToolError(scrub.brief(said)) from None
        except db.WarehouseBusy:
            raise ToolError("the warehouse is busy (a job is writing it): retry in a few seconds") from None
        except db.WarehouseError as exc:
            raise ToolError(scrub.brief(f"{spec.name}: the warehouse is not available: {exc}")) from None

    # The SDK reads a tool's parameters from its signature: the query's own, after (con, scope).
    own = list(inspect.signature(spec.fn, eval_str=True).parameters.values())[2:]
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    tool.__signature__ = inspect.Signature([*own, ctx_param], return_annotation=dict[str, Any])  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in own} | {"ctx": Context, "return": dict[str, Any]}
    tool.__name__ = tool.__qualname__ = spec.name
    return tool


def http_app(cfg: Config, *, host: str = "127.0.0.1", insecure_demo: bool = False, environ=None):
    """The streamable HTTP application (path ``/mcp``); refuses (ConfigError) without tokens unless
    ``insecure_demo``."""
    import os

    known = principals(cfg, os.environ if environ is None else environ)
    if not known and not insecure_demo:
        raise ConfigError(
            "api.tokens: no [[api.tokens]] configured: `gpufinops mcp --transport http` refuses to start "
            "without them (--insecure-demo serves every caller with finance scope, for a demo only)"
        )
    if known and insecure_demo:
        log.warning("--insecure-demo ignored: [[api.tokens]] are configured")
    open_scope = None if known else Scope("finance", None, "insecure-demo")
    return build(cfg, scope=open_scope, known=known).streamable_http_app(host=host)


def run(cfg: Config, args: argparse.Namespace) -> int:
    """`gpufinops mcp`: serve until the client closes stdin (stdio) or until interrupted (HTTP)."""
    import os

    try:
        import mcp  # noqa: F401
    except ImportError:
        print(f"gpufinops: {MISSING_SDK}", file=sys.stderr)
        return 1  # as `gpufinops dashboard` without streamlit
    if args.transport == "stdio":
        scope = stdio_scope(cfg, args.token_env, insecure_demo=args.insecure_demo, environ=os.environ)
        if scope.actor == "insecure-demo":
            print(f"WARNING: {INSECURE_WARNING}", file=sys.stderr)
        build(cfg, scope=scope).run("stdio")
        return 0
    import uvicorn

    if args.token_env:
        raise ConfigError("--token-env: stdio only: over HTTP each request carries its own Bearer token")
    app = http_app(cfg, host=args.host, insecure_demo=args.insecure_demo)
    if args.insecure_demo and not cfg.api.tokens:
        print(f"WARNING: {INSECURE_WARNING}", file=sys.stderr)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"WARNING: and it listens on {args.host}, beyond this machine.", file=sys.stderr)
    print(f"gpufinops mcp: streamable HTTP on http://{args.host}:{args.port}/mcp", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", server_header=False)
    return 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpufinops")
    except PackageNotFoundError:
        return "0"
