"""Running a network: static-graph export and Paddle Inference.

The dynamic-graph network (a ``paddle.nn.Layer``) is exported once per model
weights and Paddle IR format into the cache (``.json`` under Paddle 3's PIR,
``.pdmodel`` under Paddle 2; the cache's folders and stamps are
:mod:`taskflow.exports`), then served by a Paddle Inference predictor.
Every setting lives on the :class:`Predictor`; nothing here changes Paddle's
global state except inside context managers that restore it, and the one
environment variable :func:`mkl_cpu_type` sets on AMD CPUs before Paddle loads.
The weights file format is :mod:`taskflow.weights`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import warnings
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .errors import DeviceError, ExportError, OptionError, PaddleNotInstalledError, TaskflowError
from .exports import cached_export

__all__ = ["Device", "Precision", "InputSpec", "PredictorOptions", "Predictor", "import_paddle"]


def verbose() -> bool:
    """Whether Paddle's own log lines and warnings should be shown (``TASKFLOW_VERBOSE=1``, or the
    CLI's ``--verbose``); by default a run prints its results and nothing else."""
    return os.environ.get("TASKFLOW_VERBOSE", "").strip().lower() in ("1", "true", "yes", "on")


def mkl_cpu_type(cpuinfo: str, environ: Mapping[str, str]) -> str | None:
    """The ``MKL_DEBUG_CPU_TYPE`` to set before Paddle's first matrix product: ``"5"`` (MKL's AVX2
    kernels) on an AMD CPU with AVX2 where the user has not set it, otherwise None.

    Paddle's CPU wheels (2.6 and 3.x) compute GRUs and matrix products with Intel's MKL (mklml),
    which picks its kernels by CPU vendor and gives every AMD CPU its generic SSE path.  The
    lexical model's BiGRU ran 2.8x slower for it on an AMD EPYC (18,033 vs 50,255 chars/s, network
    alone, MSRA dev, batch 64; benchmarks/RESULTS.md, lexical_analysis).  This mklml predates MKL
    2020.1, so it still honours the variable; MKL reads it at its first call, not at import.
    ``cpuinfo``: the text of /proc/cpuinfo.

    >>> mkl_cpu_type("vendor_id : AuthenticAMD\nflags : fpu sse2 avx2 fma", {})
    '5'
    >>> mkl_cpu_type("vendor_id : GenuineIntel\nflags : fpu sse2 avx2 fma", {}) is None
    True
    """
    if "MKL_DEBUG_CPU_TYPE" in environ:
        return None
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())      # the first processor's
    if fields.get("vendor_id") == "AuthenticAMD" and "avx2" in fields.get("flags", "").split():
        return "5"
    return None


@functools.lru_cache(maxsize=None)
def _cpuinfo() -> str:
    """The text of /proc/cpuinfo (Linux; elsewhere empty)."""
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _prefer_mkl_avx2() -> None:
    """Set ``MKL_DEBUG_CPU_TYPE`` as :func:`mkl_cpu_type` says (Linux; elsewhere nothing)."""
    value = mkl_cpu_type(_cpuinfo(), os.environ)
    if value is not None:
        os.environ["MKL_DEBUG_CPU_TYPE"] = value


def import_paddle():
    """Import paddle, or say how to install it (on AMD CPUs, with MKL's AVX2 kernels:
    :func:`mkl_cpu_type`)."""
    _prefer_mkl_avx2()
    try:
        with warnings.catch_warnings():
            if not verbose():
                # Paddle 3 warns about a missing C++ compiler cache on every import.
                warnings.filterwarnings("ignore", message=".*ccache.*")
            import paddle
    except ImportError as exc:
        if exc.name == "paddle":    # else Paddle is there but failed to load (a library it needs, a cut-short import)
            raise PaddleNotInstalledError(
                "PaddlePaddle is not installed. Install the CPU build with `pip install 'taskflow-nlp[cpu]'` "
                "(or `pip install paddlepaddle`), or `pip install paddlepaddle-gpu` for CUDA."
            ) from exc
        raise PaddleNotInstalledError(
            f"PaddlePaddle is installed but could not be imported: {exc}. Run again; if it persists, reinstall "
            "it (`pip install --force-reinstall paddlepaddle`, or paddlepaddle-gpu)") from exc
    if not _SIGTERM_GIVEN_BACK:
        _give_sigterm_back()
    return paddle


