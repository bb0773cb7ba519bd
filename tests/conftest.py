"""Suite-wide settings, applied before any test module imports lazyflow.

* The compile cache lives in a fresh directory per test session (not the user's ``~/.cache/lazyflow``): a second
  run of the suite behaves as the first (CI's), and tests never fill or read a user's cache.
* The on-disk eager kernel store (``lazyflow/eager/kernel_store.py``) is off (``LAZYFLOW_KERNEL_CACHE=0``): many
  tests count how often a rule is traced, and a kernel an earlier test stored is loaded without tracing. The store's
  own tests (tests/test_kernel_store.py) switch it on, in subprocesses and in process.
"""

import atexit
import os
import shutil
import tempfile

import pytest

if "LAZYFLOW_COMPILE_CACHE_DIR" not in os.environ:
    _dir = tempfile.mkdtemp(prefix="lazyflow-test-cache-")
    os.environ["LAZYFLOW_COMPILE_CACHE_DIR"] = _dir
    atexit.register(shutil.rmtree, _dir, True)
os.environ.setdefault("LAZYFLOW_KERNEL_CACHE", "0")


@pytest.fixture
def torch_validates_distributions():
    """torch's reference validates its arguments (its default), whatever ran earlier in this process: the first
    torch.compile anywhere in the test session switches torch.distributions' validation off for good (torch's
    dynamo does so when it installs itself), and the distribution tests compare lazyflow's errors with torch's."""
    import torch  # only the tests that use this fixture need torch

    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)
