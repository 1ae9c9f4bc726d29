"""Process faults of batch jobs, on real worker processes with real signals.

Workers killed (SIGKILL), terminated (SIGTERM), stopped (a hang) or stuck at exit;
a worker whose model raises, or that cannot build its pipeline; the parent killed
or terminated; a full disk; a read-only output directory; a script that starts a
job without a ``__main__`` guard.  Each job runs in its own
session under a timeout: it either finishes with every record written (exit 0,
or 3 when a worker had to be replaced or killed), or stops with one clear error
and a state that ``--resume`` finishes byte for byte.  No worker outlives its job,
and Paddle's C++ SIGTERM dump never shows.

The seeded random kills (many runs) are in benchmarks/kill_jobs.py; a few of
them run here under the ``slow`` marker.
"""

from __future__ import annotations

import multiprocessing
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from job_faults import FaultySpec, Job, can_unshare_mounts, leftovers, lines_in, wait_for, write_runner
from taskflow import Taskflow
from taskflow.cli import main
from taskflow.errors import WorkerError
from taskflow.jobs import run_file

# Every test here runs jobs in subprocesses with worker processes: a few seconds each.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180),
              pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and signals")]

TEXTS = [f"第{i}条：{'服务很好，干净' if i % 3 else '等了很久，太差了'}" for i in range(3000)]
PADDLE_DUMP = ("FatalError", "Termination signal", "C++ Traceback")
JOB_TIMEOUT = 120


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_sentiment):
    """The input, the runner script, the CLI arguments, and the output of a clean run (1 thread, like the workers)."""
    root = tmp_path_factory.mktemp("faults")
    source = root / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    args = ["sentiment_analysis", "--input", str(source), "--task-path", str(tiny_sentiment),
            "--batch-size", "16", "--threads", "1", "--quiet"]
    assert main(args + ["--output", str(root / "reference.jsonl")]) == 0
    return {"root": root, "runner": write_runner(root), "args": args,
            "reference": (root / "reference.jsonl").read_bytes()}


def _run(setup, target, *extra, env=None, timeout=JOB_TIMEOUT, **options):
    job = Job(setup["runner"], [*setup["args"], "--output", str(target), *extra], env=env, cwd=target.parent, **options)
    code, output = job.wait(timeout)
    assert code is not None, f"the job hung for {timeout} s:\n{output[-3000:]}"
    assert not any(mark in output for mark in PADDLE_DUMP), output[-3000:]
    assert not leftovers(job.workers), "a worker process outlived its job"
    return code, output


def _resume_and_compare(setup, target):
    """Finish the job in this process (one process, one thread: the same numbers) and compare bytes."""
    assert main([*setup["args"], "--output", str(target), "--resume"]) == 0
    assert target.read_bytes() == setup["reference"], "resumed output differs from a clean run"


@pytest.mark.parametrize("poison", ["SIGKILL", "SIGTERM", "SIGSTOP"])
def test_a_worker_that_dies_or_hangs_once_has_its_chunk_rerun(setup, tmp_path, poison):
    target = tmp_path / "out.jsonl"
    # Only the hang needs a short timeout; a short one elsewhere turns a slow chunk on a busy machine into a fault.
    timeout = "8" if poison == "SIGSTOP" else "120"
    code, output = _run(setup, target, "--workers", "2", "--worker-timeout", timeout,
                        env={"POISON": poison, "POISON_LINE": "1000", "POISON_MARKER": str(tmp_path / "once")})
    assert (tmp_path / "once").exists(), f"the fault did not happen:\n{output[-3000:]}"
    assert code == 3, output[-3000:]
    what = {"SIGKILL": "was killed by SIGKILL", "SIGTERM": "was killed by SIGTERM",
            "SIGSTOP": "did not answer within 8 s (hung); it was killed (SIGKILL)"}[poison]
    assert f"{what} while running the records at lines" in output and "re-run on a new worker" in output
    assert target.read_bytes() == setup["reference"]


def test_a_chunk_that_kills_its_worker_twice_stops_the_job_resumably(setup, tmp_path):
    target = tmp_path / "out.jsonl"
    code, output = _run(setup, target, "--workers", "2", env={"POISON": "SIGKILL", "POISON_LINE": "1000"})
    assert code == 2, output[-3000:]
    assert "taskflow: error: a worker process was killed by SIGKILL while running the records at lines" in output
    assert "after another one failed on the same records" in output and "--resume" in output
    assert "Traceback" not in output and not target.exists()
    _resume_and_compare(setup, target)


