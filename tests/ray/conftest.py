import pytest
import ray


@pytest.fixture(scope="package")
def local_ray():
    # the node belongs to launch group "cpu", as `codefu launch` marks nodes (see test_judge_pool)
    ray.init(num_cpus=2, resources={"codefu-group-cpu": 1}, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
