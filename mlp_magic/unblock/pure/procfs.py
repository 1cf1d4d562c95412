"""What /proc says about the threads and descriptors of a blocked rank (unblock/rank/side reads
the files; these read their text): which epoll instance a thread waits on, which descriptors an
epoll instance watches, and whether a process catches a signal.

gloo's TCP transport runs one thread per process group, named ``gloo_tcp_loop``, that waits in
``epoll_wait`` on the group's sockets: the descriptors that instance watches are that group's
connections and nothing else (never ZeroMQ's or MPI's)."""
from __future__ import annotations

GLOO_LOOP_THREAD = "gloo_tcp_loop"

# epoll_wait, epoll_pwait, epoll_pwait2 by machine (the first argument is the epoll descriptor)
EPOLL_WAITS = {
    "x86_64": (232, 281, 441),
    "aarch64": (22, 441),
    "ppc64le": (238, 303, 441),
}


# sched_yield by machine: what an MPI call's progress loop does between looks when ranks share
# cores (Open MPI yields when oversubscribed); otherwise it is seen running
SCHED_YIELD = {"x86_64": 24, "aarch64": 124, "ppc64le": 158}


def polls(syscall_text: str, machine: str) -> bool:
    """Whether a thread's ``/proc/<pid>/task/<tid>/syscall`` says it is running or yielding: an
    MPI call spins in its progress loop, where a torch collective's wait sleeps on a condition."""
    words = syscall_text.split()
    if words[:1] == ["running"]:
        return True
    return bool(words) and _number(words[0]) == SCHED_YIELD.get(machine)


def _number(word: str) -> int | None:
    """A decimal number of ASCII digits ("²" is a digit to ``str.isdigit``, not to ``int``)."""
    return int(word) if word.isascii() and word.isdigit() else None


def epoll_fd_of(syscall_text: str, machine: str) -> int | None:
    """The epoll descriptor a thread waits on, from its ``/proc/<pid>/task/<tid>/syscall``
    (``"232 0x13 0x7f... ..."``: the call's number, then its arguments), or None when it is not
    waiting in epoll (running, another call, an unknown machine)."""
    words = syscall_text.split()
    if len(words) < 2 or _number(words[0]) not in EPOLL_WAITS.get(machine, ()):
        return None
    try:
        return int(words[1], 16)
    except ValueError:
        return None


def watched_fds(fdinfo_text: str) -> list[tuple[int, int | None]]:
    """The descriptors an epoll instance watches, with the inode each had when it was added
    (None where the line has none), from its ``/proc/<pid>/fdinfo/<fd>`` (one
    ``tfd: N events: 19 data: ... pos:0 ino:26e0a7 sdev:9`` line each, the inode in hex)."""
    found = []
    for line in fdinfo_text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "tfd:" and _number(words[1]) is not None:
            inodes = [word[4:] for word in words[2:] if word.startswith("ino:")]
            try:
                inode = int(inodes[0], 16) if inodes else None
            except ValueError:
                inode = None
            found.append((int(words[1]), inode))
    return found
