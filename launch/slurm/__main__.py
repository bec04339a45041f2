"""``python -m launch.slurm ...``: the command line of ``launch.slurm.submit`` (submit, status, stop)."""

import sys

from launch.slurm.submit import main

sys.exit(main())
