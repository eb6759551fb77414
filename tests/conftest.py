from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def codefu_easy() -> Path:
    """The real CodeFu training problems (808 + 32), beside the repository as in CI."""
    path = SHARED_DATA / "codefu-easy"
    if not path.is_dir():
        pytest.skip(f"{path} is not present (it ships beside the repository, in shared/)")
    return path
