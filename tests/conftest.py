"""Suite-wide settings, applied before any test module imports lazyflow.

* The compile cache lives in a directory of the suite's own (``$XDG_CACHE_HOME/lazyflow-tests``, default
  ``~/.cache/lazyflow-tests``; bounded like any lazyflow cache), not the user's ``~/.cache/lazyflow``: tests never
  fill or read a user's cache, and a second run compiles only what changed (a cold run spends ~60% of its time in
  XLA's compiler). ``LAZYFLOW_COMPILE_CACHE_DIR`` set by the caller wins.
* A plain ``pytest`` runs on two cores: ``tests/_sharding.py`` shares the test files with a worker session.
* The on-disk eager kernel store (``lazyflow/eager/kernel_store.py``) is off (``LAZYFLOW_KERNEL_CACHE=0``): many
  tests count how often a rule is traced, and a kernel an earlier test stored is loaded without tracing. The store's
  own tests (tests/test_kernel_store.py) switch it on, in subprocesses and in process.
"""

import os

import pytest
from _sharding import (  # noqa: F401 -- pytest finds these hooks by name in this module
    pytest_collection_modifyitems,
    pytest_runtestloop,
    pytest_sessionfinish,
    pytest_terminal_summary,
)

if "LAZYFLOW_COMPILE_CACHE_DIR" not in os.environ:
    _base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ["LAZYFLOW_COMPILE_CACHE_DIR"] = os.path.join(_base, "lazyflow-tests")
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
