"""Running a network: static-graph export and Paddle Inference.

The dynamic-graph network (a ``paddle.nn.Layer``) is exported once per model
weights and Paddle IR format into the cache (``.json`` under Paddle 3's PIR,
``.pdmodel`` under Paddle 2), then served by a Paddle Inference predictor.
Every setting lives on the :class:`Predictor`; nothing here changes Paddle's
global state except inside context managers that restore it, and the one
environment variable :func:`mkl_cpu_type` sets on AMD CPUs before Paddle loads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import stat
import tempfile
import threading
import uuid
import warnings
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from .errors import DeviceError, ExportError, OptionError, PaddleNotInstalledError, TaskflowError
from .packages import sha256_file

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


def _prefer_mkl_avx2() -> None:
    """Set ``MKL_DEBUG_CPU_TYPE`` as :func:`mkl_cpu_type` says (Linux; elsewhere nothing)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    value = mkl_cpu_type(cpuinfo, os.environ)
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
    FP32 = "fp32"
    FP16 = "fp16"


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
    """One network input: its feed name, dtype, and the largest shape TensorRT should plan for."""

    name: str
    dtype: str = "int64"
    max_shape: tuple[int, ...] = (64, 512)


@dataclass(frozen=True)
class PredictorOptions:
    """Everything that decides how a network runs.

    ``num_threads`` defaults to the number of cores; ``gpu_memory_mb`` is the
    initial size of Paddle's GPU memory pool; ``tensorrt`` turns on Paddle-TRT
    subgraphs (GPU only); ``static=False`` runs the dynamic graph instead of
    the exported one, for debugging.
    """

    device: Device = field(default_factory=Device)
    precision: Precision = Precision.FP32
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
            raise DeviceError(f"precision must be one of 'fp32', 'fp16'; got {self.precision!r}", "precision") from None
        if self.device.kind == "cpu" and self.precision is Precision.FP16:
            raise DeviceError("precision='fp16' needs device='gpu'; on CPU use precision='fp32'", "precision")
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
    calls.append(("switch_ir_optim", (True,), {}))
    if paddle_major < 3:
        # Paddle 3.3's create_predictor fails on PIR (.json) programs with memory_optim on.
        calls.append(("enable_memory_optim", (), {}))
    calls.append(("disable_glog_info", (), {}))
    return calls


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


# ------------------------------------------------------- export folders, stamps
# An export folder holds what paddle.jit.save wrote and a stamp: the full key the folder is named
# by (its name shows 16 hex digits of it), the sha256 of each file the network was built from (its
# weights: the bytes it read, which the model checked as it read them) and each exported file's
# sha256.  An export is used only when its stamp names the key and the sources asked for and every
# file still matches, so a folder written by another package, one made from weights swapped in
# after the package was verified (by a taskflow that did not yet check them as read), a
# half-copied cache or a planted file is exported again, not run.
_STAMP = "export.json"
# Stamps checked by this process: {(folder, key, files' (name, size, mtime, inode))}.
_CHECKED_EXPORTS: set[tuple] = set()


def _write_stamp(folder: Path, key: str, built_from: Mapping[str, str]) -> None:
    files = {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file()}
    (folder / _STAMP).write_text(json.dumps({"key": key, "built_from": dict(built_from), "files": files}, indent=1),
                                 encoding="utf-8")


def _valid_export(folder: Path, key: str, fmt: str, built_from: Mapping[str, str]) -> tuple[Path, Path] | None:
    """``(program, params)`` of the export in ``folder`` if its stamp checks out, else None."""
    model_file, params_file = folder / f"inference.{fmt}", folder / "inference.pdiparams"
    try:
        stamp = json.loads((folder / _STAMP).read_text(encoding="utf-8"))
        files = stamp["files"]
        if stamp["key"] != key or stamp.get("built_from") != dict(built_from) \
                or not {model_file.name, params_file.name} <= set(files):
            return None
        seen = tuple((name, *_identity(folder / name)) for name in sorted(files))
        if (str(folder), key, seen) not in _CHECKED_EXPORTS:
            if any(sha256_file(folder / name) != sha for name, sha in files.items()):
                return None
            _CHECKED_EXPORTS.add((str(folder), key, seen))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return model_file, params_file


def _identity(path: Path) -> tuple[int, int, int]:
    info = os.stat(path, follow_symlinks=False)
    return info.st_size, info.st_mtime_ns, info.st_ino


