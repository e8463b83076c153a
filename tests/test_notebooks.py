"""The notebooks: plain Python sources in jupytext's percent format (``notebooks/NN-*.py``, the
files to read, review and edit), each paired with an ``.ipynb`` generated from it without
outputs.  Every notebook runs top to bottom (from the ``notebooks/`` folder, kernel
``python3``) and ends with a conclusion printed from its own numbers.

After editing a source, regenerate its notebook (``--update`` keeps the cell ids)::

    jupytext --update --to ipynb notebooks/NN-name.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.py"))
PAIRED = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in nb.cells]


def test_every_source_has_its_notebook() -> None:
    assert len(SOURCES) == 5
    assert [p.stem for p in PAIRED] == [p.stem for p in SOURCES]


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_in_sync_with_its_source(source: Path) -> None:
    expected = jupytext.read(source)
    committed = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    assert _cells(committed) == _cells(expected), (
        f"{source.stem}.ipynb differs from {source.name}: run "
        f"jupytext --update --to ipynb notebooks/{source.name}")
    assert committed.metadata.get("kernelspec") == expected.metadata.get("kernelspec")


@pytest.mark.parametrize("path", PAIRED, ids=[p.stem for p in PAIRED])
def test_notebook_is_clean(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, path.name
    assert nb.cells[-2].source.startswith("## Conclusion"), path.name


def test_sources_are_lint_clean() -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "notebooks"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_runs(source: Path) -> None:
    nb = jupytext.read(source)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    assert text.strip(), f"{source.name}: the conclusion printed nothing"
