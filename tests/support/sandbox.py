"""What the sandbox's wall tests share with the child process one of them starts (it runs the
same snoop under uvloop): the limits they run code under, and the code that lists the
descriptors the code holds."""

from __future__ import annotations

from services.workers.tools.bwrap import Limits

MiB = 1024 * 1024
LIMITS = Limits(cpu_seconds=2, memory_bytes=256 * MiB, wall_seconds=8, output_chars=4000)

SNOOP = """
import os
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        print(fd, os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
"""
