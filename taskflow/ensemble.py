"""Ensembles: a package's own network and the packages it names, run together and mixed.

A manifest may name an ``ensemble``: roles of its ``requires`` whose networks run beside the
package's own on the same input.  Two more fields say how they mix:

* ``ensemble_weights``: one positive number per network, the package's own first, then each of its
  ``ensemble`` in order (tuned on a selection set); equal weights without it;
* ``ensemble_mixing``: ``"arithmetic"`` (the default: the weighted mean of the probabilities) or
  ``"geometric"`` (the softmax of the weighted mean of their logarithms: a member sure of a label
  counts for more than its weight).

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

__all__ = ["Ensemble", "MIXINGS", "mix", "softmax", "member_feeds", "feeds_of", "ensemble_weights", "ensemble_mixing"]

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
    """The package's own network, then one per member its manifest's ``ensemble`` names.

    ``network(model, role)`` builds the task's object for one network (its vocabulary, how it
    reads the input, its feeds); ``role`` is "" for the package's own.
    """

    def __init__(self, model, network: Callable[[Any, str], Network], *, members: bool = True):
        chosen = [("", model)] + (list(model.ensemble()) if members else [])
        self.roles = [role for role, _ in chosen]
        self.models = [member for _, member in chosen]
        self.networks: list[Network] = [network(member, role) for role, member in chosen]
        self.weights = ensemble_weights(model.manifest, len(chosen)) if len(chosen) > 1 else None
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
        """``own`` (the package's predictor), then each member's, each exported beside its package."""
        return [own] + [member.predictor(input_specs(network))
                        for member, network in zip(self.models[1:], self.networks[1:])]

    def run(self, features: Mapping[str, Any], predictors: Sequence) -> list[list[np.ndarray]]:
        """Each network's outputs on its own feeds in the batch, the package's own first."""
        if len(self) == 1:
            return [predictors[0].run(features)]
        return [predictor.run(feeds_of(features, role)) for predictor, role in zip(predictors, self.roles)]

    def mix(self, probabilities) -> np.ndarray:
        """[networks, ..., labels] -> [..., labels], by the manifest's weights and mixing."""
        return mix(probabilities, self.weights, self.mixing)
