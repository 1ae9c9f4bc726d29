"""Ray Data on a real local Ray instance (2 CPUs, loopback only)."""

import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

ray = pytest.importorskip("ray", reason="the Ray backend is an extra: pip install '.[ray]'")

from taskflow import Taskflow  # noqa: E402
from taskflow.cli import main  # noqa: E402
from taskflow.errors import InvalidInputError, JobError, OptionError  # noqa: E402

TEXTS = [f"评论{i}：{'很好' if i % 2 else '太差'}" for i in range(300)]


@pytest.fixture(scope="module")
def local_ray(shared_home):
    # Ray's worker processes take the environment of the process that starts Ray; the session's
    # PPNLP_HOME and HOME are set before any fixture runs (conftest.pytest_configure), so no Ray
    # worker writes to the user's ~/.paddlenlp.  Checked here, on a real worker.
    import taskflow.ray

    taskflow.ray.init_local(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    seen = ray.get(ray.remote(lambda: (os.environ.get("PPNLP_HOME"), os.environ.get("HOME"))).remote())
    assert seen == (str(shared_home), os.environ["HOME"]), seen
    yield
    ray.shutdown()


# Which processes run, and what they listen on, are read from /proc.
needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads processes from /proc (Linux)")


def _tree(root: int) -> dict[int, str]:
    """``root`` and its descendants now, each with its start time (so a reused pid is not taken for it)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                children.setdefault(int(_stat(int(name))[1]), []).append(int(name))
            except OSError:
                pass
    found, todo = {}, [root]
    while todo:
        pid = todo.pop()
        try:
            found[pid] = _stat(pid)[19]
        except OSError:
            continue
        todo += children.get(pid, [])
    return found


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (field 4, the parent, is [1]; 22, the start time, [19])."""
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline") as file:
            return file.read().replace("\0", " ").strip()
    except OSError:
        return ""


def _alive(tree: dict[int, str]) -> list[str]:
    alive = []
    for pid, started in tree.items():
        try:
            if _stat(pid)[19] == started:
                alive.append(f"{pid} {_command(pid)[:80]}")
        except OSError:
            pass
    return alive


def _listening(pids) -> list[tuple[int, str, int]]:
    """``(pid, address, port)`` of every TCP socket the processes listen on, from /proc/net and their fds."""
    sockets = {}
    for name in ("tcp", "tcp6"):
        with open(f"/proc/net/{name}") as file:
            for line in file.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] != "0A":   # LISTEN
                    continue
                raw, port = fields[1].split(":")
                packed = b"".join(bytes.fromhex(raw[i:i + 8])[::-1] for i in range(0, len(raw), 8))
                sockets[fields[9]] = (str(ipaddress.ip_address(packed)), int(port, 16))
    found = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                inode = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if inode and inode.group(1) in sockets:
                found.append((pid, *sockets[inode.group(1)]))
    return found


def _on_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


@needs_proc
def test_a_local_ray_listens_on_loopback_only(local_ray):
    """Ray's ports take work from anyone who reaches them: GCS, raylet, workers and agents of a local
    Ray listen on 127.0.0.1, never on every interface or the machine's network address."""
    class Probe:
        def pid(self):
            return os.getpid()

    actor = ray.remote(num_cpus=0)(Probe).remote()
    assert ray.get(actor.pid.remote(), timeout=120) > 0
    assert ray.util.get_node_ip_address() == "127.0.0.1"
    sockets = _listening(_tree(os.getpid()))
    assert len({pid for pid, _, _ in sockets}) >= 4, sockets   # the driver, GCS, raylet, the actor at least
    assert [s for s in sockets if not _on_loopback(s[1])] == []
    ray.kill(actor)


def _job(tmp_path, tiny_sentiment, lines: int, *extra: str) -> subprocess.Popen:
    """A ``--backend ray`` job of the CLI in a process of its own, once it has answered records."""
    source = tmp_path / "in.txt"
    texts = (f"评论{i}：{'很好' if i % 2 else '太差'}" for i in range(lines))
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    job = subprocess.Popen([sys.executable, "-m", "taskflow.cli", "sentiment_analysis", "--input", str(source),
                            "--output", str(tmp_path / "out.jsonl"), "--backend", "ray", "--task-path",
                            str(tiny_sentiment), "--quiet", *extra],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=tmp_path)
    partial, deadline = tmp_path / "out.jsonl.partial", time.monotonic() + 240
    while not (partial.exists() and partial.stat().st_size):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            out, err = job.communicate()
            pytest.fail(f"the job ended (or gave no result in 240 s) before it could be stopped: {err.decode()}")
        time.sleep(0.1)
    return job


