"""The 24-point grid of ``cartpole_search.py``'s space (4 learning rates x 3 entropy x 2 clip coefficients), no
pruning: what the search is compared with (wall time, best trial).

    python -m launch.sweep configs/sweeps/cartpole_search_grid.py --jobs 1
"""

from configs.sweeps.cartpole_search import OVERRIDES
from launch.sweep import Sweep


def sweep() -> Sweep:
    return Sweep(
        name="cartpole_search_grid",
        configs=["configs/cartpole_ppo.py"],
        seeds=[1],
        overrides=OVERRIDES,
        grid={"trainer.lr": [1e-4, 3e-4, 1e-3, 3e-3], "algo.ent_coef": [1e-4, 3e-3, 3e-2],
              "algo.clip_coef": [0.1, 0.3]},
    )
