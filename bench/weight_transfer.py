"""Benchmark resources.weight_transfer between a trainer rank and rollout workers of their own, on CPU:
Ray's object store against one collective broadcast (gloo). (NCCL between GPUs needs a machine with two or
more; this script does not place on GPUs yet.)

    python bench/weight_transfer.py --model smollm2-135m --workers 1,2      # ~2 minutes
    python bench/weight_transfer.py --model qwen2.5-1.5b --workers 1

A trainer rank (fp32) and N rollout workers (the transformers engine, fp32) start from one random model,
which the trainer changes by one update. One sync, timed from the driver as Roles does it:
  store:     trainer.state_dict_for_sync() (to CPU, into the store), every worker's load_weights(ref)
  broadcast: every worker's receive_weights(), trainer.broadcast_weights() (pack, one collective), the loads
Before each transfer's syncs the trainer takes one update; after them each worker scores a batch's tokens
and must match the trainer's log-probs (the new weights arrived). Run it alone: the processes share the
machine's cores.

Writes the timings with the command, commit and machine to --out (bench/record.py; default
docs/results/<date>-weight-transfer-<model>-cpu.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from bench.make_random_model import save_random_model  # noqa: E402
from bench.train_step import MODELS  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m", choices=sorted(MODELS))
    p.add_argument("--workers", default="1,2", help="comma-separated numbers of rollout workers")
    p.add_argument("--repeats", type=int, default=5)
    record.add_out_argument(p, "weight-transfer-MODEL-cpu")
    args = p.parse_args()
    head = record.header()
    out = record.resolve_out(args.out, f"weight-transfer-{args.model}-cpu", smoke=args.model == "tiny")
    counts = [int(n) for n in args.workers.split(",")]

    import ray
    import torch

    from codefu.models.weight_broadcast import WeightBroadcast  # noqa: F401  (fails early if missing)
    from codefu.rollout.actor import make_rollout_actor
    from codefu.rollout.engine import EngineConfig
    from codefu.trainer.actor import make_trainer_ranks
    from codefu.trainer.config import TrainerConfig
    from codefu.trainer.testing import random_batch

    tmp = Path(tempfile.mkdtemp())
    save_random_model(tmp / "model", args.model, 0, "cpu")
    ray.init(include_dashboard=False, log_to_driver=False)
    tcfg = TrainerConfig(model=str(tmp / "model"), device="cpu", dtype="float32", seed=0, lr=1e-3)
    (trainer,) = make_trainer_ranks(tcfg, 1, num_cpus=0.5)
    vocab = json.loads((tmp / "model" / "config.json").read_text())["vocab_size"]
    batch = random_batch(2, 16, min(vocab, 1000), prompt_len=4, seed=0)

    def updated() -> torch.Tensor:
        """One update (the trainer's weights change: each transfer must carry them), its new log-probs."""
        batch.old_logprobs = ray.get(trainer.compute_logprobs.remote(batch))
        ray.get(trainer.update.remote(batch))
        return ray.get(trainer.compute_logprobs.remote(batch))

    results = []
    for n in counts:
        engine = EngineConfig(model=str(tmp / "model"), device="cpu", dtype="float32")
        workers = [make_rollout_actor(engine, num_cpus=0.5) for _ in range(n)]
        ray.get([w.ping.remote() for w in workers])
        address = ray.get(trainer.host_weight_group.remote(n + 1, 300))
        layout = ray.get(trainer.weight_layout.remote())
        ray.get(
            [trainer.join_weight_group.remote(address)]
            + [w.join_weight_group.remote(address, i + 1, layout, 300) for i, w in enumerate(workers)]
        )

        row = {"workers": n}
        for name, sync in (("store", store), ("broadcast", broadcast)):
            want = updated()
            times = [sync(trainer, workers) for _ in range(args.repeats)]
            gaps = ray.get([w.__ray_call__.remote(_gap, batch, want) for w in workers])
            assert max(gaps) < 1e-4, f"{name}: the workers' weights are not the trainer's: {gaps}"
            row[name] = {"seconds": times, "median_s": statistics.median(times), "gap": max(gaps)}
            print(f"{n} worker(s), {name}: " + ", ".join(f"{t:.3f}" for t in times) + " s", flush=True)
        row["broadcast_speedup"] = row["store"]["median_s"] / row["broadcast"]["median_s"]
        results.append(row)
        for w in workers:
            ray.kill(w)
        ray.kill(trainer) if n == counts[-1] else ray.get(trainer.__ray_call__.remote(_leave_group))

    params = {"model": args.model, "workers": counts, "repeats": args.repeats, "device": "cpu"}
    record.write(out, head | {"params": params, "results": results, "torch": torch.__version__})


def store(trainer, workers) -> float:
    import ray

    t0 = time.perf_counter()
    ref = trainer.state_dict_for_sync.remote()
    ray.get([w.load_weights.remote(ref) for w in workers])
    return time.perf_counter() - t0


def broadcast(trainer, workers) -> float:
    import ray

    t0 = time.perf_counter()
    loads = [w.receive_weights.remote() for w in workers]
    ray.get(trainer.broadcast_weights.remote())
    ray.get(loads)
    return time.perf_counter() - t0


def _gap(worker, batch, want) -> float:
    """In the worker's process: its engine's log-probs of `batch` against the trainer's (`want`)."""
    import torch

    model = worker.engine.model
    with torch.no_grad():
        ids = batch.input_ids
        logits = model(input_ids=ids).logits.float()
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0].cpu()
    mask = batch.response_mask[:, 1:].bool()
    return float((lp[mask] - want[:, 1:][mask]).abs().max())


def _leave_group(trainer) -> None:
    trainer._weight_group.close()
    trainer._weight_group = trainer._weight_store = None


if __name__ == "__main__":
    main()
