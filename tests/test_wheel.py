"""The built wheel, installed into a fresh virtual environment, runs offline."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_runs_the_default_model_offline(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)],
        check=True, capture_output=True,
    )
    (wheel,) = dist.glob("taskflow_nlp-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Paddle, numpy, requests... come from this environment; taskflow only from the wheel.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PPNLP_", "PYTHON"))}
    env.update(PPNLP_HOME=str(tmp_path / "home"), PPNLP_OFFLINE="1")
    code = (
        "import json, taskflow; from taskflow import Taskflow\n"
        "flow = Taskflow('sentiment_analysis')\n"
        "print(json.dumps({'file': taskflow.__file__, 'repr': repr(flow),"
        " 'out': flow(['这家酒店很干净，服务也好', '等了一个小时还没上菜'])}, ensure_ascii=False))"
    )
    run = subprocess.run([str(python), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert str(venv) in report["file"], "taskflow was not imported from the wheel"
    assert "source='bundled'" in report["repr"]
    assert [r["label"] for r in report["out"]] == ["positive", "negative"]

    cli = subprocess.run([str(venv / "bin" / "taskflow"), "sentiment_analysis", "服务太差了"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert json.loads(cli.stdout)["label"] == "negative"