@needs_proc
@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_a_ray_job_killed_mid_run_leaves_no_ray_process_behind(tiny_sentiment, tmp_path, sig):
    """The raylet's agents outlived a killed driver for a minute or more, one of them listening; the
    reaper of a local Ray ends every process of its session.  All of them listened on loopback only."""
    job = _job(tmp_path, tiny_sentiment, 20000, "--workers", "2")
    tree = _tree(job.pid)
    sockets = _listening(tree)
    assert len({pid for pid, _, _ in sockets}) >= 5, sockets   # the driver, GCS, raylet, two actors at least
    assert [s for s in sockets if not _on_loopback(s[1])] == []
    os.kill(job.pid, sig)
    job.communicate(timeout=60)
    deadline = time.monotonic() + 20
    while _alive(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(tree) == []


@needs_proc
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_actor_killed_mid_job_is_said_on_stderr_and_stdout_carries_nothing(tiny_sentiment, tmp_path):
    """Ray's driver printed the cluster's "A worker died or was killed ..." to the job's stdout."""
    job = _job(tmp_path, tiny_sentiment, 20000)
    actors = [pid for pid in _tree(job.pid) if _command(pid).startswith("ray::_ChunkRunner")]
    assert len(actors) == 1
    os.kill(actors[0], signal.SIGKILL)
    out, err = job.communicate(timeout=240)
    assert job.returncode == 3, err.decode()
    assert out == b"" and "ended and Ray started another" in err.decode()
    assert len((tmp_path / "out.jsonl").read_bytes().splitlines()) == 20000


@pytest.mark.timeout(120)
def test_an_address_where_nothing_listens_is_one_error_at_once(tiny_sentiment, tmp_path, capsys, monkeypatch):
    """Ray tried to reach 127.0.0.1:1 for many minutes; now the job stops at once, naming the address."""
    monkeypatch.setattr(ray, "is_initialized", lambda: False)   # this module's own Ray may be running
    with socket.socket() as closed:   # a port where nothing listens
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    source = tmp_path / "in.txt"
    source.write_text("很好\n", encoding="utf-8")
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment)
    for address in ("127.0.0.1:1", f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        started = time.monotonic()
        with pytest.raises(JobError, match=rf"cannot reach the Ray cluster at '{re.escape(address)}': .*refused.*"
                                           "give --address a running cluster's address"):
            flow.predict_file(source, tmp_path / "out.jsonl", backend="ray", address=address, progress=False)
        assert time.monotonic() - started < 10
    code = main(["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "out.jsonl"), "--backend",
                 "ray", "--address", "127.0.0.1:1", "--task-path", str(tiny_sentiment)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("taskflow: error: cannot reach the Ray cluster at '127.0.0.1:1'")
    assert err.count("\n") == 1 and not (tmp_path / "out.jsonl").exists()


@pytest.mark.slow
def test_cli_ray_backend_writes_what_a_local_job_writes(local_ray, tiny_sentiment, tmp_path):
    # A blank line and bad JSON are records of the job like any other: named, never dropped or changed.
    lines = [json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in enumerate(TEXTS)]
    lines[7], lines[100] = "", '{"id": 100, "text": "坏", "score": NaN}'
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ["sentiment_analysis", "--input", str(source), "--batch-size", "16", "--task-path", str(tiny_sentiment),
              "--on-error", "skip", "--quiet"]
    assert main([*common, "--output", str(tmp_path / "local.jsonl")]) == 0
    # Three actors on two CPUs: they share them (none waits for a CPU that never comes free).
    assert main([*common, "--output", str(tmp_path / "ray.jsonl"), "--backend", "ray", "--workers", "3"]) == 0
    for name in ("ray.jsonl", "ray.jsonl.errors.jsonl"):
        assert (tmp_path / name).read_bytes() == (tmp_path / name.replace("ray", "local")).read_bytes()
    rows = [json.loads(line) for line in (tmp_path / "ray.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(TEXTS) - 2 and [r["line"] for r in rows[:8]] == [1, 2, 3, 4, 5, 6, 7, 9]
    errors = [json.loads(line)["line"] for line in (tmp_path / "ray.jsonl.errors.jsonl").read_text().splitlines()]
    assert errors == [8, 101]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "in.jsonl", "local.jsonl", "local.jsonl.errors.jsonl", "ray.jsonl", "ray.jsonl.errors.jsonl"]


@pytest.mark.slow
def test_ray_job_resumes_and_refuses_an_output_in_use(local_ray, tiny_sentiment, tmp_path):
    from taskflow.checkpoint import JobFiles
    from taskflow.errors import OutputInUseError

    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment)
    whole = tmp_path / "whole.jsonl"
    flow.predict_file(source, whole, backend="ray", chunk_size=64, progress=False)
    # A bad line stops the job after the chunks before it, its checkpoint kept; once fixed, resume goes on.
    broken = list(TEXTS)
    broken[200] = "  "
    source.write_text("\n".join(broken) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    with pytest.raises(InvalidInputError, match=r"in\.txt:201: .*--resume"):
        flow.predict_file(source, out, backend="ray", workers=2, chunk_size=64, progress=False)
    assert not out.exists() and (tmp_path / "out.jsonl.partial.ckpt").exists()
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    summary = flow.predict_file(source, out, backend="ray", workers=2, chunk_size=64, resume=True, progress=False)
    assert summary.resumed_from == 200
    # The same records and labels; scores to rounding (after the resume the chunks, so the batches, differ).
    got, want = ([json.loads(line) for line in path.read_text().splitlines()] for path in (out, whole))
    assert [(r["line"], r["text"], r["label"]) for r in got] == [(r["line"], r["text"], r["label"]) for r in want]
    assert max(abs(a["score"] - b["score"]) for a, b in zip(got, want)) < 1e-6
    # The resumed job first finished the chunk it stopped in (lines 193-256): every chunk after is a fresh run's.
    assert out.read_bytes().splitlines()[256:] == whole.read_bytes().splitlines()[256:]
    # A second job on an output another one holds is refused before anything runs.
    with JobFiles.lock(out, tmp_path / "out.jsonl.errors.jsonl"):
        with pytest.raises(OutputInUseError):
            flow.predict_file(source, out, backend="ray", progress=False)


@pytest.mark.slow
def test_an_actor_that_dies_is_started_again_its_chunk_run_again_and_that_said(local_ray, tiny_sentiment, tmp_path):
    from taskflow.jobs import run_file

    class DiesOnce:
        """The job's spec, whose pipeline ends its process at TEXTS[150] the first time (a local class:
        Ray pickles it by value)."""

        def __init__(self, spec, flag):
            self.spec, self.flag = spec, str(flag)

        @property
        def options(self):
            return self.spec.options

        def build_task(self, *, default_threads=None):
            task, flag = self.spec.build_task(default_threads=default_threads), self.flag
            real = task.run_items

            def run_items(items):
                if TEXTS[150] in items and not os.path.exists(flag):
                    open(flag, "w").close()
                    os._exit(1)
                return real(items)

            task.run_items = run_items
            return task

    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment)
    flow.predict_file(source, tmp_path / "whole.jsonl", backend="ray", workers=2, chunk_size=64, progress=False)
    summary = run_file(flow.task, source, tmp_path / "out.jsonl", workers=2, backend="ray", chunk_size=64,
                       worker_spec=DiesOnce(flow.spec, tmp_path / "died"), progress=False)
    assert (tmp_path / "died").exists() and len(summary.worker_faults) == 1
    assert "ended and Ray started another" in summary.worker_faults[0]
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "whole.jsonl").read_bytes()


def test_a_ray_cluster_that_cannot_be_reached_is_one_error(tiny_sentiment, tmp_path, capsys, monkeypatch):
    """What ray.init raises when no cluster answers (its words, here planted) is one line, exit 2;
    the job's SIGTERM handler is still in place after it."""
    import signal

    def no_cluster(**kwargs):
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to.")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", no_cluster)
    source = tmp_path / "in.txt"
    source.write_text("很好\n", encoding="utf-8")
    before = signal.getsignal(signal.SIGTERM)
    code = main(["sentiment_analysis", "--input", str(source), "--output", str(tmp_path / "out.jsonl"), "--backend",
                 "ray", "--address", "auto", "--task-path", str(tiny_sentiment)])
    err = capsys.readouterr().err
    assert code == 2 and err == ("taskflow: error: cannot start or reach the Ray cluster at 'auto': Could not find any "
                                 "running Ray instance. Please specify the one to connect to.; give --address a "
                                 "running cluster's address (or auto), or leave it out to start a local Ray\n")
    assert not (tmp_path / "out.jsonl").exists() and signal.getsignal(signal.SIGTERM) == before


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_map_batches_leaves_a_cpu_to_rays_readers(local_ray, tiny_sentiment, tmp_path):
    """As many actors as CPUs (2 here) once held every CPU, and Ray's read task waited for ever."""
    import taskflow.ray

    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS[:50]) + "\n", encoding="utf-8")
    mapped = taskflow.ray.map_batches(ray.data.read_text(str(source)), "sentiment_analysis", concurrency=2,
                                      task_path=str(tiny_sentiment))
    assert sorted(r["text"] for r in mapped.take_all()) == sorted(TEXTS[:50])


