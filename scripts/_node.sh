# Sourced by scripts/test.sh after _venv.sh (ROOT set): installs the MCP peers the tests use that
# come from the npm registry (tests/node/package.json, exact versions, package-lock.json) into
# tests/node/node_modules, again whenever the lock file changed. Needs Node.js 20+ and npm.

_node_dir="$ROOT/tests/node"
if ! command -v npm >/dev/null 2>&1; then
    echo "the MCP tests need Node.js 20 or newer with npm (apt-get install nodejs npm)" >&2
    exit 1
fi
_node_stamp="$_node_dir/node_modules/.plangate-install-stamp"
_node_want="$(sha256sum "$_node_dir/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$_node_stamp" ] || [ "$(cat "$_node_stamp")" != "$_node_want" ]; then
    echo "# installing the npm MCP peers into $_node_dir/node_modules" >&2
    npm ci --prefix "$_node_dir" --no-audit --no-fund --loglevel=error >&2
    echo "$_node_want" >"$_node_stamp"
fi
