"""lexical_analysis speed and segmentation quality, side by side with jieba.

    OMP_NUM_THREADS=2 python benchmarks/bench_lexical.py --data ../shared/data
    # Paddle 2.x only: what LAC's fused GRU kernels (fc_gru_fuse_pass -> fusion_gru) would give
    OMP_NUM_THREADS=2 /path/to/paddle2.6/python benchmarks/bench_lexical.py --gru-fusion
    # candidate networks of the fast model (random weights, the shipped vocabulary), end to end
    OMP_NUM_THREADS=2 python benchmarks/bench_lexical.py --architectures --data ../shared/data

Texts are the MSRA dev sentences (lexical/msra_seg_propn/dev.txt, 2,318
sentences): chars/s of the shipped model (static graph, Paddle Inference,
oneDNN, 2 threads) at batch 1, 16 and 64, of jieba.cut, of word_segmentation's fast mode (jieba through taskflow) and jieba.posseg.cut
over the same texts in the same run, and each one's segmentation F1 on them.
Figures go to benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))      # the lab (recipes/): MSRA reader, scoring
from common import load_note, machine, quiet_load, table, timed, update_section  # noqa: E402

THREADS = 2


def msra_dev(data: Path, limit: int | None = None):
    """The MSRA dev sentences (the first ``limit``) and their gold (word, tag) lists."""
    from recipes.lexical_analysis.data import read_word_tag_file

    gold = list(read_word_tag_file(data / "lexical" / "msra_seg_propn" / "dev.txt"))[:limit]
    return ["".join(w for w, _ in s) for s in gold], gold


def raw_predictor(task, *, onednn: bool, ir_optim: bool):
    """A Paddle Inference predictor on the task's exported program with explicit switches."""
    from paddle import inference

    from taskflow.predictor import PredictorOptions, build_config

    predictor = task.predictor   # exports once, into the cache
    options = PredictorOptions(num_threads=THREADS, onednn=onednn)
    config = build_config(predictor.model_file, predictor.params_file, options, task.input_specs())
    config.switch_ir_optim(ir_optim)
    return inference.create_predictor(config)


def run_raw(task, predictor, texts: list[str]) -> list:
    feeds = task.preprocess([(0, t) for t in texts])
    for name, array in feeds.items():
        handle = predictor.get_input_handle(name)
        handle.reshape(array.shape)
        handle.copy_from_cpu(array)
    predictor.run()
    return task.postprocess([predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()],
                            [(0, t) for t in texts])


def median_speeds(engines: dict, texts: list[str], seconds: float, rounds: int, chunk: int = 256):
    """Median chars/s of each engine over ``rounds`` interleaved rounds (this VM's speed drifts
    between passes, so every engine gets a share of each phase), plus each one's first outputs."""
    speeds: dict = {name: [] for name in engines}
    outputs: dict = {}
    for _ in range(rounds):
        for name, run in engines.items():
            speed, out = timed(run, texts, seconds, chunk)
            speeds[name].append(speed)
            outputs.setdefault(name, out)
    return {name: (float(np.median(v)), min(v), max(v)) for name, v in speeds.items()}, outputs


def decode_comparison(repeats: int = 20) -> list[list]:
    """paddle.text.viterbi_decode vs LAC's crf_decoding kernel (what the model uses), same scores."""
    import paddle

    from taskflow.tasks.lexical_analysis.model import crf_decoding

    rows, k, t = [], 56, 47
    for batch in (1, 16, 64):
        emission, transition = paddle.randn([batch, t, k]), paddle.randn([k + 2, k])
        lengths = paddle.full([batch], t, "int64")
        cells = []
        for decode in (lambda: paddle.text.viterbi_decode(emission, transition[2:], lengths, False),
                       lambda: crf_decoding(emission, transition, lengths)):
            decode()
            start = time.perf_counter()
            for _ in range(repeats):
                decode()
            cells.append((time.perf_counter() - start) / repeats * 1000)
        rows.append([batch, f"{cells[0]:.2f}", f"{cells[1]:.2f}", f"{cells[0] / cells[1]:.0f}x"])
    return rows


