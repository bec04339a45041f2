"""``python -m launch.sweep SWEEP.py [--dry-run] [--jobs N] [--slurm] [--report]`` (see ``launch/sweep/cli.py``)."""

import sys

from launch.sweep.cli import main

sys.exit(main())