_SIGTERM_GIVEN_BACK: list[bool] = []    # [True] once done in this process


def _give_sigterm_back() -> None:
    """Put back SIGTERM's handler as Python knows it (the default, or the caller's own), in place
    of the C++ one Paddle installs behind Python's back when it is imported.

    Paddle's handler prints a 25-line "FatalError" dump to stdout before the process dies, so a
    process that is merely asked to end (a multiprocessing Pool ends its workers with SIGTERM at
    every exit, a service manager stops a server) printed one per process.  Only SIGTERM is given
    back: Paddle's dumps for real crashes (SIGSEGV, SIGABRT...) stay, and so does every handler
    the caller set from Python.  Done once per process, at the first use of Paddle from the main
    thread (whoever imported it: a spawned worker may import it with its main module); signal
    handlers can be set from that thread only.  The CLI and the jobs set their own on top (see
    :mod:`taskflow.signals`)."""
    import signal

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return
    current = signal.getsignal(signal.SIGTERM)
    if current is not None:     # None: set outside Python before Paddle came; not ours to change
        signal.signal(signal.SIGTERM, current)
    _SIGTERM_GIVEN_BACK.append(True)


class Precision(str, Enum):
    """How a network's numbers are computed.  ``auto`` (the default): fp32, except a network whose
    package was checked in bf16 against fp32 on its dev splits (manifest ``"cpu_bf16": true``),
    which runs in bf16 on a CPU that computes bf16 natively (:func:`native_bf16`), static graph;
    ``bf16``: every network that runs on oneDNN, on such a CPU; ``fp16``: GPU only."""
    AUTO = "auto"
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"


def cpu_has_bf16(cpuinfo: str) -> bool:
    """Whether the CPU /proc/cpuinfo describes (``cpuinfo``: its text) computes bf16 natively,
    AVX512-BF16 (Intel Cooper Lake on, AMD Zen 4 on) or AMX.  Without either, oneDNN emulates bf16
    with fp32 instructions, slower than fp32 itself: taskflow never asks for it there.

    >>> cpu_has_bf16("flags : fpu avx2 avx512f avx512_bf16")
    True
    >>> cpu_has_bf16("flags : fpu avx2 avx512f")
    False
    """
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":        # the first processor's
            return bool({"avx512_bf16", "amx_bf16"} & set(value.split()))
    return False


def native_bf16() -> bool:
    """:func:`cpu_has_bf16` for this machine (Linux; elsewhere False)."""
    return cpu_has_bf16(_cpuinfo())


@dataclass(frozen=True)
class Device:
    """``cpu`` or ``gpu:<id>``; parsed from the strings users pass."""

    kind: str = "cpu"
    index: int = 0

    @classmethod
    def parse(cls, value: "str | Device | None") -> "Device":
        if isinstance(value, Device):
            return value
        if value is None:
            return cls()
        if not isinstance(value, str):
            raise DeviceError(f"device must be a str such as 'cpu' or 'gpu:0', got {type(value).__name__} ({value!r})",
                              "device")
        text = value.strip().lower()
        kind, _, index = text.partition(":")
        if kind == "cpu" and not index:
            return cls("cpu", 0)
        if kind in ("gpu", "cuda") and (not index or index.isdigit()):
            return cls("gpu", int(index or 0))
        raise DeviceError(f"unknown device {value!r}; use 'cpu', 'gpu' or 'gpu:<id>'", "device")

    def __str__(self) -> str:
        return "cpu" if self.kind == "cpu" else f"gpu:{self.index}"


@dataclass(frozen=True)
class InputSpec:
    """One network input: its feed name, dtype, and the largest shape TensorRT should plan for.

    ``pad_id``: for the ``[rows, length]`` input of a network whose outputs are one per row (a
    classifier's), the id that pads a row at its end without changing them (0 for an encoder, whose
    attention masks it, and for the char CNN, whose pools, n-grams and GRU do); None where padding
    would change them, or the outputs follow the positions.  A network whose one input has it runs
    its oneDNN batches padded to a few shapes (:class:`Predictor`)."""

    name: str
    dtype: str = "int64"
    max_shape: tuple[int, ...] = (64, 512)
    pad_id: int | None = None


