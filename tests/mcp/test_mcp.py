"""End-to-end tests of `xprof mcp` driven by the official MCP Python SDK client.

Run through tests/mcp/run.sh, which prepares the venv. Needs:
  XPROF_BIN         the built `xprof` binary
  XPROF_PLUGIN_DIR  a directory holding the built plugins (libxprof_plugin_*.so)
  XPROF_CORPUS      the shared corpus (default: <repo>/../shared); with CI set, a missing corpus fails.
"""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import jsonschema
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-for-tests"


def _require_env(name: str) -> Path:
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set; run tests/mcp/run.sh (see its header)")
    p = Path(v)
    if not p.exists():
        pytest.fail(f"{name}={v} does not exist")
    return p.resolve()


@pytest.fixture(scope="session")
def xprof_bin() -> Path:
    return _require_env("XPROF_BIN")


@pytest.fixture(scope="session")
def plugin_dir() -> Path:
    d = _require_env("XPROF_PLUGIN_DIR")
    if not list(d.glob("libxprof_plugin_core*")):
        pytest.fail(f"XPROF_PLUGIN_DIR={d} holds no libxprof_plugin_core; build the plugins first")
    return d


@pytest.fixture(scope="session")
def seed_logdir() -> Path:
    corpus = Path(os.environ.get("XPROF_CORPUS") or REPO.parent / "shared")
    logdir = corpus / "fixtures" / "seed-v6e" / "logdir"
    if not logdir.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"the shared corpus is missing at {corpus} (set XPROF_CORPUS); CI must not skip")
        pytest.skip(f"shared corpus not found at {corpus}")
    return logdir.resolve()


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory, seed_logdir) -> dict:
    """A root with a copy of the seed capture, a symlink escaping it, and a directory outside."""
    base = tmp_path_factory.mktemp("sandbox").resolve()
    root, outside, client_root = base / "root", base / "outside", base / "client_root"
    shutil.copytree(seed_logdir, root / "logdir")
    shutil.copytree(seed_logdir, outside / "logdir")
    shutil.copytree(seed_logdir, client_root / "logdir")
    (root / "escape").symlink_to(outside)
    # A run inside the root whose capture is a link to a damaged file outside it.
    (outside / "garbage.xplane.pb").write_bytes(b"\xff" * 64)
    run = root / "broken_logdir" / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    (run / "host0.xplane.pb").symlink_to(outside / "garbage.xplane.pb")
    return {"root": root, "outside": outside, "client_root": client_root,
            "broken_logdir": root / "broken_logdir"}


