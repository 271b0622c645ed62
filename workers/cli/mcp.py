"""``benchwatch mcp``: the API's reads as tools for an AI assistant (an MCP server on stdio).

The server is the light client's (``benchwatch_client.mcp_server``, also ``benchwatch-mcp``):
a client of a benchwatch server's API that only reads, set up as docs/mcp.md says.
"""

import argparse

from workers.cli.common import Command


def cmd_mcp(args: argparse.Namespace) -> int:
    """Serve the read tools on stdin/stdout until the assistant closes them."""
    from benchwatch_client.mcp_server import serve

    return serve(args, prog="benchwatch mcp")


def _mcp_options(parser: argparse.ArgumentParser) -> None:
    from benchwatch_client.mcp_server import add_arguments

    add_arguments(parser)


COMMANDS: dict[str, Command] = {
    "mcp": (
        "serve a benchwatch server's reads to an AI assistant (MCP, stdio)",
        cmd_mcp,
        _mcp_options,
    ),
}
