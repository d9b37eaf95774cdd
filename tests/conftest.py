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
