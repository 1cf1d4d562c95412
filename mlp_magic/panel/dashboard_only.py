"""The authorizer of ``mlp-magic dashboard``'s server: the panel's resource only.

The standalone server is a jupyter_server (the same handlers as in JupyterLab), so it carries
jupyter_server's own APIs too: kernels, contents, terminals. A token that opens the view must not
also run code or read files, so every request for another resource is refused (403), whatever
the token; the panel's routes (resource ``mlp_magic``: read and execute) are allowed as in any
server.
"""
from __future__ import annotations

from jupyter_server.auth.authorizer import Authorizer

from mlp_magic.panel.live_socket import AUTH_RESOURCE


class DashboardOnlyAuthorizer(Authorizer):
    def is_authorized(self, handler, user, action: str, resource: str) -> bool:
        return resource == AUTH_RESOURCE
