"""TensorFlow's ``TF_CONFIG`` for a rank of a World (pure): every rank a worker, as Azure ML sets it
for a TensorFlow job, so that ``MultiWorkerMirroredStrategy`` finds its peers and its own task."""
from __future__ import annotations

import json


def tf_config(workers: list, index: int) -> str:
    """The variable's value: the cluster's workers ("address:port", one per rank, in rank order)
    and this rank's task (``index``: its rank)."""
    return json.dumps({"cluster": {"worker": list(workers)}, "task": {"type": "worker", "index": index},
                       "environment": "cloud"}, separators=(",", ":"))


def tf_workers(addresses: list, ports: list) -> list:
    """"address:port" of each rank, in rank order; an IPv6 address in brackets (gRPC's form)."""
    return [f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
            for address, port in zip(addresses, ports)]