def main_speed(args) -> None:
    import jieba
    import jieba.posseg

    from taskflow import Taskflow
    from recipes.lexical_analysis.silver import word_spans
    from recipes.lexical_analysis.train import score_msra

    jieba.setLogLevel(60)
    texts, gold = msra_dev(Path(args.data))
    n_chars = sum(map(len, texts))
    lines = [f"Machine: {machine()}; {load_note(quiet_load())}. Texts: MSRA dev ({len(texts)} sentences, {n_chars:,} chars, "
             f"mean {n_chars / len(texts):.0f}). Model: the shipped `lexical_analysis/bigru_crf`, static graph "
             f"(Paddle Inference, oneDNN, {THREADS} threads); jieba {jieba.__version__} in the same process "
             f"(pure Python, one thread). Each figure is the median of {args.rounds} interleaved rounds of at least "
             f"{args.seconds:.0f} s and one full pass (range in brackets). Command: `OMP_NUM_THREADS=2 python "
             "benchmarks/bench_lexical.py --data ../shared/data`.", ""]

    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    posseg = jieba.posseg.POSTokenizer(tokenizer)
    engines = {f"taskflow lexical_analysis, batch {b}": Taskflow("lexical_analysis", batch_size=b, num_threads=THREADS)
               for b in (1, 16, 64)}
    engines["jieba.cut (HMM on)"] = lambda ts: [{"segs": list(tokenizer.cut(t))} for t in ts]
    # jieba through taskflow: word offsets, whitespace runs joined, the package's pinned dictionary.
    fast = Taskflow("word_segmentation", mode="fast")
    engines["taskflow word_segmentation, mode 'fast' (jieba)"] = lambda ts: [{"segs": words} for words in fast(ts)]
    engines["jieba.posseg.cut (HMM on)"] = lambda ts: [{"segs": [p.word for p in posseg.cut(t)]} for t in ts]
    # One call with every text, as a user with a corpus would: taskflow sorts them all by length.
    speeds, outputs = median_speeds(engines, texts, args.seconds, args.rounds, chunk=len(texts))
    rows = []
    for name, (median, low, high) in speeds.items():
        f1 = score_msra([word_spans((w, "") for w in r["segs"]) for r in outputs[name]], gold)["segmentation"]
        rows.append([name, f"{median:,.0f} ({low:,.0f}-{high:,.0f})", f1["precision"], f1["recall"], f1["f1"]])
    ratio = speeds["taskflow lexical_analysis, batch 64"][0] / speeds["jieba.posseg.cut (HMM on)"][0]
    lines += ["Segmentation speed and quality on the same texts (gold: MSR segmentation; jieba follows its own "
              "dictionary's standard, which explains much of its gap):", "",
              table(["segmenter", "chars/s", "P", "R", "F1"], rows), "",
              f"Model at batch 64 / jieba.posseg: **{ratio:.2f}x** (target >= 0.33x). The model also tags POS "
              "and PER/LOC/ORG/TIME in the same pass.", ""]

    # Paddle Inference switches on the same exported program, batch 64.
    task = engines["taskflow lexical_analysis, batch 64"].task
    sample = sorted(texts, key=len)   # what the base class does: length-sorted batches
    variants = {}
    for onednn in (True, False):
        for ir_optim in (True, False):
            predictor = raw_predictor(task, onednn=onednn, ir_optim=ir_optim)
            variants[f"oneDNN {'on' if onednn else 'off'}, IR optimisation {'on' if ir_optim else 'off'}"] = (
                lambda ts, p=predictor: run_raw(task, p, ts))
    variants["dynamic graph (paddle.nn.Layer, eval mode)"] = Taskflow("lexical_analysis", batch_size=64, static=False)
    speeds, _ = median_speeds(variants, sample, args.seconds, args.rounds, chunk=64)
    lines += ["Paddle Inference switches, batch 64, length-sorted batches (taskflow runs the first row):", "",
              table(["configuration", "chars/s"], [[n, f"{m:,.0f} ({lo:,.0f}-{hi:,.0f})"] for n, (m, lo, hi) in speeds.items()]),
              ""]
    lines += ["CRF decoding, one call on random scores (56 labels, 47 chars a text; ms): the model decodes with "
              "LAC's `crf_decoding` kernel; `paddle.text.viterbi_decode` gives the same paths:", "",
              table(["batch", "paddle.text.viterbi_decode", "crf_decoding", "speed-up"], decode_comparison()), ""]

    body = "## lexical_analysis: speed and segmentation vs jieba\n\n" + "\n".join(lines)
    update_section("lexical_speed", body)
    print(body)


# ------------------------------------------------------ GRU fusion (Paddle 2.x)