def server_env(cache_dir: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPROF_", "XLA_"))}
    env.pop("RUST_BACKTRACE", None)
    env["XPROF_CACHE_DIR"] = str(cache_dir)
    env.update(extra)
    return env


def base_args(plugin_dir: Path) -> list[str]:
    return ["--no-default-plugin-dirs", "--plugin-dir", str(plugin_dir)]


def cli_json(xprof_bin, plugin_dir, *args, env=None) -> dict:
    out = subprocess.run(
        [str(xprof_bin), *base_args(plugin_dir), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def canonical_tools(xprof_bin, plugin_dir) -> tuple[set, set]:
    listing = cli_json(xprof_bin, plugin_dir, "tools", "--format", "json")
    names, aliases = set(), set()
    for p in listing["plugins"]:
        for t in p["tools"]:
            names.add(t["name"])
            aliases.update(t.get("aliases") or [])
    return names, aliases


# ---------------------------------------------------------------------------------------------
# Shared checks, run over both transports


async def check_session(session: ClientSession, ctx: dict) -> None:
    init = ctx["init"]
    assert init.serverInfo.name == "xprof"
    assert init.protocolVersion in SUPPORTED_PROTOCOL_VERSIONS
    assert init.capabilities.tools is not None

    # tools/list: every canonical tool, no alias, schemas that are valid JSON Schema.
    listed = (await session.list_tools()).tools
    names = {t.name for t in listed}
    assert names == ctx["canonical"] | {"describe_tool"}, (names ^ ctx["canonical"])
    assert not names & ctx["aliases"]
    for t in listed:
        schema = t.inputSchema
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object", t.name
        assert t.description and len(t.description) > 20, t.name
        dumped = json.dumps(schema)
        assert '"x-' not in dumped, f"{t.name}: x- keywords leak into the schema"
        for pname, p in schema.get("properties", {}).items():
            assert p.get("description"), f"{t.name}.{pname} has no description"
    # Aliases are not listed but are callable (a tool failure is fine; "unknown tool" is not).
    for alias in sorted(ctx["aliases"])[:1]:
        res = await session.call_tool(alias, {"path": str(ctx["logdir"])})
        assert isinstance(res, types.CallToolResult), alias
    hosts_tool = next(t for t in listed if t.name == "get_hosts")
    assert hosts_tool.inputSchema["properties"]["path"]["format"] == "path"

    # A real call on the seed capture: the same answer as the CLI, as text and structured.
    res = await session.call_tool("get_hosts", {"path": str(ctx["logdir"])})
    assert not res.isError, res.content
    assert isinstance(res.structuredContent, dict)
    assert [h["hostname"] for h in res.structuredContent["hosts"]] == ["host0"]
    assert res.structuredContent["run"] == "testrun"
    assert json.loads(res.content[0].text) == res.structuredContent
    assert res.structuredContent == ctx["cli_get_hosts"]

    # Tool failure: isError with the CLI's error object.
    res = await session.call_tool("get_hosts", {"path": str(ctx["logdir"] / "no_such_run")})
    assert res.isError
    err = json.loads(res.content[0].text)
    assert err["tool"] == "get_hosts"
    assert err["error"]["kind"] == "path"
    assert "no_such_run" in err["error"]["message"]
    assert err["error"]["hint"]

    # Malformed arguments are the model's to fix: an isError result (a usage error), not a
    # protocol error; an unknown tool is a JSON-RPC error (-32602).
    for args, needle in [
        ({"bogus": 1}, "unknown argument `bogus`"),
        ({"path": 5}, "`path` must be string"),
    ]:
        res = await session.call_tool("get_hosts", args)
        assert res.isError, args
        err = json.loads(res.content[0].text)
        assert err["error"]["kind"] == "usage", err
        assert needle in err["error"]["message"], err
        assert err["error"]["hint"], err
    with pytest.raises(McpError) as e:
        await session.call_tool("no_such_tool", {})
    assert e.value.error.code == types.INVALID_PARAMS, e.value.error
    assert "unknown tool" in e.value.error.message, e.value.error.message

    # A call that fails on a file outside the roots, reached by listing a directory inside
    # them, is the roots' path error, not that file's parse error.
    res = await session.call_tool("get_overview", {"path": str(ctx["broken_logdir"])})
    assert res.isError
    err = json.loads(res.content[0].text)
    assert err["error"]["kind"] == "path", err
    assert "outside the MCP server's roots" in err["error"]["message"], err

    # Paths outside the roots: plainly, through `..`, through a symlink.
    root = ctx["root"]
    for bad in [
        str(ctx["outside"] / "logdir"),
        str(root / ".." / "outside" / "logdir"),
        str(root / "escape" / "logdir"),
        "/etc",
    ]:
        res = await session.call_tool("get_hosts", {"path": bad})
        assert res.isError, bad
        err = json.loads(res.content[0].text)
        assert err["error"]["kind"] == "path", err
        assert "outside the MCP server's roots" in err["error"]["message"], err
    # ... and through a path parameter other than the positional one.
    res = await session.call_tool("get_hosts", {"logdir": str(ctx["outside"] / "logdir")})
    assert res.isError and "outside" in res.content[0].text

    # Concurrent calls are all answered, each correctly.
    results = await asyncio.gather(
        *[session.call_tool("get_hosts", {"path": str(ctx["logdir"])}) for _ in range(8)]
    )
    assert all(not r.isError and r.structuredContent == ctx["cli_get_hosts"] for r in results)


@pytest.fixture(scope="session")
def ctx(xprof_bin, plugin_dir, sandbox, cache_dir) -> dict:
    canonical, aliases = canonical_tools(xprof_bin, plugin_dir)
    assert "get_hosts" in canonical and "list_runs" in canonical
    logdir = sandbox["root"] / "logdir"
    cli = cli_json(
        xprof_bin, plugin_dir, "get_hosts", str(logdir), "--no_cache",
        env=server_env(cache_dir),
    )
    return {
        "canonical": canonical,
        "aliases": aliases,
        "logdir": logdir,
        "root": sandbox["root"],
        "outside": sandbox["outside"],
        "broken_logdir": sandbox["broken_logdir"],
        "cli_get_hosts": cli,
    }


# ---------------------------------------------------------------------------------------------
# stdio


def stdio_params(xprof_bin, plugin_dir, cache_dir, *extra) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(xprof_bin),
        args=[*base_args(plugin_dir), "mcp", "--tools", "all", *extra],
        env=server_env(cache_dir),
    )


def test_stdio(xprof_bin, plugin_dir, cache_dir, ctx):
    async def go():
        params = stdio_params(xprof_bin, plugin_dir, cache_dir, "--root", str(ctx["root"]))
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w):
                async with ClientSession(r, w) as session:
                    ctx2 = dict(ctx, init=await session.initialize())
                    await check_session(session, ctx2)

    asyncio.run(go())


def test_stdio_client_roots_extend_the_configured_ones(xprof_bin, plugin_dir, cache_dir, ctx, sandbox):
    client_root = sandbox["client_root"]

    async def list_roots(_context):
        return types.ListRootsResult(roots=[types.Root(uri=client_root.as_uri())])

    async def go():
        params = stdio_params(xprof_bin, plugin_dir, cache_dir, "--root", str(ctx["root"]))
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w):
                async with ClientSession(r, w, list_roots_callback=list_roots) as session:
                    await session.initialize()
                    res = await session.call_tool("get_hosts", {"path": str(client_root / "logdir")})
                    assert not res.isError, res.content
                    assert res.structuredContent["run"] == "testrun"
                    # Announced roots add to the configured ones; they do not open everything.
                    res = await session.call_tool("get_hosts", {"path": str(sandbox["outside"] / "logdir")})
                    assert res.isError and "outside the MCP server's roots" in res.content[0].text

    asyncio.run(go())


