"""Calling a verb's handler, and what a handler gets from the magic that called it."""
from __future__ import annotations

import importlib


def handler(path: str):
    """The function ``module:function`` names (imported only when its verb is used)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class Context:
    """What a magic gives a verb's handler: the kernel's World owner, the environment, the
    notebook's namespace and the cell's text (None for a line magic)."""

    def __init__(self, owner, env, user_ns: dict, cell: str | None = None, notice=print):
        self.owner, self.env, self.user_ns, self.cell, self.notice = owner, env, user_ns, cell, notice

    def store(self, name: str | None, value) -> None:
        """``-o NAME``: a result in the notebook's namespace."""
        if name:
            self.user_ns[name] = value

    def show(self, text: str, html: str) -> None:
        """Text for terminals, HTML for the notebook."""
        from IPython.display import display

        display({"text/plain": text.rstrip(), "text/html": html}, raw=True)

    def show_report(self, report, as_json: bool) -> None:
        """A report with ``text``, ``html`` and ``to_json()`` (stacks, doctor): JSON printed, else
        displayed as HTML with its text for terminals."""
        if as_json:
            import json

            print(json.dumps(report.to_json(), indent=1))
        else:
            self.show(report.text, report.html)

    def world_transport_for(self):
        """For stacks and the doctor: the live World's engines reach the hosts it covers (no ssh),
        as for ``%allrun``; None without a World."""
        world = self.owner.world
        if world is None:
            return None
        from mlp_magic.allrun.via_engines import WorldTransport, covers

        return lambda names: WorldTransport(world) if covers(world, names) else None
