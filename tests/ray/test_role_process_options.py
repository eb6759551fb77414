"""A role's process options on a real Ray node: the CUDA allocator's settings (`trainer.cuda_allocator`)
reach the process's environment before torch could read them; CPU roles get every core."""

from __future__ import annotations

import os

import ray

from codefu.orchestrator.roles import role_process_options


def _in_process(options: dict, name: str) -> str | None:
    def environment(name: str) -> str | None:  # defined here: pickled by value, as this module is no package
        return os.environ.get(name)

    return ray.get(ray.remote(environment).options(**options).remote(name))


def test_gpu_trainer_processes_get_the_allocator_settings(local_ray):
    options = role_process_options(1, "expandable_segments:True,max_split_size_mb:512")
    assert _in_process(options, "PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True,max_split_size_mb:512"


def test_gpu_roles_without_settings_keep_torchs_default(local_ray):
    assert role_process_options(1) == {}
    assert _in_process(role_process_options(1), "PYTORCH_CUDA_ALLOC_CONF") is None


def test_cpu_roles_use_every_core_and_no_cuda_settings(local_ray, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    options = role_process_options(0, "expandable_segments:True")
    assert _in_process(options, "OMP_NUM_THREADS") == str(os.cpu_count())
    assert _in_process(options, "PYTORCH_CUDA_ALLOC_CONF") is None


def test_cpu_roles_take_the_drivers_thread_count_when_set(local_ray, monkeypatch):
    # several runs sharing one machine each set OMP_NUM_THREADS to their share of the cores
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert _in_process(role_process_options(0), "OMP_NUM_THREADS") == "3"


def test_cpu_roles_that_run_at_once_take_half_the_cores_each(local_ray, monkeypatch):
    # loop.mode one_step_off / async: the rollout worker and the trainer compute at the same time
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    half = str(max(1, (os.cpu_count() or 1) // 2))
    assert _in_process(role_process_options(0, concurrent=True), "OMP_NUM_THREADS") == half
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the driver's own share still wins
    assert _in_process(role_process_options(0, concurrent=True), "OMP_NUM_THREADS") == "3"
