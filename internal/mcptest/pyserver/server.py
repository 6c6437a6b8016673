#!/usr/bin/env python3
"""pyserver: a minimal stdio MCP server (legacy era, 2025-11-25) written the
way a typical hand-written Python server is: `for line in sys.stdin` and
json.loads per line. It is deliberately lenient, as such servers are:

  - stdin is read in text mode with universal newlines, so a bare CR ends a
    line just as LF does;
  - a leading UTF-8 byte order mark is skipped;
  - json.loads accepts NaN, Infinity and -Infinity, and keeps the last of
    repeated members;
  - invalid UTF-8 is decoded with U+FFFD replacement characters;
  - a JSON-RPC batch (a list) is accepted and each element handled;
  - a tools/call without an id is still executed (and not answered);
  - a last line without a line break is handled when stdin ends.

tracectl's tests (producer/stdio/gate_peers_test.go) run it behind the
recording proxy, like internal/mcptest/jsonserver.

Tools: echo answers its arguments as text; any other name is answered with a
JSON-RPC error, after being logged.

The call log ($MCPTEST_CALL_LOG, or the argument after -call-log, which
takes precedence) gets one line per tools/call the server
dispatches (known tool or not), appended and fsynced before the response is
written: {"arguments":<params.arguments or null>,"name":<params.name>}, as
json.dumps(sort_keys=True) writes it (NaN stays NaN: such a line is not JSON,
and matches no recorded call).
"""

import json
import os
import sys

CALL_LOG = os.environ.get("MCPTEST_CALL_LOG")
if "-call-log" in sys.argv[1:-1]:
    CALL_LOG = sys.argv[sys.argv.index("-call-log") + 1]


def log_call(name, args):
    if not CALL_LOG:
        return
    line = json.dumps({"name": name, "arguments": args}, sort_keys=True, separators=(",", ":"))
    fd = os.open(CALL_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8", "surrogatepass"))
        os.fsync(fd)
    finally:
        os.close(fd)


def write(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def text_result(text):
    return {"content": [{"type": "text", "text": text}]}


def handle(msg):
    if not isinstance(msg, dict):
        write({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request"}})
        return
    method = msg.get("method")
    has_id = msg.get("id") is not None
    params = msg.get("params")
    if not isinstance(params, dict):
        params = {}

    def reply(result=None, error=None):
        if not has_id:
            return
        out = {"jsonrpc": "2.0", "id": msg["id"]}
        if error is not None:
            out["error"] = error
        else:
            out["result"] = result if result is not None else {}
        write(out)

    if method == "initialize":
        reply({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "tracectl-pyserver", "version": "1.0.0"},
        })
    elif method == "ping":
        reply({})
    elif method == "tools/list":
        reply({"tools": [{"name": "echo", "description": "Answers its arguments as text.",
                          "inputSchema": {"type": "object"}}]})
    elif method == "tools/call":
        name = params.get("name")
        args = params.get("arguments")
        log_call(name, args)
        if name == "echo":
            reply(text_result(json.dumps(args, sort_keys=True)))
        else:
            reply(error={"code": -32602, "message": "unknown tool %r" % (name,)})
    elif isinstance(method, str) and method.startswith("notifications/"):
        pass
    else:
        reply(error={"code": -32601, "message": "method not found: %r" % (method,)})


def main():
    # Universal newlines (newline=None, the default of open() and of
    # sys.stdin on Windows, though not on POSIX): "\r", "\n" and "\r\n" all
    # end a line. "replace" stands in for a server that does not crash on
    # invalid UTF-8.
    sys.stdin.reconfigure(encoding="utf-8", errors="replace", newline=None)
    sys.stdout.reconfigure(encoding="utf-8", errors="surrogatepass")
    for line in sys.stdin:
        line = line.lstrip("\ufeff").strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError) as e:
            write({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error: %s" % e}})
            continue
        if isinstance(msg, list):
            for m in msg:
                handle(m)
        else:
            handle(msg)


if __name__ == "__main__":
    main()
