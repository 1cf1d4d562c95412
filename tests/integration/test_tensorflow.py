"""TensorFlow in a World: every rank gets ``TF_CONFIG`` as Azure ML sets it for a TensorFlow job
(each rank a worker at its host with a port free there, the task index its rank), so that
``MultiWorkerMirroredStrategy`` finds its peers with the user's code unchanged. Before, no rank
had the variable, and the strategy ran each rank alone (one replica)."""
import json

import pytest

from tests.integration.conftest import run

READ = """%%mpirun -o config_out
import os
print(os.environ.get("TF_CONFIG"))
"""

# TensorFlow's own multi-worker quick start, cut to one collective: the strategy reads TF_CONFIG
ALL_REDUCE = """%%mpirun -o reduce_out
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = strategy.cluster_resolver.task_id

@tf.function
def step():
    return tf.distribute.get_replica_context().all_reduce("sum", tf.constant(float(task + 1)))

total = strategy.experimental_local_results(strategy.run(step))[0]
print(task, strategy.num_replicas_in_sync, float(total))
"""


@pytest.mark.slow
def test_every_rank_has_tf_config_with_every_rank_a_worker_and_its_rank_the_index(fresh_world, capsys):
    ip = fresh_world
    assert run(ip, READ) is None, capsys.readouterr().out[-3000:]
    configs = [json.loads(r.stdout) for r in ip.user_ns["config_out"]]
    workers = configs[0]["cluster"]["worker"]
    assert [c["cluster"] for c in configs] == [{"worker": workers}] * 4   # one cluster for all
    assert [c["task"] for c in configs] == [{"type": "worker", "index": rank} for rank in range(4)]
    assert {c["environment"] for c in configs} == {"cloud"}
    hosts = [worker.rsplit(":", 1) for worker in workers]
    assert {host for host, _ in hosts} == {"127.0.0.1"}   # a World on this machine alone
    assert len({int(port) for _, port in hosts}) == 4, workers   # a port of its own per rank


@pytest.mark.slow
def test_multi_worker_mirrored_strategy_reduces_across_all_ranks(fresh_world, capsys):
    pytest.importorskip("tensorflow", reason="tensorflow-cpu is in the test extra where PyPI has a wheel "
                        "(x86-64 Linux, Python >= 3.10)")
    ip = fresh_world
    assert run(ip, ALL_REDUCE) is None, capsys.readouterr().out[-3000:]
    printed = [r.stdout.split()[-3:] for r in ip.user_ns["reduce_out"]]
    assert printed == [[str(rank), "4", "10.0"] for rank in range(4)], printed   # 1 + 2 + 3 + 4
