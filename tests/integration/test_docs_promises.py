"""What the guides promise, in the kernel users run (issue 49): each finding of a new user who
followed the docs, as a test that failed on the code they met."""
import json

import pytest

from tests.kernel import Kernel


@pytest.fixture(scope="module")
def kernel():
    started = Kernel(echo=False)
    yield started
    started.shutdown()


def test_allrun_json_in_the_magic_as_the_install_guide_lists_it(kernel):
    """The guide lists `--json` for `%allrun`; the magic refused it ("unknown option")."""
    run = kernel.run_cell("%allrun --json echo hello")
    assert run.success, run.shown
    results = json.loads(run.stdout)
    assert [(r["host"], r["status"], r["stdout"]) for r in results] == [("localhost", "ok", "hello\n")]
    assert not run.of_type("display_data")   # the data alone, no grouped summary around it
