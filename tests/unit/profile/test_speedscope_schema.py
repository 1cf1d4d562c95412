"""The speedscope file of ``%%mpirun --profile`` against speedscope's own schema, taken from its
npm package (the registry is where the panel's build gets its packages too)."""
import json
import subprocess
import tarfile
from collections import Counter

import jsonschema
import pytest

from mlp_magic.profile.pure.speedscope import speedscope_json
from mlp_magic.stacks.pure.frames import CELL, Frame

SPEEDSCOPE = "speedscope@1.22.2"
SCHEMA = "package/dist/release/file-format-schema.json"


def _schema(folder) -> dict:
    packed = subprocess.run(["npm", "pack", SPEEDSCOPE, "--pack-destination", str(folder), "--silent"],
                            capture_output=True, text=True, timeout=180, check=True).stdout.split()[-1]
    with tarfile.open(folder / packed) as archive:
        return json.load(archive.extractfile(SCHEMA))


def test_the_file_is_what_speedscope_reads(tmp_path):
    stacks = {0: Counter({(Frame(CELL, 3, "<module>"), Frame("libmpi.so.40", 0, "MPI_Allreduce")): 7}),
              1: Counter({(Frame(CELL, 3, "<module>"),): 2}), 2: Counter()}
    schema = _schema(tmp_path)
    jsonschema.validate(json.loads(speedscope_json(stacks, 50, "cell 4")), schema)
    broken = json.loads(speedscope_json(stacks, 50, "cell 4"))
    del broken["profiles"][0]["weights"]
    with pytest.raises(jsonschema.ValidationError):   # the schema does check a profile's weights
        jsonschema.validate(broken, schema)
