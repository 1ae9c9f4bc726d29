"""tests/run.sh, run against a stand-in for python, venv and pip (no Paddle, no network): where pip
finds no paddlepaddle 2.6.2 wheel for this Python (3.13), the Paddle 3 suite still runs and decides
the exit status, and the 2.6 one is skipped with one line."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parent / "run.sh"

# Logs each call; makes virtual environments of itself; pip has paddlepaddle 3 only, unless STUB_HAS_2.
STUB = r"""#!/usr/bin/env bash
echo "$0 $*" >> "$STUB_LOG"
case "$1" in
  -m)
    case "$2" in
      venv) mkdir -p "$3/bin" && cp "$0" "$3/bin/python" ;;
      pip)
        if [ -n "${STUB_OFFLINE:-}" ] && [ "$3" = download ]; then
          echo "ERROR: Could not install packages due to an OSError: Connection refused" >&2; exit 1
        fi
        if [[ " $* " == *" paddlepaddle==2.6.2 "* ]] && [ -z "${STUB_HAS_2:-}" ]; then
          echo "ERROR: Could not find a version that satisfies the requirement paddlepaddle==2.6.2" >&2
          echo "ERROR: No matching distribution found for paddlepaddle==2.6.2" >&2; exit 1
        fi
        if [ "$3" = install ]; then touch "$(dirname "$0")/installed"; fi ;;
      pytest) exit "${STUB_PYTEST_RC:-0}" ;;
    esac ;;
  -c)
    case "$2" in
      *version_info*) echo 3.13 ;;
      *) [ -e "$(dirname "$0")/installed" ] || exit 1
         if [[ "$0" == *paddle2* ]]; then echo 2.6.2; else echo 3.0.0; fi ;;
    esac ;;
esac
"""


def _run(tmp_path, **env):
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    shutil.copy(SCRIPT, root / "tests" / "run.sh")
    stub = tmp_path / "python3.13"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    log.touch()
    run = subprocess.run(["bash", str(root / "tests" / "run.sh"), "-q"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHON": str(stub), "STUB_LOG": str(log), **env})
    pytest_runs = [line.split()[0].split("/")[-3] for line in log.read_text().splitlines() if " -m pytest -q" in line]
    return run, pytest_runs


def test_without_a_paddle2_wheel_the_paddle3_suite_runs_and_the_other_is_skipped_in_one_line(tmp_path):
    run, suites = _run(tmp_path)
    assert run.returncode == 0, run.stderr
    assert suites == [".venv-paddle3"]
    skipped = [line for line in run.stdout.splitlines() if "skipped" in line]
    assert skipped == ["== paddlepaddle 2.6.2: skipped: pip has no wheel of it for Python 3.13 (it has them for "
                       "3.8 to 3.12); the exit status is the Paddle 3 suite's"]


def test_the_exit_status_is_the_paddle3_suites(tmp_path):
    run, suites = _run(tmp_path, STUB_PYTEST_RC="1")
    assert run.returncode == 1 and suites == [".venv-paddle3"]


def test_with_a_wheel_both_suites_run(tmp_path):
    run, suites = _run(tmp_path, STUB_HAS_2="1")
    assert run.returncode == 0, run.stderr
    assert suites == [".venv-paddle3", ".venv-paddle2"]
    assert "== paddlepaddle 3.0.0" in run.stdout and "== paddlepaddle 2.6.2" in run.stdout


def test_another_pip_failure_is_not_taken_for_a_missing_wheel(tmp_path):
    run, suites = _run(tmp_path, STUB_OFFLINE="1")
    assert run.returncode != 0 and suites == []
    assert "Connection refused" in run.stderr
