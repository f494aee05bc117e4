"""`slowave-mcp`: the MCP server. Stdio by default, streamable HTTP with `--http host:port`.

    slowave-mcp [--target host:port] [--api-key KEY] [--tls] [--root-ca ca.pem] [--http host:port]

Each tool call runs `json_contract.execute` (all the translation) in a worker thread, because the
gRPC call it makes blocks.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from importlib import metadata
from typing import Any

try:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError
except ModuleNotFoundError as exc:  # `make serve` installs the service without the extra
    raise SystemExit(f"slowave-mcp needs the `mcp` extra: pip install -e '.[mcp]' ({exc})") from exc

from slowave_mcp.channel import DEFAULT_TARGET, DEFAULT_TIMEOUT_SECONDS, connect
from slowave_mcp.json_contract import TOOLS, Invoke, execute
from slowave_mcp.proto_to_json import error
from slowave_mcp.tools import DESCRIPTIONS, INSTRUCTIONS, input_schema

log = logging.getLogger("slowave_mcp")

_TITLES = {
    "slowave_activate": "Start a task and retrieve relevant memories",
    "slowave_remember": "Store durable claims",
    "slowave_recall": "Look up memories mid-task",
    "slowave_feedback": "Assess retrieved memories and procedures",
    "slowave_commit": "Close the task with its verified outcome",
}


def tool_definitions() -> list[types.Tool]:
    return [
        types.Tool(
            name=name,
            title=_TITLES[name],
            description=DESCRIPTIONS[name],
            input_schema=input_schema(name),
            # Every tool writes (sessions, retrieval events, ledger rows) but only ever appends.
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
            ),
        )
        for name in TOOLS
    ]


def build_server(invoke: Invoke) -> Server:
    tools = tool_definitions()

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name not in TOOLS:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}")
        try:
            envelope = await anyio.to_thread.run_sync(execute, params.name, params.arguments, invoke)
        except Exception as exc:  # a bridge defect must not end the agent's MCP session
            log.exception("tool %s failed inside the bridge", params.name)
            envelope = error("internal_error", f"bridge failure: {exc}", True)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(envelope, ensure_ascii=False))],
            structured_content=envelope,
            is_error=not envelope["ok"],
        )

    return Server(
        "slowave", version=_version(), instructions=INSTRUCTIONS, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


def _version() -> str:
    try:
        return metadata.version("slowave")
    except metadata.PackageNotFoundError:
        return "0"


async def serve_stdio(server: Server) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server, host: str, port: int) -> None:
    import uvicorn

    # Bound before announcing, so a client reading the announced address never races the start-up
    # (and `:0` can report the port it got).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    actual = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"slowave-mcp: streamable HTTP on http://{shown}:{actual}/mcp", file=sys.stderr, flush=True)
    app = server.streamable_http_app(host=host)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock])


def _http_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError("expected host:port, e.g. 127.0.0.1:8765")
    return host.strip("[]") or "127.0.0.1", int(port)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(prog="slowave-mcp", description="The Slowave memory tools as an MCP server.")
    p.add_argument(
        "--target",
        default=env.get("SLOWAVE_TARGET") or DEFAULT_TARGET,
        help=f"MemoryService address (env SLOWAVE_TARGET, default {DEFAULT_TARGET})",
    )
    p.add_argument(
        "--api-key",
        default=env.get("SLOWAVE_API_KEY") or None,
        help="sent as `authorization: Bearer <key>` (env SLOWAVE_API_KEY)",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        default=_truthy(env.get("SLOWAVE_TLS")),
        help="connect with TLS using the system roots (env SLOWAVE_TLS=1)",
    )
    p.add_argument(
        "--root-ca",
        default=env.get("SLOWAVE_TLS_ROOT_CA") or None,
        metavar="PEM",
        help="connect with TLS trusting this CA bundle (env SLOWAVE_TLS_ROOT_CA)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=float(env.get("SLOWAVE_TIMEOUT") or DEFAULT_TIMEOUT_SECONDS),
        help="deadline of each RPC in seconds (env SLOWAVE_TIMEOUT)",
    )
    p.add_argument(
        "--http",
        type=_http_address,
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0 picks one)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # stdout is the MCP wire in stdio mode: every log line goes to stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="slowave-mcp: %(levelname)s %(message)s")
    root_ca = None
    if args.root_ca:
        with open(args.root_ca, "rb") as f:
            root_ca = f.read()
    connection = connect(args.target, api_key=args.api_key, tls=args.tls, root_ca=root_ca, timeout=args.timeout)
    server = build_server(connection.invoke)
    try:
        if args.http:
            anyio.run(serve_http, server, *args.http)
        else:
            anyio.run(serve_stdio, server)
    except KeyboardInterrupt:
        pass
    finally:
        connection.close()


if __name__ == "__main__":
    main()
