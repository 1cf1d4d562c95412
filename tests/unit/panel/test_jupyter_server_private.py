"""The contract of panel/jupyter_server_private with the installed jupyter_server (the floors job
runs it at 2.4): each private name is there, or the fallback is what runs."""
import asyncio
import inspect

from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.serverapp import ServerApp

from mlp_magic.panel import jupyter_server_private as private


def test_prepare_takes_the_redirect_switch_exactly_when_we_say_so():
    has = "_redirect_to_login" in inspect.signature(JupyterHandler.prepare).parameters
    assert private.PREPARE_TAKES_REDIRECT == has


def test_prepare_is_called_with_the_switch_only_where_it_exists():
    calls = []

    async def prepare(**keys):
        calls.append(keys)

    asyncio.run(private.prepare_without_login_redirect(prepare))
    assert calls == [{"_redirect_to_login": False} if private.PREPARE_TAKES_REDIRECT else {}]


def test_token_authenticated_reads_the_flag_or_says_no():
    class Handler:
        pass

    handler = Handler()
    assert private.token_authenticated(handler) is False
    handler._token_authenticated = True
    assert private.token_authenticated(handler) is True


def test_the_signal_stop_is_the_servers_own_where_it_has_one():
    server = ServerApp()
    stop = private.signal_stopper(server)
    if hasattr(ServerApp, "_signal_stop"):
        assert stop == server._signal_stop
    else:
        assert stop.__name__ == "stop_loop"
