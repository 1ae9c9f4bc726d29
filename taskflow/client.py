"""``Client``: a served task, called as a ``Taskflow`` is.

>>> from taskflow import Client
>>> senta = Client("http://127.0.0.1:8189", "sentiment_analysis")      # doctest: +SKIP
>>> senta(["这家酒店很干净"], return_all_scores=True)                   # doctest: +SKIP
[{'text': '这家酒店很干净', 'label': 'positive', 'score': 0.9..., 'scores': {...}}]

One result per input, in order; the server's typed errors are raised as the same classes
(``InvalidInputError`` with its ``index``, ``OptionError`` with its ``option``...); a full queue
(429) or a loading or stopping server (503) is retried with backoff, honouring ``Retry-After``.
"""

from __future__ import annotations

import re
import time
from typing import Any

from . import errors
from .errors import ServerError, UnknownTaskError

__all__ = ["Client"]


class Client:
    """Calls ``POST {url}/v1/{task}``; ``api_key`` is sent as a bearer token."""

    def __init__(self, url: str, task: str, *, api_key: str | None = None, timeout: float = 120.0,
                 retries: int = 5, backoff: float = 0.25):
        import requests

        self.url, self.task = url.rstrip("/"), task
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self.session = requests.Session()
        self.session.trust_env = False     # a server named by its address is reached directly, never via a proxy
        if api_key is not None:
            self.session.headers["Authorization"] = f"Bearer {api_key}"

    def __call__(self, inputs: Any, *, on_error: str = "raise", **parameters: Any) -> list:
        if isinstance(inputs, (str, dict)) or (isinstance(inputs, tuple) and all(isinstance(x, str) for x in inputs)):
            inputs = [inputs]
        body = {"inputs": list(inputs), "parameters": parameters, "on_error": on_error}
        return self._post(f"{self.url}/v1/{self.task}", body)["results"]

    def describe(self) -> dict:
        """What the server says of this route (``GET /v1/tasks``): its task, model, version, the
        model's fingerprint, the options it was started with, its call-time parameters and limits."""
        served = self._post(f"{self.url}/v1/tasks", None)["tasks"]
        for route in served:
            if route.get("route") == self.task:
                return route
        names = ", ".join(str(route.get("route")) for route in served) or "none"
        raise UnknownTaskError(f"{self.url} serves no task {self.task!r}; it serves: {names} (GET /v1/tasks)")

    def _post(self, url: str, body: dict | None) -> dict:
        """The JSON answer to a POST of ``body`` (``None``: a GET), retried as the class says."""
        import requests

        for attempt in range(self.retries + 1):
            try:
                if body is None:
                    response = self.session.get(url, timeout=self.timeout)
                else:
                    response = self.session.post(url, json=body, timeout=self.timeout)
            except requests.RequestException as exc:
                if attempt == self.retries:
                    raise ServerError(f"{url}: no answer ({self._why(exc)}); is `taskflow serve` running there?",
                                      None) from None
                time.sleep(self.backoff * 2 ** attempt)
                continue
            if response.status_code in (429, 503) and attempt < self.retries:
                time.sleep(_retry_after(response, self.backoff * 2 ** attempt))
                continue
            if response.status_code == 200:
                return response.json()
            raise _raised(url, response)
        raise AssertionError("unreachable")

    def _why(self, exc) -> str:
        """Why a request got no answer, in a few words: the OS's reason ("Connection refused"), not
        the chain of urllib3's wrappers around it."""
        import requests

        if isinstance(exc, requests.Timeout):
            return f"{type(exc).__name__}: nothing within {self.timeout:g} s"
        reasons = re.findall(r"\[Errno -?\d+\] ([^'\"()]+)", str(exc))
        return f"{type(exc).__name__}: {reasons[-1].strip()}" if reasons else f"{type(exc).__name__}: {exc}"


def _retry_after(response, fallback: float) -> float:
    try:
        return min(30.0, max(fallback, float(response.headers.get("Retry-After", fallback))))
    except ValueError:
        return fallback


def _raised(url: str, response) -> Exception:
    """The error the server's JSON names, as its taskflow class where it is one of ours."""
    try:
        error = response.json()["error"]
        kind, message = error["type"], error["message"]
    except (ValueError, KeyError, TypeError):
        return ServerError(f"{url}: HTTP {response.status_code}: {response.text[:200]}", response.status_code)
    cls = getattr(errors, kind, None)
    if isinstance(cls, type) and issubclass(cls, errors.TaskflowError) and cls is not ServerError:
        if issubclass(cls, (errors.InvalidInputError, errors.InputTypeError)):
            return cls(message, error.get("index"))
        if issubclass(cls, errors.OptionError):
            return cls(message, error.get("option"))
        try:
            return cls(message)
        except TypeError:
            pass
    return ServerError(f"{url}: HTTP {response.status_code} {kind}: {message}", response.status_code)
