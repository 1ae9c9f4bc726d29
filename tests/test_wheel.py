"""The built wheel, installed with its declared dependencies into a fresh virtual environment,
runs offline: a dependency that setup.cfg forgets is missing there, not borrowed from this one.

The wheel is built in a copy of the tree, so no ``build/`` or ``*.egg-info`` is written into the
repository (and a stale ``build/lib`` there cannot leak into the wheel).

Where the dependencies come from: a wheelhouse repacked from the distributions installed in this
environment, and ``pip install --no-index --find-links`` over it.  pip still resolves the wheel's
own ``Requires-Dist`` (and the ``cpu`` extra's) from that folder, so only what the wheel declares
is installed; but nothing is downloaded (PyPI is slow and flaky from CI, and paddlepaddle is a
large download), and the versions are exactly those the rest of the suite ran against.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Not sources: version control, environments, build outputs and caches.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                     "profiler_log")


def _run(*command, **options) -> subprocess.CompletedProcess:
    run = subprocess.run([str(c) for c in command], capture_output=True, text=True, **options)
    assert run.returncode == 0, f"{' '.join(map(str, command))} failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    return run


def _requires(metadata: str, extras: set[str]) -> list:
    """The requirements of a distribution's METADATA that apply here, with ``extras`` asked for."""
    from packaging.requirements import Requirement

    needed = []
    for line in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        requirement = Requirement(line)
        if not requirement.marker or any(requirement.marker.evaluate({"extra": e}) for e in extras | {""}):
            needed.append(requirement)
    return needed


def _closure(requirements: list) -> dict[str, md.Distribution]:
    """The installed distributions that ``requirements`` pull in, transitively."""
    from packaging.utils import canonicalize_name

    found: dict[str, md.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        try:
            found[name] = dist = md.distribution(requirement.name)
        except md.PackageNotFoundError:
            pytest.fail(f"the wheel requires {requirement}, which this test environment does not have installed")
        assert requirement.specifier.contains(dist.version, prereleases=True), \
            f"the wheel requires {requirement}; this environment has {dist.version}"
        todo += _requires(dist.read_text("METADATA") or "", set(requirement.extras))
    return found


def _repack(dist: md.Distribution, folder: Path) -> Path:
    """A wheel of an installed distribution: its files as RECORD lists them (minus compiled caches
    and scripts, which pip makes again), under the tags its own WHEEL file names."""
    files = [f for f in dist.files or [] if f.parts[0] != ".." and "__pycache__" not in f.parts]
    info = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    tags = [line.split(":", 1)[1].strip().split("-") for line in (dist.read_text("WHEEL") or "").splitlines()
            if line.startswith("Tag:")] or [["py3", "none", "any"]]
    # Every tag, in the compressed form of a wheel's name (py2.py3-none-any).
    tag = "-".join(".".join(dict.fromkeys(t[part] for t in tags)) for part in range(3))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    wheel = folder / f"{name}-{dist.version}-{tag}.whl"
    base = Path(dist.locate_file(""))
    record = []
    # Stored, not deflated: paddlepaddle is 0.5-0.7 GB installed, and this wheel only crosses a folder.
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        for file in files:
            if file.parts[0] == info and file.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
            data = (base / file).read_bytes()
            archive.writestr(file.as_posix(), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{file.as_posix()},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return wheel


def _build_outputs() -> dict[str, float | None]:
    """Build folders in the repository, with build/'s time (an editable install rewrites *.egg-info)."""
    return {p.name: p.stat().st_mtime if p.name == "build" else None
            for pattern in ("build", "dist", "*.egg-info") for p in ROOT.glob(pattern)}


@pytest.mark.slow
def test_wheel_with_its_dependencies_in_a_fresh_venv_runs_offline(tmp_path):
    pytest.importorskip("packaging")      # requirement markers; pytest depends on it
    before = _build_outputs()
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", dist, source)
    (wheel,) = dist.glob("taskflow_nlp-*.whl")
    assert _build_outputs() == before, "building the wheel wrote into the repository"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "taskflow/resources/sentiment_analysis/char_cnn/weights.npz" in names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("build/", "tests/"))]

    # The wheel's dependencies with the cpu extra (Paddle), as installed here.
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for installed in _closure(_requires(metadata, {"cpu"})).values():
        _repack(installed, wheelhouse)

    # No pip configuration either: its find-links or indexes could supply what the wheelhouse lacks.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PPNLP_", "PYTHON", "PIP_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PPNLP_HOME=str(tmp_path / "home"), PPNLP_OFFLINE="1",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    _run(python, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheelhouse, "--no-compile",
         "--disable-pip-version-check", f"taskflow-nlp[cpu] @ {wheel.as_uri()}", env=env)
    # The default model, bundled in the wheel; and a download from a local server, which needs
    # requests, filelock and tqdm (install_requires that the bundled model never imports).
    code = """
import hashlib, http.server, json, sys, threading
from pathlib import Path
import taskflow
from taskflow import Taskflow
from taskflow.downloads import download_file

flow = Taskflow("sentiment_analysis")
out = flow(["这家酒店很干净，服务也好", "等了一个小时还没上菜"])

served = Path(sys.argv[1]); served.mkdir(); (served / "blob.bin").write_bytes(b"x" * 4096)
handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(served))
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
got = download_file(f"http://127.0.0.1:{server.server_port}/blob.bin", Path(sys.argv[2]) / "blob.bin",
                    sha256=hashlib.sha256(b"x" * 4096).hexdigest(), size=4096, progress=False)
server.shutdown()
print(json.dumps({"file": taskflow.__file__, "repr": repr(flow), "out": out, "downloaded": got.stat().st_size,
                  "path": sys.path}, ensure_ascii=False))
"""
    run = _run(python, "-c", code, tmp_path / "served", tmp_path / "got", cwd=tmp_path, env=env)
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["file"].startswith(str(venv)), "taskflow was not imported from the wheel"
    assert not [p for p in report["path"] if str(ROOT) in p], "this environment leaked into the new one"
    assert "source='bundled'" in report["repr"]
    assert [r["label"] for r in report["out"]] == ["positive", "negative"]
    assert report["downloaded"] == 4096

    cli = _run(venv / "bin" / "taskflow", "sentiment_analysis", "服务太差了", cwd=tmp_path, env=env)
    assert json.loads(cli.stdout)["label"] == "negative"

    # Right after the install, in the checkout's root, where `import taskflow` finds the source
    # folder ahead of the wheel: the first example still runs (the checkout's tasks and models).
    first = _run(python, "-c", "import taskflow; from taskflow import Taskflow; "
                 "print(taskflow.__file__, Taskflow('sentiment_analysis')('服务太差了')[0]['label'])",
                 cwd=source, env=env)
    assert first.stdout.split() == [str(source / "taskflow" / "__init__.py"), "negative"], first.stderr
