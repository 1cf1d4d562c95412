"""The docs: README and ARCHITECTURE.md stay short, every setting has its line in the reference,
and README's links into the docs lead somewhere. (The site itself is built by
scripts/build-docs.sh in CI, warnings as errors: dead links between its pages, options that do
not exist, notebooks that fail.)"""
import os
import re

from mlp_magic import config

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def test_readme_and_the_map_stay_within_their_sizes():
    assert len(_read("README.md").splitlines()) <= 250
    assert len(_read("ARCHITECTURE.md").splitlines()) <= 350


def test_every_setting_mlp_magic_reads_is_in_the_environment_reference():
    page = _read("docs/reference/environment.md")
    names = [value for name, value in vars(config).items() if name.isupper() and isinstance(value, str)
             and value.startswith("MLP_MAGIC_")]
    names += list(config.CONTROLLER_ADDRESS)
    assert len(names) >= 12
    missing = [name for name in names if f"`{name}`" not in page]
    assert missing == []


def test_the_readmes_links_lead_to_files():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", _read("README.md"))
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert len(local) >= 20
    assert [link for link in local if not os.path.exists(os.path.join(ROOT, link))] == []
