"""engine/quiet replaces ipykernel's private hooks only where all of them exist: an ipykernel
that moved one keeps its own behaviour (a 'busy' and an 'idle' per request), never half-patched."""
from types import SimpleNamespace

from mlp_magic.engine.quiet import KERNEL_HOOKS, quieten


def a_kernel(missing=()):
    kernel = SimpleNamespace(session=SimpleNamespace(send=lambda *a, **k: None))
    for name in KERNEL_HOOKS:
        if name not in missing:
            setattr(kernel, name, lambda *a, **k: None)
    return kernel


def test_every_hook_present_is_replaced():
    kernel = a_kernel()
    before = {name: getattr(kernel, name) for name in KERNEL_HOOKS}
    assert quieten(kernel) is True
    assert kernel._publish_status is not before["_publish_status"]
    assert kernel.finish_metadata is not before["finish_metadata"]


def test_a_missing_hook_leaves_the_kernel_untouched():
    for name in KERNEL_HOOKS:
        kernel = a_kernel(missing=(name,))
        before = dict(vars(kernel))
        send = kernel.session.send
        assert quieten(kernel) is False
        assert vars(kernel) == before and kernel.session.send is send


def test_no_kernel_or_no_session_is_not_quietened():
    assert quieten(None) is False
    kernel = a_kernel()
    del kernel.session
    assert quieten(kernel) is False