@pytest.mark.slow
def test_map_batches_api_passes_other_columns_through(local_ray, tiny_sentiment):
    import taskflow.ray

    dataset = ray.data.from_items([{"id": i, "review": t} for i, t in enumerate(TEXTS[:40])])
    mapped = taskflow.ray.map_batches(dataset, "sentiment_analysis", fields=["review"], batch_size=16,
                                      task_path=str(tiny_sentiment))
    rows = sorted(mapped.take_all(), key=lambda r: r["id"])
    expected = Taskflow("sentiment_analysis", task_path=tiny_sentiment)(TEXTS[:40])
    assert [r["id"] for r in rows] == list(range(40))
    assert [r["label"] for r in rows] == [e["label"] for e in expected]
    assert [r["review"] for r in rows] == TEXTS[:40]


@pytest.mark.parametrize("args, words", [
    (["--backend", "ray"], "--backend ray needs --input FILE and --output FILE"),
    (["--input", "in.txt", "--address", "127.0.0.1:6379"], "--address names a Ray cluster: give --backend ray"),
])
def test_ray_options_without_a_job_are_refused(tiny_sentiment, tmp_path, monkeypatch, capsys, args, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("很好\n", encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        main(["sentiment_analysis", "很好", *args, "--task-path", str(tiny_sentiment)] if "--input" not in args
             else ["sentiment_analysis", *args, "--task-path", str(tiny_sentiment)])
    assert stopped.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.slow
def test_map_batches_skips_a_bad_row_or_raises_its_own_error(local_ray, tiny_sentiment):
    """One empty text stopped a whole dataset with its InvalidInputError buried in a RayTaskError."""
    import taskflow.ray

    texts = list(TEXTS[:40])
    texts[17] = "   "
    dataset = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
    rows = sorted(taskflow.ray.map_batches(dataset, "sentiment_analysis", on_error="skip",
                                           task_path=str(tiny_sentiment)).take_all(), key=lambda r: r["id"])
    expected = Taskflow("sentiment_analysis", task_path=tiny_sentiment)(texts, on_error="skip")
    assert [r["id"] for r in rows] == list(range(40)) and [r["text"] for r in rows] == texts
    assert [r["label"] for r in rows] == [e.get("label") for e in expected]
    assert rows[17]["error_type"] == "InvalidInputError" and "empty" in rows[17]["error"]
    assert rows[17]["label"] is None and all(r["error"] is None for i, r in enumerate(rows) if i != 17)
    with pytest.raises(InvalidInputError, match=r"a row of the dataset \(text='   '\): .*on_error='skip'"):
        taskflow.ray.map_batches(dataset, "sentiment_analysis", task_path=str(tiny_sentiment)).take_all()
    assert not ray.data.DataContext.get_current().raise_original_map_exception   # Ray's own setting is untouched
    with pytest.raises(OptionError, match="on_error must be 'raise' or 'skip', got 'ignore'"):
        taskflow.ray.map_batches(dataset, "sentiment_analysis", on_error="ignore")
