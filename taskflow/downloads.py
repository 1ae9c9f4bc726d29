"""Downloads of model files from a static file server (``$PPNLP_ENDPOINT``).

:func:`download_file` streams one file into a temporary name beside its destination, resumes a
dropped connection with an HTTP Range request, retries transient errors with backoff, checks the
sha256 the manifest pins and only then renames the file into place, under a lock shared by every
process that fetches it.  Credentials in the endpoint's address never appear in a message or a log
(:func:`redact`).  Which files to fetch, and where they go, is :mod:`taskflow.packages`' business.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import Callable
from urllib.parse import unquote, urlsplit

from .errors import ChecksumError, DownloadError
from .files import home_dir, move_into_place, remove_stale_temps, sha256_file, temporary_beside

__all__ = ["endpoint", "redact", "download_lock", "download_file"]

logger = logging.getLogger("taskflow")

def endpoint() -> str | None:
    """Base URL of the static file server that hosts model packages (as set: it may carry a
    user and password, which :func:`redact` strips from anything shown), checked: an address
    that is not ``http(s)://host[:port]/...`` is a :class:`DownloadError` saying why."""
    raw = os.environ.get("PPNLP_ENDPOINT", "").strip()
    value = raw.rstrip("/")
    if not value:
        return None
    if value.endswith(":") and raw.endswith("//"):   # "http://": the scheme and no host, not a scheme "http:"
        value = raw
    try:
        parts = urlsplit(value)
        port_ok = parts.port != 0   # reading .port raises for a port that is not 0 to 65535
        problem = None
    except ValueError as exc:
        problem = "its port is not a number from 1 to 65535" if "Port" in str(exc) else f"it cannot be parsed ({exc})"
    if problem is None:
        if "://" not in value or parts.scheme not in ("http", "https"):
            problem = ("the scheme must be http:// or https://"
                       + (f", not {parts.scheme}://" if "://" in value and parts.scheme else ""))
        elif not parts.hostname:
            problem = "it names no host"
        elif not port_ok:
            problem = "its port is not a number from 1 to 65535"
    if problem:
        shown = redact(value)
        raise DownloadError(f"PPNLP_ENDPOINT {shown!r} is not a usable address: {_scrub(problem, value)}; set it to "
                            "the base URL of a server laid out by `taskflow pack`, e.g. https://models.example.com/taskflow",
                            url=shown)
    return value


def _userinfo(url: str) -> str:
    """The ``user:password`` of ``url`` ('' if none), found without parsing it (it may not parse)."""
    netloc = re.split(r"[/?#]", url.split("://", 1)[-1], maxsplit=1)[0]
    return netloc.rpartition("@")[0]


def redact(url: str) -> str:
    """``url`` without the ``user:password@`` part, for messages and logs."""
    userinfo = _userinfo(url)
    return url.replace(userinfo + "@", "", 1) if userinfo else url


