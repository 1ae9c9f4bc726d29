"""Ensembles: a package's own network and the packages it names, run together and mixed.

A manifest may name an ``ensemble``: roles of its ``requires`` whose networks run beside the
package's own on the same input.  Two more fields say how they mix:

* ``ensemble_weights``: one positive number per network, the package's own first, then each of its
  ``ensemble`` in order (tuned on a selection set); equal weights without it;
* ``ensemble_mixing``: ``"arithmetic"`` (the default: the weighted mean of the probabilities) or
  ``"geometric"`` (the softmax of the weighted mean of their logarithms: a member sure of a label
  counts for more than its weight).

Or, instead of weights, ``ensemble_router``: a role of its ``requires`` that is a classifier whose
labels, in order, stand for the networks (the package's own, then each of its ``ensemble``).  Each
input runs through the router and then through the one network of its most probable label only, so
an input costs one network (and the router) however many there are: a mixture of experts with a hard
gate, for networks that are each best on a genre of their own.  Only a task that says it can route
(text_classification, sentiment_analysis) accepts one.  With a router, ``ensemble_routes`` may say
more: one entry per router label,

* ``weights``: one number >= 0 per network (as ``ensemble_weights``): the inputs sent that way get
  the mix (``ensemble_mixing``) of the networks weighted above 0, and no other network reads them;
* ``first`` and ``confident`` (optional): the index of one of those networks, asked first; where its
  most probable label reaches ``confident``, its answer stands and the route's other networks do
  not run (a cascade: an expensive network reads only what a cheap one is unsure of).

Without ``ensemble_routes``, label k sends its inputs to network k alone.

A member may know fewer labels than the package (sentiment's two-label networks beside the
three-label one that can say "neutral"): its row is NaN on the labels it lacks, and a mix with such
a member is a mix of what each network knows (:func:`mix_rows`): the labels only some networks know
take their probability from those networks alone, and the rest of the probability is shared among
the other labels by the mix of every network's probabilities among them.

:class:`Ensemble` holds the networks (each built by the task's own class for one network), puts
their feeds in one batch (a member's named ``role/name``), runs each on its feeds and mixes their
probabilities.  A task keeps only what its networks read and output; ``ensemble=False`` (every
mixing task's option) builds an ensemble of the package's own network alone.

>>> mix(np.array([[0.9, 0.1], [0.4, 0.6]]), [0.5, 0.5]).round(3).tolist()
[0.65, 0.35]
>>> mix(np.array([[0.9, 0.1], [0.4, 0.6]]), [0.5, 0.5], "geometric").round(3).tolist()
[0.71, 0.29]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

import numpy as np

from .errors import ManifestError

__all__ = ["Ensemble", "MIXINGS", "Route", "mix", "mix_rows", "softmax", "member_feeds", "feeds_of", "ensemble_weights",
           "ensemble_mixing", "ensemble_router", "ensemble_routes"]

MIXINGS = ("arithmetic", "geometric")

Network = TypeVar("Network")


def member_feeds(role: str, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """An ensemble member's feeds named ``role/name``, so that they travel in one batch beside the
    package's own (a network's feed names are its arguments, the same in every member)."""
    return {f"{role}/{name}": value for name, value in feeds.items()}


def feeds_of(features: Mapping[str, Any], role: str = "") -> dict[str, Any]:
    """The feeds of the network ``role`` names ("" for the package's own) in a batch that
    :func:`member_feeds` filled."""
    prefix = f"{role}/" if role else ""
    return {name[len(prefix):]: value for name, value in features.items()
            if name.startswith(prefix) and "/" not in name[len(prefix):]}


def ensemble_weights(manifest, networks: int) -> list[float] | None:
    """The manifest's ``ensemble_weights``, normalised to sum to 1; None (equal weights) if absent."""
    weights = manifest.get("ensemble_weights")
    if weights is None:
        return None
    numbers_ = isinstance(weights, list) and all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights)
    if not numbers_ or len(weights) != networks or not all(math.isfinite(w) and w > 0 for w in weights):
        raise ManifestError(f"model {manifest.name!r}: ensemble_weights must be {networks} positive numbers, one per "
                            f"network (the package's own, then each of its 'ensemble'); got {weights!r:.80}")
    return [w / sum(weights) for w in weights]


def ensemble_mixing(manifest) -> str:
    """The manifest's ``ensemble_mixing`` ("arithmetic" without the field)."""
    mixing = manifest.get("ensemble_mixing", "arithmetic")
    if mixing not in MIXINGS:
        raise ManifestError(f"model {manifest.name!r}: ensemble_mixing must be one of {list(MIXINGS)}, got "
                            f"{mixing!r:.40}")
    return mixing