def test_stdio_each_call_sees_the_newest_capture(xprof_bin, plugin_dir, cache_dir, seed_logdir, tmp_path):
    """One server, plugins loaded once: a host added to the run shows up in the next answer."""
    logdir = tmp_path / "logdir"
    shutil.copytree(seed_logdir, logdir)
    run = logdir / "plugins" / "profile" / "testrun"

    async def go():
        params = stdio_params(xprof_bin, plugin_dir, cache_dir, "--root", str(tmp_path))
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()

                    async def hosts():
                        res = await session.call_tool("get_hosts", {"path": str(logdir)})
                        assert not res.isError, res.content
                        return [h["hostname"] for h in res.structuredContent["hosts"]]

                    assert await hosts() == ["host0"]
                    assert await hosts() == ["host0"]
                    shutil.copy(run / "host0.xplane.pb", run / "host1.xplane.pb")
                    assert await hosts() == ["host0", "host1"]

    asyncio.run(go())


def test_stdio_environment_defaults_outside_the_roots_are_refused(xprof_bin, plugin_dir, cache_dir, ctx):
    """$XPROF_LOGDIR outside the --root: explicit paths inside still work, the default does not."""
    async def go():
        params = stdio_params(xprof_bin, plugin_dir, cache_dir, "--root", str(ctx["root"]))
        params.env["XPROF_LOGDIR"] = str(ctx["outside"] / "logdir")
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    res = await session.call_tool("get_hosts", {"path": str(ctx["logdir"])})
                    assert not res.isError, res.content
                    res = await session.call_tool("get_hosts", {})
                    assert res.isError
                    err = json.loads(res.content[0].text)["error"]
                    assert err["kind"] == "path", err
                    assert "outside the MCP server's roots" in err["message"], err

    asyncio.run(go())


