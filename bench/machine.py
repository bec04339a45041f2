"""One line naming the machine a benchmark ran on; every script in bench/ prints it."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    try:
        import jax

        devices = jax.devices()
        backend = f"jax {jax.__version__}, {len(devices)} x {devices[0].device_kind} ({devices[0].platform})"
    except Exception as err:  # a broken accelerator install should not hide the CPU line
        backend = f"jax unavailable ({err})"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{platform.platform()} | {cpu} | {os.cpu_count()} cpus | Python {platform.python_version()} | "
        f"{backend} | load average {load}"
    )
