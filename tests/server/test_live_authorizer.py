"""The panel's routes ask jupyter_server's authorizer: a user who may read sees the cluster but
cannot act on a World."""
from __future__ import annotations

import json
import os

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError


class ReadOnlyAuthorizer(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        assert resource == "mlp_magic" or not handler.request.path.startswith("/a%40b/mlp-magic")
        return action == "read"


@pytest.fixture
def jp_server_config(test_hostfile, world_state_dir, probe_timeout):
    return {
        "ServerApp": {"jpserver_extensions": {"mlp_magic.panel": True},
                      "authorizer_class": ReadOnlyAuthorizer},
        "MlpMagicPanel": {"hostfile": str(test_hostfile), "probe_timeout": probe_timeout},
    }


async def test_reading_is_allowed_acting_is_not(jp_fetch, jp_ws_fetch, world_state_dir):
    record = {"id": "here-1-1", "pid": os.getpid(), "ranks": [], "processes": []}
    (world_state_dir / "here.json").write_text(json.dumps(record))
    assert (await jp_fetch("mlp-magic", "cluster")).code == 200
    ws = await jp_ws_fetch("mlp-magic", "live")
    assert json.loads(await ws.read_message())["type"] == "snapshot"
    ws.close()
    for action in ("interrupt", "unblock", "restart", "stacks"):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("mlp-magic", "worlds", "here-1-1", action, method="POST", body=b"")
        assert refused.value.code == 403, action
