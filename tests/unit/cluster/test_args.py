"""``%mlp_cluster``'s line."""
from __future__ import annotations

import pytest

from mlp_magic.cluster.args import parse_cluster_args
from mlp_magic.cluster.widget import cluster_view
from mlp_magic.errors import MlpMagicError
from tests.unit.cluster.states import H200


def test_cluster_args_defaults_and_every_option():
    assert parse_cluster_args("") == {"hostfile": None, "hosts": None, "auto_refresh": None, "timeout": 5.0,
                                      "probe": True, "gpus": None}
    args = parse_cluster_args("-H gpu[0-1]:8 --refresh 2.5 --timeout=3 --no-probe "
                              "--topo-file gpu0=topo/a.txt --topo-file='gpu1=my topo.txt'")
    assert args == {"hostfile": None, "hosts": "gpu[0-1]:8", "auto_refresh": 2.5, "timeout": 3.0,
                    "probe": False, "gpus": {"gpu0": "topo/a.txt", "gpu1": "my topo.txt"}}
    assert parse_cluster_args("--hostfile ~/hosts")["hostfile"] == "~/hosts"


@pytest.mark.parametrize("line, message", [
    ("--refresh soon", "--refresh expects a number of seconds > 0, got 'soon'"),
    ("--refresh 0", "--refresh expects a number of seconds > 0, got '0'"),
    ("--timeout=-1", "--timeout expects a number of seconds > 0, got '-1'"),
    ("--refresh nan", "--refresh expects a number of seconds > 0, got 'nan'"),
    ("--topo-file gpu0", "--topo-file expects HOST=FILE (a saved `nvidia-smi topo -m`), got 'gpu0'"),
    ("--topo-file =a.txt", "--topo-file expects HOST=FILE"),
    ("--topo-file a=1 --topo-file a=2", "--topo-file gives host 'a' twice"),
    ("-H", "-H needs a value"),
    ("-H ''", "-H needs a non-empty value"),
    ("-H a:1 -H b:1", "-H given twice"),
    ("--hostfile f -H a:1", "give --hostfile or -H, not both"),
    ("--no-probe=yes", "--no-probe takes no value, got 'yes'"),
    ("--bogus", "unknown argument '--bogus' (usage: %mlp_cluster [--hostfile FILE"),
    ("worker0", "unknown argument 'worker0'"),
    ("-H 'unclosed", "cannot split \"-H 'unclosed\": No closing quotation"),
])
def test_cluster_args_errors(line, message):
    with pytest.raises(MlpMagicError) as caught:
        parse_cluster_args(line)
    assert str(caught.value).startswith("%mlp_cluster: " + message)


def test_cluster_args_feed_cluster_view(tmp_path):
    saved = tmp_path / "h200.txt"
    saved.write_text(H200.read_text())
    args = parse_cluster_args("-H hgx0:8,hgx1:8 --topo-file hgx0=%s --no-probe" % saved)
    view = cluster_view(check_reachable=False, state_dir=str(tmp_path), **args)
    hgx0, hgx1 = view.state.hosts
    assert hgx0.gpus.links["GPU0"]["GPU7"] == "NV18" and hgx1.gpus is None
    view.close()