def test_a_worker_stuck_at_exit_is_killed_and_the_exit_status_says_so(setup, tmp_path):
    target = tmp_path / "out.jsonl"
    code, output = _run(setup, target, "--workers", "2", "--worker-timeout", "2", env={"POISON": "hang-at-exit"})
    assert code == 3, output[-3000:]
    stuck = [line for line in output.splitlines() if line.startswith("taskflow: warning: worker process")]
    assert len(stuck) == 2 and all("did not exit within 2 s of being asked to; it was killed (SIGKILL)" in line
                                   for line in stuck), output[-3000:]
    assert target.read_bytes() == setup["reference"], "the output is complete all the same"


def test_workers_exit_quietly(setup, tmp_path):
    code, output = _run(setup, tmp_path / "out.jsonl", "--workers", "2")
    assert code == 0 and output == "", output[-3000:]
    assert (tmp_path / "out.jsonl").read_bytes() == setup["reference"]


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP], ids=["SIGKILL", "SIGTERM", "SIGHUP"])
def test_a_parent_killed_mid_job_leaves_no_worker_and_a_resumable_state(setup, tmp_path, signum):
    target = tmp_path / "out.jsonl"
    job = Job(setup["runner"], [*setup["args"], "--output", str(target), "--workers", "2"], cwd=tmp_path)
    assert wait_for(lambda: lines_in(tmp_path / "out.jsonl.partial") >= 256, 60), "the job did not start"
    job.signal(signum)
    code, output = job.wait(JOB_TIMEOUT)
    assert code is not None, "the job hung after the signal"
    assert not leftovers(job.workers), "a worker process outlived its parent"
    assert not any(mark in output for mark in PADDLE_DUMP), output
    if signum != signal.SIGKILL:   # SIGTERM, or SIGHUP (the terminal closed): a clean stop, with its one line
        name = signal.Signals(signum).name
        assert code == 2 and f"taskflow: error: stopped by {name}; what was done is saved: rerun with --resume" in output
        assert "Traceback" not in output
    else:
        assert code == -signal.SIGKILL
    assert not target.exists() and (tmp_path / "out.jsonl.partial.ckpt").exists()
    _resume_and_compare(setup, target)


def _disk_full_modes():
    modes = [pytest.param("rlimit", id="file-size-limit")]
    if can_unshare_mounts():
        modes.insert(0, pytest.param("tmpfs", id="small-tmpfs"))
    return modes


@pytest.mark.parametrize("mode", _disk_full_modes())
def test_a_full_disk_stops_the_job_resumably(setup, tmp_path, mode):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "out.jsonl"
    if mode == "tmpfs":
        # A 48 KiB tmpfs in a mount namespace of the job's own: full, then grown (space freed), then resumed.
        command = [*setup["args"], "--output", str(target)]
        script = textwrap.dedent(f"""
            mount -t tmpfs -o size=48k tmpfs {out_dir}
            {shlex.join([sys.executable, str(setup['runner']), *command])}; echo "first exit $?"
            mount -o remount,size=64m {out_dir}
            {shlex.join([sys.executable, str(setup['runner']), *command, '--resume'])}; echo "second exit $?"
            cp {target} {tmp_path / 'final.jsonl'}
        """)
        run = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                             capture_output=True, text=True, timeout=JOB_TIMEOUT)
        output = run.stdout + run.stderr
        assert "first exit 2" in output and "No space left on device" in output, output[-3000:]
        assert "Free space (or fix the permissions) and rerun with --resume" in output and "Traceback" not in output
        assert "second exit 0" in output, output[-3000:]
        assert (tmp_path / "final.jsonl").read_bytes() == setup["reference"]
        return

    def limit_file_size():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, 48 * 1024))

    code, output = _run(setup, target, preexec=limit_file_size)
    assert code == 2 and "File too large" in output and "rerun with --resume" in output, output[-3000:]
    assert "Traceback" not in output and not target.exists()
    _resume_and_compare(setup, target)


def _read_only_modes():
    modes = []
    if can_unshare_mounts():
        modes.append(pytest.param("ro-mount", id="read-only-mount"))
    if os.geteuid() != 0:
        modes.append(pytest.param("chmod", id="chmod-555"))
    return modes or [pytest.param("none", marks=pytest.mark.skip(reason="root without mount namespaces"))]


