# Sourced by scripts/test.sh and scripts/demo.sh (bash, with `set -euo pipefail` already on).
# Creates .venv at the repository root if it is missing and (re)installs the project with its dev
# extras whenever pyproject.toml changed since the last install. Needs only Python 3.11+.
# Afterwards: ROOT is the repository root (and the current directory), VENV the venv.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
cd "$ROOT"

_python="${PYTHON:-python3}"
if ! "$_python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "plangate needs Python 3.11 or newer as \`$_python\` (set PYTHON=... to choose one)" >&2
    exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "# creating $VENV" >&2
    "$_python" -m venv "$VENV"
fi

_stamp="$VENV/.plangate-install-stamp"
_want="$("$VENV/bin/python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())' <pyproject.toml)"
if [ ! -f "$_stamp" ] || [ "$(cat "$_stamp")" != "$_want" ]; then
    # pip's own lines (a package each as it is fetched, then the install) go to stderr: the
    # first install takes minutes, and one silent line for all of it looks like a hang
    echo "# installing plangate and its dev tools into $VENV (the first time: a few minutes)" >&2
    _t0=$SECONDS
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
        -e '.[dev,embedded,mcp]' 1>&2
    echo "# installed in $((SECONDS - _t0)) s" >&2
    echo "$_want" >"$_stamp"
fi
unset _python _stamp _want _t0
