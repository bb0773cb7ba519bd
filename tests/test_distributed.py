"""lf.distributed in one process on 8 virtual CPU devices (XLA_FLAGS set before JAX starts, in a subprocess).

The checks live in tests/_dist_scripts/mesh8.py and run in one subprocess (JAX's device count is fixed at
start-up); each check is reported as its own test here. What they compare against:

* placement (Mesh/shard/replicate/Tensor.to(sharding)/sharding/is_sharded): each device's shard vs the numpy
  slice it must hold; bad specs -> ShapeError, a mesh larger than the device count -> DeviceError;
* eager ops on sharded tensors: values vs numpy, gradients vs jax.grad; the eager op cache counts a sharded and
  an unsharded operand of the same shape as different entries (misses/hits/currsize counted);
* Graph ``data_parallel`` / ``shard_parameters`` (1-d and 2-d meshes), SGD-momentum and Adam, float32, 10 steps
  of the same global batch: losses and final parameters vs a plain-JAX reference (jax.grad + torch's update
  rules) and vs single-device lazyflow training within 1e-5 relative; compile counts equal single-device ones;
  state_dict keys/shapes in the eager layout with sharded tensors inside; optimizer state sharded like its
  parameter; the trained model usable eagerly afterwards.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dist_scripts"))
import _checks

SCRIPT = "mesh8.py"


@pytest.fixture(scope="module")
def output():
    return _checks.run_script(SCRIPT, devices=8, timeout=600)


@pytest.mark.parametrize("name", _checks.names(SCRIPT))
def test_mesh8(output, name):
    _checks.outcome(output, name)


def test_every_check_reported(output):
    names = _checks.names(SCRIPT)
    assert len(names) >= 12
    reported = [ln.split()[1] for ln in output.splitlines() if ln.startswith(("OK ", "FAIL "))]
    assert reported == names
