"""CI must run the README's test command, word for word."""
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _bash_blocks(path):
    with open(os.path.join(ROOT, path)) as handle:
        return re.findall(r"```bash\n(.*?)```", handle.read(), re.S)


def test_readme_has_exactly_two_commands_and_ci_runs_the_test_one():
    blocks = [b.strip() for b in _bash_blocks("README.md")]
    assert len(blocks) == 2, blocks
    run_command, test_command = blocks
    assert "python -m mlp_magic.demo" in run_command
    assert "pytest" in test_command
    with open(os.path.join(ROOT, ".ci", "run")) as handle:
        ci_lines = [line.strip() for line in handle]
    assert test_command in ci_lines