def test_stdio_client_roots_are_fetched_again_after_list_changed(xprof_bin, plugin_dir, cache_dir, ctx, sandbox):
    announced = [sandbox["client_root"]]

    async def list_roots(_context):
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri()) for p in announced])

    async def go():
        params = stdio_params(xprof_bin, plugin_dir, cache_dir, "--root", str(ctx["root"]))
        target = str(sandbox["outside"] / "logdir")
        with open(os.devnull, "w") as devnull:
            async with stdio_client(params, errlog=devnull) as (r, w):
                async with ClientSession(r, w, list_roots_callback=list_roots) as session:
                    await session.initialize()
                    res = await session.call_tool("get_hosts", {"path": target})
                    assert res.isError and "outside" in res.content[0].text
                    announced.append(sandbox["outside"])
                    # Not announced yet: the server keeps the list it fetched.
                    res = await session.call_tool("get_hosts", {"path": target})
                    assert res.isError
                    await session.send_roots_list_changed()
                    # The server handles the notification and the next request concurrently,
                    # so wait (by calls, not time) for it to take effect.
                    for _ in range(100):
                        res = await session.call_tool("get_hosts", {"path": target})
                        if not res.isError:
                            break
                    assert not res.isError, res.content

    asyncio.run(go())


def test_stdio_stdout_carries_only_json_rpc(xprof_bin, plugin_dir, cache_dir, ctx):
    """Raw exchange: every stdout line is a JSON-RPC message; logs go to stderr."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "get_hosts", "arguments": {"path": str(ctx["logdir"])}}},
    ]
    proc = subprocess.run(
        [str(xprof_bin), *base_args(plugin_dir), "mcp", "--root", str(ctx["root"])],
        input="".join(json.dumps(m) + "\n" for m in msgs),
        capture_output=True, text=True, env=server_env(cache_dir), timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    replies = {}
    for line in lines:
        m = json.loads(line)
        assert m["jsonrpc"] == "2.0"
        replies[m.get("id")] = m
    assert set(replies) == {1, 2}, lines
    assert replies[2]["result"]["structuredContent"] == ctx["cli_get_hosts"]
    assert "roots" in proc.stderr and str(ctx["root"]) in proc.stderr


def test_stdio_malformed_messages_get_parse_errors_and_the_server_keeps_answering(
    xprof_bin, plugin_dir, cache_dir, ctx
):
    """Garbage, invalid UTF-8, a number out of range, deep nesting and an oversized message
    each get a JSON-RPC parse error (id null); the session then works as usual."""
    bad = [
        b"garbage",
        b"\xff\xfe{}",
        b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"x": "' + b"a" * (17 << 20) + b'"}}',
    ]
    good = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "get_hosts", "arguments": {"path": str(ctx["logdir"])}}},
    ]
    data = b"".join(b + b"\n" for b in bad) + b"".join(json.dumps(m).encode() + b"\n" for m in good)
    proc = subprocess.run(
        [str(xprof_bin), *base_args(plugin_dir), "mcp", "--root", str(ctx["root"])],
        input=data, capture_output=True, env=server_env(cache_dir), timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    errors = [r for r in replies if "error" in r]
    assert len(errors) == len(bad), replies
    for r in errors:
        assert r["id"] is None and r["error"]["code"] == -32700, r
    answered = {r["id"]: r for r in replies if r.get("id") is not None}
    assert answered[2]["result"]["structuredContent"] == ctx["cli_get_hosts"]


def default_surface_params(xprof_bin, plugin_dir, cache_dir, ctx, *extra):
    return StdioServerParameters(
        command=str(xprof_bin),
        args=[*base_args(plugin_dir), "mcp", "--root", str(ctx["root"]), *extra],
        env=server_env(cache_dir),
    )


def test_default_tool_set_lists_within_40_kib_and_describe_tool_gives_the_rest(
    xprof_bin, plugin_dir, cache_dir, ctx
):
    """Issue 33: tools/list of the default set, as the official client's json.dumps of
    list_tools(), is at most 40 KiB; the example vendor tool is not in it; every tool has a
    one-line description, readOnlyHint, and describe_tool returns the full text of any tool."""

    async def go():
        params = default_surface_params(xprof_bin, plugin_dir, cache_dir, ctx)
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                listed = await session.list_tools()
                size = len(json.dumps(listed.model_dump()))
                assert size <= 40 * 1024, size
                names = {t.name for t in listed.tools}
                assert {"get_overview", "get_top_hlo_ops", "describe_tool"} <= names, names
                assert "vendor_dump_inventory" not in names
                assert names < ctx["canonical"] | {"describe_tool"}
                for t in listed.tools:
                    assert "\n" not in t.description, t.name
                    assert t.annotations is not None and t.annotations.readOnlyHint is not None, t.name
                described = await session.call_tool("describe_tool", {"name": "list_xplane_events"})
                assert not described.isError, described.content
                d = described.structuredContent
                assert d["listed_by_this_server"] is False
                assert "--tools all" in d["how_to_list"]
                assert len(d["description"]) > 200 and "properties" in d["input_schema"]
                # A tool outside the set is not served, and the error says how to get it.
                with pytest.raises(McpError) as e:
                    await session.call_tool("list_xplane_events", {"path": str(ctx["logdir"])})
                assert "--tools all" in json.dumps(e.value.error.data), e.value.error
                res = await session.call_tool("get_hosts", {"path": str(ctx["logdir"])})
                assert res.structuredContent == ctx["cli_get_hosts"]
                prompts = (await session.list_prompts()).prompts
                assert {"why_is_it_slow", "why_out_of_memory", "what_changed"} <= {p.name for p in prompts}
                got = await session.get_prompt("why_is_it_slow", {"path": str(ctx["logdir"])})
                text = got.messages[0].content.text
                assert str(ctx["logdir"]) in text and "get_overview" in text
                for tool in ["get_overview", "get_top_hlo_ops", "get_smart_suggestions"]:
                    assert tool in names, f"the prompt names {tool}, which the set lacks"

    asyncio.run(go())


def test_example_vendor_tool_is_listed_with_its_plugin_or_all(xprof_bin, plugin_dir, cache_dir, ctx):
    async def names(*extra):
        params = default_surface_params(xprof_bin, plugin_dir, cache_dir, ctx, *extra)
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                return {t.name for t in (await session.list_tools()).tools}

    with_plugin = asyncio.run(names("--plugin", "example-vendor"))
    assert "vendor_dump_inventory" in with_plugin and "get_overview" in with_plugin
    hlo_only = asyncio.run(names("--tools", "hlo"))
    assert "get_hlo_dump" in hlo_only and "get_overview" not in hlo_only
    assert "vendor_dump_inventory" in asyncio.run(names("--tools", "all"))


def test_bad_mcp_arguments_are_usage_errors(xprof_bin, plugin_dir, cache_dir):
    for args, code, needle in [
        (["--bogus"], 2, "unknown argument `--bogus`"),
        (["--root", "/no/such/dir"], 3, "--root /no/such/dir"),
        (["--token"], 2, "--token needs a value"),
        (["--http", "127.0.0.1:99999"], 2, "cannot listen"),
        (["--tools", "everything"], 2, "--tools everything: no such tool set"),
        (["--plugin", "nope"], 2, "--plugin nope: no such plugin"),
    ]:
        proc = subprocess.run(
            [str(xprof_bin), *base_args(plugin_dir), "mcp", *args],
            capture_output=True, text=True, env=server_env(cache_dir), timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert proc.returncode == code, (args, proc.returncode, proc.stderr)
        assert proc.stdout == ""
        err = json.loads(proc.stderr.strip().splitlines()[-1])
        assert needle in err["error"]["message"], err


# ---------------------------------------------------------------------------------------------
# streamable HTTP


class HttpServer:
    def __init__(self, xprof_bin, plugin_dir, cache_dir, root, *extra, env_extra=None):
        self.proc = subprocess.Popen(
            [str(xprof_bin), *base_args(plugin_dir), "mcp", "--tools", "all", "--http", "127.0.0.1:0",
             "--root", str(root), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=server_env(cache_dir, **(env_extra or {})),
        )
        # Readiness: the first stdout line is the bound URL (printed once listening).
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            self.proc.kill()
            raise AssertionError(f"no URL on stdout: {self.url!r}; stderr: {self.proc.stderr.read()}")

    def stop(self) -> tuple[int, str, str]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, out, err


@pytest.fixture(scope="module")
def http_server(xprof_bin, plugin_dir, cache_dir, ctx):
    srv = HttpServer(xprof_bin, plugin_dir, cache_dir, ctx["root"], "--token", TOKEN)
    yield srv
    code, out, err = srv.stop()
    assert code == 0, err
    assert out == "", f"stdout after the URL line must stay empty: {out!r}"


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def raw_post(url, headers) -> httpx.Response:
    # A fresh connection per negative request: a response sent before the body was read can
    # break the next request on a kept-alive connection.
    return httpx.post(url, json=INIT, headers={**ACCEPT, **headers}, timeout=30)


def test_http(http_server, ctx):
    async def go():
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with client:
            async with streamable_http_client(http_server.url, http_client=client) as (r, w, _):
                async with ClientSession(r, w) as session:
                    ctx2 = dict(ctx, init=await session.initialize())
                    await check_session(session, ctx2)

    asyncio.run(go())


@pytest.mark.parametrize("origin", [
    "http://evil.example", "http://localhost.evil.example", "null", "https://127.0.0.1.evil.example",
])
def test_http_foreign_origin_is_forbidden(http_server, origin):
    # Even with the right token: Origin is checked first (DNS-rebinding protection).
    r = raw_post(http_server.url, {"Origin": origin, "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 403, (origin, r.status_code, r.text)


def test_http_local_origin_with_token_is_served(http_server):
    r = raw_post(http_server.url, {"Origin": "http://localhost:5173", "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["serverInfo"]["name"] == "xprof"


@pytest.mark.parametrize("auth", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer", f"bearer-{TOKEN}"])
def test_http_missing_or_wrong_token_is_unauthorized(http_server, auth):
    headers = {"Authorization": auth} if auth is not None else {}
    r = raw_post(http_server.url, headers)
    assert r.status_code == 401, (auth, r.status_code, r.text)
    assert r.headers.get("www-authenticate") == "Bearer"


def test_http_foreign_host_header_is_forbidden(http_server):
    r = raw_post(http_server.url, {"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 403, r.text


@pytest.mark.parametrize("body", [b"garbage", b"\xff\xfe", b'{"jsonrpc": "2.0", "id": 1e400, "method": "ping"}'])
def test_http_malformed_body_gets_a_json_rpc_parse_error(http_server, ctx, body):
    headers = {**ACCEPT, "Authorization": f"Bearer {TOKEN}"}
    r = httpx.post(http_server.url, content=body, headers=headers, timeout=30)
    assert r.status_code == 400, (r.status_code, r.text)
    reply = r.json()
    assert reply["id"] is None and reply["error"]["code"] == -32700, reply
    # ... and the server still answers.
    assert raw_post(http_server.url, {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_http_token_from_environment(xprof_bin, plugin_dir, cache_dir, ctx):
    srv = HttpServer(xprof_bin, plugin_dir, cache_dir, ctx["root"],
                     env_extra={"XPROF_MCP_TOKEN": "from-env"})
    try:
        assert raw_post(srv.url, {}).status_code == 401
        assert raw_post(srv.url, {"Authorization": "Bearer from-env"}).status_code == 200
    finally:
        code, _, err = srv.stop()
    assert code == 0, err


def test_http_without_token_serves_local_clients(xprof_bin, plugin_dir, cache_dir, ctx):
    srv = HttpServer(xprof_bin, plugin_dir, cache_dir, ctx["root"])
    try:
        async def go():
            async with streamable_http_client(srv.url) as (r, w, _):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    res = await session.call_tool("get_hosts", {"path": str(ctx["logdir"])})
                    assert res.structuredContent == ctx["cli_get_hosts"]

        asyncio.run(go())
        assert raw_post(srv.url, {"Origin": "http://evil.example"}).status_code == 403
    finally:
        code, _, err = srv.stop()
    assert code == 0, err


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
