"""The examples under python/examples run and say what they should."""

import importlib.util
import pathlib
import subprocess
import sys

from conftest import require

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_jax_check_agrees_with_jax():
    require("jax")
    rows = load("jax_check").compare()
    assert len(rows) == 4
    for case, worst in rows:
        assert worst < 1e-5, case
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "jax_check.py")], capture_output=True, text=True, check=True
    ).stdout
    assert out.count("egrad and JAX agree") == 4, out
