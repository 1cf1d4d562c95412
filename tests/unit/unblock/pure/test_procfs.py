"""unblock/pure/procfs: reading a blocked rank's /proc text (captured from real processes)."""
from __future__ import annotations

import signal

from hypothesis import given
from hypothesis import strategies as st

from mlp_magic.core.proc_stat import catches
from mlp_magic.engine.side_signal import UNBLOCK_SIGNAL
from mlp_magic.unblock.pure.procfs import epoll_fd_of, watched_fds

# A gloo_tcp_loop thread of a real rank (torch 2.14, x86_64), and its epoll instance's fdinfo.
SYSCALL = "232 0x13 0x7fb95b7fdd30 0x40 0xffffffff 0x0 0x0 0x7fb95b7fdcc8 0x7fb9da4e5f9e\n"
FDINFO = ("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\n"
          "tfd:       20 events:       19 data:     5603761fa220  pos:0 ino:26e0a7 sdev:9\n"
          "tfd:       16 events:       19 data:     5603763b3a80  pos:0 ino:26e0a3 sdev:9\n"
          "tfd:       17 events:       19 data:     5603761fa5b8  pos:0 ino:26e0a4 sdev:f\n")


def test_a_real_loop_thread_and_its_epoll_instance():
    assert epoll_fd_of(SYSCALL, "x86_64") == 0x13
    assert watched_fds(FDINFO) == [(20, 0x26e0a7), (16, 0x26e0a3), (17, 0x26e0a4)]


def test_a_thread_not_waiting_in_epoll_has_no_epoll_fd():
    assert epoll_fd_of("running\n", "x86_64") is None            # on a CPU right now
    assert epoll_fd_of("202 0x55e0 0x80 0x0 0x0\n", "x86_64") is None   # futex
    assert epoll_fd_of(SYSCALL, "sparc64") is None              # a machine whose numbers we do not know
    assert epoll_fd_of("22 0x7 0x0\n", "aarch64") == 7
    assert epoll_fd_of("238 0x9 0x0\n", "ppc64le") == 9 and epoll_fd_of("237 0x9\n", "ppc64le") is None
    assert epoll_fd_of("232 nothex\n", "x86_64") is None
    assert epoll_fd_of("", "x86_64") is None


@given(st.text(max_size=200), st.sampled_from(["x86_64", "aarch64", "ppc64le", "riscv64"]))
def test_any_text_gives_an_fd_or_none_never_an_error(text, machine):
    found = epoll_fd_of(text, machine)
    assert found is None or found >= 0
    assert all(fd >= 0 and (inode is None or inode >= 0) for fd, inode in watched_fds(text))


INODES = st.one_of(st.none(), st.integers(0, 1 << 40))


@given(st.lists(st.tuples(st.integers(0, 1 << 20), INODES), max_size=30))
def test_every_watched_descriptor_is_read_back_with_its_inode(entries):
    text = "pos:\t0\n" + "".join(
        f"tfd: {fd:>8} events:       19 data: 1  pos:0{'' if ino is None else f' ino:{ino:x}'} sdev:9\n"
        for fd, ino in entries)
    assert watched_fds(text) == entries


@given(st.sets(st.integers(1, 64)))
def test_the_caught_mask_is_read_bit_by_bit(caught):
    mask = sum(1 << (signum - 1) for signum in caught)
    status = f"Name:\tpython\nSigIgn:\t0000000000000000\nSigCgt:\t{mask:016x}\nCapInh:\t0\n"
    assert [signum for signum in range(1, 65) if catches(status, signum)] == sorted(caught)


def test_no_mask_means_not_caught_and_the_signal_is_a_real_time_one():
    assert not catches("Name:\tsleep\n", UNBLOCK_SIGNAL)
    assert not catches("SigCgt:\tzz\n", UNBLOCK_SIGNAL)
    assert signal.SIGRTMIN <= UNBLOCK_SIGNAL <= signal.SIGRTMAX


def test_a_spinning_main_thread_is_told_from_a_sleeping_one():
    from mlp_magic.unblock.pure.procfs import polls

    assert polls("running\n", "x86_64") and polls("running\n", "riscv64")
    assert polls("24 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd 0x7f12\n", "x86_64")   # sched_yield
    assert polls("124 0x0\n", "aarch64") and not polls("24 0x0\n", "aarch64")
    for text in ("202 0x7f 0x80 0x0\n", "232 0x5 0x7f 0x40\n", "", "-1 0x0\n", "zz"):   # futex, epoll_wait
        assert not polls(text, "x86_64"), text