def gru_fusion_experiment(args) -> None:
    """LAC's CPU speed comes from fc_gru_fuse_pass / mul_gru_fuse_pass, which turn LoD
    ``mul + elementwise_add + gru`` into one ``fusion_gru`` kernel.  Our network's GRU
    is ``paddle.nn.GRU`` (the ``rnn`` op on padded batches), which those passes do not
    match.  This measures the same 2-layer BiGRU both ways on Paddle 2.x, where the
    LoD ops still exist (Paddle 3's PIR has no op that makes a LoD tensor in the graph)."""
    import tempfile

    import paddle
    from paddle import inference

    if int(paddle.__version__.split(".")[0]) >= 3:
        raise SystemExit("--gru-fusion needs Paddle 2.x: PIR (Paddle 3) has no sequence_unpad to build LoD input")
    from taskflow.packages import pinned_manifest

    arch = pinned_manifest("lexical_analysis", "bigru_crf")["architecture"]
    dim, hidden = arch["char_dim"] + 2 * arch["bigram_dim"], arch["hidden_size"]
    texts, _ = msra_dev(Path(args.data)) if args.data else ([], None)
    lengths_all = np.array([len(t) for t in texts]) if texts else np.random.default_rng(0).integers(10, 90, 2318)
    rng = np.random.default_rng(0)
    # What taskflow's length-sorted batching yields: 64 neighbours in the sorted lengths, mid-distribution.
    ordered = np.sort(lengths_all)
    middle = len(ordered) // 2
    lengths = ordered[middle - 32:middle + 32][::-1].astype("int64")
    x = rng.standard_normal((64, int(lengths.max()), dim)).astype("float32")
    results = []

    def measure(model_file, params_file, feeds, label, switches=(True, False)):
        for fused in switches:
            config = inference.Config(str(model_file), str(params_file))
            config.disable_gpu()
            config.set_cpu_math_library_num_threads(THREADS)
            config.enable_mkldnn()
            config.switch_ir_optim(True)
            if not fused:
                for name in ("fc_gru_fuse_pass", "mul_gru_fuse_pass"):
                    config.delete_pass(name)
            config.disable_glog_info()
            try:
                predictor = inference.create_predictor(config)

                def run():
                    for name, array in feeds.items():
                        handle = predictor.get_input_handle(name)
                        handle.reshape(array.shape)
                        handle.copy_from_cpu(array)
                    predictor.run()

                run()
                n, start = 0, time.perf_counter()
                while time.perf_counter() - start < args.seconds:
                    run()
                    n += 1
                elapsed = (time.perf_counter() - start) / n
                results.append([label, "on (applied)" if fused and "LoD" in label else "on" if fused else "off",
                                f"{elapsed * 1000:.1f}", f"{lengths.sum() / elapsed:,.0f}"])
            except Exception as exc:
                results.append([label, "on" if fused else "off", "fails", type(exc).__name__])

    with tempfile.TemporaryDirectory() as tmp:
        # 1. paddle.nn.GRU, as exported by taskflow (rnn op, padded batch + lengths).
        class Stack(paddle.nn.Layer):
            def __init__(self):
                super().__init__()
                self.gru = paddle.nn.GRU(dim, hidden, num_layers=2, direction="bidirect")

            def forward(self, x, lengths):
                return self.gru(x, sequence_length=lengths)[0].mean(axis=-1)

        spec = [paddle.static.InputSpec([None, None, dim], "float32", "x"), paddle.static.InputSpec([None], "int64", "lengths")]
        paddle.jit.save(paddle.jit.to_static(Stack(), input_spec=spec, full_graph=True), f"{tmp}/rnn")
        measure(f"{tmp}/rnn.pdmodel", f"{tmp}/rnn.pdiparams", {"x": x, "lengths": lengths},
                "paddle.nn.GRU (rnn op, padded batch) - what taskflow exports", switches=(True,))

        # 2. LAC's formulation: LoD sequence, fc + gru per direction.
        from paddle.base.layer_helper import LayerHelper

        paddle.enable_static()
        try:
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                xs = paddle.static.data("x", [None, None, dim], "float32")
                ls = paddle.static.data("lengths", [None], "int64")
                h = paddle.static.nn.sequence_unpad(xs, ls)
                for layer in range(2):
                    outs = []
                    for reverse in (False, True):
                        helper = LayerHelper(f"gru{layer}{int(reverse)}")
                        w = paddle.static.create_parameter([h.shape[-1], 3 * hidden], "float32")
                        b = paddle.static.create_parameter([3 * hidden], "float32")
                        mul = helper.create_variable_for_type_inference("float32")
                        helper.append_op(type="mul", inputs={"X": h, "Y": w}, outputs={"Out": mul},
                                         attrs={"x_num_col_dims": 1, "y_num_col_dims": 1})
                        proj = helper.create_variable_for_type_inference("float32")
                        helper.append_op(type="elementwise_add", inputs={"X": mul, "Y": b}, outputs={"Out": proj}, attrs={"axis": 1})
                        wh = paddle.static.create_parameter([hidden, 3 * hidden], "float32")
                        bh = paddle.static.create_parameter([1, 3 * hidden], "float32")
                        o = {k: helper.create_variable_for_type_inference("float32")
                             for k in ("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden")}
                        helper.append_op(type="gru", inputs={"Input": proj, "Weight": wh, "Bias": bh}, outputs=o,
                                         attrs={"activation": "tanh", "gate_activation": "sigmoid",
                                                "is_reverse": reverse, "origin_mode": False})
                        outs.append(o["Hidden"])
                    h = paddle.concat(outs, axis=1)
                out = paddle.mean(h, axis=1)
            exe = paddle.static.Executor(paddle.CPUPlace())
            exe.run(startup)
            # Not save_inference_model: its pruning drops the gru op's unused outputs (BatchGate...),
            # which fc_gru_fuse_pass's pattern needs, so the fusion silently never fires.
            import paddle.static.io as sio

            program = main.clone(for_test=True)
            sio.prepend_feed_ops(program, ["x", "lengths"])
            sio.append_fetch_ops(program, [out.name])
            sio.save_to_file(f"{tmp}/lod.pdmodel", program.desc.serialize_to_string())
            persistables = sorted((v for v in program.list_vars() if v.persistable and v.name not in ("feed", "fetch")),
                                  key=lambda v: v.name)
            sio.save_vars(exe, tmp, main_program=program, vars=persistables, filename="lod.pdiparams")
        finally:
            paddle.disable_static()
        measure(f"{tmp}/lod.pdmodel", f"{tmp}/lod.pdiparams", {"x": x, "lengths": lengths},
                "LoD mul + gru per direction (LAC's fluid formulation)")

    body = (
        "## lexical_analysis: LAC's fused GRU kernels (Paddle 2.x experiment)\n\n"
        f"Machine: {machine()}; 1-minute load average at start {os.getloadavg()[0]:.1f}. The shipped model's BiGRU stack (input {dim}, hidden {hidden}, 2 bidirectional layers) "
        f"on one length-sorted batch of 64 MSRA dev sentences ({lengths.sum():,} chars, {lengths.min()}-{lengths.max()} each), "
        f"{THREADS} threads, oneDNN on, IR optimisation on; 'fusion passes' = fc_gru_fuse_pass and "
        "mul_gru_fuse_pass. Command: `python benchmarks/bench_lexical.py --gru-fusion --data ../shared/data` "
        "(Paddle 2.6).\n\n"
        + table(["GRU formulation", "fusion passes", "ms / batch", "chars/s"], results)
    )
    update_section("lexical_gru_fusion", body)
    print(body)