@pytest.mark.parametrize("mode", _read_only_modes())
def test_a_read_only_output_directory_is_one_clear_error(setup, tmp_path, mode):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    command = [sys.executable, str(setup["runner"]), *setup["args"], "--output", str(out_dir / "out.jsonl")]
    if mode == "ro-mount":
        script = f"mount -t tmpfs -o ro tmpfs {out_dir} && exec {shlex.join(command)}"
        run = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                             capture_output=True, text=True, timeout=JOB_TIMEOUT)
        reason = "Read-only file system"
    else:
        out_dir.chmod(0o555)
        run = subprocess.run(command, capture_output=True, text=True, timeout=JOB_TIMEOUT)
        reason = "Permission denied"
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.startswith(f"taskflow: error: cannot write the output {out_dir / 'out.jsonl'}: {reason}")
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_a_worker_that_raises_stops_the_job_naming_the_lines_and_resume_finishes_it(setup, tiny_sentiment, tmp_path):
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, batch_size=16, num_threads=1)
    target = tmp_path / "out.jsonl"
    spec = FaultySpec(flow.spec, "raise", marker=TEXTS[1000])  # line 1001, in the chunk of lines 897-1024
    with pytest.raises(WorkerError) as info:
        run_file(flow.task, setup["root"] / "in.txt", target, workers=2, worker_spec=spec, progress=False)
    message = str(info.value)
    assert message.startswith("a worker process failed on the records at lines 897-1024 of "), message
    assert "RuntimeError: planted fault: the model crashes on" in message and "rerun with --resume" in message
    assert not multiprocessing.active_children(), "a worker process outlived its job"
    done = lines_in(tmp_path / "out.jsonl.partial")
    assert done <= 896 and done % 128 == 0, "only whole chunks before the failing one are kept"
    _resume_and_compare(setup, target)


def test_a_worker_that_cannot_build_its_pipeline_stops_the_job_with_the_cause(setup, tiny_sentiment, tmp_path):
    flow = Taskflow("sentiment_analysis", task_path=tiny_sentiment, batch_size=16, num_threads=1)
    target = tmp_path / "out.jsonl"
    with pytest.raises(WorkerError) as info:
        run_file(flow.task, setup["root"] / "in.txt", target, workers=2, worker_spec=FaultySpec(flow.spec, "build"),
                 progress=False)
    message = str(info.value)
    assert message.startswith("a worker process could not build the pipeline:\n"), message
    assert message.rstrip().endswith("RuntimeError: planted fault: this worker cannot build the pipeline"), message
    assert not multiprocessing.active_children(), "a worker process outlived its job"
    assert lines_in(tmp_path / "out.jsonl.partial") == 0 and not target.exists()
    _resume_and_compare(setup, target)


UNGUARDED = '''
from taskflow import Taskflow

flow = Taskflow("sentiment_analysis", task_path={model!r}, num_threads=1)
flow.predict_file({source!r}, {target!r}, workers=2, progress=False)
print("done")
'''


def test_an_unguarded_script_gets_one_clear_error_not_a_hang(setup, tiny_sentiment, tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.format(model=str(tiny_sentiment), source=str(setup["root"] / "in.txt"),
                                       target=str(tmp_path / "out.jsonl")), encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=JOB_TIMEOUT,
                         start_new_session=True)
    assert run.returncode == 1 and "done" not in run.stdout
    assert "WorkerError: worker processes could not start: each one re-imports your script" in run.stderr
    assert f"({script}:5)" in run.stderr and 'if __name__ == "__main__":' in run.stderr
    assert "bootstrapping phase" not in run.stderr, "multiprocessing's own error, once per respawn"
    assert run.stderr.count("Traceback") == 1, run.stderr[-3000:]


def test_a_script_read_from_stdin_runs_workers(setup, tiny_sentiment, tmp_path):
    """``python - <<EOF``: there is no file for workers to re-import; the job just runs."""
    code = UNGUARDED.format(model=str(tiny_sentiment), source=str(setup["root"] / "in.txt"),
                            target=str(tmp_path / "out.jsonl"))
    run = subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, timeout=JOB_TIMEOUT,
                         start_new_session=True)
    assert run.returncode == 0 and run.stdout.strip() == "done", run.stderr[-3000:]
    assert len((tmp_path / "out.jsonl").read_bytes().splitlines()) == len(TEXTS)


