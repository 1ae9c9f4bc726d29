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
(text_classification, sentiment_analysis) accepts one.

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
from typing import Any, Callable, Generic, Mapping, Sequence, TypeVar

import numpy as np

from .errors import ManifestError

__all__ = ["Ensemble", "MIXINGS", "mix", "softmax", "member_feeds", "feeds_of", "ensemble_weights", "ensemble_mixing",
           "ensemble_router"]

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
    if networks < 2 or manifest.get("ensemble_weights") is not None or manifest.get("ensemble_mixing") is not None:
        raise ManifestError(f"model {manifest.name!r}: ensemble_router sends each input to one network of its "
                            "'ensemble' (which needs one member at least); a routed ensemble has no ensemble_weights "
                            "or ensemble_mixing: remove them, or the router")
    return role


def softmax(logits: np.ndarray) -> np.ndarray:
    """softmax along the last axis (shifted by the row's largest logit, so exp cannot overflow)."""
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def mix(probabilities: np.ndarray, weights: Sequence[float] | None, mixing: str = "arithmetic") -> np.ndarray:
    """[networks, ..., labels] probabilities -> [..., labels]: their weighted mean
    (``"arithmetic"``), or the softmax of their logarithms' weighted mean (``"geometric"``)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if mixing == "arithmetic":
        return np.average(probabilities, axis=0, weights=weights)
    return softmax(np.average(np.log(np.clip(probabilities, 1e-12, 1.0)), axis=0, weights=weights))


class Ensemble(Generic[Network]):
    """The package's own network, then one per member its manifest's ``ensemble`` names, and the
    router that sends each input to one of them where the manifest names an ``ensemble_router``.

    ``network(model, role)`` builds the task's object for one network (its vocabulary, how it
    reads the input, its feeds); ``role`` is "" for the package's own.  ``routes``: the task can
    route (its outputs are rows of label probabilities, and it runs a routed batch with
    :meth:`route` and :meth:`run_routed`); a router in any other task's package is an error.
    """

    def __init__(self, model, network: Callable[[Any, str], Network], *, members: bool = True, routes: bool = False):
        chosen = [("", model)] + (list(model.ensemble()) if members else [])
        self.roles = [role for role, _ in chosen]
        self.models = [member for _, member in chosen]
        self.networks: list[Network] = [network(member, role) for role, member in chosen]
        router_role = ensemble_router(model.manifest, len(chosen)) if members else None
        self.router: Network | None = None
        if router_role is not None:
            if not routes:
                raise ManifestError(f"model {model.name!r}: its task cannot route between networks; remove "
                                    "ensemble_router from the manifest")
            router_model = model.required(router_role)
            if len(router_model.labels) != len(chosen):
                raise ManifestError(f"model {model.name!r}: its ensemble_router {router_model.name!r} has "
                                    f"{len(router_model.labels)} labels; it needs one per network ({len(chosen)}: "
                                    "the package's own, then each of its 'ensemble')")
            self.models.append(router_model)
            self.router = network(router_model, router_role)
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

    def run_routed(self, inputs: Sequence, choice: np.ndarray, feeds: Callable[[Network, list], Mapping[str, Any]],
                   predictors: Sequence) -> list[list[np.ndarray] | None]:
        """Each network's outputs on the ``inputs`` that ``choice`` sends it (``feeds(network,
        inputs)`` makes its feeds of just those), put back in the batch's order with NaN on the
        other rows; None for a network no input went to."""
        outputs = []
        for k, (network, predictor) in enumerate(zip(self.networks, predictors)):
            rows = np.flatnonzero(choice == k)
            if not rows.size:
                outputs.append(None)
                continue
            scattered = []
            for output in predictor.run(feeds(network, [inputs[i] for i in rows])):
                output = np.asarray(output, dtype=np.float64)
                full = np.full((len(choice),) + output.shape[1:], np.nan)
                full[rows] = output
                scattered.append(full)
            outputs.append(scattered)
        return outputs

    def mix(self, probabilities) -> np.ndarray:
        """[networks, ..., labels] -> [..., labels], by the manifest's weights and mixing (a routed
        ensemble does not mix: each input has the outputs of the one network it went to)."""
        return mix(probabilities, self.weights, self.mixing)