def _export_lock(folder: Path, name: str):
    from filelock import FileLock

    return FileLock(str(folder / f".{name}.lock"))


_PRIVATE_ROOTS: list[Path] = []


def _private_export_root() -> Path:
    """A folder only this user can write, for exports when the cache cannot take them.

    ``<tmp>/taskflow-static-<uid>`` is kept across processes (so each does not export again), but
    only if it is a real folder (not a symlink) owned by this user with no access for others;
    anyone can create that name first in a shared /tmp.  Otherwise, and where there are no user
    ids, a fresh ``mkdtemp`` folder, removed when the process ends."""
    import atexit

    if _PRIVATE_ROOTS:
        return _PRIVATE_ROOTS[0]
    if hasattr(os, "getuid"):
        shared = Path(tempfile.gettempdir()) / f"taskflow-static-{os.getuid()}"
        try:
            os.mkdir(shared, 0o700)
        except FileExistsError:
            pass
        except OSError:
            shared = None
        if shared is not None:
            info = os.lstat(shared)
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
                _PRIVATE_ROOTS.append(shared)
                return shared
            warnings.warn(f"{shared} is not a private folder of this user (owner uid {info.st_uid}, mode "
                          f"{stat.S_IMODE(info.st_mode):o}); not using it for static-graph exports",
                          RuntimeWarning, stacklevel=5)
    private = Path(tempfile.mkdtemp(prefix="taskflow-static-"))
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    _PRIVATE_ROOTS.append(private)
    return private


# Batches of at most this many rows run without oneDNN (see Predictor).  Plain kernels were faster
# up to 4 rows for the sentiment char CNN and the encoder and oneDNN from 8 (1.4x at 16), but with 4
# a single review cut into more chunks still grew memory; 16 keeps one-text calls flat.
SMALL_BATCH = 16
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
    from it (figures in recipes/sentiment_analysis/NOTES.md).
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
        if self.options.static:
            self.model_file, self.params_file = self._export(Path(export_dir), weights_key)
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
    def _export(self, export_dir: Path, weights_key: str) -> tuple[Path, Path]:
        """The export named by ``weights_key`` in ``export_dir``: reused when its stamp checks out
        (a read-only copied cache included), else made there, else, when ``export_dir`` cannot be
        written, made in a private temporary folder."""
        fmt = _ir_format(self._paddle)
        name = f"{fmt}-{weights_key[:16]}"
        found = _valid_export(export_dir / name, weights_key, fmt, self._built_from)
        if found:
            return found
        try:
            export_dir.mkdir(parents=True, exist_ok=True)
            lock = _export_lock(export_dir, name)
            lock.acquire()
        except OSError as exc:
            fallback = _private_export_root()
            warnings.warn(
                f"cannot write the static-graph export under {export_dir} ({exc.strerror or exc}); "
                f"using {fallback} instead. Set PPNLP_HOME (or home=) to a writable directory to keep it.",
                RuntimeWarning, stacklevel=4,
            )
            export_dir, lock = fallback, _export_lock(fallback, name)
            lock.acquire()
        try:
            return (_valid_export(export_dir / name, weights_key, fmt, self._built_from)
                    or self._write_export(export_dir, name, weights_key, fmt))
        finally:
            lock.release()

    def _write_export(self, export_dir: Path, name: str, weights_key: str, fmt: str) -> tuple[Path, Path]:
        paddle = self._paddle
        target = export_dir / name
        staging = export_dir / f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        native_log = _NativeStderr()
        try:
            with dynamic_graph(), paddle_device(Device("cpu")), native_log:
                network = self._build_network()
                spec = [paddle.static.InputSpec([None] * len(s.max_shape), s.dtype, name=s.name) for s in self.inputs]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    static = paddle.jit.to_static(network, input_spec=spec, full_graph=True)
                    paddle.jit.save(static, str(staging / "inference"))
            if not (staging / f"inference.{fmt}").is_file():
                raise ExportError(f"paddle.jit.save wrote {sorted(os.listdir(staging))}, expected inference.{fmt}")
            _write_stamp(staging, weights_key, self._built_from)
            # A directory rename is atomic: readers see no export or a whole one.
            shutil.rmtree(target, ignore_errors=True)
            os.replace(staging, target)
        except TaskflowError:   # said already (weights that do not fit, or changed since they were verified)
            raise
        except Exception as exc:
            said = f"; Paddle said: {native_log.text[-2000:]}" if native_log.text.strip() else ""
            raise ExportError(f"could not export the network to a static graph in {export_dir}: {exc}{said}") from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        found = _valid_export(target, weights_key, fmt, self._built_from)
        if not found:
            raise ExportError(f"the static export in {target} changed while it was written; run again")
        return found

    @staticmethod
    def _create(config):
        from paddle import inference

        return inference.create_predictor(config)

    @contextlib.contextmanager
    def _checked_out(self, small: bool):
        """An idle predictor for batches of at most SMALL_BATCH rows (``small``) or for the others,
        with its input handles (in ``self.inputs``' order) and output handles, held for one run: a
        handle stays bound to its tensor, so each is asked for once, not at every run."""
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
        with self._checked_out(small=rows <= SMALL_BATCH) as (predictor, inputs, outputs):
            for spec, handle in zip(self.inputs, inputs):
                array = np.ascontiguousarray(feeds[spec.name], dtype=spec.dtype)
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