def test_seeded_random_kills(setup, tmp_path):
    """A few of benchmarks/kill_jobs.py's seeded runs (that script runs 50 and reports the counts)."""
    bench = Path(__file__).parents[1] / "benchmarks" / "kill_jobs.py"
    run = subprocess.run([sys.executable, str(bench), "--runs", os.environ.get("TASKFLOW_KILL_RUNS", "5"),
                          "--seed", "1000", "--no-write", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]


def test_a_second_job_on_the_same_output_is_refused_while_the_first_runs(setup, tmp_path):
    """Two jobs named one --output: both exited 0 and the file held neither's results.  The second is now
    refused at once (exit 2, naming the output), and the first finishes as if alone."""
    target = tmp_path / "out.jsonl"
    other = tmp_path / "other.txt"
    other.write_text("\n".join(f"另一份第{i}条，很好" for i in range(500)) + "\n", encoding="utf-8")
    first = Job(setup["runner"], [*setup["args"], "--output", str(target)], cwd=tmp_path)
    try:
        assert wait_for(lambda: lines_in(tmp_path / "out.jsonl.partial") >= 64, 60), "the first job did not start"
        first.signal(signal.SIGSTOP)   # holds it mid-run, whatever the machine's speed
        args = [a if a != setup["args"][2] else str(other) for a in setup["args"]]
        for extra in ([], ["--resume"]):
            second = subprocess.run([sys.executable, str(setup["runner"]), *args, "--output", str(target), *extra],
                                    capture_output=True, text=True, timeout=JOB_TIMEOUT, cwd=tmp_path)
            assert second.returncode == 2, second.stderr[-3000:]
            assert second.stderr.startswith(f"taskflow: error: another job is writing {target} (process "
                                            f"{first.process.pid}; "), second.stderr
            assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
    finally:
        first.signal(signal.SIGCONT)
    code, output = first.wait(JOB_TIMEOUT)
    assert code == 0, output[-3000:]
    assert target.read_bytes() == setup["reference"], "the first job's output was changed by the second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.txt", "out.jsonl"]


def test_an_output_folder_removed_mid_run_is_said_and_nothing_claims_to_be_saved(setup, tmp_path):
    """The output's folder deleted while the job runs: the job stops (exit 2) and leaves nothing behind,
    and its message says the folder went and nothing was kept, not that the records are saved."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "out.jsonl"
    job = Job(setup["runner"], [*setup["args"], "--output", str(target)], cwd=tmp_path)
    try:
        assert wait_for(lambda: lines_in(out_dir / "out.jsonl.partial") >= 64, 60), "the job did not start"
        job.signal(signal.SIGSTOP)   # holds it mid-run, whatever the machine's speed
        shutil.rmtree(out_dir)
    finally:
        job.signal(signal.SIGCONT)
    code, output = job.wait(JOB_TIMEOUT)
    assert code == 2, output[-3000:]
    assert "Traceback" not in output and not out_dir.exists()
    error = output.strip().splitlines()[-1]
    assert error.startswith(f"taskflow: error: {out_dir} was removed while the job ran"), error
    assert "nothing of this run was kept" in error and "saved" not in error and "--resume" not in error, error


def test_an_input_rewritten_in_place_mid_run_is_said_to_have_changed(setup, tmp_path):
    """The input rewritten in place (same file, other bytes) while the job reads it: the first error says
    the file changed while the job ran, naming it, not that some line is not valid UTF-8."""
    source = tmp_path / "in.txt"
    shutil.copyfile(setup["args"][2], source)
    args = [str(source) if a == setup["args"][2] else a for a in setup["args"]]
    target = tmp_path / "out.jsonl"
    job = Job(setup["runner"], [*args, "--output", str(target)], cwd=tmp_path)
    try:
        assert wait_for(lambda: lines_in(tmp_path / "out.jsonl.partial") >= 64, 60), "the job did not start"
        job.signal(signal.SIGSTOP)
        # Saved again in GBK (longer than before, so the reader finds bytes where it stopped), in place.
        with open(source, "r+b") as handle:
            handle.truncate(0)
            handle.write(("\n".join(f"改写后的{t}" for t in TEXTS) + "\n").encode("gbk"))
    finally:
        job.signal(signal.SIGCONT)
    code, output = job.wait(JOB_TIMEOUT)
    assert code == 2, output[-3000:]
    error = output.strip().splitlines()[-1]
    assert error.startswith(f"taskflow: error: {source} changed while the job ran"), error
    assert "--encoding" not in error and "Traceback" not in output, error
    assert not target.exists()
    resumed = subprocess.run([sys.executable, str(setup["runner"]), *args, "--output", str(target), "--resume"],
                             capture_output=True, text=True, timeout=JOB_TIMEOUT, cwd=tmp_path)
    assert resumed.returncode == 2 and "cannot resume" in resumed.stderr, resumed.stderr[-3000:]
