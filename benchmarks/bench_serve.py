"""`taskflow serve` under load: closed-loop clients on 127.0.0.1, one text per request.

For each task (sentiment_analysis fast, then ner), at 1, 8 and 64 concurrent connections of
Debian's ``wrk`` (a light C load generator, so the clients do not take the server's two cores):
requests/s, p50 / p95 / p99 latency, the mean batch the server ran (from its /metrics), failed
requests.  Beside it, in the same run: (a) the ceiling, in-process ``flow(texts)`` at the server's
batch size, and (b) the same server with cross-request batching off (``max_batch_items`` 1,
``max_wait_ms`` 0: one request is one call, one at a time, as `paddlenlp server` runs them); and
the in-process latency of a one-text call, to set against the p50 at one connection.

    apt-get install wrk
    OMP_NUM_THREADS=2 python benchmarks/bench_serve.py --data ../shared/data      # writes RESULTS.md

``--data`` is the folder of the public data sets (the lab's README says where they come from);
the texts are ChnSentiCorp dev reviews.  Without it, a few hundred built-in short sentences.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402

LUA = """
local bodies = {BODIES}
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "{PATH}", {["Content-Type"] = "application/json"}, bodies[(n % #bodies) + 1])
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d %d %d %d\\n", summary.requests, summary.errors.connect +
    summary.errors.read + summary.errors.write + summary.errors.status + summary.errors.timeout, summary.duration,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean))
end
"""

BUILT_IN = [f"{subject}{verb}" for subject in ("这家酒店", "手机", "服务", "快递", "这本书", "外卖", "房间", "客服",
                                               "电影", "屏幕")
            for verb in ("很干净", "不错", "太差了", "一般般", "非常好", "有点贵", "送得很快", "让人失望",
                         "值得推荐", "还行吧", "质量很好", "声音太小", "比想象中好", "不会再来了", "性价比高")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(url: str, name: str, route: str) -> float:
    import requests

    text = requests.get(url + "/metrics", timeout=10, proxies={"http": None}).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name) and f'route="{route}"' in line)


def serve(task: str, settings: dict, log: Path):
    """A server process for ``task``, ready; and its URL."""
    import requests

    port = free_port()
    config = log.with_suffix(".json")
    config.write_text(json.dumps({"tasks": {task: settings}}), encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "taskflow.cli", "serve", "--config", str(config),
                                "--port", str(port), "--log-level", "warning"],
                               stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if requests.get(url + "/ready", timeout=2, proxies={"http": None}).status_code == 200:
                return process, url
        except requests.ConnectionError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"the server exited: {log.read_text()}")
        time.sleep(0.3)
    process.kill()
    raise SystemExit("the server was not ready in 300 s")


def load(url: str, task: str, texts: list[str], connections: int, seconds: float, scratch: Path) -> dict:
    bodies = ",".join("[==[" + json.dumps({"inputs": [t]}, ensure_ascii=False) + "]==]" for t in texts)
    script = scratch / "post.lua"
    script.write_text(LUA.replace("{BODIES}", "{" + bodies + "}").replace("{PATH}", f"/v1/{task}"),
                      encoding="utf-8")
    before_items = metric(url, "taskflow_batch_items_sum", task)
    before_batches = metric(url, "taskflow_batch_items_count", task)
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "30s", "-s", str(script),
                          url], capture_output=True, text=True, check=True).stdout
    requests_, failed, duration_us, p50, p95, p99, mean = map(int, re.search(r"RESULT ([\d ]+)", out).group(1).split())
    batches = metric(url, "taskflow_batch_items_count", task) - before_batches
    items = metric(url, "taskflow_batch_items_sum", task) - before_items
    # ``failed`` already counts the non-2xx answers (wrk's errors.status) beside the socket errors.
    return {"rps": requests_ / (duration_us / 1e6), "failed": failed,
            "p50": p50 / 1000, "p95": p95 / 1000, "p99": p99 / 1000, "batch": items / batches if batches else 0.0}


def in_process(task: str, texts: list[str], batch: int, seconds: float) -> tuple[float, float]:
    """(texts/s of flow(texts) in chunks of ``batch``, median ms of a one-text call), in a fresh process."""
    code = f"""
import json, statistics, sys, time
from taskflow import Taskflow
texts = json.loads(sys.stdin.read())
flow = Taskflow({task!r})
flow(texts[:{batch}])
done, start = 0, time.perf_counter()
while time.perf_counter() - start < {seconds}:
    for i in range(0, len(texts), {batch}):
        flow(texts[i:i + {batch}]); done += len(texts[i:i + {batch}])
rate = done / (time.perf_counter() - start)
one = []
for text in texts[:300]:
    t = time.perf_counter(); flow([text]); one.append(time.perf_counter() - t)
print(json.dumps([rate, statistics.median(one) * 1000]))
"""
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
                         check=True).stdout
    return tuple(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder of the public data sets (ChnSentiCorp dev reviews are the texts)")
    parser.add_argument("--tasks", default="sentiment_analysis,ner")
    parser.add_argument("--connections", default="1,8,64")
    parser.add_argument("--seconds", type=float, default=10.0, help="per load level (default 10)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench_serve needs wrk: apt-get install wrk")
    texts = BUILT_IN
    if args.data:
        texts = [t[:120] for t in read_labelled_tsv(Path(args.data) / "sentiment" / "chnsenticorp" / "dev.tsv")[0]][:600]
    start_load = quiet_load()
    scratch = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    sections = []
    for task in args.tasks.split(","):
        from taskflow import Taskflow

        batch = Taskflow(task).task.batch_size
        ceiling, one_call_ms = in_process(task, texts, batch, args.seconds)
        rows = []
        for name, settings in (("batched (default)", {}), ("unbatched", {"max_batch_items": 1, "max_wait_ms": 0})):
            process, url = serve(task, settings, scratch / f"{task}-{len(rows)}.log")
            try:
                for connections in map(int, args.connections.split(",")):
                    got = load(url, task, texts, connections, args.seconds, scratch)
                    rows.append([name, connections, f"{got['rps']:.0f}", f"{got['rps'] / ceiling:.2f}",
                                 f"{got['p50']:.1f}", f"{got['p95']:.1f}", f"{got['p99']:.1f}", f"{got['batch']:.1f}",
                                 got["failed"]])
                    print(task, rows[-1], flush=True)
            finally:
                process.terminate()
                process.wait(timeout=120)
        sections.append(f"### {task} (default model)\n\nIn-process ceiling `flow(texts)` at batch {batch}: "
                        f"**{ceiling:.0f} texts/s**; one-text call in process: **{one_call_ms:.2f} ms** (median).\n\n"
                        + table(["server", "connections", "requests/s", "of ceiling", "p50 ms", "p95 ms", "p99 ms",
                                 "mean batch", "failed"], rows))
    body = (f"Written by `OMP_NUM_THREADS=2 python benchmarks/bench_serve.py{' --data DIR' if args.data else ''}` "
            f"on {machine()}; {load_note(start_load)}. One text a request "
            f"({'ChnSentiCorp dev reviews, cut to 120 chars' if args.data else 'built-in short sentences'}), "
            f"closed loop, `wrk -t1 -cN -d{args.seconds:g}s` on the same machine (its thread shares the 2 cores).\n\n"
            + "\n\n".join(sections))
    print(body)
    if not args.no_write:
        update_section("serve_speed", "## taskflow serve: requests under load\n\n" + body)
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
