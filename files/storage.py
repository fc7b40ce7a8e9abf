"""Paths that name objects in a store — s3://, gs://, az://, any protocol fsspec knows — beside local paths.

One place decides what a path is. A plain path, or a file:// URL, is local: files/inputs.py maps it and
files/atomic.py renames over it, as always. Anything else with a scheme is remote and goes through
fsspec, whose backends are optional extras (EXTRAS); a missing one is one line naming the extra.
Credentials and endpoints are each backend's own configuration (for S3: the AWS environment and
files, AWS_ENDPOINT_URL included): nothing here reads them.

Reading: `read_whole` fetches an object in one request (the stages hold a whole transcript anyway);
`RangedObject` is the object as a buffer that fetches only the blocks read, so count reads the
end of a file, and its first lines, not the whole of it. Writing: `replaced` collects an output
and stores it as one object when the block ends without error (a PUT that fails leaves the old
object); `create_new` stores an object only under a name not in use (backups). The stores' errors
— many types, from many libraries — are put into words here, as files/inputs.py does for the OS's.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, BinaryIO, cast

from ..core.errors import CHANGED, IS_A_FOLDER, ChangedMeanwhile, CtxpipeError, InputError

LOCAL_SCHEMES = ("file", "local")
# The optional extra that brings each scheme's backend (pyproject.toml's optional-dependencies).
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure", "adl": "azure"}
# A ranged read fetches whole blocks: small, so that count's tail read fetches little more than
# it parses; a read that walks on from the blocks just fetched (back from the end, or on from
# the start) fetches twice as many at a time, up to MAX_RUN blocks, so a long walk takes few requests.
BLOCK = 64 << 10
MAX_RUN = 64
CACHED_BLOCKS = 256  # 16 MiB of blocks per object held at once (room for more than two runs)
# S3 takes one PUT of up to 5 GB; s3fs uploads in one PUT below two chunks.
S3_SINGLE_PUT = (5 << 30) // 2
# An output is kept in memory up to this size before it is spooled to a temporary file.
SPOOL_BYTES = 64 << 20


class MissingExtra(CtxpipeError):
    """A path needs a backend that is not installed: one error line naming the extra to install."""

    def __init__(self, path: str, scheme: str, extra: str) -> None:
        self.path, self.scheme, self.extra = path, scheme, extra
        super().__init__(f"{path}: {scheme}:// paths need the {extra} extra: pip install 'ctxpipe[{extra}]'")

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str, str]]:
        return (MissingExtra, (self.path, self.scheme, self.extra))


def scheme(path: object) -> str | None:
    """The URL scheme of `path` ("s3", "file", …: RFC 3986's letter, then letters, digits, + . -,
    before "://"), None for a plain path. No regex: the status line's start-up counts in ms."""
    head, separator, _ = str(path).partition("://")
    if not separator or not head or not head[0].isalpha() or not head.isascii():
        return None
    return head.lower() if all(char.isalnum() or char in "+.-" for char in head) else None


def is_remote(path: object) -> bool:
    """Whether `path` names an object in a store (a scheme other than file://)."""
    found = scheme(path)
    return found is not None and found not in LOCAL_SCHEMES


