"""Files only their owner can read, whatever the umask: everything a World writes.

Cell logs hold every cell's code and output, the run folder holds the HMAC keys of the
connection files, stack dumps name the user's files and functions. So folders we create are
0700 and files 0600, set explicitly (``os.mkdir``/``os.open`` modes only ever remove bits
through the umask; a later ``chmod`` makes them exact), and a file of ours found wider (written
by an older version) is narrowed when we write it again. Folders that exist already are left as
they are (a log root the user chose and shares, an older ~/.mlp_magic): what we create in them is
private, every cell's folder included.

Standard library only: ranks run this on every host (engine/capture), the kernel too (world/).
"""
from __future__ import annotations

import os
import stat

FOLDER_MODE = 0o700
FILE_MODE = 0o600


def private_dirs(path: str) -> str:
    """``path`` exists as a folder; each component we create is 0700. Returns ``path``."""
    path = os.path.abspath(path)
    missing = []
    head = path
    while not os.path.lexists(head):   # up to what exists (a file there: ENOTDIR below)
        missing.append(head)
        parent = os.path.dirname(head)
        if parent == head:
            break
        head = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, FOLDER_MODE)
        except FileExistsError:   # made meanwhile (another rank of this host)
            if not os.path.isdir(folder):
                raise
            continue
        os.chmod(folder, FOLDER_MODE)
    return path


_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL}


def open_private(path: str, mode: str = "w", **kwargs):
    """``open(path, mode, **kwargs)`` for writing ("w", "a", "x", with "b" for bytes), the file
    0600 (an existing file of ours is narrowed). Its folder must exist."""
    fd = os.open(path, _FLAGS[mode.replace("b", "")] | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
    try:
        info = os.fstat(fd)
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, FILE_MODE)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: str, text: str, **kwargs) -> None:
    """``path`` holds ``text``, readable by its owner only (its folders made private too)."""
    private_dirs(os.path.dirname(path))
    with open_private(path, "w", **kwargs) as handle:
        handle.write(text)


def private_file(path: str) -> str:
    """``path`` exists (empty if new), 0600, in 0700 folders: for files another part opens later
    by name (the stack dump faulthandler appends to). Returns ``path``."""
    private_dirs(os.path.dirname(path))
    open_private(path, "a").close()
    return path


def narrow_tree(root: str) -> int:
    """Take group and other bits off everything of ours under ``root`` (what another program
    wrote there with its own modes: ipyparallel copies IPython's profile README as 0644).
    Returns how many were narrowed."""
    narrowed = 0
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
                if info.st_uid == os.getuid() and not stat.S_ISLNK(info.st_mode) and info.st_mode & 0o077:
                    os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
                    narrowed += 1
            except OSError:
                continue   # gone meanwhile
    return narrowed