# (label, architecture type, architecture overrides); the first is what shipped before the change.
CANDIDATES = [
    ("BiGRU 2 x 128 (bigru_crf 1.1)", "bigru_crf", {"hidden_size": 128, "num_layers": 2}),
    ("BiGRU 1 x 128", "bigru_crf", {"hidden_size": 128, "num_layers": 1}),
    ("BiGRU 2 x 64", "bigru_crf", {"hidden_size": 64, "num_layers": 2}),
    ("ID-CNN 128, 4 blocks of (1, 1, 2)", "idcnn_crf", {"hidden_size": 128, "num_layers": 4, "dilations": [1, 1, 2]}),
    ("ID-CNN 192, 4 blocks of (1, 1, 2)", "idcnn_crf", {"hidden_size": 192, "num_layers": 4, "dilations": [1, 1, 2]}),
    ("ID-CNN 256, 3 blocks of (1, 2, 4)", "idcnn_crf", {"hidden_size": 256, "num_layers": 3, "dilations": [1, 2, 4]}),
]


def candidate_package(base: Path, out: Path, type_name: str, overrides: dict) -> Path:
    """The shipped package with its network replaced by a random-weight ``type_name`` one."""
    import json
    import shutil

    from taskflow.model import network_class
    from taskflow.files import sha256_file
    from taskflow.weights import save_weights

    shutil.copytree(base, out)
    manifest = json.loads((base / "manifest.json").read_text(encoding="utf-8"))
    manifest.pop("metrics", None)
    architecture = {**manifest["architecture"], **overrides, "type": type_name}
    manifest["architecture"] = architecture
    network = network_class(type_name)(**{k: v for k, v in architecture.items() if k != "type"})
    save_weights(network, out / "weights.npz", float16=lambda name: "emb" in name)
    manifest["files"] = {name: {"sha256": sha256_file(out / name), "size": (out / name).stat().st_size}
                         for name in manifest["files"]}
    (out / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
    return out


def architecture_experiment(args) -> None:
    """chars/s of candidate networks for the fast model, end to end through Taskflow at batch 64
    and for the Paddle Inference call alone, interleaved in one run on the same texts."""
    import tempfile

    from taskflow import Taskflow
    import taskflow.tasks.lexical_analysis  # noqa: F401  (registers the network types)
    from taskflow.packages import _bundled_root

    texts, _ = msra_dev(Path(args.data))
    texts = sorted(texts, key=len)   # length-sorted batches, as the task batches them
    n_chars = sum(map(len, texts))
    base = _bundled_root() / "lexical_analysis" / "bigru_crf"
    with tempfile.TemporaryDirectory() as tmp:
        engines, network_only, sizes = {}, {}, {}
        for i, (label, type_name, overrides) in enumerate(CANDIDATES):
            package = candidate_package(base, Path(tmp) / str(i), type_name, overrides)
            sizes[label] = (package / "weights.npz").stat().st_size
            task = Taskflow("lexical_analysis", task_path=str(package), batch_size=64, num_threads=THREADS)
            engines[label] = task
            batches = [task.task.preprocess([(0, t) for t in texts[i:i + 64]]) for i in range(0, len(texts), 64)]
            predictor = task.task.predictor

            def network(_texts, predictor=predictor, batches=batches):
                for feeds in batches:
                    predictor.run(feeds)
                return [None]
            network_only[label] = network
        speeds, _ = median_speeds(engines, texts, args.seconds, args.rounds, chunk=len(texts))
        raw, _ = median_speeds(network_only, texts, args.seconds, args.rounds, chunk=len(texts))
    first = CANDIDATES[0][0]
    rows = [[label, f"{speeds[label][0]:,.0f} ({speeds[label][1]:,.0f}-{speeds[label][2]:,.0f})",
             f"{speeds[label][0] / speeds[first][0]:.2f}x", f"{raw[label][0]:,.0f}", f"{sizes[label] / 2**20:.1f}"]
            for label, _, _ in CANDIDATES]
    body = "\n".join([
        "## lexical_analysis: candidate networks for the fast model (speed)", "",
        f"Machine: {machine()}; {load_note(quiet_load())}. Texts: MSRA dev ({len(texts)} sentences, {n_chars:,} chars), "
         f"length-sorted, batch 64, {THREADS} threads, static graph (Paddle Inference, oneDNN). Each network has random "
         "weights and the shipped vocabularies (char 128 + 2 x bigram 48 dims in, CRF decoded in the graph), so this is "
         "speed only; accuracy comes from training (tasks/lexical_analysis/README.md). 'end to end' is "
         "`Taskflow(...)(texts)`; 'network only' is the Paddle Inference call on prepared batches. Median of "
         f"{args.rounds} interleaved rounds of >= {args.seconds:g} s (range in brackets). "
         "Command: `OMP_NUM_THREADS=2 python benchmarks/bench_lexical.py --architectures --data ../shared/data`.", "",
         table(["network", "end to end chars/s", "vs first", "network only chars/s", "weights MB"], rows)])
    update_section("lexical_architectures", body)
    print(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", help="root of ../shared/data")
    parser.add_argument("--seconds", type=float, default=6.0, help="time per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--gru-fusion", action="store_true", help="only the Paddle 2.x GRU fusion experiment")
    parser.add_argument("--architectures", action="store_true",
                        help="only the speed of candidate networks for the fast model (needs --data)")
    args = parser.parse_args()
    if args.gru_fusion:
        gru_fusion_experiment(args)
    elif args.architectures:
        if not args.data:
            parser.error("--data is required")
        architecture_experiment(args)
    else:
        if not args.data:
            parser.error("--data is required")
        main_speed(args)


if __name__ == "__main__":
    main()
