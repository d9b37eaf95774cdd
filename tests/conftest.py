import os

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # two xdist workers on two cores: one thread each, or tiny-model tests thrash
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """Tiny models: one intra-op thread is fastest; a second only spins when pytest -n 2 fills both cores.

    Modules opt in with `pytestmark = pytest.mark.usefixtures("one_thread")`.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