# ------------------------------------------------------------- weights format
# Weights are stored as .npz (no pickle, so loading a downloaded file cannot run
# code), keyed by state_dict name; large embedding tables may be float16 on disk, and a
# frozen one (corpus vectors the training never moves) int8, each row with its scale.

# paddle.nn.GRU / LSTM / SimpleRNN register every weight under two names (``weight_ih_l0`` and
# ``0.cell_fw.weight_ih``, one Parameter object); such a weight is stored once, and this entry
# (a JSON object, second name -> first name) says which names share it.
_ALIASES = "__aliases__"
# An int8 table ``name`` is stored with ``name + _ROW_SCALE`` ([rows, 1] float32): row i is
# ``name[i] * scale[i]``, symmetric round-to-nearest with the row's largest magnitude at 127.  A
# narrow one (at most _NARROW columns: a linear model's per-label n-gram weights, where a float32
# scale per row would outweigh the row) has ``name + _COLUMN_SCALE`` ([1, columns]) instead.
_ROW_SCALE = "@row_scale"
_COLUMN_SCALE = "@column_scale"
_SCALES = (_ROW_SCALE, _COLUMN_SCALE)
_NARROW = 4


def save_weights(network, path: str | os.PathLike, float16: Callable[[str], bool] = lambda name: False,
                 int8: Callable[[str], bool] = lambda name: False) -> None:
    """Save ``network.state_dict()`` to ``path``; names for which ``float16(name)`` is true are halved,
    2-D ones for which ``int8(name)`` is true quartered (int8 with a scale per row, or per column for
    a narrow table, see ``_ROW_SCALE``; for tables where a relative error of ~0.5% of the largest
    value is far below what the network can tell apart, which the caller measures).

    A parameter registered under several names is written once (see ``_ALIASES``).
    """
    from .packages import atomic_write_bytes
    import io

    arrays, first_name, aliases = {}, {}, {}
    for name, tensor in network.state_dict().items():
        owner = first_name.setdefault(id(tensor), name)
        if owner != name:
            aliases[name] = owner
            continue
        array = tensor.numpy()
        if int8(name) and array.ndim == 2 and array.dtype.kind == "f":
            narrow = array.shape[1] <= _NARROW
            arrays[name], arrays[name + (_COLUMN_SCALE if narrow else _ROW_SCALE)] = quantize(array, axis=int(not narrow))
            continue
        arrays[name] = array.astype(np.float16) if float16(name) and array.dtype == np.float32 else array
    if aliases:
        arrays[_ALIASES] = np.array(json.dumps(aliases, sort_keys=True))
    buffer = io.BytesIO()
    # Compressed: a package's size is budgeted (15 MB for a fast one) and float16 tables deflate by
    # ~8%; reading a 13 MB file takes 60 ms longer.  load_weights checks every member's shape from
    # its header first, so no member can inflate past what the network holds.
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