def ensemble_router(manifest, networks: int) -> str | None:
    """The manifest's ``ensemble_router`` (a role of its ``requires``), checked against the other
    fields; None without the field."""
    role = manifest.get("ensemble_router")
    if role is None:
        return None
    if not isinstance(role, str) or role not in (manifest.get("requires") or {}):
        raise ManifestError(f"model {manifest.name!r}: ensemble_router must name a role of its 'requires', got "
                            f"{role!r:.40}")
    if networks < 2 or manifest.get("ensemble_weights") is not None:
        raise ManifestError(f"model {manifest.name!r}: ensemble_router sends each input to the networks of one route "
                            "(its 'ensemble' needs one member at least); a routed ensemble's weights are its "
                            "ensemble_routes, not ensemble_weights: remove them, or the router")
    if manifest.get("ensemble_mixing") is not None and manifest.get("ensemble_routes") is None:
        raise ManifestError(f"model {manifest.name!r}: ensemble_mixing mixes the networks of a route; without "
                            "ensemble_routes each route is one network: remove ensemble_mixing, or add the routes")
    return role


@dataclass(frozen=True)
class Route:
    """Where a router label sends its inputs: ``weights`` (normalised, one per network; 0: the
    network does not read them), and the cascade's ``first`` network and ``confident`` threshold."""

    weights: tuple[float, ...]
    first: int | None = None
    confident: float = 1.0


