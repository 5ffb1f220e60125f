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
    # pip's own lines (a package each as it is fetched) go to stderr; its last phase, putting
    # some 150 packages in place, says nothing for minutes (pip 23), so a line every 15 s
    # counts them: a first install must not look like a hang. pip's output is kept in
    # .venv/.plangate-install.log, where the count of packages to install is read from.
    echo "# installing plangate and its dev tools into $VENV (the first time: a few minutes)" >&2
    _t0=$SECONDS
    _log="$VENV/.plangate-install.log"
    : >"$_log"
    _site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
    (
        set +e +o pipefail  # a count that fails this time is tried again in 15 s
        while sleep 15; do
            _all=$(grep -m1 '^Installing collected packages:' "$_log" | tr ',' '\n' | wc -l)
            if [ "$_all" -eq 0 ]; then
                echo "# still finding and fetching packages after $((SECONDS - _t0)) s" >&2
            else
                _n=$(find "$_site" -maxdepth 1 -name '*.dist-info' | wc -l)
                echo "# still installing: $_n of about $((_all + 2)) packages in place" \
                    "after $((SECONDS - _t0)) s" >&2
            fi
        done
    ) &
    _ticker=$!
    trap 'kill "$_ticker" 2>/dev/null || true' EXIT
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input \
        -e '.[dev,embedded,mcp,page]' 2>&1 | tee -a "$_log" >&2
    kill "$_ticker" 2>/dev/null || true
    trap - EXIT
    echo "# installed in $((SECONDS - _t0)) s" >&2
    echo "$_want" >"$_stamp"
fi
unset _python _stamp _want _t0 _log _site _ticker
