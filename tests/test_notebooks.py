"""The notebooks: generated from ``notebooks/_build.py``, committed without outputs, and each
runs top to bottom (from the ``notebooks/`` folder, kernel ``python3``)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PATHS = sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"))


def _builder():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("notebooks_build", NOTEBOOKS / "_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_notebooks_are_generated_and_clean(tmp_path: Path) -> None:
    build = _builder()
    assert sorted(p.name for p in PATHS) == sorted(build.NOTEBOOKS)
    for path in build.build(tmp_path):
        committed = NOTEBOOKS / path.name
        assert json.loads(committed.read_text()) == json.loads(path.read_text()), (
            f"{path.name} differs from notebooks/_build.py: run python notebooks/_build.py")
    for path in PATHS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, path.name
        assert nb.cells[-2].source.startswith("## Conclusion"), path.name


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_notebook_runs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()
    last = nb.cells[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    assert text.strip(), f"{path.name}: the conclusion printed nothing"
