"""The quickstart notebook executes top to bottom and reports a learning curve."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_quickstart_notebook_executes(tmp_path):
    nb = nbformat.read(DOCS / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(DOCS)}}).execute()
    out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "final mean return" in out
    final = float(out.split("final mean return ")[1].split()[0])
    assert final > 100  # 150k steps of the shipped config are well past random (~22)
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
