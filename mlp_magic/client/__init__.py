"""Reaching the ranks of a World: requests, the one waiting loop, ipyparallel's internals."""