def quantize(array: np.ndarray, axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``(int8 values, float32 scales)`` with ``values * scales`` ~ ``array``: one scale per row
    (``axis=1``, scales [rows, 1]) or per column (``axis=0``, scales [1, columns])."""
    array = np.asarray(array, dtype=np.float32)
    scales = np.abs(array).max(axis=axis, keepdims=True) / 127.0
    safe = np.where(scales > 0, scales, 1.0)
    return np.clip(np.rint(array / safe), -127, 127).astype(np.int8), scales.astype(np.float32)


_MAX_ALIASES_BYTES = 1 << 22   # the alias table is a few KB of JSON; more is not one save_weights wrote


def npz_headers(path: str | os.PathLike, data: bytes | None = None) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each array's ``(shape, dtype)`` in an .npz, read from the .npy headers of its zip members
    without loading (or decompressing) any array, so a file can be judged before memory is spent.
    ``data``: the file's bytes, already read (``path`` then only names it in messages)."""
    import io
    import zipfile

    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    headers = {}
    try:
        with zipfile.ZipFile(path if data is None else io.BytesIO(data)) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version not in readers:
                        raise ValueError(f"member {info.filename!r} has .npy format {version}")
                    shape, _, dtype = readers[version](member)
                headers[info.filename.removesuffix(".npy")] = (tuple(shape), dtype)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ExportError(f"{path} is not a weights file written by save_weights ({exc})") from None
    return headers


def load_weights(network, path: str | os.PathLike, data: bytes | None = None) -> None:
    """Load an .npz written by :func:`save_weights` into ``network``; every name, shape and dtype
    must fit, and all are checked from the arrays' headers before any array is read.  ``data``:
    the file's bytes, already read and checked by the caller (``path`` then only names it)."""
    import io

    paddle = import_paddle()
    expected = network.state_dict()
    headers = npz_headers(path, data)
    if _ALIASES in headers:
        shape, dtype = headers[_ALIASES]
        if shape != () or dtype.kind != "U" or dtype.itemsize > _MAX_ALIASES_BYTES:
            raise ExportError(f"{path}: {_ALIASES} is {dtype} of shape {shape}, not the short JSON text save_weights writes")
    scaled = {}     # int8 table -> the name of its scales
    for stored_name in headers:
        for suffix in _SCALES:
            if stored_name.endswith(suffix):
                name = stored_name.removesuffix(suffix)
                if name in scaled:
                    raise ExportError(f"{path}: {name} has scales twice ({scaled[name]}, {stored_name})")
                scaled[name] = stored_name
    for name, scale_name in scaled.items():
        table = headers.get(name, ((0, 0), None))[0]
        expected_shape = (table[0], 1) if scale_name.endswith(_ROW_SCALE) else (1, table[-1])
        shape, dtype = headers[scale_name]
        if name not in headers or headers[name][1] != np.int8 or len(table) != 2 or shape != expected_shape \
                or dtype != np.float32:
            raise ExportError(f"{path}: {scale_name} is {dtype} of shape {shape}, not the float32 "
                              f"{list(expected_shape)} scales of an int8 table {name} that save_weights writes")
    with np.load(path if data is None else io.BytesIO(data), allow_pickle=False) as stored:
        aliases = json.loads(str(stored[_ALIASES])) if _ALIASES in headers else {}
        available = (set(headers) - {_ALIASES} - set(scaled.values())) | set(aliases)
        missing = sorted(set(expected) - available)
        unexpected = sorted(available - set(expected))
        if missing or unexpected:
            raise ExportError(f"{path} does not fit the network: missing {missing}, unexpected {unexpected}")
        for name, tensor in expected.items():
            if aliases.get(name, name) not in headers:
                raise ExportError(f"{path}: {name} is stored as {aliases[name]!r}, which the file does not hold")
            shape, dtype = headers[aliases.get(name, name)]
            if shape != tuple(tensor.shape):
                raise ExportError(f"{path}: {name} has shape {shape}, the network expects {tuple(tensor.shape)}")
            if dtype.kind not in "biuf":
                raise ExportError(f"{path}: {name} holds {dtype}, not numbers")
            if dtype == np.int8 and aliases.get(name, name) not in scaled and tensor.numpy().dtype.kind == "f":
                raise ExportError(f"{path}: {name} is stored as int8 without its scales; "
                                  "re-save it with save_weights")
        state = {}
        for name, tensor in expected.items():
            stored_name = aliases.get(name, name)
            array = stored[stored_name]
            if stored_name in scaled:
                array = array.astype(np.float32) * stored[scaled[stored_name]]
            state[name] = paddle.to_tensor(array.astype(str(tensor.numpy().dtype)))
    network.set_state_dict(state)
