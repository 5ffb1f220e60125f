# Sourced by scripts/test.sh (bash, with `set -euo pipefail` already on). The approval page's
# browser test (tests/test_approval_page.py) drives Debian's Chromium through Debian's
# chromedriver; nothing downloads a browser at run time. Where either is missing, install both
# with apt-get: as root, or through sudo when it needs no password. A machine without apt-get,
# or an install that fails, only says so: the test then skips (and fails under CI=true).

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    _apt=()
    if [ "$(id -u)" -eq 0 ]; then
        _apt=(apt-get)
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        _apt=(sudo -n apt-get)
    fi
    if ! command -v apt-get >/dev/null 2>&1 || [ "${#_apt[@]}" -eq 0 ]; then
        echo "# chromium and chromium-driver are missing and cannot be installed here (no apt-get, or not root and no sudo): the browser test will skip" >&2
    else
        echo "# installing Debian's chromium and chromium-driver (the approval page's browser test)" >&2
        export DEBIAN_FRONTEND=noninteractive
        # a fresh machine may have no package lists yet: update once if the first try fails
        if ! "${_apt[@]}" install -y -qq chromium chromium-driver >/dev/null 2>&1; then
            "${_apt[@]}" update -qq >&2 || true
            "${_apt[@]}" install -y -qq chromium chromium-driver >/dev/null \
                || echo "# installing chromium failed: the browser test will skip" >&2
        fi
    fi
    unset _apt
fi
