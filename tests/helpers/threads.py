"""`one_thread`: a module-wide pytest fixture (import it into a test module) that runs torch with one
intra-op thread: tiny ops on a shared 2-core machine are ~30x faster on one thread than on two that
contend."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