def ensemble_routes(manifest, networks: int, labels: int) -> list[Route]:
    """The manifest's ``ensemble_routes``, one :class:`Route` per router label (``labels`` of them)
    over ``networks`` networks; without the field, label k to network k alone."""
    entries = manifest.get("ensemble_routes")
    if entries is None:
        return [Route(tuple(float(k == j) for j in range(networks))) for k in range(labels)]

    def bad(why: str) -> ManifestError:
        return ManifestError(f"model {manifest.name!r}: ensemble_routes {why}; it is a list of one "
                             "{\"weights\": [...], \"first\": k, \"confident\": p} per router label, the weights one "
                             f"number >= 0 per network ({networks}: the package's own, then each of its 'ensemble')")

    if not isinstance(entries, list) or len(entries) != labels:
        raise bad(f"must have {labels} entries, one per router label")
    routes = []
    for entry in entries:
        weights = entry.get("weights") if isinstance(entry, dict) else None
        if not (isinstance(weights, list) and len(weights) == networks and all(
                isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0 for w in weights)
                and sum(weights) > 0):
            raise bad(f"has an entry whose weights are not {networks} numbers >= 0 with a positive sum: {entry!r:.80}")
        first, confident = entry.get("first"), entry.get("confident", 1.0)
        if first is not None and not (isinstance(first, int) and not isinstance(first, bool) and 0 <= first < networks
                                      and weights[first] > 0):
            raise bad(f"has a 'first' that is not the index of a network the route weighs above 0: {first!r:.20}")
        if isinstance(confident, bool) or not isinstance(confident, (int, float)) or not 0 < confident <= 1:
            raise bad(f"has a 'confident' that is not a probability in (0, 1]: {confident!r:.20}")
        routes.append(Route(tuple(w / sum(weights) for w in weights), first, float(confident)))
    return routes


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax along the last axis (shifted by the row's largest logit, so exp cannot overflow)."""
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def _weighted(probabilities: np.ndarray, weights: np.ndarray, mixing: str) -> np.ndarray:
    """[networks, rows, labels] (no NaN) and [rows, networks] weights summing to 1 -> [rows, labels]."""
    weighted = weights.T[..., None]
    if mixing == "arithmetic":
        return (weighted * probabilities).sum(axis=0)
    return softmax((weighted * np.log(np.clip(probabilities, 1e-12, 1.0))).sum(axis=0))


def mix_rows(probabilities: np.ndarray, weights: np.ndarray, mixing: str = "arithmetic") -> np.ndarray:
    """[networks, rows, labels] probabilities and [rows, networks] weights (each row its own; a
    network weighted 0 may be NaN there) -> [rows, labels], as :func:`mix` row by row.

    A network weighted above 0 that is NaN on some labels does not know them (a member with fewer
    labels than the package).  Those labels get the mix of the networks that know every label
    (their weights renormalised: at least one must); each remaining label gets the rest of the
    probability in proportion to the mix of every weighted network's probabilities among the
    remaining labels (each network's renormalised over them).

    >>> full, polar = [[0.2, 0.2, 0.6]], [[0.9, 0.1, np.nan]]
    >>> mix_rows(np.array([full, polar]), np.array([[0.5, 0.5]])).round(3).tolist()
    [[0.28, 0.12, 0.6]]
    """
    weights = np.asarray(weights, dtype=np.float64)
    weights = weights / weights.sum(axis=1, keepdims=True)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    unknown = np.isnan(probabilities) & (weights.T[..., None] > 0)     # [networks, rows, labels]
    probabilities = np.nan_to_num(probabilities, nan=1.0)
    if not unknown.any():
        return _weighted(probabilities, weights, mixing)
    out = np.empty(probabilities.shape[1:])
    for row in range(probabilities.shape[1]):
        w, p, lacks = weights[row], probabilities[:, row], unknown[:, row]
        partial = lacks.any(axis=1)                     # networks that lack some label here
        known = ~lacks.any(axis=0)                      # labels every weighted network knows
        full = (w > 0) & ~partial
        if not full.any():
            raise ValueError("an ensemble row whose weighted networks all lack a label: no network gives its "
                             "probability (weigh a network that knows every label above 0 on every route)")
        whole = _weighted(p[full][:, None], (w[full] / w[full].sum())[None], mixing)[0]
        used = w > 0
        shares = p[used][:, known] / p[used][:, known].sum(axis=1, keepdims=True)
        among = _weighted(shares[:, None], (w[used] / w[used].sum())[None], mixing)[0]
        out[row] = np.where(known, 0.0, whole)
        out[row, known] = whole[known].sum() * among
    return out


def mix(probabilities: np.ndarray, weights: Sequence[float] | None, mixing: str = "arithmetic") -> np.ndarray:
    """[networks, ..., labels] probabilities -> [..., labels]: their weighted mean
    (``"arithmetic"``), or the softmax of their logarithms' weighted mean (``"geometric"``); NaN
    on the labels a network does not know, mixed as :func:`mix_rows` says."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if np.isnan(probabilities).any():
        rows = probabilities.reshape(len(probabilities), -1, probabilities.shape[-1])
        each = np.ones(len(probabilities)) if weights is None else np.asarray(weights, dtype=np.float64)
        return mix_rows(rows, np.tile(each, (rows.shape[1], 1)), mixing).reshape(probabilities.shape[1:])
    if mixing == "arithmetic":
        return np.average(probabilities, axis=0, weights=weights)
    return softmax(np.average(np.log(np.clip(probabilities, 1e-12, 1.0)), axis=0, weights=weights))


class Ensemble(Generic[Network]):
    """The package's own network, then one per member its manifest's ``ensemble`` names, and the
    router that sends each input to one of them where the manifest names an ``ensemble_router``.

    ``network(model, role)`` builds the task's object for one network (its vocabulary, how it
    reads the input, its feeds); ``role`` is "" for the package's own.  ``routes``: the task can
    route (its outputs are rows of label probabilities, and it runs a routed batch with
    :meth:`route`, :meth:`routed_reads` and :meth:`mix_routed`); a router in any other task's package is an error.
    """

    def __init__(self, model, network: Callable[[Any, str], Network], *, members: bool = True, routes: bool = False):
        chosen = [("", model)] + (list(model.ensemble()) if members else [])
        self.roles = [role for role, _ in chosen]
        self.models = [member for _, member in chosen]
        self.networks: list[Network] = [network(member, role) for role, member in chosen]
        router_role = ensemble_router(model.manifest, len(chosen)) if members else None
        self.router: Network | None = None
        self.routes: list[Route] = []      # one per router label
        if router_role is not None:
            if not routes:
                raise ManifestError(f"model {model.name!r}: its task cannot route between networks; remove "
                                    "ensemble_router from the manifest")
            router_model = model.required(router_role)
            if model.manifest.get("ensemble_routes") is None and len(router_model.labels) != len(chosen):
                raise ManifestError(f"model {model.name!r}: its ensemble_router {router_model.name!r} has "
                                    f"{len(router_model.labels)} labels; it needs one per network ({len(chosen)}: "
                                    "the package's own, then each of its 'ensemble'), or ensemble_routes")
            self.models.append(router_model)
            self.router = network(router_model, router_role)
            self.routes = ensemble_routes(model.manifest, len(chosen), len(router_model.labels))
            # Per router label, as arrays a routed batch indexes by each row's route (_route_fields).
            self._routes_table = (np.array([route.weights for route in self.routes], dtype=np.float64),
                                  np.array([-1 if route.first is None else route.first for route in self.routes]),
                                  np.array([route.confident for route in self.routes], dtype=np.float64))
        self.weights = ensemble_weights(model.manifest, len(chosen)) if len(chosen) > 1 and not self.router else None
        self.mixing = ensemble_mixing(model.manifest)

    def __len__(self) -> int:
        return len(self.networks)

    @property
    def members(self) -> list[tuple[str, Network]]:
        """``(role, network)`` of each member, in the manifest's order."""
        return list(zip(self.roles[1:], self.networks[1:]))

    def feeds(self, feeds_of_network: Callable[[int, Network], Mapping[str, Any]]) -> dict[str, Any]:
        """One batch: the package's own feeds as they are, each member's named ``role/name``."""
        batch = dict(feeds_of_network(0, self.networks[0]))
        for k in range(1, len(self)):
            batch.update(member_feeds(self.roles[k], feeds_of_network(k, self.networks[k])))
        return batch

    def predictors(self, own, input_specs: Callable[[Network], list]) -> list:
        """``own`` (the package's predictor), then each member's, each exported beside its package;
        the router's last."""
        runs = self.networks[1:] + ([self.router] if self.router is not None else [])
        return [own] + [model.predictor(input_specs(network)) for model, network in zip(self.models[1:], runs)]

    def run(self, features: Mapping[str, Any], predictors: Sequence) -> list[list[np.ndarray]]:
        """Each network's outputs on its own feeds in the batch, the package's own first."""
        if len(self) == 1:
            return [predictors[0].run(features)]
        return [predictor.run(feeds_of(features, role)) for predictor, role in zip(predictors, self.roles)]

    def route(self, router_feeds: Mapping[str, Any], predictors: Sequence) -> np.ndarray:
        """The index of the network the router sends each input of a batch to (``predictors``:
        those of :meth:`predictors`, the router's last)."""
        return np.asarray(predictors[-1].run(router_feeds)[0]).argmax(axis=1)

    def _route_fields(self, choice: np.ndarray):
        """Each row's route's weights, ``first`` network (-1: none) and ``confident`` level."""
        weights, first, confident = self._routes_table
        return weights[choice], first[choice], confident[choice]     # copies: fancy indexing

    def _settled(self, choice: np.ndarray, outputs: Sequence[np.ndarray | None]) -> np.ndarray:
        """The rows whose route's ``first`` network was confident enough for its answer to stand."""
        _, first, confident = self._route_fields(choice)
        settled = np.zeros(len(choice), dtype=bool)
        for k in np.unique(first[first >= 0]):
            rows = np.flatnonzero(first == k)
            if outputs[k] is not None:     # a network that lacks a label (NaN there) never settles a row
                settled[rows] = outputs[k][rows].max(axis=1) >= confident[rows]
        return settled

    def routed_reads(self, choice: np.ndarray, outputs: Sequence[np.ndarray | None] | None = None
                     ) -> dict[int, np.ndarray]:
        """Which rows of a routed batch each network reads (``choice``: each row's route).  Without
        ``outputs``, in the first round: each route's ``first`` network, on its rows (none where no
        route has a first).  Given the first round's ``outputs`` (each network's probabilities, NaN
        on rows it did not read; None for one that read none), in the second: each route's other
        networks, on the rows its first was not confident of."""
        weights, first, _ = self._route_fields(choice)
        if outputs is None:
            return {int(k): np.flatnonzero(first == k) for k in np.unique(first[first >= 0])}
        settled = self._settled(choice, outputs)
        reads = {k: np.flatnonzero((weights[:, k] > 0) & ~settled & (first != k)) for k in range(len(self))}
        return {k: rows for k, rows in reads.items() if rows.size}

    def mix_routed(self, choice: np.ndarray, outputs: Sequence[np.ndarray | None]) -> np.ndarray:
        """Each row's answer in a routed batch: its route's mix of the networks that read it, or the
        ``first`` network's alone where it was confident."""
        weights, first, _ = self._route_fields(choice)
        settled = self._settled(choice, outputs)
        weights[settled] = 0.0
        weights[np.flatnonzero(settled), first[settled]] = 1.0
        labels = next(output.shape[1] for output in outputs if output is not None)
        stacked = np.stack([np.full((len(choice), labels), np.nan) if output is None else output for output in outputs])
        return mix_rows(stacked, weights, self.mixing)

    def mix(self, probabilities) -> np.ndarray:
        """[networks, ..., labels] -> [..., labels], by the manifest's weights and mixing (a routed
        ensemble mixes each input by its route, in :meth:`mix_routed`)."""
        return mix(probabilities, self.weights, self.mixing)
