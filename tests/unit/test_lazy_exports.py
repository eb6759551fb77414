"""Loading and checking a run config, and building `codefu`'s parser, import no torch (packages that
re-export torch code load it on first use: codefu.lazy); each lazily exported name is the one its module
defines."""

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from codefu.lazy import lazy_exports

LAZY_PACKAGES = ["codefu.algo", "codefu.models", "codefu.rollout", "codefu.trainer"]


def test_the_cli_and_a_config_check_import_no_torch(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("trainer:\n  model: smollm2\n  lora:\n    rank: 8\nrollout:\n  engine: native\n")
    code = f"""
import sys
from codefu.cli import build_parser
from codefu.config import load_config
from codefu.orchestrator.cli import check_config
from codefu.orchestrator.config import RunConfig
build_parser().parse_args(["train", "--config", {str(config)!r}])
cfg = load_config(RunConfig, {str(config)!r}, ["trainer.kl_kind=k3", "trainer.policy_loss=gspo"], check=check_config)
assert cfg.trainer.lora.rank == 8 and cfg.rollout.engine == "native", cfg
print(sorted(m for m in ("torch", "transformers", "safetensors", "ray") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def assigned_at_top_level(module) -> set[str]:
    """Names a module's source binds itself (assignments, defs, classes), not those it imports."""
    tree = ast.parse(Path(inspect.getfile(module)).read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_export_is_its_modules(package):
    """Each name comes from the module that defines it (its one owner), not one that imports it."""
    pkg = importlib.import_module(package)
    for name, module in pkg._EXPORTS.items():
        defining = importlib.import_module(f"{package}.{module}")
        assert getattr(pkg, name) is getattr(defining, name), f"{package}.{name}"
        assert name in assigned_at_top_level(defining), (
            f"{package}.{name} is not defined in {defining.__name__}"
        )
    assert sorted(pkg.__all__) == sorted(pkg._EXPORTS)
    # a submodule of an export's name would shadow it once imported (the import system sets the package's
    # attribute to the module): `from package import name` would then give the module
    submodules = {m.name for m in pkgutil.iter_modules(pkg.__path__)}
    assert submodules.isdisjoint(pkg._EXPORTS), sorted(submodules & set(pkg._EXPORTS))
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'no_such_name'"):
        pkg.no_such_name  # noqa: B018


def test_a_wrong_lazy_export_is_an_attribute_error_naming_it():
    getattr_, _ = lazy_exports("codefu.models", {"nothing_here": "sources"})
    with pytest.raises(AttributeError, match="nothing_here"):
        getattr_("nothing_here")
    with pytest.raises(AttributeError, match="module 'codefu.models' has no attribute 'other'"):
        getattr_("other")