def local_path(path: str) -> str:
    """A plain path for `path`: file:///x is /x (percent-escapes decoded); other paths unchanged."""
    if scheme(path) not in LOCAL_SCHEMES:
        return path
    import urllib.parse  # here: the status line reads local files, and its start-up is counted in ms

    parsed = urllib.parse.urlsplit(path)
    if parsed.netloc not in ("", "localhost"):
        raise InputError(path, None, "a file:// URL names a file on this machine (file:///path)")
    return urllib.parse.unquote(parsed.path)


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec file system for `url` and the path within it; a backend not installed is MissingExtra."""
    name = scheme(url) or ""
    extra = EXTRAS.get(name)
    try:
        import fsspec
    except ImportError:
        raise MissingExtra(url, name, extra or "s3") from None
    try:
        return cast("tuple[Any, str]", fsspec.core.url_to_fs(name + url[len(name) :]))  # S3:// is s3://
    except ImportError:
        if extra:
            raise MissingExtra(url, name, extra) from None
        raise InputError(url, None, f"no backend for {name}:// is installed (see fsspec's list of implementations)") from None
    except ValueError as exc:
        if "not known" in str(exc).lower():
            raise InputError(url, None, f"unknown storage scheme {name}://") from None
        raise InputError(url, None, _reason(exc)) from None
    except Exception as exc:  # a backend that fails to start (bad configuration): put into words
        raise InputError(url, None, _reason(exc)) from None


def _reason(exc: BaseException) -> str:
    """One line for a store's error: FileNotFoundError and PermissionError in the words files/inputs.py uses."""
    if isinstance(exc, FileNotFoundError):
        return "no such bucket" if "bucket" in str(exc).lower() else "no such file"
    if isinstance(exc, PermissionError):
        return "permission denied (check the store's credentials and the bucket's policy)"
    if isinstance(exc, IsADirectoryError):
        return IS_A_FOLDER
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


@contextlib.contextmanager
def _reading(url: str) -> Iterator[None]:
    """A store's failure while reading `url` is bad input (InputError), never a traceback."""
    try:
        yield
    except CtxpipeError:
        raise
    except Exception as exc:
        raise InputError(url, None, _reason(exc)) from None


class ObjectInfo:
    """An object found in a store: its URL and size."""

    __slots__ = ("url", "size")

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = size


def info(url: str) -> ObjectInfo | None:
    """The object at `url` as the store has it now (not as a listing cached earlier said: a session
    that grew, or an object whose name is also a prefix, would be misread); None when there is none."""
    found = _fresh_info(url)
    if found is None:
        return None
    return ObjectInfo(url, int(found.get("size") or 0))


