"""EXAMPLE: submit a codefu training run as a SageMaker training job with the SageMaker Python SDK's
ModelTrainer. Not run by any test (there is no AWS here); needs `pip install sagemaker` and AWS
credentials.

    python examples/sagemaker/submit.py --image ACCOUNT.dkr.ecr.REGION.amazonaws.com/codefu:latest \
        --role arn:aws:iam::ACCOUNT:role/SageMakerRole --instance-type ml.p5.48xlarge --instances 2

    # heterogeneous: GPU instances train, CPU instances add judge capacity
    python examples/sagemaker/submit.py ... --instance-type ml.p5.48xlarge --instances 2 \
        --judge-instance-type ml.c7i.48xlarge --judge-instances 2

Every host runs the same `command`; `codefu launch` reads /opt/ml/input/config/resourceconfig.json, the
head (algo-1, or the first host of the `train` group) runs `codefu train`, and the job ends when every
host has exited with the training's status (see docs/launcher.md).
"""

from __future__ import annotations

import argparse
import secrets
import shlex

from sagemaker.modules.configs import CheckpointConfig, Compute, InstanceGroup, SourceCode, StoppingCondition
from sagemaker.modules.train import ModelTrainer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", required=True, help="the image built from examples/sagemaker/Dockerfile")
    p.add_argument("--role", required=True, help="SageMaker execution role ARN")
    p.add_argument("--instance-type", default="ml.p5.48xlarge")
    p.add_argument("--instances", type=int, default=2)
    p.add_argument("--judge-instance-type", help="add a CPU instance group for the judge")
    p.add_argument("--judge-instances", type=int, default=0)
    p.add_argument("--config", default="/opt/codefu/configs/codefu-7b.yaml", help="path inside the image")
    p.add_argument("--checkpoints", help="s3://bucket/prefix: /opt/ml/checkpoints is synced there")
    p.add_argument("--max-hours", type=float, default=48)
    p.add_argument("overrides", nargs="*", help="codefu train overrides, e.g. rollout.n=8")
    args = p.parse_args()

    launch = ["codefu", "launch"]
    if args.judge_instance_type:
        # the head (and the training driver) on a GPU host; judge work can target codefu-group=judge
        compute = Compute(
            instance_groups=[
                InstanceGroup(
                    instance_group_name="train",
                    instance_type=args.instance_type,
                    instance_count=args.instances,
                ),
                InstanceGroup(
                    instance_group_name="judge",
                    instance_type=args.judge_instance_type,
                    instance_count=args.judge_instances,
                ),
            ],
            volume_size_in_gb=500,
        )
        launch += ["--head-group", "train"]
    else:
        compute = Compute(
            instance_type=args.instance_type, instance_count=args.instances, volume_size_in_gb=500
        )
    train = [
        "codefu",
        "train",
        "--config",
        args.config,
        "--run-dir",
        "/opt/ml/checkpoints/run",
        *args.overrides,
    ]

    trainer = ModelTrainer(
        training_image=args.image,
        role=args.role,
        base_job_name="codefu-grpo",
        source_code=SourceCode(command=shlex.join([*launch, "--", *train])),
        compute=compute,
        # One token for the whole job: every host's Ray authenticates with it (docs/launcher.md,
        # "Authentication"). It is visible to whoever can describe the job; use a fresh one per job.
        environment={"RAY_AUTH_TOKEN": secrets.token_hex(32)},
        stopping_condition=StoppingCondition(max_runtime_in_seconds=int(args.max_hours * 3600)),
        checkpoint_config=CheckpointConfig(s3_uri=args.checkpoints, local_path="/opt/ml/checkpoints")
        if args.checkpoints
        else None,
    )
    trainer.train(wait=False)


if __name__ == "__main__":
    main()
