"""The weights file format: a package's network weights as an ``.npz``.

No pickle, so loading a downloaded file cannot run code.  Arrays are keyed by ``state_dict``
name; large embedding tables may be float16 on disk, and a frozen one (corpus vectors the
training never moves) int8, each row with its scale.  :func:`load_weights` checks every name,
shape and dtype from the arrays' headers before it reads any array.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from typing import Callable

import numpy as np

from .errors import ExportError
from .files import atomic_write_bytes
from .predictor import import_paddle

__all__ = ["save_weights", "load_weights", "quantize", "npz_headers"]

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
