#!/usr/bin/env bash
# The demo: sets up .venv like scripts/test.sh, then `plangate demo` on the embedded stack.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
exec "$VENV/bin/plangate" demo "$@"
