"""The quickstart notebook executes top to bottom from a folder that is not the repository: train with evaluations,
resume, a learning curve saved to the run folder, the best checkpoint played back, a small sweep."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_quickstart_notebook_executes(tmp_path):
    nb = nbformat.read(DOCS / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "jax devices: [CpuDevice(id=0)]" in out, out[:500]
    assert "final mean return" in out
    final = float(out.split("final mean return ")[1].split()[0])
    assert final > 100 and "after 149,512 steps" in out, out  # resumed from 100k to 150k; random play is ~22
    run_dir = Path(out.split("curve saved to ")[1].split("/curve.png")[0])
    assert (run_dir / "curve.png").exists() and (run_dir / "eval.jsonl").exists()
    assert "-> reproduced" in out, out  # the best checkpoint played back gives its recorded returns
    assert "sweep exit code 0" in out and "CleanRL ppo.py" in out, out[-3000:]
    assert any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
