"""The sandbox's seccomp filter: a classic BPF program (what `bwrap --seccomp` loads) that
refuses with EPERM the system calls a sandboxed Python program has no use for and kernel
exploits like (keyrings, mounts, module loading, ptrace, bpf, perf, io_uring, ...), and allows
the rest. Foreign architectures and x32 calls are killed outright."""

from __future__ import annotations

import os
import struct

from services.workers.tools.errors import ToolNotConfigured

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_DENIED = {
    # name: (x86_64, aarch64)
    "ptrace": (101, 117),
    "syslog": (103, 116),
    "acct": (163, 89),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "init_module": (175, 105),
    "delete_module": (176, 106),
    "finit_module": (313, 273),
    "quotactl": (179, 60),
    "lookup_dcookie": (212, 18),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "unshare": (272, 97),
    "setns": (308, 268),
    "perf_event_open": (298, 241),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
}
_X86_ONLY = {"iopl": 172, "ioperm": 173}
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_KILL, _RET_EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1
_X32_BIT = 0x40000000


def denied_syscalls() -> dict[str, int]:
    """The refused calls and their numbers on this machine's architecture."""
    arch = os.uname().machine
    if arch not in _AUDIT_ARCH:
        return {}
    index = 0 if arch == "x86_64" else 1
    calls = {name: numbers[index] for name, numbers in _DENIED.items()}
    if arch == "x86_64":
        calls.update(_X86_ONLY)
    return calls


def seccomp_filter() -> bytes:
    arch = os.uname().machine
    audit = _AUDIT_ARCH.get(arch)
    if audit is None:
        raise ToolNotConfigured(
            "python_run", f"no seccomp filter is defined for the {arch} architecture"
        )
    numbers = sorted(set(denied_syscalls().values()))
    prog: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 1, 0, audit),
        (_RET_K, 0, 0, _RET_KILL),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":
        prog += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _RET_KILL)]
    for i, nr in enumerate(numbers):
        # Match: jump over the remaining tests and the ALLOW, onto the EPERM at the end.
        prog.append((_JEQ_K, len(numbers) - i, 0, nr))
    prog += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_EPERM)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)
