#!/usr/bin/env bash
# End-to-end MCP tests with the official Python SDK client.
#
#   XPROF_BIN=target/debug/xprof XPROF_PLUGIN_DIR=target/debug tests/mcp/run.sh [pytest args]
#
# Builds nothing: XPROF_BIN is the built `xprof`, XPROF_PLUGIN_DIR the directory holding the built
# plugins (`cargo build -p xprof -p xprof-plugin-core -p xprof-plugin-example-vendor` puts both in
# target/debug). Creates or reuses a venv (default target/mcp-venv, or $XPROF_MCP_VENV) and
# installs tests/mcp/requirements.txt into it. Exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

: "${XPROF_BIN:?set XPROF_BIN to the built xprof binary (e.g. target/debug/xprof)}"
: "${XPROF_PLUGIN_DIR:?set XPROF_PLUGIN_DIR to the directory with libxprof_plugin_*.so (e.g. target/debug)}"
[[ -x "$XPROF_BIN" ]] || { echo "XPROF_BIN=$XPROF_BIN is not an executable" >&2; exit 2; }
[[ -d "$XPROF_PLUGIN_DIR" ]] || { echo "XPROF_PLUGIN_DIR=$XPROF_PLUGIN_DIR is not a directory" >&2; exit 2; }
export XPROF_BIN="$(cd "$(dirname "$XPROF_BIN")" && pwd)/$(basename "$XPROF_BIN")"
export XPROF_PLUGIN_DIR="$(cd "$XPROF_PLUGIN_DIR" && pwd)"

venv="${XPROF_MCP_VENV:-$repo/target/mcp-venv}"
python="${PYTHON:-python3}"
req="$here/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv"
fi
# Reinstall only when the requirements changed since the last install into this venv.
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$want" > "$stamp"
fi

cd "$repo"
# Keep the checkout clean: no __pycache__ next to the tests.
export PYTHONDONTWRITEBYTECODE=1
# -p no:cacheprovider: never write .pytest_cache into the checkout.
exec "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE "$here/test_mcp.py" "$@"