def _fresh_info(url: str) -> dict[str, Any] | None:
    fs, path = filesystem(url)
    with _reading(url):
        fs.invalidate_cache(path)
        try:
            found = fs.info(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
    return cast("dict[str, Any]", found) if found.get("type") == "file" else None


def missing(url: str) -> str:
    """Why nothing was found at `url`: its bucket (or container) does not exist, or nothing is there."""
    fs, path = filesystem(url)
    root = _bucket(path)
    with contextlib.suppress(Exception):
        if root and not fs.exists(root):
            return "no such bucket"
    return "no such file or folder"


def is_folder(url: str) -> bool:
    """Whether `url` is a prefix with objects below it (a bucket counts)."""
    fs, path = filesystem(url)
    with _reading(url):
        return bool(fs.isdir(path))


def walk(url: str) -> list[ObjectInfo]:
    """Every object below the prefix `url`, each with its size, in the order sessions.find_sessions
    walks a folder on disk (a folder's files by name, then each of its subfolders by name), so a
    tree lists alike on disk and in a store."""
    fs, path = filesystem(url)
    with _reading(url):
        found = fs.find(path, detail=True)
    # Each object's URL is the prefix as given (its scheme's spelling kept) and the key below it.
    base, given = path.rstrip("/") + "/", url.rstrip("/") + "/"
    objects = [
        ObjectInfo(given + name[len(base) :] if name.startswith(base) else fs.unstrip_protocol(name), int(entry.get("size") or 0))
        for name, entry in found.items()
        if entry.get("type", "file") == "file"
    ]
    return sorted(objects, key=lambda item: _walk_order(item.url))


def _walk_order(url: str) -> list[tuple[int, str]]:
    *folders, name = url.split("/")
    return [(1, folder) for folder in folders] + [(0, name)]


def join(folder: str, relative: str) -> str:
    """`relative` (a /-separated path) below the folder or prefix `folder`."""
    if not is_remote(folder):
        return os.path.join(local_path(folder), *relative.split("/"))
    return folder.rstrip("/") + "/" + relative.lstrip("/")


def below(path: str, folder: str) -> str | None:
    """`path` relative to the folder or prefix `folder` (/-separated), None when it is not below it
    (or `folder` is not a folder)."""
    if is_remote(folder) or is_remote(path):
        base = folder.rstrip("/") + "/"
        return path[len(base) :] if path.startswith(base) and len(path) > len(base) else None
    base = os.path.expanduser(local_path(folder))
    if not os.path.isdir(base):
        return None
    relative = os.path.relpath(local_path(path), base)
    return None if relative == os.curdir or relative.split(os.sep)[0] == os.pardir else relative.replace(os.sep, "/")


def safe_relative(relative: str, source: str) -> str:
    """`relative` when it stays below the folder it is joined to. A store's key is any string, so
    one with a "..", "." or empty part (or a NUL) could climb out of --out-dir on disk: bad input."""
    parts = relative.split("/")
    if not relative or "\0" in relative or any(part in ("", ".", "..") for part in parts):
        raise InputError(source, None, "its name has an empty, '.' or '..' part: it cannot be given a place below --out-dir")
    return relative


def with_suffix(path: str, suffix: str) -> str:
    """`path` with its file name's extension replaced by `suffix` (added when it has none)."""
    return os.path.splitext(path)[0] + suffix


def relative_link(path: str, folder: str) -> str:
    """How a page in `folder` links to `path` (below it): a relative, /-separated path. Worked out
    from the two names as written, never from the disk: a folder given as "~/x" (which a shell
    leaves as it is in --out-dir=~/x) is written as named, and its pages link within it."""
    if is_remote(folder) or is_remote(path):
        found = below(path, folder)
        return found if found is not None else os.path.basename(path)
    relative = os.path.relpath(local_path(path), local_path(folder))
    return os.path.basename(path) if relative.split(os.sep)[0] == os.pardir else relative.replace(os.sep, "/")


def identity(path: str) -> str:
    """What tells two paths to one file or object apart: the real path of a local file; for an object
    the URL in its backend's own spelling (s3a://, S3:// and s3:// name one object)."""
    if not is_remote(path):
        return os.path.realpath(os.path.expanduser(local_path(path)))
    fs, inner = filesystem(path)
    return cast(str, fs.unstrip_protocol(inner))


def check_bucket(folder: str) -> None:
    """A store has no folder to make (a prefix exists with its objects), but the backend and the
    bucket of `folder` are checked, so a batch writing there fails before its work."""
    fs, path = filesystem(folder)
    root = _bucket(path)
    if not root or (fs.protocol, root) in _BUCKETS_SEEN:  # one request per bucket, not per file
        return
    with _reading(folder):
        if not fs.exists(root):
            raise CtxpipeError(f"{folder}: cannot write (no such bucket)")
    _BUCKETS_SEEN.add((fs.protocol, root))


def _bucket(path: str) -> str:
    """The bucket (or container) of a path within a store's file system."""
    return path.strip("/").split("/")[0]


_BUCKETS_SEEN: set[tuple[object, str]] = set()


def version(path: str) -> tuple[object, ...] | None:
    """What changes when the file or object at `path` is written (device, inode, size and time of a
    file; size, ETag or generation and time of an object, asked of the store now, not of a listing
    cached earlier); None when there is none."""
    if not is_remote(path):
        try:
            found_file = os.stat(local_path(path))
        except OSError:
            return None
        return (found_file.st_dev, found_file.st_ino, found_file.st_size, found_file.st_mtime_ns)
    found = _fresh_info(path)
    if found is None:
        return None
    return tuple(f"{key}={found[key]}" for key in sorted(found) if key.lower() in _VERSION_KEYS)


_VERSION_KEYS = {"size", "etag", "lastmodified", "last_modified", "mtime", "generation", "updated", "version_id", "versionid", "content_md5", "md5hash"}


def read_whole(url: str) -> bytes:
    """The object's bytes, fetched in one request (a prefix with no object of its name is a folder)."""
    fs, path = filesystem(url)
    try:
        return cast(bytes, fs.cat_file(path))
    except (FileNotFoundError, IsADirectoryError) as exc:
        with _reading(url):
            if fs.isdir(path):
                raise InputError(url, None, IS_A_FOLDER) from None
        raise InputError(url, None, _reason(exc)) from None
    except Exception as exc:
        raise InputError(url, None, _reason(exc)) from None


class RangedObject:
    """An object as a read-only buffer that fetches the blocks it is asked for, and keeps the latest
    CACHED_BLOCKS of them: len, slices (bytes), find and rfind — what the readers of core/jsonl.py
    use of a buffer, which an mmap also offers. `fetched` counts the bytes transferred."""

    def __init__(self, url: str, size: int | None = None) -> None:
        self.url = url
        self._fs, self._path = filesystem(url)
        self.version = version(url) if size is None else None
        if size is None:
            if self.version is None:
                raise InputError(url, None, missing(url).replace(" or folder", ""))
            size = next(int(str(part)[5:]) for part in self.version if str(part).startswith("size="))
        self.size = size
        self.fetched = 0
        self.requests = 0
        self._blocks: OrderedDict[int, bytes] = OrderedDict()
        # [block, run]: where each walk stands and how many blocks its next request fetches.
        self._back = [-2, 1]
        self._on = [-2, 1]

    def __len__(self) -> int:
        return self.size

    def check_unchanged(self) -> None:
        """After a read: an object replaced meanwhile (same size or not) gave blocks of two versions.
        One request reads one version (a shorter one is caught as it is read), so only a read of
        several is asked about."""
        if self.version is not None and self.requests > 1 and version(self.url) != self.version:
            raise InputError(self.url, None, CHANGED)

    def _block(self, index: int) -> bytes:
        block = self._blocks.get(index)
        if block is not None:
            self._blocks.move_to_end(index)
            return block
        last = (self.size - 1) // BLOCK
        if index == self._back[0] - 1:  # walking back from the end: the run grows
            run = min(self._back[1] * 2, MAX_RUN)
            low, high = max(0, index - run + 1), index
            self._back = [low, run]
        elif index == self._on[0] + 1:  # walking on from the start
            run = min(self._on[1] * 2, MAX_RUN)
            low, high = index, min(last, index + run - 1)
            self._on = [high, run]
        else:  # a new place: either walk may start here
            low = high = index
            self._back, self._on = [index, 1], [index, 1]
        while low < index and low in self._blocks:
            low += 1
        while high > index and high in self._blocks:
            high -= 1
        start, end = low * BLOCK, min(self.size, (high + 1) * BLOCK)
        with _reading(self.url):
            data = bytes(self._fs.cat_file(self._path, start=start, end=end))
        if len(data) != end - start:  # the object changed under the read
            raise InputError(self.url, None, CHANGED)
        self.fetched += len(data)
        self.requests += 1
        for number in range(low, high + 1):
            self._blocks[number] = data[(number - low) * BLOCK : (number - low + 1) * BLOCK]
            self._blocks.move_to_end(number)
        block = self._blocks[index]
        while len(self._blocks) > CACHED_BLOCKS:
            self._blocks.popitem(last=False)
        return block

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a RangedObject is read by contiguous slices")
        start, stop, _ = key.indices(self.size)
        if stop <= start:
            return b""
        first, last = start // BLOCK, (stop - 1) // BLOCK
        if first == last:
            return self._block(first)[start - first * BLOCK : stop - first * BLOCK]
        parts = [self._block(index) for index in range(first, last + 1)]
        parts[-1] = parts[-1][: stop - last * BLOCK]
        parts[0] = parts[0][start - first * BLOCK :]
        return b"".join(parts)

    def _bounds(self, start: int | None, end: int | None) -> tuple[int, int]:
        return slice(start, end).indices(self.size)[:2]

    def _empty(self, start: int | None, end: int | None, last: bool) -> int:
        low = 0 if start is None else start + self.size if start < 0 else start
        high = self.size if end is None else min(self.size, end + self.size if end < 0 else end)
        low = max(low, 0)
        return -1 if low > self.size or low > high else high if last else low

    def find(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        if not sub:
            return self._empty(start, end, last=False)
        low, high = self._bounds(start, end)
        position = low
        while position < high:
            index = position // BLOCK
            base = index * BLOCK
            block_end = min(high, base + BLOCK)
            window_end = min(high, block_end + len(sub) - 1)  # a match may cross into the next block
            if window_end == block_end:
                found = self._block(index).find(sub, position - base, block_end - base)
                if found >= 0:
                    return base + found
            else:
                found = self[position:window_end].find(sub)
                if found >= 0:
                    return position + found
            position = block_end
        return -1

    def rfind(self, sub: bytes, start: int | None = None, end: int | None = None) -> int:
        if not sub:
            return self._empty(start, end, last=True)
        low, high = self._bounds(start, end)
        position = high
        while position > low:
            index = (position - 1) // BLOCK
            base = index * BLOCK
            block_start = max(low, base)
            window_start = max(low, block_start - len(sub) + 1)  # a match may start in the block before
            if window_start == block_start:
                found = self._block(index).rfind(sub, block_start - base, position - base)
                if found >= 0:
                    return base + found
            else:
                found = self[window_start:position].rfind(sub)
                if found >= 0:
                    return window_start + found
            position = block_start
        return -1


@contextlib.contextmanager
def replaced(url: str, if_version: tuple[object, ...] | None = None) -> Iterator[BinaryIO]:
    """An output for the object `url`, stored whole when the block ends without error: the store
    keeps the old object (or none) until then, and after a failed upload. With `if_version` (what
    version() said when it was read), only over that version: checked just before, and on S3 made
    a condition of the upload itself (If-Match on the ETag), so no writer in between is lost."""
    import tempfile

    fs, path = filesystem(url)
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
        yield cast(BinaryIO, spool)
        spool.seek(0)
        condition = {}
        if if_version is not None:
            if version(url) != if_version:
                raise ChangedMeanwhile(url)
            etag = next((str(part).split("=", 1)[1] for part in if_version if str(part).lower().startswith("etag=")), None)
            if etag and "s3" in _protocols(fs):
                # One PUT carries the condition; s3fs's multipart upload (from 2 chunks) would drop it.
                condition = {"IfMatch": etag, "chunksize": S3_SINGLE_PUT}
        data = spool.read()
        if condition and len(data) >= 2 * S3_SINGLE_PUT:
            raise CtxpipeError(f"{url}: too large to replace only if unchanged (S3 takes one upload of up to 5 GB); left as it was")
        try:
            fs.pipe_file(path, data, **condition)
        except Exception as exc:
            if condition and "pre-condition" in str(exc).lower().replace("precondition", "pre-condition"):
                raise ChangedMeanwhile(url) from None
            raise CtxpipeError(f"{url}: cannot write ({_reason(exc)})") from None


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def create_new(url: str, data: Any) -> bool:
    """Store `data` as `url` only if no object has that name (False when one has). A store that
    cannot promise it is refused: a backup must never overwrite another."""
    fs, path = filesystem(url)
    try:
        fs.pipe_file(path, bytes(data), mode="create")
    except FileExistsError:
        return False
    except (NotImplementedError, TypeError, ValueError) as exc:
        raise CtxpipeError(f"{url}: this store cannot create an object only when its name is free ({_reason(exc)}), so --backup is refused here") from None
    except Exception as exc:
        if "precondition" in str(exc).lower():  # S3's 412 when the name is taken, from some versions
            return False
        raise CtxpipeError(f"{url}: cannot write the backup ({_reason(exc)})") from None
    return True
