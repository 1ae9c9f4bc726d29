"""lexical_analysis speed and segmentation against Baidu's LAC and pkuseg (and jieba), one run.

    bash benchmarks/peers/setup.sh     # once: the peers venv (Python 3.8, paddlepaddle 1.8.5, LAC, pkuseg)
    OMP_NUM_THREADS=2 .venv-paddle3/bin/python benchmarks/bench_lexical_peers.py --data ../shared/data

Texts: the MSRA dev sentences (lexical/msra_seg_propn/dev.txt), as benchmarks/bench_lexical.py.
taskflow's fast model (``Taskflow("lexical_analysis")``, batch 64, static graph, 2 threads) and
jieba.posseg run in this process; LAC and pkuseg each in a subprocess of the peers venv
(benchmarks/peers/runner.py --serve), loaded once and idle while another engine runs.  Every
engine gets one turn per round, in the same order each round (interleaved: this VM's speed drifts),
each turn at least ``--seconds`` of whole passes; the median over ``--rounds`` is reported, with the
range.  Segmentation P/R/F1 of each engine's first pass against the gold MSR segmentation, and
PER/LOC/ORG F1 where the engine tags them (LAC: PER/LOC/ORG; jieba and pkuseg: nr/ns/nt).
A peer that is not installed or fails gets a row saying why.  The section goes to
benchmarks/RESULTS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(REPO))      # the lab (recipes/): the recipe's scoring
from bench_lexical import msra_dev  # noqa: E402
from common import load_note, machine, quiet_load, table, timed, update_section  # noqa: E402

from taskflow.predictor import mkl_cpu_type  # noqa: E402

THREADS = 2
LAC26 = f"LAC(mode='lac') on paddlepaddle 2.6.2, {THREADS} math threads"   # LAC as its users run it today
PEERS_PYTHON = HERE / "peers" / ".venv" / "bin" / "python"
LAC_PYTHON = HERE / "peers" / ".venv-lac" / "bin" / "python"   # LAC on paddlepaddle 2.6.2 (setup.sh)
RUNNER = HERE / "peers" / "runner.py"
ENTITY = {"PER": "PER", "LOC": "LOC", "ORG": "ORG", "nr": "PER", "ns": "LOC", "nt": "ORG"}
COMMAND = "OMP_NUM_THREADS=2 .venv-paddle3/bin/python benchmarks/bench_lexical_peers.py --data ../shared/data"
# The environment as the benchmark was started, before taskflow sets MKL_DEBUG_CPU_TYPE on an AMD CPU
# (taskflow.predictor.mkl_cpu_type): LAC runs in it as its users run it, and once more with the same
# setting taskflow makes, so that the ratio shows the model and not only the setting.
START_ENV = dict(os.environ)
LAC26_MKL = f"{LAC26}, MKL_DEBUG_CPU_TYPE=5 (MKL's AVX2 kernels, as taskflow sets on AMD)"


class InProcess:
    """An engine in this process: ``run(texts) -> [(words, tags)]``."""

    def __init__(self, run, chunk: int):
        self.run, self.chunk, self.outputs, self.error = run, chunk, None, None

    def turn(self, texts, seconds) -> float:
        speed, out = timed(self.run, texts, seconds, self.chunk)
        self.outputs = self.outputs or out
        return speed

    def close(self):
        pass


class Peer:
    """A peer in the peers venv, driven through runner.py --serve."""

    def __init__(self, engine: str, texts_file: str, batch: int, python: Path, **env_extra: str):
        self.engine, self.outputs, self.error, self.info, self.proc = engine, None, None, {}, None
        if not python.exists():
            self.error = f"not installed: no {python} (run benchmarks/peers/setup.sh)"
            return
        env = dict(START_ENV, OMP_NUM_THREADS=str(THREADS), **env_extra)
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [str(python), str(RUNNER), "--engine", engine, "--texts", texts_file, "--batch", str(batch),
             "--threads", str(THREADS), "--serve"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True, encoding="utf-8", env=env)
        reply = self._read()
        if reply.get("ready"):
            self.info = reply["info"]
        else:
            self.error = reply.get("error", "no answer")
            self.close()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.stderr.seek(0)
            tail = self.stderr.read().decode("utf-8", "replace").strip().splitlines()[-1:] or ["(no stderr)"]
            return {"error": f"runner exited ({self.proc.wait()}): {tail[0][:200]}"}
        return json.loads(line)

    def _ask(self, command: str) -> dict:
        if self.error:
            return {"error": self.error}
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        reply = self._read()
        if "error" in reply:
            self.error = reply["error"]
            self.close()
        return reply

    def turn(self, texts, seconds) -> float | None:
        reply = self._ask(f"time {seconds}")
        if self.outputs is None and "chars_per_s" in reply:
            out = self._ask("outputs")
            if "words" in out:
                self.outputs = list(zip(out["words"], out["tags"]))
        return reply.get("chars_per_s")

    def close(self):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def spans(words: list[str], tags: list[str]) -> list[tuple[int, int, str]]:
    out, start = [], 0
    for k, word in enumerate(words):
        out.append((start, start + len(word), ENTITY.get(tags[k], "") if k < len(tags) else ""))
        start += len(word)
    return out


def scores(outputs, texts, gold) -> tuple[dict, dict, int]:
    """Segmentation and entity P/R/F1, and how many outputs do not spell their text."""
    from recipes.lexical_analysis.train import score_msra

    bad = sum("".join(w) != t for (w, _), t in zip(outputs, texts))
    result = score_msra([spans(w, t) for w, t in outputs], gold)
    return result["segmentation"], result["entities"], bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data"), help="root of ../shared/data")
    parser.add_argument("--seconds", type=float, default=10.0, help="time per engine and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--sentences", type=int, help="only the first N dev sentences (trials)")
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON, help="the peers venv's python")
    parser.add_argument("--lac-python", type=Path, default=LAC_PYTHON,
                        help="python of a venv with LAC on paddlepaddle 2.6.2 (Python 3.9+)")
    parser.add_argument("--no-wait", action="store_true", help="do not wait up to 120 s for a quiet machine")
    parser.add_argument("--no-write", action="store_true", help="print, do not write RESULTS.md")
    parser.add_argument("--candidate", type=Path,
                        help="also time a trained lexical package that is not shipped (a recipe's --out folder)")
    args = parser.parse_args()

    import jieba
    import jieba.posseg

    from taskflow import Taskflow

    jieba.setLogLevel(60)
    texts, gold = msra_dev(Path(args.data), args.sentences)
    n_chars = sum(map(len, texts))
    load = os.getloadavg()[0] if args.no_wait else quiet_load()

    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    posseg = jieba.posseg.POSTokenizer(tokenizer)
    model = Taskflow("lexical_analysis", batch_size=64, num_threads=THREADS)

    def run_taskflow(ts, model=model):
        return [(r["segs"], r["tags"]) for r in model(ts)]

    candidate_name = None
    if args.candidate:
        candidate = Taskflow("lexical_analysis", task_path=str(args.candidate), batch_size=64, num_threads=THREADS)
        manifest = json.loads((args.candidate / "manifest.json").read_text(encoding="utf-8"))
        shape = manifest["architecture"]
        candidate_name = (f"taskflow candidate {manifest['name']} {manifest['version']} (not shipped; "
                          f"{shape['num_layers']} x {shape['hidden_size']} {shape['type']}), batch 64")

    def run_jieba(ts):
        out = []
        for t in ts:
            pairs = [(p.word, p.flag) for p in posseg.cut(t)]
            out.append(([w for w, _ in pairs], [f for _, f in pairs]))
        return out

    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as handle:
        handle.write("\n".join(texts) + "\n")
    engines: dict = {}
    try:
        # taskflow gets every text in one call, as bench_lexical.py does (it sorts them by length
        # and runs batches of 64); LAC gets 64 texts a call (one LoD batch, no padding to sort for).
        engines = {
            "taskflow lexical_analysis, batch 64": InProcess(run_taskflow, len(texts)),
            "jieba.posseg.cut (HMM on)": InProcess(run_jieba, 256),
            "LAC(mode='lac') as shipped": Peer("lac", handle.name, 64, args.peers_python),
            f"LAC(mode='lac'), {THREADS} math threads": Peer("lac2", handle.name, 64, args.peers_python),
            "pkuseg": Peer("pkuseg", handle.name, 64, args.peers_python),
            # LAC as its users run it today: Paddle 2.6 (paddle.fluid aliased), the math library on 2 threads.
            LAC26: Peer(
                "lac2", handle.name, 64, args.lac_python),
        }
        if mkl_cpu_type(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"), START_ENV):
            engines[LAC26_MKL] = Peer("lac2", handle.name, 64, args.lac_python, MKL_DEBUG_CPU_TYPE="5")
        if candidate_name:
            engines[candidate_name] = InProcess(lambda ts: run_taskflow(ts, candidate), len(texts))
        speeds: dict = {name: [] for name in engines}
        for _ in range(args.rounds):
            for name, engine in engines.items():
                if not engine.error:
                    speed = engine.turn(texts, args.seconds)
                    if speed is not None:
                        speeds[name].append(speed)
    finally:
        for engine in engines.values():
            engine.close()
        os.unlink(handle.name)

    pk = engines["pkuseg"]
    if pk.info:
        pk_name = "pkuseg (postag=True)" if pk.info.get("postag") else "pkuseg (segmentation only: postag model not installed)"
    else:
        pk_name = "pkuseg"
    names = {"pkuseg": pk_name}
    standard = {
        "taskflow lexical_analysis, batch 64": "MSR (trained on MSRA)",
        "jieba.posseg.cut (HMM on)": "jieba's dictionary, not MSR's",
        "LAC(mode='lac') as shipped": "Baidu's own, not MSR's",
        f"LAC(mode='lac'), {THREADS} math threads": "Baidu's own, not MSR's",
        "pkuseg": "pkuseg's default mixed-domain model, not MSR's",
        LAC26: "Baidu's own, not MSR's",
        LAC26_MKL: "Baidu's own, not MSR's",
    }
    if candidate_name:
        standard[candidate_name] = "MSR (trained on MSRA, CLUENER and silver corpus lines)"
    rows, median = [], {}
    for name, engine in engines.items():
        shown = names.get(name, name)
        if engine.error or not speeds[name] or engine.outputs is None:
            rows.append([shown, f"not run: {engine.error or 'no timing'}", "", "", "", "", standard[name]])
            continue
        median[name] = float(np.median(speeds[name]))
        seg, ent, bad = scores(engine.outputs, texts, gold)
        tagged = any(tags for _, tags in engine.outputs)
        note = standard[name] + (f"; {bad} outputs do not spell their text" if bad else "")
        rows.append([shown, f"{median[name]:,.0f} ({min(speeds[name]):,.0f}-{max(speeds[name]):,.0f})",
                     seg["precision"], seg["recall"], seg["f1"], ent["f1"] if tagged else "no tags", note])

    ours = median.get("taskflow lexical_analysis, batch 64")
    ratios = []
    if candidate_name and candidate_name in median:
        for name in ("LAC(mode='lac') as shipped", f"LAC(mode='lac'), {THREADS} math threads", LAC26):
            if name in median:
                ratios.append(f"candidate / {name}: **{median[candidate_name] / median[name]:.2f}x**")
    for name in ("LAC(mode='lac') as shipped", f"LAC(mode='lac'), {THREADS} math threads", LAC26, LAC26_MKL,
                 "pkuseg", "jieba.posseg.cut (HMM on)"):
        if name == LAC26_MKL and name not in engines:
            continue
        if ours and name in median:
            ratios.append(f"taskflow / {names.get(name, name)}: **{ours / median[name]:.2f}x**")
        else:
            ratios.append(f"taskflow / {names.get(name, name)}: not measured ({engines[name].error or 'no timing'})")

    lac26 = engines[LAC26].info
    lac26_peers = [engines[name] for name in (LAC26, LAC26_MKL) if name in engines]
    peer_info = next((e.info for e in engines.values() if isinstance(e, Peer) and e.info and e not in lac26_peers), {})
    versions = (f"LAC {peer_info.get('LAC', '?')} on paddlepaddle {peer_info.get('paddlepaddle', '?')}"
                if "LAC" in peer_info else "LAC not run")
    pk_info = engines["pkuseg"].info
    versions += f", pkuseg {pk_info['pkuseg']}" if pk_info else ", pkuseg not run"
    versions += f" (Python {peer_info['python']}, benchmarks/peers/.venv made by benchmarks/peers/setup.sh)" if peer_info else ""
    versions += (f"; LAC {lac26.get('LAC', '?')} on paddlepaddle {lac26.get('paddlepaddle', '?')} (Python {lac26.get('python')}, "
                 "benchmarks/peers/.venv-lac, paddle.fluid aliased to paddle.base)" if lac26 else "; LAC on Paddle 2.6 not run")
    subset = f"the first {len(texts)} of " if args.sentences else ""
    lines = [
        f"Machine: {machine()}; {load_note(load)}. Texts: {subset}MSRA dev ({len(texts)} sentences, {n_chars:,} chars, "
        f"mean {n_chars / len(texts):.0f}). taskflow: the shipped fast model, `Taskflow(\"lexical_analysis\", batch_size=64, "
        f"num_threads={THREADS})`, static graph (Paddle Inference, oneDNN), all texts in one call; jieba {jieba.__version__} "
        f"posseg in the same process. Peers in their own venv, each a subprocess loaded once: {versions}. "
        f"`LAC(mode='lac')` as shipped sets no math threads (1); the second LAC row sets {THREADS}; LAC gets 64 texts a call "
        f"(one LoD batch), jieba and pkuseg one text at a time (pure Python/Cython, one thread). Each figure is the median "
        f"of {args.rounds} interleaved rounds (every engine one turn a round) of at least {args.seconds:g} s and one full pass "
        f"(range in brackets); OMP_NUM_THREADS={THREADS}. Command: `{COMMAND}`"
        + (f" (this run: `{' '.join(sys.argv[1:])}`)" if sys.argv[1:] != ["--data", "../shared/data"] else "") + ".",
        "",
        "Speed and quality on the same texts and cores (gold: MSR segmentation and MSRA nr/ns/nt; a peer that follows "
        "another segmentation standard loses F1 for that alone, see the last column):",
        "",
        table(["segmenter", "chars/s", "P", "R", "F1", "PER/LOC/ORG F1", "segmentation standard"], rows),
        "",
        "; ".join(ratios) + " (target: >= 1.2x LAC on paddlepaddle 2.6.2).",
        "",
    ]
    body = "## lexical_analysis: speed vs LAC and pkuseg\n\n" + "\n".join(lines)
    if not args.no_write:
        update_section("lexical_peers", body)
    print(body)


if __name__ == "__main__":
    main()