@dataclass(frozen=True)
class PredictorOptions:
    """Everything that decides how a network runs.

    ``num_threads`` defaults to the number of cores; ``gpu_memory_mb`` is the
    initial size of Paddle's GPU memory pool; ``tensorrt`` turns on Paddle-TRT
    subgraphs (GPU only); ``static=False`` runs the dynamic graph instead of
    the exported one, for debugging.
    """

    device: Device = field(default_factory=Device)
    precision: Precision = Precision.AUTO
    num_threads: int | None = None
    onednn: bool = True
    gpu_memory_mb: int = 256
    tensorrt: bool = False
    static: bool = True

    def __post_init__(self):
        object.__setattr__(self, "device", Device.parse(self.device))
        try:
            object.__setattr__(self, "precision", Precision(self.precision))
        except ValueError:
            raise DeviceError(f"precision must be one of {', '.join(repr(p.value) for p in Precision)}; "
                              f"got {self.precision!r}", "precision") from None
        if self.device.kind == "cpu" and self.precision is Precision.FP16:
            raise DeviceError("precision='fp16' needs device='gpu'; on CPU use precision='bf16' (a CPU with "
                              "AVX512-BF16 or AMX) or 'fp32'", "precision")
        if self.precision is Precision.BF16 and self.device.kind != "cpu":
            raise DeviceError("precision='bf16' is for the CPU; on GPU use precision='fp16'", "precision")
        if self.precision is Precision.BF16 and not native_bf16():
            raise DeviceError("precision='bf16' needs a CPU that computes bf16 natively (AVX512-BF16 or AMX); "
                              "this one has neither, and emulated bf16 is slower than fp32: use precision='auto' "
                              "or 'fp32'", "precision")
        for name in ("static", "tensorrt", "onednn"):
            if not isinstance(getattr(self, name), bool):
                raise OptionError(f"{name} must be True or False, got {getattr(self, name)!r}", name)
        if self.tensorrt and self.device.kind != "gpu":
            raise DeviceError("tensorrt=True needs device='gpu'", "tensorrt")
        if self.num_threads is not None and (
                isinstance(self.num_threads, bool) or not isinstance(self.num_threads, int) or self.num_threads < 1):
            raise OptionError(f"num_threads must be a positive int (CPU threads per predictor), "
                              f"got {self.num_threads!r}", "num_threads")

    @property
    def threads(self) -> int:
        return self.num_threads or os.cpu_count() or 1


