"""The plugin on the oldest and the newest ``temporalio`` the project allows (``.ci/run``).

Reads the range from pyproject.toml, the releases from the package index (``pip index
versions``), and runs the plugin's tests on each end of the range in a venv of its own (a copy of
``.venv`` with that release put in). An end that is the release ``.venv`` holds is said and not
run again: the main suite ran the same tests on it. Exit code non-zero if a run failed or the
index lists no release in the range.

    .venv/bin/python scripts/temporalio_range.py            # both ends
    .venv/bin/python scripts/temporalio_range.py 1.35.0     # that release, in or out of range
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
# the plugin's tests: every guarded team run, and the replay of the committed histories
TESTS = [*sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_temporal_*.py")),
         "tests/test_replay_team.py", "tests/test_replay.py"]


def allowed() -> Requirement:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(r for r in map(Requirement, deps) if r.name == "temporalio")


def releases() -> list[Version]:
    out = subprocess.run([str(VENV / "bin/pip"), "index", "versions", "temporalio"],
                         capture_output=True, text=True, check=True).stdout
    listed = re.search(r"Available versions: (.+)", out)
    if listed is None:
        raise SystemExit(f"pip index listed no temporalio releases:\n{out}")
    return sorted(Version(v.strip()) for v in listed.group(1).split(","))


def run_on(release: Version) -> int:
    here = VENV.parent / f".venv-temporalio-{release}"
    if not here.exists():
        shutil.copytree(VENV, here, symlinks=True)
    subprocess.run([str(here / "bin/python"), "-m", "pip", "install", "-q",
                    f"temporalio=={release}"], check=True)
    print(f"# temporalio {release}: {len(TESTS)} test files", flush=True)
    return subprocess.run([str(here / "bin/python"), "-m", "pytest", "-q", "-p", "no:xdist",
                           "-p", "no:cacheprovider", *TESTS], cwd=ROOT).returncode


def main(argv: list[str]) -> int:
    if argv:
        ends = [Version(a) for a in argv]
    else:
        spec = allowed().specifier
        inside = [v for v in releases() if v in spec and not v.is_prerelease]
        if not inside:
            print(f"no temporalio release on the index is in {spec}", file=sys.stderr)
            return 1
        ends = sorted({inside[0], inside[-1]})
        print(f"temporalio {spec}: oldest {inside[0]}, newest {inside[-1]}", flush=True)
    installed = Version(version("temporalio"))
    failed = []
    for release in ends:
        if release == installed and not argv:
            print(f"# temporalio {release}: the main suite ran these tests on it", flush=True)
            continue
        if run_on(release) != 0:
            failed.append(str(release))
    if failed:
        print(f"FAILED on temporalio {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
