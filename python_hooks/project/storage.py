"""The one way the Python side reaches landing files, on this machine's disk or on S3: a `Location`.

A landing folder is written as Spark and dbt know it (a source's identifier): an absolute path,
a `file:` URI, or an `s3a://bucket/prefix` (or `s3://`) URI. A `Location` holds the pyarrow
filesystem of that string (`pyarrow.fs.LocalFileSystem`, or the `S3FileSystem` of the standard AWS
variables: python_hooks/project/object_store.py) and the path inside it, so that a folder on S3
is listed, and its Parquet footers read, exactly like a local one; a file is replaced whole under
its own name (`write_bytes`: one PUT on S3, a rename on this disk), so that a reader sees the old
content or the new, never half. Its string form keeps the scheme it was written with (`s3a://...`
stays `s3a://...`), so what Python lists and what SQL reads name a file the same way.

Another scheme (gs://, abfss://, hdfs://) gives a Location that Python cannot reach
(`reachable` is false): its folder is listed by Spark instead (landing/pending.py).

A failure of the object store (keys refused, endpoint down, bucket missing, a listed file gone) is a
`StorageError`: one line naming the endpoint, the bucket and the variable to check, and whether it was
reading or writing, never a key. `Location.check` asks S3 for a location's bucket in one request (what
`make run` does before Spark starts); `failure_in` finds the same failures in what Spark's S3A said and
gives the same line.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pyarrow as pa
from pyarrow import fs

from python_hooks.project import object_store

LOCAL_SCHEMES = ("", "file")
S3_SCHEMES = ("s3a", "s3")
_LOCAL = fs.LocalFileSystem()
# What S3 answers when it refuses the keys, does not answer, or has no such bucket: pyarrow's code,
# the service's own, or what Spark's S3A says (a Java exception's text: `failure_in`).
_REFUSED = re.compile(
    r"ACCESS_DENIED|SIGNATURE_DOES_NOT_MATCH|INVALID_ACCESS_KEY_ID|AccessDenied|SignatureDoesNotMatch|InvalidAccessKeyId"
    r"|403 Forbidden"
)
_UNREACHABLE = re.compile(
    r"NETWORK_CONNECTION|curlCode|Couldn't connect|Could not resolve|timed out|Timeout"
    r"|Unable to execute HTTP request|Connection refused|UnknownHostException|ConnectException"
)
_NO_BUCKET = re.compile(r"NO_SUCH_BUCKET|NoSuchBucket|UnknownStoreException")
# A file that a listing found and a read did not (deleted meanwhile: a lifecycle rule, its producer).
_GONE = re.compile(r"PATH_NOT_FOUND|Path does not exist|FileNotFoundException|NoSuchKey|NO_SUCH_KEY")
# An S3 location in a Java exception's text (S3A quotes some in backticks, ends a sentence with a dot).
_S3_URI = re.compile(r"\bs3a?://[A-Za-z0-9][A-Za-z0-9.\-_]*(?:/[^\s`'\":;,)]*)?")


class StorageError(OSError):
    """A landing location that cannot be read or written, said in one line (the endpoint, the bucket,
    the variable to check); never a secret."""


@dataclass(frozen=True, order=True)
class Location:
    """A folder or a file of the landing zone: `prefix` is how its string began (`""` for a path,
    `file:`, `file://`, `s3a://`, `s3://`, or another scheme's), `path` the path inside its
    filesystem (`/abs/folder` on this machine, `bucket/key` on S3), with no trailing slash."""

    prefix: str
    path: str

    @classmethod
    def parse(cls, text: str | os.PathLike[str]) -> Location:
        """The Location of a landing string (or a local path). A relative local path is made absolute."""
        text = os.fspath(text)
        head = text.split("/", 1)[0]
        if ":" not in head:  # a path on this machine
            return cls("", str(PurePosixPath(os.path.abspath(text) if not text.startswith("/") else text)))
        scheme, rest = text.split(":", 1)
        if scheme == "file":  # file:/x, file:///x: the path is what follows the slashes, from one
            slashes = len(rest) - len(rest.lstrip("/"))
            return cls("file:" + "/" * max(slashes - 1, 0), _clean("/" + rest.lstrip("/")))
        if not rest.startswith("//"):
            return cls(scheme + ":", rest)
        inside = rest[2:].strip("/")
        if scheme in S3_SCHEMES and (not inside or rest[2:].startswith("/")):
            raise StorageError(f"{text}: an S3 location names its bucket (s3a://<bucket>/<prefix>)")
        return cls(scheme + "://", _clean(inside) if scheme in S3_SCHEMES else inside)

    def __str__(self) -> str:
        return self.prefix + self.path

    @property
    def scheme(self) -> str:
        return self.prefix.split(":", 1)[0] if self.prefix else ""

    @property
    def is_local(self) -> bool:
        """On this machine's disk (a path or a `file:` URI)."""
        return self.scheme in LOCAL_SCHEMES

    @property
    def is_s3(self) -> bool:
        return self.scheme in S3_SCHEMES

    @property
    def reachable(self) -> bool:
        """Python lists and reads it (this machine's disk or S3); anything else is Spark's to list."""
        return self.is_local or self.is_s3

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def bucket(self) -> str:
        return self.path.split("/", 1)[0] if self.is_s3 else ""

    @property
    def local_path(self) -> Path:
        """The path on this machine, for what only works there (nothing on the landing zone's paths:
        they go through `files`, `info`, `open` and `write_bytes`, which reach S3 too)."""
        if not self.is_local:
            raise ValueError(f"{self} is not on this machine's disk")
        return Path(self.path)

    @property
    def filesystem(self) -> fs.FileSystem:
        """The pyarrow filesystem that holds it: the local one, or S3 from the standard variables."""
        if self.is_local:
            return _LOCAL
        if self.is_s3:
            return object_store.filesystem_from_env()
        raise StorageError(f"{self}: Python reads local paths, file:, s3a:// and s3:// locations only")

    def join(self, relative: str) -> Location:
        """The location `relative` (a `/`-separated path) inside this folder."""
        inside = relative.strip("/")
        return Location(self.prefix, f"{self.path.rstrip('/')}/{inside}" if inside else self.path)

    def relative_to(self, folder: Location | str | os.PathLike[str]) -> str:
        """This location's path inside `folder`, `/`-separated (ValueError when it is not inside)."""
        folder = location(folder)
        base = folder.path.rstrip("/") + "/"
        same_store = folder.scheme == self.scheme or (folder.is_local and self.is_local)
        if not same_store or not self.path.startswith(base):
            raise ValueError(f"{self} is not inside {folder}")
        return self.path[len(base) :]

    def files(self) -> list[StoredFile]:
        """Every file under this folder, in every subfolder, with its size and modification time
        ([] when the folder does not exist or is a file). On S3 an empty answer is checked against
        the bucket: a missing bucket is a StorageError, not an empty folder."""
        selector = fs.FileSelector(self.path, recursive=True, allow_not_found=True)
        try:
            infos = self.filesystem.get_file_info(selector)
        except NotADirectoryError:
            return []
        except OSError as error:
            raise self.failure(error) from None
        found = [_stored(self, info) for info in infos if info.type == fs.FileType.File]
        if not found and self.is_s3:
            self._check_bucket()
        return found

    def info(self) -> StoredFile | None:
        """This file's size and modification time, None when there is no file here."""
        try:
            info = self.filesystem.get_file_info(self.path)
        except OSError as error:
            raise self.failure(error) from None
        if info.type != fs.FileType.File:
            return None
        return StoredFile(self, self.name, info.size, info.mtime_ns or 0)

    def open(self):
        """The file, opened for random-access reading (a pyarrow NativeFile: use it in `with`)."""
        try:
            return self.filesystem.open_input_file(self.path)
        except OSError as error:
            raise self.failure(error) from None

    def write_bytes(self, data: bytes | pa.Buffer) -> None:
        """Writes `data` as this file, whole, replacing the file already here under the same name: a
        reader sees the old content or the new one, never part of either. On S3, one PUT of the key
        (or, past pyarrow's part size, one multipart upload, completed only when every part is in):
        S3 replaces an object atomically, and a failed upload leaves the old one. On this machine,
        written under a hidden name beside it (`.<name>.writing`, which no reader lists), flushed to
        the disk, then renamed over it. `data` goes in one call (pyarrow completes an S3 upload when
        its stream closes, even after an error between writes): make the whole content first."""
        if self.is_local:
            self._replace_local(data)
            return
        try:
            with self.filesystem.open_output_stream(self.path) as stream:
                stream.write(data)
        except OSError as error:
            raise self.failure(error, "writing") from None

    def _replace_local(self, data: bytes | pa.Buffer) -> None:
        target = Path(self.path)
        staged = target.with_name(f".{target.name}.writing")
        try:
            with open(staged, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(staged, target)
        except OSError as error:
            staged.unlink(missing_ok=True)
            raise self.failure(error, "writing") from None

    def check(self) -> None:
        """On S3: the endpoint answers, accepts the keys and has this location's bucket, else a
        StorageError saying what to check. One request (HeadBucket); nothing to check on this
        machine's disk."""
        if self.is_s3:
            self._check_bucket()

    def _check_bucket(self) -> None:
        try:
            missing = self.filesystem.get_file_info(self.bucket).type == fs.FileType.NotFound
        except OSError as error:
            raise self.failure(error) from None
        if missing:
            raise StorageError(_no_bucket(self))

    def failure(self, error: Exception, doing: str = "reading") -> StorageError:
        """`error` (raised `doing` "reading" or "writing" this location) as one readable line: what
        to check, no secret."""
        if isinstance(error, StorageError):
            return error
        text = (str(error).strip().splitlines() or [type(error).__name__])[0]
        verb = "write" if doing == "writing" else "read"
        gone = doing == "reading" and (isinstance(error, FileNotFoundError) or _GONE.search(text))
        if not self.is_s3:
            return StorageError(_gone(self) if gone else f"cannot {verb} {self}: {text}")
        endpoint = _endpoint()
        refused = _REFUSED.search(text)
        if refused:
            allowed = " (writing there needs s3:PutObject)" if doing == "writing" else ""
            return StorageError(
                f"S3 at {endpoint} refused bucket {self.bucket} ({refused.group(0)}) with the keys of"
                f" AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: check both variables (and AWS_REGION){allowed}"
            )
        if _UNREACHABLE.search(text):
            return StorageError(
                f"S3 at {endpoint} does not answer ({doing} {self}): check AWS_ENDPOINT_URL_S3 (or"
                " AWS_ENDPOINT_URL); for the local server, make s3-up"
            )
        if _NO_BUCKET.search(text):
            return StorageError(_no_bucket(self, doing))
        if gone:
            return StorageError(_gone(self))
        return StorageError(f"cannot {verb} {self} on S3 at {endpoint}: {text}")


@dataclass(frozen=True, order=True)
class StoredFile:
    """A file as a listing found it: where it is, its path inside the listed folder (`/`-separated),
    its size in bytes and its modification time (ns since the epoch; S3: the object's LastModified)."""

    location: Location
    relative: str
    size: int
    mtime_ns: int

    @property
    def name(self) -> str:
        return self.location.name

    def __str__(self) -> str:
        return str(self.location)


def delete_tree(folder: Location) -> None:
    """Deletes a folder and everything under it (on S3: every object under the prefix); nothing when
    there is none. For what starts from scratch (make demo, the tests), never for raw files."""
    if folder.is_local:
        shutil.rmtree(folder.path, ignore_errors=True)
        return
    try:
        folder.filesystem.delete_dir_contents(folder.path, missing_dir_ok=True)
        if "/" in folder.path:
            folder.filesystem.delete_dir(folder.path)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise folder.failure(error) from None


def upload(source: str | os.PathLike[str], target: Location) -> None:
    """Puts a local file at `target` (a local path or an S3 key) in one write: a reader sees it whole
    or not at all on S3 (one PUT or a completed multipart upload); locally through a hidden name and a
    rename."""
    if target.is_local:
        path = target.local_path
        path.parent.mkdir(parents=True, exist_ok=True)
        hidden = path.with_name(f".{path.name}.uploading")
        shutil.copyfile(source, hidden)
        os.replace(hidden, path)
        return
    try:
        with open(source, "rb") as local, target.filesystem.open_output_stream(target.path) as out:
            shutil.copyfileobj(local, out, length=8 << 20)
    except OSError as error:
        raise target.failure(error) from None


def location(where: Location | StoredFile | str | os.PathLike[str]) -> Location:
    """The Location of a landing string, a local path, a listed file or a Location."""
    if isinstance(where, Location):
        return where
    if isinstance(where, StoredFile):
        return where.location
    return Location.parse(where)


def _clean(path: str) -> str:
    """A path without repeated or trailing slashes (as pathlib writes it)."""
    return re.sub("/{2,}", "/", path).rstrip("/") or "/"


def _stored(folder: Location, info: fs.FileInfo) -> StoredFile:
    file = Location(folder.prefix, info.path)
    return StoredFile(file, file.relative_to(folder), info.size, info.mtime_ns or 0)


def _endpoint() -> str:
    return object_store.endpoint_url() or "AWS (AWS_ENDPOINT_URL_S3 unset)"


def _no_bucket(where: Location, doing: str = "reading") -> str:
    warehouse = os.environ.get("CDC_WAREHOUSE", "")
    inside = warehouse and Location.parse(warehouse).is_s3 and _inside(where, Location.parse(warehouse))
    setting = (
        "the warehouse (CDC_WAREHOUSE)" if inside else "the landing root (CDC_LANDING_ROOT, or the source's identifier)"
    )
    return (
        f"bucket {where.bucket} does not exist at {_endpoint()} ({doing} {where}): check {setting}"
        " and CDC_S3_BUCKET, or create the bucket"
    )


def _inside(where: Location, folder: Location) -> bool:
    return where.path == folder.path or where.path.startswith(folder.path.rstrip("/") + "/")


def _gone(where: Location) -> str:
    return (
        f"{where} was listed, then gone when read: deleted meanwhile (a lifecycle rule, or its producer);"
        " nothing read from it was applied"
    )


def failure_in(message: str) -> StorageError | None:
    """The object store failure that a Spark error reports (S3A's exception text, in what dbt or
    Spark said: keys refused, endpoint down, bucket missing, a file gone), as the one line
    `Location.failure` says of it; None when `message` reports no such failure of an S3 location."""
    for line in str(message).splitlines():
        found = _S3_URI.search(line)
        if not found:
            continue
        where = Location.parse(found.group(0).rstrip("."))
        failed = _REFUSED.search(line) or _UNREACHABLE.search(line) or _NO_BUCKET.search(line)
        if failed or (_GONE.search(line) and "." in where.name):  # gone: a file (a folder has no extension)
            return where.failure(OSError(line.strip()))
    return None
