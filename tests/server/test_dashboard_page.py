"""GET mlp-magic/dashboard: the plain page of the panel's view, authenticated and authorised as the
REST routes are; the settings its bundle reads; one clear line when the bundle was never built."""
from __future__ import annotations

import json
import re

import pytest
from jupyter_server.auth.authorizer import Authorizer
from test_panel_endpoint import cookie_header, login_cookies
from tornado.httpclient import HTTPClientError

from mlp_magic.panel import dashboard

REFUSED: set = set()   # the actions the authorizer refuses in this test


class SwitchableAuthorizer(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return not (resource == "mlp_magic" and action in REFUSED)


@pytest.fixture
def bundle(tmp_path, monkeypatch):
    """A built bundle (two small files: these tests need no Node.js)."""
    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "dashboard.js").write_text("window.mlpDashboard = 1;\n")
    (folder / "dashboard.css").write_text("body { margin: 0 }\n")
    monkeypatch.setattr(dashboard, "STATIC_DIR", str(folder))
    return folder


@pytest.fixture
def no_bundle(tmp_path, monkeypatch):
    folder = tmp_path / "never-built"
    monkeypatch.setattr(dashboard, "STATIC_DIR", str(folder))
    return folder


@pytest.fixture
def jp_server_config(test_hostfile, world_state_dir, probe_timeout):
    REFUSED.clear()
    return {
        "ServerApp": {"jpserver_extensions": {"mlp_magic.panel": True},
                      "authorizer_class": SwitchableAuthorizer},
        "MlpMagicPanel": {"hostfile": str(test_hostfile), "probe_timeout": probe_timeout},
    }


def page_config(body: bytes) -> dict:
    found = re.search(rb'<script id="jupyter-config-data" type="application/json">(.*?)</script>', body, re.S)
    assert found, body
    return json.loads(found.group(1))


async def test_the_page_gives_its_bundle_the_base_url_and_the_token_it_came_with(
        bundle, jp_fetch, jp_serverapp, jp_base_url):
    token = jp_serverapp.identity_provider.token
    page = await jp_fetch("mlp-magic", "dashboard", params={"token": token}, headers={"Authorization": ""})
    assert page.code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert page_config(page.body) == {"baseUrl": jp_base_url, "appName": "MLP Cluster", "token": token}
    script = re.search(rb'<script src="([^"]+)"', page.body).group(1).decode().replace("&amp;", "&")
    assert script.startswith(f"{jp_base_url}mlp-magic/static/dashboard.js?v=")
    parts = script[len(jp_base_url):].split("?")[0].split("/")
    served = await jp_fetch(*parts, headers={"Authorization": ""})
    assert served.body == b"window.mlpDashboard = 1;\n"   # public code, as the server's /static
    assert "_xsrf" in login_cookies(page)   # what a cookie-authenticated POST of the page needs


async def test_a_cookie_authenticates_the_page_and_no_token_is_written_into_it(bundle, jp_fetch):
    cookies = login_cookies(await jp_fetch("mlp-magic", "cluster"))
    browser = {"Authorization": "", "Cookie": cookie_header(cookies)}
    page = await jp_fetch("mlp-magic", "dashboard", headers=browser)
    assert page.code == 200 and "token" not in page_config(page.body)


@pytest.mark.parametrize("headers", [{"Authorization": ""}, {"Authorization": "token not-the-token"}])
async def test_without_a_token_the_page_is_403_with_a_line_saying_how_to_log_in(bundle, jp_fetch, headers):
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "dashboard", headers=headers, follow_redirects=False)
    assert refused.value.code == 403
    text = refused.value.response.body.decode()
    assert text.startswith("mlp_magic: not logged in") and "?token=" in text and "/login?next=" in text
    assert text.count("\n") == 1 and "dashboard.js" not in text


async def test_a_user_the_authorizer_refuses_read_gets_403(bundle, jp_fetch):
    REFUSED.add("read")
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("mlp-magic", "dashboard")
    assert refused.value.code == 403
    assert b"jupyter-config-data" not in (refused.value.response.body or b"")


async def test_a_page_that_may_read_but_not_act_is_still_served(bundle, jp_fetch):
    REFUSED.add("execute")   # the page's buttons are then refused by their routes, not the page
    assert (await jp_fetch("mlp-magic", "dashboard")).code == 200


async def test_no_bundle_built_is_one_line_naming_the_file_and_how_to_build_it(no_bundle, jp_fetch):
    with pytest.raises(HTTPClientError) as failed:
        await jp_fetch("mlp-magic", "dashboard")
    assert failed.value.code == 500
    text = failed.value.response.body.decode()
    assert text.count("\n") == 1 and str(no_bundle / "dashboard.js") in text
    assert "jlpm build:dashboard" in text and "Node.js" in text
