"""`taskflow serve` held to two claims of SERVING.md, on 127.0.0.1: SIGTERM under load answers every
request the server accepted, and the server's memory stays flat over a long run.

1. **SIGTERM under load** (``--checks sigterm``): a ``taskflow serve sentiment_analysis`` process;
   ``--clients`` (64) threads of Python's ``http.client``, one keep-alive connection each, send one
   text a request in a closed loop; after ``--sigterm-after`` seconds the server gets SIGTERM.
   Every request is counted as one of:

   * answered 200, or answered with another status;
   * refused at connect: the server had stopped listening, so it never accepted the request;
   * closed while the request was being written;
   * closed before any response byte, once the request was written;
   * cut during the response, or not answered within ``--client-timeout``.

   How a close before any response byte is read (as uvicorn 0.54 stops: ``Server.shutdown`` and
   its HTTP protocols' ``shutdown()``): on SIGTERM uvicorn closes its listening sockets, then for
   each open connection either closes it at once, when it holds no request being run (no request
   parsed since the last response: a keep-alive boundary), or lets the request it runs finish and
   closes after that response (``keep_alive = False``, ``Connection: close``).  It then waits for
   every connection to close (at most ``timeout_graceful_shutdown``, which ``taskflow serve`` sets
   to the largest route ``timeout_s``), then runs the app's shutdown, where each route's inference
   threads finish what is queued.  A request whose headers the server had not read in full when it
   closed such a connection is closed before any response byte: the server never accepted it.  Closed this way
   too, but accepted, are only requests cancelled once the graceful timeout ran out (uvicorn logs
   "Cancel N running task(s)"), an exception in the app ("Exception in ASGI application") or a
   process that died.  The client alone cannot tell the two apart, so the script reads the
   server's side: its exit status, those log lines, and its access log (one line per response it
   sent).  Only when the server exited 0, logged neither line, and its access log counts exactly
   the responses the clients received are such closes counted as unread at a keep-alive boundary;
   otherwise every one of them is counted as lost.

2. **RSS soak** (``--checks rss``): a server process gets ``--requests`` (100,000) requests from
   ``wrk`` (``--connections`` 8, one C thread, lighter on the cores than Python clients), run in
   chunks of ``--sample-every`` (5,000) requests; after each chunk the server's VmRSS is read from
   /proc/PID/status.  Reported: the first RSS (ready, before any request), the RSS after warm-up
   (``--warm-up``, 5,000 requests), the last, the growth per 10,000 requests after warm-up, the
   slope of a least-squares line through the samples after warm-up, and failed requests.  Flat
   means the RSS after warm-up never rises more than ``--bound-mb`` (10 MiB) above its value at
   warm-up; the script says whether the run stayed within it.

    apt-get install wrk
    OMP_NUM_THREADS=2 python benchmarks/soak_serve.py --data ../shared/data            # writes RESULTS.md
    python benchmarks/soak_serve.py --sigterm-after 5 --requests 3000 --sample-every 500 --warm-up 1000 --no-write

``--data`` is the folder of the public data sets: the texts are ChnSentiCorp dev reviews, cut to
120 chars; without it, built-in short sentences.  Both checks stop by themselves: the first after
``--sigterm-after`` seconds plus the drain (at most ``--drain-limit`` s, then the server is
killed), the second after ``--requests`` requests.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_serve import BUILT_IN, free_port  # noqa: E402
from benchmarks.common import load_note, machine, quiet_load, read_labelled_tsv, table, update_section  # noqa: E402

TASK = "sentiment_analysis"
PATH = f"/v1/{TASK}"
HEADERS = {"Content-Type": "application/json"}

# Outcomes of one request in the SIGTERM check, in the order the table shows them.
ANSWERED, REFUSED, WRITE_CLOSED, CLOSED, CUT, TIMED_OUT = (
    "answered 200", "refused at connect", "closed while writing the request",
    "closed before any response byte", "cut during the response", "not answered in time")
# The three moments a request can have relative to SIGTERM (by when it started and ended).
WINDOWS = ("before SIGTERM", "in flight at SIGTERM", "after SIGTERM")

LUA = """
local bodies = {BODIES}
local n, answered, limit = {OFFSET}, 0, {LIMIT}
request = function()
  n = n + 1
  return wrk.format("POST", "{PATH}", {["Content-Type"] = "application/json"}, bodies[(n % #bodies) + 1])
end
response = function(status, headers, body)
  answered = answered + 1
  if answered == limit then
    io.write("LIMIT\\n")
    io.flush()
    wrk.thread:stop()
  end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d\\n", summary.requests, summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.status + summary.errors.timeout, summary.duration))
end
"""


# ---------------------------------------------------------------- pure helpers (tested)
def least_squares_slope(xs: list[float], ys: list[float]) -> float:
    """The slope of the least-squares line through the points ``(xs[i], ys[i])``."""
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"a slope needs two points or more, of equal counts; got {len(xs)} x and {len(ys)} y")
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        raise ValueError("a slope needs two different x values")
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread


def vm_rss_kb(status_text: str) -> int:
    """VmRSS (kB) from the text of /proc/PID/status."""
    found = re.search(r"^VmRSS:\s+(\d+)\s+kB", status_text, re.M)
    if found is None:
        raise ValueError("no VmRSS line (a process that has exited has none)")
    return int(found.group(1))


def rss_summary(samples: list[tuple[int, float]], warm_up: int, bound_mb: float) -> dict:
    """What the soak reports from ``samples``, (requests done, RSS MiB) in order, the first taken
    before any request: first, after warm-up (the first sample at or past ``warm_up`` requests)
    and last RSS, growth over the run and per 10,000 requests after warm-up, the least-squares
    slope per 10,000 requests after warm-up, the highest rise above the warm-up RSS, and whether
    that rise stayed under ``bound_mb``.  Figures that need two samples after warm-up are None
    without them."""
    if not samples:
        raise ValueError("no samples")
    after = next((s for s in samples if s[0] >= warm_up), None)
    summary = {"first_mb": samples[0][1], "warm_requests": None, "warm_mb": None, "last_requests": samples[-1][0],
               "last_mb": samples[-1][1], "growth_mb": None, "growth_per_10k_mb": None, "slope_per_10k_mb": None,
               "peak_rise_mb": None, "bound_mb": bound_mb, "within_bound": None}
    if after is None:
        return summary
    tail = [s for s in samples if s[0] >= after[0]]
    summary.update(warm_requests=after[0], warm_mb=after[1], growth_mb=samples[-1][1] - after[1],
                   peak_rise_mb=max(mb for _, mb in tail) - after[1])
    if len(tail) >= 2:
        summary["growth_per_10k_mb"] = summary["growth_mb"] / (tail[-1][0] - after[0]) * 10_000
        summary["slope_per_10k_mb"] = least_squares_slope([n for n, _ in tail], [mb for _, mb in tail]) * 10_000
        summary["within_bound"] = summary["peak_rise_mb"] < bound_mb
    return summary


def wrk_result(stdout: str) -> dict:
    """requests, failed (connect, read, write, timeout errors and statuses >= 400) and seconds from
    the RESULT line the soak's Lua script writes."""
    found = re.search(r"^RESULT (\d+) (\d+) (\d+)$", stdout, re.M)
    if found is None:
        raise ValueError(f"wrk wrote no RESULT line: {stdout[-500:]!r}")
    requests_, failed, duration_us = map(int, found.groups())
    return {"requests": requests_, "failed": failed, "seconds": duration_us / 1e6}


def access_log_statuses(log_text: str, path: str = PATH) -> collections.Counter:
    """Responses uvicorn's access log says it sent to ``POST path``, by status."""
    return collections.Counter(int(status) for status in
                               re.findall(r'"POST ' + re.escape(path) + r' HTTP/1\.[01]" (\d{3})', log_text))


def read_server_log(log_text: str) -> dict:
    """The server-side signs that a close before any response byte may have dropped a request the
    server had accepted: uvicorn's cancellation of running tasks when the graceful timeout ran out,
    and exceptions in the app."""
    return {"cancelled": len(re.findall(r"Cancel \d+ running task", log_text)),
            "app_errors": log_text.count("Exception in ASGI application")}


def window(started: float, ended: float, sigterm_at: float | None) -> str:
    """Which of :data:`WINDOWS` a request that ran from ``started`` to ``ended`` falls in."""
    if sigterm_at is None or ended < sigterm_at:
        return WINDOWS[0]
    return WINDOWS[1] if started < sigterm_at else WINDOWS[2]


# ---------------------------------------------------------------- a server process
def start_server(log: Path, log_level: str) -> tuple[subprocess.Popen, int]:
    """``taskflow serve sentiment_analysis`` on 127.0.0.1, once /ready answers 200; and its port."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}       # the access log reaches the file line by line
    process = subprocess.Popen([sys.executable, "-m", "taskflow.cli", "serve", TASK, "--host", "127.0.0.1",
                                "--port", str(port), "--log-level", log_level],
                               stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", "/ready")
            if connection.getresponse().status == 200:
                return process, port
        except OSError:
            pass
        finally:
            connection.close()
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}): {log.read_text()[-2000:]}")
        time.sleep(0.3)
    process.kill()
    process.wait()
    raise SystemExit("the server was not ready in 300 s")


def rss_mb(pid: int) -> float:
    return vm_rss_kb(Path(f"/proc/{pid}/status").read_text()) / 1024


# ---------------------------------------------------------------- check 1: SIGTERM under load
class Tally:
    """The clients' counts: (outcome, window) -> requests; and each close's details."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts: collections.Counter = collections.Counter()
        self.statuses: collections.Counter = collections.Counter()
        self.closes: list[dict] = []
        self.last_answer = 0.0

    def add(self, outcome: str, started: float, ended: float, sigterm_at: float | None, **details) -> None:
        where = window(started, ended, sigterm_at)
        with self.lock:
            self.counts[outcome, where] += 1
            if outcome.startswith("answered "):
                self.statuses[details.get("status", 200)] += 1
                self.last_answer = max(self.last_answer, ended)
            if outcome == CLOSED:
                self.closes.append({"window": where, **details,
                                    "after_sigterm_s": None if sigterm_at is None else ended - sigterm_at})


def client(port: int, bodies: list[bytes], first: int, step: int, timeout: float, sigterm: list,
           stop: threading.Event, tally: Tally) -> None:
    """One closed-loop client: one keep-alive connection (a new one after the server closes it),
    one text a request, until the server refuses a connection after SIGTERM or ``stop`` is set."""
    connection, answered_here, k = None, 0, first
    while not stop.is_set():
        body, k = bodies[k % len(bodies)], k + step
        started = time.monotonic()
        if connection is None:
            connection, answered_here = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout), 0
            try:
                connection.connect()
            except OSError:               # ECONNREFUSED: nothing listens any more
                tally.add(REFUSED, started, time.monotonic(), sigterm[0])
                connection = None
                if sigterm[0] is not None:
                    return
                time.sleep(0.05)
                continue
        try:
            connection.request("POST", PATH, body, HEADERS)
        except OSError as exc:
            tally.add(WRITE_CLOSED, started, time.monotonic(), sigterm[0], error=type(exc).__name__)
            connection.close()
            connection = None
            continue
        try:
            response = connection.getresponse()
        except socket.timeout:
            outcome, details = TIMED_OUT, {}
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
            # No status line arrived: RemoteDisconnected is an EOF before any byte; a reset before it
            # is the kernel's answer to a close with the request unread in the server's buffer.
            outcome, details = CLOSED, {"error": type(exc).__name__, "fresh": answered_here == 0}
        except (http.client.HTTPException, OSError) as exc:
            outcome, details = CUT, {"error": type(exc).__name__}
        else:
            try:
                response.read()
            except (http.client.HTTPException, OSError) as exc:
                outcome, details = CUT, {"error": type(exc).__name__}
            else:
                answered_here += 1
                outcome = ANSWERED if response.status == 200 else f"answered {response.status}"
                details = {"status": response.status}
                if response.will_close:          # Connection: close, as uvicorn says once it stops
                    connection.close()
                    connection = None
        tally.add(outcome, started, time.monotonic(), sigterm[0], **details)
        if not outcome.startswith("answered "):
            connection.close()
            connection = None


def sigterm_check(texts: list[str], clients: int, seconds: float, drain_limit: float, timeout: float,
                  scratch: Path) -> dict:
    log = scratch / "sigterm.log"
    process, port = start_server(log, "info")             # info: uvicorn's access log, one line a response
    bodies = [json.dumps({"inputs": [t]}, ensure_ascii=False).encode("utf-8") for t in texts]
    tally, stop, sigterm = Tally(), threading.Event(), [None]
    threads = [threading.Thread(target=client, args=(port, bodies, k, clients, timeout, sigterm, stop, tally),
                                daemon=True) for k in range(clients)]
    loaded = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        sigterm[0] = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            exit_status = process.wait(timeout=drain_limit)
            exited = time.monotonic()
        except subprocess.TimeoutExpired:
            exit_status, exited = None, None
        deadline = time.monotonic() + timeout + 5
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        stop.set()
        if process.poll() is None:
            process.kill()
            process.wait()
    hung = sum(thread.is_alive() for thread in threads)
    log_text = log.read_text(encoding="utf-8", errors="replace")
    server_side = read_server_log(log_text)
    logged = access_log_statuses(log_text)
    clean = (exit_status == 0 and not server_side["cancelled"] and not server_side["app_errors"]
             and logged == tally.statuses)
    closes = sum(count for (outcome, _), count in tally.counts.items() if outcome == CLOSED)
    # A client still waiting once the server is gone holds a request nobody answered.
    lost = hung + closes * (not clean) + sum(count for (outcome, _), count in tally.counts.items()
                                             if outcome in (CUT, TIMED_OUT))
    return {"counts": tally.counts, "statuses": tally.statuses, "closes": tally.closes, "closes_unread": clean,
            "lost": lost, "exit_status": exit_status, "logged": logged, "hung_clients": hung,
            "drain_s": None if exited is None else exited - sigterm[0],
            "last_answer_s": tally.last_answer - sigterm[0] if tally.last_answer else None,
            "load_s": sigterm[0] - loaded, **server_side}


def sigterm_table(got: dict, clients: int, seconds: float, drain_limit: float) -> str:
    outcomes = [ANSWERED] + sorted({o for o, _ in got["counts"] if o.startswith("answered ") and o != ANSWERED})
    outcomes += [REFUSED, WRITE_CLOSED, CLOSED, CUT, TIMED_OUT]
    meaning = {ANSWERED: "answered", REFUSED: "never accepted: nothing listened",
               WRITE_CLOSED: "never accepted: the connection was gone before the request was sent",
               CLOSED: ("unread: closed at a keep-alive boundary (server side clean, see below)"
                        if got["closes_unread"] else "**counted as lost** (the server side does not rule it out)"),
               CUT: "**lost**: the response began and broke off", TIMED_OUT: "**lost**: no answer in time"}
    rows = [[o] + [got["counts"][o, w] for w in WINDOWS] + [sum(got["counts"][o, w] for w in WINDOWS),
                                                             meaning.get(o, "answered")] for o in outcomes]
    fresh = sum(1 for c in got["closes"] if c.get("fresh"))
    late = max((c["after_sigterm_s"] for c in got["closes"] if c["after_sigterm_s"] is not None), default=None)
    drain = (f"{got['drain_s']:.2f} s" if got["drain_s"] is not None
             else f"no exit within {drain_limit:g} s (killed)")
    logged = sum(got["logged"].values())
    answered = sum(got["statuses"].values())
    lines = [
        f"{clients} clients for {seconds:g} s, then SIGTERM. Server exit status: **{got['exit_status']}** "
        f"(0 expected); SIGTERM to exit: **{drain}**; SIGTERM to the last response a client received: "
        + (f"{got['last_answer_s']:.2f} s" if got["last_answer_s"] is not None else "none") + ".",
        f"Server side: its access log counts {logged:,} responses to `POST {PATH}`, the clients received "
        f"{answered:,} ({'equal' if got['logged'] == got['statuses'] else 'NOT equal'}); uvicorn cancelled "
        f"running tasks: {'no' if not got['cancelled'] else 'YES'}; exceptions in the app: {got['app_errors']}.",
        f"Closes before any response byte: {len(got['closes'])} ({fresh} on a connection that had not been "
        f"answered yet), the last {late:.2f} s after SIGTERM." if got["closes"] else
        "Closes before any response byte: none.",
        f"Clients still waiting when the check ended (counted as lost): {got['hung_clients']}.",
        f"**Requests the server accepted and did not answer: {got['lost']}** "
        f"({'the claim holds' if got['lost'] == 0 and got['exit_status'] == 0 else 'the claim does not hold'}).",
    ]
    return (table(["outcome", *WINDOWS, "all", "what it means"], rows) + "\n\n" + "\n".join(f"- {l}" for l in lines))


# ---------------------------------------------------------------- check 2: RSS soak
def wrk_chunk(port: int, bodies_lua: str, count: int, offset: int, connections: int, scratch: Path) -> dict:
    script = scratch / "soak.lua"
    script.write_text(LUA.replace("{BODIES}", "{" + bodies_lua + "}").replace("{PATH}", PATH)
                      .replace("{LIMIT}", str(count)).replace("{OFFSET}", str(offset)), encoding="utf-8")
    # wrk runs for its -d whatever its threads do: once the script has seen ``count`` responses and
    # stopped its thread, SIGINT ends the wait, and wrk writes its summary.
    process = subprocess.Popen(["wrk", "-t1", f"-c{connections}", "-d3600s", "--timeout", "30s", "-s", str(script),
                                f"http://127.0.0.1:{port}"], stdout=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.strip() == "LIMIT":
                process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return wrk_result("".join(lines))


def rss_check(texts: list[str], total: int, every: int, connections: int, scratch: Path) -> dict:
    process, port = start_server(scratch / "rss.log", "warning")
    bodies_lua = ",".join("[==[" + json.dumps({"inputs": [t]}, ensure_ascii=False) + "]==]" for t in texts)
    samples, failed, seconds, started = [(0, rss_mb(process.pid))], 0, 0.0, time.monotonic()
    try:
        while samples[-1][0] < total:
            got = wrk_chunk(port, bodies_lua, min(every, total - samples[-1][0]), samples[-1][0], connections, scratch)
            failed, seconds = failed + got["failed"], seconds + got["seconds"]
            if got["requests"] == 0 or process.poll() is not None:
                break
            samples.append((samples[-1][0] + got["requests"], rss_mb(process.pid)))
            print(f"rss: {samples[-1][0]:,} requests, VmRSS {samples[-1][1]:.1f} MiB, failed {failed}", flush=True)
        peak = None
        if process.poll() is None:
            found = re.search(r"^VmHWM:\s+(\d+)\s+kB", Path(f"/proc/{process.pid}/status").read_text(), re.M)
            peak = int(found.group(1)) / 1024 if found else None
    finally:
        exit_early = process.poll()
        process.terminate()
        try:
            process.wait(timeout=150)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return {"samples": samples, "failed": failed, "rps": samples[-1][0] / seconds if seconds else 0.0,
            "wall_s": time.monotonic() - started, "peak_mb": peak, "died": exit_early is not None}


def rss_tables(got: dict, warm_up: int, bound_mb: float, connections: int) -> str:
    s = rss_summary(got["samples"], warm_up, bound_mb)

    def mb(value, signed=False):
        return "n/a" if value is None else (f"{value:+.1f}" if signed else f"{value:.1f}")

    summary_rows = [
        ["requests", f"{s['last_requests']:,} ({got['rps']:.0f}/s with wrk, {connections} connections)"],
        ["failed requests", got["failed"]],
        ["RSS first (ready, no request yet)", f"{mb(s['first_mb'])} MiB"],
        [f"RSS after warm-up ({s['warm_requests']:,} requests)" if s["warm_requests"] is not None
         else "RSS after warm-up", f"{mb(s['warm_mb'])} MiB"],
        ["RSS last", f"{mb(s['last_mb'])} MiB"],
        ["peak (VmHWM)", f"{mb(got['peak_mb'])} MiB"],
        ["growth after warm-up, last - warm-up", f"{mb(s['growth_mb'], True)} MiB"],
        ["growth per 10,000 requests after warm-up", f"{mb(s['growth_per_10k_mb'], True)} MiB"],
        ["least-squares slope after warm-up", f"{mb(s['slope_per_10k_mb'], True)} MiB per 10,000 requests"],
        ["highest rise above the warm-up RSS", f"{mb(s['peak_rise_mb'], True)} MiB"],
        [f"within the bound (rise < {bound_mb:g} MiB)",
         "n/a" if s["within_bound"] is None else ("yes" if s["within_bound"] else "**no**")],
    ]
    if got["died"]:
        summary_rows.append(["server", "**exited during the soak**"])
    samples = table(["requests", "VmRSS MiB"], [[f"{n:,}", f"{v:.1f}"] for n, v in got["samples"]])
    return table(["", "value"], summary_rows) + "\n\nSamples:\n\n" + samples


# ---------------------------------------------------------------- main
def command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """The command line of this run, as RESULTS.md shows it (the data folder as DIR)."""
    words = ["python", "benchmarks/soak_serve.py"]
    for name in ("checks", "sigterm_after", "clients", "requests", "sample_every", "warm_up", "connections",
                 "bound_mb"):
        value = getattr(args, name)
        if value != parser.get_default(name):
            words += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    if args.data:
        words[2:2] = ["--data", "DIR"]
    threads = os.environ.get("OMP_NUM_THREADS")
    return (f"OMP_NUM_THREADS={threads} " if threads else "") + shlex.join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="folder of the public data sets (ChnSentiCorp dev reviews are the texts)")
    parser.add_argument("--checks", default="sigterm,rss", help="which checks: sigterm, rss or both (default)")
    parser.add_argument("--clients", type=int, default=64, help="SIGTERM check: client threads (64)")
    parser.add_argument("--sigterm-after", type=float, default=30.0, help="SIGTERM check: seconds of load first (30)")
    parser.add_argument("--drain-limit", type=float, default=150.0,
                        help="SIGTERM check: seconds the server may take to exit before it is killed (150)")
    parser.add_argument("--client-timeout", type=float, default=90.0,
                        help="SIGTERM check: seconds a client waits for an answer (90; the server's own is 60)")
    parser.add_argument("--requests", type=int, default=100_000, help="RSS soak: requests (100,000)")
    parser.add_argument("--sample-every", type=int, default=5_000, help="RSS soak: requests between samples (5,000)")
    parser.add_argument("--warm-up", type=int, default=5_000, help="RSS soak: requests before the baseline (5,000)")
    parser.add_argument("--connections", type=int, default=8, help="RSS soak: wrk connections (8)")
    parser.add_argument("--bound-mb", type=float, default=10.0,
                        help="RSS soak: the rise above the warm-up RSS that still counts as flat (10 MiB)")
    parser.add_argument("--load-wait", type=float, default=120.0,
                        help="seconds to wait for the load average to fall before starting (120)")
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    args = parser.parse_args()
    checks = set(args.checks.split(","))
    if not checks or checks - {"sigterm", "rss"}:
        parser.error(f"--checks takes sigterm, rss or sigterm,rss; got {args.checks!r}")
    if "rss" in checks and shutil.which("wrk") is None:
        raise SystemExit("the RSS soak needs wrk: apt-get install wrk")
    texts = BUILT_IN
    if args.data:
        reviews = read_labelled_tsv(Path(args.data) / "sentiment" / "chnsenticorp" / "dev.tsv")[0]
        texts = [t[:120] for t in reviews][:600]
    # A SIGTERM to this script unwinds it, so that the server it started is stopped too.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    start_load = quiet_load(wait=args.load_wait)
    scratch = Path(tempfile.mkdtemp(prefix="soak-serve-"))
    parts = []
    try:
        if "sigterm" in checks:
            began = time.monotonic()
            got = sigterm_check(texts, args.clients, args.sigterm_after, args.drain_limit, args.client_timeout,
                                scratch)
            print(f"sigterm check: {time.monotonic() - began:.1f} s", flush=True)
            parts.append(f"### SIGTERM under load\n\n`taskflow serve {TASK}` (default model and limits; "
                         f"`--log-level info` for its access log); {args.clients} threads of `http.client`, one "
                         "keep-alive connection each, one text a request, closed loop. A request's window is "
                         "when it started and ended against the SIGTERM.\n\n"
                         + sigterm_table(got, args.clients, args.sigterm_after, args.drain_limit))
            print(f"sigterm check: exit status {got['exit_status']}, accepted and not answered {got['lost']}",
                  flush=True)
        if "rss" in checks:
            began = time.monotonic()
            got = rss_check(texts, args.requests, args.sample_every, args.connections, scratch)
            print(f"rss soak: {time.monotonic() - began:.1f} s", flush=True)
            parts.append(f"### RSS over {args.requests:,} requests\n\n`taskflow serve {TASK}` (default model and "
                         f"limits); `wrk -t1 -c{args.connections}` in chunks of {args.sample_every:,} requests "
                         f"(each chunk opens its connections anew), VmRSS of the server process from "
                         f"/proc/PID/status after each chunk; warm-up {args.warm_up:,} requests. MiB = 2^20 bytes.\n\n"
                         + rss_tables(got, args.warm_up, args.bound_mb, args.connections))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    body = (f"Written by `{command(args, parser)}` on {machine()}; {load_note(start_load)}. Texts: "
            f"{'ChnSentiCorp dev reviews, cut to 120 chars' if args.data else 'built-in short sentences'}; "
            "server and clients on the same machine, on 127.0.0.1.\n\n" + "\n\n".join(parts))
    print(body)
    if args.no_write:
        return
    if checks != {"sigterm", "rss"}:
        print("soak_serve: RESULTS.md is written only when both checks run (--checks sigterm,rss)", file=sys.stderr)
        return
    update_section("serve_soak", "## taskflow serve: SIGTERM under load, and RSS over a soak\n\n" + body)


if __name__ == "__main__":
    main()
