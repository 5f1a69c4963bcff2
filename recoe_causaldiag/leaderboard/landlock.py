"""Landlock (Linux ≥ 5.13, no privileges needed): confine the calling process and every process it starts to
reading some folders and writing others; from ABI 4 on, to no TCP bind or connect at all; from ABI 6 on, to
signalling and reaching abstract unix sockets only within its own sandbox (scoping). A confined process also cannot
read the /proc entries (environ, mem) of processes outside its sandbox (the kernel's Landlock ptrace scoping),
unless it holds CAP_SYS_PTRACE: a process running as root drops its capabilities first (`drop_capabilities`).

The kernel interface (`landlock_create_ruleset`, `landlock_add_rule`, `landlock_restrict_self`; see the
kernel's Documentation/userspace-api/landlock.rst) is called through ctypes: no maintained Python binding is
packaged for this stack.
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable
from functools import cache
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on every Linux architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_CAPABILITY_VERSION_3 = 0x20080522

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
READ_ONLY = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
NETWORK_ABI, SCOPING_ABI = 4, 6
FILESYSTEM, NETWORK, SCOPING = "Landlock filesystem", "Landlock TCP", "Landlock signal and abstract-socket scoping"
ALL_LAYERS = (FILESYSTEM, NETWORK, SCOPING)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _check(result: int, call: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{call} failed: {os.strerror(errno)}")
    return result


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing, disabled or blocked (e.g. by seccomp)."""
    try:
        version = _libc().syscall(
            ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_rights(abi: int) -> int:
    """Every filesystem right the kernel's ABI version can restrict."""
    rights = (1 << 13) - 1
    rights |= REFER if abi >= 2 else 0
    rights |= TRUNCATE if abi >= 3 else 0
    rights |= IOCTL_DEV if abi >= 5 else 0
    return rights


def layers(abi: int) -> tuple[str, ...]:
    """What `confine` restricts on a kernel of this ABI version: the filesystem, TCP, signals and abstract
    sockets."""
    return (FILESYSTEM,) * (abi >= 1) + (NETWORK,) * (abi >= NETWORK_ABI) + (SCOPING,) * (abi >= SCOPING_ABI)


def _ruleset_attr(abi: int, without: frozenset[str]) -> tuple[_RulesetAttr, int]:
    """The ruleset of every right this ABI can restrict (leaving out the layers named in `without`), and the size
    of the structure this ABI knows (an older kernel refuses the larger one)."""
    net = BIND_TCP | CONNECT_TCP if abi >= NETWORK_ABI and NETWORK not in without else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= SCOPING_ABI and SCOPING not in without else 0
    fields = 3 if abi >= SCOPING_ABI else 2 if abi >= NETWORK_ABI else 1
    return _RulesetAttr(handled_rights(abi), net, scoped), fields * ctypes.sizeof(ctypes.c_uint64)


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _check(
            _libc().syscall(
                ctypes.c_long(_ADD_RULE),
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            ),
            f"landlock_add_rule({path})",
        )
    finally:
        os.close(fd)


def drop_capabilities() -> None:
    """Give up every capability, for good (bounding set included): a process running as root keeps its user id
    but loses the powers that would let it bypass Landlock's ptrace scoping (CAP_SYS_PTRACE) or regain them."""
    libc = _libc()
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for capability in range(last + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {capability})")
    empty = (_CapData * 2)()
    _check(libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), empty), "capset")


def confine(
    read_only: Iterable[Path | str], read_write: Iterable[Path | str], *, without: Iterable[str] = ()
) -> tuple[str, ...]:
    """From now on, this process and its children may only read (and execute) under `read_only` and read and
    write under `read_write` (folders or files; missing ones are skipped), bind and connect no TCP socket, and
    signal or reach the abstract unix sockets of no process outside this sandbox, as far as the kernel's ABI
    allows; `without` leaves out layers by name (tests switch one off to show what it stops). Returns the layers
    applied (`layers`). Raises OSError where Landlock is unavailable or a step fails, leaving the process
    unconfined."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available on this kernel")
    handled = handled_rights(abi)
    attr, size = _ruleset_attr(abi, frozenset(without))
    libc = _libc()
    ruleset = _check(
        libc.syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    try:
        for paths, rights in ((read_only, READ_ONLY), (read_write, handled)):
            for path in paths:
                _allow(ruleset, Path(path), rights & handled)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(
            libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
            "landlock_restrict_self",
        )
    finally:
        os.close(ruleset)
    return tuple(layer for layer in layers(abi) if layer not in set(without))