def inference_settings(options: PredictorOptions, inputs: Sequence[InputSpec], paddle_major: int) -> list[tuple[str, tuple, dict]]:
    """The Paddle Inference ``Config`` calls for ``options``, as data.

    Kept separate from :func:`build_config` so the GPU settings can be checked
    on machines whose Paddle has no CUDA (the CPU build ignores them).
    """
    calls: list[tuple[str, tuple, dict]] = []
    if options.device.kind == "gpu":
        precision = "Half" if options.precision is Precision.FP16 else "Float32"
        calls.append(("enable_use_gpu", (options.gpu_memory_mb, options.device.index, precision), {}))
        if options.tensorrt:
            calls.append(("enable_tensorrt_engine", (), {
                "workspace_size": 1 << 30,
                "max_batch_size": max(spec.max_shape[0] for spec in inputs),
                "min_subgraph_size": 3,
                "precision_mode": precision,
                "use_static": False,
                "use_calib_mode": False,
            }))
            # Text inputs vary in batch and length: give TRT the range to plan for.
            calls.append(("set_trt_dynamic_shape_info", (
                {s.name: [1] * len(s.max_shape) for s in inputs},
                {s.name: list(s.max_shape) for s in inputs},
                {s.name: [max(1, d // 4) for d in s.max_shape] for s in inputs},
            ), {}))
    else:
        calls.append(("disable_gpu", (), {}))
        calls.append(("set_cpu_math_library_num_threads", (options.threads,), {}))
        # Paddle 3 turns oneDNN on by itself, so "off" has to be said explicitly.
        verb = "enable" if options.onednn else "disable"
        calls.append((f"{verb}_onednn" if paddle_major >= 3 else f"{verb}_mkldnn", (), {}))
        if options.precision is Precision.BF16 and options.onednn:
            # oneDNN's bf16 passes: matrix products, layer norms and softmax in bf16 (fp32 sums)
            calls.append(("enable_onednn_bfloat16" if paddle_major >= 3 else "enable_mkldnn_bfloat16", (), {}))
    calls.append(("switch_ir_optim", (True,), {}))
    if paddle_major < 3:
        # Paddle 3.3's create_predictor fails on PIR (.json) programs with memory_optim on.
        calls.append(("enable_memory_optim", (), {}))
    calls.append(("disable_glog_info", (), {}))
    return calls


def network_options(options: PredictorOptions, *, cpu_bf16: bool) -> PredictorOptions:
    """The options one network runs with, its precision settled: ``auto`` is bf16 for a network
    whose package says ``cpu_bf16`` (checked in bf16 on its dev splits) on a CPU that computes bf16
    natively, in the static graph on oneDNN, and fp32 otherwise; ``bf16`` applies to the networks
    that run on oneDNN (a package may turn it off: see ``Model.predictor_options``), fp32 to the rest."""
    precision = options.precision
    on_onednn = options.device.kind == "cpu" and options.static and options.onednn
    if precision is Precision.AUTO:
        precision = Precision.BF16 if cpu_bf16 and on_onednn and native_bf16() else Precision.FP32
    elif precision is Precision.BF16 and not on_onednn:
        precision = Precision.FP32
    return options if precision is options.precision else dataclasses.replace(options, precision=precision)


def precision_in_effect(options: PredictorOptions) -> str:
    """``options.precision`` as it computes on this machine, for a job to pin: ``auto`` reads
    ``auto/bf16`` where it runs the packages that allow it in bf16 and ``auto/fp32`` where it runs
    everything in fp32, so a job started on one kind of CPU does not resume on the other."""
    if options.precision is not Precision.AUTO:
        return options.precision.value
    return "auto/" + network_options(options, cpu_bf16=True).precision.value


def check_device(options: PredictorOptions) -> None:
    """Raise :class:`DeviceError` now when this Paddle build cannot run on ``options.device``
    (at construction, not at the first call, and not as a raw Paddle error)."""
    paddle = import_paddle()
    if options.device.kind == "gpu" and not paddle.is_compiled_with_cuda():
        raise DeviceError(
            f"device={str(options.device)!r} needs a CUDA build of PaddlePaddle; this one ({paddle.__version__}) "
            "is CPU-only. Install paddlepaddle-gpu, or use device='cpu'.", "device"
        )


def build_config(model_file: Path, params_file: Path, options: PredictorOptions, inputs: Sequence[InputSpec]):
    check_device(options)
    from paddle import inference

    paddle = import_paddle()
    config = inference.Config(str(model_file), str(params_file))
    # Config logs some calls as they are made ("Hardware support for BFLOAT16 is enabled" for the
    # bf16 pass) on the C++ stderr, whatever disable_glog_info says: held, so a run prints its results alone.
    with _NativeStderr():
        apply_settings(config, inference_settings(options, inputs, _paddle_major(paddle)))
    return config


def apply_settings(config, settings) -> None:
    """Make each ``(method, args, kwargs)`` call of :func:`inference_settings` on a
    ``paddle.inference.Config``, precision names turned into ``PrecisionType`` members."""
    from paddle import inference

    for method, args, kwargs in settings:
        args = tuple(getattr(inference.PrecisionType, a) if a in ("Half", "Float32") else a for a in args)
        kwargs = {k: getattr(inference.PrecisionType, v) if k == "precision_mode" else v for k, v in kwargs.items()}
        getattr(config, method)(*args, **kwargs)


def _paddle_major(paddle) -> int:
    return int(paddle.__version__.split(".")[0])


def _ir_format(paddle) -> str:
    try:
        pir = bool(paddle.get_flags(["FLAGS_enable_pir_api"])["FLAGS_enable_pir_api"])
    except (ValueError, KeyError):
        pir = False
    return "json" if pir else "pdmodel"


@contextlib.contextmanager
def paddle_device(device: Device):
    """Run a block with Paddle's default device set to ``device``, restored afterwards."""
    paddle = import_paddle()
    previous = paddle.get_device()
    wanted = "cpu" if device.kind == "cpu" else f"gpu:{device.index}"
    paddle.set_device(wanted)
    try:
        yield
    finally:
        paddle.set_device(previous)


@contextlib.contextmanager
def dynamic_graph():
    """Run a block in Paddle's dynamic-graph mode, whatever the thread.

    The mode is per thread: Paddle turns it on in the thread that imports it, so in any other
    (a web app that builds its pipelines lazily in request threads) a network cannot be built,
    loaded or traced ("'numpy' only can be called by `paddle.Tensor` in dynamic graph mode").
    Paddle's own guard gives such a thread a dynamic-graph tracer for the block and restores the
    static mode after; a thread already in dynamic mode is left as it is."""
    paddle = import_paddle()
    if paddle.in_dynamic_mode():
        yield
        return
    base = getattr(paddle, "base", None) or paddle.fluid     # paddle.base from 2.6 on
    with base.dygraph.guard():
        yield


class _NativeStderr:
    """Holds what Paddle's C++ side writes to stderr (glog lines such as PIR's "not support input
    out tensor") during an export, so a default run prints results and nothing else; the text is
    kept for the error message if the export fails, and passed through when :func:`verbose`."""

    def __init__(self):
        self.text = ""

    def __enter__(self):
        self._saved = None
        if verbose():
            return self
        try:
            import sys
            import tempfile

            sys.stderr.flush()
            self._capture = tempfile.TemporaryFile()
            self._saved = os.dup(2)
            os.dup2(self._capture.fileno(), 2)
        except (OSError, ValueError):   # no real fd 2 (some notebook kernels): leave it alone
            self._saved = None
        return self

    def __exit__(self, *exc):
        if self._saved is not None:
            os.dup2(self._saved, 2)
            os.close(self._saved)
            self._capture.seek(0)
            self.text = self._capture.read().decode("utf-8", "replace")
            self._capture.close()
        return False


# Batches of at most this many rows run without oneDNN (see Predictor).  Plain kernels were faster
# up to 4 rows for the sentiment char CNN and the encoder and oneDNN from 8 (1.4x at 16), but with 4
# a single review cut into more chunks still grew memory; 16 keeps one-text calls flat.
SMALL_BATCH = 16


def bucket_shape(rows: int, length: int, max_length: int) -> tuple[int, int]:
    """The ``(rows, length)`` a batch of a network that can be padded (``InputSpec.pad_id``) is
    padded up to before it runs on oneDNN: rows to 2, 4, a multiple of 4 up to 16 and of 8 past it;
    the length to a multiple of 16 (32 past 128, 64 past 256), never past ``max_length``.

    oneDNN builds and keeps kernels for every input shape it meets, so batches of every size and
    length grew memory with each call; these give a network a few shapes per row count (16 up to
    258 positions), and waste at most a quarter of the rows past 4 and 15 positions of a short row.

    >>> bucket_shape(3, 40, 258), bucket_shape(9, 130, 258), bucket_shape(2, 250, 258)
    ((4, 48), (12, 160), (2, 256))
    >>> bucket_shape(16, 257, 258), bucket_shape(17, 20, 258), bucket_shape(64, 100, 512)
    ((16, 258), (24, 32), (64, 112))
    """
    rows = 2 if rows <= 2 else 4 if rows <= 4 else -(-rows // 4) * 4 if rows <= 16 else -(-rows // 8) * 8
    step = 16 if length <= 128 else 32 if length <= 256 else 64
    return rows, min(max(length, max_length), -(-length // step) * step)


# Idle Paddle predictors a Predictor keeps for the next calls (per batch kind); one more call at
# once than that makes a clone that is dropped after.
MAX_IDLE = 8


class Predictor:
    """Runs one network on numpy feeds and returns numpy outputs.

    ``build_network`` returns the ``paddle.nn.Layer`` with its weights loaded
    and in eval mode; ``weights_key`` (the weights' sha256) names the export,
    so new weights are exported again; ``built_from`` (file name -> sha256)
    names the files the network is built from, recorded in the export and
    checked before it is reused.  Calls are thread-safe: each call takes an
    idle Paddle Inference predictor from a pool (a clone, which shares the
    weights but not the scratch tensors, is made when none is idle) and puts it
    back after; so there are as many as calls ever ran at once, not one per
    thread that ever called, and a new thread's first call reuses a warm one.
    At most ``MAX_IDLE`` idle ones are kept.

    On a CPU with oneDNN on, a batch of at most ``SMALL_BATCH`` rows runs on a second predictor
    without oneDNN; each of the two is made at the first call that needs it. oneDNN builds kernels
    for every new input shape and keeps them, so one-text calls (each of its own length) grew memory
    with every call and ran slower than plain kernels, while batches of eight rows and more gain
    from it (figures in recipes/sentiment_analysis/NOTES.md).  A network whose one input declares
    its ``pad_id`` (the classifiers) has each batch it runs on oneDNN padded up to one of a few
    shapes (:func:`bucket_shape`), its outputs cut back to the batch's rows: the kernels oneDNN keeps
    stay few over calls of every size and length (RSS flat where it grew; benchmarks/RESULTS.md).
    Such a network in bf16 keeps only one-row batches off oneDNN: the plain kernels have no bf16,
    and oneDNN's bf16 ran 2-16 rows 1.6-4.3x faster than them.
    """

    def __init__(
        self,
        build_network: Callable[[], object],
        *,
        inputs: Sequence[InputSpec],
        export_dir: str | os.PathLike,
        weights_key: str,
        options: PredictorOptions | None = None,
        built_from: Mapping[str, str] | None = None,
    ):
        self.options = options or PredictorOptions()
        self.inputs = tuple(inputs)
        self._build_network = build_network
        self._built_from = dict(built_from or {})
        self._idle: dict[bool, list] = {False: [], True: []}   # small batch? -> predictors no call holds
        self._lock = threading.Lock()
        self._paddle = import_paddle()
        # Options of the predictor for small batches: None where they are the same as for the others.
        self._single_options = (dataclasses.replace(self.options, onednn=False)
                                if self.options.static and self.options.device.kind == "cpu" and self.options.onednn
                                else None)
        self._roots: dict[bool, object] = {}     # small batch? -> the first predictor, which others clone
        # A network that can be padded has each batch it runs on oneDNN padded to a bucket's shape.
        self._paddable = (self._single_options is not None and len(self.inputs) == 1
                          and self.inputs[0].pad_id is not None and len(self.inputs[0].max_shape) == 2)
        # Batches of at most this many rows run on the plain kernels; a bf16 network that can be
        # padded runs 2-16-row batches on oneDNN too (the plain kernels have no bf16).
        self._bucketed = self._paddable and self.options.precision is Precision.BF16
        self._plain_rows = 1 if self._bucketed else SMALL_BATCH
        if self.options.static:
            self.model_file, self.params_file = cached_export(
                Path(export_dir), weights_key, _ir_format(self._paddle), self._built_from, self._write_static)
            # Not needed again; and dropping it lets a model and this predictor be freed by reference
            # counting alone (build_network is usually a bound method of the model that holds this).
            self._build_network = None
            # Kept so a caller (or a test) can read back what the batches' predictor was made from.
            self.config = build_config(self.model_file, self.params_file, self.options, self.inputs)
            # Each predictor is made at the first batch that needs it: a process that only ever
            # sends one text a call (or only batches) makes one, and its first result comes sooner.
        else:
            with dynamic_graph(), paddle_device(self.options.device):
                self._network = build_network()

    # ----------------------------------------------------------------- export
    def _write_static(self, folder: Path) -> None:
        """Trace the network and write its static program into ``folder`` (``paddle.jit.save``'s
        ``inference.*`` files); :func:`taskflow.exports.cached_export` stamps the folder and puts it
        in place."""
        paddle = self._paddle
        native_log = _NativeStderr()
        try:
            with dynamic_graph(), paddle_device(Device("cpu")), native_log:
                network = self._build_network()
                spec = [paddle.static.InputSpec([None] * len(s.max_shape), s.dtype, name=s.name) for s in self.inputs]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    static = paddle.jit.to_static(network, input_spec=spec, full_graph=True)
                    paddle.jit.save(static, str(folder / "inference"))
        except TaskflowError:   # said already (weights that do not fit, or changed since they were verified)
            raise
        except Exception as exc:
            said = f"; Paddle said: {native_log.text[-2000:]}" if native_log.text.strip() else ""
            raise ExportError(f"could not export the network to a static graph in {folder.parent}: {exc}{said}") from exc

    @staticmethod
    def _create(config):
        from paddle import inference

        # Paddle 2.6's analysis passes print what they fuse ("squashed ... quantize with bfloat16") on
        # the C++ stderr: held, as during an export, and shown only when creation fails or verbose().
        native_log = _NativeStderr()
        try:
            with native_log:
                return inference.create_predictor(config)
        except Exception:
            if native_log.text.strip():
                import sys

                sys.stderr.write(native_log.text[-2000:])
            raise

    @contextlib.contextmanager
    def _checked_out(self, small: bool):
        """An idle predictor for the small batches that run on the plain kernels (``small``) or for
        the others, with its input handles (in ``self.inputs``' order) and output handles, held for
        one run: a handle stays bound to its tensor, so each is asked for once, not at every run."""
        single = small and self._single_options is not None
        with self._lock:
            idle = self._idle[single]
            bound = idle.pop() if idle else None
            if bound is None:
                if single not in self._roots:
                    # A config serves one predictor, and Paddle takes it even when the creation is cut
                    # short (Ctrl-C): each attempt gets its own, so the next call can still make one.
                    config = build_config(self.model_file, self.params_file,
                                          self._single_options if single else self.options, self.inputs)
                    if not single:
                        self.config = config
                    self._roots[single] = self._create(config)
                    predictor = self._roots[single]
                else:
                    predictor = self._roots[single].clone()     # the weights are shared
                bound = (predictor, [predictor.get_input_handle(s.name) for s in self.inputs],
                         [predictor.get_output_handle(n) for n in predictor.get_output_names()])
        try:
            yield bound
        finally:
            with self._lock:
                if len(self._idle[single]) < MAX_IDLE:
                    self._idle[single].append(bound)

    # -------------------------------------------------------------------- run
    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Run one batch; ``feeds`` maps each input name to an array."""
        missing = [s.name for s in self.inputs if s.name not in feeds]
        if missing:
            raise KeyError(f"missing feed(s) {missing}; the network takes {[s.name for s in self.inputs]}")
        if not self.options.static:
            return self._run_dynamic(feeds)
        rows = max((np.shape(feeds[spec.name])[0] for spec in self.inputs if np.ndim(feeds[spec.name])), default=1)
        arrays = [np.ascontiguousarray(feeds[spec.name], dtype=spec.dtype) for spec in self.inputs]
        small = rows <= self._plain_rows
        padded = self._paddable and not small and arrays[0].ndim == 2
        if padded:
            (spec,), (array,) = self.inputs, arrays
            length, shape = array.shape[1], bucket_shape(rows, array.shape[1], spec.max_shape[1])
            if shape != array.shape:
                arrays = [np.full(shape, spec.pad_id, dtype=array.dtype)]
                arrays[0][:rows, :length] = array
                arrays[0][rows:, :length] = array[-1]  # extra rows repeat the last: an all-padding row attends to nothing
        results = self._run_static(arrays, small=small)
        return [np.ascontiguousarray(out[:rows]) for out in results] if padded else results

    def _run_static(self, arrays: list[np.ndarray], *, small: bool) -> list[np.ndarray]:
        with self._checked_out(small=small) as (predictor, inputs, outputs):
            for array, handle in zip(arrays, inputs):
                handle.reshape(array.shape)
                handle.copy_from_cpu(array)
            predictor.run()
            return [handle.copy_to_cpu() for handle in outputs]

    def _run_dynamic(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        paddle = self._paddle
        # The dynamic graph is for debugging; one call at a time keeps it simple and correct.
        with self._lock, dynamic_graph(), paddle_device(self.options.device), paddle.no_grad():
            tensors = [paddle.to_tensor(np.asarray(feeds[s.name], dtype=s.dtype)) for s in self.inputs]
            outputs = self._network(*tensors)
            if not isinstance(outputs, (list, tuple)):
                outputs = [outputs]
            return [out.numpy() for out in outputs]
