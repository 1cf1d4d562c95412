"""Shared by the log retention tests: cell folder names and folders of a given age."""
import os
import time

DAY = 86400.0
NOW = time.mktime((2026, 11, 21, 12, 0, 0, 0, 0, -1))


def cell_name(days_ago: float, pid: int = 4242, n: int = 1, now: float = NOW) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime(now - days_ago * DAY)) + f"-{pid}-{n:04d}"


def make_cell(root, name: str, days_ago: float, now: float = NOW) -> str:
    path = os.path.join(root, name)
    os.makedirs(path)
    with open(os.path.join(path, "rank0.stdout"), "w") as handle:
        handle.write("out\n")
    os.utime(path, (now - days_ago * DAY,) * 2)
    return path
