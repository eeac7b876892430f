"""The code blocks of python/README.md, of the repository's README.md's
Python section and of docs/quickstart.md: every ```python block runs, each in a fresh interpreter
from the repository root (so `examples/...` paths resolve as documented);
the ```sh blocks of python/README.md are the install and test commands
this project documents.

A block preceded by ``<!-- doctest: requires MODULE -->`` needs MODULE: it
is skipped without it (for jax and dask, a failure under
EGRAD_REQUIRE_INTEROP=1, as the other interop tests)."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, require

# The docs whose ```python blocks run here (tests/docs.rs checks that every
# doc with a python block is named in this file).
DOCS = ["python/README.md", "README.md", "docs/quickstart.md"]
PY_README = ROOT / "python" / "README.md"
ROOT_README = ROOT / "README.md"

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
MARK = re.compile(r"<!-- doctest: requires ([\w.]+) -->\s*$")
# Modules whose examples must run in CI (EGRAD_REQUIRE_INTEROP=1); others
# (torch) are optional everywhere.
REQUIRED_INTEROP = {"jax", "dask.distributed"}


def blocks(path, lang):
    """``(line, requirement, code)`` of each ```lang block of ``path``."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) != lang:
            continue
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        line = text.count("\n", 0, m.start()) + 1
        out.append((line, mark.group(1) if mark else None, m.group(2)))
    return out


def python_blocks():
    found = [(ROOT / doc, *b) for doc in DOCS for b in blocks(ROOT / doc, "python")]
    return [pytest.param(p, line, req, code, id=f"{p.relative_to(ROOT)}:{line}") for p, line, req, code in found]


def test_the_readmes_have_python_blocks():
    ids = [p.id for p in python_blocks()]
    assert sum(i.startswith("README.md") for i in ids) >= 1, ids
    assert sum(i.startswith("python/README.md") for i in ids) >= 5, ids
    assert sum(i.startswith("docs/quickstart.md") for i in ids) >= 1, ids


@pytest.mark.parametrize("path, line, requirement, code", python_blocks())
def test_python_block_runs(path, line, requirement, code):
    if requirement in REQUIRED_INTEROP:
        require(requirement)
    elif requirement is not None:
        pytest.importorskip(requirement)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, f"{path.name}:{line} failed:\n{run.stdout}\n{run.stderr}"


# The sh blocks of python/README.md: each command documented, and what it
# names exists (a package to install, tests to run).
DOCUMENTED_COMMANDS = {
    "pip install ./python": ROOT / "python" / "pyproject.toml",
    "python -m pytest python/tests -q": ROOT / "python" / "tests",
}


def test_sh_blocks_are_the_documented_commands():
    commands = []
    for _, _, code in blocks(PY_README, "sh"):
        commands += [line.split("#")[0].strip() for line in code.splitlines() if line.strip()]
    assert sorted(commands) == sorted(DOCUMENTED_COMMANDS), commands
    for command, path in DOCUMENTED_COMMANDS.items():
        assert path.exists(), (command, path)


def test_importing_egrad_imports_no_framework():
    # As documented: egrad.jax and egrad.torch import JAX and PyTorch when
    # `function` is first called, not before.
    code = "import sys, egrad, egrad.jax, egrad.torch; print(sorted(m for m in ('jax', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
