"""The panel's endpoints on a real jupyter_server (pytest-jupyter), with loopback test hosts."""
from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from tornado.httpclient import HTTPClientError

from tests.timing import hang_bound


async def fetch_cluster(jp_fetch) -> dict:
    response = await jp_fetch("mlp-magic", "cluster")
    assert response.code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return json.loads(response.body)


async def test_cluster_lists_the_hosts_of_the_hostfile(jp_fetch, test_hostfile):
    snapshot = await fetch_cluster(jp_fetch)

    names = ["localhost", "127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert snapshot["error"] is None
    assert snapshot["source"] == f"hostfile {test_hostfile}"
    assert [h["name"] for h in snapshot["hosts"]] == names
    assert [h["slots"] for h in snapshot["hosts"]] == [2, 1, 1, 1]
    assert [h["ranks"] for h in snapshot["hosts"]] == [[0, 1], [2], [3], [4]]
    assert snapshot["updated_at"].endswith("+00:00")


async def test_reachability_of_each_host(jp_fetch, probe_timeout):
    started = time.monotonic()
    hosts = {h["name"]: h for h in (await fetch_cluster(jp_fetch))["hosts"]}
    elapsed = time.monotonic() - started

    assert hosts["localhost"]["reachable"] is True  # the server's own machine
    assert hosts["127.0.0.2"]["reachable"] is True and hosts["127.0.0.2"]["error"] is None
    assert hosts["127.0.0.3"]["reachable"] is False
    assert "refused" in hosts["127.0.0.3"]["error"].lower()
    assert hosts["127.0.0.4"]["reachable"] is False
    assert f"within {probe_timeout:g} s" in hosts["127.0.0.4"]["error"]
    # The probes are bounded by their timeout (the silent host's error says so): hang guards here,
    # generous for a loaded machine.
    assert hosts["127.0.0.4"]["probe_ms"] < hang_bound(probe_timeout) * 1000
    assert elapsed < hang_bound(probe_timeout + 0.5)


async def test_local_host_carries_this_machines_gpu_inventory(jp_fetch):
    snapshot = await fetch_cluster(jp_fetch)
    local = snapshot["hosts"][0]
    assert local["gpus"]["source"] in ("nvml", "nvidia-smi", "none")
    assert isinstance(local["gpus"]["gpus"], list)
    if local["gpus"]["source"] == "none":
        assert local["gpus"]["gpus"] == []
    assert all(h["gpus"] is None for h in snapshot["hosts"][1:])  # nothing published for them


async def test_published_world_shows_engines_per_host(jp_fetch, world_state_dir):
    world = {
        "pid": os.getpid(),
        "started_at": "2026-01-01T00:00:00+00:00", "updated_at": "2026-01-01T00:00:00+00:00",
        "np": 3, "mpi": "openmpi",
        "ranks": [
            {"rank": 0, "host": "localhost", "engine_id": 4, "state": "idle"},
            {"rank": 1, "host": "localhost", "engine_id": 3, "state": "busy"},
            {"rank": 2, "host": "127.0.0.2", "engine_id": 5, "state": "dead"},
        ],
    }
    (world_state_dir / f"{os.getpid()}.json").write_text(json.dumps(world))

    snapshot = await fetch_cluster(jp_fetch)

    assert [w["pid"] for w in snapshot["worlds"]] == [os.getpid()]
    hosts = {h["name"]: h for h in snapshot["hosts"]}
    assert [(e["rank"], e["engine_id"]) for e in hosts["localhost"]["engines"]] == [(0, 4), (1, 3)]
    assert [e["rank"] for e in hosts["127.0.0.2"]["engines"]] == [2]
    # the states are said once, in the World's ranks
    assert [r["state"] for r in snapshot["worlds"][0]["ranks"]] == ["idle", "busy", "dead"]
    assert hosts["127.0.0.3"]["engines"] == []


async def test_the_slow_part_is_shared_between_requests_until_refreshed(jp_fetch, jp_serverapp):
    live = jp_serverapp.web_app.settings["mlp_magic_live"]
    first = await jp_fetch("mlp-magic", "cluster")
    second = await jp_fetch("mlp-magic", "cluster")
    assert second.body == first.body
    assert live.slow_collects == 1

    await asyncio.sleep(2.1)   # refreshes are rate-limited (2 s)
    refreshed = await jp_fetch("mlp-magic", "cluster", "refresh", method="POST", body=b"")
    assert refreshed.code == 200
    assert json.loads(refreshed.body)["hosts"]
    assert live.slow_collects == 2
    again = await jp_fetch("mlp-magic", "cluster", "refresh", method="POST", body=b"")
    assert again.code == 200 and live.slow_collects == 2   # at once again: not taken again


async def test_bad_hostfile_is_reported_not_raised(jp_fetch, test_hostfile):
    test_hostfile.write_text("localhost slots=2\nworker1 slots=many\n")
    snapshot = await fetch_cluster(jp_fetch)
    assert snapshot["source"] is None and snapshot["hosts"] == []
    assert "line 2" in snapshot["error"] and "many" in snapshot["error"]


@pytest.mark.parametrize("method,path", [("GET", ("cluster",)), ("POST", ("cluster", "refresh"))])
async def test_no_token_no_data(jp_fetch, method, path):
    body = b"" if method == "POST" else None
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", *path, method=method, body=body, headers={"Authorization": ""})
    assert refused.value.code == 403
    assert b"localhost" not in (refused.value.response.body or b"")


async def test_wrong_token_no_data(jp_fetch):
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "cluster", headers={"Authorization": "token not-the-token"})
    assert refused.value.code == 403


def login_cookies(response) -> dict:
    """The cookies the server set, as name -> value."""
    cookies = {}
    for header in response.headers.get_list("Set-Cookie"):
        name, _, rest = header.partition("=")
        cookies[name] = rest.split(";", 1)[0]
    return cookies


def cookie_header(cookies: dict) -> str:
    return "; ".join(f"{name}={value}" for name, value in cookies.items())


async def test_cookie_post_needs_the_xsrf_token(jp_fetch):
    # A browser session: the token once (sets the login cookie), then cookies only.
    first = await jp_fetch("mlp-magic", "cluster")
    cookies = login_cookies(first)
    assert any(name.startswith("username-") for name in cookies)
    browser = {"Authorization": "", "Cookie": cookie_header(cookies)}

    page = await jp_fetch("mlp-magic", "cluster", headers=dict(browser))
    assert page.code == 200  # the cookie alone authenticates a GET

    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "cluster", "refresh", method="POST", body=b"", headers=dict(browser))
    assert refused.value.code == 403
    assert b"_xsrf" in refused.value.response.body

    xsrf = "2|deadbeef|0123456789abcdef0123456789abcdef|1700000000"
    with_xsrf = {"Cookie": cookie_header({**cookies, "_xsrf": xsrf}), "X-XSRFToken": xsrf,
                 "Authorization": ""}
    accepted = await jp_fetch("mlp-magic", "cluster", "refresh", method="POST", body=b"", headers=with_xsrf)
    assert accepted.code == 200


async def test_simultaneous_requests_share_one_computation(jp_fetch, jp_serverapp):
    live = jp_serverapp.web_app.settings["mlp_magic_live"]
    responses = await asyncio.gather(*(jp_fetch("mlp-magic", "cluster") for _ in range(20)))
    assert {r.code for r in responses} == {200}
    assert len({r.body for r in responses}) == 1
    assert live.slow_collects == 1