def _scrub(text: str, url: str) -> str:
    """``text`` (an error message that may quote ``url``) with ``url``'s credentials removed."""
    userinfo = _userinfo(url)
    if not userinfo:
        return text
    text = text.replace(url, redact(url)).replace(userinfo + "@", "")
    password = userinfo.partition(":")[2]
    for secret in sorted({userinfo, password, unquote(password)}, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


# ------------------------------------------------------------------ downloads

_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
# Endpoints already warned about in this process: {(what, scheme://host:port)}.
_WARNED: set[tuple[str, str]] = set()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


def _warn_once(what: str, url: str, message: str) -> None:
    key = (what, _origin(url))
    if key not in _WARNED:
        _WARNED.add(key)
        logger.warning(message)


def _check_transport(requested: str, final: str) -> None:
    """Warn (once per endpoint) about plain HTTP and about a redirect to another host. The sha256
    pinned by the manifest still guards the bytes; the warning is for what else travels in the
    clear or goes elsewhere (the request itself, credentials in PPNLP_ENDPOINT)."""
    if urlsplit(final).scheme == "http":
        _warn_once("http", final, f"downloading over plain http from {_origin(final)}: the files are checked by "
                                  "sha256, but the traffic is readable on the way; prefer an https:// PPNLP_ENDPOINT")
    asked, got = urlsplit(requested), urlsplit(final)
    if (asked.hostname, asked.port) != (got.hostname, got.port):
        _warn_once("redirect", requested, f"{_origin(requested)} redirected the download to another host, "
                                          f"{_origin(final)}")



def download_lock(home: Path, key: str):
    """The lock every process takes to fetch the file ``key`` names (a ``filelock`` lock).

    Locks live under the cache home, outside the model directories (so a failed download leaves
    those clean), never in a shared temporary folder where another user could plant a symlink."""
    from filelock import FileLock

    lock_dir = home / "taskflow" / ".locks"
    lock_dir.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_dir / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"))


def download_file(
    url: str,
    dest: str | os.PathLike,
    *,
    sha256: str,
    size: int | None = None,
    lock=None,
    retries: int = 4,
    backoff: float = 0.5,
    timeout: float = 30.0,
    progress: bool | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Path:
    """Fetch ``url`` into ``dest`` and check its sha256; safe across processes.

    Streams into a process-unique temporary file next to ``dest``; a dropped
    connection is resumed with an HTTP Range request (or restarted when the
    server ignores ranges), transient errors are retried with exponential
    backoff, and only a file whose hash matches is synced and moved into place
    with ``os.replace``.  With ``size``, a server that sends more bytes than that is
    cut off at once (:class:`ChecksumError`), so an endless answer cannot fill
    the disk.  ``lock`` (a ``filelock`` lock; by default one under the cache
    home) makes a second process wait and then find the file already there
    instead of downloading it again.  Credentials in ``url`` never appear in an
    error message.
    """
    import requests

    from .display import progress_bar

    dest = Path(dest)
    if lock is None:
        try:
            lock = download_lock(home_dir(), str(dest.resolve()))
        except OSError:   # no writable cache home: beside the file, in a folder this download writes anyway
            from filelock import FileLock

            dest.parent.mkdir(parents=True, exist_ok=True)
            lock = FileLock(str(dest.with_name(f".{dest.name}.lock")))
    shown = redact(url)
    with lock:
        remove_stale_temps(dest)
        if dest.is_file() and (size is None or dest.stat().st_size == size) and sha256_file(dest) == sha256:
            return dest
        created_dir = not dest.parent.exists()  # only a folder we made is removed on failure
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with temporary_beside(dest) as tmp:
                with requests.Session() as session, progress_bar(
                    total=size, unit="B", unit_scale=True, unit_divisor=1024,
                    desc=dest.name, disable=None if progress is None else not progress, leave=False,
                ) as bar:
                    _stream_with_retries(session, url, tmp, size, bar, retries, backoff, timeout, sleep)
                actual = sha256_file(tmp)
                if actual != sha256:
                    raise ChecksumError(
                        f"{shown} has sha256 {actual}, expected {sha256}: the file on the server differs from "
                        "the one this taskflow version pins; nothing was written to the cache",
                        url=shown,
                    )
                move_into_place(tmp, dest)
        finally:
            if created_dir and not dest.exists():
                _remove_empty_dirs(dest.parent)
    return dest


def _remove_empty_dirs(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def _stream_with_retries(session, url, tmp: Path, size, bar, retries, backoff, timeout, sleep) -> None:
    import requests

    shown = redact(url)

    def too_long(got: int) -> ChecksumError:
        return ChecksumError(f"GET {shown} sent more than the {size} bytes its manifest pins ({got} so far); "
                             "stopped: the server holds another file, check PPNLP_ENDPOINT", url=shown)

    last_error: Exception | None = None
    for attempt in range(retries + 1):
        if attempt:
            delay = backoff * 2 ** (attempt - 1)
            # Said as it happens: a stalled server otherwise keeps a script waiting minutes without a word.
            logger.warning("%s; trying again in %g s (attempt %d of %d)", last_error, delay, attempt + 1, retries + 1)
            sleep(delay)
        have = tmp.stat().st_size if tmp.exists() else 0
        if size is not None and have >= size:
            if have > size:
                tmp.unlink()
                have = 0
            else:
                return
        headers = {"Range": f"bytes={have}-"} if have else {}
        try:
            with session.get(url, stream=True, timeout=timeout, headers=headers) as response:
                _check_transport(url, response.url)
                status = response.status_code
                if status in _RETRY_STATUS:
                    last_error = DownloadError(f"GET {shown} answered HTTP {status}", url=shown, status=status)
                    continue
                if status >= 400:
                    raise DownloadError(
                        f"GET {shown} answered HTTP {status}"
                        + (": the server has no such file; check PPNLP_ENDPOINT and the model version" if status == 404 else ""),
                        url=shown, status=status,
                    )
                resumed = have and status == 206
                if not resumed:
                    have = 0
                announced = response.headers.get("Content-Length", "")
                if size is not None and announced.isdigit() and have + int(announced) > size:
                    raise too_long(have + int(announced))
                bar.reset(total=size)
                bar.update(have)
                got = have
                with open(tmp, "ab" if resumed else "wb") as handle:
                    for block in response.iter_content(chunk_size=1 << 16):
                        got += len(block)
                        if size is not None and got > size:   # no Content-Length, or a wrong one
                            raise too_long(got)
                        handle.write(block)
                        bar.update(len(block))
            got = tmp.stat().st_size
            if size is None or got == size:
                return
            last_error = DownloadError(f"GET {shown} ended after {got} of {size} bytes", url=shown)
        except DownloadError:
            raise
        except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            last_error = DownloadError(f"GET {shown} failed: {_scrub(str(exc), url)}", url=shown)
        except requests.RequestException as exc:
            # Not worth a retry (a redirect loop, a body that is not its Content-Encoding, a URL requests
            # refuses); "from None": requests' own exception quotes the URL with its credentials.
            raise DownloadError(f"GET {shown} failed: {_scrub(str(exc), url)}", url=shown) from None
    raise DownloadError(
        f"giving up on {shown} after {retries + 1} attempts: {last_error}",
        url=shown, status=getattr(last_error, "status", None),
    )
