#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""End-to-end runner for ckpt, shaped like CRIU's zdtm.

    python3 tests/e2e/runner.py --ckpt build/ckpt --bindir build/tests/e2e \
        [--no-ckpt] [--only NAME[,NAME]] [--mode basic|twice|reuse] [-v] [--keep] [--list]

Each test program (tests/e2e/NAME.c, see lib.h) is started with cwd = a
fresh /tmp/ckpt-e2e-* directory, stdin = /dev/null and stdout + stderr =
that directory's out.log. Once it has created "ready" the runner
checkpoints it with --kill, restarts it, checks the pid, sends SIGUSR1 and
expects exit status 0 and "PASS" (and no "FAIL") in out.log.

Modes:
  basic   checkpoint --kill, restart, verify
  twice   checkpoint --kill, restart; checkpoint the restored process
          --kill (the first restart exits 137), restart that image, verify
  reuse   basic, then restart the first image again and verify again
Other kinds of test: refusals (checkpoint must fail, the original must be
unharmed), CLI errors, damaged images, real programs (sleep, python3,
bash pipelines, multiprocessing, make -j2, redis-server, nginx, PostgreSQL:
flows compare, make, redis, nginx and postgres drive them from outside; on
TCP, flows redis_tcp, http_server, echo100, nginx_tcp and postgres_tcp,
through tcp_cycles(), with only ckpt's network lock between the clients
and the server while it is away); an Xvnc desktop (flow xvnc, checked
from outside by X clients and the VNC client of rfb.py).
A real program whose package is absent is skipped, saying so.

--no-ckpt runs every program natively (no checkpoint, kill or restart: the
original is just signalled), to prove the tests themselves pass.
Prints one summary line "N passed, N failed[, N skipped]"; exits 1 if any
failed. Python 3 standard library only; run as root.

Adding a test: write NAME.c (see lib.h) and add an entry() line to TESTS
below. TESTS is the only list: meson builds the program of every entry that
has a NAME.c here (`runner.py --programs` prints them).
"""

import argparse
import base64
import errno
import http.client
import http.server
import json
import os
import pwd
import random
import re
import select
import shutil
import signal
import select
import socket
import ssl
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import twohost

HERE = os.path.dirname(os.path.abspath(__file__))
# real_xz_pipe: 24 MB of generated lines through xz -T2 into $1 (xz's
# threads take 1 MiB blocks: its output grows as it works, 4 s here)
XZ_PIPE = ("command -v xz >/dev/null || { echo SKIP xz not installed; exit 0; }; "
           "seq 1 800000 | awk '{printf \"%d %x %o\\n\", $1*7919%1000003, $1*$1, $1}' "
           "| xz -T2 -3 --block-size=1MiB > \"$1\"")

READY_TIMEOUT = 20.0
CHECKPOINT_TIMEOUT = 60.0
PIDFILE_TIMEOUT = 20.0
EXIT_TIMEOUT = 60.0
RESEND_EVERY = 5.0
POLL = 0.005

B, T, R = "basic", "twice", "reuse"
ALL_MODES = (B, T, R)

MiB = 1 << 20


def cg_where():
    """(the cgroup2 mount of this cgroup namespace, the runner's cgroup
    there without a trailing "/"), or None."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fl = line.split()
            i = fl.index("-")
            if fl[i + 1] == "cgroup2" and fl[3] == "/":
                with open("/proc/self/cgroup") as g:
                    own = [l[3:].strip() for l in g if l.startswith("0::")][0]
                return fl[4], own.rstrip("/")
    return None


def entry(name, modes=(B,), kind="program", **kw):
    """One test. kind picks the flow (Run.flow_<kind>); modes lists the modes
    it runs in; argv replaces the program for commands ("@python" = the
    interpreter); ready is "file" or a delay in s; signal: send SIGUSR1;
    expect: "pass" (out.log) or "exit0"; regex: the refusal message;
    program: the binary when it is not the test's name; ready_timeout: s
    the program may take to be ready (READY_TIMEOUT); hold_ptys: ptys the
    runner opens on the host while a container is restarted (so the low pts
    indexes are taken there); for kind="compare":
    setup (a Run method making the input), ref and args (appended to argv for
    the uninterrupted and the checkpointed run)."""
    d = dict(name=name, modes=modes, kind=kind, argv=None, ready="file",
             signal=True, expect="pass", max_image_bytes=None, regex=None,
             program=name, min_runtime=None, setup=None, ref=(), args=(), hold_ptys=0,
             case=None, ready_timeout=READY_TIMEOUT)
    d.update(kw)
    return d


# The table: one line per test.
TESTS = [
    # memory
    entry("mem_anon", (B, T, R)),
    entry("mem_heap", (B, R)),
    entry("mem_stack"),
    entry("mem_file_private", (B, T, R)),
    entry("mem_file_changed", kind="file_changed", program="mem_file_private"),
    entry("mem_file_changed_big", kind="file_changed", program="mem_file_private",
          pargs=("40",), case="big"),
    entry("mem_file_shared", (B, R)),
    entry("mem_remake", between="remove_shared"),
    entry("mem_shared_anon"),
    # a program whose file was deleted while it runs (its exe, its mappings)
    entry("mem_exe_deleted", (B, T, R)),
    # one shmem object in 12,000 vmas of two processes, a memfd's vma inside two others
    entry("mem_shared_split", (B, T)),
    entry("mem_devzero", (B, T)),
    entry("mem_prot"),
    entry("mem_reserve", max_image_bytes=8 * MiB),
    entry("mem_vdso", (B, T)),
    entry("mem_no_vdso", (B, T)),
    entry("mem_no_vdso_code", (B, T), program="mem_no_vdso", pargs=("code",)),
    entry("mem_mmfields"),
    entry("mem_big"),
    # transparent huge pages (MADV_HUGEPAGE) come back as huge pages
    entry("mem_thp", (B, T, R)),
    # the image's page bytes by O_DIRECT to a disk, and the fall back on a tmpfs
    entry("mem_direct", kind="direct", case="disk"),
    entry("mem_direct_tmpfs", kind="direct", program="mem_direct", case="tmpfs"),
    # restart --lazy: memory filled on first touch and in the background
    entry("mem_lazy", pargs=("256",), rst_args=("--lazy",)),
    entry("mem_lazy_tree", program="mem_lazy", pargs=("64", "tree"), rst_args=("--lazy",)),
    entry("mem_lazy_killed", kind="lazy_killed", program="mem_lazy", pargs=("256",)),
    # the lazy server dies before it takes a task's memory: the restart fails, nothing is left
    entry("mem_lazy_server_dies", kind="lazy_server_dies", program="mem_lazy", pargs=("64",)),
    entry("mem_lazy_ckpt_dies", kind="lazy_ckpt_dies", program="mem_lazy", pargs=("64",)),
    entry("mem_lazy_damaged", kind="lazy_damaged", program="mem_lazy", pargs=("64",)),
    # restart --lazy of compressed images (zstd frames decompressed on demand) and of chains
    entry("mem_lazy_compressed", program="mem_lazy", pargs=("64", "text"),
          ckpt_args=["--compress"], rst_args=("--lazy",),
          log_regex=r"zstd: [1-9]\d* of \d+ records compressed"),
    entry("mem_lazy_compressed_tree", program="tree_cow", pargs=("text",),
          ckpt_args=["--compress"], rst_args=("--lazy",),
          log_regex=r"zstd: [1-9]\d* of \d+ records compressed"),
    entry("mem_lazy_compressed_damaged", kind="lazy_damaged", program="mem_lazy",
          pargs=("64", "text"), compress=True),
    entry("mem_lazy_compressed_forged", kind="lazy_forged", program="mem_lazy",
          pargs=("64", "text")),
    entry("mem_lazy_chain", kind="lazy_chain", program="mem_incr"),
    entry("mem_lazy_chain_compressed", kind="lazy_chain", program="mem_incr", pargs=("text",),
          compress=True),
    entry("mem_lazy_chain_damaged", kind="lazy_chain_damaged", program="mem_incr",
          rst_args=("--lazy",)),
    entry("mem_chain_damaged", kind="lazy_chain_damaged", program="mem_incr"),
    entry("mem_lazy_stream", kind="stream", program="mem_lazy", pargs=("64",),
          rst_args=("--lazy",)),
    entry("mem_lazy_sealed", kind="stream", program="mem_lazy", pargs=("64",), key=True,
          rst_args=("--lazy",)),
    entry("mem_droppable", (B, T)),
    entry("mem_mlock", (B, T)),
    entry("mem_mlockall", (B, T)),
    entry("mem_mlockall_onfault", (B,), program="mem_mlockall", pargs=["onfault"]),
    # cpu
    entry("cpu_regs", (B, T)),
    entry("cpu_tls"),
    # system calls interrupted by the checkpoint
    entry("sys_nanosleep", (B, T, R)),
    entry("sys_poll"),
    # calls restarted through restart_block: re-issued, never EINTR
    entry("sys_restart_poll", program="sys_restart_block", pargs=["poll"]),
    entry("sys_restart_nanosleep", program="sys_restart_block", pargs=["nanosleep"]),
    entry("sys_restart_usleep", program="sys_restart_block", pargs=["usleep"]),
    entry("sys_restart_abs", program="sys_restart_block", pargs=["abs"]),
    entry("sys_restart_futex", program="sys_restart_block", pargs=["futex"]),
    entry("sys_futex"),
    entry("sys_sigsuspend"),
    # signals
    # a session keyring of its own with user keys and the user keyring,
    # shared with a child; a process keyring
    entry("keyring_own", (B, T)),
    # runuser -l nobody: pam_keyinit's login keyring, shared by root's
    # runuser and nobody's python3
    entry("real_keyring_login", (B, T)),
    entry("sig_disp", (B, T, R)),
    entry("sig_mask"),
    # sigsuspend, ppoll, pselect, epoll_pwait(2) with masks of their own: the
    # thread's mask (which the kernel keeps aside) is saved and left to the original
    entry("sig_masked_calls", (B, T)),
    entry("sig_masked_calls_keep", kind="keep", program="sig_masked_calls"),
    entry("sig_pending", (B, T, R)),
    entry("sig_altstack"),
    entry("sig_itimers", (B, T)),
    # files and fs
    # one file opened 2,000 times (+ dups): open files told apart in sorted order
    entry("file_many_opens", (B, T)),
    entry("file_fds", (B, T, R)),
    entry("file_dup", (B, R)),
    entry("fs_deleted", (B, T, R)),
    entry("fs_deleted_root", (B, T, R)),
    entry("file_sigio", (B, T)),
    entry("file_opath", (B, T)),
    entry("file_proc", (B, T)),
    entry("ct_proc", (B,), kind="container", program="file_proc"),
    entry("file_nsfd", (B, T)),
    entry("ct_nsfd", (B,), kind="container", program="file_nsfd"),
    entry("fs_cwd"),
    entry("fs_umask"),
    # identity
    entry("id_pid", (B, T)),
    entry("id_session"),
    entry("id_pgrp"),
    entry("id_creds", (B, T)),
    # uid 0 with reduced capabilities (CAP_SYS_PTRACE not even in the bounding set)
    entry("id_creds_root", (B, T), program="id_creds", pargs=["root"]),
    # more supplementary groups than /proc/PID/status parsing kept (256)
    entry("id_groups_many", (B, T)),
    # inheritable caps outside the bounding set (raised before it is cut at restart)
    entry("id_inh_unbounded", (B, T)),
    entry("id_nnp"),
    # the parent-death signal: kept; not set under restart --detach (ckpt, the parent, exits)
    entry("id_pdeath", (B, T)),
    entry("id_pdeath_detach", kind="pdeath_detach", program="id_pdeath"),
    # signals sent to a foreground ckpt restart (a service manager's) reach the root
    entry("rst_sigfwd", kind="sigfwd", signal=False),
    entry("ct_sigfwd", kind="sigfwd", signal=False, program="rst_sigfwd", case="ct"),
    entry("id_dropped", (B, T, R)),
    entry("id_securebits", (B, T)),
    entry("id_rlimits"),
    entry("id_sched", (B, T, R)),
    # made at ckpt's real-time priority, a normal program comes back normal
    entry("id_sched_normal", (B, T, R), rst_log_regex="real-time priority 1",
          rst_args=("-v",)),
    entry("id_sched_normal_pidns", program="id_sched_normal", rst_args=("-v", "--pidns"),
          rst_log_regex="real-time priority 1"),
    entry("id_sched_normal_lazy", program="id_sched_normal", rst_args=("-v", "--lazy"),
          rst_log_regex=r"(?s)(?=.*real-time priority 1)(?=.*lazy: debug: the server runs "
                        r"at scheduling policy 0, nice 0)"),
    entry("id_prctl", (B, T)),
    entry("proc_compare", (B, T)),
    entry("cg_kept", kind="cgroup", program="cg_task", cg="kept"),
    entry("cg_removed", (B, T), kind="cgroup", program="cg_task", cg="removed"),
    entry("cg_fail", kind="cgroup", program="cg_task", cg="fail"),
    entry("refuse_cg_outside", kind="cgroup", program="cg_task", cg="refuse"),
    entry("ct_cgroup", (B, T), kind="cgroup", program="cg_task", cg="container"),
    entry("cg_unpriv", kind="cgroup", program="cg_task", cg="unpriv"),
    entry("cg_threaded", (B, T), kind="cgroup", program="cg_task", cg="threaded"),
    entry("refuse_cg_v1", kind="cgroup", program="cg_task", cg="v1"),
    entry("id_personality"),
    entry("id_timens", (B, T)),
    entry("refuse_timens_mixed", kind="refuse", program="id_timens", pargs=["mixed"],
          regex=r"\bpid \d+: in another time namespace than the tree's root \(pid {pid}\)"),
    entry("id_comm"),
    entry("id_rseq"),
    entry("id_seccomp", (B, T)),
    entry("id_seccomp_strict", (B, T)),
    # filters stacked in their order, with their flags (SECCOMP_FILTER_FLAG_LOG)
    entry("id_seccomp_order", (B, T)),
    # process trees
    entry("tree_deep", (B, T, R)),
    entry("tree_zombie", (B, T)),
    entry("proc_stop_signal", (B, T)),
    entry("tree_ghost", (B, T)),
    entry("tree_ghost_parent", (B, T)),
    entry("tree_ghost_zombie", (B, T)),
    entry("tree_share", (B, T)),
    entry("tree_share_sibling", (B, T)),
    entry("tree_shm", (B, T)),
    entry("tree_cow", (B, T), max_image_bytes=80 * MiB),
    entry("tree_cow_file", (B, T, R)),
    entry("tree_wide", (B, T, R)),
    entry("tree_wide_threads", (B, T), program="tree_wide", pargs=("threads",)),
    entry("tree_keep_file", (B, T, R)),
    entry("tree_cow_lazy", program="tree_cow", max_image_bytes=80 * MiB, rst_args=("--lazy",)),
    # containers (ckpt run)
    entry("ct_tree", (B, T), kind="container"),
    entry("migrate_ct", kind="migrate", program="ct_tree", case="ok"),
    entry("migrate_fail", kind="migrate", program="ct_tree", case="fail"),
    # between two test hosts (network namespaces A, B; the client in C)
    entry("real_mig_echo100", kind="mig2_echo"),
    # ckpt run --net --nat on test host A: clients in the container connect
    # to C, which has no route back but through A's masquerade
    entry("netns_nat", kind="netns_nat"),
    # the same container migrated to B: refused (its connections through
    # A's NAT would reach C from B's address), it runs on in A
    entry("netns_nat_mig", kind="netns_nat", case="migrate"),
    entry("mig2_fail", kind="mig2_echo", case="fail"),
    # the target's disk is full: its directory a tmpfs of 16 MiB, the server's memory 64 MiB
    entry("mig2_nospace", kind="mig2_echo", case="precopy_nospace"),
    entry("mig2_jobstop", kind="mig2_jobstop"),
    entry("mig2_precopy", kind="mig2_echo", case="precopy"),
    entry("mig2_precopy_fail", kind="mig2_precopy_fail"),
    entry("mig2_precopy_lazy", kind="mig2_echo", case="precopy_lazy"),
    # receive is lazy by default; --eager writes the memory first; a receive that cannot
    # make a userfaultfd for the lazy server (no CAP_SYS_PTRACE) is eager, and says so
    entry("mig2_precopy_eager", kind="mig2_echo", case="precopy_eager"),
    entry("mig2_precopy_nouffd", kind="mig2_echo", case="precopy_nouffd"),
    # the server also keeps unmapping and mapping pages next to pages it wrote once
    entry("mig2_precopy_remap", kind="mig2_echo", case="precopy_remap"),
    entry("real_mig_nginx", kind="mig2_nginx"),
    entry("real_mig_redis", kind="mig2_redis"),
    entry("real_mig_sshd", kind="mig2_sshd"),
    entry("real_mig_xvnc", kind="mig2_xvnc"),
    # a plain process of host A's namespace (no --net): its address moves
    entry("migrate_plain", kind="mig2_plain", case="ok"),
    entry("migrate_plain_refuse", kind="mig2_plain", case="refuse"),
    entry("migrate_plain_nolink", kind="mig2_plain", case="nolink"),
    # the source's ckpt dies (SIGKILL) right after its commit: its guardian
    # tells the target, kills the original, deletes the moved address and
    # removes the lock
    entry("migrate_plain_srcdies", kind="mig2_plain", case="srcdies"),
    entry("ct_unpriv", (B, T), kind="ct_unpriv", program="ct_tree"),
    # a unix socket bound to a relative path name, checkpointed by a user (no SIOCUNIXFILE)
    entry("ct_unpriv_unix", (B, T), kind="ct_unpriv", program="unix_dgram_bound"),
    # bound UDP ports in the host's network namespace: no lock without CAP_NET_ADMIN, a warning
    entry("ct_unpriv_udp", (B, T), kind="ct_unpriv", program="udp_sock",
          log_regex=r"port\(s\) are not held: without CAP_NET_ADMIN"),
    # ptys of the container's own devpts, restored while the host's low indexes are taken
    entry("ct_tty_pty", (B, T), kind="container", program="tty_pty", hold_ptys=4),
    # epoll watches keyed by the container's pids
    entry("ct_epoll_watch", (B, T), kind="container", program="epoll_watch"),
    entry("ct_epoll_nested", (B, T), kind="container", program="epoll_nested"),
    entry("ct_asyncio", (B, T), kind="ct_asyncio", argv=["@python", os.path.join(HERE, "py_asyncio.py")]),
    entry("ct_bash_jobs", (B,), kind="container", argv=["bash", os.path.join(HERE, "sh_jobs.sh")],
          signal=False),
    # a container on the host's root with mounts of its own (a tmpfs, binds)
    entry("ct_mounts", (B, T), kind="ct_mounts", argv=["sh", os.path.join(HERE, "ct_mounts.sh")]),
    # a bubblewrap sandbox (bwrap --ro-bind / / --dev /dev ...) by the pid of bwrap's init in it
    entry("sb_bwrap", (B, T), kind="sandbox", argv=["sh", os.path.join(HERE, "sb_bwrap.sh")]),
    # the same run by user nobody (bwrap's sandbox maps only nobody), checkpointed and restarted
    # by nobody
    entry("sb_bwrap_unpriv", (B, T), kind="sandbox", nobody=True,
          argv=["sh", os.path.join(HERE, "sb_bwrap.sh"), "65534"]),
    # a root file system of its own (busybox), a bind of the host's, a tmpfs with files
    entry("ct_rootfs", (B, T), kind="rootfs", argv=["/bin/sh", "/etc/ct_rootfs.sh"]),
    # peer groups and a slave made in the container (binds of its tmpfs, of the host's)
    entry("ct_rootfs_peers", (B, T), kind="rootfs", script="ct_rootfs_peers.sh",
          argv=["/bin/sh", "/etc/ct_rootfs_peers.sh"]),
    # hard links on its tmpfs: one inode, its names, its link count
    entry("ct_rootfs_links", (B, T), kind="rootfs", script="ct_rootfs_links.sh",
          argv=["/bin/sh", "/etc/ct_rootfs_links.sh"]),
    # busybox httpd in a root of its own with a network namespace of its own,
    # serving a file of the bind mount to the host across checkpoint --kill
    entry("ct_rootfs_httpd", (B, T), kind="rootfs_httpd", signal=False,
          argv=["/bin/sh", "-c", "httpd -f -p 8080 -h /t/www & echo $$ > /t/ready; wait"]),
    entry("ct_rootfs_gone", (B,), kind="rootfs_gone", signal=False,
          argv=["/bin/sh", "-c", "echo $$ > /t/ready; while :; do sleep 1; done"]),
    # the same with an overlay root, each of its layers gone in turn
    entry("ct_rootfs_gone_overlay", (B,), kind="rootfs_gone", signal=False, overlay=True,
          argv=["/bin/sh", "-c", "echo $$ > /t/ready; while :; do sleep 1; done"]),
    entry("ct_rootfs_overlay", (B, T), kind="rootfs", overlay=True,
          argv=["/bin/sh", "/etc/ct_rootfs.sh"]),
    entry("ct_rootfs_unpriv", (B,), kind="rootfs_unpriv", argv=["/bin/sh", "/etc/ct_rootfs.sh"]),
    # the overlay root, its binds and tmpfs run, checkpointed and restarted by user nobody
    entry("ct_rootfs_overlay_unpriv", (B, T), kind="rootfs_unpriv", overlay=True,
          argv=["/bin/sh", "/etc/ct_rootfs.sh"]),
    entry("ct_rootfs_python", (B, T), kind="rootfs_python", argv=["/usr/bin/python3",
                                                                  "/t/py_mounts.py"]),
    # unix sockets bound on its tmpfs and on a bind, a client connected
    entry("ct_rootfs_unix", (B, T), kind="rootfs_python", script="py_unix_root.py",
          argv=["/usr/bin/python3", "/t/py_unix_root.py"]),
    # the same as user nobody (a user namespace of its own), the client on the bind's
    entry("ct_rootfs_unix_unpriv", (B, T), kind="rootfs_python_unpriv", script="py_unix_root.py",
          argv=["/usr/bin/python3", "/t/py_unix_root.py", "userns"]),
    entry("ct_rootfs_refuse", (B,), kind="rootfs_refuse", signal=False,
          argv=["/bin/sh", "-c", "mkdir -p /mnt && mount -t ramfs ram /mnt && "
                "echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"mount /mnt \(ramfs, ram\): a file system ckpt cannot make again"),
    # a named FIFO: refused (a deleted file, refused too before, is saved)
    entry("ct_rootfs_refuse_deleted", (B,), kind="rootfs_refuse", signal=False,
          argv=["/bin/sh", "-c", "echo x > /scratch/f && exec 3< /scratch/f && rm /scratch/f && "
                "mkfifo /scratch/p && exec 4<> /scratch/p && "
                "echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"^(?![\s\S]*deleted)[\s\S]*fd 4 \(/scratch/p\): a named FIFO in a "
                r"container"),
    # refused by name: a block device (a loop device's ext4), FUSE, a namespace
    # file bound, a task in a mount namespace of its own, a mount shared with
    # the host's namespace (a peer of a shared host mount grafted in)
    entry("ct_rootfs_refuse_blk", (B,), kind="rootfs_refuse", signal=False, case="blk",
          argv=["/bin/sh", "-c", "mkdir -p /mnt && mount -t ext4 /dev/blk /mnt || exit 1; "
                "echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"mount /mnt \(ext4, /dev/blk\): block-device mounts are not supported"),
    entry("ct_rootfs_refuse_fuse", (B,), kind="rootfs_refuse", signal=False, case="fuse",
          argv=["/bin/sh", "-c", "mkdir -p /mnt && exec 3<> /dev/fuse && mount -t fuse -o "
                "fd=3,rootmode=40000,user_id=0,group_id=0 fz /mnt || exit 1; exec 3>&-; "
                "echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"mount /mnt \(fuse, fz\): FUSE mounts are not supported"),
    entry("ct_rootfs_refuse_nsfs", (B,), kind="rootfs_refuse", signal=False,
          argv=["/bin/sh", "-c", "touch /scratch/uts && mount --bind /proc/1/ns/uts /scratch/uts "
                "|| exit 1; echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"mount /scratch/uts \(nsfs, nsfs\): a namespace file bound"),
    entry("ct_rootfs_refuse_mntns", (B,), kind="rootfs_refuse", signal=False,
          argv=["/bin/sh", "-c", "mkdir -p /mnt; unshare -m sh -c 'mount -t tmpfs x /mnt && "
                "echo > /mnt/f && touch /t/child; while :; do sleep 1; done' & "
                "while [ ! -e /t/child ]; do sleep 0.05; done; echo $$ > /t/ready; "
                "while :; do sleep 1; done"],
          regex=r"pid \d+: in another mount namespace \(mnt:\[\d+\]\) than the tree's root"),
    # a peer group of two binds of one tmpfs, /x and /y, the whole made private
    entry("ct_rootfs_refuse_peers", (B,), kind="rootfs_refuse", signal=False,
          argv=["/bin/sh", "-c", "mkdir -p /scratch/a /scratch/b /scratch/c && "
                "mount -t tmpfs pa /scratch/a && mkdir /scratch/a/x /scratch/a/y && "
                "mount --make-shared /scratch/a && mount --bind /scratch/a/x /scratch/b && "
                "mount --bind /scratch/a/y /scratch/c && mount --make-private /scratch/a || exit 1; "
                "echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"mount /scratch/[bc] \(tmpfs, shared:\d+, master:0\): a peer group whose "
                r"mounts' roots do not nest"),
    entry("ct_rootfs_refuse_shared", (B,), kind="rootfs_refuse", signal=False, case="graft",
          argv=["/bin/sh", "-c", "mkdir -p /mnt; echo $$ > /t/ready; while :; do sleep 1; done"],
          regex=r"mount /mnt \(tmpfs, shared:\d+, master:0\): shares its propagation with a "
                r"mount outside the container \(\S+/hs in ckpt's mount namespace"),
    # threads
    entry("thread_pthreads", (B, T, R)),
    entry("thread_many", (B, T)),
    entry("thread_seccomp", (B, T)),
    entry("thread_timer", (B, T)),
    entry("tree_churn", kind="churn"),
    # pipes
    entry("pipe_read", (B, T, R)),
    entry("pipe_closed", (B, T)),
    entry("eventfd_count", (B, T, R)),
    entry("signalfd_mask", (B, T, R)),
    entry("timerfd_armed", (B, T, R)),
    entry("ptimer_basic", (B, T, R)),
    entry("ptimer_pending", (B, T)),
    entry("ptimer_overrun", (B, T)),
    # timers on other threads' CPU-time clocks (haproxy's watchdog)
    entry("ptimer_threads", (B, T)),
    entry("refuse_ptimer_thread", kind="refuse", program="ptimer_threads", pargs=["refuse"],
          regex=r"\bpid {pid} timer 0 \(posix timer\): on CLOCK_THREAD_CPUTIME_ID of the thread "
                r"that made it, in a process of 3 threads"),
    # hugetlb memory of 2 MiB pages (mm-huge.c): private, shared, memfd
    entry("mem_hugetlb", (B, T, R)),
    entry("mem_hugetlb_lazy", program="mem_hugetlb", rst_args=("--lazy",)),
    entry("refuse_sud", kind="refuse",
          regex=r"\bpid {pid}: syscall user dispatch \(PR_SET_SYSCALL_USER_DISPATCH\) is on: not supported yet"),
    entry("refuse_ptimer", kind="refuse", regex=r"\bpid {pid}\b.*\btimer 0\b.*CPU-time clock of process 1\b"),
    entry("memfd_fd", (B, T, R), max_image_bytes=8 * MiB),
    entry("memfd_map", (B, T, R)),
    entry("memfd_exec", (B, T, R)),
    entry("file_deleted", (B, T, R)),
    # a deleted file of 3 GiB, sparse: streamed, holes kept
    entry("file_deleted_big", (B, R), max_image_bytes=16 * MiB),
    entry("file_relinked", (B, T)),
    entry("fifo_data", (B, T, R)),
    entry("fifo_deleted", (B, T, R)),
    entry("epoll_watch", (B, T, R)),
    entry("epoll_stale", (B, T, R)),
    # a watch on the directory of its own listener: the restart's rebind is
    # not an event (gpg-agent shut down on it)
    entry("inotify_own_sock", (B, T)),
    entry("inotify_deleted", (B, T)),
    entry("inotify_dropped", (B,), ckpt_args=["--drop-queued-events"],
          log_regex=r"pid {pid} fd 5 \(inotify\): \d+ bytes of queued events are not in the image"),
    entry("epoll_nested", (B, T)),
    entry("inotify_watch", (B, T, R)),
    entry("fanotify_marks", (B, T, R), kind="mounted"),
    entry("fanotify_unpriv", (B, T, R)),
    # unix sockets
    entry("unix_renamed", (B, T)),
    entry("unix_pair", (B, T, R)),
    # TCP and UDP sockets
    entry("tcp_pair", (B, T, R)),
    entry("tcp_pair6", (B, T)),
    entry("tcp_many", (B, T, R)),
    entry("tcp_mapped", (B, T)),
    entry("tcp_halfclose", (B, T)),
    # LAST_ACK, CLOSING, SYN_SENT (not T: right after a restart they are on
    # their way to other states)
    entry("tcp_states", (B, R)),
    # the same, the connect in progress's local port taken meanwhile by a
    # connection of the runner's to elsewhere: the restart binds beside it
    entry("tcp_port_taken", program="tcp_states", between="take_syn_port"),
    entry("tcp_inflight", (B, R), ckpt_args=["--skip-in-flight"],
          log_regex=r"pid {pid} fd 3 \(inet\): tcp 127\.0\.0\.1:\d+: 1 connection\(s\) not accepted yet are left out \(--skip-in-flight\): their peers get a reset"),
    entry("tcp_timewait", (B, T, R)),
    entry("netlock_listen", kind="netlock_listen", program="tcp_pair"),
    entry("netlock_unlock", kind="netlock_unlock", program="tcp_pair"),
    entry("tcp_pair_verify", program="tcp_pair", ckpt_args=["--verify"]),
    entry("udp_sock", (B, T, R)),
    entry("udp_queue", (B, T, R)),
    # datagrams sent still charged to their socket (a neighbour that does
    # not resolve holds them): waited for, not refused as corked
    entry("udp_inflight", (B, T)),
    entry("raw_sock", (B, T, R)),
    entry("packet_sock", (B, T, R)),
    # classic BPF socket filters on a UDP and a unix socket (one locked)
    entry("sock_filter", (B, T)),
    entry("tcp_peer", kind="tcp_peer"),
    # ckpt run --net: a server in a network namespace of its own, its host's
    # client connected across checkpoint --kill and restart (the namespace
    # made again, veth pair and host end included); a bridge link refused
    entry("netns_tcp", (B, T), kind="netns", program="netns_srv"),
    # the same, checkpointed with --kill --verify: the dry run beside the
    # live original makes its pair inside, and nothing of the host's changes
    entry("netns_tcp_verify", kind="netns", program="netns_srv", ckpt_args=["--verify"]),
    entry("netns_refuse_link", kind="netns", program="netns_srv", pargs=["bridge"],
          case="bridge"),
    # netns_tcp with policy routing rules of both families (every selector
    # and action), the default rule deleted, routes in other tables,
    # permanent neighbour entries: the same after the restart (`ip` lists)
    entry("netns_rules", (B, T), kind="netns", program="netns_srv", pargs=["rules"],
          case="rules"),
    # netns_tcp whose server holds (fd 9) a network namespace no process is in
    entry("netns_held_ct", (B, T), kind="netns", program="netns_srv", pargs=["held"],
          case="held"),
    # a tree in several network namespaces: named
    entry("refuse_netns_thread", kind="refuse", program="refuse_netns", pargs=["thread"],
          regex=r"\bpid {pid} thread \d+: in another network namespace \(net:\[\d+\]\) than "
                r"its process \(net:\[\d+\]\)"),
    # a child's namespace (saved) with a TCP connection to a process outside
    # the tree there: it would stay in the old namespace
    entry("refuse_netns_tcp", kind="refuse", program="refuse_netns", pargs=["tcp"],
          regex=r"\bpid (?!{pid}\b)\d+ fd 7 \(inet\): a TCP connection of a network "
                r"namespace other than the tree's root's, to a peer outside the image: its "
                r"peer is a socket of that same namespace outside the tree, which stays in "
                r"the old namespace"),
    # a held namespace joined by a veth pair to a named one outside the image
    entry("refuse_netns_veth", kind="refuse", program="refuse_netns", pargs=["veth"],
          regex=r"\bpid {pid}: network namespace link a0 \(veth\): its other end is neither "
                r"in ckpt's network namespace nor in one the image holds"),
    # a socket made in a held namespace
    entry("refuse_netns_inet", kind="refuse", program="refuse_netns", pargs=["inet"],
          regex=r"\bpid {pid} fd 7 \(inet\): a socket of another network namespace than its "
                r"process's"),
    entry("refuse_netns_netlink", kind="refuse", program="refuse_netns", pargs=["netlink"],
          regex=r"\bpid {pid} fd 7 \(netlink\): a socket of another network namespace than "
                r"its process's"),
    # a unix socket made in a named namespace nothing of the tree holds
    entry("refuse_netns_unix", kind="refuse", program="refuse_netns", pargs=["unix"],
          regex=r"\bpid {pid} fd 7 \(socket:\[\d+\]\): a unix socket sock_diag does not show "
                r"\(made in a network namespace the image does not hold\?\)"),
    # a network namespace no process is in, held by fds (as `ip netns`
    # files are), with a veth pair to the host, an address, a table route, a
    # rule: made again and the fds opened on it
    entry("netns_held", (B, T)),
    # ckpt run --net whose child unshares a network namespace with a veth
    # pair to the root's, and forks one task there and one in a third
    # (the child's connection locked in its namespace: the root's has none)
    entry("netns_multi", (B, T), kind="container", run_args=["--net"],
          log_regex=r"network lock ckpt_lock_\w+: 1 connection\(s\) locked"),
    # the same tree in ckpt's namespace: the child's pair has its other end
    # (vr0, with its address) in ckpt's, a host end
    entry("netns_multi_host", (B, T), program="netns_multi",
          log_regex=r"network lock ckpt_lock_\w+: 1 connection\(s\) locked"),
    # a child in a network namespace of its own joined by a veth pair to the
    # root's (ckpt's), its TCP connection to the runner's client there
    # (routed, outside the image) kept across checkpoint --kill and restart
    # while the client keeps sending and checking echoes
    entry("netns_routed", (B, T), kind="netns_routed"),
    # the same as pid 1 of `ckpt run --net`: the child's namespace behind
    # the container's, the host's route to it through the host end (a route
    # ckpt saves with the host end and adds again at restart)
    entry("netns_routed_ct", (B, T), kind="netns_routed", program="netns_routed", case="ct"),
    # the client bound to a second address of the host end, not the one
    # ckpt's namespace reaches the child from: refused (not tested to
    # work), naming why; the tree and the connection go on
    entry("refuse_netns_routed_addr", kind="netns_routed", program="netns_routed", case="addr"),
    # six children, each in a network namespace of its own with a connection
    # there and bytes in flight on it: a lock in each of the six
    entry("netns_many", (B, T),
          log_regex=r"(?s)(?:network lock ckpt_lock_\w+: \d+ connection\(s\) locked.*?){{6}}"),
    # a child in a network namespace of its own with unix sockets (stream
    # and dgram pairs with queued data, an abstract listener with an
    # accepted and a pending connection), a NETLINK_ROUTE socket bound to a
    # group and a packet socket bound to lo: made again there; the
    # abstract name is not the root's namespace's
    entry("netns_socks", (B, T)),
    # checkpointed with --kill --verify: the dry run beside the live
    # original makes the child's sockets in a namespace of its own too
    entry("netns_socks_verify", program="netns_socks", ckpt_args=["--verify"]),
    # the same as pid 1 of `ckpt run --net` (the root in a namespace of its own)
    entry("netns_socks_ct", (B, T), kind="container", run_args=["--net"],
          program="netns_socks"),
    # twelve network namespaces held by fds, two of them joined by a veth pair
    entry("netns_held12", (B, T)),
    entry("tcp_reset", rst_args=["--tcp-close"]),
    entry("rst_addr_busy", kind="rst_addr_busy", program="tcp_pair"),
    entry("real_redis_tcp", (B, T), kind="redis_tcp"),
    # redis-server checkpointed in the middle of a BGSAVE: the forked child goes on
    entry("real_redis_bgsave", (B, T), kind="redis_bgsave"),
    # clients that connect for every command (as redis-benchmark -k 0):
    # its accept queue is rarely empty, checkpoints succeed all the same
    entry("real_redis_reconnect", (B,), kind="redis_reconnect"),
    entry("real_http_server", (B, T), kind="http_server"),
    # Node.js: an HTTP server with a keep-alive client, a worker thread, timers
    entry("real_node", (B, T), kind="node"),
    # dbus-daemon (its audit netlink socket), asked over new connections
    entry("real_dbus", (B, T), kind="dbus"),
    # headless Chromium under a subreaper (its crash handler leaves the tree otherwise)
    entry("real_chromium", (B, T), kind="chromium"),
    # LibreOffice headless: a second soffice hands its conversion to the restored one
    entry("real_libreoffice", (B, T), kind="libreoffice"),
    # Emacs as a daemon, asked by emacsclient: a timer counts, a buffer keeps its text
    entry("real_emacs", (B, T), kind="emacs"),
    # gpg-agent under a subreaper: four listeners in a directory it watches
    entry("real_gpg_agent", (B, T), kind="gpg_agent"),
    # coreutils' tail -f, in poll with a timeout (restart_block) when frozen
    entry("real_tail", (B, T), kind="tail"),
    # SQLite's shell fed inserts by a shell loop through a pipe, one
    # transaction each (its journal made and deleted every time)
    entry("real_sqlite", (B, T), kind="sqlite"),
    # a server whose accept queue is never empty while its clients keep
    # connecting: new clients held out before the freeze until it has
    # accepted what was queued
    entry("accept_busy", (B, T), kind="accept_busy",
          argv=["@python", os.path.join(HERE, "py_slow_accept.py")]),
    entry("real_echo100", (B, T), kind="echo100", argv=["@python", os.path.join(HERE, "py_echo.py")],
          args=["server"]),
    entry("real_java", kind="java"),
    entry("real_sshd", (B, T), kind="sshd"),
    # an Xvnc desktop (xterm, xclock) under ckpt run: VNC on a unix socket,
    # or on its default TCP port with a VNC client connected across
    entry("real_xvnc", (B, T), kind="xvnc", case="unix"),
    entry("real_xvnc_tcp", (B, T), kind="xvnc", case="tcp"),
    # its default listener on every address, in a `ckpt run --net` container
    entry("real_xvnc_net", (B,), kind="xvnc", case="net"),
    entry("refuse_tcp_pending", kind="refuse", program="inet_refuse", pargs=["pending"],
          regex=r"\bpid {pid} fd 3 \(inet\): tcp 127\.0\.0\.1:\d+ is listening with 1 connection\(s\) not accepted yet"),
    # the root traces a process outside the tree (strace -p, gdb -p): no ptrace relation is saved
    entry("refuse_tracer", kind="refuse",
          regex=r"\bpid {pid}: traces pid \d+ \(refuse_tracer\), outside the tree"),
    # the same, one thread of that process traced alone (strace -p TID): only
    # that thread's status names its tracer
    entry("refuse_tracer_thread", kind="refuse", program="refuse_tracer", pargs=["thread"],
          regex=r"\bpid {pid}: traces thread \d+ of pid \d+ \(refuse_tracer\), outside the tree"),
    entry("refuse_udp_cork", kind="refuse", program="inet_refuse", pargs=["udpcork"],
          regex=r"\bpid {pid} fd 3 \(inet\): udp 127\.0\.0\.1:\d+ -> 127\.0\.0\.1:\d+ has \d+ bytes corked or not sent yet \(UDP_CORK is set\)"),
    # corked by MSG_MORE: refused once the wait for datagrams on their way out ends
    entry("refuse_udp_more", kind="refuse", program="inet_refuse", pargs=["udpmore"],
          regex=r"\bpid {pid} fd 3 \(inet\): udp 127\.0\.0\.1:\d+ -> 127\.0\.0\.1:\d+ has \d+ bytes corked or not sent yet \(still after \d+ ms\)"),
    entry("netlink_sock", (B, T)),
    entry("refuse_netlink", kind="refuse", program="inet_refuse", pargs=["netlink"],
          regex=r"\bpid {pid} fd 3 \(netlink\): protocol 0: \d+ bytes of messages not read yet"),
    entry("refuse_packet", kind="refuse", program="inet_refuse", pargs=["packet"],
          regex=r"\bpid {pid} fd 3 \(packet\): has an mmap'ed receive ring \(PACKET_RX_RING\); not supported yet"),
    entry("unix_listen", (B, T, R)),
    entry("unix_dgram_bound", (B, T, R)),
    entry("unix_names", (B, T)),
    entry("unix_rights", (B, T, R)),
    entry("unix_rights_dgram", (B, T, R)),
    entry("unix_gone", (B, T, R)),
    entry("unix_external", (B, T), kind="external"),
    entry("unix_external_dgram", (B, T), kind="external"),
    entry("unix_detach_client", (B, T, R), ckpt_args=["--detach-clients"]),
    entry("refuse_detach_client", kind="refuse", program="unix_detach_client",
          regex=r"\bpid {pid}\b.*\bfd 5\b.*unix.*client of the image's listener.*--detach-clients"),
    # the death of ckpt: killed at every ptrace request and image write of a
    # checkpoint and a restart (ckpt-fault), and at random moments
    entry("fault_walk", kind="fault", program="fault_victim"),
    entry("sig_trap_pending", kind="keep"),
    # SIGTRAP ignored: injected calls stop at syscall entry and exit instead
    # of single-stepping (a forced SIGTRAP resets an ignored one to SIG_DFL)
    entry("sig_trap_ignored", kind="keep"),
    entry("sig_trap_ignored_rst", (B, T, R), program="sig_trap_ignored", pargs=("handler",)),
    entry("fault_walk_trapign", kind="fault", program="fault_victim", pargs=("0", "trapign")),
    # 40 threads: each step of theirs is several requests, two in flight
    entry("fault_walk_threads", kind="fault", program="fault_victim", pargs=("0", "-", "40")),
    entry("fault_random", kind="fault_random", program="fault_victim"),
    # an injected call whose instruction faults (CKPT_FAULT=badip:N runs the
    # Nth at an unmapped address): ckpt fails, it does not step it for ever
    entry("fault_badip", kind="fault_badip", program="fault_victim"),
    # the root puppet exec'd from ckpt's few-byte program, and, when that exec
    # fails (CKPT_FAULT=nobare), forked from ckpt as before: both restore
    entry("rst_puppet_paths", kind="puppet_paths", program="fault_victim"),
    entry("fault_badip_trapign", kind="fault_badip", program="fault_victim",
          pargs=("0", "trapign")),
    # the network lock removed by the guardian when ckpt dies (SIGKILL at
    # each request of a checkpoint that locked a TCP connection)
    entry("netlock_fault", kind="netlock_fault", program="netlock_victim"),
    # pidfds, POSIX message queues, file locks
    entry("pidfd_child", (B, T, R)),
    entry("mqueue_msgs", (B, T, R)),
    entry("mqueue_forged", kind="mqueue_forged", program="mqueue_msgs"),
    entry("mqueue_notify", (B, T)),
    entry("locks_flock", (B, T, R)),
    entry("locks_posix", (B, T, R)),
    entry("locks_ofd", (B, T, R)),
    entry("locks_lease", (B, T)),
    # terminals
    entry("tty_pty", (B, T, R)),
    entry("tty_jobs", (B, T, R)),
    entry("tty_shell_job", kind="shell_job"),
    entry("tty_devtty", (B, T, R)),
    entry("tty_detached", (B, T, R), ckpt_args=["--detach-clients"]),
    entry("refuse_tty_detached", kind="refuse", program="tty_detached",
          regex=r"\bpid {pid}\b.*\bfd 5\b.*/dev/pts/\d+.*master.*outside.*--detach-clients"),
    entry("rst_pty_taken", kind="rst_pty_taken", program="tty_pty"),
    entry("real_tmux", (B, T), kind="tmux"),
    entry("real_screen", (B, T), kind="screen"),
    entry("real_tmux_shell_job", kind="tmux_shell_job"),
    entry("real_tmux_attached", kind="tmux_attached"),
    entry("real_screen_attached", kind="screen_attached"),
    # SysV IPC: a container's own ipc namespace, a tree's segments in the host's
    entry("sysv_shm", (B, T, R), kind="ct_detached"),
    entry("sysv_msg", (B, T, R), kind="ct_detached"),
    entry("sysv_sem", (B, T, R), kind="ct_detached"),
    entry("sysv_shm_host", (B, T, R)),
    entry("sysv_shm_kept", (B, T, R)),
    # hugetlb (SHM_HUGETLB) segments: attached in the host's namespace; in a
    # container's, one attached and one not
    entry("sysv_shm_huge", (B, T, R)),
    entry("sysv_shm_huge_ct", (B, T, R), kind="ct_detached"),
    entry("sysv_shm_huge_1g", kind="huge_forged", program="sysv_shm_huge"),
    # reserving three 1 GiB pages compacts memory and the guest's host backs
    # each page again (free page reporting): over 20 s under the ASan suite
    entry("mem_hugetlb_1g", (B, T), ready_timeout=120),
    # restart options and inspect
    entry("opt_detach", kind="detach", program="mem_anon"),
    entry("opt_frozen", kind="frozen", program="mem_anon"),
    entry("opt_inspect", kind="inspect", program="mem_anon"),
    entry("inspect_tree", kind="inspect_summary"),
    entry("opt_stream", kind="stream", program="mem_anon"),
    # sealed images: --key
    entry("img_key", kind="key", program="mem_anon"),
    entry("opt_stream_key", kind="stream", program="mem_anon", key=True),
    entry("api_key", kind="standalone"),
    # --compress: zstd page records, plain where they do not shrink; with --key
    entry("img_compress", kind="compress", program="mem_zstd"),
    # --track, --parent: incremental images, a chain of three restored
    entry("mem_incr", kind="incr"),
    entry("mem_incr_lazy", kind="incr", case="lazy", program="mem_incr"),
    # --parent while the program writes: pages written again after the
    # pre-copy come from the frozen process
    entry("mem_incr_busy", kind="incr_busy"),
    # the same checkpoint refused after its pre-copy: the tracking put back
    entry("mem_incr_busy_undo", kind="incr_busy", case="undo", program="mem_incr_busy",
          pargs=("undo",)),
    # image 1 without --kill: the scan at the freeze write-protects (the
    # program is killed after it, image 1 restarted)
    entry("mem_incr_busy_runs", kind="incr_busy", case="runs", program="mem_incr_busy"),
    entry("api_lib", kind="standalone"),
    # a signal sent as a restart returns: 150 rounds of restart and SIGUSR1
    entry("api_signal_soon", kind="standalone"),
    entry("api_shm_nattch", kind="standalone"),
    entry("api_python", kind="python_api"),
    entry("rst_fail", kind="rst_fail", program="id_seccomp"),
    entry("rst_busy", kind="rst_busy", program="tree_deep"),
    entry("opt_pidns", kind="pidns", program="tree_zombie"),
    # real programs
    entry("real_sleep", kind="command", argv=["sleep", "4"], ready=1.0, signal=False,
          expect="exit0", min_runtime=3.9),
    entry("real_python", kind="command", argv=["@python", os.path.join(HERE, "py_state.py")]),
    entry("real_py_threads", kind="command", argv=["@python", os.path.join(HERE, "py_threads.py")]),
    # under valgrind, which unmaps its [vdso] and keeps the [vvar]s (exit 9 on a memcheck error);
    # not thread_pthreads: restored, valgrind then often loses the SIGUSR1 (DESIGN.md, "valgrind")
    entry("real_valgrind", (B, T), program="mem_anon", wrap=("valgrind", "-q", "--error-exitcode=9")),
    # root dropped to nobody by os.setuid, or started as nobody by runuser (a root parent)
    entry("real_py_setuid", (B, T, R), kind="command", argv=["@python", os.path.join(HERE, "py_setuid.py")]),
    entry("real_runuser", (B, T), kind="runuser", argv=["@python", os.path.join(HERE, "py_setuid.py")],
          args=["started"]),
    entry("real_bash_jobs", kind="command", argv=["bash", os.path.join(HERE, "sh_jobs.sh")],
          signal=False),
    entry("real_pipeline", (B, T, R), kind="compare", argv=["bash", os.path.join(HERE, "real_pipeline.sh")],
          setup="pipeline_input", ref=["input", "expected"], args=["input", "output"],
          expect="exit0"),
    entry("real_mp", (B, T, R), kind="compare", argv=["@python", os.path.join(HERE, "real_mp.py")],
          ref=["serial", "expected"], args=["pool", "output"]),
    entry("real_mp_forkserver", (B, T), kind="compare", argv=["@python", os.path.join(HERE, "real_mp.py")],
          ref=["serial", "expected"], args=["pool", "output", "forkserver"]),
    entry("real_mp_spawn", (B, T), kind="compare", argv=["@python", os.path.join(HERE, "real_mp.py")],
          ref=["serial", "expected"], args=["pool", "output", "spawn"]),
    entry("real_make", (B, T), kind="make", argv=["make", "-j2"]),
    # xz on 2 threads at the end of a pipeline (seq | awk | xz -T2), its
    # blocks compressed in parallel: the same .xz as an uninterrupted run's
    entry("real_xz_pipe", (B, T, R), kind="compare", argv=["sh", "-c", XZ_PIPE, "sh"],
          ref=["expected"], args=["output"], expect="exit0"),
    # numpy on 2 OpenBLAS threads (its buffers mbind "local"), Debian's python3:
    # a seeded iteration's every step hashed, the same as an uninterrupted run's
    entry("real_numpy", (B, T, R), kind="compare", argv=["/usr/bin/python3", os.path.join(HERE, "real_numpy.py")],
          ref=["expected"], args=["output"]),
    # a long computation: ffmpeg's x264 and AAC encode, the same packets as an uninterrupted one
    entry("real_ffmpeg", (B, T), kind="ffmpeg"),
    entry("real_redis", (B, T, R), kind="redis", argv=["@python", os.path.join(HERE, "real_redis.py")]),
    entry("real_nginx", (B, T, R), kind="nginx"),
    entry("real_nginx_tcp", (B, T), kind="nginx_tcp"),
    # etcd (Go): puts and reads on a keep-alive connection go on across the restart
    entry("real_etcd", (B, T), kind="etcd"),
    # QEMU (TCG) running a guest that counts on its serial port
    entry("real_qemu_tcg", (B, T), kind="qemu_tcg"),
    # Apache's event MPM: processes of threads as nobody, one keep-alive client
    entry("real_apache_tcp", (B, T), kind="apache_tcp"),
    # Varnish: a jailed cache process, shared memory read by varnishstat
    entry("real_varnish_tcp", (B, T), kind="varnish_tcp"),
    # haproxy: a TCP proxy's two connections, its watchdog's CPU-time timers
    entry("real_haproxy_tcp", (B, T), kind="haproxy_tcp"),
    # memcached, root dropped to nobody: SET/GET/INCR on one connection go on
    entry("real_memcached_tcp", (B, T), kind="memcached_tcp"),
    # slapd: LMDB's files mapped shared, its readers' POSIX locks, one held LDAP connection
    entry("real_slapd", (B, T), kind="slapd"),
    # unbound: DNS over a held TCP connection and over UDP, its cache kept
    entry("real_unbound", (B, T), kind="unbound"),
    # stunnel: a TLS session held through it, its keys in the server's memory
    entry("real_stunnel", (B, T), kind="stunnel"),
    # MariaDB (InnoDB without io_uring) with a client inserting on one held connection
    entry("real_mariadb_tcp", (B, T), kind="mariadb_tcp"),
    # the same with InnoDB's native AIO on (io_uring): refused, the server goes on
    entry("real_mariadb_uring", kind="mariadb_tcp", case="uring"),
    # IPv6, each worker its own listener of a SO_REUSEPORT group
    entry("real_nginx_tcp6", kind="nginx_tcp", host="::1", listen_opts=" reuseport"),
    # restarting a database's first image again would undo what it wrote since: no reuse
    entry("real_postgres", (B, T), kind="postgres"),
    # the same as pid 1 of a `ckpt run` container (epoll keyed by its pids there)
    entry("ct_postgres", (B, T), kind="postgres", ct=True),
    # huge_pages=on: its shared memory is MAP_SHARED|MAP_HUGETLB (mm-huge.c)
    entry("real_postgres_huge", (B, T), kind="postgres", huge=True),
    # on TCP, a client of the runner's connected across
    entry("real_postgres_tcp", (B, T), kind="postgres_tcp"),
    # refusals: checkpoint must fail naming pid, fd and kind; the original lives on
    entry("refuse_inet", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*inet.*tcp.*not accepted yet"),
    # the peer's holder named: the grandchild, reparented out of the tree
    entry("refuse_unix", kind="refuse",
          regex=r"\bpid {pid}\b.*\bfd 5\b.*unix.*peer outside.*held by pid \d+ \(refuse_unix\) fd \d+"),
    entry("refuse_unix_ext", kind="refuse", program="refuse_unix", ckpt_args=["--external", "unix"],
          regex=r"\bpid {pid}\b.*\bfd 5\b.*unix.*peer outside.*held by pid \d+.*no name.*not even --external unix"),
    entry("refuse_unix_rights", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*unix.*carries socket:.*fds in flight itself"),
    entry("refuse_unix_glue", kind="refuse",
          regex=r"\bpid {pid} fd 5 \(unix stream socket:\[\d+\]\): its queue holds fds in flight and more segments than a peek shows"),
    entry("refuse_unix_glue_closed", kind="refuse", program="refuse_unix_glue", pargs=["closed"],
          regex=r"\bpid {pid} fd 5 \(unix stream socket:\[\d+\]\): its queue holds a message of 6 bytes carrying fds, and its sender is gone"),
    entry("refuse_epoll_flight", kind="refuse",
          regex=r"\bpid {pid}\b.*\bfd 5\b.*carries anon_inode:\[eventpoll\]; an epoll instance in flight is not supported \(its watches are keyed by the fd numbers"),
    entry("refuse_perf", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*perf"),
    entry("refuse_mseal", kind="refuse", regex=r"\bpid {pid}\b.*vma .*sealed with mseal"),
    entry("refuse_sigio", kind="refuse", regex=r"\bpid {pid} fd 5\b.*SIGIO.*outside the image"),
    entry("refuse_uring", kind="refuse", regex=r"\bpid {pid}\b.*io_uring.*not supported"),
    # a vfork parent, its child waiting: a task that takes no ptrace stop
    entry("refuse_vfork", kind="vfork"),
    # with a kernel thread polling its ring and a worker blocked in a read:
    # threads that take no ptrace stop (the checkpoint used to hang)
    entry("refuse_uring_sqpoll", kind="refuse", program="refuse_uring", pargs=["sqpoll"],
          regex=r"\bpid {pid}\b.*\bfd 5\b.*io_uring instance"),
    entry("refuse_all", kind="refuse",
          regex=r"(?s)(?=.*\bpid {pid} fd 5 \(anon_inode:\[io_uring\]\): io_uring instance at fd 5: not supported \(ckpt does not make)"
                r"(?=.*\bpid {pid} fd 6 \(anon_inode:\[io_uring\]\): io_uring instance at fd 6: )"
                r"(?=.*\bpid {pid} vma [0-9a-f]+-[0-9a-f]+ \(anon_inode:\[io_uring\]\): the rings of an io_uring instance: not supported \(ckpt does not make)"
                r"(?=.*\bpid (?!{pid}\b)\d+ fd 7 \(anon_inode:\[io_uring\]\): io_uring instance at fd 7: )"
                r"(?=.*\bpid (?!{pid}\b)\d+ vma [0-9a-f]+-[0-9a-f]+\b.*sealed with mseal)"),
    entry("refuse_proc", kind="refuse", regex=r"\bpid {pid} fd 5\b.*/proc file of a process outside the image"),
    entry("refuse_nsfd", kind="refuse", regex=r"\bpid {pid} fd 5\b.*uts.*no process of the image"),
    entry("refuse_dnotify", kind="refuse",
          regex=r"\bpid {pid} fd 5 \(.*\): a directory with a signal owner \(pid {pid}\): a "
                r"dnotify watch"),
    # nobody's own sandboxed process (a seccomp filter that kills on calls
    # ckpt injects): refused before any injection, where it was killed
    entry("refuse_seccomp_kill", kind="refuse", nobody=True,
          regex=r"\bpid {pid}: runs under seccomp \(filters\), which ckpt can suspend only "
                r"with CAP_SYS_ADMIN.*nothing was injected"),
    # Landlock: a sandboxed process, or one thread of one
    entry("refuse_landlock", kind="refuse",
          regex=r"\bpid {pid}: is sandboxed by Landlock .*a restart would run it unconfined"),
    entry("refuse_landlock_thread", kind="refuse", program="refuse_landlock", pargs=["thread"],
          regex=r"\bthread \d+: is sandboxed by Landlock"),
    entry("refuse_landlock_nobody", kind="refuse", program="refuse_landlock", nobody=True,
          regex=r"\bpid {pid}: is sandboxed by Landlock"),
    entry("refuse_landlock_caps", kind="refuse", program="refuse_landlock", pargs=["caps"],
          regex=r"\bpid {pid}: is sandboxed by Landlock"),
    # keyrings: keys ckpt cannot make again
    entry("refuse_keyring_logon", kind="refuse", program="refuse_keyring", pargs=["logon"],
          regex=r"\bpid {pid}: its session keyring holds key \d+ \(\"ckpt:secret\"\) of type "
                r"logon; ckpt saves keys of type user only"),
    entry("refuse_keyring_timeout", kind="refuse", program="refuse_keyring", pargs=["timeout"],
          regex=r"\bpid {pid}: key \d+ of its session keyring expires"),
    entry("refuse_keyring_thread", kind="refuse", program="refuse_keyring", pargs=["thread"],
          regex=r"\bthread \d+: its thread keyring holds keys; not supported"),
    # a plain tree's task in a namespace that is not ckpt's (unshare)
    entry("refuse_self", kind="refuse_self"),
    # a plain tree whose root is in a uts namespace of its own (unshare -u,
    # ProtectHostname=yes): restored in a new one with its hostname
    entry("ns_uts", (B, T, R), prefix=["unshare", "-u"]),
    # the same restored under --pidns: the root, forked by the namespace's init, unshares it
    entry("ns_uts_pidns", program="ns_uts", prefix=["unshare", "-u"], rst_args=("--pidns",)),
    # a plain tree whose root is in a mount namespace of its own derived from the host's
    # (PrivateTmp=yes: slaves of the host's mounts; unshare -m: private) with a tmpfs
    entry("ns_mnt", (B, T, R), prefix=["unshare", "-m", "--propagation", "slave"]),
    entry("ns_mnt_private", (B, T), program="ns_mnt", pargs=["private"],
          prefix=["unshare", "-m", "--propagation", "private"]),
    # PrivateTmp's own shape: a directory of the host's bound on the point
    entry("ns_mnt_bind", (B, T), program="ns_mnt", pargs=["bind"],
          prefix=["unshare", "-m", "--propagation", "slave"]),
    # --verify: its dry-run restart makes the namespace and the tmpfs, in a namespace of its own
    entry("ns_mnt_verify", program="ns_mnt", prefix=["unshare", "-m", "--propagation", "slave"],
          ckpt_args=["--verify"]),
    # both, and uts too, restored under --pidns
    entry("ns_mnt_pidns", program="ns_mnt", prefix=["unshare", "-m", "-u", "--propagation", "slave"],
          rst_args=("--pidns",)),
    # its copy of a host mount still in the host's peer group (--propagation unchanged;
    # skipped where ckpt's namespace has no shared mount)
    entry("refuse_ns_mnt_shared", kind="refuse", program="ns_mnt", pargs=["shared"],
          prefix=["unshare", "-m", "--propagation", "unchanged"],
          regex=r"\bpid {pid}: mount \S+ of its own mount namespace is in a peer group of "
                r"ckpt's \(shared:\d+\)"),
    # two shared mounts of ckpt's, both slaves in its namespace, then one made private: a
    # restart makes every copy a slave (the runner makes and removes the two mounts)
    entry("refuse_ns_mnt_mixed", kind="refuse", program="ns_mnt", pargs=["mixed"],
          prefix=["unshare", "-m", "--propagation", "slave"], host_shared=("ha", "hb"),
          regex=r"\bpid {pid}: mount \S+/hb of its own mount namespace is not a slave of "
                r"ckpt's mount \(private\), where \S+ is one \(master:\d+\)"),
    # a container on the host's root, its copies of the host's mounts slaves of them (unshare
    # --pid --fork --mount --propagation slave --mount-proc): restored slaves, not private
    entry("ct_slave", (B, T), kind="container", pidns="slave", host_shared=("ha",)),
    # Landlock in a container: its reference process made in the container's
    # pid namespace (and in bwrap's user namespace)
    entry("ct_refuse_landlock", kind="container", program="refuse_landlock",
          regex=r"\bpid {pid}: is sandboxed by Landlock .*a restart would run it unconfined"),
    entry("ct_refuse_landlock_thread", kind="container", program="refuse_landlock",
          pargs=["thread"], pidns="private", regex=r"\bthread \d+: is sandboxed by Landlock"),
    entry("ct_unpriv_refuse_landlock", kind="ct_unpriv", program="refuse_landlock",
          regex=r"\bpid {pid}: is sandboxed by Landlock .*a restart would run it unconfined"),
    # a process entered into the container from outside (nsenter): refused,
    # then, once it has ended, the container checkpointed and restarted
    entry("ct_entered", (B,), kind="container", program="mem_anon", pidns="private",
          entered="pid"),
    # one that joined only its network (a sidecar), ipc or mount namespace
    entry("ct_entered_net", (B,), kind="container", program="mem_anon", run_args=["--net"],
          entered="net"),
    entry("ct_entered_ipc", (B,), kind="container", program="mem_anon", entered="ipc"),
    entry("ct_entered_mnt", (B,), kind="container", program="mem_anon", entered="mnt"),
    # a thread of a process outside joined its network namespace alone; a
    # process holds that namespace open by an fd; one joined it while
    # ckpt-fault waited after the seize (seen at the look again before the kill)
    entry("ct_entered_thread", (B,), kind="container", program="mem_anon", run_args=["--net"],
          entered="thread"),
    entry("ct_entered_fd", (B,), kind="container", program="mem_anon", run_args=["--net"],
          entered="fd"),
    entry("ct_entered_late", (B,), kind="container", program="mem_anon", run_args=["--net"],
          entered="late"),
    # its network namespace bound on a path (ip netns attach, CNI): refused,
    # then, once unbound, checkpointed and restarted
    entry("ct_ns_bound", (B,), kind="container", program="mem_anon", run_args=["--net"],
          bound=True),
    # ... on a file in a private mount namespace of a process outside
    entry("ct_ns_bound_mntns", (B,), kind="container", program="mem_anon", run_args=["--net"],
          bound="mntns"),
    # systemd's default MountFlags=shared: the copies slaves of ckpt's and each shared in a
    # peer group of the namespace's own (mount --make-rshared / after the unshare); restored
    # so (before, slaves only), a shared mount of the runner's (ha) shared and a slave
    entry("ns_mnt_rshared", (B, T), program="ns_mnt", pargs=["rshared"],
          prefix=["unshare", "-m", "--propagation", "slave"], host_shared=("ha",)),
    # the same, then "/" made private again (not shared): copies of two kinds
    entry("refuse_ns_mnt_mixed_shared", kind="refuse", program="ns_mnt", pargs=["mixed_shared"],
          prefix=["unshare", "-m", "--propagation", "slave"], host_shared=("ha",),
          regex=r"\bpid {pid}: mount / of its own mount namespace is (not shared \(\S*\), "
                r"where \S+ is shared in a peer group of the namespace's own|not a slave of "
                r"ckpt's mount)"),
    # a child in yet another mount namespace than the tree's root's own
    entry("refuse_ns_mnt_child", kind="refuse", program="refuse_ns_own", pargs=["mnt"],
          regex=r"\bpid \d+: in another mount namespace \(mnt:\[\d+\]\) than the tree's root "
                r"\(pid {pid}, mnt:\[\d+\]\)"),
    # a root that pivot_roots into a root directory of its own: a container's shape, not a
    # plain tree's (a container is checkpointed by the pid of its init)
    entry("refuse_ns_mnt_pivot", kind="refuse", program="refuse_ns_own", pargs=["pivot"],
          regex=r"\bpid {pid}: a plain tree whose root has a root directory of its own in "
                r"its mount namespace \(pivot_root\) is not supported"),
    # a child in yet another uts namespace than the tree's root's
    entry("refuse_ns_uts", kind="refuse", program="refuse_ns_own", pargs=["uts"],
          regex=r"\bpid \d+: in another uts namespace \(uts:\[\d+\]\) than the tree's root "
                r"\(pid {pid}, uts:\[\d+\]\)"),
    entry("refuse_ns_child", kind="refuse", program="refuse_ns_own", pargs=["child"],
          regex=r"\bpid \d+: its ipc namespace \(ipc:\[\d+\]\) is not ckpt's"),
    entry("refuse_ns_thread", kind="refuse", program="refuse_ns_own", pargs=["thread"],
          regex=r"\bpid {pid} thread \d+: in another uts namespace \(uts:\[\d+\]\) than the "
                r"tree's root \(pid {pid}, uts:\[\d+\]\)"),
    entry("refuse_ns_pidc", kind="refuse", program="refuse_ns_own", pargs=["pidc"],
          regex=r"\bpid {pid}: its children's pid namespace \(pid:\[unborn\]\) is not ckpt's "
                r"\(unshare CLONE_NEWPID without a fork since\)"),
    # the init of a pid namespace of the tree's (chromium's zygote): refused for the namespace it
    # is in, and Landlock's probe says why it cannot look at it
    entry("refuse_ns_pidinit", kind="refuse", program="refuse_ns_own", pargs=["pidinit"],
          regex=r"\bpid \d+: its pid namespace \(pid:\[\d+\]\) is not ckpt's"),
    entry("refuse_ns_pidinit_landlock", kind="refuse", program="refuse_ns_own", pargs=["pidinit"],
          regex=r"\bpid \d+: cannot tell whether Landlock sandboxes it: it is in another pid "
                r"namespace than ckpt"),
    entry("refuse_ns_user", kind="refuse", program="refuse_ns_own", pargs=["user"],
          regex=r"\bpid \d+: its user namespace \(user:\[\d+\]\) is not ckpt's"),
    # vmas with memory policies of their own (mbind bind and local)
    entry("mm_mbind", (B, T, R)),
    # the same in a large process: its vmas' policies asked by injected calls
    entry("mm_mbind_large", (B, T), program="mm_mbind", pargs=("large",)),
    # its image forged to bind the vma to NUMA node 63: refused at load,
    # nothing made, where the machine has no such node
    entry("mm_mbind_forged", kind="mbind_forged", program="mm_mbind"),
    # AIO contexts (mm-aio.c): remade by io_setup at the ring's address
    entry("aio_ring", (B, T, R)),
    entry("aio_ring_lazy", program="aio_ring", rst_args=("--lazy",)),
    entry("real_fio_aio", kind="command", argv=["@python", os.path.join(HERE, "real_fio_aio.py")]),
    entry("refuse_traced", kind="traced", regex=r"trac|ptrace"),
    entry("refuse_tree", kind="refuse", regex=r"\bpid \d+\b.*\bfd 5\b.*(socket|inet|tcp|packet)"),
    entry("refuse_pipe", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*pipe"),
    entry("refuse_inherited", kind="refuse_inherited", program="mem_anon", case="pipe"),
    entry("refuse_inherited_fifo", kind="refuse_inherited", program="mem_anon", case="fifo"),
    entry("fd_external", kind="fd_external"),
    entry("refuse_deleted", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*big \(deleted\).*still has another name"),
    entry("refuse_inotify", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*inotify.*queued.*--drop-queued-events"),
    entry("refuse_fanotify", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*fanotify.*queued.*--drop-queued-events"),
    entry("refuse_fanotify_perm", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*fanotify.*permission events"),
    entry("refuse_epoll", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*epoll.*fd 10\b.*open at no fd of the image"),
    entry("refuse_pidfd", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*pidfd.*outside"),
    entry("refuse_mqueue", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*mqueue.*outside"),
    entry("refuse_lock", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*lock.*outside"),
    entry("refuse_lockwait", kind="refuse", regex=r"\bpid \d+\b.*\bfd 5\b.*lock.*F_SETLKW"),
    entry("refuse_tty", kind="refuse", regex=r"\bpid {pid}\b.*\bfd 5\b.*/dev/pts/\d+.*master.*outside"),
    entry("refuse_sysv", kind="refuse", regex=r"\bpid {pid}\b.*SysV message queue id \d+"),
    # CLI errors
    entry("cli_nopid", kind="cli_nopid"),
    entry("cli_usage", kind="cli_usage"),
    entry("cli_summary", kind="cli_summary"),
    entry("cli_progress", kind="cli_progress", program="mem_big"),
    entry("cli_progress_memfd", kind="cli_progress_restart", program="memfd_big"),
    entry("run_detach", kind="run_detach", program="fs_umask"),
    entry("cli_check", kind="cli_check"),
    entry("cli_badout", kind="cli_badout", program="img_target"),
    entry("cli_unpriv", kind="cli_unpriv", program="img_target",
          regex=r"permi|not permitted|eperm|eacces"),
    # --kill checks that a restart would work first; --verify; a user's own
    # process checkpointed --kill and restarted --pidns without privilege
    entry("kill_unpriv", kind="kill_unpriv", program="kill_check"),
    entry("kill_refuse_groups", kind="kill_refuse", program="kill_check", case="groups",
          regex=r"supplementary groups 100; .*setgroups is denied"),
    entry("kill_refuse_file", kind="kill_refuse", program="kill_check", case="file",
          regex=r"fd \d+ \(.*victim\): a restart by uid 65534 could not open it again for "
                r"writing: permission denied"),
    entry("kill_refuse_sock", kind="kill_refuse", program="kill_check", case="sock",
          regex=r"unix socket:\[\d+\]\): cannot bind .*/sd/s again: cannot create files in .*/sd: "
                r"read-only file system"),
    # a systemd service's keyring: a key of root's, checkpointed by nobody
    entry("kill_refuse_keyring", kind="kill_refuse", program="kill_check", case="keyring",
          regex=r"pid \d+: its session keyring belongs to 0:0; giving it that owner needs "
                r"CAP_SYS_ADMIN"),
    entry("kill_verify", kind="kill_verify", program="kill_check", args=("rich",)),
    # --kill of a child of the program that runs ckpt and waits for it: not
    # reaped while ckpt runs (it used to wait 10 s for that, then warn)
    entry("kill_caller_child", (B, T), program="mem_anon", ckpt_reap=False,
          log_regex=r"pid {pid}: killed; its parent, the program that ran ckpt, reaps it"),
    entry("kill_verify_refuse", kind="kill_verify", program="kill_check", args=("rich", "hifd"),
          case="refuse", regex=r"verify: the dry-run restart failed: the image uses fd 1000, "
                               r"above ckpt's open-file limit 512"),
    # files ckpt creates: never through a symlink, never truncating another's file
    entry("files_nofollow", kind="files_nofollow", program="img_target"),
    entry("files_interrupted", kind="files_interrupted", program="mem_big"),
    # damaged images
    entry("img_damage", kind="damage", program="img_target"),
    # the same with restart --lazy (sparse reader, page records checked by the lazy server)
    entry("img_damage_lazy", kind="damage", program="img_target", rst_args=("--lazy",)),
    # an eager restart of a tree with one process's page record damaged:
    # found as its pages go in, the tree made by then is removed
    entry("img_damage_tree", kind="damage_tree", program="tree_cow"),
]


def PG_UID():
    import pwd
    return pwd.getpwnam("postgres").pw_uid


def PG_GID():
    import grp
    return grp.getgrnam("postgres").gr_gid


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def tail(path, n=15):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


def safe_readlink(path):
    """The link's target, or "" if it cannot be read (gone)."""
    try:
        return os.readlink(path)
    except OSError:
        return ""


def pid_alive(pid):
    """True if pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def proc_state(pid):
    """The state letter of pid (R, S, T...), or "gone"."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return "gone"
    return st[st.rindex(")") + 2]


def pty_index(master):
    """The pts index of a pty master fd (TIOCGPTN)."""
    import fcntl
    buf = fcntl.ioctl(master, 0x80045430, b"\0\0\0\0")  # TIOCGPTN
    return struct.unpack("I", buf)[0]


def recv_to_eof(sock):
    """What sock receives until its peer closes."""
    got = b""
    while True:
        d = sock.recv(4096)
        if not d:
            return got
        got += d


def pid_exists(pid):
    return os.path.exists("/proc/%d" % pid)


# A "shell" for the shell_job flow: leads a session whose controlling
# terminal is argv[1] and runs argv[2:] there as its foreground job.
SHELL_JOB = r"""
import os, signal, sys
os.setsid()
fd = os.open(sys.argv[1], os.O_RDWR)
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(fd, os.getpid())
    os.dup2(fd, 0)
    os.close(fd)
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    os.execv(sys.argv[2], sys.argv[2:])
try:
    os.setpgid(pid, pid)
except PermissionError:  # the child has exec'd: it set its group itself
    pass
os.tcsetpgrp(fd, pid)
st = os.waitpid(pid, 0)[1]
os._exit(os.waitstatus_to_exitcode(st) & 0xff)
"""


def set_winsize(fd, rows, cols):
    import fcntl
    import termios
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def ctty_stdin():
    import fcntl
    import termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyClient:
    """A client program (tmux attach, screen -r) on a pty of the runner's,
    as a user's terminal: its output is read as it comes."""

    def __init__(self, argv, cwd, env):
        self.m, s = os.openpty()
        set_winsize(self.m, 24, 80)
        try:
            self.proc = subprocess.Popen(argv, stdin=s, stdout=s, stderr=s, cwd=cwd, env=env,
                                         start_new_session=True, preexec_fn=ctty_stdin)
        finally:
            os.close(s)
        self.seen = b""

    def pump(self, wait):
        import select
        if select.select([self.m], [], [], wait)[0]:
            try:
                self.seen += os.read(self.m, 65536)
            except OSError:  # EIO: no slave open any more
                time.sleep(wait)

    def wait_text(self, text, what, timeout=15.0):
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise Fail("%s: %r not on the screen (%d bytes seen, exit %s)"
                           % (what, text, len(self.seen), self.proc.poll()))
            self.pump(0.1)

    def wait_exit(self, what, timeout):
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise Fail("%s did not exit within %.0f s" % (what, timeout))
            self.pump(0.1)
        self.pump(0)
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.m)


class ExtServer:
    """A unix socket server of the runner's, outside every tree, at path:
    stream, an echo ("echo:" + what it got, per connection; clients counts
    the connections it accepted); dgram, "got:" + what it got to a named
    sender (got lists the datagrams). stop() closes it and removes path."""

    def __init__(self, path, dgram):
        self.path, self.dgram = path, dgram
        self.clients, self.got, self.sock = 0, [], None
        self.start()

    def start(self):
        if os.path.lexists(self.path):
            os.unlink(self.path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM if self.dgram else socket.SOCK_STREAM)
        s.bind(self.path)
        if not self.dgram:
            s.listen(8)
        s.settimeout(0.05)
        self.sock = s
        threading.Thread(target=self.loop, args=(s,), daemon=True).start()

    def loop(self, s):
        while self.sock is s:
            try:
                if self.dgram:
                    data, addr = s.recvfrom(4096)
                    self.got.append(data)
                    if addr:
                        s.sendto(b"got:" + data, addr)
                    continue
                c, _ = s.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.clients += 1
            threading.Thread(target=self.echo, args=(c,), daemon=True).start()

    def echo(self, c):
        c.settimeout(EXIT_TIMEOUT)
        with c:
            while True:
                try:
                    d = c.recv(4096)
                    if not d:
                        return
                    c.sendall(b"echo:" + d)
                except OSError:
                    return

    def stop(self):
        s, self.sock = self.sock, None
        if s:
            s.close()
            if os.path.lexists(self.path):
                os.unlink(self.path)


class Run:
    """One (test, mode): its directory, its processes, its logs."""

    def __init__(self, opts, test, mode):
        self.opts, self.t, self.mode = opts, test, mode
        self.name = test["name"] if mode == B else "%s[%s]" % (test["name"], mode)
        self.dir = tempfile.mkdtemp(prefix="ckpt-e2e-%s-" % test["name"], dir="/tmp")
        self.procs = []         # every Popen we started, for cleanup
        self.pid = None         # the test process' pid
        self.prog = None        # Popen of the original
        self.topo = None        # twohost.TwoHost of a mig2_* test
        self.logs = []          # files worth showing on failure
        self.notes = []

    # --- helpers ---------------------------------------------------------

    def p(self, *a):
        return os.path.join(self.dir, *a)

    def vlog(self, msg):
        if self.opts.verbose:
            print("  [%s] %s" % (self.name, msg), flush=True)

    def popen(self, argv, out=None, err=None, **kw):
        self.vlog("$ " + " ".join(argv))
        o = open(out, "wb") if out else subprocess.DEVNULL
        e = open(err, "wb") if err else subprocess.DEVNULL
        try:
            pr = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                                  cwd=self.dir, **kw)
        finally:
            for f in (o, e):
                if f is not subprocess.DEVNULL:
                    f.close()
        self.procs.append(pr)
        return pr

    def ckpt_argv(self, *args, verbose=True):
        argv = [self.opts.ckpt] + list(args)
        if self.opts.verbose and verbose:
            argv.append("-v")
        return argv

    def program_argv(self):
        t = self.t
        if t["argv"]:
            argv = list(t["argv"])
            if argv[0] == "@python":
                argv[0] = self.opts.python
            return argv
        path = os.path.join(self.opts.bindir, t["program"])
        if not os.access(path, os.X_OK):
            raise Fail("test program %s not built" % path)
        wrap = list(t.get("wrap", ()))  # a program the test runs under (valgrind)
        if wrap and not shutil.which(wrap[0]):
            raise Skip("%s not installed" % wrap[0])
        return wrap + [path] + list(t.get("pargs", ()))

    def host_shared_mounts(self):
        """host_shared (entry): tmpfs mounts of the test's in ckpt's own
        namespace, each made shared (its own peer group), unmounted by
        cleanup."""
        for name in self.t.get("host_shared", ()):
            where = self.p(name)
            if where in getattr(self, "host_mounts", []):
                continue  # made by an earlier start of this run
            os.mkdir(where)
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ckpt-test", where],
                           check=True)
            self.host_mounts = getattr(self, "host_mounts", []) + [where]
            subprocess.run(["mount", "--make-shared", where], check=True)

    def start(self, prefix=(), args=(), pass_fds=()):
        self.host_shared_mounts()
        env = dict(os.environ, CKPT_TEST_DIR=self.dir)
        fd = os.open(self.p("out.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        argv = list(prefix) + self.program_argv() + list(args)
        self.vlog("$ " + " ".join(argv))
        try:
            pr = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                                  cwd=self.dir, env=env, pass_fds=pass_fds)
        finally:
            os.close(fd)
        self.procs.append(pr)
        self.prog = pr
        self.t0 = time.monotonic()
        self.logs.append(self.p("out.log"))
        return pr

    def out(self):
        try:
            with open(self.p("out.log"), "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self):
        """Waits for "ready" (or a delay); sets self.pid."""
        pr = self.prog
        if self.t["ready"] != "file":
            time.sleep(self.t["ready"])
            if pr.poll() is not None:
                raise Fail("exited before the checkpoint: status %s" % pr.returncode)
            self.pid = pr.pid
            return
        deadline = time.monotonic() + self.t["ready_timeout"]
        while True:
            try:
                with open(self.p("ready")) as f:
                    data = f.read()
                if data.endswith("\n"):
                    self.pid = int(data)
                    break
            except (OSError, ValueError):
                pass
            if pr.poll() is not None:
                out = self.out()
                if pr.returncode == 0 and out.startswith("SKIP"):
                    raise Skip(out.strip()[5:].strip())
                raise Fail("exited before ready: status %s" % pr.returncode)
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % self.t["ready_timeout"])
            time.sleep(POLL)
        if self.t["kind"] not in ("traced", "runuser") and self.pid != pr.pid:
            raise Fail("ready says pid %d, started %d" % (self.pid, pr.pid))
        self.vlog("ready: pid %d" % self.pid)

    def wait_all(self, procs, timeout, what, reap=()):
        """Polls procs until all exited, reaping reap meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            for r in reap:
                r.poll()
            if all(pr.poll() is not None for pr in procs):
                for r in reap:
                    r.poll()
                return
            if time.monotonic() > deadline:
                raise Fail("%s did not finish within %.0f s" % (what, timeout))
            time.sleep(POLL)

    def checkpoint(self, img, tag, reap, expect_ok=True, extra=(), prefix=(), kill=True):
        """ckpt checkpoint PID -o img [--kill], reaping reap meanwhile."""
        log, err = self.p(tag + ".log"), self.p(tag + ".err")
        self.logs += [err, log]
        argv = list(prefix) + self.ckpt_argv("checkpoint", str(self.pid), "-o", img,
                                             *(["--kill"] if kill else []), "--log", log,
                                             *extra)
        cp = self.popen(argv, err=err, out=self.p(tag + ".out"))
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint", reap=reap)
        rc = cp.returncode
        errtext = tail(err, 50) or ""
        self.vlog("checkpoint exit %d" % rc)
        if not expect_ok:
            return rc, errtext
        if rc != 0:
            raise Fail("ckpt checkpoint exit %d: %s" % (rc, errtext.strip()[-300:]))
        if not kill:
            return rc, errtext
        if pid_alive(self.pid):
            # ckpt returns once the process is gone (a container's init:
            # dead, its parent outside may not have reaped it yet)
            raise Fail("pid %d still lives after checkpoint --kill returned" % self.pid)
        if not os.path.isfile(img):
            raise Fail("no image %s" % img)
        mx = self.t["max_image_bytes"]
        if mx is not None and os.path.getsize(img) > mx:
            raise Fail("image is %d bytes, more than %d" % (os.path.getsize(img), mx))
        return rc, errtext

    def restart(self, img, tag, same_pid=True, extra=(), pass_fds=()):
        """Starts ckpt restart; waits for the pidfile; returns the Popen."""
        pidfile = self.p(tag + ".pid")
        log, err = self.p(tag + ".log"), self.p(tag + ".err")
        self.logs += [err, log]
        rp = self.popen(self.ckpt_argv("restart", img, "--pidfile", pidfile, "--log", log,
                                       *extra),
                        err=err, out=self.p(tag + ".out"), pass_fds=pass_fds)
        deadline = time.monotonic() + PIDFILE_TIMEOUT
        while True:
            try:
                with open(pidfile) as f:
                    data = f.read()
                if data.endswith("\n"):
                    got = int(data)
                    break
            except (OSError, ValueError):
                pass
            if rp.poll() is not None:
                raise Fail("ckpt restart exited %d before writing the pidfile: %s"
                           % (rp.returncode, (tail(err, 5) or "").strip()))
            if time.monotonic() > deadline:
                raise Fail("no pidfile after %.0f s" % PIDFILE_TIMEOUT)
            time.sleep(POLL)
        if same_pid and got != self.pid:
            raise Fail("restored pid %d, original %d" % (got, self.pid))
        self.pid = got
        self.vlog("restored as pid %d" % got)
        return rp

    def in_wait_call(self):
        """Is the test pid's main thread blocked in pause() or sigsuspend()?"""
        try:
            with open("/proc/%d/syscall" % self.pid) as f:
                nr = f.read().split()[0]
        except (OSError, IndexError):
            return False
        return nr in ("34", "130")

    def wake_and_wait(self, proc, what):
        """SIGUSR1 to the test pid, waits for proc. SIGUSR1 is sent again
        every few s, but if the program was still waiting for it then, the
        first one was lost: that fails the test once proc has ended."""
        self.vlog("SIGUSR1 -> %d" % self.pid)
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + EXIT_TIMEOUT
        resend = time.monotonic() + RESEND_EVERY
        lost = False
        while proc.poll() is None:
            now = time.monotonic()
            if now > deadline:
                raise Fail("%s did not exit within %.0f s of SIGUSR1" % (what, EXIT_TIMEOUT))
            if now > resend and self.t["signal"]:
                if not lost and self.in_wait_call():
                    lost = True
                if "SIGUSR1 re-sent" not in self.notes:
                    self.notes.append("SIGUSR1 re-sent")
                try:
                    os.kill(self.pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
                resend = now + RESEND_EVERY
            time.sleep(POLL)
        if lost:
            raise Fail("%s: the SIGUSR1 sent to pid %d was lost (still waiting for it %.0f s "
                       "later; it ended on a second one)" % (what, self.pid, RESEND_EVERY))
        return proc.returncode

    def wait_exit(self, proc, what):
        if self.t["signal"]:
            return self.wake_and_wait(proc, what)
        self.wait_all([proc], EXIT_TIMEOUT, what)
        return proc.returncode

    def check_result(self, rc, what):
        if rc != 0:
            raise Fail("%s exited with status %s" % (what, rc))
        if self.t["expect"] == "pass":
            out = self.out()
            if "FAIL" in out:
                lines = [l for l in out.splitlines() if "FAIL" in l]
                raise Fail("; ".join(lines)[:500])
            if "PASS" not in out:
                raise Fail("no PASS in out.log")
        mr = self.t["min_runtime"]
        if mr is not None and time.monotonic() - self.t0 < mr:
            raise Fail("finished after %.2f s, expected at least %.1f s"
                       % (time.monotonic() - self.t0, mr))

    def native(self, prefix=()):
        """--no-ckpt: start, ready, signal, verify."""
        pr = self.start(prefix)
        self.wait_ready()
        rc = self.wait_exit(pr, "test program")
        self.check_result(rc, "test program")

    def expect_gone(self, why, grace=5.0):
        deadline = time.monotonic() + grace
        while pid_exists(self.pid):
            if time.monotonic() > deadline:
                raise Fail("pid %d %s after %s" % (
                    self.pid, "alive" if pid_alive(self.pid) else "a zombie", why))
            time.sleep(0.02)

    def reset_out(self):
        """Overwrites PASS in out.log in place (the restored fd writes at its
        saved offset, so a second run writes PASS at the same place)."""
        with open(self.p("out.log"), "r+b") as f:
            data = f.read()
            f.seek(0)
            f.write(data.replace(b"PASS", b"----"))

    # --- flows -----------------------------------------------------------

    def hold_pid(self, pid):
        """A child with this pid (via ns_last_pid, retried), or None."""
        for _ in range(50):
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
            child = os.fork()
            if child == 0:
                try:
                    time.sleep(120)
                finally:
                    os._exit(0)
            if child == pid:
                return child
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
        return None

    def flow_rst_busy(self):
        """A tree restart that fails at its last process (its pid is taken)
        removes every process it made; freed, the image restores fine."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        with open(self.p("pids"), "rb") as f:
            data = f.read()
        pids = list(struct.unpack("<%di" % (len(data) // 4), data))
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        pr.poll()
        busy = self.hold_pid(pids[-1])
        # new processes (ckpt) away from the image's pids, wrapping at pid_max
        # as the kernel does (it starts again at 300) and past any image pid
        with open("/proc/sys/kernel/pid_max") as f:
            pid_max = int(f.read())
        last = max(pids) + 100
        if last >= pid_max - 1:
            last = max([300] + [p + 100 for p in pids if p + 100 < pid_max - 200])
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(last))
        if busy is None:
            raise Skip("could not take pid %d for the test" % pids[-1])
        try:
            # another process of the machine (another suite) on a pid of the
            # image makes the restart fail there, not at the pid held
            others = [p for p in pids[:-1] if pid_exists(p)]
            if others:
                raise Skip("pids %s of the image taken by other processes" % others)
            r = self.run_ckpt(["restart", img, "--log", self.p("busy.log"), "-v"], timeout=60)
            self.logs.append(self.p("busy.log"))
            m = re.search(r"pid (\d+) is in use by", (r.stderr or b"").decode("utf-8", "replace"))
            if m and int(m.group(1)) in pids[:-1] and pid_exists(int(m.group(1))):
                raise Skip("pid %s of the image taken by another process meanwhile" % m.group(1))
            self.expect_error(r, "restart with a pid taken", must=[str(pids[-1])])
            alive = [p for p in pids[:-1] if pid_exists(p)]
            if alive:
                raise Fail("pids %s still exist after the failed restart" % alive)
        finally:
            os.kill(busy, signal.SIGKILL)
            os.waitpid(busy, 0)
        rp = self.restart(img, "restart")
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_rst_pty_taken(self):
        """tty_pty's pty index taken on the host after the checkpoint: the
        restart fails naming the process, the fd and the pty, and leaves no
        process; with the index free again, the image restores fine."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        index = int(os.readlink("/proc/%d/fd/11" % self.pid).rsplit("/", 1)[1])
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        pr.poll()
        held = []
        try:
            while len(held) < 64:
                held.append(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))
                if pty_index(held[-1]) == index:
                    break
            else:
                raise Skip("could not take /dev/pts/%d for the test" % index)
            r = self.run_ckpt(["restart", img, "--log", self.p("taken.log"), "-v"], timeout=60)
            self.logs.append(self.p("taken.log"))
            self.expect_error(r, "restart with the pty index taken",
                              must=["pid %d fd 10" % self.pid, "/dev/pts/%d" % index, "taken"])
            if pid_exists(self.pid):
                raise Fail("pid %d exists after the failed restart" % self.pid)
        finally:
            for fd in held:
                os.close(fd)
        rp = self.restart(img, "restart")
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def wait_container(self, pr, pidfile):
        """The program under `ckpt run`: ready (its pid inside is 1), and its
        pid outside from ckpt run's pidfile."""
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with open(self.p("ready")) as f:
                    inside = f.read()
                with open(pidfile) as f:
                    outside = f.read()
                if inside.endswith("\n") and outside.endswith("\n"):
                    break
            except OSError:
                pass
            if pr.poll() is not None:
                raise Fail("ckpt run exited %s before ready: %s" % (pr.returncode, self.out()[-300:]))
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % READY_TIMEOUT)
            time.sleep(POLL)
        if int(inside) != 1:
            raise Fail("the program is pid %s in its container, not 1" % inside.strip())
        self.pid = int(outside)

    def ckpt_as_nobody(self, flow):
        """flow with every ckpt command run as user nobody (setpriv)."""
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("setpriv (util-linux) not installed")
        os.chmod(self.dir, 0o777)
        # the program's output is nobody's: restart opens it with nobody's rights
        with open(self.p("out.log"), "w"):
            pass
        os.chown(self.p("out.log"), 65534, 65534)
        wrapper = self.p("ckpt-as-nobody")
        ckpt = os.path.abspath(self.opts.ckpt)
        drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        if subprocess.run(drop + ["test", "-x", ckpt]).returncode != 0:
            ckpt = self.p("ckpt")  # the checkout is not nobody's to enter: a copy it can run
            shutil.copy(self.opts.ckpt, ckpt)
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(drop + [ckpt]))
        os.chmod(wrapper, 0o755)
        saved = self.opts.ckpt
        self.opts.ckpt = wrapper
        try:
            flow()
        finally:
            self.opts.ckpt = saved

    def flow_ct_unpriv(self):
        """flow_container as user nobody: ckpt run makes a user namespace,
        and checkpoint and restart need no privilege."""
        self.ckpt_as_nobody(self.flow_container)

    def flow_container(self):
        """The program as pid 1 of `ckpt run --hostname box`: checkpointed
        whole by its outside pid (no CKPT_SUBTREE), killed, restored into
        fresh namespaces (a new outside pid, the same pids inside)."""
        pidfile = self.p("run.pid")
        if self.t.get("pidns"):  # not ckpt run: unshare's shape (pidns_launch.py)
            prefix = [sys.executable, os.path.join(HERE, "pidns_launch.py"), pidfile,
                      self.t["pidns"], "--"]
        else:
            prefix = [self.opts.ckpt, "run", "--hostname", "box", "--pidfile",
                      pidfile] + list(self.t.get("run_args", ())) + ["--"]
        pr = self.start(prefix=prefix)
        self.wait_container(pr, pidfile)
        if self.opts.no_ckpt:
            rc = self.wait_exit(pr, "ckpt run")
            return self.check_result(rc, "ckpt run")
        if self.t.get("entered"):
            self.refuse_entered(pr)
        if self.t.get("bound"):
            self.refuse_bound(pr)
        if self.t["regex"]:  # a refusal: the container runs on and checks itself
            return self.refuse_ct(pr)
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.check_ckpt_log("ckpt")
        self.wait_all([pr], 10, "ckpt run, after its container was killed")
        held = [os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY) for _ in range(self.t["hold_ptys"])]
        try:
            rp = self.restart(self.p("img"), "restart", same_pid=False)
        finally:
            for fd in held:
                os.close(fd)
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
            self.wait_all([rp], 10, "the first ckpt restart")
            rp = self.restart(self.p("img2"), "restart2", same_pid=False)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def check_refused(self, rc, err, rx, what):
        """ckpt checkpoint refused as expected: it neither succeeded nor
        crashed, stderr (err) matches rx, what (self.pid) runs on, and no
        image was left (the image is named only once complete and checked:
        some refusals, the locks kind's, come after the dump)."""
        if rc == 0:
            raise Fail("ckpt checkpoint succeeded, expected a refusal")
        if rc >= 128 or rc < 0:
            raise Fail("ckpt checkpoint crashed: status %d" % rc)
        if not re.search(rx, err, re.I):
            raise Fail("refusal message %r does not match /%s/" % (err.strip(), rx))
        if not pid_alive(self.pid):
            raise Fail("%s is gone after the refused checkpoint" % what)
        if os.path.exists(self.p("img")):
            raise Fail("a refused checkpoint left an image at %s" % self.p("img"))

    def refuse_ct(self, pr):
        """The container's checkpoint refused with the entry's regex
        (pid: the container's outside pid); it runs on, no image is left,
        and its program passes its own checks once woken."""
        rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
        self.check_refused(rc, err, self.t["regex"].format(pid=self.pid), "the container")
        self.check_result(self.wake_and_wait(pr, "the container"), "the container")

    def refuse_bound(self, pr):
        """The container's network namespace bound on a path: bound=True,
        on /run/netns/NAME (ip netns attach, as CNI plugins do); "mntns", on
        a file of the test's in a private mount namespace of a process
        outside (unshare -m). The checkpoint is refused naming the path,
        the container runs on, no image is left; the binding is then
        removed (ip netns delete, or that process ended)."""
        if self.t["bound"] == "mntns":
            unshare = shutil.which("unshare")
            if not unshare:
                raise Skip("unshare (util-linux) not installed")
            target = self.p("netns")
            open(target, "w").close()
            ent = self.popen([unshare, "-m", "--propagation", "private", "--", "sh", "-c",
                              'mount --bind /proc/%d/ns/net "$1" && echo >"$1.ok" && '
                              'exec sleep infinity' % self.pid, "sh", target])
            self.wait_file("netns.ok", ent)
            try:
                rc, err = self.checkpoint(self.p("img"), "ckpt_bound", reap=[pr],
                                          expect_ok=False)
            finally:
                ent.kill()
                self.wait_all([ent], 10, "the process of the mount namespace, killed")
            return self.check_refused(rc, err, r"\bcontainer %d: its net namespace \(net:\[\d+\]\) "
                                      r"is bound on %s in the mount namespace of pid %d\b"
                                      % (self.pid, re.escape(target), ent.pid), "the container")
        ip = shutil.which("ip")
        if not ip:
            raise Skip("ip (iproute2) not installed")
        name = "ckb%d" % os.getpid()
        subprocess.run([ip, "netns", "attach", name, str(self.pid)], check=True,
                       capture_output=True, timeout=30)
        try:
            rc, err = self.checkpoint(self.p("img"), "ckpt_bound", reap=[pr], expect_ok=False)
        finally:
            subprocess.run([ip, "netns", "delete", name], capture_output=True, timeout=30)
        self.check_refused(rc, err, r"\bcontainer %d: its net namespace \(net:\[\d+\]\) is bound "
                           r"on /run/netns/%s\b" % (self.pid, name), "the container")

    def refuse_entered(self, pr):
        """A process outside the container in it while it runs: entered=
        "pid", entered its pid namespace (nsenter -p, as docker exec does:
        its parent is outside, so it is no descendant of the init); "net",
        "ipc", "mnt", joined that namespace only (nsenter -n, as ip netns
        exec does); "thread", one thread of a python3 joined its network
        namespace alone; "fd", a sleep holds its network namespace open by
        an fd; "late", one joined its network namespace while ckpt-fault
        waited after the seize (the look again before the kill). The
        checkpoint is refused naming it; the container and that process run
        on, no image is left; the process is then ended."""
        which = self.t["entered"]
        gate = self.p("seized")
        if which == "late":
            err = self.p("ckpt_entered.err")
            self.logs.append(err)
            cp = self.popen([self.fault_bin(), "checkpoint", str(self.pid), "-o", self.p("img"),
                             "--kill", "--log", self.p("ckpt_entered.log")], err=err,
                            env=dict(os.environ, CKPT_FAULT="seized:" + gate))
            self.wait_until("ckpt-fault seized the container",
                            lambda: os.path.exists(gate + ".pre"), [cp], CHECKPOINT_TIMEOUT)
        ent, inner, rx = self.enter_container("net" if which == "late" else which)
        if which == "late":
            open(gate, "w").close()
            self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt-fault checkpoint", reap=[pr])
            rc, err = cp.returncode, tail(err, 50) or ""
        else:
            rc, err = self.checkpoint(self.p("img"), "ckpt_entered", reap=[pr], expect_ok=False)
        self.check_refused(rc, err, rx, "the container")
        if not pid_alive(inner):
            raise Fail("the entered process is gone after the refusal")
        os.kill(inner, signal.SIGKILL)
        self.wait_all([ent], 10, "the entered process, killed")

    def enter_container(self, which):
        """A process outside the container put in it (refuse_entered): its
        Popen, the pid to end, and the refusal expected."""
        if which == "thread":
            code = ("import ctypes, os, sys, threading\n"
                    "fd = os.open('/proc/%s/ns/net' % sys.argv[1], os.O_RDONLY)\n"
                    "def join():\n"
                    "    if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000):\n"
                    "        os._exit(2)\n"
                    "    with open(sys.argv[2] + '.tmp', 'w') as f:\n"
                    "        f.write(str(threading.get_native_id()))\n"
                    "    os.rename(sys.argv[2] + '.tmp', sys.argv[2])\n"
                    "    threading.Event().wait()\n"
                    "threading.Thread(target=join, daemon=True).start()\n"
                    "threading.Event().wait()\n")
            ent = self.popen([self.opts.python, "-c", code, str(self.pid), self.p("tid")])
            tid = int(self.wait_file("tid", ent))
            return ent, ent.pid, (r"\bpid %d \(python[\w.]*, its thread %d\): is in the net namespace "
                                  r"of container %d \(net:\[\d+\]\) but not in its tree"
                                  % (ent.pid, tid, self.pid))
        if which == "fd":
            fd = os.open("/proc/%d/ns/net" % self.pid, os.O_RDONLY)
            try:
                ent = self.popen(["sleep", "infinity"], pass_fds=(fd,))
            finally:
                os.close(fd)
            self.until("the sleep holding the namespace",
                       lambda: os.path.exists("/proc/%d/fd/%d" % (ent.pid, fd)) and
                       open("/proc/%d/comm" % ent.pid).read() == "sleep\n")
            return ent, ent.pid, (r"\bpid %d \(sleep\): its fd %d holds the net namespace of "
                                  r"container %d \(net:\[\d+\]\) open" % (ent.pid, fd, self.pid))
        nsenter = shutil.which("nsenter")
        if not nsenter:
            raise Skip("nsenter (util-linux) not installed")
        flag = {"pid": "-p", "net": "-n", "ipc": "-i", "mnt": "-m"}[which]
        ent = self.popen([nsenter, "-t", str(self.pid), flag, "--", "sleep", "infinity"])

        def sleeper():
            """(pid, pid inside its pid namespace) of the sleep: nsenter's
            child for a pid namespace, else nsenter itself once it runs sleep"""
            try:
                pid = ent.pid
                if which == "pid":
                    with open("/proc/%d/task/%d/children" % (ent.pid, ent.pid)) as f:
                        pid = int(f.read().split()[0])
                with open("/proc/%d/status" % pid) as f:
                    nspid = re.search(r"^NSpid:\s+(.*)$", f.read(), re.M).group(1).split()
                with open("/proc/%d/comm" % pid) as f:
                    return (pid, int(nspid[-1])) if f.read() == "sleep\n" else None
            except (OSError, IndexError, AttributeError, ValueError):
                return None
        inner, inside = self.until("the sleep nsenter runs", sleeper)
        if which == "pid":
            return ent, inner, (r"\bpid %d \(sleep, pid %d in the container\): entered the "
                                r"container's pid namespace from outside" % (inner, inside))
        return ent, inner, (r"\bpid %d \(sleep\): is in the %s namespace of container %d "
                            r"\(%s:\[\d+\]\) but not in its tree" % (inner, which, self.pid, which))

    def flow_ct_mounts(self):
        """ct_mounts.sh as pid 1 of `ckpt run` (the host's root): its own
        tmpfs and binds in the test's directory; the runner changes the
        bound directory's file while the container is away, then checks
        that nothing of it was mounted on the host."""
        os.mkdir(self.p("src"))
        with open(self.p("src", "msg"), "w") as f:
            f.write("before\n")
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", pidfile, "--"])
        self.wait_container(pr, pidfile)
        if not self.opts.no_ckpt:
            self.checkpoint(self.p("img"), "ckpt", reap=[pr])
            self.wait_all([pr], 10, "ckpt run, after its container was killed")
        with open(self.p("src", "msg"), "w") as f:
            f.write("after\n")
        if self.opts.no_ckpt:
            rp = pr
        else:
            rp = self.restart_ct()
        self.check_result(self.wait_exit(rp, "ckpt restart"), "ckpt restart")
        with open("/proc/self/mountinfo") as f:
            if self.dir in f.read():
                raise Fail("a mount of the container is in the host's namespace")
        if os.listdir(self.p("m")):
            raise Fail("files on the host's directory under the container's tmpfs: %r"
                       % os.listdir(self.p("m")))

    def flow_sandbox(self):
        """The program as the command of a bubblewrap sandbox (its own user,
        pid, mount, uts, ipc and cgroup namespaces, the host's root bound
        read-only, a /dev of bwrap's): checkpointed by the pid of bwrap's
        init in it (the child of the bwrap the runner started), killed,
        restarted; SIGUSR1 then goes to the command (pid 2 inside), which
        checks from inside that the sandbox is the same."""
        bwrap = shutil.which("bwrap")
        if not bwrap:
            raise Skip("bwrap (bubblewrap) is not installed")
        user = []
        if self.t.get("nobody"):  # bwrap, its sandbox and ckpt all run as nobody
            setpriv = shutil.which("setpriv")
            if not setpriv:
                raise Skip("setpriv (util-linux) not installed")
            user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
            if not self.t.get("as_nobody"):
                return self.ckpt_as_nobody(lambda: self.run_entry_as(dict(as_nobody=True)))
        # the sandbox's /tmp is a tmpfs of its own, which hides a checkout
        # under /tmp: the script runs from the test's directory, bound in
        script = self.t["argv"][1]
        shutil.copy(script, self.p(os.path.basename(script)))
        self.t = dict(self.t, argv=[self.t["argv"][0], self.p(os.path.basename(script))] +
                      list(self.t["argv"][2:]))
        probe = subprocess.run(user + [bwrap, "--unshare-all", "--ro-bind", "/", "/", "true"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            raise Skip("bwrap cannot make a sandbox here: %s" % probe.stderr.strip()[:200])
        pr = self.start(prefix=user + [bwrap, "--unshare-all", "--share-net", "--die-with-parent",
                                "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                                "--tmpfs", "/tmp", "--bind", self.dir, self.dir,
                                "--chdir", self.dir])
        deadline = time.monotonic() + READY_TIMEOUT
        while not os.path.exists(self.p("ready")):
            if pr.poll() is not None:
                raise Fail("bwrap exited %s before ready: %s" % (pr.returncode, self.out()[-300:]))
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % READY_TIMEOUT)
            time.sleep(POLL)

        def child_of(pid):
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
            if len(kids) != 1:
                raise Fail("pid %d has children %r, want one" % (pid, kids))
            return int(kids[0])
        self.pid = child_of(pr.pid)  # bwrap's init in the sandbox
        if self.opts.no_ckpt:
            os.kill(child_of(self.pid), signal.SIGUSR1)
            return self.check_result(self.wait_exit(pr, "bwrap"), "bwrap")
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.check_ckpt_log("ckpt")
        self.wait_all([pr], 10, "bwrap, after its sandbox was killed")
        rp = self.restart_ct()
        self.pid = child_of(self.pid)  # the command, pid 2 inside
        self.check_result(self.wait_exit(rp, "ckpt restart"), "ckpt restart")

    def restart_ct(self):
        """ckpt restart of the container image img into fresh namespaces (a
        new pid outside); in twice mode, checkpoint --kill of the restored
        container and restart of that. Returns the last ckpt restart."""
        rp = self.restart(self.p("img"), "restart", same_pid=False)
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
            self.wait_all([rp], 10, "the first ckpt restart")
            rp = self.restart(self.p("img2"), "restart2", same_pid=False)
        return rp

    def run_entry_as(self, extra):
        """The entry's flow again with extra keys in its entry."""
        saved = self.t
        self.t = dict(saved, **extra)
        try:
            return getattr(self, "flow_" + self.t["kind"])()
        finally:
            self.t = saved

    def flow_migrate(self):
        """ckpt migrate of a `ckpt run` container to a ckpt receive on
        loopback. Case "ok": the copy is restored frozen, the original is
        killed, then the copy runs and verifies itself. Case "fail": the
        receiver cannot restore it (it takes sealed images only): the source
        says why, and its tree runs on unharmed."""
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--hostname", "box", "--pidfile", pidfile,
                                "--"])
        self.wait_container(pr, pidfile)
        if self.opts.no_ckpt:
            return self.check_result(self.wait_exit(pr, "ckpt run"), "ckpt run")
        fail = self.t["case"] == "fail"
        extra = []
        if fail:
            key = self.p("key")
            r = self.run_ckpt(["keygen", key])
            if r.returncode != 0:
                raise Fail("keygen: %r" % r.stderr)
            extra = ["--key", key]
        rerr, merr = self.p("receive.err"), self.p("migrate.err")
        self.logs += [rerr, merr, self.p("receive.log"), self.p("migrate.log")]
        rp = self.popen(self.ckpt_argv("receive", "--listen", "127.0.0.1:0", "--log",
                                       self.p("receive.log"), *extra),
                        err=rerr, out=self.p("receive.out"))
        port = []

        def listening():
            m = re.search(r"waiting for a migration on 127\.0\.0\.1:(\d+)", tail(rerr, 5) or "")
            if m:
                port.append(int(m.group(1)))
            return bool(port)
        self.wait_until("ckpt receive listening", listening, [rp])
        mp = self.popen(self.ckpt_argv("migrate", str(self.pid), "--to", "127.0.0.1:%d" % port[0],
                                       "--log", self.p("migrate.log")),
                        err=merr, out=self.p("migrate.out"))
        self.wait_all([mp, rp], CHECKPOINT_TIMEOUT, "ckpt migrate and ckpt receive", reap=[pr])
        mtext, rtext = tail(merr, 20) or "", tail(rerr, 20) or ""
        if fail:
            if mp.returncode != 1 or rp.returncode != 1:
                raise Fail("migrate exit %s, receive exit %s: want 1 and 1"
                           % (mp.returncode, rp.returncode))
            if not re.search(r"migration failed: .*the target could not restore it: .*runs on "
                             r"here", mtext):
                raise Fail("migrate said %r" % mtext.strip())
            if not pid_alive(self.pid):
                raise Fail("the original is gone after the failed migration")
            return self.check_result(self.wake_and_wait(pr, "the original"), "the original")
        if mp.returncode != 0 or rp.returncode != 0:
            raise Fail("migrate exit %s (%r), receive exit %s (%r)"
                       % (mp.returncode, mtext.strip(), rp.returncode, rtext.strip()))
        if not re.search(r"migrated pid %d to 127\.0\.0\.1:%d .*down \d+ ms" % (self.pid, port[0]),
                         mtext):
            raise Fail("migrate said %r" % mtext.strip())
        self.wait_all([pr], 10, "ckpt run, after its container was migrated")
        if pid_alive(self.pid):
            raise Fail("the original %d still lives after the migration" % self.pid)
        with open(self.p("receive.out")) as f:
            self.pid = int(f.read())
        deadline = time.monotonic() + EXIT_TIMEOUT
        while pid_alive(self.pid):
            if time.monotonic() > deadline:
                raise Fail("the migrated copy did not end within %.0f s" % EXIT_TIMEOUT)
            try:
                os.kill(self.pid, signal.SIGUSR1)
            except ProcessLookupError:
                pass
            time.sleep(0.2)
        self.check_result(0, "the migrated copy")

    # --- migration between two test hosts (tests/e2e/twohost.py) -------------

    MIG2_SUB, MIG2_CT, MIG2_HOSTIF = "10.215.0.0/30", "10.215.0.2", "ckmig0"

    def mig2_hosts(self):
        """Hosts A and B and the client C (network namespaces of the test),
        C routing the container's subnet through A."""
        if os.geteuid() != 0:
            raise Skip("the two test hosts and ckpt run --net need root")
        if not (shutil.which("ip") and shutil.which("nsenter")):
            raise Skip("ip (iproute2) or nsenter (util-linux) not installed")
        self.topo = twohost.TwoHost("%d%s" % (os.getpid() % 100000, self.name))
        try:
            self.topo.make()
            self.topo.hold(self.MIG2_SUB)
            self.topo.route(self.MIG2_SUB, "a")
        except twohost.TopoError as e:
            raise Fail("the two test hosts: %s" % e)
        return self.topo

    def mig2_run(self, argv, env=None, wait=True, run_args=()):
        """argv as pid 1 of `ckpt run --net [run_args]` on host A (the host
        end in A's namespace); self.pid its pid, once ckpt run's pidfile has
        it."""
        pidfile = self.p("run.pid")
        self.logs.append(self.p("out.log"))
        pr = self.popen(self.topo.argv("a", [self.opts.ckpt, "run", "--net", "--net-addr",
                                             self.MIG2_SUB, "--net-host-if", self.MIG2_HOSTIF,
                                             "--pidfile", pidfile] + list(run_args) +
                                       ["--"] + list(argv)),
                        err=self.p("out.log"), out=self.p("run.out"),
                        env=dict(os.environ, CKPT_TEST_DIR=self.dir, **(env or {})))
        self.prog = pr
        self.wait_until("ckpt run's pidfile", lambda: os.path.exists(pidfile) and
                        open(pidfile).read().endswith("\n"), [pr])
        with open(pidfile) as f:
            self.pid = int(f.read())
        return pr

    def mig2_migrate(self, reap, tag="m", rargs=(), margs=(), mfault=None, rprefix=(),
                     renv=None):
        """ckpt receive in B's namespace, ckpt migrate of self.pid in A's,
        over the A-B segment (sealed: the listener is not on loopback).
        rargs: more arguments of ckpt receive; rprefix: a command it runs
        under (setpriv); renv: more of its environment; mfault: migrate is
        ckpt-fault with that CKPT_FAULT.
        Returns (migrate's status, receive's, migrate's stderr, receive's)."""
        key = self.p("key")
        if not os.path.exists(key):
            r = self.run_ckpt(["keygen", key])
            if r.returncode != 0:
                raise Fail("keygen: %r" % r.stderr)
        rerr, merr = self.p(tag + "-receive.err"), self.p(tag + "-migrate.err")
        rlog, mlog = self.p(tag + "-receive.log"), self.p(tag + "-migrate.log")
        self.logs += [rerr, merr, rlog, mlog]
        b = self.topo.addr("b")
        rp = self.popen(self.topo.argv("b", list(rprefix) +
                                       self.ckpt_argv("receive", "--listen", b + ":0",
                                                      "--key", key, "--log", rlog, *rargs)),
                        err=rerr, out=self.p(tag + "-receive.out"),
                        env=dict(os.environ, **renv) if renv else None)
        port = []

        def listening():
            m = re.search(r"waiting for a migration on %s:(\d+)" % re.escape(b), tail(rerr, 5) or "")
            if m:
                port.append(int(m.group(1)))
            return bool(port)
        self.wait_until("ckpt receive listening in host B", listening, [rp])
        margv = self.ckpt_argv("migrate", str(self.pid), "--to", "%s:%d" % (b, port[0]),
                               "--key", key, "--log", mlog, *margs)
        if mfault:
            margv[0] = self.fault_bin()
        mp = self.popen(self.topo.argv("a", margv), err=merr, out=self.p(tag + "-migrate.out"),
                        env=dict(os.environ, CKPT_FAULT=mfault) if mfault else None)
        self.wait_all([mp, rp], CHECKPOINT_TIMEOUT, "ckpt migrate and ckpt receive", reap=reap)
        return mp.returncode, rp.returncode, tail(merr, 20) or "", tail(rerr, 20) or ""

    def mig2_source_intact(self, pr, what):
        """After a migration that did not happen: the original runs on in
        A, and no network lock is left in A or B."""
        if not pid_alive(self.pid) or pr.poll() is not None:
            raise Fail("the original is gone after the %s migration" % what)
        for h in "ab":
            if self.mig2_locks(h):
                raise Fail("network lock(s) %s left in host %s after the %s migration"
                           % (self.mig2_locks(h), h.upper(), what))

    def mig2_locks(self, host):
        tables = self.topo.nft_tables(host)
        return [t for t in tables or () if t.startswith("ckpt_lock")]

    def mig2_move(self, reap, tag="m", rargs=(), margs=(), rprefix=()):
        """A migration from A to B that must succeed: the original is gone,
        the copy (self.pid now) runs with its host end in B, none in A, and
        no network lock is left in either host; C's route to the container
        moves to B. Returns the downtime ckpt migrate printed (ms)."""
        old = self.pid
        mrc, rrc, mtext, rtext = self.mig2_migrate(reap, tag, rargs, margs, rprefix=rprefix)
        if mrc != 0 or rrc != 0:
            raise Fail("migrate exit %s (%r), receive exit %s (%r)"
                       % (mrc, mtext.strip()[-400:], rrc, rtext.strip()[-400:]))
        m = re.search(r"migrated pid %d to .* down (\d+) ms" % old, mtext)
        if not m:
            raise Fail("migrate said %r" % mtext.strip())
        self.topo.route(self.MIG2_SUB, "b")
        with open(self.p(tag + "-receive.out")) as f:
            self.pid = int(f.read())
        self.notes.append("down %s ms" % m.group(1))
        self.wait_until("the original %d to go" % old, lambda: not pid_alive(old), reap,
                        timeout=20)
        if not self.topo.link_exists("b", self.MIG2_HOSTIF):
            raise Fail("no host end %s in host B after the migration" % self.MIG2_HOSTIF)
        self.wait_until("the host end %s to leave host A" % self.MIG2_HOSTIF,
                        lambda: not self.topo.link_exists("a", self.MIG2_HOSTIF), [], timeout=20)
        for h in "ab":
            if self.mig2_locks(h):
                raise Fail("network lock(s) %s left in host %s after the migration"
                           % (self.mig2_locks(h), h.upper()))
        return int(m.group(1))

    def mig2_end(self, sig=signal.SIGTERM, what="the migrated server"):
        """Signals the migrated root (not a child of the runner's) and waits
        for it to end."""
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass
        self.wait_until("%s to end" % what, lambda: not pid_alive(self.pid), [], timeout=EXIT_TIMEOUT)

    def mig2_refused(self, pr, progress):
        """A migration whose target fails: host B has a link of the host
        end's name. Both sides exit 1, migrate names the link; the original
        runs on in A with its connections (progress() goes on), no lock is
        left in A or in the container's namespace, the host end is still in
        A. The link is then removed (the migration after works)."""
        topo, hostif = self.topo, self.MIG2_HOSTIF
        topo.sh("-n", topo.ns["b"], "link", "add", hostif, "type", "bridge")
        mrc, rrc, mtext, rtext = self.mig2_migrate([pr], "f")
        if mrc != 1 or rrc != 1:
            raise Fail("migrate exit %s, receive exit %s: want 1 and 1 (%r)"
                       % (mrc, rrc, mtext.strip()[-300:]))
        if not re.search(r"migration failed: .*the target could not restore it: .*host end %s.*"
                         r"taken.*; pid %d runs on here" % (hostif, self.pid), mtext):
            raise Fail("migrate said %r" % mtext.strip())
        if not pid_alive(self.pid) or pr.poll() is not None:
            raise Fail("the original is gone after the failed migration")
        if not topo.link_exists("a", hostif):
            raise Fail("the host end %s left host A after the failed migration" % hostif)
        for h in "ab":
            if self.mig2_locks(h):
                raise Fail("network lock(s) %s left in host %s after the failed migration"
                           % (self.mig2_locks(h), h.upper()))
        nft = shutil.which("nft") or "/usr/sbin/nft"
        r = subprocess.run(["nsenter", "--net=/proc/%d/ns/net" % self.pid, "--", nft, "list",
                            "tables"], capture_output=True, timeout=30)
        if b"ckpt_lock" in r.stdout:
            raise Fail("the container's network lock is left after the failed migration: %r"
                       % r.stdout)
        progress(10)
        topo.sh("-n", topo.ns["b"], "link", "del", hostif)

    def small_tmpfs(self, name, size):
        """A tmpfs of size (mount's "16m") on the test's directory name,
        for a test that runs out of space; the caller unmounts it."""
        where = self.p(name)
        os.mkdir(where)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "ckpt-test", where],
                           capture_output=True, timeout=30)
        if r.returncode != 0:
            raise Skip("cannot mount a tmpfs: %r" % r.stderr.decode().strip())
        return where

    def mig2_nospace(self, pr, progress):
        """A migration whose target runs out of space: ckpt receive keeps
        the pre-copy rounds in $TMPDIR, here a tmpfs of 16 MiB, and the
        server holds 64 MiB. Both sides exit 1, migrate says the target ran
        out of space; the original runs on in A with its connections, no
        lock is left in A or B, receive left nothing in its directory. Then
        the migration to a roomy target works."""
        small = self.small_tmpfs("small", "16m")
        try:
            mrc, rrc, mtext, rtext = self.mig2_migrate([pr], "f", renv={"TMPDIR": small})
            left = os.listdir(small)
        finally:
            subprocess.run(["umount", small], capture_output=True, timeout=30)
        if mrc != 1 or rrc != 1:
            raise Fail("migrate exit %s, receive exit %s: want 1 and 1 (%r)"
                       % (mrc, rrc, mtext.strip()[-300:]))
        if not re.search(r"migration failed: .*no space left on device.*runs on here",
                         mtext, re.I | re.S):
            raise Fail("migrate said %r" % mtext.strip()[-400:])
        self.mig2_source_intact(pr, "failed")
        if left:
            raise Fail("ckpt receive left %r in its directory" % left)
        progress(10)

    def mig2_echo_done(self, cl):
        """py_echo.py's client cl told to stop; it must say PASS; then the
        migrated server ends."""
        with open(self.p("stop"), "w"):
            pass
        self.wait_all([cl], EXIT_TIMEOUT, "the echo client")
        with open(self.p("client.log"), errors="replace") as f:
            out = f.read()
        if cl.returncode != 0 or not out.startswith("PASS"):
            raise Fail("the echo client: status %s: %s" % (cl.returncode, out.strip()[-300:]))
        self.mig2_end()

    def flow_netns_nat(self):
        """ckpt run --net --nat on test host A (a python3 that waits), and
        py_echo.py's server in C, which has no route to the container's
        subnet: a connection from the container's namespace to C is
        answered only through A's NAT, and C sees A's address as its peer.
        checkpoint --kill in A; A's NAT table removed meanwhile; the restart
        makes it again, and a new connection from the restored namespace is
        answered through it. The container is py_echo.py's client, its 3
        connections to C's server through the NAT each with a line in
        flight: they go on after the restart (20 more rounds of echoes), no
        reset, no wrong echo."""
        if os.geteuid() != 0:
            raise Skip("ckpt run --net needs root")
        if not (shutil.which("ip") and shutil.which("nsenter")):
            raise Skip("ip (iproute2) or nsenter (util-linux) not installed")
        topo = self.topo = twohost.TwoHost("%d%s" % (os.getpid() % 100000, self.name))
        try:
            topo.make()
        except twohost.TopoError as e:
            raise Fail("the test hosts: %s" % e)
        hostif, c = self.MIG2_HOSTIF, topo.addr("c")
        table = "ckpt_nat_" + hostif
        py = [self.opts.python, os.path.join(HERE, "py_echo.py")]
        srv = self.popen(topo.argv("c", py + ["server"]), err=self.p("server.log"),
                         env=dict(os.environ, PY_ECHO_HOST="0.0.0.0"))
        self.logs.append(self.p("server.log"))
        port = int(self.wait_file("port", srv))
        pr = self.mig2_run(py + ["client", str(port), "3"], run_args=["--nat"],
                           env=dict(PY_ECHO_HOST=c))

        rounds = self.echo_rounds

        def progress(k=20):
            self.echo_progress(k, [], 60)
        progress(5)

        def through_nat(when):
            """one line echoed on a new connection from the container's
            namespace to C, and C sees A's address as its peer (asked while
            the connection is open)"""
            code = ("import socket, sys; s = socket.create_connection((%r, %d), 30); "
                    "s.sendall(b'new\\n'); print(s.recv(100).decode().strip(), "
                    "s.getsockname()[0], flush=True); sys.stdin.read()" % (c, port))
            cl = subprocess.Popen(["nsenter", "--net=/proc/%d/ns/net" % self.pid, "--",
                                   self.opts.python, "-c", code], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                out = cl.stdout.readline().decode().split()
                seen = subprocess.run(topo.argv("c", ["ss", "-tnH", "state", "established",
                                                      "sport", "= :%d" % port]),
                                      capture_output=True, timeout=30).stdout.decode()
            finally:
                cl.stdin.close()
                cl.wait(timeout=60)
                err = cl.stderr.read()
                cl.stdout.close()
                cl.stderr.close()
            if out[:1] != ["new"]:
                raise Fail("%s: a connection from the container to C: %r %r"
                           % (when, out, err[-300:]))
            peers = {l.split()[-1].rsplit(":", 1)[0] for l in seen.splitlines()}
            if peers != {topo.addr("a")}:
                raise Fail("%s: C saw the peers %r (the container is %s), want only A's "
                           "address %s" % (when, peers, out[1:], topo.addr("a")))

        through_nat("before the checkpoint")
        if table not in (topo.nft_tables("a") or ()):
            raise Fail("no table %s in host A after ckpt run --nat" % table)
        if self.t["case"] == "migrate":
            return self.nat_migrate_refused(pr, port, progress)
        img, log = self.p("img"), self.p("ckpt.log")
        self.logs += [self.p("ckpt.err"), log, self.p("restart.err"), self.p("restart.log")]
        cp = self.popen(topo.argv("a", self.ckpt_argv("checkpoint", str(self.pid), "-o", img,
                                                      "--kill", "--log", log)),
                        err=self.p("ckpt.err"))
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint", reap=[pr])
        if cp.returncode != 0:
            raise Fail("checkpoint exit %d: %s" % (cp.returncode, tail(self.p("ckpt.err"), 5)))
        self.wait_until("the host end %s to go" % hostif,
                        lambda: not topo.link_exists("a", hostif), [], timeout=20)
        if table not in (topo.nft_tables("a") or ()):
            raise Fail("the table %s left host A with the SIGKILL of the container" % table)
        subprocess.run(topo.argv("a", ["nft", "delete", "table", "ip", table]),
                       capture_output=True, timeout=30)
        self.nat_retransmit(topo, port)
        rpid = self.p("restart.pid")
        rp = self.popen(topo.argv("a", self.ckpt_argv("restart", img, "--detach", "--pidfile",
                                                      rpid, "--log", self.p("restart.log"))),
                        err=self.p("restart.err"), out=self.p("restart.out"))
        self.wait_all([rp], CHECKPOINT_TIMEOUT, "ckpt restart")
        if rp.returncode != 0:
            raise Fail("restart exit %d: %s" % (rp.returncode, tail(self.p("restart.err"), 5)))
        with open(rpid) as f:
            self.pid = int(f.read())
        if table not in (topo.nft_tables("a") or ()):
            raise Fail("no table %s in host A after the restart" % table)
        through_nat("after the restart")
        progress()
        self.nat_echo_done(rounds())
        self.mig2_end(signal.SIGKILL, "the restored container")  # its pid 1: no SIGTERM

    def c_conns(self, topo, port):
        """C's server's connections: (count, how many have data unacked,
        retransmissions in all), from ss -ti in C."""
        out = subprocess.run(topo.argv("c", ["ss", "-tinH", "state", "established", "sport",
                                             "= :%d" % port]),
                             capture_output=True, timeout=30).stdout.decode()
        n = len(re.findall(r"^\S", out, re.M))
        unacked = len(re.findall(r"\bunacked:[1-9]", out))
        retrans = sum(int(x) for x in re.findall(r"\bretrans:\d+/(\d+)", out))
        return n, unacked, retrans

    def nat_retransmit(self, topo, port):
        """With A's NAT table gone, C's retransmissions are not translated
        back: they come in to A's own address and port, where no socket
        is. When C has data in flight, waits until it has retransmitted
        once more (or a connection is gone: the reset the lock must
        prevent), so that the restart meets what came in meanwhile."""
        n, unacked, retrans = self.c_conns(topo, port)
        if not unacked:
            self.notes.append("nothing in flight from C")
            return

        def more():
            m, _, r = self.c_conns(topo, port)
            return m < n or r > retrans
        self.wait_until("C to retransmit into A without its NAT", more, [], timeout=30)
        self.notes.append("C retransmitted")

    def echo_rounds(self):
        """py_echo.py's client's count of full rounds (its file "rounds")."""
        try:
            with open(self.p("rounds")) as f:
                return int(f.read() or 0)
        except (OSError, ValueError):
            return 0

    def echo_progress(self, k, procs, timeout):
        """Waits for k more rounds of py_echo.py's client; Fail if one of
        procs exits first."""
        r = self.echo_rounds()
        self.wait_until("%d more rounds of echoes" % k, lambda: self.echo_rounds() >= r + k,
                        procs, timeout=timeout)

    def nat_echo_done(self, rounds):
        """The container's echo client told to stop: it must say PASS."""
        with open(self.p("stop"), "w"):
            pass
        self.wait_until("the echo client to end", lambda: not pid_alive(self.pid), [],
                        timeout=EXIT_TIMEOUT)
        with open(self.p("run.out"), errors="replace") as f:
            out = f.read()
        if "PASS" not in out:
            raise Fail("the echo client in the container: %r" % out.strip()[-300:])
        self.notes.append("%d rounds" % rounds)

    def nat_migrate_refused(self, pr, port, progress):
        """netns_nat_mig: the container's connections leave through A's NAT,
        which B's would not give the same address: ckpt migrate refuses,
        naming each by pid and fd, peer and host end; the container runs on
        in A with its connections (10 more rounds), no lock left."""
        c, hostif = self.topo.addr("c"), self.MIG2_HOSTIF
        mrc, rrc, mtext, rtext = self.mig2_migrate([pr], "m")
        if mrc == 0:
            raise Fail("migrate of connections through the NAT: exit 0 (%r)" % mtext[-300:])
        rx = (r"pid \d+ fd \d+ \(inet\): its peer %s port %d is reached through this host's "
              r"NAT \(masquerade on the host end %s\)" % (re.escape(c), port, re.escape(hostif)))
        if not re.search(rx, mtext):
            raise Fail("migrate said %r" % mtext.strip()[-500:])
        self.mig2_source_intact(pr, "refused")
        progress(10)
        with open(self.p("rounds")) as f:
            self.nat_echo_done(int(f.read() or 0))
        self.mig2_end(signal.SIGKILL, "the container")

    def flow_mig2_echo(self):
        """py_echo.py's asyncio echo server as pid 1 of `ckpt run --net` on
        host A, its 100 clients (py_echo.py client) in C, each with a line
        in flight and every echo checked; migrated to B (C's route moved
        after): the clients go on, 20 more rounds, no reset, no wrong echo;
        the host end is in B, none in A, no lock left in either. Case
        fail: a migration refused by B first (mig2_refused). Case precopy:
        the server also keeps rewriting 64 MiB of stamped pages (py_echo.py,
        $PY_ECHO_MEM); the migration must pre-copy in 2 rounds or more, and
        every page must hold its last stamp after it."""
        topo = self.mig2_hosts()
        n = self.ECHO_CLIENTS
        py = [self.opts.python, os.path.join(HERE, "py_echo.py")]
        precopy = (self.t["case"] or "").startswith("precopy")
        env = {"PY_ECHO_HOST": "0.0.0.0"}
        if precopy:
            env["PY_ECHO_MEM"] = "64"
        if self.t["case"] == "precopy_remap":
            env["PY_ECHO_REMAP"] = "1"
        # without CAP_SYS_PTRACE, as the receive that restores it
        pr = self.mig2_run(list(self.mig2_fill_args().get("rprefix", ())) + py + ["server"],
                           env=env)
        port = int(self.wait_file("port", pr))
        self.logs.append(self.p("client.log"))
        cl = self.popen(topo.argv("c", py + ["client", str(port), str(n)]),
                        out=self.p("client.log"), err=self.p("client.log"),
                        env=dict(os.environ, PY_ECHO_HOST=self.MIG2_CT))

        def rounds():
            try:
                with open(self.p("rounds")) as f:
                    return int(f.read() or 0)
            except (OSError, ValueError):
                return 0

        def progress(k):
            r = rounds()
            self.wait_until("%d more rounds of echoes" % k, lambda: rounds() >= r + k,
                            [cl], timeout=90)
        progress(5)
        if self.t["case"] == "fail" and not self.opts.no_ckpt:
            self.mig2_refused(pr, progress)
        if self.t["case"] == "precopy_nospace" and not self.opts.no_ckpt:
            self.mig2_nospace(pr, progress)
        if not self.opts.no_ckpt:
            self.mig2_move([pr], **self.mig2_fill_args())
            self.mig2_fill_check()
            progress(20)
            self.notes.append("%d rounds" % rounds())
        if precopy and not self.opts.no_ckpt:
            with open(self.p("m-migrate.err"), errors="replace") as f:
                m = re.search(r"pre-copy: (\d+) rounds?, ([\d.]+) MiB", f.read())
            if not m or int(m.group(1)) < 2 or float(m.group(2)) < 64:
                raise Fail("no pre-copy of 2 rounds or more and 64 MiB: migrate said %r"
                           % (m.group(0) if m else tail(self.p("m-migrate.err"), 5)))
            self.notes.append("pre-copy %s rounds" % m.group(1))
        self.mig2_echo_end(cl, precopy)

    def mig2_fill_args(self):
        """How mig2_echo's case runs ckpt receive: --lazy, --eager, or
        without CAP_SYS_PTRACE (no userfaultfd for the lazy server, as long
        as vm.unprivileged_userfaultfd is 0: else the case is skipped; the
        server runs without it too, or no restart could give it back)."""
        case = self.t["case"]
        if case == "precopy_lazy":
            return {"rargs": ("--lazy",)}
        if case == "precopy_eager":
            return {"rargs": ("--eager",)}
        if case == "precopy_nouffd":
            with open("/proc/sys/vm/unprivileged_userfaultfd") as f:
                if f.read().strip() != "0":
                    raise Skip("vm.unprivileged_userfaultfd is not 0: any receive may make a "
                               "userfaultfd")
            return {"rprefix": ("setpriv", "--bounding-set", "-sys_ptrace", "--inh-caps",
                                "-sys_ptrace", "--")}
        return {}

    def mig2_fill_check(self):
        """The receive filled the memory as its case says: lazily unless
        --eager or it could not (then it says why)."""
        with open(self.p("m-receive.err"), errors="replace") as f:
            text = f.read()
        lazy = "its memory filled lazily" in text
        fallback = re.search(r"memory is written before the tree runs \(not lazily: (.*)\)", text)
        case = self.t["case"]
        if case == "precopy_nouffd":
            if lazy or not fallback or "userfaultfd" not in fallback.group(1):
                raise Fail("receive without CAP_SYS_PTRACE: want the eager fallback and its "
                           "reason, it said %r" % text.strip()[-400:])
            self.notes.append("eager: no userfaultfd")
        elif case == "precopy_eager":
            if lazy or fallback:
                raise Fail("receive --eager: it said %r" % text.strip()[-400:])
            self.notes.append("eager")
        elif case and case.startswith("precopy"):
            if not lazy:
                raise Fail("receive (lazy by default): it said %r" % text.strip()[-400:])
            self.notes.append("lazy")

    def mig2_echo_end(self, cl, memcheck):
        """mig2_echo_done; then, with memcheck, py_echo.py's check of its
        stamped pages must say ok."""
        self.mig2_echo_done(cl)
        if memcheck:
            try:
                with open(self.p("memcheck")) as f:
                    mem = f.read()
            except OSError as e:
                raise Fail("the migrated server wrote no memory check: %s" % e)
            if not mem.startswith("ok"):
                raise Fail("the server's memory after the migration: %s" % mem.strip())
            self.notes.append("memory " + mem.strip())

    MIG2_VIP, MIG2_VIP6 = "10.214.0.100", "fd00:214::100"

    def mig2_vip_on(self, host, vip=MIG2_VIP):
        return re.search(r" %s/\d+ " % re.escape(vip),
                         self.topo.sh("-n", self.topo.ns[host], "-o", "addr", "show")) is not None

    def mig2_mac_for(self, vip, host):
        """C's neighbour entry for vip names host's eth0 mac within 3 s (B
        knows C's macs beforehand: only B's announcement can tell C)."""
        topo = self.topo
        mac = re.search(r"link/ether (\S+)", topo.sh("-n", topo.ns[host], "link", "show",
                                                      "eth0")).group(1)
        self.wait_until("C to have %s's mac %s for %s" % (host.upper(), mac, vip),
                        lambda: mac in topo.sh("-n", topo.ns["c"], "neigh", "show", vip), [],
                        timeout=3)

    @staticmethod
    def mig2_echo_line(sock, text):
        sock.sendall(text.encode() + b"\n")
        got = b""
        while not got.endswith(b"\n"):
            b = sock.recv(100)
            if not b:
                raise Fail("the IPv6 client's connection ended")
            got += b
        if got.decode().strip() != text:
            raise Fail("the IPv6 client got %r for %r" % (got, text))

    def flow_mig2_plain(self):
        """py_plain.py's echo server, a process of host A's namespace (no
        `ckpt run --net`), listening on every address; A's eth0 also holds
        10.214.0.100/24, the address its 4 clients (py_echo.py client, in
        C) connect to. ok: migrated to B (ckpt receive --pidns: the original
        holds its pids until the kill): the address is on B's eth0 and gone
        from A's, the clients go on (B's gratuitous ARP tells C), 20 more
        rounds with every echo checked, no network lock in A or B. refuse:
        the server also holds a loopback connection to py_plain.py peer, a
        process of A outside the tree: migrate is refused naming the
        server's socket and the peer, both sides exit 1, the address stays
        on A alone, the server runs on in A and its clients go on. ok also
        has fd00:214::100/64 on A and one IPv6 connection of the runner's
        from C to it, echoed before and after (announced by B's unsolicited
        neighbour advertisement). nolink:
        the address is 10.214.5.1/24 on a link cksvc0 of A (a veth) (C routes
        10.214.5.0/24 through A), which B lacks: B refuses the address before
        anything is frozen, both sides exit 1 naming the link, the address
        stays on A alone and the clients go on."""
        topo = self.mig2_hosts()
        vip = self.MIG2_VIP
        if self.t["case"] == "nolink":
            vip = "10.214.5.1"
            topo.sh("-n", topo.ns["a"], "link", "add", "cksvc0", "type", "veth", "peer", "name",
                    "cksvc1")
            for l in ("cksvc0", "cksvc1"):
                topo.sh("-n", topo.ns["a"], "link", "set", l, "up")
            topo.sh("-n", topo.ns["a"], "addr", "add", vip + "/24", "dev", "cksvc0")
            topo.sh("-n", topo.ns["c"], "route", "add", "10.214.5.0/24", "via", topo.addr("a"))
        else:
            topo.sh("-n", topo.ns["a"], "addr", "add", vip + "/24", "dev", "eth0")
            topo.sh("-n", topo.ns["a"], "addr", "add", self.MIG2_VIP6 + "/64", "dev", "eth0",
                    "nodad")
            topo.sh("-n", topo.ns["c"], "addr", "add", "fd00:214::3/64", "dev", "br0", "nodad")
        py = [self.opts.python, os.path.join(HERE, "py_plain.py")]
        args = ["server"]
        if self.t["case"] == "refuse":
            self.logs.append(self.p("peer.log"))
            peer = self.popen(topo.argv("a", py + ["peer"]), out=self.p("peer.log"),
                              err=self.p("peer.log"))
            args.append(self.wait_file("peerport", peer).strip())
        self.logs.append(self.p("server.log"))
        pr = self.popen(topo.argv("a", py + args), out=self.p("server.log"),
                        err=self.p("server.log"))
        self.prog, self.pid = pr, pr.pid
        port = int(self.wait_file("port", pr))
        self.logs.append(self.p("client.log"))
        cl = self.popen(topo.argv("c", [self.opts.python, os.path.join(HERE, "py_echo.py"),
                                        "client", str(port), "4"]),
                        out=self.p("client.log"), err=self.p("client.log"),
                        env=dict(os.environ, PY_ECHO_HOST=vip))

        def progress(k):
            r = self.counter("rounds")
            self.wait_until("%d more rounds of echoes" % k,
                            lambda: self.counter("rounds") >= r + k, [cl], timeout=90)
        progress(5)
        if self.opts.no_ckpt:
            pass
        elif self.t["case"] == "refuse":
            mrc, rrc, mtext, rtext = self.mig2_migrate([pr], "f", rargs=["--pidns"])
            want = (r"pid %d fd \d+ \(inet\): a loopback connection to 127\.0\.0\.1:%s, a "
                    r"process outside the tree, cannot move to another host" % (self.pid, args[1]))
            if mrc != 1 or rrc != 1 or not re.search(want, mtext):
                raise Fail("migrate exit %s, receive exit %s: want 1 and 1 and %r in %r"
                           % (mrc, rrc, want, mtext.strip()[-500:]))
            if not pid_alive(self.pid) or pr.poll() is not None:
                raise Fail("the server is gone after the refused migration")
            if not self.mig2_vip_on("a") or self.mig2_vip_on("b"):
                raise Fail("after the refused migration %s is on A: %s, on B: %s (want A only)"
                           % (self.MIG2_VIP, self.mig2_vip_on("a"), self.mig2_vip_on("b")))
            progress(5)
        elif self.t["case"] == "nolink":
            mrc, rrc, mtext, rtext = self.mig2_migrate([pr], "f", rargs=["--pidns"])
            want = (r"migration refused: the target cannot take the tree's addresses: address "
                    r"10\.214\.5\.1/24: no link cksvc0 on this host to put it on")
            if mrc != 1 or rrc != 1 or not re.search(want, mtext):
                raise Fail("migrate exit %s, receive exit %s: want 1 and 1 and %r in %r"
                           % (mrc, rrc, want, mtext.strip()[-500:]))
            if os.path.exists(self.p("f-migrate.log")) and "network lock" in open(
                    self.p("f-migrate.log")).read():
                raise Fail("the tree was frozen (its network lock made) before B refused its "
                           "address")
            if not pid_alive(self.pid) or pr.poll() is not None:
                raise Fail("the server is gone after the refused migration")
            if not self.mig2_vip_on("a", vip) or self.mig2_vip_on("b", vip):
                raise Fail("after the refused migration %s is on A: %s, on B: %s (want A only)"
                           % (vip, self.mig2_vip_on("a", vip), self.mig2_vip_on("b", vip)))
            progress(5)
        elif self.t["case"] == "srcdies":
            old = self.pid
            mrc, rrc, mtext, rtext = self.mig2_migrate([pr], "d", rargs=["--pidns"],
                                                       mfault="commit")
            if mrc != -signal.SIGKILL or rrc != 0:
                raise Fail("migrate (killed at its commit) exit %s (%r), receive exit %s (%r): "
                           "want -9 and 0" % (mrc, mtext.strip()[-400:], rrc,
                                              rtext.strip()[-400:]))
            with open(self.p("d-receive.out")) as f:
                self.pid = int(f.read())
            self.wait_until("the original %d to go" % old, lambda: not pid_alive(old), [pr],
                            timeout=20)
            if not pid_alive(self.pid):
                raise Fail("the copy %d on B is not running" % self.pid)
            # the guardian's work, after the kill: address, then lock
            self.wait_until("%s to leave A" % vip, lambda: not self.mig2_vip_on("a"), [],
                            timeout=20)
            if not self.mig2_vip_on("b"):
                raise Fail("%s is not on B after the migration" % vip)
            self.wait_until("A's network lock to go", lambda: not self.mig2_locks("a"), [],
                            timeout=20)
            progress(20)
        else:
            old = self.pid
            # one IPv6 connection too, from C to the IPv6 address
            c6 = topo.connect("c", self.MIG2_VIP6, port, 30)
            self.mig2_echo_line(c6, "v6 before")
            # B knows C's macs already: its packets to C ask nothing that
            # would tell C where the addresses went
            mac_c = re.search(r"link/ether (\S+)", topo.sh("-n", topo.ns["c"], "link", "show",
                                                            "br0")).group(1)
            for addr_c in (topo.addr("c"), "fd00:214::3"):
                topo.sh("-n", topo.ns["b"], "neigh", "replace", addr_c, "lladdr", mac_c,
                        "dev", "eth0", "nud", "permanent")
            mrc, rrc, mtext, rtext = self.mig2_migrate([pr], rargs=["--pidns"])
            m = re.search(r"migrated pid %d to .* down (\d+) ms" % old, mtext)
            if mrc != 0 or rrc != 0 or not m:
                raise Fail("migrate exit %s (%r), receive exit %s (%r)"
                           % (mrc, mtext.strip()[-400:], rrc, rtext.strip()[-400:]))
            self.notes.append("down %s ms" % m.group(1))
            with open(self.p("m-receive.out")) as f:
                self.pid = int(f.read())
            self.wait_until("the original %d to go" % old, lambda: not pid_alive(old), [pr],
                            timeout=20)
            for v in (self.MIG2_VIP, self.MIG2_VIP6):
                if self.mig2_vip_on("a", v) or not self.mig2_vip_on("b", v):
                    raise Fail("after the migration %s is on A: %s, on B: %s (want B only)"
                               % (v, self.mig2_vip_on("a", v), self.mig2_vip_on("b", v)))
                # B's gratuitous ARP, its unsolicited neighbour advertisement:
                # C's own probing would take 5 s or more (delay_first_probe_time)
                self.mig2_mac_for(v, "b")
            self.mig2_echo_line(c6, "v6 after")
            c6.close()
            for h in "ab":
                if self.mig2_locks(h):
                    raise Fail("network lock(s) %s left in host %s after the migration"
                               % (self.mig2_locks(h), h.upper()))
            progress(20)
        self.notes.append("%d rounds" % self.counter("rounds"))
        self.mig2_echo_done(cl)

    def counter(self, name):
        try:
            with open(self.p(name)) as f:
                return int(f.read() or 0)
        except (OSError, ValueError):
            return 0

    @staticmethod
    def proc_state(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None

    def mig2_untracked(self, pid):
        """Why pid still has ckpt's dirty tracking (a tracking fd, a vma
        registered for it: VmFlags "uw"), or None."""
        fds = os.listdir("/proc/%d/fd" % pid)
        for fd in fds:
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if "ckpt-track" in link or "userfaultfd" in link:
                return "fd %s is %s" % (fd, link)
        with open("/proc/%d/smaps" % pid) as f:
            for ln in f:
                if ln.startswith("VmFlags:") and " uw" in ln:
                    return "a vma is still registered for write-protection (%s)" % ln.strip()
        return None

    def flow_mig2_precopy_fail(self):
        """Pre-copy migrations whose transport breaks in round 1. First a
        fake target (py_migfake.py in B) takes round 0 and closes both
        connections in the middle of round 1: ckpt migrate exits 1 naming
        the round, the server (py_echo.py with 16 MiB of stamped pages,
        clients in C) runs on with its connections, without ckpt's tracking
        (no tracking fd, no vma with VmFlags "uw"), no lock in A or B or the
        container, its host end still in A. Then a fake source sends that
        round 0 to a real ckpt receive in B and breaks round 1: receive
        exits 1 and its pre-copy directory (under $TMPDIR) is gone, nothing
        restored. Finally every echo and page is checked."""
        topo = self.mig2_hosts()
        py = [self.opts.python, os.path.join(HERE, "py_echo.py")]
        fake = [self.opts.python, os.path.join(HERE, "py_migfake.py")]
        pr = self.mig2_run(py + ["server"], env={"PY_ECHO_HOST": "0.0.0.0", "PY_ECHO_MEM": "16"})
        port = int(self.wait_file("port", pr))
        self.logs += [self.p("client.log"), self.p("ft.err"), self.p("fs.err"), self.p("f.err"),
                      self.p("f.log"), self.p("r.err"), self.p("r.log")]
        cl = self.popen(topo.argv("c", py + ["client", str(port), "10"]),
                        out=self.p("client.log"), err=self.p("client.log"),
                        env=dict(os.environ, PY_ECHO_HOST=self.MIG2_CT))

        def progress(k):
            r = self.counter("rounds")
            self.wait_until("%d more rounds of echoes" % k,
                            lambda: self.counter("rounds") >= r + k, [cl], timeout=90)
        progress(3)
        if self.opts.no_ckpt:
            raise Skip("needs ckpt")
        key, b = self.p("key"), topo.addr("b")
        if self.run_ckpt(["keygen", key]).returncode != 0:
            raise Fail("keygen failed")
        ft = self.popen(topo.argv("b", fake + ["target", b, self.dir]), out=self.p("ft.out"),
                        err=self.p("ft.err"))
        fport = int(self.wait_file("fake-port", ft))
        mp = self.popen(topo.argv("a", self.ckpt_argv("migrate", str(self.pid), "--to",
                                                      "%s:%d" % (b, fport), "--key", key,
                                                      "--log", self.p("f.log"))),
                        err=self.p("f.err"), out=self.p("f.out"))
        self.wait_all([mp, ft], CHECKPOINT_TIMEOUT, "ckpt migrate and the fake target", reap=[pr])
        mtext = tail(self.p("f.err"), 10) or ""
        if ft.returncode != 0:
            raise Fail("the fake target: %s" % tail(self.p("ft.err"), 5))
        if mp.returncode != 1 or not re.search(r"migration failed: pre-copy round 1: .*pid %d "
                                                r"runs on here" % self.pid, mtext):
            raise Fail("migrate exit %s: %r" % (mp.returncode, mtext.strip()[-400:]))
        if not pid_alive(self.pid) or pr.poll() is not None:
            raise Fail("the server is gone after the failed pre-copy")
        why = self.mig2_untracked(self.pid)
        if why:
            raise Fail("the tracking is left after the failed pre-copy: %s" % why)
        for h in "ab":
            if self.mig2_locks(h):
                raise Fail("network lock(s) %s left in host %s" % (self.mig2_locks(h), h.upper()))
        if not topo.link_exists("a", self.MIG2_HOSTIF):
            raise Fail("the host end left host A after the failed pre-copy")
        progress(5)
        tmp = self.p("rtmp")
        os.mkdir(tmp)
        rp = self.popen(topo.argv("b", self.ckpt_argv("receive", "--listen", b + ":0", "--key",
                                                      key, "--log", self.p("r.log"))),
                        err=self.p("r.err"), out=self.p("r.out"),
                        env=dict(os.environ, TMPDIR=tmp))
        rport = []

        def listening():
            m = re.search(r"waiting for a migration on %s:(\d+)" % re.escape(b),
                          tail(self.p("r.err"), 5) or "")
            return bool(m and rport.append(int(m.group(1))) is None)
        self.wait_until("ckpt receive listening in host B", listening, [rp])
        fs = self.popen(topo.argv("a", fake + ["source", b, str(rport[0]), self.dir]),
                        out=self.p("fs.out"), err=self.p("fs.err"))
        self.wait_all([rp, fs], CHECKPOINT_TIMEOUT, "ckpt receive and the fake source",
                      reap=[pr])
        rtext = tail(self.p("r.err"), 10) or ""
        if fs.returncode != 0:
            raise Fail("the fake source: %s" % tail(self.p("fs.err"), 5))
        if rp.returncode != 1 or "the migration failed: pre-copy round 1" not in rtext:
            raise Fail("receive exit %s: %r" % (rp.returncode, rtext.strip()[-400:]))
        if os.listdir(tmp):
            raise Fail("receive left %s in its TMPDIR" % os.listdir(tmp))
        progress(5)
        self.mig2_echo_end(cl, True)

    def flow_mig2_jobstop(self):
        """py_jobstop.py as pid 1 of `ckpt run --net` on host A: its child
        is in a job-control stop (SIGTSTP), pid 1 counts; migrated to B:
        pid 1 counts on there, the child stays stopped (state T, its
        counter still) until the runner sends it SIGCONT, and then counts."""
        self.mig2_hosts()
        pr = self.mig2_run([self.opts.python, os.path.join(HERE, "py_jobstop.py")])
        self.wait_file("stopped", pr)

        def child():
            with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
                kids = [int(x) for x in f.read().split()]
            if len(kids) != 1:
                raise Fail("pid %d has children %r, want one" % (self.pid, kids))
            return kids[0]
        if self.proc_state(child()) != "T":
            raise Fail("the child %d is in state %s before the migration, want T"
                       % (child(), self.proc_state(child())))
        if self.opts.no_ckpt:
            return self.mig2_end()
        self.mig2_move([pr])
        frozen = self.counter("child.n")
        at = self.counter("parent.n")
        self.wait_until("pid 1 counting on after the migration",
                        lambda: self.counter("parent.n") >= at + 25, [], timeout=60)
        kid = child()
        if self.proc_state(kid) != "T" or self.counter("child.n") != frozen:
            raise Fail("the child %d runs after the migration (state %s, counted %d -> %d): its "
                       "job-control stop was lost" % (kid, self.proc_state(kid), frozen,
                                                      self.counter("child.n")))
        os.kill(kid, signal.SIGCONT)
        self.wait_until("the child counting after SIGCONT",
                        lambda: self.counter("child.n") >= frozen + 5, [], timeout=60)
        self.mig2_end()

    def mig2_in_c(self, argv, **kw):
        """argv run to its end in client C."""
        return subprocess.run(self.topo.argv("c", argv), capture_output=True, timeout=60, **kw)

    def flow_mig2_nginx(self):
        """nginx as packaged (master as root, 2 workers as nobody) as pid 1
        of `ckpt run --net` on host A, serving a 50 MB file of random bytes
        to curl in C (5 MB/s); migrated to B once curl has a tenth of it
        (C's route moved after): curl ends with status 0 (no reset, no
        timeout), the file is byte-identical, the workers are there, still
        nobody; a new request through B is served; SIGQUIT ends nginx."""
        topo = self.mig2_hosts()
        nginx = self.nginx_bin()
        os.chmod(self.dir, 0o755)  # the workers (nobody) read www/
        os.mkdir(self.p("www"), 0o755)
        os.mkdir(self.p("tmp"), 0o755)
        big = os.urandom(self.NGINX_BIG)
        with open(self.p("www", "big"), "wb") as f:
            f.write(big)
        os.chmod(self.p("www", "big"), 0o644)
        conf = self.NGINX_CONF.format(d=self.dir, listen="0.0.0.0:8080")
        with open(self.p("nginx.conf"), "w") as f:
            f.write(conf.replace("    access_log", "    sendfile on;\n    access_log", 1))
        self.logs += [self.p("error.log"), self.p("curl.err")]
        pr = self.mig2_run([nginx, "-c", self.p("nginx.conf"), "-p", self.dir])
        url = "http://%s:8080/big" % self.MIG2_CT
        self.wait_until("nginx serving in host A", lambda: self.mig2_in_c(
            ["curl", "-sS", "--max-time", "5", "-o", "/dev/null", "-r", "0-0", url]).returncode
            == 0, [pr])

        def forked():
            try:
                return self.nginx_workers(self.pid)
            except Fail:
                return None
        self.wait_until("nginx's two workers as nobody", forked, [pr])
        cl = self.popen(topo.argv("c", ["curl", "-sS", "--limit-rate", str(self.NGINX_RATE),
                                        "--max-time", "180", "-o", self.p("dl"), url]),
                        err=self.p("curl.err"))
        at = [0]

        def got(k):
            at[0] = self.size("dl")
            self.wait_until("%d more bytes downloaded" % k,
                            lambda: self.size("dl") >= at[0] + k, [cl], timeout=60)
        got(self.NGINX_BIG // 10)
        if not self.opts.no_ckpt:
            self.mig2_move([pr])
            at[0] = self.size("dl")
            if at[0] >= self.NGINX_BIG:
                raise Fail("the download had finished at the migration")
            self.notes.append("migrated at %d%% of the download" % (100 * at[0] // self.NGINX_BIG))
            self.nginx_workers(self.pid)
        self.wait_all([cl], 180, "curl")
        self.check_download(cl, big)
        r = self.mig2_in_c(["curl", "-sS", "--max-time", "30", "-o", "/dev/null", "-w",
                            "%{http_code} %{size_download}", url])
        if r.stdout.decode() != "200 %d" % self.NGINX_BIG:
            raise Fail("a new request got %r: %s" % (r.stdout, r.stderr.decode(errors="replace")))
        self.mig2_end(signal.SIGQUIT, "nginx")

    def flow_mig2_redis(self):
        """redis-server (TCP only) as pid 1 of `ckpt run --net` on host A;
        redis-benchmark in C sends SETs over 10 connections (one test, no end:
        the same connections throughout); migrated to
        B (C's route moved after): the benchmark runs on with no error, on
        the same 10 connections (CLIENT LIST: ids and addresses; it does not
        reconnect, a reset one would hang), the server's command count keeps
        growing, the key the runner set before is there; SHUTDOWN ends it."""
        if not (shutil.which("redis-server") and shutil.which("redis-benchmark")
                and shutil.which("redis-cli")):
            raise Skip("redis-server, redis-benchmark or redis-cli not installed")
        self.mig2_hosts()
        pr = self.mig2_run(["redis-server", "--port", "6379", "--bind", "0.0.0.0",
                            "--protected-mode", "no", "--save", "", "--appendonly", "no",
                            "--dir", self.dir, "--logfile", self.p("redis.log")])
        self.logs += [self.p("redis.log"), self.p("bench.err")]
        cli = ["redis-cli", "-h", self.MIG2_CT, "-p", "6379"]

        def cmd(*args):
            r = self.mig2_in_c(cli + list(args))
            return r.stdout.decode().strip() if r.returncode == 0 else None
        self.wait_until("redis-server answering in host A", lambda: cmd("PING") == "PONG", [pr])
        if cmd("SET", "before", "migration") != "OK":
            raise Fail("SET before the migration failed")

        def processed():
            for line in (cmd("INFO", "stats") or "").splitlines():
                if line.startswith("total_commands_processed:"):
                    return int(line.split(":")[1])
            return 0
        bench = self.popen(self.topo.argv("c", ["redis-benchmark", "-h", self.MIG2_CT, "-p",
                                                "6379", "-c", "10", "-t", "set", "-n",
                                                "1000000000", "-q"]),
                           out=self.p("bench.out"), err=self.p("bench.err"))

        def progress(k):
            n = processed()
            self.wait_until("%d more commands" % k, lambda: processed() >= n + k, [bench],
                            timeout=60)
        def conns():
            # the benchmark's connections (not redis-cli's own): id and address
            lines = (cmd("CLIENT", "LIST") or "").splitlines()
            return sorted(" ".join(w for w in l.split() if w.split("=")[0] in ("id", "addr"))
                          for l in lines if "cmd=client" not in l)
        progress(20000)
        before = conns()
        if len(before) != 10:
            raise Fail("redis-server has %d benchmark connections, want 10: %r"
                       % (len(before), before))
        if not self.opts.no_ckpt:
            self.mig2_move([pr])
            progress(20000)
            if conns() != before:
                raise Fail("the benchmark's connections changed across the migration: %r, "
                           "before %r" % (conns(), before))
        if bench.poll() is not None:
            raise Fail("redis-benchmark ended (%s): %s" % (bench.returncode,
                                                          tail(self.p("bench.out"), 5)))
        bench.send_signal(signal.SIGINT)
        self.wait_all([bench], 30, "redis-benchmark after SIGINT")
        out = ""
        for name in ("bench.out", "bench.err"):
            with open(self.p(name), errors="replace") as f:
                out += f.read()
        if re.search(r"(?i)error|reset|refused", out):
            raise Fail("redis-benchmark: %r" % out[-400:])
        if cmd("GET", "before") != "migration":
            raise Fail("the key set before the migration is gone: %r" % cmd("GET", "before"))
        cmd("SHUTDOWN", "NOSAVE")
        self.wait_until("redis-server to end", lambda: not pid_alive(self.pid), [],
                        timeout=EXIT_TIMEOUT)

    @staticmethod
    def comm_is(pid, name):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip() == name
        except OSError:
            return False

    def mig2_sshds(self):
        return sum(self.comm_is(pid, "sshd") for pid in self.tree_pids(self.pid))

    def flow_mig2_sshd(self):
        """sshd (openssh-server) as pid 1 of `ckpt run --net` on host A; an
        ssh client in C, logged in by key, runs a counting loop there;
        migrated to B (C's route moved after): the session goes on with no
        line lost and no reset, the restored tree has as many sshd processes,
        and a new login through B works."""
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        ssh, keygen = shutil.which("ssh"), shutil.which("ssh-keygen")
        if not (os.access(sshd, os.X_OK) and ssh and keygen):
            raise Skip("openssh-server or openssh-client not installed")
        topo = self.mig2_hosts()
        self.sshd_setup(keygen)
        pr = self.mig2_run([sshd, "-D", "-e", "-f", self.p("sshd_config")])
        ct = self.MIG2_CT

        def listening():
            r = self.mig2_in_c([self.opts.python, "-c", "import socket; print(socket."
                                "create_connection(('%s', 22), timeout=5).recv(8))" % ct])
            return b"SSH-" in r.stdout
        self.wait_until("sshd listening on %s:22" % ct, listening, [pr], timeout=60)
        argv = [ssh, "-i", self.p("userkey"), "-o", "StrictHostKeyChecking=no", "-o",
                "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                "root@" + ct]
        self.logs.append(self.p("session.err"))

        def lines():
            with open(self.p("session.out")) as f:
                return f.read().split()
        for attempt in range(3):
            client = self.popen(topo.argv("c", argv + ["i=0; while true; do i=$((i+1)); echo $i; "
                                                       "sleep 0.05; done"]),
                                out=self.p("session.out"), err=self.p("session.err"))
            try:
                # the login shell's startup may take long on a loaded machine
                self.wait_until("the session's first lines", lambda: len(lines()) >= 20,
                                [client, pr], timeout=90)
                break
            except Fail:
                if attempt == 2 or client.poll() is not None:
                    raise
                self.notes.append("ssh login tried again")
        try:
            if self.opts.no_ckpt:
                return
            # sshd's own processes (the session's shell forks a sleep at a
            # time, and the shell's startup may run more)
            procs = self.mig2_sshds()
            n = len(lines())
            self.mig2_move([pr])
            self.wait_until("the session going on after the migration",
                            lambda: len(lines()) >= n + 40, [client])
            if self.mig2_sshds() != procs:
                raise Fail("the restored sshd has %d sshd processes, the original %d"
                           % (self.mig2_sshds(), procs))
            got = [int(x) for x in lines()]
            if got != list(range(1, len(got) + 1)):
                gap = next(i for i, v in enumerate(got) if v != i + 1)
                raise Fail("the session lost lines: %r" % got[max(0, gap - 2):gap + 3])
            r = self.mig2_in_c(argv + ["echo new-login-ok"])
            if r.stdout.strip() != b"new-login-ok":
                raise Fail("a new login after the migration: %r %r" % (r.stdout, r.stderr[-200:]))
        finally:
            client.kill()
            client.wait()
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def sockets_of(self, pid):
        """How many sockets pid holds."""
        n = 0
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
            except OSError:
                pass
        return n

    def aio_talk(self, path, *lines):
        """One connection from outside to the server at path: each line,
        its reply; then waits until the server has closed its end (a peer
        outside the tree would make the checkpoint refuse)."""
        before = self.sockets_of(self.pid)
        out = []
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(20)
            s.connect(path)
            f = s.makefile("rwb")
            for ln in lines:
                f.write(ln.encode() + b"\n")
                f.flush()
                out.append(f.readline().decode().rstrip("\n"))
            f.close()
        self.wait_until("the server to close the runner's connection",
                        lambda: self.sockets_of(self.pid) <= before, [], timeout=10)
        return out

    def make_rootfs(self):
        """A root file system in the test's directory: Debian's static
        busybox with its links, a small /etc, ct_rootfs.sh; ckpt run's
        arguments for it (the test's directory bound on /t)."""
        busybox = shutil.which("busybox")
        if not busybox:
            raise Skip("busybox (busybox-static) not installed")
        root = self.p("rootfs")
        # every mount point made here: a user without privilege could not
        for d in ("bin", "etc", "t", "dev", "proc", "sys", "scratch"):
            os.makedirs(os.path.join(root, d))
        open(os.path.join(root, "etc", "motd"), "w").close()
        if not self.t.get("overlay"):  # ct_rootfs.sh's, writable by any user
            open(os.path.join(root, "rootlog"), "w").close()
            os.chmod(os.path.join(root, "rootlog"), 0o666)
        shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
        names = subprocess.run([busybox, "--list"], capture_output=True, text=True).stdout
        for name in names.split():
            if name != "busybox":
                os.symlink("busybox", os.path.join(root, "bin", name))
        with open(os.path.join(root, "etc", "passwd"), "w") as f:
            f.write("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
        with open(os.path.join(root, "etc", "group"), "w") as f:
            f.write("root:x:0:\ntty:x:5:\nnogroup:x:65534:\n")
        for script in ("ct_rootfs.sh", self.t.get("script")):
            if script:
                shutil.copy(os.path.join(HERE, script), os.path.join(root, "etc"))
        with open(self.p("msg"), "w") as f:
            f.write("before\n")
        with open(self.p("motd"), "w") as f:
            f.write("motd\n")
        return ["--root", root, "--bind", self.dir + ":/t", "--bind",
                self.p("motd") + ":/etc/motd:ro", "--tmpfs", "/scratch:size=8m"]

    def rootfs_args(self):
        """make_rootfs's arguments; with overlay=True an overlay root
        (merged) whose lower layer is the busybox tree, upper and work
        in the test's directory."""
        args = self.make_rootfs()
        if self.t.get("overlay"):
            for d in ("merged", "upper", "work"):
                os.mkdir(self.p(d))
            if self.t["kind"] == "rootfs_unpriv":  # nobody's overlay writes them
                for d in ("upper", "work"):
                    os.chown(self.p(d), 65534, 65534)
            args[:2] = ["--root", self.p("merged"), "--overlay",
                        ",".join((args[1], self.p("upper"), self.p("work")))]
        return args

    def flow_rootfs(self):
        """ct_rootfs.sh as pid 1 of `ckpt run --root` (with --overlay: an
        overlay whose lower layer is the busybox tree) with a bind and a
        tmpfs: checkpoint --kill; the runner changes the bound file; restart
        (the modes as flow_container): the loop goes on with the tmpfs's
        files all there and reads the new contents through the bind."""
        pidfile = self.p("run.pid")
        args = self.rootfs_args()
        pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", pidfile] + args + ["--"])
        self.wait_container(pr, pidfile)
        if self.opts.no_ckpt:
            with open(self.p("msg"), "w") as f:
                f.write("after\n")
            return self.check_result(self.wait_exit(pr, "ckpt run"), "ckpt run")
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.wait_all([pr], 10, "ckpt run, after its container was killed")
        with open(self.p("msg"), "w") as f:
            f.write("after\n")
        rp = self.restart_ct()
        self.check_result(self.wait_exit(rp, "ckpt restart"), "ckpt restart")
        if self.t.get("overlay"):
            for name in ("rootlog", "last"):
                if (not os.path.exists(self.p("upper", name))
                        or os.path.exists(self.p("rootfs", name))):
                    raise Fail("/%s is not in the overlay's upper layer alone" % name)

    def flow_rootfs_unpriv(self):
        """flow_rootfs as user nobody: ckpt run makes a user namespace (no
        /sys then), and checkpoint and restart of the root, its binds and
        its tmpfs need no privilege."""
        self.ckpt_as_nobody(self.flow_rootfs)

    def flow_rootfs_python(self):
        """py_mounts.py run by the host's /usr/bin/python3 in a root of its
        own where /usr is the host's bound read-only (bin, lib, lib64 links
        to it, as on the host), with files open under /usr, /t and a
        tmpfs; the modes as flow_rootfs."""
        if not os.access("/usr/bin/python3", os.X_OK):
            raise Skip("no /usr/bin/python3")
        root = self.p("rootfs")
        # every mount point made here: a user without privilege could not
        for d in ("usr", "etc", "t", "tmp", "dev", "proc", "sys", "scratch"):
            os.makedirs(os.path.join(root, d))
        for name in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + name):
                os.symlink(os.readlink("/" + name), os.path.join(root, name))
        shutil.copy(os.path.join(HERE, self.t.get("script") or "py_mounts.py"), self.dir)
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", pidfile, "--root", root,
                                "--bind", "/usr:/usr:ro", "--bind", self.dir + ":/t",
                                "--tmpfs", "/scratch", "--"])
        self.wait_container(pr, pidfile)
        if self.opts.no_ckpt:
            return self.check_result(self.wait_exit(pr, "ckpt run"), "ckpt run")
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.wait_all([pr], 10, "ckpt run, after its container was killed")
        rp = self.restart_ct()
        self.check_result(self.wait_exit(rp, "ckpt restart"), "ckpt restart")

    def flow_rootfs_python_unpriv(self):
        """flow_rootfs_python as user nobody: ckpt run makes a user namespace."""
        self.ckpt_as_nobody(self.flow_rootfs_python)

    def http_get(self, addr, path, sock=None):
        """The body busybox httpd at addr:8080 answers GET path with (on sock,
        a connection with the request's first line sent already)."""
        s = sock or socket.create_connection((addr, 8080), timeout=30)
        with s:
            s.settimeout(30)
            if sock is None:
                s.sendall(b"GET %s HTTP/1.0\r\n" % path.encode())
            s.sendall(b"\r\n")
            got = b""
            while True:
                d = s.recv(4096)
                if not d:
                    break
                got += d
        head, _, body = got.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.") or b" 200 " not in head.split(b"\r\n")[0]:
            raise Fail("GET %s: %r" % (path, got[:200]))
        return body.decode()

    def flow_rootfs_httpd(self):
        """busybox httpd in `ckpt run --root ... --net` serving /t/www, the
        bind mount of the test's directory, to the runner on the host over
        the container's veth: a GET before the checkpoint, one connection
        left half-way through its request across checkpoint --kill and
        restart, the file changed meanwhile; after the restart both that
        connection and a new one get the new contents."""
        if os.geteuid() != 0:
            raise Skip("ckpt run --net needs root")
        sub, host, cont = self.net_subnet()
        hostif = "ckpt%d%sh" % (os.getpid() % 1000000, self.mode[0])
        os.mkdir(self.p("www"))
        with open(self.p("www", "msg"), "w") as f:
            f.write("before\n")
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--net", "--net-addr", sub,
                                "--net-host-if", hostif, "--pidfile", pidfile]
                        + self.make_rootfs() + ["--"])
        self.wait_container(pr, pidfile)
        self.wait_until("httpd to answer", lambda: self.http_ok(cont), [], timeout=20)
        if self.http_get(cont, "/msg") != "before\n":
            raise Fail("before the checkpoint, httpd did not serve /t/www/msg")
        held = socket.create_connection((cont, 8080), timeout=30)
        held.sendall(b"GET /msg HTTP/1.0\r\n")
        rp = pr
        if not self.opts.no_ckpt:
            for i in range(2 if self.mode == T else 1):
                tag = "" if i == 0 else "2"
                self.checkpoint(self.p("img" + tag), "ckpt" + tag, reap=[rp])
                self.wait_all([rp], 10, "ckpt run, after its container was killed")
                if i == 0:
                    with open(self.p("www", "msg"), "w") as f:
                        f.write("after\n")
                rp = self.restart_container(self.p("img" + tag), "restart" + tag)
        else:
            with open(self.p("www", "msg"), "w") as f:
                f.write("after\n")
        got_held = self.http_get(cont, "/msg", sock=held)
        got_new = self.http_get(cont, "/msg")
        os.kill(self.pid, signal.SIGKILL)
        self.wait_all([rp], 10, "the container, killed")
        if got_held != "after\n" or got_new != "after\n":
            raise Fail("after the restart: the held connection got %r, a new one %r"
                       % (got_held, got_new))

    def http_ok(self, addr):
        try:
            socket.create_connection((addr, 8080), timeout=2).close()
            return True
        except OSError:
            return False

    def flow_rootfs_gone(self):
        """A container with a bind whose host directory is gone at restart:
        the restart fails naming the mount and the path, and leaves nothing
        (no process, no mount); with the directory back, the same image
        restarts."""
        if self.opts.no_ckpt:
            raise Skip("a restart test")
        src = self.p("src")
        os.mkdir(src)
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", pidfile]
                        + self.rootfs_args() + ["--bind", src + ":/src", "--"])
        self.wait_container(pr, pidfile)
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.wait_all([pr], 10, "ckpt run, after its container was killed")
        gone = [(src, "mount /src: its source '%s' is gone" % src)]
        if self.t.get("overlay"):  # each layer gone in turn, the bind's source back
            gone = [(self.p(d), "mount / (overlay): its layer '%s' is gone" % self.p(d))
                    for d in ("rootfs", "upper", "work")]
        for path, want in gone:
            self.restart_gone(path, want)
        rp = self.restart(self.p("img"), "restart2", same_pid=False)
        os.kill(self.pid, signal.SIGKILL)
        self.wait_all([rp], 10, "the restart with the source back")

    def flow_pdeath_detach(self):
        """id_pdeath restarted with --detach: its parent-death signal would
        kill it as soon as ckpt (its parent then) exits. The restart warns
        that it is not set again; the process is alive after ckpt exited,
        finds its signal unset, and passes."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.expect_gone("checkpoint --kill")
        with open(self.p("pdeath"), "w") as f:
            f.write("0\n")
        res = self.run_ckpt(["restart", self.p("img"), "--detach", "--log", self.p("rst.log")])
        if res.returncode != 0:
            raise Fail("restart --detach: exit %d: %s" % (res.returncode, res.stderr.decode()[-300:]))
        if not pid_alive(self.pid):
            raise Fail("pid %d died when ckpt, its parent, exited" % self.pid)
        with open(self.p("rst.log"), errors="replace") as f:
            if "parent-death signal 15 is not set again" not in f.read():
                raise Fail("the restart's log does not warn of the parent-death signal")
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + EXIT_TIMEOUT
        while pid_alive(self.pid):
            if time.monotonic() > deadline:
                raise Fail("pid %d did not finish after SIGUSR1" % self.pid)
            time.sleep(POLL)
        self.check_result(0, "the restored program")

    def flow_sigfwd(self):
        """rst_sigfwd: after checkpoint --kill, restarted in the foreground;
        SIGHUP then SIGTERM are sent to ckpt, which passes each on to the
        restored program (it checks they came from its parent, ckpt); the
        program dies of SIGTERM and ckpt exits 143 with it. --no-ckpt sends
        both to the program itself. Case ct: the program is pid 1 of `ckpt
        run`, and --no-ckpt sends both to ckpt run."""
        ct = self.t["case"] == "ct"
        if ct:  # pid 1 of `ckpt run`, which passes them on too
            pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", self.p("run.pid"), "--"])
            self.wait_container(pr, self.p("run.pid"))
        else:
            pr = self.start()
            self.wait_ready()
        to, proc = pr.pid, pr
        if not self.opts.no_ckpt:
            self.checkpoint(self.p("img"), "ckpt", reap=[pr])
            if ct:
                self.wait_all([pr], 10, "ckpt run, after its container was killed")
            else:
                self.expect_gone("checkpoint --kill")
            proc = self.restart(self.p("img"), "restart", same_pid=not ct)
            to = proc.pid
        os.kill(to, signal.SIGHUP)
        os.kill(to, signal.SIGTERM)
        self.wait_all([proc], EXIT_TIMEOUT, "the restored program and ckpt")
        want = -signal.SIGTERM if self.opts.no_ckpt and not ct else 128 + signal.SIGTERM
        out = self.out()
        if "FAIL" in out or "PASS" not in out:
            raise Fail("the program: %s" % (out.strip()[-300:] or "no verdict"))
        if proc.returncode != want:
            raise Fail("exit status %s, want %d (the program's SIGTERM)" % (proc.returncode, want))

    def restart_gone(self, path, want):
        """With path moved away, the restart of img fails saying want and
        leaves no mount and no process behind; then path is put back."""
        os.rename(path, path + ".away")
        try:
            r = self.run_ckpt(["restart", self.p("img"), "--detach", "--log",
                               self.p("restart.log")])
        finally:
            os.rename(path + ".away", path)
        rc, out = r.returncode, r.stderr.decode("utf-8", "replace")
        if rc == 0:  # restored without it: do not leave it running
            os.kill(int(r.stdout.split()[0]), signal.SIGKILL)
        if rc == 0 or want not in out:
            raise Fail("restart without %s: exit %d, %r (want %r)"
                       % (path, rc, out.strip()[-300:], want))
        with open("/proc/self/mountinfo") as f:
            if self.dir in f.read():
                raise Fail("a mount of the test's directory is left after the failed restart")
        left = [p for p in os.listdir("/proc") if p.isdigit() and self.cmdline_has(p, "/t/ready")]
        if left:
            raise Fail("processes left after the failed restart: %s" % left)

    def flow_rootfs_refuse(self):
        """A container that mounted a file system ckpt cannot make again
        (ramfs; case blk: an ext4 on a loop device the runner made, bound
        on /dev/blk; fuse: the host's /dev/fuse bound, a FUSE mount whose
        connection is closed; graft: a clone of a shared tmpfs of the
        host's moved into the container by graft_mount.py, a peer of the
        host's): the checkpoint --kill is refused naming the mount, and
        the container runs on."""
        if self.opts.no_ckpt:
            raise Skip("a refusal test")
        if os.geteuid() != 0:
            raise Skip("the container mounts: needs root")
        case, extra, undo = self.t["case"], [], []
        try:
            with open("/proc/filesystems") as f:
                fstypes = f.read().split()
            if case == "blk":
                if "ext4" not in fstypes:
                    raise Skip("no ext4 in this kernel")
                extra = ["--bind", self.loop_device(undo) + ":/dev/blk"]
            elif case == "fuse":
                if not os.path.exists("/dev/fuse") or "fuse" not in fstypes:
                    raise Skip("no FUSE (/dev/fuse, fuse in /proc/filesystems)")
                extra = ["--bind", "/dev/fuse:/dev/fuse"]
            elif case == "graft":
                os.mkdir(self.p("hs"))
                subprocess.run(["mount", "-t", "tmpfs", "hs", self.p("hs")], check=True)
                undo.append(lambda: subprocess.run(["umount", "-l", self.p("hs")]))
                subprocess.run(["mount", "--make-shared", self.p("hs")], check=True)
            pidfile = self.p("run.pid")
            pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", pidfile]
                            + self.make_rootfs() + extra + ["--"])
            self.wait_container(pr, pidfile)
            if case == "graft":
                g = subprocess.run([sys.executable, os.path.join(HERE, "graft_mount.py"),
                                    self.p("hs"), str(self.pid), "/mnt"],
                                   capture_output=True, text=True)
                if g.returncode != 0:
                    raise Fail("graft_mount.py: %s" % g.stderr.strip()[-300:])
            rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
            if rc == 0 or not re.search(self.t["regex"], err):
                raise Fail("checkpoint: exit %d, %r (want /%s/)" % (rc, err.strip()[-300:],
                                                                   self.t["regex"]))
            if not pid_alive(self.pid):
                raise Fail("the container did not survive the refused checkpoint")
            os.kill(self.pid, signal.SIGKILL)
            self.wait_all([pr], 10, "ckpt run, after its container was killed")
        finally:
            for u in reversed(undo):
                u()

    def loop_device(self, undo):
        """A loop device on an 8 MiB ext4 image in the test's directory
        (detached by undo); Skip where losetup or mkfs.ext4 cannot."""
        img = self.p("blk.img")
        with open(img, "wb") as f:
            f.truncate(8 * MiB)
        if not shutil.which("mkfs.ext4") or not shutil.which("losetup"):
            raise Skip("mkfs.ext4 or losetup (e2fsprogs, util-linux) not installed")
        if subprocess.run(["mkfs.ext4", "-q", "-F", img], capture_output=True).returncode:
            raise Skip("mkfs.ext4 failed")
        r = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True)
        if r.returncode != 0:
            raise Skip("no loop device: %s" % r.stderr.strip())
        dev = r.stdout.strip()
        undo.append(lambda: subprocess.run(["losetup", "-d", dev], capture_output=True))
        return dev

    def cmdline_has(self, pid, word):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                return word.encode() in f.read()
        except OSError:
            return False

    def flow_ct_asyncio(self):
        """An asyncio server as pid 1 of `ckpt run` (py_asyncio.py): the
        runner connects from outside before the checkpoint and, once it is
        restored, again (the restored epoll watches must see the new
        connection); the server's own client kept its connection across."""
        pidfile = self.p("run.pid")
        path = self.p("aio.sock")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--pidfile", pidfile, "--"])
        self.wait_container(pr, pidfile)
        got = self.aio_talk(path, "SET before from the runner")
        if got != ["OK"]:
            raise Fail("before the checkpoint, the server said %r" % got)
        if self.opts.no_ckpt:
            rp = pr
        else:
            self.checkpoint(self.p("img"), "ckpt", reap=[pr])
            self.wait_all([pr], 10, "ckpt run, after its container was killed")
            rp = self.restart_ct()
        got = self.aio_talk(path, "GET before", "SET outside after the restart", "ping")
        if got != ["from the runner", "OK", "echo ping"]:
            raise Fail("after the restart, the server said %r" % got)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_pidns(self):
        """restart --pidns while the original still runs (its pids taken):
        the copy runs in a new pid namespace with the same pids inside;
        then both finish, each correct."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        original = self.pid
        self.checkpoint(self.p("img"), "ckpt", reap=[pr], kill=False)
        rp = self.restart(self.p("img"), "restart", same_pid=False, extra=["--pidns"])
        if self.pid == original:
            raise Fail("the copy has the original's pid outside its namespace")
        rc = self.wake_and_wait(rp, "ckpt restart --pidns")
        if rc != 0:
            raise Fail("the copy in its pid namespace exited with status %s" % rc)
        self.pid = original
        self.reset_out()
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_churn(self):
        """A tree that forks and exits all the time: checkpointed 5 times
        while it runs (each must succeed, or fail saying the tree changed,
        leaving it running), then killed and restarted as usual."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        ok = 0
        for i in range(5):
            rc, err = self.checkpoint(self.p("churn%d" % i), "churn%d" % i, reap=[pr],
                                      expect_ok=False, kill=False)
            if rc == 0:
                ok += 1
            elif rc >= 128 or not re.search(r"changed|meanwhile|keeps", err):
                raise Fail("checkpoint %d of the running tree failed: %s" % (i, err.strip()))
            if not pid_alive(self.pid) or pr.poll() is not None:
                raise Fail("the tree died after checkpoint %d" % i)
        if ok == 0:
            raise Fail("no checkpoint of the running tree succeeded")
        self.notes.append("%d/5 live checkpoints" % ok)
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def start_container(self, run_args=()):
        """`ckpt run --detach [run_args] -- PROGRAM`, its output to out.log
        through sh (what ckpt run prints stays apart); returns the pid outside."""
        env = dict(os.environ, CKPT_TEST_DIR=self.dir)
        open(self.p("out.log"), "wb").close()
        self.logs.append(self.p("out.log"))
        # a detached container's cgroup outlives it: named, removed by cleanup
        cg = []
        where = cg_where()
        if where:
            name = "ckpt-e2e-%d-%s-ct" % (os.getpid(), self.t["name"])
            cg = ["--cgroup", name]
            self.cg_dirs = getattr(self, "cg_dirs", []) + [where[0] + where[1] + "/" + name]
        argv = [self.opts.ckpt, "run", "--detach"] + cg + list(run_args) + ["--", "/bin/sh", "-c",
                'exec "$0" "$@" >out.log 2>&1'] + self.program_argv()
        self.vlog("$ " + " ".join(argv))
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=self.dir,
                           env=env, timeout=30)
        if r.returncode != 0 or not r.stdout.strip().isdigit():
            raise Fail("ckpt run --detach exit %d: %s %s" % (
                r.returncode, r.stdout.decode(errors="replace").strip(),
                r.stderr.decode(errors="replace").strip()))
        self.t0 = time.monotonic()
        return int(r.stdout)

    def wait_container_ready(self, pid):
        """"ready" holds the pid inside (1); self.pid becomes the one outside."""
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with open(self.p("ready")) as f:
                    data = f.read()
                if data.endswith("\n"):
                    break
            except OSError:
                pass
            if not pid_alive(pid):
                out = self.out()
                if out.startswith("SKIP"):
                    raise Skip(out.strip()[5:].strip())
                raise Fail("the container's pid %d exited before ready: %s" % (pid, out.strip()))
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % READY_TIMEOUT)
            time.sleep(POLL)
        if data.strip() != "1":
            raise Fail("ready says pid %s inside the container, want 1" % data.strip())
        self.pid = pid
        self.vlog("ready: pid 1 inside, %d outside" % pid)

    def restart_container(self, img, tag):
        """ckpt restart of a container image; self.pid becomes the restored
        root's pid outside (from the pidfile)."""
        pidfile = self.p(tag + ".pid")
        log, err = self.p(tag + ".log"), self.p(tag + ".err")
        self.logs += [err, log]
        rp = self.popen(self.ckpt_argv("restart", img, "--pidfile", pidfile, "--log", log),
                        err=err, out=self.p(tag + ".out"))
        deadline = time.monotonic() + PIDFILE_TIMEOUT
        while True:
            try:
                with open(pidfile) as f:
                    data = f.read()
                if data.endswith("\n"):
                    self.pid = int(data)
                    break
            except (OSError, ValueError):
                pass
            if rp.poll() is not None:
                raise Fail("ckpt restart exited %d before writing the pidfile: %s"
                           % (rp.returncode, (tail(err, 5) or "").strip()))
            if time.monotonic() > deadline:
                raise Fail("no pidfile after %.0f s" % PIDFILE_TIMEOUT)
            time.sleep(POLL)
        self.vlog("restored as pid %d outside" % self.pid)
        return rp

    def flow_ct_detached(self):
        """The program as pid 1 of a container (ckpt run --detach), checkpointed
        by its pid outside with --kill and restarted into fresh namespaces;
        the modes as for programs. --no-ckpt runs it natively."""
        if self.opts.no_ckpt:
            return self.native()
        self.wait_container_ready(self.start_container())
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[])
        rp = self.restart_container(img, "restart")
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
            self.wait_all([rp], 10, "the first ckpt restart, after its container was killed")
            if rp.returncode != 128 + signal.SIGKILL:
                raise Fail("first ckpt restart exited %s, want 137" % rp.returncode)
            rp = self.restart_container(self.p("img2"), "restart2")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")
        if self.mode == R:
            self.expect_gone("the first restored run")
            self.reset_out()
            rp = self.restart_container(img, "restart2")
            rc = self.wait_exit(rp, "second ckpt restart")
            self.check_result(rc, "second ckpt restart")

    def flow_program(self):
        # prefix: a command the program is started under ("unshare -u")
        prefix = self.t.get("prefix", ())
        if self.opts.no_ckpt:
            return self.native(prefix)
        pr = self.start(prefix)
        self.wait_ready()
        img = self.p("img")
        extra = self.t.get("ckpt_args", ())
        # ckpt_reap False: the runner, its parent, reaps it only once ckpt is
        # done, as a program that waits for ckpt does
        self.checkpoint(img, "ckpt", reap=[pr] if self.t.get("ckpt_reap", True) else [],
                        extra=extra)
        self.check_ckpt_log("ckpt")
        pr.poll()
        if pr.returncode != -signal.SIGKILL:
            raise Fail("test process ended with %s, not SIGKILL" % pr.returncode)
        if self.t.get("between"):
            getattr(self, self.t["between"])()
        rargs = self.t.get("rst_args", ())
        # in a pid namespace of its own, the root has its pid inside only
        rp = self.restart(img, "restart", same_pid="--pidns" not in rargs, extra=rargs)
        self.check_log("restart", self.t.get("rst_log_regex"))
        if self.mode == T:
            img2 = self.p("img2")
            self.checkpoint(img2, "ckpt2", reap=[rp], extra=extra)
            # the restored process is gone, its parent may take a moment to exit
            self.wait_all([rp], 10, "the first ckpt restart, after its process was killed")
            if rp.returncode != 128 + signal.SIGKILL:
                raise Fail("first ckpt restart exited %s, want 137" % rp.returncode)
            rp = self.restart(img2, "restart2")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")
        if self.mode == R:
            self.expect_gone("the first restored run")
            self.reset_out()
            rp = self.restart(img, "restart2")
            rc = self.wait_exit(rp, "second ckpt restart")
            self.check_result(rc, "second ckpt restart")

    flow_command = flow_program

    def take_syn_port(self):
        """between checkpoint and restart (tcp_port_taken): a connection of
        the runner's from 127.0.0.1:PORT, the port of tcp_states's connect in
        progress, to a listener of its own, held until the test ends."""
        with open(self.p("sport")) as f:
            port = int(f.read())
        lst = socket.socket()
        lst.bind(("127.0.0.1", 0))
        lst.listen()
        c = socket.socket()
        try:
            c.bind(("127.0.0.1", port))
            c.connect(lst.getsockname())
            self.held = getattr(self, "held", []) + [lst, c, lst.accept()[0]]
        except OSError as e:
            # not free anyway (a connect() of someone else's was given it as
            # an ephemeral port, a connection of it in TIME_WAIT): taken
            if e.errno != errno.EADDRINUSE:
                raise

    def remove_shared(self):
        """between checkpoint and restart (mem_remake): the mapped file goes"""
        os.unlink(self.p("shared.dat"))

    def flow_direct(self):
        """checkpoint --kill of mem_direct with its image on a disk (the
        test's directory: its page bytes must go by O_DIRECT, unless the
        file system has no direct I/O, which skips) or, case tmpfs, in a
        directory of /dev/shm (none may: the writer falls back to the page
        cache); then restart, and the program checks its memory."""
        if self.opts.no_ckpt:
            return self.native()
        tmpfs = self.t["case"] == "tmpfs"
        where = tempfile.mkdtemp(prefix="ckpt-e2e-direct-", dir="/dev/shm") if tmpfs else self.dir
        try:
            fstype = subprocess.run(["stat", "-f", "-c", "%T", where], capture_output=True,
                                    text=True).stdout.strip()
            if tmpfs != (fstype in ("tmpfs", "ramfs")):
                raise Skip("%s is on %s" % (where, fstype or "an unknown file system"))
            pr = self.start()
            self.wait_ready()
            img = os.path.join(where, "img")
            self.checkpoint(img, "ckpt", reap=[pr], extra=["-v"])
            with open(self.p("ckpt.log"), errors="replace") as f:
                text = f.read()
            m = re.search(r"image complete: \d+ records, (\d+) bytes \((\d+) by direct I/O\)",
                          text)
            if not m:
                raise Fail("the checkpoint log does not say how many bytes went by direct I/O")
            direct = int(m.group(2))
            if not tmpfs and "no direct I/O: Operation not supported" in text:
                raise Skip("the %s file system of %s has no direct I/O" % (fstype, where))
            if tmpfs and direct:
                raise Fail("%d bytes by direct I/O to a tmpfs" % direct)
            # the 40 MiB of memory and most of the memfd's 3 MiB went directly
            if not tmpfs and direct < 30 * MiB:
                raise Fail("only %d bytes of %s by direct I/O" % (direct, m.group(1)))
            rp = self.restart(img, "restart")
            rc = self.wait_exit(rp, "ckpt restart")
            self.check_result(rc, "ckpt restart")
        finally:
            if tmpfs:
                shutil.rmtree(where, ignore_errors=True)

    def check_ckpt_log(self, tag):
        """The entry's log_regex (with {pid}) must match the checkpoint's log."""
        self.check_log(tag, self.t.get("log_regex"))

    def check_log(self, tag, rx):
        """rx (with {pid}), if any, must match the log of ckpt run tag."""
        if not rx:
            return
        with open(self.p(tag + ".log"), errors="replace") as f:
            text = f.read()
        if not re.search(rx.format(pid=self.pid), text):
            raise Fail("the log of %s does not say /%s/" % (tag, rx))

    def flow_runuser(self):
        """`runuser -u nobody -- PROGRAM`: runuser stays as the root parent
        of the program, which runs as nobody with no capabilities; the
        tree is checkpointed by runuser's pid, the program is woken by its
        own (the same after restart)."""
        runuser = shutil.which("runuser")
        if not runuser:
            raise Skip("runuser (util-linux) not installed")
        os.chmod(self.dir, 0o777)
        pr = self.start(prefix=[runuser, "-u", "nobody", "--"], args=self.t["args"])
        self.wait_ready()
        prog = self.pid
        if prog == pr.pid:
            raise Fail("the program is runuser's own pid %d, not its child" % prog)
        if self.opts.no_ckpt:
            rc = self.wait_exit(pr, "runuser")
            return self.check_result(rc, "runuser")
        rp = self.real_cycle(pr)
        self.pid = prog
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_mounted(self):
        """flow_program with a tmpfs of its own on the test's "mnt" (a mount
        no other process makes events on), unmounted at the end"""
        mnt = self.p("mnt")
        os.mkdir(mnt)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ckpt-e2e", mnt], check=True)
        try:
            self.flow_program()
        finally:
            self.cleanup()
            subprocess.run(["umount", "-l", mnt])

    # --- real programs, driven from outside --------------------------------

    def real_cycle(self, pr, reap=(), between=None):
        """checkpoint --kill the running tree of pr (self.pid), restart it;
        in twice mode run between() (if given) then checkpoint the restored
        tree again and restart that. Returns the last ckpt restart."""
        self.pid = pr.pid
        self.checkpoint(self.p("img"), "ckpt", reap=[pr] + list(reap))
        rp = self.restart(self.p("img"), "restart")
        if self.mode == T:
            if between:
                between()
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp] + list(reap))
            self.wait_all([rp], 10, "the first ckpt restart, after its tree was killed")
            if rp.returncode != 128 + signal.SIGKILL:
                raise Fail("first ckpt restart exited %s, want 137" % rp.returncode)
            rp = self.restart(self.p("img2"), "restart2")
        return rp

    def cycle_on_output(self, pr, name, first, more):
        """Once the program of pr has written `first` bytes to the file name
        of the test's directory, real_cycle (unless --no-ckpt), the
        restored program writing `more` bytes more before a second
        checkpoint in twice mode; returns the last process to wait for."""
        self.wait_until("%d bytes of %s" % (first, name), lambda: self.size(name) >= first, [pr])
        if self.opts.no_ckpt:
            return pr

        def grown():
            """the restored program writes on"""
            at = self.size(name)
            self.wait_until("%d bytes more of %s" % (more, name),
                            lambda: self.size(name) >= at + more, [])
        return self.real_cycle(pr, between=grown)

    def wait_until(self, what, pred, procs, timeout=READY_TIMEOUT):
        """Polls pred() until true; Fail if one of procs exits first."""
        deadline = time.monotonic() + timeout
        while not pred():
            for pr in procs:
                if pr.poll() is not None:
                    raise Fail("exited (status %s) before %s" % (pr.returncode, what))
            if time.monotonic() > deadline:
                raise Fail("no %s after %.0f s" % (what, timeout))
            time.sleep(0.02)

    def size(self, name):
        try:
            return os.path.getsize(self.p(name))
        except OSError:
            return 0

    def pipeline_input(self):
        """400,000 lines of text, the same every time."""
        r = random.Random(4)
        with open(self.p("input"), "w") as f:
            for i in range(400000):
                f.write("%d %s\n" % (i, "".join(r.choice("abcdefgh xyz")
                                                for _ in range(r.randint(0, 30)))))

    def flow_compare(self):
        """A program that writes a file as it works: run uninterrupted first
        (argv + ref, writing "expected"), then again (argv + args, writing
        "output") checkpointed once a tenth of the output is there; the
        output must be byte-identical to the uninterrupted run's."""
        argv = self.program_argv()
        # the setup's files and the uninterrupted run's output are the same
        # in every mode: made once a runner
        cache = COMPARE_CACHE.setdefault(self.t["name"], {})
        if not cache:
            if self.t["setup"]:
                getattr(self, self.t["setup"])()
            ref = subprocess.run(argv + self.t["ref"], stdin=subprocess.DEVNULL,
                                 capture_output=True, cwd=self.dir, timeout=EXIT_TIMEOUT)
            if ref.returncode != 0:
                raise Fail("the uninterrupted run exited %d: %s"
                           % (ref.returncode, ref.stderr[-300:]))
            if ref.stdout.startswith(b"SKIP"):
                raise Skip(ref.stdout.decode(errors="replace").strip()[5:])
            for name in os.listdir(self.dir):
                with open(self.p(name), "rb") as f:
                    cache[name] = f.read()
        else:
            for name, data in cache.items():
                with open(self.p(name), "wb") as f:
                    f.write(data)
        want = self.size("expected")
        pr = self.start(args=self.t["args"])
        rp = self.cycle_on_output(pr, "output", want // 10 + 1, want // 20 + 1)
        if not self.opts.no_ckpt:
            at = self.size("output")
            if at >= want:
                raise Fail("the program had finished at the checkpoint")
            self.notes.append("checkpointed at %d%% of the output" % (100 * at // want))
        self.compare_output(rp, "the program")
        if self.mode == R:
            # the same image again, over the finished output: the restored
            # writers write the same bytes at the same offsets
            self.expect_gone("the first restored run")
            self.reset_out()
            self.compare_output(self.restart(self.p("img"), "restart2"), "the second restart")

    def compare_output(self, rp, what):
        self.wait_all([rp], EXIT_TIMEOUT, what)
        self.check_result(rp.returncode, what)
        with open(self.p("expected"), "rb") as f, open(self.p("output"), "rb") as g:
            a, b = f.read(), g.read()
        if a != b:
            n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            raise Fail("%s: output differs from the uninterrupted run at byte %d (%d vs %d bytes)"
                       % (what, n, len(b), len(a)))

    MAKE_UNITS = 8

    @staticmethod
    def comm(pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip()
        except OSError:
            return ""

    def flow_make(self):
        """make -j2 of a small C project (each compilation sleeps first, then
        cc1 works for about a second), checkpointed mid-build while a
        compiler runs: the build completes and the program runs."""
        n = self.MAKE_UNITS
        for k in range(1, n):
            with open(self.p("f%d.c" % k), "w") as f:
                f.write("long f%d(long x)\n{\n\treturn x * %d + %d;\n}\n" % (k, k, k * k))
                for j in range(150):  # work for cc1: about a second
                    f.write("long pad%d_%d(long x)\n{\n\tlong s = 0;\n\tfor (long i = 0; i < x; i++)"
                            "\n\t\ts += (i * %d) ^ (s >> 3);\n\treturn s;\n}\n" % (k, j, j + 1))
        with open(self.p("main.c"), "w") as f:
            f.write("#include <stdio.h>\n")
            f.write("".join("long f%d(long x);\n" % k for k in range(1, n)))
            f.write("int main(void)\n{\n\tlong s = 0;\n")
            f.write("".join("\ts += f%d(%d);\n" % (k, 10 * k) for k in range(1, n)))
            f.write('\tprintf("sum %ld\\n", s);\n\treturn 0;\n}\n')
        objs = ["main.o"] + ["f%d.o" % k for k in range(1, n)]
        with open(self.p("Makefile"), "w") as f:
            f.write("OBJS = %s\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n" % " ".join(objs))
            f.write("%.o: %.c\n\tsleep 0.5\n\t$(CC) -O2 -Wall -c -o $@ $<\n")
        want = "sum %d\n" % sum(10 * k * k + k * k for k in range(1, n))
        pr = self.start()
        built = lambda: sum(os.path.exists(self.p(o)) for o in objs)
        # checkpointed while a compiler runs (the tree: make, cc, cc1 or as)
        cc1 = lambda: any(self.ours(int(d)) and self.comm(int(d)) in ("cc1", "as")
                          for d in os.listdir("/proc") if d.isdigit())
        self.wait_until("two objects built", lambda: built() >= 2, [pr])
        self.wait_until("a compiler running", cc1, [pr])
        if self.opts.no_ckpt:
            rp = pr
        else:
            def more():
                """the restored build goes on: one more object"""
                b = built()
                self.wait_until("one more object built", lambda: built() > b, [])
            rp = self.real_cycle(pr, between=more)
            if os.path.exists(self.p("prog")) or built() == len(objs):
                raise Fail("the build had finished at the checkpoint")
            self.notes.append("checkpointed with %d/%d objects built" % (built(), len(objs)))
        self.wait_all([rp], EXIT_TIMEOUT, "make")
        if rp.returncode != 0:
            raise Fail("make exited %s: %s" % (rp.returncode, self.out().strip()[-300:]))
        r = subprocess.run([self.p("prog")], capture_output=True, timeout=10)
        if r.returncode != 0 or r.stdout.decode() != want:
            raise Fail("the program built printed %r (status %d), want %r"
                       % (r.stdout.decode(), r.returncode, want))

    FFMPEG_ENCODE = ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-f", "lavfi", "-i",
                     "sine=frequency=440:sample_rate=48000", "-t", "16", "-c:v", "libx264",
                     "-preset", "veryfast", "-threads", "2", "-c:a", "aac", "-y"]

    def flow_ffmpeg(self):
        """ffmpeg encodes a generated clip (x264 on 2 threads, AAC, 16 s)
        into a Matroska file, paced at 4 times real time (-readrate), and is
        checkpointed --kill mid-encode and restarted (again, after more of
        the file is written, in twice mode): the file it completes holds,
        packet for packet, what an uninterrupted encode of the same input
        makes (the framemd5 of its packets, copied, not decoded: every
        byte of x264's and AAC's output, which hangs on their whole state)."""
        ff = shutil.which("ffmpeg")
        if not ff:
            raise Skip("ffmpeg not installed")
        quiet = [ff, "-nostdin", "-hide_banner", "-loglevel", "error"]

        def packets(name):
            r = subprocess.run(quiet + ["-i", self.p(name), "-map", "0", "-c", "copy", "-f",
                                        "framemd5", "-"], capture_output=True, timeout=120)
            if r.returncode != 0:
                raise Fail("ffmpeg cannot read %s: %s" % (name, r.stderr.decode()[-300:]))
            return [l for l in r.stdout.decode().splitlines() if not l.startswith("#")]

        r = subprocess.run(quiet + self.FFMPEG_ENCODE + [self.p("ref.mkv")], capture_output=True,
                           timeout=300, cwd=self.dir)
        if r.returncode != 0:
            raise Fail("the reference encode failed: %s" % r.stderr.decode()[-300:])
        want = packets("ref.mkv")
        paced = []  # -readrate goes before each input
        for a in self.FFMPEG_ENCODE:
            paced += ["-readrate", "4", a] if a == "-f" else [a]
        self.t = dict(self.t, argv=quiet + paced + ["out.mkv"])
        pr = self.start()
        rp = self.cycle_on_output(pr, "out.mkv", 128 << 10, 128 << 10)
        self.wait_all([rp], EXIT_TIMEOUT, "ffmpeg")
        if rp.returncode != 0:
            raise Fail("ffmpeg exited %s: %s" % (rp.returncode, self.out().strip()[-300:]))
        got = packets("out.mkv")
        if got != want:
            diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                        min(len(got), len(want)))
            raise Fail("the encode differs from an uninterrupted one from packet %d of %d (%d "
                       "written): %r, want %r" % (diff, len(want), len(got),
                                                   got[diff] if diff < len(got) else None,
                                                   want[diff] if diff < len(want) else None))
        self.notes.append("%d packets, the same as an uninterrupted encode" % len(want))

    def resp(self, path, *cmds):
        """Runs cmds on a new connection to the redis server at path, then
        QUIT; returns the replies once the server closed the connection,
        so that nothing of it is left in the tree to checkpoint."""
        def enc(args):
            return b"*%d\r\n" % len(args) + b"".join(
                b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(path)
            s.sendall(b"".join(enc(c) for c in cmds + (("QUIT",),)))
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
        lines, out = data.split(b"\r\n"), []
        while lines and lines[0]:
            ln = lines.pop(0)
            if ln[:1] == b"$":
                out.append(None if int(ln[1:]) < 0 else lines.pop(0).decode())
            else:
                out.append(ln.decode())
        if len(out) != len(cmds) + 1 or out[-1] != "+OK":
            raise Fail("redis: %r gave %r" % (cmds, out))
        return out[:-1]

    def redis_sockets(self, srv):
        n = 0
        for fd in os.listdir("/proc/%d/fd" % srv):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (srv, fd)).startswith("socket:")
            except OSError:
                pass
        return n

    def redis_outside(self, srv, path, *cmds):
        """resp(), then waits until the server has closed its end."""
        before = self.redis_sockets(srv)
        out = self.resp(path, *cmds)
        self.wait_until("the server to close the runner's connection",
                        lambda: self.redis_sockets(srv) <= before, [], timeout=10)
        return out

    def redis_refused(self, pr, srv, path):
        """With a client from outside connected, the checkpoint is refused
        (its peer is outside the image) naming the server's fd; the tree
        goes on unharmed."""
        before = self.redis_sockets(srv)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(path)
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            if s.recv(64) != b"+PONG\r\n":
                raise Fail("redis: no PONG")
            rc, err = self.checkpoint(self.p("refused"), "refused", reap=[pr], expect_ok=False)
            rx = r"\bpid %d\b.*\bfd \d+\b.*unix.*peer outside" % srv
            if rc == 0 or rc >= 128 or not re.search(rx, err, re.I):
                raise Fail("checkpoint with a client outside: exit %d, %r, want /%s/"
                           % (rc, err.strip()[-300:], rx))
            if not pid_alive(self.pid) or not pid_alive(srv):
                raise Fail("the tree is gone after the refused checkpoint")
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            if s.recv(64) != b"+PONG\r\n":
                raise Fail("redis: no PONG after the refused checkpoint")
        self.wait_until("the server to close the refused client",
                        lambda: self.redis_sockets(srv) <= before, [], timeout=10)
        self.notes.append("refused with a client outside")

    def wait_file(self, name, pr, timeout=READY_TIMEOUT):
        """The contents of the file name in the test's directory, once it
        exists (it is renamed into place whole)."""
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.p(name)):
            if pr.poll() is not None:
                raise Fail("exited before writing %s: status %s" % (name, pr.returncode))
            if time.monotonic() > deadline:
                raise Fail("no %s after %.0f s" % (name, timeout))
            time.sleep(POLL)
        with open(self.p(name)) as f:
            return f.read()

    def nft_lock(self, port):
        """Drops every packet to 127.0.0.1:port (a table of the runner's),
        standing in for the network lock; the table's name, or None without
        nft."""
        nft = shutil.which("nft") or ("/usr/sbin/nft" if os.access("/usr/sbin/nft", os.X_OK) else None)
        if not nft:
            return None
        table = "ckpt_e2e_%d" % os.getpid()
        rules = ("table inet %s { chain c { type filter hook input priority 0; policy accept; "
                 "ip daddr 127.0.0.1 tcp dport %d drop; }; }" % (table, port))
        r = subprocess.run([nft, "-f", "-"], input=rules.encode(), capture_output=True, timeout=20)
        if r.returncode != 0:
            self.notes.append("nft: %s" % r.stderr.decode(errors="replace").strip()[:100])
            return None
        return (nft, table)

    @staticmethod
    def nft_unlock(lock):
        if lock:
            subprocess.run([lock[0], "delete", "table", "inet", lock[1]], capture_output=True,
                           timeout=20)

    def flow_tcp_peer(self):
        """tcp_peer.c, a server with one client of the runner's, outside the
        tree, that keeps its connection across checkpoint --kill and
        restart: what it sent before (unread by the server), while the
        server was down (its packets dropped meanwhile by an nft rule of the
        runner's, which stands in for the network lock; that part is left
        out without nft) and after all reach the server, the server's banner
        and answer reach it, and it never sees a reset, not even from a
        restart --dry-run of the image before the real one."""
        pr = self.start()
        port = int(self.wait_file("port", pr))
        cl = socket.create_connection(("127.0.0.1", port), timeout=60)
        lock = None
        try:
            cl.sendall(b"hello\n")
            self.wait_ready()
            rp = pr
            if not self.opts.no_ckpt:
                lock = self.nft_lock(port)
                if not lock:
                    self.notes.append("no nft: nothing sent while the server was down")
                self.checkpoint(self.p("img"), "ckpt", reap=[pr])
                if lock:
                    cl.sendall(b"while down\n")
                # a dry run first: built and torn down, its peer hears nothing
                r = self.run_ckpt(["restart", self.p("img"), "--dry-run"], timeout=60)
                if r.returncode != 0:
                    raise Fail("restart --dry-run: exit %d: %s" % (
                        r.returncode, r.stderr.decode(errors="replace").strip()[-300:]))
                rp = self.restart(self.p("img"), "restart")
                self.nft_unlock(lock)
                lock = None
            elif shutil.which("nft") or os.access("/usr/sbin/nft", os.X_OK):
                cl.sendall(b"while down\n")
            cl.sendall(b"after\nEND\n")
            rc = self.wake_and_wait(rp, "the server")
            got = recv_to_eof(cl)
        except ConnectionResetError:
            raise Fail("the client's connection was reset")
        except socket.timeout:
            raise Fail("the client's connection hung")
        finally:
            self.nft_unlock(lock)
            cl.close()
        self.check_result(rc, "the server")
        want = b"banner\ngot:hello\n" + (b"while down\n" if b"while down" in got else b"") + b"after\nEND\n"
        if got != want:
            raise Fail("the client got %r, want %r" % (got, want))

    def net_subnet(self, skip=None):
        """A /30 of 10.213.0.0/16 for the test's veth pair, picked from the
        runner's pid, that no IPv4 route of the host touches: (NET/30, host
        end's address, container's address); not skip (a NET/30 taken)."""
        taken = []
        with open("/proc/net/route") as f:
            for line in f.read().splitlines()[1:]:
                fl = line.split()
                dst, mask = (socket.ntohl(int(x, 16)) for x in (fl[1], fl[7]))
                if mask:
                    taken.append((dst, mask))
        for i in range(16384):
            net = (10 << 24) | (213 << 16) | (((os.getpid() + i) % 16384) * 4)
            ip = lambda n: socket.inet_ntoa(struct.pack(">I", n))
            if all((net ^ d) & m & 0xfffffffc for d, m in taken) and "%s/30" % ip(net) != skip:
                return "%s/30" % ip(net), ip(net + 1), ip(net + 2)
        raise Skip("no /30 of 10.213.0.0/16 is free on this host")

    def nft_tables(self):
        """The names of the host's nftables tables, or None without nft."""
        nft = shutil.which("nft") or ("/usr/sbin/nft" if os.access("/usr/sbin/nft", os.X_OK) else None)
        if not nft:
            return None
        r = subprocess.run([nft, "list", "tables"], capture_output=True, timeout=30)
        return [l.split()[-1] for l in r.stdout.decode().splitlines() if l.strip()]

    def host_lock(self, tag):
        """After checkpoint --kill of a container with a network namespace
        of its own: the lock ckpt's log says it left exists in the host's
        namespace (None without nft)."""
        with open(self.p("ckpt%s.log" % tag)) as f:
            m = re.search(r"network lock (\S+) stays until the restart", f.read())
        if not m:
            raise Fail("checkpoint %s left no network lock" % tag)
        tables = self.nft_tables()
        if tables is None:
            self.notes.append("no nft: the host's lock not checked")
            return None
        if m.group(1) not in tables:
            raise Fail("no network lock %s on the host after checkpoint --kill (tables %r)"
                       % (m.group(1), tables))
        return m.group(1)

    def netns_restart_busy(self, img, hostif):
        """The image restarted again while its restored copy runs: the host
        end's name is taken, the restart fails naming the link and the host
        end, and leaves no link behind."""
        # this runner's links only: other runners on the machine make theirs
        own = "ckpt%d" % (os.getpid() % 1000000)
        mine = lambda: sorted(l for l in os.listdir("/sys/class/net")
                              if l.startswith(own) or l.startswith("ckptv"))
        links = mine()
        r = self.run_ckpt(["restart", img, "--log", self.p("busy.log"), "-v"], timeout=60)
        self.logs.append(self.p("busy.log"))
        self.expect_error(r, "a second restart of the image",
                          must=["link eth0 (veth)", "host end %s" % hostif, "taken"])
        if mine() != links:
            raise Fail("links after the failed restart: %r, before %r" % (mine(), links))

    def tree_pids(self, root):
        """root and its descendants, as /proc lists their children."""
        out, i = [root], 0
        while i < len(out):
            try:
                for t in os.listdir("/proc/%d/task" % out[i]):
                    with open("/proc/%d/task/%s/children" % (out[i], t)) as f:
                        out += [int(x) for x in f.read().split()]
            except OSError:
                pass
            i += 1
        return out

    def sshd_setup(self, keygen):
        """sshd's host key, the client's key (authorized) and sshd_config in
        the test's directory, and sshd's privilege separation directory."""
        for k in ("hostkey", "userkey"):
            subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", self.p(k)], check=True,
                           capture_output=True, timeout=60)
        shutil.copy(self.p("userkey.pub"), self.p("authorized_keys"))
        with open(self.p("sshd_config"), "w") as f:
            f.write("Port 22\nHostKey %s\nAuthorizedKeysFile %s\nPermitRootLogin "
                    "prohibit-password\nPasswordAuthentication no\nUsePAM no\n"
                    "StrictModes no\nPidFile %s\n"
                    % (self.p("hostkey"), self.p("authorized_keys"), self.p("sshd.pid")))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def flow_sshd(self):
        """sshd (openssh-server) as pid 1 of `ckpt run --net`, listening in
        the container's network namespace; an ssh client of the runner's,
        logged in by key, runs a counting loop there; checkpoint --kill and
        restart (twice in twice mode): the session goes on with no line
        lost and no reset, the restored sshd has the same processes, and a
        new login works."""
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        ssh, keygen = shutil.which("ssh"), shutil.which("ssh-keygen")
        if os.geteuid() != 0:
            raise Skip("ckpt run --net needs root")
        if not (os.access(sshd, os.X_OK) and ssh and keygen):
            raise Skip("openssh-server or openssh-client not installed")
        sub, host, cont = self.net_subnet()
        hostif = "ckpt%d%ss" % (os.getpid() % 1000000, self.mode[0])
        self.sshd_setup(keygen)
        pidfile = self.p("run.pid")
        pr = self.popen([self.opts.ckpt, "run", "--net", "--net-addr", sub, "--net-host-if", hostif,
                         "--pidfile", pidfile, "--", sshd, "-D", "-e", "-f", self.p("sshd_config")],
                        err=self.p("sshd.err"))
        self.logs.append(self.p("sshd.err"))

        def listening():
            # sshd's own banner, not only a port that accepts
            try:
                with socket.create_connection((cont, 22), timeout=5) as c:
                    return c.recv(8).startswith(b"SSH-")
            except OSError:
                return False
        self.wait_until("sshd listening on %s:22" % cont, listening, [pr], timeout=60)
        self.wait_until("ckpt run's pidfile", lambda: os.path.exists(pidfile) and
                        open(pidfile).read().endswith("\n"), [pr])
        with open(pidfile) as f:
            self.pid = int(f.read())
        argv = [ssh, "-i", self.p("userkey"), "-o", "StrictHostKeyChecking=no", "-o",
                "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                "root@" + cont]
        self.logs.append(self.p("session.err"))

        def lines():
            with open(self.p("session.out")) as f:
                return f.read().split()
        # a login refused on the loaded machine (seen once under ASan: connection
        # refused though the port had accepted) is tried again
        for attempt in range(3):
            client = self.popen(argv + ["i=0; while true; do i=$((i+1)); echo $i; sleep 0.05; done"],
                                out=self.p("session.out"), err=self.p("session.err"))
            try:
                self.wait_until("the session's first lines", lambda: len(lines()) >= 20,
                                [client, pr])
                break
            except Fail:
                if attempt == 2 or client.poll() is None:
                    raise
                self.notes.append("ssh login tried again")
        try:
            if self.opts.no_ckpt:
                return
            # sshd's own processes, as flow_mig2_sshd counts them: not the
            # session's shell's `sleep`, there at some moments only (the
            # count was 3 before a checkpoint that took 4: the sleep), nor
            # the child of a connection that is closing (listening()'s
            # probe: "sshd: [accepted]" until it reads the close; on a
            # loaded machine it was counted on one side only)
            def session_procs():
                return len([p for p in self.tree_pids(self.pid)
                            if self.comm_is(p, "sshd") and
                            not (self.cmdline_has(p, "[accepted]") or
                                 self.cmdline_has(p, "[net]"))])

            # nor one not yet so named: counted once only the listener says it
            # has no connection before authentication ("[listener] 0 of"; ASan's
            # slower ckpt once saved such a child, counted 4 against 3)
            def no_startups():
                ls = [p for p in self.tree_pids(self.pid) if self.cmdline_has(p, "[listener]")]
                return not ls or all(self.cmdline_has(p, "[listener] 0 of") for p in ls)
            self.wait_until("sshd's listener with no connection starting", no_startups,
                            [client, pr], timeout=30)
            procs = session_procs()
            rp = pr
            for cycle in range(2 if self.mode == T else 1):
                n = len(lines())
                self.checkpoint(self.p("img%d" % cycle), "ckpt%d" % cycle, reap=[rp])
                self.wait_all([rp], 20, "the container's ckpt after its checkpoint --kill")
                rp = self.restart(self.p("img%d" % cycle), "restart%d" % cycle, same_pid=False)
                self.wait_until("the session going on after the restart",
                                lambda: len(lines()) >= n + 40, [client, rp])
                if session_procs() != procs:
                    raise Fail("the restored sshd has %d processes, the original %d"
                               % (session_procs(), procs))
            got = [int(x) for x in lines()]
            if got != list(range(1, len(got) + 1)):
                gap = next(i for i, v in enumerate(got) if v != i + 1)
                raise Fail("the session lost lines: %r" % got[max(0, gap - 2):gap + 3])
            r = subprocess.run(argv + ["echo new-login-ok"], capture_output=True, timeout=60)
            if r.stdout.strip() != b"new-login-ok":
                raise Fail("a new login after the restart: %r %r" % (r.stdout, r.stderr[-200:]))
        finally:
            client.kill()
            client.wait()
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    XVNC_TOOLS = ("Xvnc", "xterm", "xclock", "xdotool", "xwininfo", "xdpyinfo")

    @staticmethod
    def xvnc_display():
        """A display number N free here: no lock file or socket of an X
        server, and the VNC port 5900+N free on loopback."""
        with open("/proc/net/unix") as f:
            names = {ln.split()[-1] for ln in f.readlines()[1:] if len(ln.split()) > 7}
        for n in range(42, 100):
            if (os.path.exists("/tmp/.X%d-lock" % n) or os.path.exists("/tmp/.X11-unix/X%d" % n)
                    or "@/tmp/.X11-unix/X%d" % n in names):
                continue
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 5900 + n))
            except OSError:
                continue
            return n
        raise Skip("no free X display number in 42-99")

    def xtool(self, *argv):
        """An X client of the runner's (outside the image) on the test's
        display, run to its end; its stdout."""
        self.vlog("$ " + " ".join(argv))
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=self.dir,
                               timeout=60, env=dict(os.environ, DISPLAY=":%d" % self.xdisp))
        except subprocess.TimeoutExpired:
            raise Fail("%s hung" % argv[0])
        if r.returncode != 0:
            raise Fail("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                             r.stderr.decode(errors="replace").strip()[-300:]))
        return r.stdout.decode(errors="replace")

    def xvnc_windows(self):
        """{title: window id} of the xterm and xclock, as xwininfo -root -tree
        lists the X server's windows; Fail if one is missing."""
        tree = self.xtool("xwininfo", "-root", "-tree")
        wins = {m.group(2): m.group(1) for m in re.finditer(r"(0x[0-9a-f]+) \"([^\"]*)\"", tree)}
        got = {k: wins.get(k) for k in ("xvnc-term", "xclock")}
        if None in got.values():
            raise Fail("xwininfo -root -tree lists no %s window: %s" % (
                " or ".join(k for k, v in got.items() if v is None), tree[-400:]))
        return got

    def xvnc_geometry(self, wid):
        """(x, y, w, h) of a window, its border included."""
        info = self.xtool("xwininfo", "-id", wid)
        v = {k: int(re.search(k + r":\s+(-?\d+)", info).group(1))
             for k in ("Absolute upper-left X", "Absolute upper-left Y", "Width", "Height",
                       "Border width")}
        b = v["Border width"]
        return (v["Absolute upper-left X"] - b, v["Absolute upper-left Y"] - b,
                v["Width"] + 2 * b, v["Height"] + 2 * b)

    def xvnc_type(self, wins, name):
        """Types `echo "$MYVAR" >FILE` into the xterm (XTEST, through the X
        server); returns what its shell wrote to FILE."""
        self.xtool("xdotool", "windowfocus", wins["xvnc-term"], "type", "--delay", "10",
                   'echo "$MYVAR" >%s\n' % self.p(name))
        self.wait_until("the xterm's shell to write %s" % name,
                        lambda: open(self.p(name)).read().endswith("\n")
                        if os.path.exists(self.p(name)) else False, [], timeout=30)
        with open(self.p(name)) as f:
            return f.read().strip()

    def xvnc_screen(self, c, geo):
        """The pixels of the rectangle geo of the screen, as the VNC client c
        reads it once two full updates agree with a change of the screen
        between them (the clock's next tick: the xterm has had a second to
        finish drawing)."""
        c.update()
        last = c.region(*geo)
        deadline = time.monotonic() + 30
        while True:
            c.update(incremental=True)
            c.update()
            now = c.region(*geo)
            if now == last:
                break
            if time.monotonic() > deadline:
                raise Fail("the xterm's part of the screen is still changing after 30 s")
            last = now
        if len(set(now[i:i + 4] for i in range(0, len(now), 4))) < 2:
            raise Fail("the xterm's part of the screen is of one colour: not drawn")
        return now

    def xvnc_ticks(self, c, clock, ask=True):
        """An incremental update comes (the screen changed) and each of its
        rectangles is in the clock's window: xclock -update 1 ticks, and
        nothing else changes (c has had a full update; ask: false when the
        request was sent already)."""
        c.update(incremental=True, ask=ask)
        x, y, w, h = clock
        out = [r for r in c.rects if r[0] < x or r[1] < y or r[0] + r[2] > x + w or
               r[1] + r[3] > y + h]
        if out:
            raise Fail("the screen changed outside xclock's window %r: %r" % (clock, out))

    def xvnc_refused(self, c):
        """A checkpoint with the VNC client c (outside the image) connected to
        Xvnc's unix listener is refused naming Xvnc's fd and --detach-clients;
        the desktop runs on and c still gets updates."""
        xvnc = [p for p in self.tree_pids(self.pid) if self.comm(p) == "Xvnc"]
        if len(xvnc) != 1:
            raise Fail("Xvnc processes in the container: %r" % xvnc)
        rc, err = self.checkpoint(self.p("img0"), "ckpt0", reap=[], expect_ok=False)
        if rc == 0 or not re.search(r"pid %d fd \d+ \(unix.*client of the image's listener "
                                    r"%s.*--detach-clients" % (xvnc[0], re.escape(self.p("vnc.sock"))),
                                    err):
            raise Fail("checkpoint with a VNC client on the unix socket: exit %d, %r"
                       % (rc, err.strip()[-400:]))
        c.update()

    def xvnc_same(self, c, was, tag, when):
        """After a restart or a migration (when): the VNC client c reads the
        same xterm and the clock ticks, the X server lists the same windows,
        the shell types back the same variable; was: (xterm geometry, clock
        geometry, xterm pixels, windows, variable) from before."""
        term, clock, screen, wins, value = was
        if self.xvnc_screen(c, term) != screen:
            raise Fail("%s: the xterm on the VNC client's screen differs" % when)
        self.xvnc_ticks(c, clock)
        if self.xvnc_windows() != wins:
            raise Fail("%s: the windows are now %r, were %r" % (when, self.xvnc_windows(), wins))
        got = self.xvnc_type(wins, "var" + tag)
        if got != value:
            raise Fail("%s: the xterm's shell has MYVAR=%r, had %r" % (when, got, value))

    def xvnc_end(self, n):
        """The desktop killed (the container's pid 1), display n's files gone."""
        if self.pid and pid_alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
            self.wait_until("the desktop to go", lambda: not pid_exists(self.pid), [], timeout=30)
        for f in ("/tmp/.X%d-lock" % n, "/tmp/.X11-unix/X%d" % n):
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass

    def flow_xvnc(self):
        """An Xvnc desktop (tigervnc-standalone-server) as the tree of `ckpt
        run` (real_xvnc.sh): Xvnc with an xterm whose bash holds a variable
        of its own, and xclock -update 1. case "unix": the VNC listener is
        a unix socket (-rfbunixpath) and nothing listens on TCP; the
        runner's VNC client reads the screen and leaves before each
        checkpoint. case "tcp": Xvnc's default TCP listener (port 5900+N,
        -localhost), the runner's VNC client connected across checkpoint
        and restart, its update requests held by ckpt's network lock while
        the server is away. After checkpoint --kill and restart (twice in
        twice mode), from outside: xwininfo lists the same xterm and xclock
        windows, the shell types back the same variable (keys sent through
        the X server by xdotool), the VNC client reads the same xterm on
        the screen, and the clock ticks."""
        missing = [x for x in self.XVNC_TOOLS if not shutil.which(x)]
        if missing:
            raise Skip("%s not installed (tigervnc-standalone-server, xterm, x11-apps, "
                       "x11-utils, xdotool)" % ", ".join(missing))
        tcp = self.t["case"] in ("tcp", "net")
        self.xdisp = n = self.xvnc_display()
        self.t = dict(self.t, argv=["/bin/sh", os.path.join(HERE, "real_xvnc.sh"), str(n),
                                    self.t["case"]])
        from rfb import RfbError
        try:
            self.xvnc_cycles(tcp, n)
        except (OSError, RfbError) as e:
            raise Fail("the VNC client: %r" % e)
        finally:
            self.xvnc_end(n)

    def xvnc_cycles(self, tcp, n):
        from rfb import Rfb, RfbError
        run_args, host = [], "127.0.0.1"
        if self.t["case"] == "net":
            if os.geteuid() != 0:
                raise Skip("ckpt run --net needs root")
            sub, _, host = self.net_subnet()
            run_args = ["--net", "--net-addr", sub, "--net-host-if",
                        "ckpt%d%sx" % (os.getpid() % 1000000, self.mode[0])]
        self.wait_container_ready(self.start_container(run_args))
        self.logs += [self.p("xvnc.log"), self.p("xterm.log")]

        def vnc():
            return Rfb.tcp(host, 5900 + n, 60) if tcp else Rfb.unix(self.p("vnc.sock"), 60)
        wins = self.xvnc_windows()
        value = self.xvnc_type(wins, "var0")
        if not value.startswith("kept-"):
            raise Fail("the xterm's shell has MYVAR=%r" % value)
        term, clock = (self.xvnc_geometry(wins[k]) for k in ("xvnc-term", "xclock"))
        c = vnc()
        screen = self.xvnc_screen(c, term)
        self.xvnc_ticks(c, clock)
        if self.opts.no_ckpt:
            return
        rp = None
        for i in range(2 if self.mode == T else 1):
            tag = str(i + 1)
            extra = []
            if tcp:
                c.request(incremental=True)      # asked before, answered after
            elif i == 0:
                # a client of the unix listener, outside: refused by name,
                # then detached (its connection comes back closed)
                self.xvnc_refused(c)
                extra = ["--detach-clients"]
            else:
                c.close()                        # gone before the checkpoint
            self.checkpoint(self.p("img" + tag), "ckpt" + tag, reap=[rp] if rp else [],
                            extra=extra)
            if extra:
                try:
                    while c.read_message() is not None:
                        pass
                except RfbError:                 # the server closed it: detached
                    c.close()
            lock = self.netlock_of("ckpt" + tag)
            if tcp and not lock:
                raise Fail("ckpt%s: no network lock for the VNC client's connection" % tag)
            if rp:
                self.wait_all([rp], 10, "the first ckpt restart, after its tree was killed")
            if tcp:
                c.set_encodings()                # sent while the server is away
                # (with --net the container's address may have no route once
                # its namespace is gone: the host's kernel keeps the segment
                # for retransmission and the lock never sees it)
                if self.t["case"] == "tcp":
                    self.wait_until("the network lock %s to drop a packet" % lock[0],
                                    lambda: self.nft_drops(lock[0]), [], timeout=30)
            rp = self.restart_container(self.p("img" + tag), "restart" + tag)
            if tcp:
                self.wait_until("the restart to remove the network lock %s" % lock[0],
                                lambda: self.nft_drops(lock[0]) is None, [rp], timeout=30)
                self.xvnc_ticks(c, clock, ask=False)
            else:
                c = vnc()
            self.xvnc_same(c, (term, clock, screen, wins, value), tag, "restart " + tag)
            screen = self.xvnc_screen(c, term)
        c.close()

    def flow_mig2_xvnc(self):
        """real_xvnc.sh's desktop (Xvnc listening on every address, an
        xterm whose bash holds a variable of its own, xclock -update 1) as
        pid 1 of `ckpt run --net` on host A, a VNC client (rfb.py) connected
        from C; migrated to B with an update request in flight and the
        encodings sent while the desktop is away: the same connection gets
        the clock's ticks after, the xterm is the same on its screen, the X
        server (reached through its socket file) lists the same windows and
        the shell types back the same variable."""
        from rfb import Rfb, RfbError
        missing = [x for x in self.XVNC_TOOLS if not shutil.which(x)]
        if missing:
            raise Skip("%s not installed (tigervnc-standalone-server, xterm, x11-apps, "
                       "x11-utils, xdotool)" % ", ".join(missing))
        topo = self.mig2_hosts()
        self.xdisp = n = self.xvnc_display()
        try:
            pr = self.mig2_run(["/bin/sh", os.path.join(HERE, "real_xvnc.sh"), str(n), "net"])
            self.logs += [self.p("xvnc.log"), self.p("xterm.log")]
            self.wait_file("ready", pr)
            wins = self.xvnc_windows()
            value = self.xvnc_type(wins, "var0")
            if not value.startswith("kept-"):
                raise Fail("the xterm's shell has MYVAR=%r" % value)
            term, clock = (self.xvnc_geometry(wins[k]) for k in ("xvnc-term", "xclock"))
            self.wait_until("Xvnc listening on %s:%d" % (self.MIG2_CT, 5900 + n),
                            lambda: self.vnc_port_open(topo, n), [pr])
            c = Rfb(topo.connect("c", self.MIG2_CT, 5900 + n)).handshake()
            screen = self.xvnc_screen(c, term)
            self.xvnc_ticks(c, clock)
            if self.opts.no_ckpt:
                return
            c.request(incremental=True)          # asked before, answered after
            self.mig2_move([pr])
            c.set_encodings()                    # sent while the desktop moves
            self.xvnc_ticks(c, clock, ask=False)
            self.xvnc_same(c, (term, clock, screen, wins, value), "1", "after the migration")
            self.notes.append("%d updates" % c.updates)
            c.close()
        except (OSError, RfbError) as e:
            raise Fail("the VNC client: %r" % e)
        finally:
            self.xvnc_end(n)

    def vnc_port_open(self, topo, n):
        """Xvnc's TCP listener answers a connection from C."""
        try:
            topo.connect("c", self.MIG2_CT, 5900 + n, 5).close()
            return True
        except OSError:
            return False

    def flow_netns(self):
        """netns_srv.c as pid 1 of `ckpt run --net` with a subnet and host
        end name of the runner's. tcp: the runner connects from the host to
        the container's address, the server changes its namespace (mtu, an
        IPv6 address, a route, sysctls) and notes it; checkpoint --kill,
        restart (twice in twice mode): the host end exists again with its
        address, the client's connection was never reset and what it sent
        meanwhile arrives, the namespace inside is what it was (checked by
        the server), and a new connection to the address is answered.
        bridge: a bridge link in the namespace; the checkpoint refuses it
        by name and the container runs on."""
        if os.geteuid() != 0:
            raise Skip("ckpt run --net needs root")
        sub, host, cont = self.net_subnet()
        hostif = "ckpt%d%s%s" % (os.getpid() % 1000000, self.mode[0], (self.t["case"] or "t")[0])
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--net", "--net-addr", sub,
                                "--net-host-if", hostif, "--pidfile", pidfile, "--"])
        host_addr = lambda: os.path.exists("/sys/class/net/%s" % hostif)
        self.netns_case(pr, pidfile, hostif, cont)
        # the namespace, and with it the pair, goes a little after its last
        # process (a failed test's goes once cleanup has killed it)
        self.wait_until("the host end %s to go with its namespace" % hostif,
                        lambda: not host_addr(), [], timeout=20)

    def flow_netns_routed(self):
        """netns_routed.c, the tree's root in ckpt's network namespace, its
        child in one of its own joined by a veth pair (host end named by the
        runner, a free /30). The runner's client connects to the child's
        address and keeps sending numbered lines, a few at a time, checking
        each echo byte for byte; checkpoint --kill (twice in twice mode):
        the lock the checkpoint left in ckpt's namespace holds the
        connection (its log, nft), the client sends on meanwhile; restart:
        the lock is gone, the host end back, and the echoes go on (lines
        sent after the restart are echoed), never a reset. The child checks
        from inside that no line was lost or came twice and that its
        connection is of its namespace."""
        if os.geteuid() != 0:
            raise Skip("network namespaces need root")
        ct = self.t["case"] == "ct"
        sub, host, cont = self.net_subnet()
        hostif = "ckpt%dr%s" % (os.getpid() % 1000000, self.mode[0])
        route = None
        if ct:
            # the container's /30 (host end hostif), the child's behind it
            sub2, host2, cont2 = self.net_subnet(skip=sub)
            self.t = dict(self.t, pargs=("vr0", host2, cont2, "forward"))
            pidfile = self.p("run.pid")
            pr = self.start(prefix=[self.opts.ckpt, "run", "--net", "--net-addr", sub,
                                    "--net-host-if", hostif, "--pidfile", pidfile, "--"])
            route = [sub2, "via", cont, "dev", hostif]
        else:
            self.t = dict(self.t, pargs=(hostif, host, cont) + (
                ("kept",) if self.t["case"] == "addr" else ()))
            pr = self.start()
        host_link = lambda: os.path.exists("/sys/class/net/%s" % hostif)
        self.wait_file("listening", pr)
        if ct:
            r = subprocess.run(["ip", "route", "add"] + route, capture_output=True, timeout=30)
            if r.returncode != 0:
                raise Fail("ip route add %s: %s" % (" ".join(route), r.stderr.decode().strip()))
            cont = cont2
        has_route = lambda: route is None or subprocess.run(
            ["ip", "route", "show", route[0], "dev", hostif], capture_output=True,
            timeout=30).stdout.decode().strip().startswith(route[0] + " via " + route[2])
        src = None
        if self.t["case"] == "addr":
            _, src, _ = self.net_subnet(skip=sub)
            r = subprocess.run(["ip", "addr", "add", src + "/32", "dev", hostif],
                               capture_output=True, timeout=30)
            if r.returncode != 0:
                raise Fail("ip addr add %s: %s" % (src, r.stderr.decode().strip()))
        cl = socket.create_connection((cont, 7777), timeout=60,
                                      source_address=(src, 0) if src else None)
        st = {"sent": b"", "got": b"", "err": None, "stop": False, "n": 0}

        def client():
            try:
                while not st["stop"]:
                    batch = b"".join(b"%d\n" % (st["n"] + i) for i in range(3))
                    st["n"] += 3
                    cl.sendall(batch)
                    st["sent"] += batch
                    while len(st["got"]) < len(st["sent"]):
                        d = cl.recv(4096)
                        if not d:
                            raise Fail("the connection ended")
                        st["got"] += d
                        if not st["sent"].startswith(st["got"]):
                            raise Fail("the echo differs from what was sent at byte %d"
                                       % len(st["got"]))
                    time.sleep(0.005)
            except ConnectionResetError:
                st["err"] = Fail("the client's connection was reset")
            except socket.timeout:
                st["err"] = Fail("the client's connection hung")
            except Exception as e:  # noqa: BLE001 (told to the main thread)
                st["err"] = e

        th = threading.Thread(target=client, daemon=True)
        th.start()
        failed = lambda: st["err"] is not None or not th.is_alive()
        try:
            if ct:
                self.wait_container(pr, pidfile)
            else:
                self.wait_ready()
            self.wait_until("echoes", lambda: failed() or len(st["got"]) > 30, [pr])
            rp = pr
            if src:
                rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
                want = (r"fd \d+ \(inet\): a TCP connection of a network namespace other "
                        r"than the tree's root's, to a peer outside the image: its peer is "
                        r"in ckpt's network namespace but bound to another address")
                if rc == 0 or not re.search(want, err):
                    raise Fail("checkpoint --kill of a connection to %s: rc %d, %s"
                               % (src, rc, err.strip()[-400:]))
                before = len(st["got"])
                self.wait_until("echoes after the refusal",
                                lambda: failed() or len(st["got"]) > before + 60, [pr])
            for i in range(0 if src else 2 if self.mode == T else 1):
                tag = "" if i == 0 else "2"
                self.checkpoint(self.p("img" + tag), "ckpt" + tag, reap=[rp])
                if rp is not pr:
                    self.wait_all([rp], 10, "the first ckpt restart")
                with open(self.p("ckpt%s.log" % tag), errors="replace") as f:
                    text = f.read()
                locked = [int(n) for n in self.NETLOCK_RX_N.findall(text)]
                m = re.search(r"network lock (\S+)(?: \(in ckpt's network namespace\))? "
                              r"stays until the restart", text)
                if not m:
                    raise Fail("checkpoint%s left no network lock" % tag)
                lock = m.group(1)
                if self.nft_tables() is not None and lock not in self.nft_tables():
                    raise Fail("no network lock %s after checkpoint --kill" % lock)
                # the child's namespace's lock, and the one left in ckpt's
                if locked != [1, 1]:
                    raise Fail("checkpoint%s: connections locked %r, want [1, 1] (the "
                               "child's namespace's, ckpt's)" % (tag, locked))
                self.wait_until("the host end %s to go with its namespace" % hostif,
                                lambda: not host_link(), [], timeout=20)
                before = len(st["got"])
                if ct:
                    rp = self.restart_container(self.p("img" + tag), "restart" + tag)
                else:
                    rp = self.restart(self.p("img" + tag), "restart" + tag)
                if lock in (self.nft_tables() or ()):
                    raise Fail("the network lock %s is still there after the restart" % lock)
                if not host_link():
                    raise Fail("no host end %s after the restart" % hostif)
                if not has_route():
                    raise Fail("no route %s after the restart" % " ".join(route))
                self.wait_until("echoes after the restart",
                                lambda: failed() or len(st["got"]) > before + 60, [rp])
            st["stop"] = True
            th.join(60)
            if st["err"]:
                raise st["err"]
            if th.is_alive():
                raise Fail("the client hung")
            cl.sendall(b"END\n")
            if ct:
                self.vlog("SIGUSR1 -> %d" % self.pid)
                os.kill(self.pid, signal.SIGUSR1)
            else:
                rc = self.wake_and_wait(rp, "the tree")
            rest = recv_to_eof(cl)
        except ConnectionResetError:
            raise Fail("the client's connection was reset")
        except socket.timeout:
            raise Fail("the client's connection hung")
        finally:
            st["stop"] = True
            cl.close()
        if ct:
            rc = self.wait_exit(rp, "the tree")
        self.check_result(rc, "the tree")
        if rest != b"END\n":
            raise Fail("after END the client got %r" % rest[:100])
        self.wait_until("the host end %s to go with its namespace" % hostif,
                        lambda: not host_link(), [], timeout=20)

    NETLOCK_RX_N = re.compile(r"network lock ckpt_lock_\w+: (\d+) connection\(s\) locked")

    def netns_case(self, pr, pidfile, hostif, cont):
        host_addr = lambda: os.path.exists("/sys/class/net/%s" % hostif)
        if self.t["case"] == "bridge":
            self.wait_container(pr, pidfile)
            img = self.p("img")
            rc, err = self.checkpoint(img, "ckpt", reap=[pr], expect_ok=False)
            want = [r"pid %d: network namespace link br7 \(bridge\): only loopback and veth"]
            if rc == 0 or not all(re.search(w % self.pid, err) for w in want):
                raise Fail("checkpoint with a %s: exit %d: %s" % (self.t["case"], rc,
                                                                 err.strip()[-400:]))
            if not pid_alive(self.pid):
                raise Fail("the container died after the refused checkpoint")
            rc = self.wake_and_wait(pr, "ckpt run")
            return self.check_result(rc, "ckpt run")
        self.wait_file("listening", pr)
        if not host_addr():
            raise Fail("no host end %s after ckpt run --net" % hostif)
        cl = socket.create_connection((cont, 7777), timeout=60)
        try:
            cl.sendall(b"hello\n")
            self.wait_container(pr, pidfile)
            rp = pr
            if not self.opts.no_ckpt:
                for i in range(2 if self.mode == T else 1):
                    tag = "" if i == 0 else "2"
                    self.checkpoint(self.p("img" + tag), "ckpt" + tag, reap=[rp],
                                    extra=self.t.get("ckpt_args", ()))
                    if rp is not pr:
                        self.wait_all([rp], 10, "the first ckpt restart")
                    self.wait_until("the host end %s to go with its namespace" % hostif,
                                    lambda: not host_addr(), [], timeout=10)
                    # the container's lock went with its namespace: the host's
                    # retransmissions are dropped by the same lock on this side
                    lock = self.host_lock(tag)
                    cl.sendall(b"while down %d\n" % i)
                    rp = self.restart_container(self.p("img" + tag), "restart" + tag)
                    if not host_addr():
                        raise Fail("no host end %s after the restart" % hostif)
                    if lock and lock in self.nft_tables():
                        raise Fail("the network lock %s is still on the host after the "
                                   "restart" % lock)
                    if i == 0:
                        self.netns_restart_busy(self.p("img"), hostif)
            cl.sendall(b"after\nEND\n")
            self.vlog("SIGUSR1 -> %d" % self.pid)
            os.kill(self.pid, signal.SIGUSR1)
            got = recv_to_eof(cl)
            again = socket.create_connection((cont, 7777), timeout=30).recv(100)
        except ConnectionResetError:
            raise Fail("the client's connection was reset")
        except socket.timeout:
            raise Fail("the client's connection hung")
        finally:
            cl.close()
        rc = self.wait_exit(rp, "the server")
        self.check_result(rc, "the server")
        down = b"".join(b"while down %d\n" % i for i in range(2 if self.mode == T else 1))
        want = b"got:hello\n" + (b"" if self.opts.no_ckpt else down) + b"after\nEND\n"
        if got != want:
            raise Fail("the client got %r, want %r" % (got, want))
        if again != b"again\n":
            raise Fail("a new connection to %s:7777 got %r" % (cont, again))

    def check_download(self, cl, big):
        """curl (cl, done) ended with status 0 and its file dl is big."""
        if cl.returncode != 0:
            raise Fail("curl exited %d: %s" % (cl.returncode, tail(self.p("curl.err"), 5)))
        with open(self.p("dl"), "rb") as f:
            data = f.read()
        if data != big:
            n = next((i for i in range(min(len(data), len(big))) if data[i] != big[i]),
                     min(len(data), len(big)))
            raise Fail("the download differs from the file at byte %d (%d bytes, want %d)"
                       % (n, len(data), len(big)))

    @staticmethod
    def free_port():
        """A TCP port of 127.0.0.1 free now (bound to 0, read, released)."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    def start_server(self, argv, port, host="127.0.0.1"):
        """Starts argv as the test's tree; returns once host:port accepts
        connections."""
        self.t = dict(self.t, argv=argv)
        pr = self.start()
        self.pid = pr.pid

        def up():
            try:
                socket.create_connection((host, port), timeout=5).close()
                return True
            except OSError:
                return False
        self.wait_until("a listener on port %d" % port, up, [pr])
        return pr

    NETLOCK_RX = re.compile(r"network lock (ckpt_lock_\w+): (\d+) connection\(s\) locked")

    def netlock_of(self, tag):
        """(the name, the connection count) of the network lock the log of
        ckpt TAG says it installed, or None."""
        try:
            with open(self.p(tag + ".log"), errors="replace") as f:
                m = self.NETLOCK_RX.search(f.read())
        except OSError:
            return None
        return (m.group(1), int(m.group(2))) if m else None

    @staticmethod
    def nft_drops(table):
        """The packets the rules of the nftables table inet TABLE counted
        (dropped), or None if there is no such table."""
        nft = shutil.which("nft") or "/usr/sbin/nft"
        r = subprocess.run([nft, "list", "table", "inet", table], capture_output=True, timeout=20)
        if r.returncode != 0:
            return None
        return sum(int(n) for n in re.findall(rb"counter packets (\d+)", r.stdout))

    class DownCall:
        """fn() run on a thread of its own, started while the server is down
        (start, for tcp_cycles' while_down) and joined after the restart
        (check, which raises Fail with what fn raised or if it hangs)."""

        def __init__(self, what, fn):
            self.what, self.fn, self.th, self.err = what, fn, None, None

        def run(self):
            try:
                self.fn()
            except Exception as e:  # reported by check()
                self.err = e

        def start(self):
            self.th = threading.Thread(target=self.run, daemon=True)
            self.th.start()

        def check(self):
            self.th.join(EXIT_TIMEOUT)
            if self.th.is_alive():
                raise Fail("%s, begun while the server was down, hung" % self.what)
            if self.err:
                raise Fail("%s, begun while the server was down: %r" % (self.what, self.err))

    class Loop:
        """A client of the runner's: step(i) for i = 0, 1, ... on a thread
        of its own until stop(), each step raising Fail if a reply is
        wrong. progress(k) waits for k more steps (for tcp_cycles);
        stop() joins the thread and raises what a step raised."""

        def __init__(self, run, what, step):
            self.run, self.what, self.step = run, what, step
            self.n, self.err, self.stopped = 0, None, False
            self.th = threading.Thread(target=self.loop, daemon=True)
            self.th.start()

        def loop(self):
            try:
                while not self.stopped:
                    self.step(self.n)
                    self.n += 1
            except Exception as e:  # reported by stop() and progress()
                self.err = e

        def progress(self, k):
            n = self.n
            self.run.wait_until("%d more %s" % (k, self.what),
                                lambda: self.n >= n + k or self.err, [], timeout=60)
            if self.err:
                raise Fail("the client: %r" % (self.err,))

        def stop(self):
            self.stopped = True
            self.th.join(60)
            if self.err:
                raise Fail("the client: %r" % (self.err,))

    def loop_cycles(self, pr, port, loop, k, conns):
        """loop going on (k more steps) before, across and after
        tcp_cycles; the last restart (pr with --no-ckpt)."""
        try:
            loop.progress(k)
            return pr if self.opts.no_ckpt else self.tcp_cycles(
                pr, port, lambda: loop.progress(k), conns=conns)
        finally:
            loop.stop()

    def tcp_cycles(self, pr, port, progress=None, conns=0, while_down=None):
        """checkpoint --kill and restart (twice in twice mode) with nothing
        but ckpt's own network lock between the clients and the server:
        its log must say it locked at least conns connections. Between the
        checkpoint and the restart while_down() (if given) has a client
        send to the server (gone): the restart waits until the lock has
        dropped a packet, which without the lock would have been answered
        by a reset. The restart must remove the lock; progress() (if
        given) must go on after each restart. Returns the last restart."""
        rp = pr
        for i in range(2 if self.mode == T else 1):
            tag = "" if i == 0 else "2"
            self.checkpoint(self.p("img" + tag), "ckpt" + tag, reap=[rp])
            lock = self.netlock_of("ckpt" + tag)
            if conns and (not lock or lock[1] < conns):
                raise Fail("ckpt%s: the log says the network lock held %s, want %d connection(s)"
                           % (tag, lock and lock[1], conns))
            if rp is not pr:
                self.wait_all([rp], 10, "the first ckpt restart, after its tree was killed")
            if while_down:
                while_down()
                if lock:
                    self.wait_until("the network lock %s to drop a packet" % lock[0],
                                    lambda: self.nft_drops(lock[0]), [], timeout=30)
            rp = self.restart(self.p("img" + tag), "restart" + tag)
            if lock:
                self.wait_until("the restart to remove the network lock %s" % lock[0],
                                lambda: self.nft_drops(lock[0]) is None, [rp], timeout=30)
            if progress:
                progress()
        return rp

    @staticmethod
    def resp_cmd(cmd):
        return b"*%d\r\n" % len(cmd) + b"".join(
            b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in cmd))

    @staticmethod
    def resp_read(f):
        line = f.readline()
        if not line:
            raise ConnectionError("end of file")
        if line[:1] == b"$":
            n = int(line[1:])
            return None if n < 0 else f.read(n + 2)[:-2].decode()
        return line[:-2].decode()

    def start_redis(self):
        """redis-server on 127.0.0.1 at a free port, TCP only, no saving, as
        the test's tree: (its Popen, the port), once it accepts."""
        if not shutil.which("redis-server"):
            raise Skip("redis-server not installed")
        port = self.free_port()
        pr = self.start_server(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no", "--dir", self.dir,
                                "--logfile", self.p("redis.log")], port)
        self.logs.append(self.p("redis.log"))
        return pr, port

    def flow_redis_reconnect(self):
        """redis-server on 127.0.0.1 at a free port; 6 client threads of the
        runner's each connect for every SET, GET and INCR (then close), so
        that connections wait in the listener's queue at any instant (before
        step "hold out", 6 of 10 checkpoints of redis under
        `redis-benchmark -k 0` were refused for it). Four checkpoints that
        let it go on, then checkpoint --kill and restart: every one succeeds,
        no client sees an error or a wrong reply, and the counter the
        clients INCR equals the commands they made."""
        pr, port = self.start_redis()
        state = {"n": [0] * 6, "err": None, "stop": False}

        def loop(t):
            try:
                while not state["stop"] and not state["err"]:
                    i = state["n"][t]
                    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
                        f = c.makefile("rb")
                        c.sendall(self.resp_cmd(["SET", "k%d_%d" % (t, i), "v%d" % i]) +
                                  self.resp_cmd(["GET", "k%d_%d" % (t, i)]) +
                                  self.resp_cmd(["INCR", "total"]))
                        got = [self.resp_read(f) for _ in range(3)]
                    if got[:2] != ["+OK", "v%d" % i] or not got[2].startswith(":"):
                        raise Fail("client %d, command %d: got %r" % (t, i, got))
                    state["n"][t] = i + 1
            except Exception as e:  # reported by the flow
                state["err"] = state["err"] or "client %d: %r" % (t, e)
        ths = [threading.Thread(target=loop, args=(t,), daemon=True) for t in range(6)]
        for th in ths:
            th.start()

        def progress(k=100):
            n = sum(state["n"])
            self.wait_until("%d more commands" % k,
                            lambda: sum(state["n"]) >= n + k or state["err"], [], timeout=60)
            if state["err"]:
                raise Fail("the redis clients: %s" % state["err"])
        try:
            progress()
            rp = pr
            if not self.opts.no_ckpt:
                for k in range(4):
                    self.checkpoint(self.p("live%d" % k), "live%d" % k, reap=[], kill=False)
                    progress()
                rp = self.tcp_cycles(pr, port, progress)
        finally:
            state["stop"] = True
            for th in ths:
                th.join(60)
        if state["err"]:
            raise Fail("the redis clients: %s" % state["err"])
        with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
            c.sendall(self.resp_cmd(["GET", "total"]))
            total = self.resp_read(c.makefile("rb"))
        if total != str(sum(state["n"])):
            raise Fail("redis counted %s commands, the clients made %d" % (total, sum(state["n"])))
        self.notes.append("%d commands on as many connections" % sum(state["n"]))
        os.kill(self.pid, signal.SIGTERM)
        self.wait_all([rp], EXIT_TIMEOUT, "redis-server after SIGTERM")

    def flow_redis_tcp(self):
        """redis-server on 127.0.0.1 at a free port, TCP only; a client of
        the runner's holds one connection and issues SET, GET and INCR in a
        loop, checking every reply, across checkpoint --kill and restart
        with only ckpt's network lock between them: no error, no lost
        reply, no reset; the restored server holds as many sockets as the
        original. A second connection sends PING while the server is down
        (dropped by the lock, retransmitted): PONG after the restart."""
        pr, port = self.start_redis()
        cl = socket.create_connection(("127.0.0.1", port), timeout=60)
        f = cl.makefile("rb")
        state = {"n": 0, "err": None, "stop": False}
        # a second connection sends PING while the server is down
        probe = socket.create_connection(("127.0.0.1", port), timeout=60)
        pf = probe.makefile("rb")

        def ping():
            probe.sendall(self.resp_cmd(["PING"]))
            if self.resp_read(pf) != "+PONG":
                raise Fail("no PONG")
        down = self.DownCall("a PING", ping)

        def loop():
            try:
                while not state["stop"]:
                    i = state["n"]
                    cl.sendall(self.resp_cmd(["SET", "k%d" % i, "v%d" % i]))
                    if self.resp_read(f) != "+OK":
                        raise Fail("SET %d" % i)
                    cl.sendall(self.resp_cmd(["GET", "k%d" % i]) + self.resp_cmd(["INCR", "n"]))
                    got = (self.resp_read(f), self.resp_read(f))
                    if got != ("v%d" % i, ":%d" % (i + 1)):
                        raise Fail("command %d: got %r" % (i, got))
                    state["n"] = i + 1
            except Exception as e:  # reported by the flow
                state["err"] = e
        th = threading.Thread(target=loop, daemon=True)
        th.start()

        def progress():
            n = state["n"]
            self.wait_until("100 more commands", lambda: state["n"] >= n + 100 or state["err"],
                            [], timeout=60)
        def held(when):
            if self.sockets_of(self.pid) != socks:
                raise Fail("%s: redis-server holds %d sockets, want %d as before"
                           % (when, self.sockets_of(self.pid), socks))
        try:
            progress()
            probe.sendall(self.resp_cmd(["PING"]))
            if self.resp_read(pf) != "+PONG":
                raise Fail("no PONG before the checkpoint")
            socks = self.sockets_of(self.pid)  # its listener, our two connections
            if self.opts.no_ckpt:
                rp = pr
            else:
                rp = self.tcp_cycles(pr, port, lambda: (down.check(), held("after the restart"),
                                                        progress()),
                                     conns=2, while_down=down.start)
        finally:
            state["stop"] = True
            th.join(60)
            cl.close()
            probe.close()
        if state["err"]:
            raise Fail("the redis client: %r" % (state["err"],))
        self.vlog("%d commands" % state["n"])
        with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
            c.sendall(self.resp_cmd(["SHUTDOWN", "NOSAVE"]))
            c.recv(100)
        self.wait_all([rp], EXIT_TIMEOUT, "redis-server after SHUTDOWN")

    def flow_etcd(self):
        """etcd (Go: a dozen threads, a bbolt database mapped from its data
        directory, a raft log, and a gRPC connection to itself behind its
        JSON gateway) on free ports of 127.0.0.1. A client of the runner's
        holds one keep-alive HTTP connection and, in a loop, puts key i and
        reads it back, checking the value and that the store's revision
        grows by one a put, across checkpoint --kill and restart with only
        ckpt's network lock between them; after the restart the keys put
        before are all there."""
        if not shutil.which("etcd"):
            raise Skip("etcd not installed")
        port, peer = self.free_port(), self.free_port()
        url = "http://127.0.0.1:%d" % port
        purl = "http://127.0.0.1:%d" % peer
        pr = self.start_server(["etcd", "--name", "ckpt", "--data-dir", self.p("etcd.data"),
                                "--listen-client-urls", url, "--advertise-client-urls", url,
                                "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                                "--initial-cluster", "ckpt=" + purl], port)

        def b64(x):
            return base64.b64encode(x.encode()).decode()

        def call(conn, path, body):
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            if r.status != 200:
                raise Fail("%s: HTTP %d %r" % (path, r.status, data[:200]))
            return json.loads(data)

        def healthy():
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                ok = json.loads(c.getresponse().read()).get("health") == "true"
                c.close()
                return ok
            except (OSError, ValueError, http.client.HTTPException):
                return False
        self.wait_until("etcd to be healthy", healthy, [pr], timeout=60)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        revs = []

        def step(i):
            put = call(conn, "/v3/kv/put", {"key": b64("k%d" % i), "value": b64("v%d" % i)})
            rev = int(put["header"]["revision"])
            if revs and rev != revs[-1] + 1:
                raise Fail("put %d: revision %d after %d" % (i, rev, revs[-1]))
            got = call(conn, "/v3/kv/range", {"key": b64("k%d" % i)})
            kvs = got.get("kvs", [])
            if len(kvs) != 1 or base64.b64decode(kvs[0]["value"]) != b"v%d" % i:
                raise Fail("range k%d: %r" % (i, kvs))
            revs.append(rev)
        loop = self.Loop(self, "puts", step)
        try:
            rp = self.loop_cycles(pr, port, loop, 20, 1)
        finally:
            conn.close()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            got = call(c, "/v3/kv/range", {"key": b64("k"), "range_end": b64("l"),
                                            "count_only": True})
        finally:
            c.close()
        if int(got.get("count", 0)) != loop.n:
            raise Fail("etcd holds %s keys, the client put %d" % (got.get("count"), loop.n))
        self.vlog("%d puts" % loop.n)
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "etcd after SIGTERM")

    def flow_mariadb_tcp(self):
        """MariaDB 10.11 (mariadbd: a dozen threads, InnoDB's redo log and
        tablespaces, Aria's tables) on a free port of 127.0.0.1, its data
        made by mariadb-install-db in the test's directory. InnoDB's native
        AIO is off: with it mariadbd uses io_uring, which ckpt refuses
        (naming the fd and both ring mappings). The mariadb client of the
        runner's (outside the tree) holds one TCP connection, fed a line at
        a time: it inserts row i and reads back the row count and its
        connection id, in a loop, across checkpoint --kill and restart with
        only ckpt's network lock between them: every count is right, the
        connection id never changes, and a new connection counts the rows
        the client was told were inserted. case "uring": native AIO on,
        the checkpoint (while the client inserts) must be refused naming
        mariadbd's io_uring fd, and the server and the held connection go
        on as if nothing happened."""
        uring = self.t["case"] == "uring"
        for prog in ("mariadbd", "mariadb-install-db", "mariadb"):
            if not shutil.which(prog):
                raise Skip("%s not installed" % prog)
        data = self.p("mariadb.data")
        self.logs += [self.p("install-db.log"), self.p("mariadb.err")]
        ini = self.popen(["mariadb-install-db", "--no-defaults", "--datadir=" + data,
                          "--user=root", "--auth-root-authentication-method=normal",
                          "--skip-test-db"],
                         out=self.p("install-db.log"), err=self.p("install-db.log"))
        self.wait_all([ini], 120, "mariadb-install-db")
        if ini.returncode != 0:
            raise Fail("mariadb-install-db exit %d" % ini.returncode)
        port = self.free_port()
        pr = self.start_server(["mariadbd", "--no-defaults", "--datadir=" + data, "--user=root",
                                "--bind-address=127.0.0.1", "--port=%d" % port,
                                "--socket=" + self.p("mariadb.sock"), "--skip-name-resolve",
                                "--innodb-use-native-aio=%d" % uring,
                                "--log-error=" + self.p("mariadb.err"),
                                "--pid-file=" + self.p("mariadb.pid")], port)
        client = ["mariadb", "--no-defaults", "-h", "127.0.0.1", "-P", str(port), "-uroot",
                  "--batch", "--skip-column-names"]

        def sql(q):
            r = subprocess.run(client + ["-e", q], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                raise Fail("mariadb -e %r: exit %d: %s" % (q, r.returncode, r.stderr.strip()))
            return r.stdout.strip()
        sql("CREATE DATABASE t; CREATE TABLE t.a (i INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB")
        held = subprocess.Popen(client + ["--unbuffered", "-n"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(held)
        cids = set()

        def step(i):
            held.stdin.write("INSERT INTO t.a VALUES (%d, 'v%d'); "
                             "SELECT COUNT(*), CONNECTION_ID() FROM t.a;\n" % (i + 1, i + 1))
            held.stdin.flush()
            line = held.stdout.readline()
            if not line:
                raise Fail("the held client ended: %s" % held.stdout.read())
            got = line.split()
            if len(got) != 2 or got[0] != str(i + 1):
                raise Fail("insert %d: got %r" % (i + 1, line))
            cids.add(got[1])
            if len(cids) > 1:
                raise Fail("connection ids %s: the held connection changed" % sorted(cids))
        loop = self.Loop(self, "inserts", step)
        if uring and not self.opts.no_ckpt:
            try:
                loop.progress(50)
                self.refused_uring(pr)
                loop.progress(50)
            finally:
                loop.stop()
            rp = pr
        else:
            rp = self.loop_cycles(pr, port, loop, 50, 1)
        held.stdin.close()
        self.wait_all([held], EXIT_TIMEOUT, "the held mariadb client")
        count = sql("SELECT COUNT(*) FROM t.a")
        if count != str(loop.n):
            raise Fail("a new connection counts %s rows, the held one inserted %d"
                       % (count, loop.n))
        self.vlog("%d inserts on connection %s" % (loop.n, cids))
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "mariadbd after SIGTERM")

    def flow_memcached_tcp(self):
        """memcached (libevent, 4 worker threads, root dropped to nobody by
        -u) on a free port of 127.0.0.1. A client of the runner's holds one
        connection and sets key i, reads it back and increments a counter,
        in a loop, checking every reply, across checkpoint --kill and
        restart with only ckpt's network lock between them; after it the
        server still runs as nobody and every key set before is there."""
        if not shutil.which("memcached"):
            raise Skip("memcached not installed")
        port = self.free_port()
        pr = self.start_server(["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", str(port),
                                "-U", "0", "-t", "4", "-m", "64"], port)
        cl = socket.create_connection(("127.0.0.1", port), timeout=60)
        f = cl.makefile("rb")
        cl.sendall(b"set n 0 0 1\r\n0\r\n")
        if f.readline() != b"STORED\r\n":
            raise Fail("set n")
        def step(i):
            v = b"v%d" % i
            cl.sendall(b"set k%d 0 0 %d\r\n%s\r\nget k%d\r\nincr n 1\r\n" % (i, len(v), v, i))
            got = [f.readline() for _ in range(5)]
            want = [b"STORED\r\n", b"VALUE k%d 0 %d\r\n" % (i, len(v)), v + b"\r\n",
                    b"END\r\n", b"%d\r\n" % (i + 1)]
            if got != want:
                raise Fail("command %d: got %r" % (i, got))
        loop = self.Loop(self, "commands", step)
        rp = self.loop_cycles(pr, port, loop, 100, 1)
        with open("/proc/%d/status" % self.pid) as st:
            uids = re.search(r"^Uid:\s+(.*)$", st.read(), re.M).group(1).split()
        if uids != [str(pwd.getpwnam("nobody").pw_uid)] * 4:
            raise Fail("memcached runs with uids %s, not nobody's" % uids)
        missing = 0
        for i in range(loop.n):
            cl.sendall(b"get k%d\r\n" % i)
            line = f.readline()
            if line.startswith(b"VALUE"):
                f.readline(), f.readline()
            else:
                missing += 1
        cl.close()
        if missing:
            raise Fail("%d of %d keys are gone" % (missing, loop.n))
        self.vlog("%d commands" % loop.n)
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "memcached after SIGTERM")

    @staticmethod
    def ber(tag, body):
        """A BER element: tag, definite length, body."""
        if len(body) < 0x80:
            return bytes([tag, len(body)]) + body
        n = len(body).to_bytes((len(body).bit_length() + 7) // 8, "big")
        return bytes([tag, 0x80 | len(n)]) + n + body

    @staticmethod
    def ber_split(body):
        """The (tag, body) of each BER element in body."""
        out, i = [], 0
        while i < len(body):
            tag, n, i = body[i], body[i + 1], i + 2
            if n & 0x80:
                n, i = int.from_bytes(body[i:i + (n & 0x7f)], "big"), i + (n & 0x7f)
            out.append((tag, body[i:i + n]))
            i += n
        return out

    def ldap_call(self, c, f, msgid, op):
        """Sends LDAP operation op (a BER element) as message msgid on
        socket c; (the reply's operation tag, its resultCode), read from
        f (c's file)."""
        c.sendall(self.ber(0x30, self.ber(0x02, msgid.to_bytes(4, "big")) + op))
        hdr = f.read(2)
        if len(hdr) < 2:
            raise ConnectionError("end of file")
        n = hdr[1]
        if n & 0x80:
            n = int.from_bytes(f.read(n & 0x7f), "big")
        (_, rid), (tag, res) = self.ber_split(f.read(n))[:2]
        if int.from_bytes(rid, "big") != msgid:
            raise Fail("LDAP reply to message %d, sent %d" % (int.from_bytes(rid, "big"), msgid))
        return tag, self.ber_split(res)[0][1][0]

    @staticmethod
    def locks_of(pid):
        """pid's POSIX locks, from /proc/locks, as (type, inode, start, end)."""
        with open("/proc/locks") as f:
            return sorted((w[3], w[5], w[6], w[7]) for w in (l.split() for l in f)
                          if w[1] == "POSIX" and w[4] == str(pid))

    def flow_slapd(self):
        """slapd (OpenLDAP 2.5, 4 threads) with an mdb database: LMDB maps
        its data.mdb MAP_SHARED read-only (and writes it through an fd)
        and lock.mdb MAP_SHARED read-write, a table of readers each of
        which is marked by a POSIX lock on lock.mdb. A client of the
        runner's (a bound LDAP connection, BER by hand) adds entry i and
        compares its attribute, in a loop, across checkpoint --kill and
        restart with only ckpt's network lock between them; after it slapd
        holds the same POSIX locks and maps both files shared, and
        ldapsearch on a new connection finds every entry added."""
        slapd = shutil.which("slapd") or "/usr/sbin/slapd"
        if not os.access(slapd, os.X_OK) or not shutil.which("ldapsearch"):
            raise Skip("slapd or ldapsearch not installed")
        if not os.path.exists("/usr/lib/ldap/back_mdb.so") or \
                not os.path.exists("/etc/ldap/schema/core.schema"):
            raise Skip("slapd's back_mdb module or core schema missing")
        port, db, base = self.free_port(), self.p("ldap.db"), "dc=ckpt,dc=test"
        admin, pw = "cn=admin," + base, b"s%d" % random.randrange(1 << 30)
        os.mkdir(db)
        cfg = self.p("slapd.conf")
        with open(cfg, "w") as f:
            f.write("include /etc/ldap/schema/core.schema\n"
                    "modulepath /usr/lib/ldap\nmoduleload back_mdb\n"
                    "pidfile %s\ndatabase mdb\nmaxsize 104857600\nsuffix \"%s\"\n"
                    "rootdn \"%s\"\nrootpw %s\ndirectory %s\n"
                    % (self.p("slapd.pid"), base, admin, pw.decode(), db))
        pr = self.start_server([slapd, "-d", "0", "-f", cfg,
                                "-h", "ldap://127.0.0.1:%d/" % port], port)
        s = lambda x: self.ber(0x04, x.encode() if isinstance(x, str) else x)
        attrs = lambda *kv: self.ber(0x30, b"".join(
            self.ber(0x30, s(k) + self.ber(0x31, b"".join(s(v) for v in vs))) for k, vs in kv))
        cl = socket.create_connection(("127.0.0.1", port), timeout=60)
        f = cl.makefile("rb")
        if self.ldap_call(cl, f, 1, self.ber(0x60, self.ber(0x02, b"\3") + s(admin) +
                                             self.ber(0x80, pw))) != (0x61, 0):
            raise Fail("bind as %s refused" % admin)
        if self.ldap_call(cl, f, 2, self.ber(0x68, s(base) + attrs(
                ("objectClass", ["dcObject", "organization"]), ("o", ["ckpt"]),
                ("dc", ["ckpt"])))) != (0x69, 0):
            raise Fail("adding %s failed" % base)

        def step(i):
            dn = "cn=u%d,%s" % (i, base)
            got = self.ldap_call(cl, f, 3 + 2 * i, self.ber(0x68, s(dn) + attrs(
                ("objectClass", ["person"]), ("cn", ["u%d" % i]), ("sn", ["s%d" % i]))))
            if got != (0x69, 0):
                raise Fail("add %s: reply %r" % (dn, got))
            # compareTrue (6): the entry is there with its value
            got = self.ldap_call(cl, f, 4 + 2 * i, self.ber(0x6e, s(dn) + self.ber(
                0x30, s("sn") + s("s%d" % i))))
            if got != (0x6f, 6):
                raise Fail("compare %s: reply %r" % (dn, got))
        loop = self.Loop(self, "adds", step)
        loop.progress(20)
        locks = self.locks_of(self.pid)
        try:
            rp = self.loop_cycles(pr, port, loop, 20, 1)
        finally:
            cl.close()
        if self.locks_of(self.pid) != locks:
            raise Fail("slapd holds the locks %r, held %r" % (self.locks_of(self.pid), locks))
        with open("/proc/%d/maps" % self.pid) as m:
            shared = {l.split()[-1] for l in m if l.split()[1].endswith("s")}
        for name in ("data.mdb", "lock.mdb"):
            if os.path.join(db, name) not in shared:
                raise Fail("slapd does not map %s shared: %s" % (name, sorted(shared)))
        r = subprocess.run(["ldapsearch", "-x", "-LLL", "-H", "ldap://127.0.0.1:%d" % port,
                            "-D", admin, "-w", pw.decode(), "-b", base, "(objectClass=person)",
                            "cn"], capture_output=True, text=True, timeout=60)
        found = set(re.findall(r"^cn: (u\d+)$", r.stdout, re.M))
        if r.returncode != 0 or found != {"u%d" % i for i in range(loop.n)}:
            raise Fail("ldapsearch (exit %d) finds %d entries, the client added %d: %s"
                       % (r.returncode, len(found), loop.n, r.stderr.strip()))
        self.vlog("%d adds; locks %s" % (loop.n, locks))
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "slapd after SIGTERM")

    @staticmethod
    def dns_query(qid, name):
        """A DNS query (recursion desired) for name's A record."""
        return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + b"".join(
            bytes([len(p)]) + p for p in name.encode().split(b".")) + b"\0\0\1\0\1"

    @staticmethod
    def dns_answer(msg):
        """(id, rcode, [the addresses of the A records answered]) of DNS
        reply msg."""
        qid, flags, qd, an = struct.unpack(">HHHH", msg[:8])

        def skip(i):  # past a name, compressed or not
            while msg[i]:
                if msg[i] & 0xc0 == 0xc0:
                    return i + 2
                i += msg[i] + 1
            return i + 1
        i = 12
        for _ in range(qd):
            i = skip(i) + 4
        addrs = []
        for _ in range(an):
            i = skip(i)
            typ, _, _, n = struct.unpack(">HHIH", msg[i:i + 10])
            if typ == 1 and n == 4:
                addrs.append(socket.inet_ntoa(msg[i + 10:i + 14]))
            i += 10 + n
        return qid, flags & 0xf, addrs

    def dns_upstream(self):
        """An authoritative server of the runner's on a free UDP port of
        127.0.0.1: nI.up.test is 10.0.I/256.I%256 (an hour's TTL), anything
        else NXDOMAIN. (its port, the list of names it was asked, a stop
        function)."""
        srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        srv.bind(("127.0.0.1", 0))
        srv.settimeout(0.2)
        asked, done = [], {"stop": False}

        def serve():
            while not done["stop"]:
                try:
                    q, peer = srv.recvfrom(4096)
                except socket.timeout:
                    continue
                except OSError:
                    return
                i, labels = 12, []
                while i < len(q) and q[i]:
                    labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace").lower())
                    i += q[i] + 1
                question = q[12:i + 5]
                name = ".".join(labels)
                asked.append(name)
                m = re.fullmatch(r"n(\d+)\.up\.test", name)
                if m and q[i + 1:i + 3] == b"\0\1":
                    n = int(m.group(1))
                    r = (q[:2] + b"\x85\x80\0\1\0\1\0\0\0\0" + question +
                         b"\xc0\x0c\0\1\0\1" + struct.pack(">IH", 3600, 4) +
                         bytes([10, 0, n >> 8 & 255, n & 255]))
                else:
                    r = q[:2] + b"\x85\x83\0\1\0\0\0\0\0\0" + question
                srv.sendto(r, peer)
        threading.Thread(target=serve, daemon=True).start()

        def stop():
            done["stop"] = True
            srv.close()
        return srv.getsockname()[1], asked, stop

    def udp_dns(self, port, qid, name):
        """The answer of 127.0.0.1:port over UDP to name's A query, asked
        again each second without one (a datagram sent while the server
        is away is lost, as it is to any DNS client)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.settimeout(1)
            for _ in range(60):
                u.sendto(self.dns_query(qid, name), ("127.0.0.1", port))
                try:
                    return self.dns_answer(u.recv(4096))
                except socket.timeout:
                    continue
        raise Fail("no UDP answer for %s in 60 s" % name)

    def flow_unbound(self):
        """unbound (2 threads, a listener pair per thread by SO_REUSEPORT)
        on a free port of 127.0.0.1, forwarding up.test to a UDP server of
        the runner's. A client of the runner's holds one DNS-over-TCP
        connection and asks name i on it (unbound asks upstream and caches
        the answer), then asks it again over UDP (from the cache), in a
        loop, across checkpoint --kill and restart with only ckpt's
        network lock between them. After it every name asked before is
        answered right over UDP without a question upstream: the cache
        came back."""
        unbound = shutil.which("unbound") or "/usr/sbin/unbound"
        if not os.access(unbound, os.X_OK):
            raise Skip("unbound not installed")
        up, asked, stop = self.dns_upstream()
        port = self.free_port()
        cfg = self.p("unbound.conf")
        with open(cfg, "w") as f:
            f.write("server:\n  interface: 127.0.0.1\n  port: %d\n  do-daemonize: no\n"
                    "  username: \"\"\n  chroot: \"\"\n  directory: \"%s\"\n  pidfile: \"\"\n"
                    "  use-syslog: no\n  num-threads: 2\n  do-ip6: no\n"
                    "  access-control: 127.0.0.0/8 allow\n  do-not-query-localhost: no\n"
                    "  local-zone: \"test.\" nodefault\n  module-config: \"iterator\"\n"
                    "  qname-minimisation: no\n  tcp-idle-timeout: 600000\n"
                    "forward-zone:\n  name: \"up.test.\"\n  forward-addr: 127.0.0.1@%d\n"
                    "remote-control:\n  control-enable: no\n" % (port, self.dir, up))
        try:
            pr = self.start_server([unbound, "-d", "-c", cfg], port)
            cl = socket.create_connection(("127.0.0.1", port), timeout=60)
            f = cl.makefile("rb")

            def step(i):
                name, want = "n%d.up.test" % i, (0, ["10.0.%d.%d" % (i >> 8 & 255, i & 255)])
                q = self.dns_query(i & 0xffff, name)
                cl.sendall(struct.pack(">H", len(q)) + q)
                n = f.read(2)
                if len(n) < 2:
                    raise ConnectionError("end of file")
                got = self.dns_answer(f.read(struct.unpack(">H", n)[0]))
                if got != (i & 0xffff,) + want:
                    raise Fail("TCP %s: got %r" % (name, got))
                got = self.udp_dns(port, i & 0xffff, name)
                if got[1:] != want:
                    raise Fail("UDP %s: got %r" % (name, got))
            loop = self.Loop(self, "names", step)
            try:
                rp = self.loop_cycles(pr, port, loop, 30, 1)
            finally:
                cl.close()
            before = len(asked)
            for i in range(loop.n):
                got = self.udp_dns(port, 1, "n%d.up.test" % i)
                if got[2] != ["10.0.%d.%d" % (i >> 8 & 255, i & 255)]:
                    raise Fail("n%d.up.test: got %r after the restart" % (i, got))
            if len(asked) != before:
                raise Fail("unbound asked upstream %s again: its cache is lost"
                           % sorted(set(asked[before:]))[:5])
        finally:
            stop()
        self.vlog("%d names, %d questions upstream" % (loop.n, len(asked)))
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "unbound after SIGTERM")

    def echo_server(self):
        """An echo server of the runner's on a free port of 127.0.0.1, a
        thread a connection: (its port, a stop function)."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.settimeout(0.2)
        done = {"stop": False}

        def echo(c):
            with c:
                while True:
                    d = c.recv(65536)
                    if not d:
                        return
                    c.sendall(d)

        def serve():
            while not done["stop"]:
                try:
                    c, _ = srv.accept()
                except socket.timeout:
                    continue
                except OSError:
                    return
                c.settimeout(None)
                threading.Thread(target=echo, args=(c,), daemon=True).start()
        threading.Thread(target=serve, daemon=True).start()

        def stop():
            done["stop"] = True
            srv.close()
        return srv.getsockname()[1], stop

    def echo_loop(self, cl):
        """A Loop that sends a numbered line on the connection cl and reads
        its echo back, each step."""
        f = cl.makefile("rb")

        def step(i):
            cl.sendall(b"line %d\n" % i)
            got = f.readline()
            if got != b"line %d\n" % i:
                raise Fail("line %d: got %r" % (i, got))
        return self.Loop(self, "echoes", step)

    def flow_stunnel(self):
        """stunnel (OpenSSL; a thread a connection) ends TLS on a free port
        of 127.0.0.1 in front of an echo server of the runner's. A client
        of the runner's (Python's ssl, checking stunnel's certificate)
        holds one TLS connection through it and sends a numbered line and
        reads its echo in a loop, across checkpoint --kill and restart
        with only ckpt's network lock between them: the TLS session (keys,
        sequence numbers in stunnel's memory) and both TCP connections go
        on; a new TLS connection is served after it."""
        stunnel = shutil.which("stunnel4") or shutil.which("stunnel")
        if not stunnel or not shutil.which("openssl"):
            raise Skip("stunnel4 or openssl not installed")
        key, cert = self.p("key.pem"), self.p("cert.pem")
        r = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                            "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            raise Fail("openssl req: %s" % r.stderr.decode(errors="replace")[-300:])
        back, stop = self.echo_server()
        front = self.free_port()
        cfg = self.p("stunnel.conf")
        with open(cfg, "w") as f:
            f.write("foreground = yes\npid =\n[tls]\naccept = 127.0.0.1:%d\n"
                    "connect = 127.0.0.1:%d\ncert = %s\nkey = %s\n" % (front, back, cert, key))
        ctx = ssl.create_default_context(cafile=cert)

        def connect():
            return ctx.wrap_socket(socket.create_connection(("127.0.0.1", front), timeout=60),
                                   server_hostname="localhost")
        try:
            pr = self.start_server([stunnel, cfg], front)
            cl = connect()
            loop = self.echo_loop(cl)
            try:
                rp = self.loop_cycles(pr, front, loop, 100, 2)
            finally:
                cl.close()
            with connect() as c:
                c.sendall(b"new\n")
                if c.makefile("rb").readline() != b"new\n":
                    raise Fail("a new TLS connection got no echo")
        finally:
            stop()
        self.vlog("%d echoes" % loop.n)
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "stunnel after SIGTERM")

    def flow_haproxy_tcp(self):
        """haproxy (2 threads, a watchdog timer on each thread's CPU-time
        clock) in TCP mode between a client of the runner's and an echo
        server of the runner's, both outside the tree: the client holds one
        connection through haproxy and sends a numbered line and reads its
        echo in a loop, across checkpoint --kill and restart with only
        ckpt's network lock between them; the lock holds both of haproxy's
        connections (to the client and to the server), and the restored
        haproxy still has its two CPU-time timers."""
        if not shutil.which("haproxy"):
            raise Skip("haproxy not installed")
        front = self.free_port()
        back, stop_echo = self.echo_server()
        cfg = self.p("haproxy.cfg")
        with open(cfg, "w") as f:
            f.write("global\n    nbthread 2\n"
                    "defaults\n    mode tcp\n    timeout connect 5s\n"
                    "    timeout client 300s\n    timeout server 300s\n"
                    "frontend fe\n    bind 127.0.0.1:%d\n    default_backend be\n"
                    "backend be\n    server s1 127.0.0.1:%d\n" % (front, back))
        pr = self.start_server(["haproxy", "-db", "-f", cfg], front)
        # each of its 2 threads arms its watchdog's timer once it runs
        self.wait_until("haproxy's 2 watchdog timers",
                        lambda: len(self.ptimer_clocks(self.pid)) == 2, [pr], timeout=30)
        timers = self.ptimer_clocks(self.pid)
        cl = socket.create_connection(("127.0.0.1", front), timeout=60)
        loop = self.echo_loop(cl)
        try:
            rp = self.loop_cycles(pr, front, loop, 100, 2)
        finally:
            cl.close()
            stop_echo()
        if self.ptimer_clocks(self.pid) != timers:
            raise Fail("haproxy's timers' clocks are %r, were %r"
                       % (self.ptimer_clocks(self.pid), timers))
        self.vlog("%d echoes; timers on clocks %s" % (loop.n, timers))
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "haproxy after SIGTERM")

    @staticmethod
    def ptimer_clocks(pid):
        """The clocks of pid's POSIX timers, from /proc/PID/timers."""
        with open("/proc/%d/timers" % pid) as f:
            return sorted(int(x) for x in re.findall(r"^ClockID: (-?\d+)$", f.read(), re.M))

    def http_keepalive_loop(self, port, body, path="/index.html"):
        """A Loop of GETs of path on one keep-alive connection, each reply
        200 with body; (the loop, the connection)."""
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def step(i):
            conn.request("GET", path)
            r = conn.getresponse()
            data = r.read()
            if r.status != 200 or data != body:
                raise Fail("GET %d: %d %r" % (i, r.status, data[:100]))
            if r.will_close:
                raise Fail("GET %d: the server closes the connection" % i)
        return self.Loop(self, "GETs", step), conn

    def flow_apache_tcp(self):
        """Apache 2.4 with the event MPM (a root parent, child processes of
        25 threads each running as nobody, a file mutex) serving a static
        file on a free port of 127.0.0.1; a client of the runner's GETs it
        in a loop on one keep-alive connection across checkpoint --kill and
        restart with only ckpt's network lock between them; the tree has
        as many processes after, and new connections are served."""
        if not shutil.which("apache2") and not os.path.exists("/usr/sbin/apache2"):
            raise Skip("apache2 not installed")
        mods = "/usr/lib/apache2/modules"
        port = self.free_port()
        os.chmod(self.dir, 0o755)  # the workers (nobody) read the document root
        docs = self.p("htdocs")
        os.mkdir(docs)
        body = b"served by apache %d\n" % port
        with open(os.path.join(docs, "index.html"), "wb") as f:
            f.write(body)
        cfg = self.p("httpd.conf")
        with open(cfg, "w") as f:
            f.write("".join("LoadModule %s_module %s/mod_%s.so\n" % (m, mods, m)
                            for m in ("mpm_event", "authz_core", "dir", "mime")))
            f.write("ServerRoot /etc/apache2\nTypesConfig /etc/mime.types\n"
                    "Listen 127.0.0.1:%d\nServerName localhost\n"
                    "PidFile %s\nErrorLog %s\nDocumentRoot %s\nDefaultRuntimeDir %s\n"
                    "Mutex file:%s default\nUser nobody\nGroup nogroup\n"
                    "<Directory %s>\n  Require all granted\n</Directory>\n"
                    "StartServers 2\nKeepAliveTimeout 300\nMaxKeepAliveRequests 0\n"
                    % (port, self.p("httpd.pid"), self.p("error.log"), docs, self.dir,
                       self.dir, docs))
        self.logs.append(self.p("error.log"))
        apache = shutil.which("apache2") or "/usr/sbin/apache2"
        pr = self.start_server([apache, "-f", cfg, "-DFOREGROUND"], port)
        loop, conn = self.http_keepalive_loop(port, body)
        loop.progress(50)
        procs = len(self.tree_pids(self.pid))
        try:
            rp = self.loop_cycles(pr, port, loop, 50, 1)
        finally:
            conn.close()
        if len(self.tree_pids(self.pid)) != procs:
            raise Fail("the tree has %d processes, had %d" % (len(self.tree_pids(self.pid)), procs))
        for _ in range(4):
            with urllib.request.urlopen("http://127.0.0.1:%d/index.html" % port, timeout=30) as r:
                if r.read() != body:
                    raise Fail("a new connection got another body")
        self.vlog("%d GETs, %d processes" % (loop.n, procs))
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "apache2 after SIGTERM")

    def flow_varnish_tcp(self):
        """Varnish 7 (its manager, root, and its cache process of 200-odd
        threads jailed as vcache; their shared memory files in the work
        directory; the CLI on a port with a secret) caching a file of an
        origin server of the runner's, on free ports of 127.0.0.1; a client
        GETs it in a loop on one keep-alive connection across checkpoint
        --kill and restart with only ckpt's network lock between them;
        after it varnishadm (the CLI) says the child runs and varnishstat
        (reading the shared memory) counts cache hits."""
        if not shutil.which("varnishd") and not os.path.exists("/usr/sbin/varnishd"):
            raise Skip("varnish not installed")
        port, origin = self.free_port(), self.free_port()
        os.chmod(self.dir, 0o755)  # vcache reaches the work directory
        body = b"cached by varnish %d\n" % port
        handler = type("H", (http.server.BaseHTTPRequestHandler,), {
            "do_GET": lambda h: (h.send_response(200),
                                 h.send_header("Content-Length", str(len(body))),
                                 h.send_header("Cache-Control", "max-age=3600"),
                                 h.end_headers(), h.wfile.write(body)),
            "log_message": lambda h, *a: None})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", origin), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        work = self.p("varnish")
        varnishd = shutil.which("varnishd") or "/usr/sbin/varnishd"
        try:
            pr = self.start_server([varnishd, "-F", "-a", "127.0.0.1:%d" % port,
                                    "-b", "127.0.0.1:%d" % origin, "-n", work,
                                    "-s", "malloc,32m", "-T", "127.0.0.1:%d" % self.free_port()],
                                   port)
            loop, conn = self.http_keepalive_loop(port, body)
            try:
                rp = self.loop_cycles(pr, port, loop, 50, 1)
            finally:
                conn.close()
        finally:
            srv.shutdown()
            srv.server_close()
        adm = subprocess.run(["varnishadm", "-n", work, "status"], capture_output=True,
                             text=True, timeout=60)
        if "Child in state running" not in adm.stdout:
            raise Fail("varnishadm status: %r %r" % (adm.stdout, adm.stderr))
        st = subprocess.run(["varnishstat", "-n", work, "-1", "-f", "MAIN.cache_hit"],
                            capture_output=True, text=True, timeout=60)
        m = re.search(r"MAIN\.cache_hit\s+(\d+)", st.stdout)
        if not m or int(m.group(1)) < loop.n // 2:
            raise Fail("varnishstat counts %s cache hits of %d GETs: %r"
                       % (m and m.group(1), loop.n, st.stdout + st.stderr))
        self.vlog("%d GETs, %s hits" % (loop.n, m.group(1)))
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "varnishd after SIGTERM")

    def flow_qemu_tcg(self):
        """QEMU (TCG: x86 emulated, no KVM; a process of 4 threads with
        eventfds and a signalfd) booting a guest from a floppy whose boot
        sector (qemu_boot.S) writes the digits 0-9 in turn to its serial
        port, which QEMU serves on a free TCP port of 127.0.0.1. A client
        of the runner's reads it across checkpoint --kill and restart with
        only ckpt's network lock between them: every digit follows the one
        before (the guest's CPU and RAM, QEMU's memory, went on where they
        were) and more come after each restart; the monitor (another port)
        says the VM is running."""
        qemu = shutil.which("qemu-system-x86_64")
        if not qemu:
            raise Skip("qemu-system-x86_64 not installed")
        img = self.p("boot.img")
        for argv in (["gcc", "-c", "-o", self.p("boot.o"), os.path.join(HERE, "qemu_boot.S")],
                     ["ld", "-Ttext", "0x7c00", "--oformat", "binary", "-o", img,
                      self.p("boot.o")]):
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode:
                raise Fail("%s: %s" % (" ".join(argv), r.stderr))
        os.truncate(img, 1474560)
        serial, monitor = self.free_port(), self.free_port()
        pr = self.start_server([qemu, "-nographic", "-nodefaults", "-m", "16",
                                "-monitor", "tcp:127.0.0.1:%d,server,nowait" % monitor,
                                "-serial", "tcp:127.0.0.1:%d,server,nowait" % serial,
                                "-drive", "file=%s,format=raw,if=floppy" % img, "-boot", "a"],
                               serial)
        cl = socket.create_connection(("127.0.0.1", serial), timeout=60)
        last, head = [], [b""]

        def step(i):
            d = cl.recv(4096)
            if not d:
                raise Fail("the serial port closed")
            if not last:  # SeaBIOS's own output comes first
                head[0] += d
                at = head[0].find(b"0123456789")
                if at < 0:
                    return
                d = head[0][at:]
            for c in d:
                if last and c != ord("0") + (last[0] - ord("0") + 1) % 10:
                    raise Fail("chunk %d: %r after %r: the guest lost its place"
                               % (i, chr(c), chr(last[0])))
                last[:] = [c]
        loop = self.Loop(self, "chunks of the guest's output", step)
        try:
            rp = self.loop_cycles(pr, serial, loop, 20, 1)
        finally:
            cl.close()

        def hmp(cmd):
            with socket.create_connection(("127.0.0.1", monitor), timeout=30) as m:
                def until_prompt():
                    out = b""
                    while b"(qemu)" not in out:
                        d = m.recv(4096)
                        if not d:
                            break
                        out += d
                    return out.decode("latin-1")
                until_prompt()  # the banner
                m.sendall(cmd.encode() + b"\n")
                return until_prompt()
        status = hmp("info status")
        if "VM status: running" not in status:
            raise Fail("the monitor says %r" % status[-200:])
        self.vlog("%d chunks read" % loop.n)
        os.kill(self.pid, signal.SIGTERM)  # the server, not ckpt restart (its parent)
        self.wait_all([rp], EXIT_TIMEOUT, "qemu after SIGTERM")

    def refused_uring(self, pr):
        """A checkpoint of pr, which holds an io_uring instance, refused by
        pid and fd; pr alive after it."""
        fds = os.listdir("/proc/%d/fd" % self.pid)
        uring = [fd for fd in fds if "io_uring" in safe_readlink("/proc/%d/fd/%s" % (self.pid, fd))]
        if not uring:
            raise Skip("the server holds no io_uring instance here")
        rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
        if rc == 0 or rc >= 128 or rc < 0:
            raise Fail("ckpt checkpoint exit %d, expected a refusal" % rc)
        rx = r"\bpid %d fd (%s) \(anon_inode:\[io_uring\]\): io_uring instance" % (
            self.pid, "|".join(uring))
        if not re.search(rx, err):
            raise Fail("refusal message %r does not match /%s/" % (err.strip(), rx))
        if not pid_alive(self.pid):
            raise Fail("the server is gone after the refused checkpoint")

    ECHO_CLIENTS = 100

    def flow_echo100(self):
        """An asyncio echo server (py_echo.py server) and a client process
        of the runner's, outside the tree (py_echo.py client), holding 100
        connections with a line in flight on each, every echo checked;
        checkpoint --kill and restart with only ckpt's network lock between
        them (its log must say it locked the 100 connections): the server
        holds its listener, 100 connections and its self-pipe again, the client goes on
        (20 more rounds of echoes after each restart) and ends with no
        reset, no lost or wrong echo; SIGTERM ends the server (status 0).
        One more connection, the runner's, sends a line while the server
        is down (dropped by the lock, retransmitted): echoed after the
        restart."""
        n = self.ECHO_CLIENTS
        pr = self.start(args=self.t["args"])
        self.pid = pr.pid
        port = int(self.wait_file("port", pr))
        self.logs.append(self.p("client.log"))
        cl = self.popen(self.program_argv() + ["client", str(port), str(n)],
                        out=self.p("client.log"), err=self.p("client.log"))

        rounds = self.echo_rounds

        def progress(k=20):
            self.echo_progress(k, [cl], 60)

        def held(when):
            # the listener, the connections and the runner's, the loop's
            # self-pipe (a socketpair)
            if self.sockets_of(self.pid) != n + 4:
                raise Fail("%s: the server holds %d sockets, want %d" % (
                    when, self.sockets_of(self.pid), n + 4))

        progress(5)
        probe = socket.create_connection(("127.0.0.1", port), timeout=60)
        seq = [0]

        def echo():
            seq[0] += 1
            want = b"probe %d\n" % seq[0]
            probe.sendall(want)
            got = b""
            while len(got) < len(want):
                d = probe.recv(len(want) - len(got))
                if not d:
                    raise Fail("end of file")
                got += d
            if got != want:
                raise Fail("echo %r, want %r" % (got, want))
        echo()
        held("before")
        down = self.DownCall("a line of the runner's", echo)
        rp = pr
        if not self.opts.no_ckpt:
            rp = self.tcp_cycles(pr, port, lambda: (down.check(), held("after the restart"),
                                                    progress()),
                                 conns=n + 1, while_down=down.start)
            self.notes.append("%d rounds" % rounds())
        probe.close()
        with open(self.p("stop"), "w"):
            pass
        self.wait_all([cl], EXIT_TIMEOUT, "the echo client")
        with open(self.p("client.log"), errors="replace") as f:
            out = f.read()
        if cl.returncode != 0 or not out.startswith("PASS"):
            raise Fail("the echo client: status %s: %s" % (cl.returncode, out.strip()[-300:]))
        os.kill(self.pid, signal.SIGTERM)
        self.wait_all([rp], EXIT_TIMEOUT, "the echo server after SIGTERM")
        if rp.returncode != 0 or "served" not in self.out():
            raise Fail("the echo server: status %s: %s" % (rp.returncode, self.out()[-300:]))

    ACCEPTED_RX = re.compile(r"new clients held out, the (\d+) connection\(s\) its listeners "
                             r"had queued were accepted in \d+ ms")

    def flow_accept_busy(self):
        """py_slow_accept.py: a server that accepts one connection every
        40 ms while 8 client threads (a process of the runner's, outside
        the tree) connect again and again, so that its accept queue is
        never empty. A checkpoint that lets it go on, then checkpoint
        --kill and restart (twice in twice mode): each checkpoint succeeds
        and its log says that queued connections were accepted before the
        freeze (none is left in a queue, which would be refused); the
        clients see no error, and the count they are told goes on growing,
        from the restored server (the same pid)."""
        pr = self.start(args=["server", self.dir])
        self.pid = pr.pid
        port = int(self.wait_file("port", pr))
        self.logs.append(self.p("client.log"))
        cl = self.popen(self.program_argv() + ["client", str(port), "8", self.dir],
                        out=self.p("client.log"), err=self.p("client.log"))

        def served():
            try:
                with open(self.p("served")) as f:
                    c, p = f.read().split()
                return int(c), int(p)
            except (OSError, ValueError):
                return 0, 0

        def progress(k=10):
            c = served()[0]
            self.wait_until("%d more connections served" % k, lambda: served()[0] >= c + k,
                            [cl], timeout=60)

        def accepted(tags):
            """how many of the checkpoints' logs say that queued connections
            were accepted before the freeze"""
            n = 0
            for tag in tags:
                with open(self.p(tag + ".log"), errors="replace") as f:
                    m = self.ACCEPTED_RX.search(f.read())
                n += bool(m and int(m.group(1)) >= 1)
            return n

        progress()
        rp = pr
        if not self.opts.no_ckpt:
            self.checkpoint(self.p("live"), "live", reap=[], kill=False)
            progress()
            rp = self.tcp_cycles(pr, port, progress)
            # the queue is never empty but for a moment (every client held
            # back at once by the load): at least one checkpoint must have
            # found connections queued and had them accepted, and none was
            # refused (each of them was, before step "hold out")
            tags = ["live", "ckpt"] + (["ckpt2"] if self.mode == T else [])
            if not accepted(tags):
                raise Fail("no log of %s says that queued connections were accepted before "
                           "the freeze" % ", ".join(tags))
        count, pid = served()
        if pid != self.pid:
            raise Fail("the server says pid %d, want %d" % (pid, self.pid))
        with open(self.p("stop"), "w"):
            pass
        self.wait_all([cl], EXIT_TIMEOUT, "the clients")
        if cl.returncode != 0:
            with open(self.p("client.log"), errors="replace") as f:
                raise Fail("the clients: status %s: %s" % (cl.returncode, f.read()[-300:]))
        self.notes.append("%d served" % count)
        os.kill(self.pid, signal.SIGTERM)
        self.wait_all([rp], EXIT_TIMEOUT, "the server after SIGTERM")

    def flow_java(self):
        """A JVM (JavaThreads.java: three threads counting into files) on
        which `jcmd PID VM.version` was used once (its attach socket, bound
        as .java_pidN.tmp and renamed), checkpointed --kill; then another
        JVM (`jcmd -l`) runs and deletes the first one's hsperfdata file as
        stale; after restart the counters go on without a gap, jcmd works
        again, and the program ends with PASS."""
        java, javac, jcmd = (shutil.which(x) for x in ("java", "javac", "jcmd"))
        if not (java and javac and jcmd):
            raise Skip("openjdk (java, javac, jcmd) not installed")
        shutil.copy(os.path.join(HERE, "JavaThreads.java"), self.dir)
        r = subprocess.run([javac, "JavaThreads.java"], cwd=self.dir, capture_output=True,
                           timeout=300)
        if r.returncode != 0:
            raise Fail("javac: %r" % r.stderr[-300:])
        pr = self.popen([java, "-Xmx64m", "-XX:+UseSerialGC", "-cp", self.dir, "JavaThreads",
                         self.dir], out=self.p("out.log"), err=self.p("java.err"),
                        start_new_session=True)
        self.logs.append(self.p("java.err"))
        self.pid = pr.pid
        self.wait_until("the JVM ready", lambda: os.path.exists(self.p("ready")), [pr],
                        timeout=120)

        def vm_version(what):
            r = subprocess.run([jcmd, str(self.pid), "VM.version"], capture_output=True,
                               timeout=120)
            if r.returncode != 0 or b"OpenJDK" not in r.stdout:
                raise Fail("jcmd VM.version %s: %r %r" % (what, r.stdout[-200:], r.stderr[-300:]))
        vm_version("before")
        if self.opts.no_ckpt:
            open(self.p("stop"), "w").close()
            return self.check_result(self.wait_exit(pr, "the JVM"), "the JVM")
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        perf = "/tmp/hsperfdata_%s/%d" % (pwd.getpwuid(os.getuid()).pw_name, self.pid)
        subprocess.run([jcmd, "-l"], capture_output=True, timeout=120)
        self.vlog("hsperfdata file %s after jcmd -l" % ("still there" if os.path.exists(perf)
                                                        else "removed"))
        counts = [len(open(self.p("count%d" % i)).read().split()) for i in range(3)]
        rp = self.restart(self.p("img"), "restart")
        self.wait_until("the counters going on", lambda: all(
            len(open(self.p("count%d" % i)).read().split()) > counts[i] + 5 for i in range(3)),
            [rp], timeout=60)
        vm_version("after the restart")
        open(self.p("stop"), "w").close()
        self.wait_all([rp], EXIT_TIMEOUT, "the restored JVM")
        self.check_result(rp.returncode, "ckpt restart (the JVM)")

    def flow_http_server(self):
        """python3 -m http.server on 127.0.0.1 at a free port, serving the
        test's directory: it answers before, and after checkpoint --kill
        and restart, a GET of a file on a new connection; a GET begun while
        the server is down (its SYN dropped by ckpt's network lock, not
        refused) is answered after the restart; the restored server holds
        as many sockets as the original once they are answered."""
        port = self.free_port()
        with open(self.p("hello.txt"), "w") as f:
            f.write("hello from http.server\n" * 100)
        pr = self.start_server([self.opts.python, "-m", "http.server", "--bind", "127.0.0.1",
                                "--directory", self.dir, str(port)], port)

        def get():
            with socket.create_connection(("127.0.0.1", port), timeout=30) as c:
                c.sendall(b"GET /hello.txt HTTP/1.0\r\nHost: x\r\n\r\n")
                data = b""
                while True:
                    d = c.recv(65536)
                    if not d:
                        break
                    data += d
            if not data.startswith(b"HTTP/1.0 200") or \
                    not data.endswith(b"hello from http.server\n" * 100):
                raise Fail("http.server answered %r" % data[:200])
        get()
        # its listener alone, once the served connection's socket is closed
        # (the client may see the end before the handler closes it)
        socks = 1
        self.wait_until("http.server to close the served connection",
                        lambda: self.sockets_of(self.pid) == socks, [pr], timeout=20)

        def held():
            self.wait_until("http.server to hold %d socket(s) as before" % socks,
                            lambda: self.sockets_of(self.pid) == socks, [], timeout=20)
        down = self.DownCall("a GET", get)
        rp = pr if self.opts.no_ckpt else \
            self.tcp_cycles(pr, port, lambda: (down.check(), get(), held()),
                            while_down=down.start)
        os.kill(self.pid, signal.SIGINT)
        self.wait_all([rp], EXIT_TIMEOUT, "http.server after SIGINT")

    def flow_node(self):
        """real_node.js, Node.js's HTTP server on 127.0.0.1 at a free port
        with a worker thread and a timer counting: a keep-alive connection
        of the runner's asks GET /count before, and after checkpoint --kill
        and restart (twice in twice mode) on the same connection, and a new
        connection too; the worker's and the timer's counts go on growing
        after the restart (the threads run), the served count goes on from
        where it was, the pid is the same."""
        node = shutil.which("node") or shutil.which("nodejs")
        if not node:
            raise Skip("node not installed")
        port = self.free_port()
        pr = self.start_server([node, os.path.join(HERE, "real_node.js"), str(port)], port)
        held = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        last = {}

        def count(conn=None):
            c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/count")
            r = c.getresponse()
            body = r.read().decode()
            if conn is None:
                c.close()
            m = re.fullmatch(r"worker (\d+) timer (\d+) served (\d+) pid (\d+)\n", body)
            if r.status != 200 or not m:
                raise Fail("node answered %s %r" % (r.status, body))
            w, t, s, p = (int(x) for x in m.groups())
            if p != self.pid:
                raise Fail("node says pid %d, want %d" % (p, self.pid))
            if last and s <= last["s"]:
                raise Fail("node's served count went from %d to %d" % (last["s"], s))
            last.update(w=w, t=t, s=s)
            return w, t

        def grows():
            """the worker thread and the timer run: both counts grow"""
            w0, t0 = count(held)
            self.wait_until("node's worker thread and timer to count on",
                            lambda: all(a > b for a, b in zip(count(held), (w0, t0))),
                            [], timeout=30)
            count()
        self.wait_until("node's worker thread to start counting", lambda: count(held)[0] > 0,
                        [pr], timeout=30)
        grows()
        rp = pr if self.opts.no_ckpt else self.tcp_cycles(pr, port, grows, conns=1)
        held.close()
        os.kill(self.pid, signal.SIGINT)
        self.wait_all([rp], EXIT_TIMEOUT, "node after SIGINT")

    def flow_dbus(self):
        """dbus-daemon --session on a unix socket of the test's directory
        (it holds a NETLINK_AUDIT socket to log with): before and after
        checkpoint --kill and restart (twice in twice mode), dbus-send from
        outside on a new connection asks its bus id (the same after: the
        daemon's own state) and its names (the bus itself)."""
        daemon, send = shutil.which("dbus-daemon"), shutil.which("dbus-send")
        if not daemon or not send:
            raise Skip("dbus-daemon or dbus-send not installed")
        bus = "unix:path=" + self.p("bus")
        self.t = dict(self.t, argv=[daemon, "--session", "--nofork", "--address=" + bus])
        pr = self.start()
        self.pid = pr.pid
        self.wait_until("dbus-daemon's socket", lambda: os.path.exists(self.p("bus")), [pr],
                        timeout=30)

        def ask(method):
            r = subprocess.run([send, "--bus=" + bus, "--print-reply",
                                "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                "org.freedesktop.DBus." + method],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                raise Fail("dbus-send %s: %s" % (method, r.stderr.strip()))
            return r.stdout
        bus_id = re.search(r'string "(\w+)"', ask("GetId")).group(1)

        def same():
            got = re.search(r'string "(\w+)"', ask("GetId")).group(1)
            if got != bus_id:
                raise Fail("the bus id is %s after the restart, was %s" % (got, bus_id))
            if '"org.freedesktop.DBus"' not in ask("ListNames"):
                raise Fail("ListNames does not list the bus")
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=same)
        same()
        os.kill(self.pid, signal.SIGTERM)
        self.wait_all([rp], EXIT_TIMEOUT, "dbus-daemon after SIGTERM")

    def flow_gpg_agent(self):
        """gpg-agent --daemon under a supervisor (a python3 that is its
        parent's subreaper, as a session manager is): the agent listens on
        four unix sockets in its home and watches that directory by inotify,
        shutting down if its socket's name is removed. checkpoint --kill of
        the supervisor's tree and restart (twice in twice mode): the same
        agent answers on its socket, and stays (the restart's rebind of its
        sockets is not an event it sees)."""
        agent, connect = shutil.which("gpg-agent"), shutil.which("gpg-connect-agent")
        if not agent or not connect:
            raise Skip("gpg-agent (gpg-agent, gpg) not installed")
        home = self.p("gnupg")
        os.mkdir(home, 0o700)
        sup = ("import ctypes, signal, subprocess, sys\n"
               "ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER\n"
               "subprocess.run(sys.argv[1:], check=True)\n"
               "signal.pause()\n")
        self.t = dict(self.t, argv=[sys.executable, "-c", sup, agent, "--daemon", "--homedir", home,
                                    "--log-file", self.p("agent.log")])
        self.logs.append(self.p("agent.log"))
        pr = self.start()
        self.pid = pr.pid

        def ask():
            r = subprocess.run([connect, "--homedir", home, "--no-autostart", "GETINFO pid",
                                "/bye"], capture_output=True, text=True, timeout=30)
            m = re.search(r"^D (\d+)$", r.stdout, re.M)
            return int(m.group(1)) if m else None
        self.wait_until("gpg-agent's answer", lambda: ask() is not None, [pr], timeout=30)
        apid = ask()

        def same():
            for _ in range(2):  # the second after it has seen what the first woke
                got = ask()
                if got != apid:
                    raise Fail("gpg-agent answers as pid %s after the restart, was %d (log: %s)"
                               % (got, apid, (tail(self.p("agent.log"), 3) or "").strip()))
            if "socket file has been removed" in (tail(self.p("agent.log"), 20) or ""):
                raise Fail("gpg-agent saw its socket file removed")
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=same)
        same()
        os.kill(apid, signal.SIGTERM)
        self.wait_until("gpg-agent's exit", lambda: not pid_alive(apid), [], timeout=30)
        os.kill(self.pid, signal.SIGKILL)
        self.wait_all([rp], EXIT_TIMEOUT, "the supervisor after SIGKILL")

    CHROMIUM_PAGE = (b"<html><head><title>n=0</title></head><body><script>"
                     b"let n = 0; setInterval(() => { document.title = 'n=' + (++n); }, 50);"
                     b"</script></body></html>")

    def flow_chromium(self):
        """Headless Chromium (a browser, a zygote, renderers, a network
        service, GPU and crash handler processes: about ten processes and
        a hundred threads) under a supervisor that is its subreaper, as a
        session manager is, so that its crash handler, which leaves its
        parent, stays in the tree. It shows a page of the runner's whose
        script counts in its title; the runner reads the titles from the
        DevTools HTTP endpoint (a port Chromium picks, in its profile's
        DevToolsActivePort). checkpoint --kill and restart (twice in twice
        mode): the page counts on from where it was, and a new tab, a new
        renderer forked by the restored zygote, loads the page again over
        the restored network service and counts too."""
        chromium = shutil.which("chromium")
        if not chromium:
            raise Skip("chromium not installed")
        page = self.CHROMIUM_PAGE
        handler = type("H", (http.server.BaseHTTPRequestHandler,), {
            "do_GET": lambda h: (h.send_response(200),
                                 h.send_header("Content-Type", "text/html"),
                                 h.send_header("Content-Length", str(len(page))),
                                 h.end_headers(), h.wfile.write(page)),
            "log_message": lambda h, *a: None})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d/" % srv.server_address[1]
        profile = self.p("profile")
        sup = ("import ctypes, signal, subprocess, sys\n"
               "ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER\n"
               "subprocess.run(sys.argv[1:])\n"
               "signal.pause()\n")
        # its home the test's directory (env execs the supervisor: the same pid)
        self.t = dict(self.t, argv=[
            "env", "HOME=" + self.dir, sys.executable, "-c", sup, chromium, "--headless",
            "--no-sandbox", "--disable-gpu",
            "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--user-data-dir=" + profile,
            "--remote-debugging-port=0", url])
        pr = self.start()
        self.pid = pr.pid
        try:
            self.chromium_cycle(pr, profile, url)
        finally:
            srv.shutdown()
            srv.server_close()
            self.kill_descendants(self.pid)

    def chromium_cycle(self, pr, profile, url):
        """flow_chromium once Chromium runs (pr, its supervisor)."""
        port_file = os.path.join(profile, "DevToolsActivePort")
        self.wait_until("Chromium's DevToolsActivePort", lambda: self.size(port_file) > 0, [pr],
                        timeout=60)
        with open(port_file) as f:
            devtools = "http://127.0.0.1:%d/json" % int(f.readline())

        def counts():
            """{tab id: the count in its title} of the tabs showing url"""
            with urllib.request.urlopen(devtools, timeout=30) as r:
                tabs = json.load(r)
            return {t["id"]: int(m.group(1)) for t in tabs
                    if t.get("url") == url and (m := re.fullmatch(r"n=(\d+)", t.get("title", "")))}

        def counting(tab, above):
            self.wait_until("tab %s to count past %d" % (tab, above),
                            lambda: counts().get(tab, -1) > above, [], timeout=60)
        self.wait_until("Chromium's page to count", lambda: any(counts().values()), [pr],
                        timeout=60)
        first = next(iter(counts()))

        def goes_on():
            """the first tab counts on; a new tab loads the page and counts"""
            counting(first, counts()[first])
            req = urllib.request.Request(devtools + "/new?" + url, method="PUT")
            with urllib.request.urlopen(req, timeout=30) as r:
                tab = json.load(r)["id"]
            counting(tab, 2)
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=goes_on)
        goes_on()
        if rp is not pr:
            self.notes.append("%d tabs counting after the restart" % len(counts()))

    def flow_libreoffice(self):
        """LibreOffice headless (oosplash and soffice.bin: a UNO acceptor on
        a named pipe, its single-instance pipe in /tmp, about five threads)
        with a profile in the test's directory. checkpoint --kill and
        restart (twice in twice mode), both pipes there between; then a
        second `soffice --convert-to pdf` hands its document to the
        restored instance through the single-instance pipe (it converts
        nothing itself, so it prints nothing) and the PDF is made. The
        instance quits after such a conversion, as it does unrestored."""
        soffice = shutil.which("soffice")
        if not soffice:
            raise Skip("LibreOffice (libreoffice-writer-nogui) not installed")
        name = "ckpt%d" % os.getpid()
        accept = "/tmp/OSL_PIPE_%d_%s" % (os.getuid(), name)
        profile = "-env:UserInstallation=file://" + self.p("profile")
        with open(self.p("doc.txt"), "w") as f:
            f.write("restored by ckpt\n")
        self.t = dict(self.t, argv=["env", "HOME=" + self.dir, soffice, "--headless", "--norestore",
                                    "--accept=pipe,name=%s;urp;" % name, profile])
        pr = self.start()
        self.pid = pr.pid
        try:
            self.wait_until("LibreOffice's acceptor pipe", lambda: os.path.exists(accept), [pr],
                            timeout=60)

            def office():
                """soffice.bin, the instance, is in the tree"""
                found = [int(d) for d in os.listdir("/proc") if d.isdigit() and
                         self.comm(int(d)) == "soffice.bin" and self.ours(int(d))]
                if len(found) != 1:
                    raise Fail("soffice.bin processes of the test: %s" % found)
                return found[0]

            def listening():
                with open("/proc/net/unix") as f:
                    if accept not in f.read():
                        raise Fail("nothing listens on %s" % accept)
            instance = office()
            rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=listening)
            listening()
            if office() != instance:
                raise Fail("soffice.bin is not pid %d after the restart" % instance)
            r = subprocess.run([soffice, "--headless", profile, "--convert-to", "pdf", "doc.txt"],
                               cwd=self.dir, capture_output=True, text=True, timeout=120,
                               env=dict(os.environ, HOME=self.dir))
            if r.returncode != 0 or "convert" in r.stdout:
                raise Fail("the second soffice did not hand its conversion over (exit %d): %s"
                           % (r.returncode, (r.stdout + r.stderr).strip()[-300:]))
            self.wait_until("doc.pdf", lambda: self.size("doc.pdf") > 0, [], timeout=60)
            with open(self.p("doc.pdf"), "rb") as f:
                if not f.read(5) == b"%PDF-":
                    raise Fail("doc.pdf is not a PDF")
            self.wait_all([rp], EXIT_TIMEOUT, "LibreOffice after the conversion")
        finally:
            self.kill_descendants(self.pid)

    def flow_emacs(self):
        """Emacs as a daemon (`emacs -Q --fg-daemon=SOCKET`, a server socket
        in the test's directory) with a timer that counts every 50 ms and a
        buffer with text in it. checkpoint --kill and restart (twice in
        twice mode); emacsclient, a new connection each time, asks: the
        pid is the same, the buffer holds its text, and the count goes on
        growing (the timer runs). `(kill-emacs)` then ends it (exit 0)."""
        emacs, client = shutil.which("emacs"), shutil.which("emacsclient")
        if not emacs or not client:
            raise Skip("emacs (emacs-nox) not installed")
        sock = self.p("emacs.sock")
        env = dict(os.environ, HOME=self.dir)
        # its home the test's directory (env execs it: the same pid)
        self.t = dict(self.t, argv=[
            "env", "HOME=" + self.dir, emacs, "-Q", "--fg-daemon=" + sock, "--eval",
            "(progn (setq ckpt-n 0) (run-at-time 0 0.05 (lambda () (setq ckpt-n (1+ ckpt-n)))))"])
        pr = self.start()
        self.pid = pr.pid

        def ask(expr):
            r = subprocess.run([client, "-s", sock, "--eval", expr], capture_output=True,
                               text=True, timeout=30, env=env)
            if r.returncode != 0:
                raise Fail("emacsclient %s: %s" % (expr, r.stderr.strip()))
            return r.stdout.strip()
        self.wait_until("Emacs's server socket", lambda: os.path.exists(sock), [pr], timeout=60)
        text = "kept by ckpt %d" % os.getpid()
        ask('(with-current-buffer (get-buffer-create "notes") (insert "%s"))' % text)
        pid = int(ask("(emacs-pid)"))

        def same():
            if int(ask("(emacs-pid)")) != pid:
                raise Fail("Emacs answers as another pid after the restart")
            got = ask('(with-current-buffer "notes" (buffer-string))')
            if got != '"%s"' % text:
                raise Fail("the buffer holds %s after the restart" % got)
            n = int(ask("ckpt-n"))
            self.wait_until("Emacs's timer to count on", lambda: int(ask("ckpt-n")) > n, [],
                            timeout=30)
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=same)
        same()
        subprocess.run([client, "-s", sock, "--eval", "(kill-emacs)"], capture_output=True,
                       timeout=30, env=env)
        self.wait_all([rp], EXIT_TIMEOUT, "Emacs after (kill-emacs)")
        if rp.returncode != 0:
            raise Fail("Emacs exited with status %s after (kill-emacs)" % rp.returncode)

    def kill_descendants(self, root):
        """SIGKILL to root's descendants (tree_pids), the deepest first, then root."""
        for p in reversed(self.tree_pids(root)):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass

    def flow_tail(self):
        """`tail -f grow.txt` (coreutils: poll() on its inotify fd with a
        timeout, restarted through restart_block, which exits on EINTR)
        across checkpoint --kill and restart (twice in twice mode): a line
        appended after each restart is printed, and tail still runs."""
        grow = self.p("grow.txt")
        with open(grow, "w") as f:
            f.write("line 0\n")
        self.t = dict(self.t, argv=["tail", "-f", grow])
        pr = self.start()
        self.pid = pr.pid
        lines = [0]

        def append():
            lines[0] += 1
            with open(grow, "a") as f:
                f.write("line %d\n" % lines[0])
            want = "line %d" % lines[0]
            self.wait_until("tail to print %r" % want,
                            lambda: (tail(self.p("out.log"), 50) or "").endswith(want), [],
                            timeout=30)
        self.wait_until("tail to print line 0",
                        lambda: "line 0" in (tail(self.p("out.log"), 50) or ""), [pr],
                        timeout=30)
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=append)
        append()
        if not pid_alive(self.pid) or rp.poll() is not None:
            raise Fail("tail is gone: %r" % (tail(self.p("out.log"), 5) or ""))
        os.kill(self.pid, signal.SIGTERM)
        self.wait_all([rp], EXIT_TIMEOUT, "tail after SIGTERM")

    def flow_sqlite(self):
        """sqlite3 (the shell) reading `insert into t values(I);` lines from
        a shell loop through a pipe, 50 a second, each its own transaction
        (its rollback journal made, then deleted at commit, sometimes while
        still open when the tree is frozen: O_NOFOLLOW); checkpoint --kill
        and restart (twice in twice mode) once rows are in: the inserts go
        on after, and the rows are exactly 1..N, none lost or repeated (the
        shell waits for the runner's read locks: .timeout)."""
        if not shutil.which("sqlite3"):
            raise Skip("sqlite3 not installed")
        import sqlite3
        db = self.p("db.sqlite")
        loop = ('i=0; while true; do i=$((i+1)); echo "insert into t values($i);"; '
                'sleep 0.02; done | sqlite3 -cmd ".timeout 20000" -cmd "create table t(x integer);" ' + db)
        self.t = dict(self.t, argv=["sh", "-c", loop])
        pr = self.start()
        self.pid = pr.pid

        def rows():
            try:
                with sqlite3.connect(db, timeout=10) as c:
                    return c.execute("select count(*), min(x), max(x) from t").fetchone()
            except sqlite3.OperationalError:
                return (0, None, None)  # not made yet
        self.wait_until("20 rows", lambda: rows()[0] >= 20, [pr], timeout=30)

        def more():
            n = rows()[0]
            self.wait_until("20 more rows", lambda: rows()[0] >= n + 20, [], timeout=30)
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr, between=more)
        more()
        # the shell loop (a child sh of the root) ends: sqlite3 reads the end
        # of its input and exits, and so does the root
        with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
            kids = [int(k) for k in f.read().split()]
        loops = [k for k in kids if self.comm(k) == "sh"]
        if not loops or not any(self.comm(k) == "sqlite3" for k in kids):
            raise Fail("the root's children %s are not the loop and sqlite3" % kids)
        for k in loops:
            os.kill(k, signal.SIGKILL)
        self.wait_all([rp], EXIT_TIMEOUT, "the sqlite3 pipeline after its loop was killed")
        n, lo, hi = rows()
        if (n, lo, hi) != (hi, 1, hi):
            raise Fail("rows: %d, from %s to %s; want 1..N each once" % (n, lo, hi))
        self.notes.append("%d rows" % n)

    def flow_redis(self):
        """redis-server, child of a python3 client holding a connection
        (real_redis.py), checkpointed with its data; the runner talks to
        the server over new connections from outside before and after."""
        if not shutil.which("redis-server"):
            raise Skip("redis-server not installed")
        pr = self.start()
        self.wait_ready()
        self.logs.append(self.p("redis.log"))
        with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
            kids = [int(k) for k in f.read().split()]
        srv = [k for k in kids if self.comm(k) == "redis-server"]
        if not srv:
            raise Fail("no redis-server among the children %s" % kids)
        srv, path = srv[0], self.p("redis.sock")
        if self.mode == B and not self.opts.no_ckpt:
            self.redis_refused(pr, srv, path)
        self.redis_outside(srv, path, ("SET", "outside:before", "from the runner"))

        def outside():
            got = self.redis_outside(srv, path, ("GET", "outside:before"), ("GET", "key:1234"),
                                     ("STRLEN", "big"), ("LINDEX", "list", "99"))
            if got != ["from the runner", "value-1234-" + "x" * 34, ":%d" % MiB, "item-99"]:
                raise Fail("redis, from outside: %r" % got)

        def after(rp):
            outside()
            self.redis_outside(srv, path, ("SET", "outside:after", "from the runner"))
            rc = self.wait_exit(rp, "the redis client")
            self.check_result(rc, "the redis client")

        if self.opts.no_ckpt:
            return after(pr)
        after(self.real_cycle(pr, between=outside))
        if self.mode == R:
            # the server removed its socket file at SHUTDOWN; bound again
            self.expect_gone("the first restored run")
            self.reset_out()
            after(self.restart(self.p("img"), "restart2"))

    def flow_redis_bgsave(self):
        """redis-server (its own root) in the middle of a BGSAVE: its forked
        child, sharing the parent's memory copy-on-write, writes 20,000 keys
        at 500 us a key (rdb-key-save-delay) when the tree is checkpointed
        --kill and restarted (twice in twice mode). The restored child goes
        on from where it was: the save completes (LASTSAVE moves), the
        dump.rdb it renames into place passes redis-check-rdb, and the
        server has its 20,000 keys."""
        server, check = shutil.which("redis-server"), shutil.which("redis-check-rdb")
        if not server or not check:
            raise Skip("redis-server (with redis-check-rdb) not installed")
        path = self.p("redis.sock")
        self.t = dict(self.t, argv=[server, "--port", "0", "--unixsocket", path, "--dir", self.dir,
                                    "--save", "", "--appendonly", "no",
                                    "--enable-debug-command", "yes",
                                    "--rdb-key-save-delay", "500",
                                    "--logfile", self.p("redis.log")])
        self.logs.append(self.p("redis.log"))
        pr = self.start()
        self.pid = pr.pid
        # the socket's file is there from its bind, before its listen (a
        # connect then is refused: seen once on a loaded machine)
        def accepts():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                try:
                    s.connect(path)
                except (FileNotFoundError, ConnectionRefusedError):
                    return False
            return True
        self.wait_until("redis-server's socket", accepts, [pr], timeout=30)
        self.redis_outside(self.pid, path, ("DEBUG", "POPULATE", "20000", "key", "64"))
        before = self.redis_outside(self.pid, path, ("LASTSAVE",))
        # not resp(): the child holds this connection (forked while it was
        # open), so the server's close shows only when the save is done
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(30)
            s.connect(path)
            s.sendall(b"*1\r\n$6\r\nBGSAVE\r\n")
            if not s.recv(64).startswith(b"+Background saving started"):
                raise Fail("redis: BGSAVE did not start")

        def child():
            with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
                return [int(k) for k in f.read().split() if pid_alive(int(k))]
        self.wait_until("the BGSAVE child", lambda: child(), [pr], timeout=30)
        kid = child()[0]
        rp = pr if self.opts.no_ckpt else self.real_cycle(pr)
        # the save (10 s) still runs: the child came back alive with its pid
        if not pid_alive(kid):
            raise Fail("the BGSAVE child %d is not running after the restart" % kid)
        self.wait_until("the end of the BGSAVE",
                        lambda: self.redis_outside(self.pid, path, ("LASTSAVE",)) != before,
                        [rp], timeout=120)
        got = self.redis_outside(self.pid, path, ("DBSIZE",))
        if got != [":20000"]:
            raise Fail("redis: DBSIZE %r after the restart, want 20000" % got)
        r = subprocess.run([check, self.p("dump.rdb")], capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or "RDB looks OK" not in r.stdout:
            raise Fail("redis-check-rdb: %s" % (r.stdout + r.stderr).strip()[-300:])
        self.redis_outside(self.pid, path, ("CONFIG", "SET", "rdb-key-save-delay", "0"))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n")
        self.wait_all([rp], EXIT_TIMEOUT, "redis-server after SHUTDOWN")

    NGINX_CONF = """daemon off;
master_process on;
worker_processes 2;
user nobody nogroup;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    server {{
        listen {listen};
        root {d}/www;
    }}
}}
"""

    def curl(self, sock, name):
        """The body of http://x/NAME over the unix socket sock (curl)."""
        try:
            r = subprocess.run(["curl", "-sS", "--max-time", "20", "--unix-socket", sock,
                                "http://x/" + name], capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            raise Fail("curl of %s hung" % name)
        if r.returncode != 0:
            raise Fail("curl of %s: exit %d: %s" % (name, r.returncode,
                                                     r.stderr.decode(errors="replace").strip()))
        return r.stdout

    @staticmethod
    def proc_uids(pid):
        with open("/proc/%d/status" % pid) as f:
            for ln in f:
                if ln.startswith("Uid:"):
                    return [int(x) for x in ln.split()[1:]]
        return []

    def nginx_workers(self, master):
        """The master's children, each checked to be nobody (every uid)."""
        with open("/proc/%d/task/%d/children" % (master, master)) as f:
            kids = sorted(int(k) for k in f.read().split())
        if len(kids) != 2:
            raise Fail("nginx master %d has %d children, want 2 workers" % (master, len(kids)))
        for k in kids:
            if self.proc_uids(k) != [65534] * 4:
                raise Fail("nginx worker %d has uids %s, not nobody" % (k, self.proc_uids(k)))
        if self.proc_uids(master) != [0] * 4:
            raise Fail("nginx master %d has uids %s, not root" % (master, self.proc_uids(master)))
        return kids

    def flow_nginx(self):
        """nginx as packaged (master as root, 2 workers as user nobody with
        no capabilities), serving files on a unix socket only; config,
        files and socket in the test's directory, made reachable by nobody.
        After each restart curl gets the files again and the workers are
        the same pids, still nobody; at the end SIGQUIT stops it and the
        restart's exit status is nginx's (0)."""
        nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK)
                                          else None)
        if not nginx:
            raise Skip("nginx not installed (Debian package nginx)")
        if not shutil.which("curl"):
            raise Skip("curl not installed (Debian package curl)")
        d = self.dir
        os.chmod(d, 0o755)  # the workers (nobody) read www/
        os.mkdir(self.p("www"), 0o755)
        os.mkdir(self.p("tmp"), 0o755)
        files = {"index.html": b"<p>hello from nginx</p>\n"}
        r = random.Random(9)
        files["big"] = bytes(r.getrandbits(8) for _ in range(300000))
        for name, data in files.items():
            with open(self.p("www", name), "wb") as f:
                f.write(data)
            os.chmod(self.p("www", name), 0o644)
        with open(self.p("nginx.conf"), "w") as f:
            f.write(self.NGINX_CONF.format(d=d, listen="unix:%s/nginx.sock" % d))
        sock = self.p("nginx.sock")
        self.logs += [self.p("error.log"), self.p("nginx.out")]
        pr = self.popen([nginx, "-c", self.p("nginx.conf"), "-p", d], out=self.p("nginx.out"),
                        err=self.p("nginx.out"))
        self.t0 = time.monotonic()
        self.wait_until("nginx's socket", lambda: os.path.exists(sock), [pr])

        def serves(when):
            for name, data in files.items():
                got = self.curl(sock, name)
                if got != data:
                    raise Fail("%s: curl of %s got %d bytes, not the file's %d" % (
                        when, name, len(got), len(data)))

        serves("before")
        workers = self.nginx_workers(pr.pid)

        def after(rp, when):
            serves(when)
            if self.nginx_workers(self.pid) != workers:
                raise Fail("%s: the workers are not the pids %s" % (when, workers))
            serves(when)
            os.kill(self.pid, signal.SIGQUIT)
            self.wait_all([rp], EXIT_TIMEOUT, "nginx after SIGQUIT")
            if rp.returncode != 0:
                raise Fail("%s: nginx ended with status %s" % (when, rp.returncode))

        if self.opts.no_ckpt:
            self.pid = pr.pid
            return after(pr, "natively")
        rp = self.real_cycle(pr, between=lambda: serves("between"))
        after(rp, "after the restart")
        if self.mode == R:
            self.expect_gone("the first restored run")
            after(self.restart(self.p("img"), "restart2"), "after the second restart")

    NGINX_BIG = 50 * MiB
    NGINX_RATE = 5 * MiB

    def nginx_bin(self):
        nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK)
                                          else None)
        if not nginx:
            raise Skip("nginx not installed (Debian package nginx)")
        if not shutil.which("curl"):
            raise Skip("curl not installed (Debian package curl)")
        return nginx

    @staticmethod
    def tcp_listeners(port):
        """How many sockets of this namespace listen on TCP port port."""
        n = 0
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(name) as f:
                for ln in f.readlines()[1:]:
                    fl = ln.split()
                    n += fl[3] == "0A" and int(fl[1].rsplit(":", 1)[1], 16) == port
        return n

    def flow_nginx_tcp(self):
        """nginx as packaged (master as root, 2 workers as nobody), on
        127.0.0.1 at a free port with sendfile on, serving a 50 MB file of
        random bytes to curl (a process of the runner's, outside the tree)
        limited to 5 MB/s; checkpoint --kill and restart once curl has a
        tenth of it (twice mode: again once it got 2 MB more), with only
        ckpt's network lock between them, whose log must say it locked the
        download's connection: curl ends with status 0 (no reset, no
        timeout) and the file is byte-identical; the workers are the same
        pids, still nobody; nginx serves a new request, then SIGQUIT ends
        it with status 0; as many sockets listen on the port as before (one,
        or with reuseport one for each worker). A GET of
        another file begun while nginx is down
        (its SYN dropped by the lock, not refused) is answered after the
        restart."""
        nginx = self.nginx_bin()
        d = self.dir
        os.chmod(d, 0o755)  # the workers (nobody) read www/
        os.mkdir(self.p("www"), 0o755)
        os.mkdir(self.p("tmp"), 0o755)
        big = os.urandom(self.NGINX_BIG)
        with open(self.p("www", "big"), "wb") as f:
            f.write(big)
        os.chmod(self.p("www", "big"), 0o644)
        with open(self.p("www", "small"), "wb") as f:
            f.write(b"small\n" * 1000)
        os.chmod(self.p("www", "small"), 0o644)
        port = self.free_port()
        host = self.t.get("host", "127.0.0.1")
        listen = ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)
        conf = self.NGINX_CONF.format(d=d, listen=listen + self.t.get("listen_opts", ""))
        with open(self.p("nginx.conf"), "w") as f:
            f.write(conf.replace("    access_log", "    sendfile on;\n    access_log", 1))
        self.logs += [self.p("error.log"), self.p("curl.err")]
        pr = self.start_server([nginx, "-c", self.p("nginx.conf"), "-p", d], port, host)

        def forked():
            try:
                return self.nginx_workers(pr.pid)
            except Fail:
                return None
        self.wait_until("nginx's two workers as nobody", forked, [pr])
        workers = self.nginx_workers(pr.pid)
        nlisten = self.tcp_listeners(port)
        if nlisten != (2 if "reuseport" in conf else 1):
            raise Fail("%d listening sockets on port %d" % (nlisten, port))
        url = "http://%s/big" % listen
        cl = self.popen(["curl", "-sS", "--limit-rate", str(self.NGINX_RATE), "--max-time", "120",
                         "-o", self.p("dl"), url], err=self.p("curl.err"))

        def got(k):
            at = self.size("dl")
            self.wait_until("%d more bytes downloaded" % k, lambda: self.size("dl") >= at + k,
                            [cl], timeout=60)

        def small():
            with socket.create_connection((host, port), timeout=30) as c:
                c.sendall(b"GET /small HTTP/1.0\r\nHost: x\r\n\r\n")
                data = b""
                while True:
                    b = c.recv(65536)
                    if not b:
                        break
                    data += b
            if not data.startswith(b"HTTP/1.1 200") or not data.endswith(b"\r\n\r\n" + b"small\n" * 1000):
                raise Fail("nginx answered %r" % data[:200])

        got(self.NGINX_BIG // 10)
        small()
        down = self.DownCall("a GET of another file", small)
        rp = pr
        if not self.opts.no_ckpt:
            rp = self.tcp_cycles(pr, port, lambda: (down.check(), got(2 * MiB)), conns=1,
                                 while_down=down.start)
            at = self.size("dl")
            if at >= self.NGINX_BIG:
                raise Fail("the download had finished at the last restart")
            self.notes.append("restarted at %d%% of the download" % (100 * at // self.NGINX_BIG))
            if self.nginx_workers(self.pid) != workers:
                raise Fail("the workers are not the pids %s" % workers)
            if self.tcp_listeners(port) != nlisten:
                raise Fail("%d listening sockets on port %d after the restart, want %d"
                           % (self.tcp_listeners(port), port, nlisten))
        self.wait_all([cl], 120, "curl")
        self.check_download(cl, big)
        r = subprocess.run(["curl", "-sS", "--max-time", "30", "-o", "/dev/null", "-w",
                            "%{http_code} %{size_download}", url], capture_output=True, timeout=60)
        if r.stdout.decode() != "200 %d" % self.NGINX_BIG:
            raise Fail("a new request got %r: %s" % (r.stdout, r.stderr.decode(errors="replace")))
        os.kill(self.pid, signal.SIGQUIT)
        self.wait_all([rp], EXIT_TIMEOUT, "nginx after SIGQUIT")
        if rp.returncode != 0:
            raise Fail("nginx ended with status %s" % rp.returncode)

    PG_BIN = "/usr/lib/postgresql/15/bin"

    def psql(self, sql):
        """psql -At -c sql as user postgres over the test's socket: the
        output lines; then waits until the server process that served it
        has gone (its socket had a peer outside the tree)."""
        argv = [os.path.join(self.PG_BIN, "psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1"] + \
            getattr(self, "pg_where", ["-h", self.p("pgsock")]) + \
            ["-U", "postgres", "-d", "postgres", "-c", sql]
        try:
            r = subprocess.run(argv, capture_output=True, timeout=60, cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise Fail("psql %r hung" % sql[:60])
        if r.returncode != 0:
            raise Fail("psql %r: exit %d: %s" % (sql[:60], r.returncode,
                                                  r.stderr.decode(errors="replace").strip()))
        held = getattr(self, "pg_held", 0)  # backends of connections held across
        self.wait_until("the server process of psql to exit",
                        lambda: len(self.pg_backends(self.pid)) <= held, [], timeout=20)
        return r.stdout.decode().splitlines()

    def pg_backends(self, master):
        """The postmaster's children that serve a client connection."""
        try:
            with open("/proc/%d/task/%d/children" % (master, master)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            return []
        out = []
        for k in kids:
            try:
                with open("/proc/%d/cmdline" % k, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if cmd.startswith(b"postgres: postgres postgres"):
                out.append(k)
        return out

    def pg_huge(self):
        """For a huge=True test: 2 MiB huge pages reserved for the time of
        the test (vm.nr_hugepages raised by 48; the old value in
        hugepages.old, written back by cleanup) and huge_pages=on; else
        nothing."""
        if not self.t.get("huge"):
            return []
        try:
            with open("/proc/sys/vm/nr_hugepages") as f:
                old = int(f.read())
            with open(self.p("hugepages.old"), "w") as f:
                f.write("%d\n" % old)
            with open("/proc/sys/vm/nr_hugepages", "w") as f:
                f.write("%d\n" % (old + 48))
            with open("/proc/sys/vm/nr_hugepages") as f:
                got = int(f.read())
        except (OSError, ValueError) as e:
            raise Skip("cannot reserve huge pages: %s" % e)
        if got < old + 24:
            raise Skip("no huge pages to be had (vm.nr_hugepages %d)" % got)
        return ["-c", "huge_pages=on"]

    def pg_check_huge(self, when):
        """The postmaster's shared memory is hugetlb (2 MiB pages)."""
        with open("/proc/%d/smaps" % self.pid) as f:
            text = f.read()
        blocks = [b for b in text.split("\n") if "anon_hugepage" in b]
        if not blocks:
            raise Fail("%s: the postmaster has no hugetlb mapping (huge_pages=on)" % when)
        at = text.index(blocks[0])
        if "KernelPageSize:     2048 kB" not in text[at:at + 2000].split("VmFlags")[0]:
            raise Fail("%s: the postmaster's hugetlb mapping is not of 2 MiB pages" % when)

    def pg_start(self, conf, sockname):
        """initdb of a cluster in the test's directory, then the postmaster
        with the settings conf (-c NAME=VALUE...), as user postgres (or, for
        a ct test, pid 1 of `ckpt run` dropped to postgres by setpriv);
        returns once it accepts connections (on its unix socket sockname in
        pgsock/, if given, and at self.pg_where), self.pid set."""
        for prog in ("postgres", "initdb", "psql"):
            if not os.access(os.path.join(self.PG_BIN, prog), os.X_OK):
                raise Skip("%s/%s not installed (Debian packages postgresql-15, "
                           "postgresql-client-15)" % (self.PG_BIN, prog))
        os.chmod(self.dir, 0o755)  # user postgres works in data/ and pgsock/
        data, sock = self.p("data"), self.p("pgsock")
        for d, mode in ((data, 0o700), (sock, 0o755)):
            os.mkdir(d, mode)
            os.chown(d, PG_UID(), PG_GID())
        as_pg = dict(user="postgres", group="postgres", extra_groups=[])
        self.logs += [self.p("initdb.log"), self.p("pg.log")]
        ini = self.popen([os.path.join(self.PG_BIN, "initdb"), "-D", data, "-A", "trust", "-U",
                          "postgres", "--no-sync", "-E", "UTF8", "--locale=C"],
                         out=self.p("initdb.log"), err=self.p("initdb.log"), **as_pg)
        self.wait_all([ini], 120, "initdb")
        if ini.returncode != 0:
            raise Fail("initdb exit %d" % ini.returncode)
        argv = [os.path.join(self.PG_BIN, "postgres"), "-D", data,
                "-c", "shared_buffers=16MB", "-c", "max_connections=10"] + list(conf)
        ct = self.t.get("ct")
        if ct:
            # pid 1 of `ckpt run`, dropped to postgres by setpriv (which execs)
            setpriv = shutil.which("setpriv")
            if not setpriv:
                raise Skip("setpriv (util-linux) not installed")
            pidfile = self.p("run.pid")
            pr = self.popen([self.opts.ckpt, "run", "--pidfile", pidfile, "--", setpriv,
                             "--reuid=postgres", "--regid=postgres", "--clear-groups"] + argv,
                            out=self.p("pg.log"), err=self.p("pg.log"))
            self.wait_until("ckpt run's pidfile", lambda: self.size("run.pid") > 0, [pr])
            with open(pidfile) as f:
                self.pid = int(f.read())
        else:
            pr = self.popen(argv, out=self.p("pg.log"), err=self.p("pg.log"), **as_pg)
            self.pid = pr.pid
        self.t0 = time.monotonic()
        if sockname:
            self.wait_until("the postmaster's socket",
                            lambda: os.path.exists(os.path.join(sock, sockname)), [pr])
        where = getattr(self, "pg_where", ["-h", sock])
        self.wait_until("the database to accept connections",
                        lambda: subprocess.run([os.path.join(self.PG_BIN, "pg_isready"), "-q"]
                                               + where, capture_output=True).returncode == 0,
                        [pr], timeout=60)
        # its interlock segment, for cleanup() to remove if the test fails
        with open(os.path.join(data, "postmaster.pid")) as f:
            key, shmid = f.read().splitlines()[6].split()
        with open(self.p("shm.id"), "w") as f:
            f.write("%s %s\n" % (shmid, key))
        return pr

    def flow_postgres(self):
        """PostgreSQL 15: a cluster made by initdb in the test's directory,
        the postmaster started directly as user postgres (root dropped to
        it: no capabilities), on a unix socket of its own only
        (listen_addresses=''); 1000 rows inserted with psql; checkpointed
        --kill (its SysV interlock segment removed with the tree: the image
        holds it), restarted on the same host; the rows are counted and a
        row is inserted; SIGINT (fast shutdown) ends it cleanly."""
        ct = self.t.get("ct")
        pr = self.pg_start(["-c", "listen_addresses=", "-c",
                            "unix_socket_directories=" + self.p("pgsock")] + self.pg_huge(),
                           ".s.PGSQL.5432")
        if self.t.get("huge"):
            self.pg_check_huge("before")
        self.psql("CREATE TABLE t (i int PRIMARY KEY, s text)")
        self.psql("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g")

        def count(when, want):
            got = self.psql("SELECT count(*), sum(i) FROM t")
            if got != ["%d|%d" % (want, want * (want + 1) // 2)]:
                raise Fail("%s: count and sum of t: %r, want %d rows" % (when, got, want))

        count("before", 1000)

        def stop(rp, when):
            os.kill(self.pid, signal.SIGINT)
            self.wait_all([rp], EXIT_TIMEOUT, "postgres after SIGINT (fast shutdown)")
            if rp.returncode != 0:
                raise Fail("%s: postgres ended with status %s" % (when, rp.returncode))
            with open(self.p("pg.log"), "rb") as f:
                if b"database system is shut down" not in f.read():
                    raise Fail("%s: the log does not say the database was shut down" % when)

        if self.opts.no_ckpt:
            self.psql("INSERT INTO t VALUES (1001, 'after')")
            count("natively", 1001)
            return stop(pr, "natively")
        if ct:
            self.checkpoint(self.p("img"), "ckpt", reap=[pr])
            self.wait_all([pr], 10, "ckpt run, after its container was killed")
            rp = self.restart(self.p("img"), "restart", same_pid=False)
            if self.mode == T:
                count("between", 1000)
                self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
                self.wait_all([rp], 10, "the first ckpt restart")
                rp = self.restart(self.p("img2"), "restart2", same_pid=False)
        else:
            rp = self.real_cycle(pr, between=lambda: count("between", 1000))
        count("after the restart", 1000)
        if self.t.get("huge"):
            self.pg_check_huge("after the restart")
        self.psql("INSERT INTO t VALUES (1001, 'after')")
        count("after the insert", 1001)
        stop(rp, "after the restart")

    class PgConn:
        """A PostgreSQL client on one TCP connection, the simple query
        protocol (v3) and trust authentication: query() returns the rows
        (tuples of str) or raises Fail with the server's error."""

        def __init__(self, port, user="postgres"):
            self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
            self.f = self.s.makefile("rb")
            body = struct.pack("!I", 196608) + b"user\0%s\0database\0postgres\0\0" % \
                user.encode()
            self.s.sendall(struct.pack("!I", len(body) + 4) + body)
            self.until_ready()

        def msg(self):
            hdr = self.f.read(5)
            if len(hdr) < 5:
                raise ConnectionError("end of file from the server")
            t, n = hdr[:1], struct.unpack("!I", hdr[1:])[0]
            return t, self.f.read(n - 4)

        def until_ready(self):
            rows, err = [], None
            while True:
                t, body = self.msg()
                if t == b"Z":
                    if err:
                        raise Fail("postgres: %s" % err)
                    return rows
                if t == b"E":
                    err = b"; ".join(f[1:] for f in body.split(b"\0") if f[:1] in (b"M", b"C"))
                    err = err.decode(errors="replace")
                elif t == b"R" and struct.unpack("!I", body[:4])[0] != 0:
                    raise Fail("postgres asks for authentication %d" % struct.unpack("!I", body[:4]))
                elif t == b"D":
                    k, at, row = struct.unpack("!H", body[:2])[0], 2, []
                    for _ in range(k):
                        n = struct.unpack("!i", body[at:at + 4])[0]
                        row.append(None if n < 0 else body[at + 4:at + 4 + n].decode())
                        at += 4 + max(n, 0)
                    rows.append(tuple(row))

        def query(self, sql):
            q = sql.encode() + b"\0"
            self.s.sendall(b"Q" + struct.pack("!I", len(q) + 4) + q)
            return self.until_ready()

        def close(self):
            try:
                self.s.sendall(b"X\0\0\0\4")
            except OSError:
                pass
            self.f.close()
            self.s.close()

    def flow_postgres_tcp(self):
        """PostgreSQL 15 set up as in real_postgres, but on TCP only
        (listen_addresses=127.0.0.1, a free port, no unix socket). A client
        of the runner's (the protocol spoken by PgConn, in a thread) holds
        one connection and inserts a row and reads it back (INSERT ...
        RETURNING) in a loop, checking each reply, across checkpoint --kill
        and restart with only ckpt's network lock between them (its log
        must say it locked that connection); its backend is the same pid
        after the restart; psql on new connections counts the rows; at the
        end the held connection counts exactly the rows it was told were
        inserted and SIGINT (fast shutdown) ends postgres cleanly. A second
        held connection sends SELECT 42 while the server is down (dropped
        by the lock, retransmitted): answered after the restart."""
        port = self.free_port()
        self.pg_where = ["-h", "127.0.0.1", "-p", str(port)]
        pr = self.pg_start(["-c", "listen_addresses=127.0.0.1", "-c", "port=%d" % port,
                            "-c", "unix_socket_directories="], None)
        self.psql("CREATE TABLE t (i int PRIMARY KEY, s text)")
        self.psql("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 1000) g")
        conn, probe = self.PgConn(port), self.PgConn(port)
        self.pg_held = 2

        def select42():
            if probe.query("SELECT 42") != [("42",)]:
                raise Fail("SELECT 42 did not answer 42")
        down = self.DownCall("a SELECT on a second connection", select42)
        select42()
        backend = conn.query("SELECT pg_backend_pid()")[0][0]
        if int(backend) not in self.pg_backends(self.pid):
            raise Fail("the held connection's backend %s is not among the postmaster's "
                       "children serving a client (%s)" % (backend, self.pg_backends(self.pid)))
        state = {"n": 0, "err": None, "stop": False}

        def loop():
            try:
                while not state["stop"]:
                    i = 1001 + state["n"]
                    got = conn.query("INSERT INTO t VALUES (%d, 'loop') RETURNING i, s" % i)
                    if got != [(str(i), "loop")]:
                        raise Fail("insert %d: got %r" % (i, got))
                    state["n"] += 1
            except Exception as e:  # reported by the flow
                state["err"] = e
        th = threading.Thread(target=loop, daemon=True)
        th.start()

        def progress():
            n = state["n"]
            self.wait_until("50 more inserts", lambda: state["n"] >= n + 50 or state["err"],
                            [], timeout=60)
            if state["err"]:
                raise Fail("the held connection: %r" % (state["err"],))
            got = self.psql("SELECT count(*) >= %d FROM t" % (1000 + n))
            if got != ["t"]:
                raise Fail("psql counts fewer than %d rows" % (1000 + n))

        try:
            progress()
            if self.opts.no_ckpt:
                rp = pr
            else:
                rp = self.tcp_cycles(pr, port, lambda: (down.check(), progress()), conns=2,
                                     while_down=down.start)
        finally:
            state["stop"] = True
            th.join(60)
        if state["err"]:
            raise Fail("the held connection: %r" % (state["err"],))
        n = state["n"]
        got = conn.query("SELECT count(*), pg_backend_pid() FROM t")
        if got != [(str(1000 + n), backend)]:
            raise Fail("the held connection counts %r, want %d rows and backend %s"
                       % (got, 1000 + n, backend))
        self.notes.append("%d inserts" % n)
        conn.close()
        probe.close()
        self.pg_held = 0
        os.kill(self.pid, signal.SIGINT)
        self.wait_all([rp], EXIT_TIMEOUT, "postgres after SIGINT (fast shutdown)")
        if rp.returncode != 0:
            raise Fail("postgres ended with status %s" % rp.returncode)
        with open(self.p("pg.log"), "rb") as f:
            if b"database system is shut down" not in f.read():
                raise Fail("the log does not say the database was shut down")

    def flow_external(self):
        """A unix socket of the tree connected to a server of the runner's,
        outside the tree (NAME_dgram: a dgram one): refused without
        --external unix, checkpointed with it; restored, the socket is a new
        connection to the server. In basic mode, a restart while the
        server is away fails first, naming the socket and the path and
        leaving nothing behind (no process, no socket file of the image)."""
        dgram = self.t["name"].endswith("_dgram")
        srv = ExtServer(self.p("srv-dg.sock" if dgram else "srv.sock"), dgram)
        try:
            if self.opts.no_ckpt:
                return self.native()
            self.external_cycle(srv, dgram)
        finally:
            srv.stop()

    def external_cycle(self, srv, dgram):
        ext = ["--external", "unix"]
        pr = self.start()
        self.wait_ready()
        if self.mode == B:
            rc, err = self.checkpoint(self.p("refused"), "refused", reap=[pr], expect_ok=False,
                                      kill=False)
            rx = r"\bpid %d\b.*\bfd 5\b.*unix.*peer outside.*%s.*--external unix" % (
                self.pid, re.escape(srv.path))
            if rc == 0 or rc >= 128 or not re.search(rx, err):
                raise Fail("checkpoint without --external: exit %d, %r, want /%s/"
                           % (rc, err.strip()[-300:], rx))
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr], extra=ext)
        if self.mode == B:
            srv.stop()
            r = self.run_ckpt(["restart", img, "--log", self.p("away.log")], timeout=60)
            self.logs.append(self.p("away.log"))
            self.expect_error(r, "restart with the server away", must=["socket:[", srv.path])
            if pid_exists(self.pid):
                raise Fail("pid %d exists after the failed restart" % self.pid)
            if dgram and os.path.lexists(self.p("cli-dg.sock")):
                raise Fail("the failed restart left cli-dg.sock behind")
            srv.start()
        clients = srv.clients
        rp = self.restart(img, "restart")
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp], extra=ext)
            self.wait_all([rp], 10, "the first ckpt restart, after its process was killed")
            rp = self.restart(self.p("img2"), "restart2")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")
        if not dgram and srv.clients <= clients:
            raise Fail("the server saw no new client")
        if dgram and b"after" not in srv.got:
            raise Fail("the server did not get \"after\": %r" % srv.got)

    # --- cgroups -------------------------------------------------------

    def cg_setup(self, leaf):
        """A cgroup of the test's own under the runner's (removed by
        cg_cleanup), with a leaf cgroup in it and limits set there:
        cgroup.max.descendants always, memory.max, pids.max, hugetlb.2MB.max
        where those controllers can be enabled here. Returns the limits."""
        where = cg_where()
        if not where:
            raise Skip("no cgroup2 mount")
        mnt, own = where
        self.cg_mnt = mnt
        self.cg_base_rel = "%s/ckpt-e2e-%d-%s" % (own, os.getpid(), self.t["name"])
        self.cg_dirs = []
        base = mnt + self.cg_base_rel
        with open(mnt + own + "/cgroup.controllers") as f:
            avail = f.read().split()
        ctrls = []
        for c in ("memory", "pids", "hugetlb"):
            if c not in avail:
                continue
            try:
                with open(mnt + own + "/cgroup.subtree_control", "w") as f:
                    f.write("+" + c)
                ctrls.append(c)
            except OSError:
                pass
        path = self.cg_base_rel
        for part in [""] + leaf.split("/"):
            path = path + ("/" + part if part else "")
            os.mkdir(mnt + path)
            self.cg_dirs.append(mnt + path)
            if path != self.cg_base_rel + "/" + leaf:
                for c in ctrls:
                    with open(mnt + path + "/cgroup.subtree_control", "w") as f:
                        f.write("+" + c)
        self.cg_leaf_rel = path
        limits = {"cgroup.max.descendants": "3"}
        if "memory" in ctrls:
            limits["memory.max"] = "67108864"
        if "pids" in ctrls:
            limits["pids.max"] = "50"
        if os.path.exists(mnt + path + "/hugetlb.2MB.max"):
            limits["hugetlb.2MB.max"] = "4194304"
        for k, v in limits.items():
            with open(mnt + path + "/" + k, "w") as f:
                f.write(v)
        self.vlog("cgroup %s, limits %s" % (path, limits))
        return limits

    def cg_rmdir(self, d, timeout=10):
        """Removes a cgroup once its killed tasks are gone."""
        deadline = time.monotonic() + timeout
        while os.path.isdir(d):
            try:
                os.rmdir(d)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def cg_cleanup(self):
        for d in reversed(getattr(self, "cg_dirs", [])):
            for sub, _, _ in sorted(os.walk(d), key=lambda w: -len(w[0])) if os.path.isdir(d) else ():
                try:
                    with open(sub + "/cgroup.procs") as f:
                        pids = [int(x) for x in f.read().split()]
                    with open(sub + "/cgroup.kill", "w") as f:
                        f.write("1") if pids else None
                except OSError:
                    pass
                try:
                    self.cg_rmdir(sub)
                except OSError as e:
                    self.vlog("cannot remove %s: %s" % (sub, e))

    def flow_cgroup(self):
        """A process moved by the runner into a cgroup it made (limits set),
        checkpointed --kill; the cgroup kept, or removed meanwhile (restart
        makes it again with its limits), or made impossible to make (the
        restart fails naming the task and the path, and removes what it
        made); or refused: ckpt in a cgroup namespace the task is outside."""
        try:
            self.cgroup_case(self.t["cg"])
        finally:
            self.cg_cleanup()

    def cgroup_container(self):
        """`ckpt run --cgroup NAME` with limits: the container's cgroup
        (and cgroup namespace: it reads "/") made again at restart, with
        its limits, after `ckpt run` removed it."""
        self.cg_setup("job")
        mnt = self.cg_mnt
        name = self.cg_base_rel.rsplit("/", 1)[1] + "-ct"
        rel = self.cg_base_rel.rsplit("/", 1)[0] + "/" + name
        self.cg_dirs.insert(0, mnt + rel)
        limits = {"cgroup.max.descendants": "5"}
        opts = []
        with open(mnt + self.cg_base_rel.rsplit("/", 1)[0] + "/cgroup.subtree_control") as f:
            on = f.read().split()
        if "memory" in on:
            opts += ["--memory-max", "64M"]
            limits["memory.max"] = "67108864"
        if "pids" in on:
            opts += ["--pids-max", "40"]
            limits["pids.max"] = "40"
        sets = "cgroup.max.descendants=5"
        if "hugetlb" in on:
            sets += ",hugetlb.2MB.max=6291456"
            limits["hugetlb.2MB.max"] = "6291456"
        args = ["/", mnt + rel] + ["%s=%s" % kv for kv in sorted(limits.items())]
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[self.opts.ckpt, "run", "--cgroup", name, "--cgroup-set", sets]
                        + opts + ["--pidfile", pidfile, "--"], args=args)
        self.wait_container(pr, pidfile)
        self.checkpoint(self.p("img"), "ckpt", reap=[pr])
        self.wait_all([pr], 10, "ckpt run, after its container was killed")
        if os.path.exists(mnt + rel):
            raise Fail("ckpt run left its cgroup %s" % rel)
        rp = self.restart(self.p("img"), "restart", same_pid=False)
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
            self.wait_all([rp], 10, "the first ckpt restart")
            self.cg_rmdir(mnt + rel)
            rp = self.restart(self.p("img2"), "restart2", same_pid=False)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def cgroup_unpriv(self):
        """User nobody checkpoints its process in a cgroup root made (limits
        saved), root removes the cgroup, nobody restarts: it may not make
        cgroups, so the process runs on in ckpt's cgroup, and the restart
        warns naming the path and the limits lost."""
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("setpriv (util-linux) not installed")
        self.cg_setup("job")
        mnt, rel = self.cg_mnt, self.cg_leaf_rel
        own = self.cg_base_rel.rsplit("/", 1)[0] or "/"
        os.chmod(self.dir, 0o777)
        with open(self.p("out.log"), "w"):
            pass
        os.chown(self.p("out.log"), 65534, 65534)
        drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        wrapper = self.p("ckpt-as-nobody")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec %s %s \"$@\"\n" % (" ".join(drop),
                                                         os.path.abspath(self.opts.ckpt)))
        os.chmod(wrapper, 0o755)
        # a container (nobody's ckpt run: a user namespace), so that nobody
        # may restart it with its pids; nobody may not make its cgroup
        pidfile = self.p("run.pid")
        pr = self.start(prefix=[wrapper, "run", "--pidfile", pidfile, "--"],
                        args=[own, mnt + own])
        self.wait_container(pr, pidfile)
        with open(mnt + rel + "/cgroup.procs", "w") as f:
            f.write(str(self.pid))
        saved = self.opts.ckpt
        self.opts.ckpt = wrapper
        try:
            self.checkpoint(self.p("img"), "ckpt", reap=[pr])
            self.wait_all([pr], 10, "ckpt run, after its container was killed")
            self.cg_rmdir(mnt + rel)
            rp = self.restart(self.p("img"), "restart", same_pid=False)
        finally:
            self.opts.ckpt = saved
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")
        with open(self.p("restart.log")) as f:
            log = f.read()
        want = "pid 1: cgroup %s cannot be made or joined (Permission denied)" % rel
        if want not in log or "without the cgroup's limits" not in log:
            raise Fail("restart log does not warn %r: %s" % (want, log.strip()[-300:]))

    def cgroup_v1(self):
        """A process in a cgroup v1 hierarchy (pids) other than ckpt's: v1
        membership is not saved, so checkpoint refuses it by name."""
        v1 = None
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fl = line.split()
                i = fl.index("-")
                if fl[i + 1] == "cgroup" and "pids" in fl[i + 3].split(","):
                    v1 = fl[4]
        if not v1:
            raise Skip("no cgroup v1 pids hierarchy")
        with open("/proc/self/cgroup") as f:
            own = [l.split(":", 2)[2].strip() for l in f if ":pids:" in l][0].rstrip("/")
        d = "%s%s/ckpt-e2e-%d-v1" % (v1, own, os.getpid())
        os.mkdir(d)
        try:
            pr = self.start(args=["/", "/"])
            self.wait_ready()
            with open(d + "/cgroup.procs", "w") as f:
                f.write(str(self.pid))
            rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
            rx = r"pid %d: cgroup v1 '\d+:pids:%s/ckpt-e2e-\d+-v1' is not ckpt's own" % (
                self.pid, re.escape(own))
            if rc == 0 or not re.search(rx, err):
                raise Fail("checkpoint exit %d, message %r does not match /%s/"
                           % (rc, err.strip(), rx))
            with open(v1 + own + "/cgroup.procs", "w") as f:
                f.write(str(self.pid))
            rc = self.wake_and_wait(pr, "the original")
            self.check_result(rc, "the original")
        finally:
            if pid_alive(self.pid or 0):
                try:
                    with open(v1 + own + "/cgroup.procs", "w") as f:
                        f.write(str(self.pid))
                except OSError:
                    pass
            self.cg_rmdir(d)

    def cgroup_case(self, case):
        if case == "v1":
            return self.cgroup_v1()
        if case == "container":
            return self.cgroup_container()
        if case == "unpriv":
            return self.cgroup_unpriv()
        leaf = "mid/job" if case == "fail" else "job"
        limits = self.cg_setup(leaf)
        mnt, rel = self.cg_mnt, self.cg_leaf_rel
        args = [rel, mnt + rel] + ["%s=%s" % kv for kv in sorted(limits.items())]
        if self.opts.no_ckpt:
            return self.native()
        trel = rel + "/t1"
        if case == "threaded":
            args.append("thread=" + trel)
        pr = self.start(args=args)
        self.wait_ready()
        with open(mnt + rel + "/cgroup.procs", "w") as f:
            f.write(str(self.pid))
        if case == "threaded":
            # a threaded cgroup below the process's, its second thread in it
            os.mkdir(mnt + trel)
            self.cg_dirs.append(mnt + trel)
            with open(mnt + trel + "/cgroup.type", "w") as f:
                f.write("threaded")
            with open(self.p("tid")) as f:
                tid = f.read().strip()
            with open(mnt + trel + "/cgroup.threads", "w") as f:
                f.write(tid)
        if case == "refuse":
            side = mnt + self.cg_base_rel + "/side"
            os.mkdir(side)
            self.cg_dirs.append(side)
            pre = ["sh", "-c", 'echo $$ > %s/cgroup.procs && exec unshare -C "$@"' % side, "sh"]
            rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False,
                                      prefix=pre)
            rx = r"pid %d: its cgroup /\.\./job is outside ckpt's cgroup namespace" % self.pid
            if rc == 0 or not re.search(rx, err):
                raise Fail("checkpoint exit %d, message %r does not match /%s/"
                           % (rc, err.strip(), rx))
            rc = self.wake_and_wait(pr, "the original")
            return self.check_result(rc, "the original")
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        if case == "threaded":
            self.cg_rmdir(mnt + trel)
        if case in ("removed", "fail", "threaded"):
            self.cg_rmdir(mnt + rel)
        if case == "fail":
            self.cg_rmdir(mnt + self.cg_base_rel + "/mid")
            with open(mnt + self.cg_base_rel + "/cgroup.max.descendants", "w") as f:
                f.write("1")
            r = self.run_ckpt(["restart", img], timeout=60)
            self.expect_error(r, "restart into a cgroup that cannot be made",
                              must=["pid %d" % self.pid, rel])
            self.expect_gone("the failed restart")
            if os.path.exists(mnt + self.cg_base_rel + "/mid"):
                raise Fail("the failed restart left the cgroup %s/mid it made"
                           % self.cg_base_rel)
            with open(mnt + self.cg_base_rel + "/cgroup.max.descendants", "w") as f:
                f.write("max")
        rp = self.restart(img, "restart")
        if self.mode == T:
            self.checkpoint(self.p("img2"), "ckpt2", reap=[rp])
            self.wait_all([rp], 10, "the first ckpt restart")
            if case == "threaded":
                self.cg_rmdir(mnt + trel)
            self.cg_rmdir(mnt + rel)
            rp = self.restart(self.p("img2"), "restart2")
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_refuse(self, prefix=()):
        """A refused checkpoint: the message matches the entry's regex, the
        original runs on and checks itself. nobody=True: the program and
        ckpt run as user nobody (no privilege)."""
        nobody = self.t.get("nobody")
        prefix = tuple(prefix) or tuple(self.t.get("prefix", ()))
        if nobody:
            prefix = tuple(self.nobody_setup()) + tuple(prefix)
        if self.opts.no_ckpt:
            return self.native(prefix)
        pr = self.start(prefix)
        self.wait_ready()
        ck = (lambda *a, **kw: self.as_nobody(self.checkpoint, *a, **kw)) if nobody \
            else self.checkpoint
        rc, err = ck(self.p("img"), "ckpt", reap=[pr], expect_ok=False,
                     extra=self.t.get("ckpt_args", ()))
        self.check_refused(rc, err, self.t["regex"].format(pid=self.pid), "the original")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_refuse_self(self):
        """A shell that runs `ckpt checkpoint $$` on itself: the tree holds
        ckpt, which is refused by pid (it used to seize ckpt and hang with
        the shell stopped); the shell then runs on and says so."""
        if self.opts.no_ckpt:
            return
        log = self.p("ckpt.log")
        self.logs += [log]
        script = ('"$1" checkpoint $$ -o "$2/img" --kill --log "$2/ckpt.log"; rc=$?; '
                  'echo "ckpt exited $rc"; [ $rc = 1 ] && echo PASS')
        pr = self.popen(["sh", "-c", script, "sh", os.path.abspath(self.opts.ckpt), self.dir],
                        err=self.p("ckpt.err"), out=self.p("out.log"))
        self.logs += [self.p("ckpt.err")]
        self.wait_all([pr], CHECKPOINT_TIMEOUT, "the shell that checkpoints itself")
        err = tail(self.p("ckpt.err"), 20) or ""
        if not re.search(r"pid %d: its child \d+ is this ckpt" % pr.pid, err):
            raise Fail("no refusal naming pid %d: %r" % (pr.pid, err.strip()[-300:]))
        if os.path.exists(self.p("img")):
            raise Fail("an image was left by the refused checkpoint")
        self.check_result(pr.returncode, "the shell")

    def flow_vfork(self):
        """refuse_vfork.c: the parent sleeps in vfork while its child waits
        for SIGUSR1. The checkpoint fails within the guardian's bound (10 s)
        naming the parent as a task that did not stop, in vfork; both run
        on, neither traced once ckpt is gone; SIGUSR1 to the child ends it
        and the parent exits 0 (a parent left in a ptrace stop would not)."""
        pr = self.start()
        self.pid = pr.pid
        child = int(self.wait_file("vforked", pr))
        if self.opts.no_ckpt:
            os.kill(child, signal.SIGUSR1)
            return self.check_result(self.wait_exit(pr, "the parent"), "the parent")
        rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
        if rc == 0 or rc >= 128 or rc < 0:
            raise Fail("ckpt checkpoint: status %d, expected a refusal" % rc)
        rx = (r"\bpid %d: did not stop within 10 s of being seized \(state D, in the kernel "
              r"at \w+\): a parent that called vfork\(\) waits so" % self.pid)
        if not re.search(rx, err):
            raise Fail("refusal message %r does not match /%s/" % (err.strip(), rx))

        def untraced(pid):
            with open("/proc/%d/status" % pid) as f:
                return [l for l in f if l.startswith("TracerPid:")][0].split()[1] == "0"
        for pid in (self.pid, child):
            self.wait_until("pid %d to be traced no more" % pid, lambda: untraced(pid), [pr],
                            timeout=20)
        os.kill(child, signal.SIGUSR1)
        rc = self.wait_exit(pr, "the parent")
        if rc != 0:
            raise Fail("the parent exited %s after its vfork child, want 0" % rc)

    def flow_refuse_inherited(self):
        """The root inherits fd 251, a pipe's (or FIFO's) write end, from the runner that
        starts it and keeps the read end (a launcher that leaks an fd): the
        refusal names the runner as the holder, the parent that started the
        tree, and how to start the program without it."""
        if self.opts.no_ckpt:
            return self.native()
        if self.t["case"] == "fifo":
            path = self.p("fifo")
            os.mkfifo(path)
            r = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            w = os.open(path, os.O_WRONLY)
            what = r"%s\): the FIFO's read end" % re.escape(path)
        else:
            r, w = os.pipe()
            what = r"pipe:\[\d+\]\): its read end"
        try:
            os.dup2(w, 251)
            os.close(w)
            try:
                pr = self.start(pass_fds=(251,))
            finally:
                os.close(251)
            self.wait_ready()
            rc, err = self.checkpoint(self.p("img"), "ckpt", reap=[pr], expect_ok=False)
            if rc == 0 or rc >= 128 or rc < 0:
                raise Fail("ckpt checkpoint: status %d, expected a refusal" % rc)
            rx = (r"\bpid %d fd 251 \(%s is held outside the "
                  r"image by pid %d \([^)]+\) fd %d; pid %d is the parent that started the "
                  r"tree: the fd was inherited; start the program with ckpt run \(fds above "
                  r"2 closed\) or close it \(251>&-\)"
                  % (self.pid, what, os.getpid(), r, os.getpid()))
            if not re.search(rx, err):
                raise Fail("refusal message %r does not match /%s/" % (err.strip(), rx))
            if not pid_alive(self.pid):
                raise Fail("the original is gone after the refused checkpoint")
            rc = self.wake_and_wait(pr, "the original")
            self.check_result(rc, "the original")
        finally:
            os.close(r)

    def flow_fd_external(self):
        """The root's fd 5 is the write end of a pipe whose read end the runner
        holds (a shell job's redirection): refused as held outside without
        --external fd:5; with it, saved as external, and restart refuses
        until --inherit-fd 5:FD gives a new pipe, into which the restored
        program then writes."""
        r, w = os.pipe()
        try:
            os.dup2(w, 251)
            os.close(w)
            try:
                pr = self.start(pass_fds=(251,))
            finally:
                os.close(251)
            self.wait_ready()
            if os.read(r, 100) != b"before\n":
                raise Fail("no 'before' on the runner's pipe")
            if self.opts.no_ckpt:
                rc = self.wake_and_wait(pr, "the program")
                return self.check_result(rc, "the program")
            self.fd_external_refusals(pr)
            self.checkpoint(self.p("img"), "ckpt", reap=[pr], extra=["--external", "fd:5", "--verify"])
            pr.poll()
            self.expect_gone("checkpoint --kill")
            if os.read(r, 100) != b"":
                raise Fail("the runner's old pipe is not at end of file after the kill")
        finally:
            os.close(r)
        # inspect says which fds a restart must give
        res = self.run_ckpt(["inspect", self.p("img")], verbose=False)
        if not re.search(r"^ +fds: \d+ \([^)]*\); external \(restart needs --inherit-fd N:FD\): "
                         r"fd 5$", res.stdout.decode(errors="replace"), re.M):
            raise Fail("inspect does not name external fd 5: %s" % res.stdout.decode()[:600])
        # restart: refused without the fd, or with one the image lacks
        r2, w2 = os.pipe()
        try:
            for extra, must in (([], ["fd 5", "--inherit-fd 5:FD"]),
                                (["--inherit-fd", "5:0,6:%d" % w2],
                                 ["--inherit-fd 6:%d" % w2, "no external fd 6"]),
                                (["--inherit-fd", "5:900"], ["5:900", "not open"])):
                res = self.run_ckpt(["restart", self.p("img"), "--detach"] + extra)
                self.expect_error(res, "restart %s" % " ".join(extra) or "restart", must=must)
                if pid_exists(self.pid):
                    raise Fail("a refused restart left pid %d behind" % self.pid)
            rp = self.restart(self.p("img"), "rst", extra=["--inherit-fd", "5:%d" % w2],
                              pass_fds=(w2,))
            os.close(w2)
            w2 = -1
            rc = self.wake_and_wait(rp, "the restored program")
            self.check_result(rc, "the restored program")
            got = b""
            while True:  # ckpt restart has exited: every writer is gone
                data = os.read(r2, 100)
                if not data:
                    break
                got += data
            if got != b"after %d\n" % self.pid:
                raise Fail("the new pipe got %r, want 'after %d'" % (got, self.pid))
        finally:
            os.close(r2)
            if w2 >= 0:
                os.close(w2)

    def fd_external_refusals(self, pr):
        """Without --external fd:5, or naming an fd the root lacks: refused,
        and the tree runs on."""
        for extra, must in (([], ["fd 5", "held outside", "--external fd:5, given again at "
                                  "restart with --inherit-fd 5:FD"]),
                            (["--external", "fd:7"], ["fd 7", "no fd 7"])):
            rc, err = self.checkpoint(self.p("bad"), "bad", reap=[pr], expect_ok=False,
                                      extra=extra)
            if rc in (0, None) or rc < 0 or rc >= 128 or any(m not in err for m in must):
                raise Fail("checkpoint %s: status %s, %r (want %r)" % (extra, rc,
                                                                       err.strip(), must))
            if not pid_alive(self.pid):
                raise Fail("the program is gone after a refused checkpoint")

    def flow_traced(self):
        strace = shutil.which("strace")
        if not strace:
            raise Skip("strace not installed")
        self.flow_refuse(prefix=[strace, "-f", "-o", "/dev/null"])

    def flow_cli_nopid(self):
        pid = 1 << 22  # above any pid_max
        if pid_exists(pid):
            raise Fail("pid %d exists?" % pid)
        if self.opts.no_ckpt:
            return
        r = self.run_ckpt(["checkpoint", str(pid), "-o", self.p("img")])
        self.expect_error(r, "checkpoint of a nonexistent pid", must=[str(pid)])

    def run_ckpt(self, args, timeout=30, verbose=True):
        argv = self.ckpt_argv(*args, verbose=verbose)
        self.vlog("$ " + " ".join(argv))
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  cwd=self.dir, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise Fail("%s hung" % " ".join(args))

    def expect_error(self, r, what, must=()):
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode == 0:
            raise Fail("%s: exit 0, expected an error" % what)
        if r.returncode < 0 or r.returncode >= 128:
            raise Fail("%s: crashed with status %d" % (what, r.returncode))
        if not err.strip():
            raise Fail("%s: exit %d with no message on stderr" % (what, r.returncode))
        for m in must:
            if m not in err:
                raise Fail("%s: message %r does not mention %r" % (what, err.strip(), m))
        if re.search(r"Sanitizer|core dumped|Segmentation", err):
            raise Fail("%s: %s" % (what, err.strip()))
        self.vlog("%s: exit %d: %s" % (what, r.returncode, err.strip()))

    def flow_cli_usage(self):
        if self.opts.no_ckpt:
            return
        # a harmless live target, so that only the usage is wrong
        target = self.popen(["sleep", "60"])
        pid = str(target.pid)
        cases = [
            ([], "no arguments"),
            (["no-such-verb"], "unknown subcommand"),
            (["checkpoint"], "checkpoint without a pid"),
            (["checkpoint", "notapid", "-o", self.p("img")], "checkpoint of 'notapid'"),
            (["checkpoint", pid], "checkpoint without -o"),
            (["checkpoint", pid, "-o", self.p("img"), "--no-such-option"],
             "an unknown option"),
            (["restart"], "restart without an image"),
            (["restart", self.p("missing-image")], "restart of a missing file"),
            (["inspect", self.p("missing-image")], "inspect of a missing file"),
        ]
        for args, what in cases:
            r = self.run_ckpt(args, verbose=False)  # exactly these arguments
            must = ["missing-image"] if "missing" in what else []
            self.expect_error(r, what, must=must)
            if target.poll() is not None:
                raise Fail("%s: the target was killed" % what)

    def flow_cli_badout(self):
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        bad = "/nonexistent/dir/img"
        rc, err = self.checkpoint(bad, "ckpt", reap=[pr], expect_ok=False)
        if rc == 0 or rc >= 128 or rc < 0 or not err.strip():
            raise Fail("checkpoint -o %s: exit %d, stderr %r" % (bad, rc, err.strip()))
        if os.path.exists(bad):
            raise Fail("%s exists" % bad)
        if not pid_alive(self.pid):
            raise Fail("the target was killed although the image could not be written")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_cli_unpriv(self):
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("setpriv (util-linux) not installed")
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        # a directory "nobody" may write to, inside our 0700 one
        os.chmod(self.dir, 0o711)
        udir = self.p("nobody")
        os.mkdir(udir)
        os.chmod(udir, 0o777)
        drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        ckpt = self.opts.ckpt
        if subprocess.run(drop + ["test", "-x", ckpt]).returncode != 0:
            ckpt = os.path.join(udir, "ckpt")
            shutil.copy(self.opts.ckpt, ckpt)
            os.chmod(ckpt, 0o755)
        saved = self.opts.ckpt
        self.opts.ckpt = ckpt
        try:
            rc, err = self.checkpoint(os.path.join(udir, "img"), "nobody/ckpt", reap=[pr],
                                      expect_ok=False, prefix=drop)
        finally:
            self.opts.ckpt = saved
        if rc == 0:
            raise Fail("an unprivileged checkpoint of a root process succeeded")
        if rc < 0 or rc >= 128:
            raise Fail("ckpt checkpoint crashed: status %d" % rc)
        if not re.search(self.t["regex"], err, re.I):
            raise Fail("message %r does not mention permission" % err.strip())
        if not pid_alive(self.pid):
            raise Fail("the target is gone")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def nobody_setup(self, groups=("--clear-groups",)):
        """For a test run by user nobody: the test directory open to it,
        the program and ckpt copied into it (the checkout may be closed to
        other users), out.log nobody's (restart opens it again with
        nobody's rights), and a wrapper that runs ckpt as nobody with no
        groups. Returns the setpriv argv that starts the program as nobody."""
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("setpriv (util-linux) not installed")
        os.chmod(self.dir, 0o777)
        prog = self.p(self.t["program"])
        for src, dst in ((self.opts.ckpt, self.p("ckpt")),
                         (os.path.join(self.opts.bindir, self.t["program"]), prog)):
            shutil.copy(src, dst)
            os.chmod(dst, 0o755)
        self.t = dict(self.t, argv=[prog])
        with open(self.p("out.log"), "w"):
            pass
        os.chown(self.p("out.log"), 65534, 65534)
        wrapper = self.p("ckpt-as-nobody")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec %s --reuid=65534 --regid=65534 --clear-groups %s \"$@\"\n"
                    % (setpriv, self.p("ckpt")))
        os.chmod(wrapper, 0o755)
        return [setpriv, "--reuid=65534", "--regid=65534"] + list(groups)

    def as_nobody(self, fn, *a, **kw):
        """fn(*a, **kw) with ckpt run as nobody (nobody_setup's wrapper)."""
        saved = self.opts.ckpt
        self.opts.ckpt = self.p("ckpt-as-nobody")
        try:
            return fn(*a, **kw)
        finally:
            self.opts.ckpt = saved

    def flow_kill_unpriv(self):
        """User nobody checkpoints its own plain process with --kill and
        restarts it with --pidns, without privilege: the restart makes a
        user namespace that maps nobody to itself and a pid namespace that
        holds the saved pid. The program checks from inside that its pid
        (getpid), ids and groups are what they were."""
        drop = self.nobody_setup()
        if self.opts.no_ckpt:
            return self.native(prefix=drop)
        pr = self.start(prefix=drop)
        self.wait_ready()
        original = self.pid
        self.as_nobody(self.checkpoint, self.p("img"), "ckpt", reap=[pr])
        if "only with --pidns" not in (tail(self.p("ckpt.log"), 50) or ""):
            raise Fail("the checkpoint log does not say that the restart needs --pidns")
        rp = self.as_nobody(self.restart, self.p("img"), "restart", same_pid=False,
                            extra=["--pidns"])
        if self.pid == original:
            raise Fail("the copy has the original's pid outside its namespace")
        rc = self.wake_and_wait(rp, "ckpt restart --pidns (as nobody)")
        self.check_result(rc, "ckpt restart --pidns (as nobody)")

    def expect_refused(self, pr, rc, err, img):
        """A refused checkpoint --kill: a clear message, no image, the
        program alive; it is then woken and checks itself."""
        if rc == 0:
            raise Fail("checkpoint --kill succeeded where a restart would fail")
        if rc < 0 or rc >= 128:
            raise Fail("ckpt checkpoint crashed: status %d" % rc)
        if not re.search(self.t["regex"], err, re.I):
            raise Fail("message %r does not match %r" % (err.strip()[-400:], self.t["regex"]))
        if not pid_alive(self.pid):
            raise Fail("the program is gone after a refused --kill")
        if os.path.exists(img) or os.path.exists(img + ".part"):
            raise Fail("a refused checkpoint left an image")
        rc = self.wake_and_wait(pr, "the original")
        self.check_result(rc, "the original")

    def flow_kill_refuse(self):
        """checkpoint --kill of a process that a restart by the same user
        could not bring back: refused with the reason, the program runs on
        unharmed, no image is left. By nobody of its own process: "groups"
        (a supplementary group, which a user namespace's denied setgroups
        cannot give back), "file" (a file open for writing that only root
        may open now). By root: "sock" (a unix socket whose directory is
        now read-only, so its name cannot be bound again; with a loopback
        TCP connection too, read in repair mode before the refusal)."""
        case = self.t["case"]
        args, drop, run = [], [], lambda fn, *a, **kw: fn(*a, **kw)
        if case != "sock":
            drop = self.nobody_setup(["--groups=100"] if case == "groups"
                                     else ["--clear-groups"])
            run = self.as_nobody
        victim, sockdir = self.p("victim"), self.p("sd")
        sock = os.path.join(sockdir, "s")
        if case == "file":
            with open(victim, "w"):
                pass
            os.chmod(victim, 0o666)
            args = ["file=" + victim]
        if case == "sock":
            os.mkdir(sockdir)
            args = ["bind=" + sock, "tcp"]
        if case == "keyring":  # started as root, it becomes nobody itself
            drop, args = [], ["keyring"]
        pr = self.start(prefix=drop, args=args)
        self.wait_ready()
        if self.opts.no_ckpt:
            return self.check_result(self.wait_exit(pr, "test program"), "test program")
        if case == "file":
            os.chmod(victim, 0o600)  # root's alone from now on
        if case == "sock":
            # its directory read-only from now on, even for root
            subprocess.run(["mount", "--bind", sockdir, sockdir], check=True)
            try:
                subprocess.run(["mount", "-o", "remount,bind,ro", sockdir], check=True)
                img = self.p("img")
                rc, err = run(self.checkpoint, img, "ckpt", reap=[pr], expect_ok=False)
                self.expect_refused(pr, rc, err, img)
            finally:
                subprocess.run(["umount", sockdir])
            return
        img = self.p("img")
        rc, err = run(self.checkpoint, img, "ckpt", reap=[pr], expect_ok=False)
        self.expect_refused(pr, rc, err, img)

    def flow_kill_verify(self):
        """checkpoint --kill --verify: a dry-run restart of the image, with
        the program still alive and held (a unix listener on a path, an
        flock, a pty). Passes and kills, then the real restart works; or
        (case "refuse": fd 1000, ckpt under an open-file limit of 512) the
        dry run fails, nothing is killed, and the program finds its socket
        name, its lock and its pty as they were."""
        args = list(self.t["args"])
        if self.opts.no_ckpt:
            pr = self.start(args=args)
            self.wait_ready()
            return self.check_result(self.wait_exit(pr, "test program"), "test program")
        pr = self.start(args=args)
        self.wait_ready()
        img = self.p("img")
        if self.t["case"] == "refuse":
            import resource
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            rc, err = self.checkpoint(img, "ckpt", reap=[pr], expect_ok=False,
                                      extra=["--verify"],
                                      prefix=["prlimit", "--nofile=512:%d" % hard])
            return self.expect_refused(pr, rc, err, img)
        self.checkpoint(img, "ckpt", reap=[pr], extra=["--verify"])
        if "verify: the dry run restored the image" not in (tail(self.p("ckpt.log"), 50) or ""):
            raise Fail("the checkpoint log does not show the dry run")
        rp = self.restart(img, "restart")
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def victims(self):
        """A victim file of root's and one of another user's; returns a checker."""
        files = {self.p("victim"): b"VICTIM\n", self.p("victim.other"): b"OTHER\n"}
        for path, data in files.items():
            with open(path, "wb") as f:
                f.write(data)
        os.chown(self.p("victim.other"), 65534, 65534)

        def check(what):
            for path, data in files.items():
                st = os.lstat(path)
                with open(path, "rb") as f:
                    got = f.read()
                if got != data or not stat.S_ISREG(st.st_mode):
                    raise Fail("%s: victim %s changed: %r" % (what, path, got[:40]))
            self.vlog("%s: victims untouched" % what)
        return check

    def expect_mode(self, path, what):
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600:
            raise Fail("%s: %s is mode %o, expected a regular file 0600"
                       % (what, path, st.st_mode))

    def flow_files_nofollow(self):
        """The image, its temporary file, --log and --pidfile: symlinks planted
        there to victim files are never followed, another user's or a
        hard-linked log is refused, an existing image is replaced only by a
        complete one, and every file is made 0600."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        check = self.victims()
        pid = str(self.pid)
        img = self.p("img")
        for name, target in (("img.lnk", "victim"), ("log.lnk", "victim.other"),
                             ("img.part", "victim"), ("img2.part", "victim.other"),
                             ("rst.pid", "victim"), ("rst.pid.tmp", "victim.other")):
            os.symlink(self.p(target), self.p(name))
        r = self.run_ckpt(["checkpoint", pid, "-o", self.p("img.lnk")])
        self.expect_error(r, "image at a symlink", must=["img.lnk", "symbolic link"])
        check("image at a symlink")
        r = self.run_ckpt(["checkpoint", pid, "-o", img, "--log", self.p("log.lnk")])
        self.expect_error(r, "log at a symlink", must=["log.lnk", "symbolic link"])
        check("log at a symlink")
        r = self.run_ckpt(["checkpoint", pid, "-o", img, "--log", self.p("victim.other")])
        self.expect_error(r, "another user's log", must=["victim.other", "another user"])
        check("another user's log")
        os.link(self.p("victim"), self.p("log.hard"))
        r = self.run_ckpt(["checkpoint", pid, "-o", img, "--log", self.p("log.hard")])
        self.expect_error(r, "hard-linked log", must=["log.hard", "hard links"])
        check("hard-linked log")
        os.unlink(self.p("log.hard"))
        if os.path.exists(img):
            raise Fail("refused checkpoints left %s" % img)
        # an old image at the final name, symlinks at the old temporary names
        with open(img, "wb") as f:
            f.write(b"OLD IMAGE\n")
        names = set(os.listdir(self.dir))
        r = self.run_ckpt(["checkpoint", str(1 << 22), "-o", img])
        self.expect_error(r, "a failed checkpoint")
        with open(img, "rb") as f:
            if f.read() != b"OLD IMAGE\n":
                raise Fail("a failed checkpoint replaced the existing image")
        rc, err = self.checkpoint(img, "ckpt", reap=[pr], extra=["--log", self.p("new.log")])
        check("checkpoint --kill with img.part planted")
        with open(img, "rb") as f:
            if f.read(8) != b"CKPTIMG\0":
                raise Fail("the image was not replaced by a complete one")
        self.expect_mode(img, "the image")
        self.expect_mode(self.p("new.log"), "a new log")
        extra = set(os.listdir(self.dir)) - names - {"ckpt.log", "ckpt.err", "ckpt.out",
                                                     "new.log"}
        if extra:
            raise Fail("the checkpoint left %s behind" % sorted(extra))
        if not os.path.islink(self.p("img.part")):
            raise Fail("img.part was replaced")
        rp = self.restart(img, "rst")
        check("restart --pidfile at a symlink")
        self.expect_mode(self.p("rst.pid"), "the pidfile")
        rc = self.wake_and_wait(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_files_interrupted(self):
        """SIGKILL ckpt in the middle of writing a large image over an existing
        one: the old image stays as it was and no temporary file is left."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        with open(img, "wb") as f:
            f.write(b"OLD IMAGE\n")
        names = set(os.listdir(self.dir))
        cp = self.popen(self.ckpt_argv("checkpoint", str(self.pid), "-o", img),
                        err=self.p("ckpt.err"))
        names |= {"ckpt.err"}
        # wait until ckpt's unnamed (or temporary) image holds 16 MiB
        deadline = time.monotonic() + CHECKPOINT_TIMEOUT
        written = 0
        while written < 16 * MiB:
            if cp.poll() is not None:
                raise Fail("ckpt checkpoint finished (%d) before it was killed" % cp.returncode)
            if time.monotonic() > deadline:
                raise Fail("ckpt never wrote 16 MiB of image")
            for fd in os.listdir("/proc/%d/fd" % cp.pid) if pid_exists(cp.pid) else ():
                try:
                    link = os.readlink("/proc/%d/fd/%s" % (cp.pid, fd))
                    if link.startswith(self.dir + "/"):
                        written = max(written, os.stat("/proc/%d/fd/%s" % (cp.pid, fd)).st_size)
                except OSError:
                    pass
            time.sleep(0.005)
        cp.kill()
        cp.wait()
        self.vlog("ckpt killed after %d bytes" % written)
        with open(img, "rb") as f:
            if f.read() != b"OLD IMAGE\n":
                raise Fail("the existing image was replaced by an interrupted checkpoint")
        extra = set(os.listdir(self.dir)) - names
        if extra:
            raise Fail("the interrupted checkpoint left %s behind" % sorted(extra))
        # the target's fate after its tracer died is not this test's subject
        if self.ours(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        self.wait_all([pr], EXIT_TIMEOUT, "the killed target")

    def flow_damage(self):
        if self.opts.no_ckpt:
            damage_selftest(self.p("synthetic"))
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        with open(img, "rb") as f:
            good = f.read()
        recs = walk_image(good)
        self.vlog("image: %d bytes, %d records" % (len(good), len(recs)))
        sub = self.opts.results
        for kind, fn in DAMAGES:
            data, where = fn(good, recs)
            path = self.p("dmg-" + kind)
            with open(path, "wb") as f:
                f.write(data)
            name = self.t["name"] + "/" + kind
            try:
                self.restart_damaged(path, kind, where)
                sub.ok(name)
            except Fail as e:
                sub.bad(name, str(e), self)
            os.unlink(path)
        # the undamaged image is good: a dry run, then the real thing
        try:
            r = self.run_ckpt(["restart", img, "--dry-run", "--log", self.p("dry.log")],
                              timeout=60)
            if r.returncode != 0:
                raise Fail("restart --dry-run exit %d: %s"
                           % (r.returncode, r.stderr.decode(errors="replace").strip()))
            self.expect_gone("restart --dry-run")
            sub.ok(self.t["name"] + "/dry-run")
        except Fail as e:
            sub.bad(self.t["name"] + "/dry-run", str(e), self)
        rp = self.restart(img, "restart", extra=self.t.get("rst_args", ()))
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the undamaged image")

    def flow_damage_tree(self):
        """Eager restart of tree_cow's image with the last page record (a
        child's) damaged in its middle. Page records are checked as their
        pages are written, after the processes are made: the restart must
        fail naming the record, and no pid of the tree may be left; the
        undamaged image then restarts and checks itself."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        pids = self.tree_pids(self.pid)
        if len(pids) < 2:
            raise Fail("tree_cow made no children: %r" % pids)
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        with open(img, "rb") as f:
            good = f.read()
        pages = [r for r in walk_image(good)[:-1]
                 if r[5] >= 16 and good[r[4] + r[5] - 16:r[4] + r[5] - 12] == b"PGS1"]
        if len(pages) < 2:
            raise Fail("the image has %d plain page records, want several" % len(pages))
        r = pages[-1]
        with open(img, "wb") as f:
            f.write(flip(good, r[4] + r[5] // 2))
        log = self.p("damaged.log")
        res = self.run_ckpt(["restart", img, "--log", log], timeout=120)
        err = res.stderr.decode("utf-8", "replace")
        if res.returncode == 0:
            raise Fail("the damaged tree was restarted")
        self.expect_error(res, "restart of the damaged tree")
        if not re.search(r"record %d at offset %d \(mm/pages of pid \d+\): data checksum "
                         r"mismatch" % (r[0], r[1]), err):
            raise Fail("message %r does not name record %d" % (err.strip(), r[0]))
        if "image validated" not in (tail(log, 400) or ""):
            raise Fail("refused at load: the page record was not left to the writers")
        deadline = time.monotonic() + 10
        while [p for p in pids if pid_exists(p)]:
            if time.monotonic() > deadline:
                raise Fail("pids %r of the tree left after the failed restart"
                           % [p for p in pids if pid_exists(p)])
            time.sleep(POLL)
        with open(img, "wb") as f:
            f.write(good)
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the undamaged tree")

    def restart_damaged(self, path, kind, where):
        tag = "dmg-" + kind
        pidfile = self.p(tag + ".pid")
        err = self.p(tag + ".err")
        lazy = "--lazy" in self.t.get("rst_args", ())
        rp = self.popen(self.ckpt_argv("restart", path, "--pidfile", pidfile, "--log",
                                       self.p(tag + ".log"), *self.t.get("rst_args", ())),
                        err=err, out=self.p(tag + ".out"))
        deadline = time.monotonic() + 30
        if lazy and kind in ("pages", "page-pad"):
            # --lazy checks a page record (its data; its frame and pad, which
            # the load took from the index) when the server first uses it: the
            # process may run until then; the server names the damage and
            # its guard kills it
            self.wait_all([rp], EXIT_TIMEOUT, "ckpt restart --lazy of a damaged image")
            log = tail(self.p(tag + ".log"), 50) or ""
            rc = rp.returncode
            if not (rc == 128 + signal.SIGKILL or 0 < rc < 128) or "damaged" not in log:
                raise Fail("%s (%s): restart --lazy exit %s, log %r" % (
                    kind, where, rp.returncode, log.strip()[-300:]))
            self.expect_gone("the damaged image's lazy server stopped")
            return
        try:
            while rp.poll() is None:
                if os.path.exists(pidfile):
                    raise Fail("%s (%s): the damaged image was restored and runs" % (kind, where))
                if time.monotonic() > deadline:
                    raise Fail("%s (%s): ckpt restart hung" % (kind, where))
                time.sleep(POLL)
        except Fail:
            # do not leave it to disturb the next damage or the good restart
            if self.ours(self.pid):
                os.kill(self.pid, signal.SIGKILL)
            rp.kill()
            rp.wait()
            self.expect_gone("killing the wrongly restored process")
            raise
        rc = rp.returncode
        msg = (tail(err, 20) or "").strip()
        if rc == 0:
            raise Fail("%s (%s): ckpt restart exit 0" % (kind, where))
        if rc < 0 or rc >= 128:
            raise Fail("%s (%s): ckpt restart crashed, status %d: %s" % (kind, where, rc, msg))
        if not msg:
            raise Fail("%s (%s): exit %d without a message" % (kind, where, rc))
        if re.search(r"Sanitizer|core dumped|Segmentation", msg):
            raise Fail("%s (%s): %s" % (kind, where, msg))
        if "\x1b" in msg or "\x07" in msg:
            raise Fail("%s (%s): a control character from the image reached the terminal: %r"
                       % (kind, where, msg))
        if kind in CHECKSUM_DAMAGES and not re.search(r"record|checksum|crc", msg, re.I):
            raise Fail("%s (%s): message %r names no record/checksum" % (kind, where, msg))
        self.expect_gone("the refused restart of " + kind)
        self.vlog("%s (%s): exit %d: %s" % (kind, where, rc, msg.splitlines()[-1]))

    def checkpointed(self):
        """Starts the program and checkpoints it (--kill); returns the image."""
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        pr.poll()
        return img

    SUMMARY_RE = re.compile(
        r"ckpt: (checkpointed|restarted) (\d+) process(?:es)? \((\d+) threads?\), "
        r"([\d.]+) (bytes|KiB|MiB|GiB) of memory, (?:image|from) (\S+) ([\d.]+) "
        r"(bytes|KiB|MiB|GiB),(?: as pid (\d+),)? in ([\d.]+) s")

    def parse_summary(self, err, what):
        lines = [l for l in err.splitlines() if l.startswith("ckpt: ")]
        if len(lines) != 1:
            raise Fail("%s: want one summary line on stderr, got %r" % (what, err))
        m = self.SUMMARY_RE.match(lines[0])
        if not m:
            raise Fail("%s: summary line %r is not of the documented form" % (what, lines[0]))
        unit = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
        return dict(verb=m.group(1), processes=int(m.group(2)), threads=int(m.group(3)),
                    memory=float(m.group(4)) * unit[m.group(5)], image=m.group(6),
                    image_bytes=float(m.group(7)) * unit[m.group(8)],
                    pid=int(m.group(9)) if m.group(9) else None, seconds=float(m.group(10)))

    def check_counts(self, got, what, mem_key, img_key, img):
        if got["processes"] != 3 or got["threads"] != 5:
            raise Fail("%s: %d processes, %d threads; the tree has 3 and 5"
                       % (what, got["processes"], got["threads"]))
        if not 16 * MiB <= got[mem_key] <= 64 * MiB:
            raise Fail("%s: %d bytes of memory, the tree wrote 16 MiB" % (what, got[mem_key]))
        size = os.path.getsize(img)
        if abs(got[img_key] - size) > max(size * 0.06, 1):
            raise Fail("%s: image of %d bytes, the file has %d" % (what, got[img_key], size))

    def flow_cli_summary(self):
        """checkpoint and restart say what they did: one summary line on stderr,
        nothing with --quiet, one JSON object on stdout with --json."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        # a checkpoint that leaves it running: the summary line
        img1 = self.p("img1")
        self.checkpoint(img1, "ckpt1", reap=[pr], kill=False)
        got = self.parse_summary(tail(self.p("ckpt1.err"), 50) or "", "checkpoint")
        if got["verb"] != "checkpointed" or got["image"] != img1:
            raise Fail("checkpoint summary names %r %r" % (got["verb"], got["image"]))
        self.check_counts(got, "checkpoint summary", "memory", "image_bytes", img1)
        # --quiet: nothing on stderr
        self.checkpoint(self.p("img2"), "ckpt2", reap=[pr], kill=False, extra=["--quiet"])
        if (tail(self.p("ckpt2.err"), 50) or "").strip():
            raise Fail("checkpoint --quiet said %r" % tail(self.p("ckpt2.err"), 50))
        # -o - with --json: refused, both would be on stdout
        r = self.run_ckpt(["checkpoint", str(self.pid), "-o", "-", "--json"])
        self.expect_error(r, "checkpoint -o - --json", must=["--json"])
        # --json: one object on stdout, nothing else
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr], extra=["--json"])
        pr.poll()
        with open(self.p("ckpt.out")) as f:
            text = f.read()
        try:
            js = json.loads(text)
        except ValueError as e:
            raise Fail("checkpoint --json printed %r: %s" % (text, e))
        if js.get("command") != "checkpoint" or js.get("pid") != self.pid or \
                js.get("image") != img or js.get("killed") is not True or \
                not isinstance(js.get("warnings"), list) or \
                not isinstance(js.get("seconds"), float):
            raise Fail("checkpoint --json: %r" % js)
        self.check_counts(js, "checkpoint --json", "memory_bytes", "image_bytes", img)
        # restart --detach: the pid alone on stdout, the summary on stderr
        r = self.run_ckpt(["restart", img, "--detach"])
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        if r.returncode != 0 or out != "%d\n" % self.pid:
            raise Fail("restart --detach: exit %d, stdout %r, stderr %r"
                       % (r.returncode, out, err))
        got = self.parse_summary(err, "restart")
        if got["verb"] != "restarted" or got["pid"] != self.pid or got["image"] != img:
            raise Fail("restart summary: %r" % got)
        self.check_counts(got, "restart summary", "memory", "image_bytes", img)
        # checkpoint that one, restart it with --json
        img3 = self.p("img3")
        self.checkpoint(img3, "ckpt3", reap=[], extra=["--quiet"])
        r = self.run_ckpt(["restart", img3, "--detach", "--json"])
        try:
            js = json.loads(r.stdout.decode(errors="replace"))
        except ValueError as e:
            raise Fail("restart --json printed %r: %s" % (r.stdout, e))
        if r.returncode != 0 or r.stderr.strip() or js.get("command") != "restart" or \
                js.get("pid") != self.pid or js.get("detached") is not True:
            raise Fail("restart --detach --json: exit %d, %r, stderr %r"
                       % (r.returncode, js, r.stderr))
        self.check_counts(js, "restart --json", "memory_bytes", "image_bytes", img3)
        os.kill(self.pid, signal.SIGUSR1)
        self.expect_gone("SIGUSR1 to the restored tree", grace=EXIT_TIMEOUT)
        self.check_result(0, "the restored tree")

    def run_on_pty(self, args, what, timeout=60):
        """ckpt ARGS with stderr on a pseudo-terminal (raw: no \\n to \\r\\n),
        stdout a pipe; returns (exit status, stdout, what the terminal got)."""
        import tty
        argv = self.ckpt_argv(*args, verbose=False)
        self.vlog("$ " + " ".join(argv) + " 2>pty")
        master, slave = os.openpty()
        tty.setraw(slave)
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=slave, cwd=self.dir)
        finally:
            os.close(slave)
        got, deadline = b"", time.monotonic() + timeout
        try:
            while True:
                if time.monotonic() > deadline:
                    p.kill()
                    raise Fail("%s hung on a terminal" % what)
                r, _, _ = select.select([master], [], [], POLL)
                if not r:
                    continue
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer of the slave is gone
                    break
                if not data:
                    break
                got += data
            out = p.communicate(timeout=timeout)[0]
        finally:
            os.close(master)
        return p.returncode, out.decode(errors="replace"), got.decode(errors="replace")

    PROGRESS_RE = re.compile(r"\rckpt: (checkpoint|restart): ([\d.]+) (bytes|KiB|MiB|GiB)"
                             r"(?: of ([\d.]+) (bytes|KiB|MiB|GiB))?, [\d.]+ (?:bytes|KiB|MiB|GiB)/s"
                             r"(?:, [\d.]+ s left)?\x1b\[K")

    def check_progress(self, text, phase, what):
        """At least one progress line of phase with a total of about the 256 MiB
        the program holds, wiped, then the summary line alone."""
        unit = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
        lines = list(self.PROGRESS_RE.finditer(text))
        if not lines or any(m.group(1) != phase for m in lines):
            raise Fail("%s: want progress lines of %s on the terminal, got %r"
                       % (what, phase, text[-600:]))
        totals = [float(m.group(4)) * unit[m.group(5)] for m in lines if m.group(4)]
        if not totals or not 200 * MiB <= max(totals) <= 400 * MiB:
            raise Fail("%s: progress totals %r, the program holds 256 MiB" % (what, totals))
        rest = text[lines[-1].end():]
        if not rest.startswith("\r\x1b[K"):
            raise Fail("%s: the progress line is not wiped before the summary: %r"
                       % (what, rest[:200]))
        self.vlog("%s: %d progress lines, the last %r" % (what, len(lines),
                                                           lines[-1].group(0)))
        return self.parse_summary(rest[len("\r\x1b[K"):], phase)

    def flow_cli_progress(self):
        """On a terminal, checkpoint and restart show a progress line redrawn in
        place (\\r), wiped before the summary; through a pipe, none."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        # a documented interval: updates every millisecond, so that even a fast
        # machine shows some while 256 MiB are written
        img1 = self.p("img1")
        rc, _, text = self.run_on_pty(["checkpoint", str(self.pid), "-o", img1,
                                       "--progress-interval", "1"], "checkpoint on a pty")
        if rc != 0:
            raise Fail("checkpoint on a pty: exit %d: %r" % (rc, text[-300:]))
        got = self.check_progress(text, "checkpoint", "checkpoint on a pty")
        if got["verb"] != "checkpointed" or got["image"] != img1:
            raise Fail("checkpoint on a pty: summary %r" % got)
        # a bad interval is refused before anything is done
        for bad in ("0", "x", "60001"):
            r = self.run_ckpt(["checkpoint", str(self.pid), "-o", self.p("bad"),
                               "--progress-interval", bad], verbose=False)
            self.expect_error(r, "--progress-interval %s" % bad, must=["--progress-interval"])
            if r.returncode != 2 or os.path.exists(self.p("bad")):
                raise Fail("--progress-interval %s: exit %d, image %s" % (
                    bad, r.returncode, os.path.exists(self.p("bad"))))
        # --quiet on a terminal: nothing at all
        rc, _, text = self.run_on_pty(["checkpoint", str(self.pid), "-o", self.p("img0"),
                                       "--quiet", "--progress-interval", "1"],
                                      "checkpoint --quiet on a pty")
        if rc != 0 or text:
            raise Fail("checkpoint --quiet on a pty: exit %d, said %r" % (rc, text[-300:]))
        # not a terminal (a file): the summary alone, no \r
        img = self.p("img")
        _, err = self.checkpoint(img, "ckpt", reap=[pr], extra=["--progress-interval", "1"])
        pr.poll()
        if "\r" in err or "\x1b" in err:
            raise Fail("checkpoint to a file drew a progress line: %r" % err[-300:])
        self.parse_summary(err, "checkpoint")
        # restart on a terminal
        rc, out, text = self.run_on_pty(["restart", img, "--detach", "--progress-interval", "1"],
                                        "restart on a pty")
        if rc != 0 or out != "%d\n" % self.pid:
            raise Fail("restart on a pty: exit %d, stdout %r, %r" % (rc, out, text[-300:]))
        got = self.check_progress(text, "restart", "restart on a pty")
        if got["verb"] != "restarted" or got["pid"] != self.pid:
            raise Fail("restart on a pty: summary %r" % got)
        # and through a pipe: no \r
        self.checkpoint(self.p("img3"), "ckpt3", reap=[], extra=["--quiet"])
        r = self.run_ckpt(["restart", self.p("img3"), "--detach", "--progress-interval", "1"],
                          verbose=False)
        err = r.stderr.decode(errors="replace")
        if r.returncode != 0 or "\r" in err or "\x1b" in err:
            raise Fail("restart through a pipe: exit %d, %r" % (r.returncode, err[-300:]))
        self.parse_summary(err, "restart")
        os.kill(self.pid, signal.SIGUSR1)
        self.expect_gone("SIGUSR1 to the restored tree", grace=EXIT_TIMEOUT)
        self.check_result(0, "the restored tree")

    def flow_cli_progress_restart(self):
        """Restart's progress line on a terminal counts every byte it fills in,
        not only the processes' memory: a program whose 256 MiB are a memfd's
        contents shows a line with a total of 256 MiB."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr], extra=["--quiet"])
        pr.poll()
        rc, out, text = self.run_on_pty(["restart", img, "--detach", "--progress-interval", "1"],
                                        "restart on a pty")
        if rc != 0 or out != "%d\n" % self.pid:
            raise Fail("restart on a pty: exit %d, stdout %r, %r" % (rc, out, text[-300:]))
        got = self.check_progress(text, "restart", "restart on a pty")
        if got["verb"] != "restarted" or got["pid"] != self.pid:
            raise Fail("restart on a pty: summary %r" % got)
        os.kill(self.pid, signal.SIGUSR1)
        self.expect_gone("SIGUSR1 to the restored tree", grace=EXIT_TIMEOUT)
        self.check_result(0, "the restored tree")

    def run_through_pipe(self, args, what, pass_fds=()):
        """ckpt ARGS with stdout and stderr pipes, as in pid=$(ckpt ...): it must
        return while what it started runs on; returns the pid it printed."""
        argv = self.ckpt_argv(*args, verbose=False)
        self.vlog("$ " + " ".join(argv))
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               cwd=self.dir, timeout=20, pass_fds=pass_fds)
        except subprocess.TimeoutExpired:
            raise Fail("%s: did not return within 20 s through a pipe (it keeps the "
                       "caller's stdout?)" % what)
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0 or not re.fullmatch(r"\d+\n", out):
            raise Fail("%s: exit %d, stdout %r, stderr %r" % (what, r.returncode, out,
                                                              r.stderr.decode(errors="replace")))
        return int(out)

    def container_fds(self, pid):
        fds = {}
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                fds[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                pass
        return fds

    def flow_run_detach(self):
        """ckpt run --detach returns through a pipe at once, its container's stdio
        on /dev/null (or --output-log), without the fds the caller leaked
        (unless --keep-fds); restart --detach of it returns through a pipe too.
        The program is single-threaded: checkpoint --kill of a container whose
        init has threads can hang (a thread of the init waits in
        zap_pid_ns_processes for a traced zombie thread ckpt has not reaped)."""
        if self.opts.no_ckpt:
            return self.native()
        rd, wr = os.pipe()  # the caller's leaked fd: a pipe's write end
        leaked = "pipe:[%d]" % os.fstat(wr).st_ino
        pids = []
        try:
            pid = self.run_through_pipe(["run", "--detach", "--", "sleep", "1000"],
                                        "ckpt run --detach", pass_fds=(wr,))
            pids.append(pid)
            fds = self.container_fds(pid)
            if leaked in fds.values():
                raise Fail("the container holds the caller's fd %d (%s): %r" % (wr, leaked, fds))
            if [fds.get(i) for i in range(3)] != ["/dev/null"] * 3:
                raise Fail("the detached container's stdio is %r, want /dev/null" % fds)
            # --keep-fds: the leaked fd is there (the check above can see it)
            pid = self.run_through_pipe(["run", "--detach", "--keep-fds", "--", "sleep", "1000"],
                                        "ckpt run --detach --keep-fds", pass_fds=(wr,))
            pids.append(pid)
            if self.container_fds(pid).get(wr) != leaked:
                raise Fail("--keep-fds: fd %d is not the caller's pipe in the container" % wr)
            # --output-log: its output goes there
            log = self.p("run-output.log")
            env_dir = "CKPT_TEST_DIR=%s" % self.dir
            pid = self.run_through_pipe(
                ["run", "--detach", "--output-log", log, "--", "env", env_dir,
                 "sh", "-c", 'echo hello from $$; exec "$0"', self.program_argv()[0]],
                "ckpt run --detach --output-log", pass_fds=(wr,))
            pids.append(pid)
            deadline = time.monotonic() + READY_TIMEOUT
            while not os.path.exists(self.p("ready")):
                if time.monotonic() > deadline or not pid_alive(pid):
                    raise Fail("the container of --output-log did not get ready")
                time.sleep(POLL)
            with open(log) as f:
                text = f.read()
            if "hello from 1" not in text:
                raise Fail("--output-log %s holds %r" % (log, text))
            # restart --detach through a pipe, after checkpoint --kill
            self.pid = pid
            img = self.p("img")
            self.checkpoint(img, "ckpt", reap=[])
            got = self.run_through_pipe(["restart", img, "--detach", "--quiet"],
                                        "ckpt restart --detach of the container")
            pids.append(got)  # fresh namespaces: pid 1 inside, another outside
            pid = self.pid = got
            if leaked in self.container_fds(pid).values():
                raise Fail("the restored container holds the caller's pipe")
            os.kill(pid, signal.SIGUSR1)
            self.expect_gone("SIGUSR1 to the restored container", grace=EXIT_TIMEOUT)
            with open(log) as f:
                text = f.read()
            if "PASS" not in text or "FAIL" in text:
                raise Fail("the restored container wrote %r" % text)
        finally:
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.close(rd)
            os.close(wr)

    def flow_cli_check(self):
        """ckpt check tells what the kernel lacks (MISSING) from what this user may
        not do (DENIED), and points a user without privilege to ckpt run."""
        if self.opts.no_ckpt:
            return
        r = self.run_ckpt(["check"], verbose=False)
        out = r.stdout.decode(errors="replace")
        lacks = [l for l in out.splitlines() if l.startswith("MISSING") and "(optional)" not in l]
        if lacks:
            raise Skip("this kernel lacks what ckpt needs: %s" % "; ".join(lacks))
        if r.returncode != 0 or "DENIED" in out:
            raise Fail("ckpt check as root: exit %d: %s %s" % (r.returncode, out, r.stderr))
        setpriv = shutil.which("setpriv")
        if not setpriv:
            raise Skip("setpriv (util-linux) not installed")
        os.chmod(self.dir, 0o711)
        ckpt = self.p("ckpt")
        shutil.copy(self.opts.ckpt, ckpt)
        os.chmod(ckpt, 0o755)
        drop = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        self.vlog("$ " + " ".join(drop + [ckpt, "check"]))
        r = subprocess.run(drop + [ckpt, "check"], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=30)
        out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
        self.vlog("exit %d\n%s%s" % (r.returncode, out, err))
        if r.returncode != 1:
            raise Fail("ckpt check as nobody: exit %d, want 1: %s" % (r.returncode, err))
        if not re.search(r"^DENIED +clone3 with set_tid", out, re.M):
            raise Fail("ckpt check as nobody does not mark clone3 set_tid DENIED: %s" % out)
        if re.search(r"^MISSING +clone3", out, re.M) or "lacks" in err or "missing" in err:
            raise Fail("ckpt check as nobody blames the kernel: %s %s" % (out, err))
        if "ckpt run" not in err:
            raise Fail("ckpt check as nobody does not point to ckpt run: %r" % err)

    def flow_detach(self):
        """restart --detach prints the pid alone on a line and returns."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        r = self.run_ckpt(["restart", img, "--detach", "--log", self.p("restart.log")])
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0:
            raise Fail("restart --detach exit %d: %s" % (r.returncode, r.stderr.decode().strip()))
        if out != "%d\n" % self.pid:
            raise Fail("restart --detach printed %r, want the pid alone on a line" % out)
        if not pid_alive(self.pid):
            raise Fail("the detached process is not running")
        os.kill(self.pid, signal.SIGUSR1)
        self.expect_gone("SIGUSR1 to the detached process", grace=EXIT_TIMEOUT)
        self.check_result(0, "the detached process")

    # --- the death of ckpt ------------------------------------------------

    def flow_keep(self):
        """A checkpoint without --kill: the original runs on and checks
        itself; then the image is restarted and checks itself again."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr], kill=False)
        rc = self.wake_and_wait(pr, "the original after its checkpoint")
        self.check_result(rc, "the original after its checkpoint")
        self.reset_out()
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def fault_bin(self):
        b = os.path.join(os.path.dirname(os.path.abspath(self.opts.ckpt)), "ckpt-fault")
        if not os.access(b, os.X_OK):
            raise Fail("%s not built" % b)
        return b

    def victim_ids(self):
        """The victim's (pids that answer checks, every tid of the tree)."""
        with open(self.p("child")) as f:
            child, *threads = (int(x) for x in f.read().split())
        return [self.pid, child], [self.pid] + threads + [child]

    def ask_check(self, pids, what, sig=signal.SIGUSR2):
        """SIGUSR2 to each pid: each checks itself and answers in check-PID
        (SIGPROF: after a restart, takes its mappings as they are now first)."""
        def answer(pid):
            try:
                with open(self.p("check-%d" % pid)) as f:
                    return f.read()
            except OSError:
                return None
        # removed first: a restarted process counts from where its image did
        for pid in pids:
            if os.path.exists(self.p("check-%d" % pid)):
                os.unlink(self.p("check-%d" % pid))
        for pid in pids:
            os.kill(pid, sig)
        for pid in pids:
            deadline = time.monotonic() + 20
            while answer(pid) is None:
                if time.monotonic() > deadline:
                    st = ""
                    try:
                        with open("/proc/%d/status" % pid) as f:
                            st = " ".join(l.strip() for l in f if l.split(":")[0] in
                                          ("State", "TracerPid", "SigBlk"))
                    except OSError:
                        st = "gone"
                    raise Fail("%s: pid %d does not answer its check (%s)" % (what, pid, st))
                time.sleep(POLL)
            text = answer(pid)
            if "FAIL" in text:
                raise Fail("%s: pid %d: %s" % (what, pid, text[:1500]))

    def wait_untraced(self, tids, what, timeout=20):
        deadline = time.monotonic() + timeout
        for tid in tids:
            while True:
                try:
                    with open("/proc/%d/status" % tid) as f:
                        tracer = [l for l in f if l.startswith("TracerPid:")][0].split()[1]
                except OSError:
                    raise Fail("%s: task %d is gone" % (what, tid))
                if tracer == "0":
                    break
                if time.monotonic() > deadline:
                    raise Fail("%s: task %d still traced by %s" % (what, tid, tracer))
                time.sleep(POLL)

    def run_fault(self, args, fault, tag):
        """ckpt-fault ARGS with CKPT_FAULT=fault; (exit status, stderr)."""
        err = self.p(tag + ".err")
        env = dict(os.environ, CKPT_FAULT=fault)
        pr = subprocess.Popen([self.fault_bin()] + args, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=open(err, "wb"),
                              cwd=self.dir, env=env)
        self.procs.append(pr)
        self.wait_all([pr], CHECKPOINT_TIMEOUT, "ckpt-fault " + " ".join(args))
        return pr.returncode, tail(err, 20) or ""

    def fault_counts(self, text, what):
        m = re.search(r"ckpt-fault: (\d+) requests, (\d+) writes", text)
        if not m:
            raise Fail("%s: no counts from ckpt-fault: %s" % (what, text.strip()[-300:]))
        return int(m.group(1)), int(m.group(2))

    @staticmethod
    def points(total, most=250):
        step = max(1, -(-total // most))
        return list(range(1, total + 1, step))

    def wait_pids_free(self, tids, what, timeout=20):
        deadline = time.monotonic() + timeout
        while any(pid_exists(t) for t in tids):
            if time.monotonic() > deadline:
                left = [t for t in tids if pid_exists(t)]
                raise Fail("%s: pid(s) %s still exist" % (what, left))
            time.sleep(POLL)

    def flow_fault(self):
        """ckpt-fault killed at each request and write of a checkpoint: the
        tree runs on unharmed; at each of a restart: no pid stays taken."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        pids, tids = self.victim_ids()
        self.ask_check(pids, "before any checkpoint")
        img = self.p("img")
        pid = str(self.pid)
        rc, err = self.run_fault(["checkpoint", pid, "-o", img], "count", "count")
        if rc != 0:
            raise Fail("ckpt-fault checkpoint exit %d: %s" % (rc, err.strip()[-300:]))
        nreq, nwrite = self.fault_counts(err, "checkpoint")
        self.vlog("checkpoint: %d requests, %d writes" % (nreq, nwrite))
        self.ask_check(pids, "after a checkpoint")
        walk = [("request", n) for n in self.points(nreq, 80)]
        walk += [("write", n) for n in self.points(nwrite, 15)]
        for kind, n in walk:
            what = "ckpt killed at checkpoint %s %d of %d" % (
                kind, n, nreq if kind == "request" else nwrite)
            rc, err = self.run_fault(["checkpoint", pid, "-o", img], "%s:%d" % (kind, n), "walk")
            if rc != -signal.SIGKILL:
                raise Fail("%s: exit %s, not killed: %s" % (what, rc, err.strip()[-300:]))
            for f in (img, img + ".part"):
                if os.path.exists(f):
                    os.unlink(f)
            self.wait_untraced(tids, what)
            self.ask_check(pids, what)
        self.vlog("checkpoint walk: %d points" % len(walk))
        self.checkpoint(img, "ckpt", reap=[pr])
        self.wait_pids_free(tids, "checkpoint --kill")
        # a restart killed at each of its requests
        rc, err = self.run_fault(["restart", img, "--detach"], "count", "rcount")
        if rc != 0:
            raise Fail("ckpt-fault restart exit %d: %s" % (rc, err.strip()[-300:]))
        nreq, _ = self.fault_counts(err, "restart")
        self.ask_check(pids, "restarted once", signal.SIGPROF)
        for p_ in pids:
            os.kill(p_, signal.SIGKILL)
        self.wait_pids_free(tids, "restarted tree killed")
        # a restart takes longer: every phase, stepping, and its last requests
        walk = sorted(set(self.points(nreq, 15) + list(range(max(1, nreq - 6), nreq + 1))))
        for n in walk:
            what = "ckpt killed at restart request %d of %d" % (n, nreq)
            rc, err = self.run_fault(["restart", img, "--detach"], "request:%d" % n, "rwalk")
            if rc != -signal.SIGKILL:
                raise Fail("%s: exit %s, not killed: %s" % (what, rc, err.strip()[-300:]))
            self.wait_pids_free(tids, what)
        rp = self.restart(img, "restart")
        self.ask_check(pids, "restarted", signal.SIGPROF)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_puppet_paths(self):
        """The root's puppet: exec'd from ckpt's program of a few bytes
        (bare.S), and, under ckpt-fault with CKPT_FAULT=nobare (that exec
        fails), forked from ckpt. Each restart's log says which, and the
        restored processes check themselves from inside (maps, fds, signal
        mask and handlers, their thread and child)."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        pids, tids = self.victim_ids()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        self.wait_pids_free(tids, "checkpoint --kill")
        for tag, fault, want in (("bare", None, "a bare puppet, exec'd"),
                                 ("forked", "nobare", "a puppet forked from ckpt")):
            log = self.p(tag + ".log")
            args = ["restart", img, "--detach", "--log", log, "-v"]
            if fault:
                rc, err = self.run_fault(args, fault, tag)
            else:
                r = subprocess.run(self.ckpt_argv(*args, verbose=False), cwd=self.dir,
                                   stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                   timeout=CHECKPOINT_TIMEOUT)
                rc, err = r.returncode, r.stderr
            if rc != 0:
                raise Fail("restart (%s) exit %s: %s" % (tag, rc, err.strip()[-300:]))
            with open(log) as f:
                text = f.read()
            if ("pid %d: %s" % (self.pid, want)) not in text:
                raise Fail("restart (%s): the log does not say %r" % (tag, want))
            self.ask_check(pids, "restarted (%s)" % tag, signal.SIGPROF)
            for p_ in pids:
                os.kill(p_, signal.SIGKILL)
            self.wait_pids_free(tids, "restored tree (%s) killed" % tag)
        rp = self.restart(img, "restart")
        self.ask_check(pids, "restarted", signal.SIGPROF)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def lazy_left(self):
        """The pids of this test's lazy servers and guards still there."""
        return [d for d in os.listdir("/proc") if d.isdigit() and
                self.comm(int(d)) in ("ckpt-lazy", "ckpt-lazy-guard") and
                self.cmdline_has(d, self.dir)]

    def flow_lazy_server_dies(self):
        """restart --lazy under ckpt-fault (CKPT_FAULT=lazytask): the lazy
        server is killed as the task's memory comes to it, before it took
        it. The restart fails saying so and leaves nothing (before, the
        server's guard had nothing to kill and the task ran on with every
        page it owed read as zeros); then a plain restart passes."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        self.expect_gone("checkpoint --kill")
        rc, err = self.run_fault(["restart", img, "--lazy", "--detach", "--log",
                                  self.p("fault.log")], "lazytask", "fault")
        if rc == 0 or "did not take its memory" not in err:
            raise Fail("restart --lazy whose server died: exit %s, said %r (want a failure "
                       "naming the lazy server)" % (rc, err.strip()[-300:]))
        self.expect_gone("the failed restart")
        left = self.lazy_left()
        if left:
            raise Fail("lazy server processes left after the failed restart: %s" % left)
        rp = self.restart(img, "restart", extra=("--lazy",))
        rc = self.wake_and_wait(rp, "ckpt restart --lazy")
        self.check_result(rc, "ckpt restart --lazy")

    def flow_lazy_ckpt_dies(self):
        """ckpt-fault killing itself once the restarted tree runs, before it
        hands over (CKPT_FAULT=running). Lazy: the server never had ckpt's
        commit, so its guard kills the tree (before, the server ended and
        the tree ran on, every page it owed read as zeros), and no lazy
        process is left. Plain: the tree runs on and checks itself (ckpt's
        death after the release harms nothing)."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        self.expect_gone("checkpoint --kill")
        rc, err = self.run_fault(["restart", img, "--lazy", "--detach", "--log",
                                  self.p("lazy.log")], "running", "lazy")
        if rc != -signal.SIGKILL:
            raise Fail("restart --lazy under CKPT_FAULT=running: exit %s, want SIGKILL: %s"
                       % (rc, err.strip()[-300:]))
        self.expect_gone("ckpt's death before its lazy commit", grace=EXIT_TIMEOUT)
        self.until("the lazy server and its guard gone", lambda: not self.lazy_left())
        rc, err = self.run_fault(["restart", img, "--detach", "--log", self.p("plain.log")],
                                 "running", "plain")
        if rc != -signal.SIGKILL:
            raise Fail("restart under CKPT_FAULT=running: exit %s, want SIGKILL: %s"
                       % (rc, err.strip()[-300:]))
        if not pid_alive(self.pid):
            raise Fail("the tree did not run on after ckpt died once it ran")
        os.kill(self.pid, signal.SIGUSR1)
        self.expect_gone("SIGUSR1 to the tree ckpt left running", grace=EXIT_TIMEOUT)
        self.check_result(0, "the tree ckpt left running")

    def flow_fault_badip(self):
        """ckpt-fault running one injection (a system call or a batch) of a
        checkpoint, then of a restart, at an unmapped address, for each in
        turn (12 points of each walk): ckpt
        fails with a message (it does not step the fault for ever), the
        checkpointed tree runs on unharmed and untraced, a restart leaves no
        pid taken; then the real checkpoint and restart pass."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        pids, tids = self.victim_ids()
        img = self.p("img")
        pid = str(self.pid)

        def calls(args, tag):
            rc, err = self.run_fault(args, "count", tag)
            if rc != 0:
                raise Fail("ckpt-fault %s exit %d: %s" % (args[0], rc, err.strip()[-300:]))
            m = re.search(r"ckpt-fault: \d+ requests, \d+ writes, (\d+) injections", err)
            if not m:
                raise Fail("%s: no call count from ckpt-fault: %s" % (args[0], err.strip()[-300:]))
            return int(m.group(1))

        def refused(args, n, total, tag):
            what = "%s with injection %d of %d at a bad address" % (args[0], n, total)
            rc, err = self.run_fault(args, "badip:%d" % n, tag)
            if rc <= 0:
                raise Fail("%s: exit %s, not a failure: %s" % (what, rc, err.strip()[-300:]))
            if "failed" not in err and "cannot" not in err:
                raise Fail("%s: no message: %s" % (what, err.strip()[-300:]))
            return what

        ncalls = calls(["checkpoint", pid, "-o", img], "count")
        os.unlink(img)
        self.vlog("checkpoint: %d injections" % ncalls)
        if ncalls == 0:
            raise Fail("checkpoint made no injection: the walk tests nothing")
        for n in self.points(ncalls, 12):
            what = refused(["checkpoint", pid, "-o", img], n, ncalls, "walk")
            for f in (img, img + ".part"):
                if os.path.exists(f):
                    os.unlink(f)
            self.wait_untraced(tids, what)
            self.ask_check(pids, what)
        self.checkpoint(img, "ckpt", reap=[pr])
        self.wait_pids_free(tids, "checkpoint --kill")
        ncalls = calls(["restart", img, "--detach"], "rcount")
        if ncalls == 0:
            raise Fail("restart made no injection: the walk tests nothing")
        self.ask_check(pids, "restarted once", signal.SIGPROF)
        for p_ in pids:
            os.kill(p_, signal.SIGKILL)
        self.wait_pids_free(tids, "restarted tree killed")
        for n in self.points(ncalls, 12):
            what = refused(["restart", img, "--detach"], n, ncalls, "rwalk")
            self.wait_pids_free(tids, what)
        rp = self.restart(img, "restart")
        self.ask_check(pids, "restarted", signal.SIGPROF)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_netlock_fault(self):
        """ckpt-fault killed at each request of a checkpoint of a process
        whose TCP connection it locks (an nftables table in the process's
        network namespace): the guardian removes the lock, so the victim
        finds its connection passing both ways and no table left."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        pids = [self.pid]
        self.ask_check(pids, "before any checkpoint")
        img, pid, log = self.p("img"), str(self.pid), self.p("count.log")
        # refused today (TCP sockets are not saved yet) or saved: counted either way
        rc, err = self.run_fault(["checkpoint", pid, "-o", img, "--log", log], "count", "count")
        nreq, _ = self.fault_counts(err, "checkpoint")
        text = tail(log, 50) or ""
        m = re.search(r"network lock (ckpt_lock_\w+): \d+ connection\(s\) locked", text)
        if not m:
            raise Fail("the checkpoint locked no connection: %s" % text.strip()[-500:])
        self.vlog("checkpoint (rc %d): %d requests, lock %s" % (rc, nreq, m.group(1)))
        self.ask_check(pids, "after a checkpoint")
        for n in self.points(nreq, 60):
            what = "ckpt killed at checkpoint request %d of %d" % (n, nreq)
            rc, err = self.run_fault(["checkpoint", pid, "-o", img], "request:%d" % n, "walk")
            if rc != -signal.SIGKILL:
                raise Fail("%s: exit %s, not killed: %s" % (what, rc, err.strip()[-300:]))
            for f in (img, img + ".part"):
                if os.path.exists(f):
                    os.unlink(f)
            self.wait_untraced(pids, what)
            self.ask_check(pids, what)
        rc = self.wake_and_wait(pr, "the victim")
        self.check_result(rc, "the victim")

    def flow_fault_random(self):
        """ckpt killed (KILL, INT, TERM) at random moments of a larger
        checkpoint, and its -o - reader gone: the tree runs on unharmed."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start(args=["128"])
        self.wait_ready()
        pids, tids = self.victim_ids()
        self.ask_check(pids, "before any checkpoint")
        img = self.p("img")
        t0 = time.monotonic()
        self.checkpoint(img, "full", reap=[pr], kill=False)
        full = time.monotonic() - t0
        os.unlink(img)
        self.ask_check(pids, "after a checkpoint")
        rnd = random.Random()
        sigs = [signal.SIGKILL] * 4 + [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
        for i, sig in enumerate(sigs):
            delay = rnd.uniform(0, full)
            what = "ckpt sent %s after %.3f s of %.3f" % (signal.Signals(sig).name, delay, full)
            cp = self.popen(self.ckpt_argv("checkpoint", str(self.pid), "-o", img,
                                           verbose=False), err=self.p("rnd.err"))
            time.sleep(delay)
            cp.send_signal(sig)
            self.wait_all([cp], CHECKPOINT_TIMEOUT, what)
            for f in (img, img + ".part"):
                if os.path.exists(f):
                    os.unlink(f)
            self.wait_untraced(tids, what)
            self.ask_check(pids, what)
        # the reader of the stream goes away
        cp = subprocess.Popen(self.ckpt_argv("checkpoint", str(self.pid), "-o", "-",
                                             verbose=False),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=open(self.p("pipe.err"), "wb"), cwd=self.dir)
        self.procs.append(cp)
        cp.stdout.read(100000)
        cp.stdout.close()
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint -o - with its reader gone")
        msg = tail(self.p("pipe.err"), 5) or ""
        if cp.returncode != 1 or "closed" not in msg:
            raise Fail("checkpoint -o - with its reader gone: exit %s, said %r (want 1 and "
                       "the stream closed)" % (cp.returncode, msg.strip()))
        self.wait_untraced(tids, "reader of -o - gone")
        self.ask_check(pids, "reader of -o - gone")
        self.checkpoint(img, "ckpt", reap=[pr])
        rp = self.restart(img, "restart")
        self.ask_check(pids, "restarted", signal.SIGPROF)
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def flow_frozen(self):
        """restart --frozen: stopped until SIGCONT, then it carries on."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        pidfile, err = self.p("restart.pid"), self.p("restart.err")
        self.logs.append(err)
        rp = self.popen(self.ckpt_argv("restart", img, "--frozen", "--pidfile", pidfile),
                        err=err)
        deadline = time.monotonic() + PIDFILE_TIMEOUT
        while not os.path.exists(pidfile):
            if rp.poll() is not None or time.monotonic() > deadline:
                raise Fail("restart --frozen: no pidfile (%s)" % (tail(err, 3) or "").strip())
            time.sleep(POLL)
        os.kill(self.pid, signal.SIGUSR1)  # stays pending while stopped
        time.sleep(0.5)
        with open("/proc/%d/stat" % self.pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state != "T":
            raise Fail("restart --frozen: state %s, want T (stopped)" % state)
        if "PASS" in self.out():
            raise Fail("the frozen process ran")
        os.kill(self.pid, signal.SIGCONT)
        self.wait_all([rp], EXIT_TIMEOUT, "ckpt restart --frozen after SIGCONT")
        self.check_result(rp.returncode, "ckpt restart --frozen")

    def flow_stream(self):
        """checkpoint -o - | restart -: the image is a stream (key=True: sealed)."""
        if self.opts.no_ckpt:
            return self.native()
        key = ["--key", self.keygen("key")] if self.t.get("key") else []
        pr = self.start()
        self.wait_ready()
        cerr, rerr, pidfile = self.p("ckpt.err"), self.p("restart.err"), self.p("restart.pid")
        self.logs += [cerr, rerr]
        with open(cerr, "wb") as ce, open(rerr, "wb") as re_:
            cp = subprocess.Popen(self.ckpt_argv("checkpoint", str(self.pid), "-o", "-", "--kill",
                                                 *key),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=ce,
                                  cwd=self.dir)
            rp = subprocess.Popen(self.ckpt_argv("restart", "-", "--pidfile", pidfile, *key,
                                                 *self.t.get("rst_args", ())),
                                  stdin=cp.stdout, stdout=subprocess.DEVNULL, stderr=re_,
                                  cwd=self.dir)
        cp.stdout.close()
        self.procs += [cp, rp]
        deadline = time.monotonic() + CHECKPOINT_TIMEOUT + PIDFILE_TIMEOUT
        while not os.path.exists(pidfile):
            pr.poll()
            if rp.poll() is not None or time.monotonic() > deadline:
                raise Fail("checkpoint -o - | restart -: no pidfile (ckpt %s, restart %s)"
                           % (cp.poll(), rp.poll()))
            time.sleep(POLL)
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint -o -", reap=[pr])
        if cp.returncode != 0:
            raise Fail("checkpoint -o - exit %d" % cp.returncode)
        rc = self.wait_exit(rp, "ckpt restart -")
        self.check_result(rc, "ckpt restart -")

    def lazy_restart_killed(self, img, tag, must):
        """restart --lazy of a damaged img: the server finds the damage as it
        fills, says so (must, a regex, in the log) and the guard kills the
        restored process (ckpt restart exits 137); nothing is left."""
        rp = self.restart(img, tag, extra=("--lazy",))
        self.wait_all([rp], EXIT_TIMEOUT, "ckpt restart --lazy")
        if rp.returncode != 128 + signal.SIGKILL:
            raise Fail("ckpt restart --lazy of a damaged image exited %s, want 137"
                       % rp.returncode)
        with open(self.p(tag + ".log"), errors="replace") as f:
            text = f.read()
        if not re.search(must, text):
            raise Fail("the log does not say /%s/" % must)
        self.expect_gone("the damaged image's server stopped")

    def flow_lazy_damaged(self):
        """restart --lazy of an image whose page bytes are damaged (compress:
        a byte inside a zstd frame): the checksum is checked by the server
        before it uses the record, which finds it, says so, and the guard
        kills the restored process."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        z = self.t.get("compress")
        self.checkpoint(img, "ckpt", reap=[pr], extra=("--compress",) if z else ())
        with open(img, "rb") as f:
            data = bytearray(f.read())
        if z:  # the middle of the largest zstd frame
            _, _, off, length, zlen = max(zstd_records(data), key=lambda r: r[3])
            at = off + zlen // 2
        else:  # a byte in the middle: the big region's pages
            at = len(data) // 2
        data[at] ^= 0x5a
        with open(img, "wb") as f:
            f.write(data)
        self.lazy_restart_killed(img, "restart", r"pid %d: its memory at [0-9a-f]+ cannot be "
                                 r"served: .*damaged \(data checksum mismatch\)" % self.pid)

    def flow_lazy_forged(self):
        """restart --lazy of a compressed image forged with good checksums:
        a frame length that is not the frame's is refused before anything is
        made, naming the record; a frame whose content checksum is wrong
        passes every check at load and fails when the server decompresses
        it: the log names the process and the address, the guard kills it."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr], extra=("--compress",))
        with open(img, "rb") as f:
            good = f.read()
        frame, off, length, zlen = max(zstd_records(good), key=lambda r: r[3])[1:]
        data = bytearray(good)
        struct.pack_into("<Q", data, off + length - 24, zlen + 8)  # the table's zlen
        struct.pack_into("<I", data, frame + 20, crc32c_fast(bytes(data[off:off + length])))
        # the record alone: the image's index still has its old frame and
        # table, which the load takes; the server compares them with the
        # record before it uses it, and the guard kills the process
        with open(self.p("img-zlen-stale"), "wb") as f:
            f.write(data)
        self.lazy_restart_killed(self.p("img-zlen-stale"), "restart-stale",
                                 r"pid %d: its memory at [0-9a-f]+ cannot be served: .*is not "
                                 r"what the image's index says" % self.pid)
        # an index entry that names no record (in order, its checksum good):
        # refused at load (an index that does not hold together is not used:
        # every frame is read then)
        stale = bytearray(good)
        _, iframe, _, _, ioff, ilen = [r for r in walk_image(good) if r[2] == INDEX][0]
        struct.pack_into("<Q", stale, ioff, struct.unpack_from("<Q", stale, ioff)[0] - 8)
        struct.pack_into("<I", stale, iframe + 20, crc32c_fast(bytes(stale[ioff:ioff + ilen])))
        with open(self.p("img-index"), "wb") as f:
            f.write(stale)
        self.refused_restart(self.p("img-index"), "an index entry that names no record",
                             r"the image's index names a record at offset \d+, which is not "
                             r"where a record starts", extra=["--lazy"])
        # the index too, as whoever can write the file would: refused at load
        reindex(data, frame)
        with open(self.p("img-zlen"), "wb") as f:
            f.write(data)
        self.refused_restart(self.p("img-zlen"), "a forged frame length",
                             r"record \d+ \(mm/pages\): damaged", extra=["--lazy"])
        data = bytearray(good)
        for i in range(off + zlen - 4, off + zlen):  # the frame's content checksum
            data[i] ^= 0x5a
        struct.pack_into("<I", data, frame + 20, crc32c_fast(bytes(data[off:off + length])))
        reindex(data, frame)
        with open(img, "wb") as f:
            f.write(data)
        self.lazy_restart_killed(img, "restart", r"pid %d: its memory at [0-9a-f]+ cannot be "
                                 r"served: its compressed pages do not decompress" % self.pid)

    def lazy_chain(self, pr, extra):
        """mem_incr's chain (flow_incr): image 0 (--track), image 1 (--parent
        image 0), image 2 (--parent image 1, --kill); the three paths."""
        imgs = [self.p("img%d" % i) for i in range(3)]
        self.checkpoint(imgs[0], "ckpt0", reap=[pr], kill=False, extra=["--track", *extra])
        os.kill(self.pid, signal.SIGUSR1)
        self.wait_file("step1", pr)
        self.checkpoint(imgs[1], "ckpt1", reap=[pr], kill=False,
                        extra=["--parent", imgs[0], "--track", *extra])
        os.kill(self.pid, signal.SIGUSR1)
        self.wait_file("step2", pr)
        self.checkpoint(imgs[2], "ckpt2", reap=[pr], extra=["--parent", imgs[1], *extra])
        return imgs

    def flow_lazy_chain(self):
        """restart --lazy of the newest image of a chain of three (compress:
        each made with --compress): every page comes from the newest image
        that has it, served by the lazy server; checked from inside."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        z = ["--compress"] if self.t.get("compress") else []
        imgs = self.lazy_chain(pr, z)
        if z and not zstd_records(open(imgs[0], "rb").read()):
            raise Fail("--compress: image 0 has no compressed page record")
        rp = self.restart(imgs[2], "restart", extra=("--lazy",))
        with open(self.p("restart.log"), errors="replace") as f:
            if "memory is served by pid" not in f.read():
                raise Fail("restart --lazy started no lazy server")
        rc = self.wait_exit(rp, "ckpt restart --lazy")
        self.check_result(rc, "ckpt restart --lazy")

    def flow_lazy_chain_damaged(self):
        """restart (--lazy with rst_args) of a chain with a damaged page
        record: in the parent (every parent is checked whole) or in the
        newest image (its own records are checked before the chain's pages
        are put together), the restart is refused, naming it, and nothing
        it made is left; with the chain mended it restarts."""
        if self.opts.no_ckpt:
            return self.native()
        extra = list(self.t.get("rst_args", ()))
        pr = self.start()
        self.wait_ready()
        newest = (r"pid %d: the image's pages at [0-9a-f]+ are damaged" % self.pid
                  if "--lazy" in extra else
                  r"record \d+ at offset \d+ \(mm/pages of pid %d\): data checksum mismatch"
                  % self.pid)
        imgs = self.lazy_chain(pr, [])
        for which, must in ((1, r"parent image .*img1: record \d+: data checksum mismatch"),
                            (2, newest)):
            with open(imgs[which], "rb") as f:
                good = f.read()
            r = max(walk_image(good)[:-1], key=lambda r: r[5])
            data = bytearray(good)
            data[r[4] + r[5] // 3] ^= 0x5a
            with open(imgs[which], "wb") as f:
                f.write(data)
            self.refused_restart(imgs[2], "restart %s, image %d damaged" % (extra, which),
                                 must, extra=extra)
            with open(imgs[which], "wb") as f:
                f.write(good)
        rp = self.restart(imgs[2], "restart", extra=extra)
        rc = self.wait_exit(rp, "ckpt restart %s" % extra)
        self.check_result(rc, "ckpt restart %s" % extra)

    def flow_lazy_killed(self):
        """restart --lazy, and the lazy server SIGKILLed as soon as the process
        runs: its guard kills the restored tree (it says so in the log), or,
        if the guard did not (the fill was done first), the memory is whole."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        rp = self.restart(img, "restart", extra=("--lazy",))
        with open(self.p("restart.log"), errors="replace") as f:
            m = re.search(r"memory is served by pid (\d+)", f.read())
        if not m:
            raise Fail("restart --lazy does not name its server in the log")
        try:
            os.kill(int(m.group(1)), signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + EXIT_TIMEOUT
        while True:
            with open(self.p("restart.log"), errors="replace") as f:
                text = f.read()
            killed = "the restored processes are killed" in text
            if killed or "all pages in" in text or rp.poll() is not None:
                break
            if time.monotonic() > deadline:
                raise Fail("neither the guard nor the server said anything")
            time.sleep(POLL)
        if killed:
            self.wait_all([rp], EXIT_TIMEOUT, "ckpt restart --lazy")
            if rp.returncode != 128 + signal.SIGKILL:
                raise Fail("the guard killed the tree, yet ckpt restart exited %s"
                           % rp.returncode)
            self.expect_gone("its lazy server was killed")
            self.vlog("the server was killed mid-fill: the tree is gone")
            return
        self.vlog("the fill was done before the kill: the process must be whole")
        rc = self.wait_exit(rp, "ckpt restart --lazy")
        self.check_result(rc, "ckpt restart --lazy")

    def keygen(self, name):
        """ckpt keygen: a new key file in the test directory; checks its mode."""
        path = self.p(name)
        r = self.run_ckpt(["keygen", path])
        if r.returncode != 0:
            raise Fail("ckpt keygen exit %d: %s" % (r.returncode, r.stderr.decode().strip()))
        st = os.lstat(path)
        if st.st_mode & 0o7777 != 0o600 or st.st_size != 32:
            raise Fail("key file mode %o, %d bytes; want 600 and 32"
                       % (st.st_mode & 0o7777, st.st_size))
        return path

    def refused_restart(self, img, what, must, key=None, pid_free=True, extra=()):
        """ckpt restart of img must fail with a message matching must, before
        anything is built: no pidfile, the image's pid free, and the log
        never got as far as "image validated"."""
        tag = "refused-%d" % len(self.logs)
        pidfile, log = self.p(tag + ".pid"), self.p(tag + ".log")
        self.logs.append(log)
        r = self.run_ckpt(["restart", img, "--pidfile", pidfile, "--log", log]
                          + (["--key", key] if key else []) + list(extra), timeout=60)
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode == 0 or os.path.exists(pidfile):
            if pid_free and pid_exists(self.pid) and self.ours(self.pid):
                os.kill(self.pid, signal.SIGKILL)
            raise Fail("%s: restarted (exit %d), expected a refusal" % (what, r.returncode))
        self.expect_error(r, what)
        if not re.search(must, err, re.I):
            raise Fail("%s: message %r does not match /%s/" % (what, err.strip(), must))
        if "image validated" in (tail(log, 200) or ""):
            raise Fail("%s: refused only after the image was used" % what)
        if pid_free and pid_exists(self.pid):
            raise Fail("%s: pid %d exists after the refusal" % (what, self.pid))

    def flow_key(self):
        """--key: checkpoint --kill sealed with one key; restart refuses no key,
        another key, a truncated or modified image and a plain image; the
        right key restores it, verified from inside."""
        if self.opts.no_ckpt:
            return self.native()
        k1, k2 = self.keygen("k1"), self.keygen("k2")
        # keygen never overwrites, nor follows a symlink
        os.symlink(self.p("target"), self.p("link"))
        for path in (k1, self.p("link")):
            r = self.run_ckpt(["keygen", path])
            self.expect_error(r, "keygen over " + os.path.basename(path), must=["exists"])
        if os.path.lexists(self.p("target")):
            raise Fail("keygen followed a symlink")
        with open(k1, "rb") as f:
            key1 = f.read()
        pr = self.start()
        self.wait_ready()
        # a key others can read is refused, before the program is touched
        with open(self.p("k-open"), "wb") as f:
            f.write(key1)
        os.chmod(self.p("k-open"), 0o644)
        rc, err = self.checkpoint(self.p("img-open"), "ckpt-open", reap=[pr], expect_ok=False,
                                  extra=["--key", self.p("k-open")])
        if rc == 0 or not re.search(r"other users.*0644", err):
            raise Fail("checkpoint --key with a 0644 key file: exit %d: %s" % (rc, err.strip()))
        if not pid_alive(self.pid) or os.path.exists(self.p("img-open")):
            raise Fail("the refused checkpoint --key killed the program or left an image")

        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr], extra=["--key", k1])
        with open(img, "rb") as f:
            data = f.read()
        if not data.startswith(b"CKPTSEAL") or b"CKPTIMG" in data or key1 in data:
            raise Fail("the image is not sealed (or holds the key)")
        for lg in (self.p("ckpt.log"),):
            with open(lg, "rb") as f:
                if key1 in f.read():
                    raise Fail("the key is in the log")
        self.refused_restart(img, "restart without --key", r"encrypted: use --key")
        self.refused_restart(img, "restart with another key", r"not made with this key", key=k2)
        # the chunks are 256 KiB + 17 after a 64-byte header (seal.h)
        auth, final = r"chunk \d+ fails authentication", r"without its final chunk"
        bad = {
            "half": (data[:len(data) // 2], auth),
            "last-byte-cut": (data[:-1], auth),
            "last-chunk-cut": (data[:64 + (len(data) - 64) // (262144 + 17) * (262144 + 17)],
                               final),
            "modified": (data[:len(data) // 3] + bytes([data[len(data) // 3] ^ 1])
                         + data[len(data) // 3 + 1:], auth),
        }
        for kind, (content, must) in bad.items():
            path = self.p("img-" + kind)
            with open(path, "wb") as f:
                f.write(content)
            self.refused_restart(path, "restart of a %s image" % kind, must, key=k1)
        r = self.run_ckpt(["inspect", img])
        self.expect_error(r, "inspect without --key", must=["encrypted"])
        r = self.run_ckpt(["inspect", img, "--records", "--key", k1], verbose=False)
        if r.returncode != 0 or b"record 0" not in r.stdout:
            raise Fail("inspect --key: exit %d: %s" % (r.returncode, r.stderr.decode().strip()))

        rp = self.restart(img, "restart", extra=["--key", k1])
        # a plain image of the restored program, with --key: refused
        self.checkpoint(self.p("plain"), "ckpt-plain", reap=[rp], kill=False)
        self.refused_restart(self.p("plain"), "restart of a plain image with --key",
                             r"not encrypted", key=k1, pid_free=False)
        rc = self.wait_exit(rp, "ckpt restart --key")
        self.check_result(rc, "ckpt restart --key")

    def compress_no_room(self, pr):
        """checkpoint --compress --kill to a tmpfs of 2 MiB, too small for
        the image (the compressed text alone takes more, so the write fails
        while frames are made and written by the store's threads): it fails
        saying so, no image is left, and the program lives on (its memory
        is checked after the restart of the checkpoint that follows)."""
        small = self.small_tmpfs("small", "2m")
        try:
            rc, err = self.checkpoint(os.path.join(small, "img"), "ckpt-full", reap=[pr],
                                      expect_ok=False, extra=["--compress"])
            left = os.listdir(small)
        finally:
            subprocess.run(["umount", small], capture_output=True, timeout=30)
        if rc == 0 or not re.search(r"no space left on device", err, re.I):
            raise Fail("checkpoint --compress to a full tmpfs: exit %d: %r" % (rc, err[-300:]))
        if left:
            raise Fail("the failed checkpoint left %r" % left)
        if not pid_alive(self.pid) or pr.poll() is not None:
            raise Fail("the program did not survive the failed checkpoint --kill")

    def flow_compress(self):
        """--compress: an image of text-like memory (24 MiB anonymous, a 4 MiB
        memfd) and 4 MiB of random bytes is much smaller than without; the
        random pages stay plain (the image holds them whole); inspect shows
        the pages' size in memory and in the image; the restored program
        checks its memory. Then compressed and sealed (--key): as small,
        restored with the key, checked again."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        plain, img = self.p("plain"), self.p("img")
        self.compress_no_room(pr)
        self.checkpoint(plain, "ckpt-plain", reap=[pr], kill=False)
        self.checkpoint(img, "ckpt", reap=[pr], extra=["--compress"])
        ps, zs = os.path.getsize(plain), os.path.getsize(img)
        self.vlog("image %d bytes plain, %d compressed" % (ps, zs))
        if ps < 32 * MiB or zs > ps // 3:
            raise Fail("--compress: image of %d bytes, %d without: not much smaller" % (zs, ps))
        if zs < 4 * MiB:
            raise Fail("--compress: image of %d bytes: smaller than the random pages" % zs)
        with open(self.p("ckpt.log"), errors="replace") as f:
            m = re.search(r"pages: (\d+) bytes stored as (\d+) \(zstd: (\d+) of (\d+) records",
                          f.read())
        if not m or int(m.group(3)) == 0 or int(m.group(3)) == int(m.group(4)):
            raise Fail("the checkpoint log does not say that some records (not all) were "
                       "compressed: %s" % (m.group(0) if m else "no pages line"))
        r = self.run_ckpt(["inspect", img])
        out = r.stdout.decode(errors="replace")
        m = re.search(r"pages: (\S+ \S+) in memory, (\S+ \S+) in the image, zstd: (\d+) of "
                      r"(\d+) records compressed", out)
        if r.returncode != 0 or not m or int(m.group(3)) == 0:
            raise Fail("inspect does not show compressed pages: %s" % out[-400:])
        r = self.run_ckpt(["inspect", plain])
        if "records compressed" in r.stdout.decode(errors="replace"):
            raise Fail("inspect of a plain image says zstd")
        self.forged_frame(img)
        rp = self.restart(img, "restart")
        # compress, then seal: as small, and restored with the key
        key, sealed = self.keygen("k"), self.p("img-key")
        self.checkpoint(sealed, "ckpt-key", reap=[rp], extra=["--compress", "--key", key])
        self.wait_all([rp], 10, "the first ckpt restart, after its process was killed")
        ks = os.path.getsize(sealed)
        with open(sealed, "rb") as f:
            if not f.read(8).startswith(b"CKPTSEAL"):
                raise Fail("--compress --key: the image is not sealed")
        if ks > zs + zs // 20 + 65536:
            raise Fail("--compress --key: sealed image of %d bytes, %d unsealed" % (ks, zs))
        rp = self.restart(sealed, "restart-key", extra=["--key", key])
        rc = self.wait_exit(rp, "ckpt restart --key")
        self.check_result(rc, "ckpt restart --key")

    def flow_incr(self):
        """Incremental checkpoints: --track (image 0, the process runs on),
        the program writes; --parent image 0 --track (image 1), it writes
        again; a stale parent (image 0) is refused; --parent image 1 --kill
        (image 2). Images 1 and 2 are small (their written pages only, image
        0 holds 32 MiB); inspect shows the chain; restart of image 2 with
        image 1 replaced by another image is refused; with the chain in place
        the program finds every page as it last wrote it. Case lazy: the
        last restart is --lazy (the server serves the pages of the whole
        chain)."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img0, img1, img2 = self.p("img0"), self.p("img1"), self.p("img2")
        self.checkpoint(img0, "ckpt0", reap=[pr], kill=False, extra=["--track"])
        os.kill(self.pid, signal.SIGUSR1)
        self.wait_file("step1", pr)
        self.checkpoint(img1, "ckpt1", reap=[pr], kill=False,
                        extra=["--parent", img0, "--track"])
        os.kill(self.pid, signal.SIGUSR1)
        self.wait_file("step2", pr)
        rc, err = self.checkpoint(self.p("stale"), "ckpt-stale", reap=[pr], kill=False,
                                  expect_ok=False, extra=["--parent", img0])
        if rc == 0 or "is not the image of its last tracked checkpoint" not in err:
            raise Fail("checkpoint --parent with a stale parent: exit %d: %s"
                       % (rc, err.strip()[-300:]))
        self.checkpoint(img2, "ckpt2", reap=[pr], extra=["--parent", img1])
        s0, s1, s2 = (os.path.getsize(i) for i in (img0, img1, img2))
        self.vlog("images: %d, %d, %d bytes" % (s0, s1, s2))
        if s0 < 32 * MiB or s1 > 4 * MiB or s2 > 2 * MiB:
            raise Fail("images of %d, %d and %d bytes: the children are not small"
                       % (s0, s1, s2))
        r = self.run_ckpt(["inspect", img2])
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0 or img1 not in out or img0 not in out:
            raise Fail("inspect does not show the chain: %s" % out[-600:])
        # image 1 replaced by another image: refused, nothing built
        os.rename(img1, img1 + ".kept")
        shutil.copyfile(img0, img1)
        self.refused_restart(img2, "restart with a replaced parent", r"not the parent")
        os.replace(img1 + ".kept", img1)
        lazy = self.t.get("case") == "lazy"
        rp = self.restart(img2, "restart", extra=("--lazy",) if lazy else ())
        rc = self.wait_exit(rp, "ckpt restart")
        if lazy and not re.search(r"lazy: memory is served by pid \d+",
                                  open(self.p("restart.log"), errors="replace").read()):
            raise Fail("restart --lazy did not start a lazy server")
        self.check_result(rc, "ckpt restart")

    def flow_incr_busy(self):
        """The pre-copy inside a checkpoint --parent (mm-dirty.c): image 0
        (--track); the program rewrites its still pages and writes its busy
        ones round and round; image 1 (--parent image 0 --kill) by ckpt-fault,
        which after the pre-copy waits until the program wrote every busy page
        again (CKPT_FAULT=precopy:PATH). The log must show the still pages
        taken from the pre-copy and the busy ones read again; restarted, the
        program finds each busy page as its last write, each still page
        as it rewrote it and each late page (written after the pre-copy,
        before the freeze) as it wrote it. Case undo: image 1 (without
        --kill) is refused after its pre-copy and its scan at the freeze
        (the program's own userfaultfd) and must put the tracking back;
        once the program closed it, image 2 (--parent image 0 --kill) is
        the one restarted. Case runs: image 1 without --kill (its scan at
        the freeze write-protects); the program is killed, image 1
        restarted."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        img0, img1 = self.p("img0"), self.p("img1")
        self.checkpoint(img0, "ckpt0", reap=[pr], kill=False, extra=["--track"])
        os.kill(self.pid, signal.SIGUSR1)
        self.wait_file("step1", pr)
        log, err = self.p("ckpt1.log"), self.p("ckpt1.err")
        self.logs += [err, log]
        # undo and runs: image 1 write-protects what its scan at the freeze
        # finds written (no --kill)
        runs = self.t.get("case") in ("undo", "runs")
        argv = self.ckpt_argv("checkpoint", str(self.pid), "-o", img1,
                              *([] if runs else ["--kill"]), "--log", log, "--parent", img0)
        argv[0] = self.fault_bin()
        cp = self.popen(argv, err=err, out=self.p("ckpt1.out"),
                        env=dict(os.environ, CKPT_FAULT="precopy:" + self.p("rewritten")))
        self.wait_all([cp], CHECKPOINT_TIMEOUT, "ckpt checkpoint", reap=[pr])
        etext = (tail(err, 20) or "").strip()
        if self.t.get("case") == "undo":
            # refused after its pre-copy (the program's own userfaultfd)
            text = open(log, errors="replace").read()
            if cp.returncode == 0 or "[userfaultfd] files are not supported" not in etext or \
                    "tracking put back as it was after the failure" not in text:
                raise Fail("checkpoint --parent refused after its pre-copy: exit %d: %s"
                           % (cp.returncode, etext[-300:]))
            with open(self.p("unblock"), "w"):
                pass
            self.wait_file("unblocked", pr)
            img1, log = self.p("img2"), self.p("ckpt2.log")
            self.checkpoint(img1, "ckpt2", reap=[pr], extra=["--parent", img0])
        elif cp.returncode != 0:
            raise Fail("checkpoint --parent: exit %d: %s" % (cp.returncode, etext))
        elif runs:
            os.kill(self.pid, signal.SIGKILL)
            self.wait_all([pr], 10, "the program, killed after image 1")
        text = open(log, errors="replace").read()
        m = re.search(r"of its pre-copy, (\d+) KiB not written since taken from it, (\d+) KiB "
                      r"read again", text)
        if not m or int(m.group(1)) < 1024 or int(m.group(2)) < 1024 and not \
                self.t.get("case") == "undo":
            raise Fail("the pre-copy did not give the still pages (1 MiB) and leave the "
                       "busy ones (1 MiB) to the freeze: %r" % (m.group(0) if m else None))
        rp = self.restart(img1, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    def forged_frame(self, img):
        """A copy of img whose smallest compressed page record has a damaged
        zstd frame and a good checksum (what a forger makes): restart fails
        naming it, and leaves nothing behind (the unit test test-pages-z
        goes through 3000 such frames)."""
        with open(img, "rb") as f:
            data = bytearray(f.read())
        recs = [r for r in walk_image(bytes(data))
                if r[2] != TRAILER and r[5] >= 40
                and data[r[4] + r[5] - 16:r[4] + r[5] - 12] == b"PGZ1"]
        if not recs:
            raise Fail("--compress: no compressed page record (PGZ1) in the image")
        _, frame, _, _, off, length = min(recs, key=lambda r: r[5])
        zlen = struct.unpack_from("<Q", data, off + length - 24)[0]
        for i in range(off + zlen // 4, off + zlen // 2):
            data[i] ^= 0x5a
        struct.pack_into("<I", data, frame + 20, crc32c_fast(bytes(data[off:off + length])))
        bad, pidfile = self.p("img-forged"), self.p("forged.pid")
        with open(bad, "wb") as f:
            f.write(data)
        r = self.run_ckpt(["restart", bad, "--pidfile", pidfile, "--log", self.p("forged.log")],
                          timeout=60)
        self.logs.append(self.p("forged.log"))
        err = r.stderr.decode("utf-8", "replace")
        if r.returncode == 0 or os.path.exists(pidfile):
            raise Fail("a damaged zstd frame was restarted (exit %d)" % r.returncode)
        # refused at load if the damage breaks the frame's block structure,
        # else as the pages are written
        if not re.search(r"record \d+ \((mm/pages|memfd/contents)\): damaged|"
                         r"(pid %d|file '[^']*'): .*compressed pages do not decompress"
                         % self.pid, err):
            raise Fail("a damaged zstd frame: message %r" % err.strip())
        self.expect_gone("the restart of a damaged zstd frame failed")

    def wait_ready_file(self, proc):
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                with open(self.p("ready")) as f:
                    data = f.read()
                if data.endswith("\n"):
                    return int(data)
            except (OSError, ValueError):
                pass
            if proc.poll() is not None:
                raise Fail("exited before ready: status %s: %s" % (proc.returncode,
                                                                   self.out().strip()[-300:]))
            if time.monotonic() > deadline:
                raise Fail("not ready after %.0f s" % READY_TIMEOUT)
            time.sleep(POLL)

    def flow_shell_job(self):
        """A job of a shell on a terminal outside the tree: checkpoint
        --shell-job, restart --shell-job from another terminal (a pty
        whose session ckpt restart leads), which the job must be the
        foreground job of; then a line is typed there."""
        m1, s1 = os.openpty()
        set_winsize(m1, 24, 80)
        env = dict(os.environ, CKPT_TEST_DIR=self.dir)
        out = os.open(self.p("out.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.logs.append(self.p("out.log"))
        try:
            sh = subprocess.Popen([self.opts.python, "-c", SHELL_JOB, os.ttyname(s1)]
                                  + self.program_argv(), stdin=subprocess.DEVNULL, stdout=out,
                                  stderr=out, cwd=self.dir, env=env)
        finally:
            os.close(out)
            os.close(s1)
        self.procs.append(sh)
        m2 = None
        try:
            self.pid = self.wait_ready_file(sh)
            if self.opts.no_ckpt:
                os.write(m1, b"typed\n")
                set_winsize(m1, 50, 150)
                rc = self.wake_and_wait(sh, "the shell's job")
                return self.check_result(rc, "the shell's job")
            # without --shell-job: refused by pid, naming the option
            rc, err = self.checkpoint(self.p("img0"), "ckpt0", reap=[sh], expect_ok=False)
            if rc == 0 or rc >= 128 or not re.search(r"\bpid %d\b.*outside.*--shell-job" % self.pid,
                                                     err):
                raise Fail("checkpoint without --shell-job: exit %d: %s" % (rc, err.strip()))
            if not pid_alive(self.pid):
                raise Fail("the job is gone after the refused checkpoint")
            self.checkpoint(self.p("img"), "ckpt", reap=[sh], extra=["--shell-job"])
            m2, s2 = os.openpty()
            set_winsize(m2, 50, 150)
            pidfile, err = self.p("restart.pid"), self.p("restart.err")
            self.logs += [err, self.p("restart.log")]
            with open(err, "wb") as e:
                rp = subprocess.Popen(self.ckpt_argv("restart", self.p("img"), "--shell-job",
                                                     "--pidfile", pidfile, "--log",
                                                     self.p("restart.log")),
                                      stdin=s2, stdout=e, stderr=e, cwd=self.dir,
                                      start_new_session=True, preexec_fn=ctty_stdin)
            os.close(s2)
            self.procs.append(rp)
            deadline = time.monotonic() + PIDFILE_TIMEOUT
            while not os.path.exists(pidfile):
                if rp.poll() is not None or time.monotonic() > deadline:
                    raise Fail("restart --shell-job: no pidfile (%s)" % (tail(err, 3) or "").strip())
                time.sleep(POLL)
            os.write(m2, b"typed\n")
            rc = self.wake_and_wait(rp, "ckpt restart --shell-job")
            self.check_result(rc, "ckpt restart --shell-job")
        finally:
            os.close(m1)
            if m2 is not None:
                os.close(m2)

    # --- real terminal programs: tmux, screen --------------------------------

    def tool(self, argv, timeout=20, env=None, check=True):
        """Runs a tmux/screen command (a client outside the tree); its stdout."""
        self.vlog("$ " + " ".join(argv))
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, cwd=self.dir,
                               timeout=timeout, env=env or self.tool_env)
        except subprocess.TimeoutExpired:
            raise Fail("%s hung" % " ".join(argv))
        if check and r.returncode != 0:
            raise Fail("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                             r.stderr.decode(errors="replace").strip()))
        return r.stdout.decode(errors="replace")

    def until(self, what, fn, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            v = fn()
            if v:
                return v
            if time.monotonic() > deadline:
                raise Fail("timed out waiting for %s" % what)
            time.sleep(0.05)

    def restart_daemon(self, img, tag):
        """restart --detach of a daemon (its parent becomes init); its pid."""
        log = self.p(tag + ".log")
        self.logs.append(log)
        r = self.run_ckpt(["restart", img, "--detach", "--log", log], timeout=60)
        if r.returncode != 0:
            raise Fail("restart --detach exit %d: %s" % (r.returncode,
                                                          r.stderr.decode(errors="replace").strip()))
        got = int(r.stdout.decode().strip() or 0)
        if got != self.pid:
            raise Fail("restored pid %d, original %d" % (got, self.pid))
        return got

    def cycle(self, what):
        """Checkpoint --kill the daemon self.pid and restart it (twice in mode T)."""
        for i in range(2 if self.mode == T else 1):
            sfx = str(i + 1) if i else ""
            img = self.p("img" + sfx)
            self.checkpoint(img, "ckpt" + sfx, reap=[])
            self.notes.append("%s restored" % what) if i == 0 else None
            self.restart_daemon(img, "restart" + sfx)

    def kill_daemon(self):
        if self.pid and pid_alive(self.pid):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass

    def tmux_attach(self, tmux, text):
        """tmux attach on a pty of our own: the screen shows text; detach-client ends it."""
        m, s = os.openpty()
        set_winsize(m, 24, 80)
        try:
            cl = subprocess.Popen(tmux + ["attach", "-t", "t"], stdin=s, stdout=s, stderr=s,
                                  cwd=self.dir, env=self.tool_env, start_new_session=True,
                                  preexec_fn=ctty_stdin)
            self.procs.append(cl)
            os.close(s)
            s = -1
            seen = b""
            deadline = time.monotonic() + 10
            while text.encode() not in seen:
                if time.monotonic() > deadline or cl.poll() is not None:
                    raise Fail("tmux attach: %r not on the screen (%d bytes seen)"
                               % (text, len(seen)))
                import select
                if select.select([m], [], [], 0.2)[0]:
                    try:
                        seen += os.read(m, 65536)
                    except OSError:
                        break
            self.tool(tmux + ["detach-client", "-s", "t"])
            deadline = time.monotonic() + 10
            while cl.poll() is None:
                import select
                if select.select([m], [], [], 0.1)[0]:
                    try:
                        os.read(m, 65536)
                    except OSError:
                        pass
                if time.monotonic() > deadline:
                    raise Fail("tmux attach did not end after detach-client")
            if cl.returncode != 0:
                raise Fail("tmux attach exited %d" % cl.returncode)
        finally:
            os.close(m)
            if s >= 0:
                os.close(s)

    def flow_tmux(self):
        """A tmux server with two windows: an interactive bash with a variable
        and history, a python3 REPL with state. Checkpointed with no client
        attached, killed, restarted: both screens are the same, the shell and
        the REPL go on with their state, and tmux attach shows them."""
        if not shutil.which("tmux"):
            raise Skip("tmux not installed")
        self.tool_env = dict(os.environ, TERM="xterm", HOME=self.dir,
                             HISTFILE=self.p("bash_history"))
        tmux = ["tmux", "-S", self.p("tmux.sock"), "-f", "/dev/null"]
        secret = "s%d" % random.randrange(1 << 30)
        try:
            self.tool(tmux + ["new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "-c",
                              self.dir, "bash --norc --noprofile -i"])
            self.pid = int(self.tool(tmux + ["display", "-p", "#{pid}"]).strip())
            self.tool(tmux + ["new-window", "-t", "t:1", "-c", self.dir, self.opts.python + " -q"])
            cap = lambda w: self.tool(tmux + ["capture-pane", "-p", "-t", "t:%d" % w])
            self.tool(tmux + ["send-keys", "-t", "t:0", "SECRET=%s; echo one" % secret, "Enter"])
            self.until("the shell", lambda: "\none\n" in cap(0) and cap(0).rstrip()[-1:] in "#$")
            self.tool(tmux + ["send-keys", "-t", "t:1", "state = [i * i for i in range(10)]",
                              "Enter"])
            self.until("the REPL", lambda: cap(1).rstrip().endswith(">>>")
                       and cap(1).count(">>>") == 2)
            before = [cap(0), cap(1)]
            cursor = self.tool(tmux + ["display", "-p", "-t", "t:0", "#{cursor_x},#{cursor_y}"])
            time.sleep(0.3)  # the command clients are gone
            if not self.opts.no_ckpt:
                self.cycle("tmux server")
            after = [cap(0), cap(1)]
            for w in (0, 1):
                if after[w] != before[w]:
                    raise Fail("window %d differs after restart:\n%s\n--- was:\n%s"
                               % (w, after[w], before[w]))
            c2 = self.tool(tmux + ["display", "-p", "-t", "t:0", "#{cursor_x},#{cursor_y}"])
            if c2 != cursor:
                raise Fail("cursor at %s, was %s" % (c2.strip(), cursor.strip()))
            self.tool(tmux + ["send-keys", "-t", "t:0",
                              'echo "v=$SECRET h=$(history | grep -c "SECRET[=]%s")"' % secret,
                              "Enter"])
            self.until("the shell after restart",
                       lambda: "v=%s h=1" % secret in cap(0))
            self.tool(tmux + ["send-keys", "-t", "t:1", "print(sum(state))", "Enter"])
            self.until("the REPL after restart", lambda: "\n285\n" in cap(1))
            # typed once, echoed once: the terminals kept the modes readline set
            for w, typed in ((0, 'echo "v=$SECRET'), (1, "print(sum(state))")):
                if cap(w).count(typed) != 1:
                    raise Fail("window %d shows %r %d times:\n%s" % (w, typed, cap(w).count(typed),
                                                                     cap(w)))
            self.tool(tmux + ["select-window", "-t", "t:0"])
            self.tmux_attach(tmux, "v=%s" % secret)
            self.tool(tmux + ["kill-server"])
            self.expect_gone("tmux kill-server")
        finally:
            self.kill_daemon()

    def refuse_attached(self, what):
        """Without --detach-clients the checkpoint is refused, naming the
        option, and the server goes on."""
        rc, err = self.checkpoint(self.p("img0"), "ckpt0", reap=[], expect_ok=False, kill=False)
        if rc == 0 or rc >= 128 or rc < 0:
            raise Fail("checkpoint of %s with a client attached: exit %d, expected a refusal"
                       % (what, rc))
        if "--detach-clients" not in err or "pid %d fd " % self.pid not in err:
            raise Fail("the refusal does not name the fd and --detach-clients: %r"
                       % err.strip()[-300:])
        if not pid_alive(self.pid):
            raise Fail("%s is gone after the refused checkpoint" % what)

    def hold_low_ptys(self, n=4):
        """ptys held while a server makes its own: released before its
        checkpoint --kill, they are the lowest free indexes then, so that a
        pty opened meanwhile elsewhere on the machine takes one of them and
        not the index the restart needs."""
        return [os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC) for _ in range(n)]

    def flow_tmux_attached(self):
        """A tmux server with a client attached on a terminal of the runner's
        (outside the tree): refused without --detach-clients; with it,
        checkpoint --kill ends the client (its connection closes), restart
        brings the server back with no client and the same window, tmux
        attach on a new terminal shows it, and its shell still works."""
        if not shutil.which("tmux"):
            raise Skip("tmux not installed")
        # no history file: the shell writes one when the server is killed,
        # racing the removal of the test's directory
        self.tool_env = dict(os.environ, TERM="xterm", HOME=self.dir, HISTFILE="/dev/null")
        tmux = ["tmux", "-S", self.p("tmux.sock"), "-f", "/dev/null"]
        cap = lambda: self.tool(tmux + ["capture-pane", "-p", "-t", "t:0"])
        secret = "s%d" % random.randrange(1 << 30)
        client = None
        held = []
        try:
            held = self.hold_low_ptys()
            self.tool(tmux + ["new-session", "-d", "-s", "t", "-x", "80", "-y", "23", "-c",
                              self.dir, "bash --norc --noprofile -i"])
            self.pid = int(self.tool(tmux + ["display", "-p", "#{pid}"]).strip())
            self.tool(tmux + ["send-keys", "-t", "t:0", "SECRET=%s; echo one-$SECRET" % secret,
                              "Enter"])
            self.until("the shell", lambda: "\none-%s\n" % secret in cap())
            client = PtyClient(tmux + ["attach", "-t", "t"], self.dir, self.tool_env)
            self.procs.append(client.proc)
            client.wait_text("one-" + secret, "tmux attach")
            self.until("the attached client", lambda: self.tool(
                tmux + ["list-clients", "-F", "#{client_tty}"]).strip())
            before = cap()
            if self.opts.no_ckpt:
                return
            self.refuse_attached("the tmux server")
            if len(self.tool(tmux + ["list-clients"]).splitlines()) != 1:
                raise Fail("the client is not attached after the refused checkpoint")
            while held:
                os.close(held.pop())
            self.checkpoint(self.p("img"), "ckpt", reap=[], extra=["--detach-clients"])
            rc = client.wait_exit("tmux attach after checkpoint --kill", 15)
            said = [m for m in (b"[server exited unexpectedly]", b"[lost server]")
                    if m in client.seen]
            if not said:
                raise Fail("the client did not say its server went (exit %d)" % rc)
            self.notes.append("client: exit %d, %s" % (rc, said[0].decode()))
            self.restart_daemon(self.p("img"), "restart")
            self.until("the server without its client",
                       lambda: not self.tool(tmux + ["list-clients"]).strip())
            after = cap()
            if after != before:
                raise Fail("the window differs after restart:\n%s\n--- was:\n%s"
                           % (after, before))
            self.tmux_attach(tmux, "one-" + secret)
            self.tool(tmux + ["send-keys", "-t", "t:0", "echo two-$SECRET", "Enter"])
            self.until("the shell after restart", lambda: "\ntwo-%s\n" % secret in cap())
            self.tool(tmux + ["kill-server"])
            self.expect_gone("tmux kill-server")
        finally:
            if client:
                client.close()
            for fd in held:
                os.close(fd)
            self.kill_daemon()

    def flow_screen_attached(self):
        """GNU screen with `screen -r` attached on a terminal of the runner's:
        refused without --detach-clients; with it, checkpoint --kill and
        restart: the attacher ends, the session is detached with the same
        screen, screen -r on a new terminal shows it, and its shell works."""
        if not shutil.which("screen"):
            raise Skip("screen not installed")
        sdir = self.p("screens")
        os.mkdir(sdir, 0o700)
        self.tool_env = dict(os.environ, TERM="xterm", HOME=self.dir, SCREENDIR=sdir)
        name = "ckpt-att"
        scr = ["screen", "-S", name]
        secret = "s%d" % random.randrange(1 << 30)
        ls = lambda: self.tool(["screen", "-ls"], check=False)
        clients = []
        held = []

        def hard(tag):
            try:
                os.unlink(self.p(tag))
            except OSError:
                pass
            self.tool(scr + ["-X", "hardcopy", self.p(tag)])
            self.until("hardcopy " + tag, lambda: os.path.exists(self.p(tag)), timeout=5)
            time.sleep(0.05)
            with open(self.p(tag), errors="replace") as f:
                return f.read()
        try:
            held = self.hold_low_ptys()
            self.tool(["screen", "-dmS", name, "bash", "--norc", "--noprofile", "-i"])
            m = self.until("the screen session", lambda: re.search(r"(\d+)\." + name, ls()))
            self.pid = int(m.group(1))
            self.tool(scr + ["-X", "stuff", "SECRET=%s; echo one-\\$SECRET\r" % secret])
            self.until("the shell", lambda: "\none-%s\n" % secret in hard("h0"))
            clients.append(PtyClient(["screen", "-r", name], self.dir, self.tool_env))
            self.procs.append(clients[0].proc)
            clients[0].wait_text("one-" + secret, "screen -r")
            self.until("the attached session", lambda: "(Attached)" in ls())
            before = hard("h1")
            if self.opts.no_ckpt:
                return
            self.refuse_attached("the screen server")
            if "(Attached)" not in ls():
                raise Fail("the session is not attached after the refused checkpoint")
            while held:
                os.close(held.pop())
            self.checkpoint(self.p("img"), "ckpt", reap=[], extra=["--detach-clients"])
            self.restart_daemon(self.p("img"), "restart")
            # the restored server reads a hangup on the attacher's terminal and
            # detaches it (SIGHUP: exit 0); an attacher that saw the server gone
            # first (it looks every 15 s) exits 1 saying so
            rc = clients[0].wait_exit("screen -r after checkpoint --kill and restart", 40)
            gone = b"Cannot find master process" in clients[0].seen
            self.notes.append("attacher: exit %d%s" % (rc, ", saw the server gone" if gone else ""))
            if rc != 0 and not gone:
                raise Fail("screen -r exited %d: %r" % (rc, clients[0].seen[-200:]))
            self.until("the detached session", lambda: "(Detached)" in ls())
            after = hard("h2")
            if after != before:
                raise Fail("the screen differs after restart:\n%s\n--- was:\n%s"
                           % (after, before))
            clients.append(PtyClient(["screen", "-r", name], self.dir, self.tool_env))
            self.procs.append(clients[1].proc)
            clients[1].wait_text("one-" + secret, "screen -r after restart")
            self.until("the session attached again", lambda: "(Attached)" in ls())
            self.tool(scr + ["-X", "stuff", "echo two-\\$SECRET\r"])
            clients[1].wait_text("two-" + secret, "the shell after restart")
            self.tool(scr + ["-X", "stuff", "exit\r"])
            self.expect_gone("exit ended the screen session", grace=10)
            rc = clients[1].wait_exit("screen -r after exit", 10)
            if rc != 0:
                raise Fail("screen -r exited %d after the session ended" % rc)
        finally:
            for c in clients:
                c.close()
            for fd in held:
                os.close(fd)
            self.kill_daemon()

    def flow_tmux_shell_job(self):
        """A python3 REPL started from bash in a tmux pane: checkpointed
        --shell-job --kill from outside, then `ckpt restart --shell-job`
        typed into the same pane: the REPL is back in the foreground with its
        state, takes typed lines, and exit() gives the prompt back."""
        if not shutil.which("tmux"):
            raise Skip("tmux not installed")
        # no history file: the shell writes one when the server is killed,
        # racing the removal of the test's directory
        self.tool_env = dict(os.environ, TERM="xterm", HOME=self.dir, HISTFILE="/dev/null")
        tmux = ["tmux", "-S", self.p("tmux.sock"), "-f", "/dev/null"]
        cap = lambda: self.tool(tmux + ["capture-pane", "-p", "-t", "t:0"])
        keys = lambda *k: self.tool(tmux + ["send-keys", "-t", "t:0"] + list(k))
        server = None
        try:
            self.tool(tmux + ["new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "-c",
                              self.dir, "bash --norc --noprofile -i"])
            server = int(self.tool(tmux + ["display", "-p", "#{pid}"]).strip())
            shell = int(self.tool(tmux + ["display", "-p", "-t", "t:0", "#{pane_pid}"]).strip())
            keys(self.opts.python + " -q", "Enter")
            self.until("the REPL", lambda: cap().rstrip().endswith(">>>"))
            keys("v = 6 * 7", "Enter")
            self.until("the REPL's prompt", lambda: cap().count(">>>") == 2)
            with open("/proc/%d/task/%d/children" % (shell, shell)) as f:
                self.pid = int(f.read().split()[0])
            if self.opts.no_ckpt:
                keys("print(v + 1)", "Enter")
                self.until("the REPL's answer", lambda: "\n43\n" in cap())
                return
            self.checkpoint(self.p("img"), "ckpt", reap=[], extra=["--shell-job"])
            self.until("the shell's prompt", lambda: cap().rstrip()[-1:] in "#$")
            log = self.p("restart.log")
            self.logs.append(log)
            keys("%s restart --shell-job %s --log %s; echo rc=$?" % (self.opts.ckpt, self.p("img"),
                                                                   log), "Enter")
            self.until("the restored REPL", lambda: pid_alive(self.pid), timeout=20)
            keys("print(v + 1)", "Enter")
            self.until("the restored REPL's answer", lambda: "\n43\n" in cap())
            # ^Z stops the REPL and ckpt restart with it: the shell has its
            # prompt (and runs the rest of the line); fg gives the REPL back
            keys("C-z")
            self.until("the shell after ^Z", lambda: "\nrc=148\n" in cap())
            if proc_state(self.pid) != "T":
                raise Fail("the REPL is not stopped after ^Z (state %s)" % proc_state(self.pid))
            keys("jobs", "Enter")
            self.until("the stopped job", lambda: re.search(r"Stopped\s+.*restart --shell-job",
                                                            cap()))
            keys("fg", "Enter")
            self.until("the REPL after fg", lambda: proc_state(self.pid) != "T")
            keys("print(v + 2)", "Enter")
            self.until("the REPL's answer after fg", lambda: "\n44\n" in cap())
            keys("exit()", "Enter")
            keys("echo fg=$?", "Enter")
            self.until("the shell after the job", lambda: "\nfg=0\n" in cap())
        finally:
            self.kill_daemon()
            if server and pid_alive(server):
                os.kill(server, signal.SIGKILL)

    def flow_screen(self):
        """GNU screen with a shell running vim on a file with an unsaved
        change: after checkpoint, kill and restart the screen (hardcopy) is
        the same, the change is still unsaved, :wq writes it, and the shell,
        vim's parent, takes commands again."""
        if not shutil.which("screen") or not shutil.which("vim"):
            raise Skip("screen or vim not installed")
        sdir = self.p("screens")
        os.mkdir(sdir, 0o700)
        self.tool_env = dict(os.environ, TERM="xterm", HOME=self.dir, SCREENDIR=sdir)
        name = "ckpt-e2e"
        scr = ["screen", "-S", name]
        path = self.p("file.txt")
        with open(path, "w") as f:
            f.write("original line\n")

        def hard(tag):
            """The screen, by hardcopy (written by the screen process, a moment later)."""
            try:
                os.unlink(self.p(tag))
            except OSError:
                pass
            self.tool(scr + ["-X", "hardcopy", self.p(tag)])
            self.until("hardcopy " + tag, lambda: os.path.exists(self.p(tag)), timeout=5)
            time.sleep(0.05)
            with open(self.p(tag), errors="replace") as f:
                return f.read()
        try:
            self.tool(["screen", "-dmS", name, "bash", "--norc", "--noprofile", "-i"])
            ls = self.until("the screen session", lambda: re.search(
                r"(\d+)\." + name, self.tool(["screen", "-ls"], check=False)))
            self.pid = int(ls.group(1))
            self.until("the shell", lambda: hard("h0").rstrip()[-1:] in "#$")
            self.tool(scr + ["-X", "stuff", "vim -u NONE -i NONE file.txt\r"])
            self.until("vim", lambda: "original line" in hard("h0"))
            self.tool(scr + ["-X", "stuff", "ggOadded by test\033"])
            self.until("the edit", lambda: hard("h1").startswith("added by test\noriginal line"))
            time.sleep(0.3)
            before = hard("h1")
            if not self.opts.no_ckpt:
                self.cycle("screen")
            after = hard("h2")
            if after != before:
                raise Fail("the screen differs after restart:\n%s\n--- was:\n%s" % (after, before))
            with open(path) as f:
                if f.read() != "original line\n":
                    raise Fail("the file was written before :wq")
            # a command typed in: vim reads it in its own terminal modes (no echo)
            self.tool(scr + ["-X", "stuff", ':echo "ok"\r'])
            lines = lambda text: text.rstrip("\n").split("\n")
            shown = self.until(":echo", lambda: (lambda t: t if lines(t)[-1].strip() == "ok"
                                                  else None)(hard("h3")))
            if lines(shown)[:-1] != lines(before)[:-1]:
                raise Fail("the screen changed with :echo:\n%s\n--- was:\n%s" % (shown, before))
            self.tool(scr + ["-X", "stuff", ":wq\r"])
            want = "added by test\noriginal line\n"
            self.until(":wq", lambda: open(path).read() == want)
            self.tool(scr + ["-X", "stuff", "echo back-$((6 * 7))\r"])
            self.until("the shell after vim", lambda: "\nback-42\n" in hard("h4"))
            self.tool(scr + ["-X", "stuff", "exit\r"])
            self.expect_gone("exit ended the screen session", grace=10)
        finally:
            self.kill_daemon()

    def flow_standalone(self):
        """A program that drives libckpt itself and prints PASS."""
        path = os.path.join(self.opts.bindir, self.t["program"])
        if self.opts.no_ckpt:
            return
        # api_signal_soon's 150 rounds took 108 s under ASan in CI
        r = subprocess.run([path], stdin=subprocess.DEVNULL, capture_output=True,
                           cwd=self.dir, timeout=300)
        out = r.stdout.decode(errors="replace")
        for name, data in (("stdout.log", r.stdout), ("stderr.log", r.stderr)):
            with open(self.p(name), "wb") as f:  # whole, for a failure's report
                f.write(data)
            self.logs.append(self.p(name))
        if r.returncode != 0 or "PASS" not in out:
            err = r.stderr.decode(errors="replace").strip()
            # a sanitizer's report says what it found at its head
            raise Fail("%s exit %d: %s\n--- stderr, first lines:\n%s" % (
                self.t["program"], r.returncode, out.strip()[-400:], err[:1200]))

    def flow_python_api(self):
        """tests/e2e/api_python.py drives the Python binding (python/ckpt.py)
        over the libckpt.so just built, and prints PASS."""
        if self.opts.no_ckpt:
            return
        here = os.path.dirname(os.path.abspath(__file__))
        lib = os.path.join(os.path.dirname(os.path.dirname(self.opts.bindir)), "libckpt.so.0")
        env = dict(os.environ, CKPT_LIBRARY=lib,
                   PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(here)), "python"))
        ldd = subprocess.run(["ldd", lib], capture_output=True).stdout.decode()
        m = re.search(r"(/\S*libasan\.so\S*)", ldd)
        if m:  # a sanitizer build: its runtime must be loaded before python's own libraries
            env.update(LD_PRELOAD=m.group(1), ASAN_OPTIONS="detect_leaks=0")
        r = subprocess.run([self.opts.python, os.path.join(here, "api_python.py")],
                           stdin=subprocess.DEVNULL, capture_output=True, cwd=self.dir,
                           timeout=120, env=env)
        out = r.stdout.decode(errors="replace")
        if r.returncode != 0 or "PASS" not in out:
            raise Fail("api_python.py exit %d: %s %s" % (r.returncode, out.strip()[-400:],
                                                         r.stderr.decode(errors="replace")[-600:]))

    def flow_rst_fail(self):
        """A restart that fails after creating the process leaves nothing."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        with open(img, "rb") as f:
            good = f.read()
        bad = self.p("forged")
        with open(bad, "wb") as f:
            f.write(forge_seccomp(good, walk_image(good)))
        log = self.p("forged.log")
        self.logs.append(log)
        r = self.run_ckpt(["restart", bad, "--log", log, "-v"], timeout=60)
        self.expect_error(r, "restart of an image whose seccomp filter is invalid",
                          must=["seccomp"])
        with open(log) as f:
            if not re.search(r"pid \d+: created", f.read()):
                raise Fail("the forged image failed before a process was created")
        self.expect_gone("the failed restart")
        # the genuine image still restores
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the genuine image")

    def forged_dry_run(self, forgery, timeout):
        """The test's program checkpointed (its image: self.p("img")), the
        image forged by forgery (tests/fuzz/forge.py), then `restart
        --dry-run` of the forged copy: the result."""
        with open(self.checkpointed(), "rb") as f:
            good = f.read()
        bad, log = self.p("forged"), self.p("forged.log")
        with open(bad, "wb") as f:
            f.write(forged(forgery)(good, None)[0])
        self.logs.append(log)
        return self.run_ckpt(["restart", bad, "--dry-run", "--log", log], timeout=timeout)

    def flow_mqueue_forged(self):
        """A queue whose forged id is near 2^32: the dry run is not slowed by it."""
        if self.opts.no_ckpt:
            return self.native()
        r = self.forged_dry_run("mqueue_id_huge", 5)
        if r.returncode != 0:
            self.expect_error(r, "dry run of the forged image", must=["mqueue"])
        self.expect_gone("the dry run")
        rp = self.restart(self.p("img"), "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the genuine image")

    def flow_file_changed(self):
        """A file mapped private whose bytes change (same size) between
        checkpoint --kill and restart: the restart fails naming it (its crc
        differs); written back as it was (its mtime changed, its contents
        the same), the restart works and the program checks its mapping."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        path = self.p("data")
        if self.t["case"] == "big":
            return self.file_changed_big(img, path)
        with open(path, "rb") as f:
            good = f.read()
        with open(path, "r+b") as f:
            f.seek(5 * 4096 + 7)
            f.write(bytes([good[5 * 4096 + 7] ^ 0xff]))
        log = self.p("changed.log")
        self.logs.append(log)
        r = self.run_ckpt(["restart", img, "--log", log], timeout=60)
        self.expect_error(r, "restart with the mapped file changed",
                          must=["data': its contents changed since the checkpoint"])
        self.expect_gone("the refused restart")
        with open(path, "r+b") as f:
            f.write(good)
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart with the file written back")

    def file_changed_big(self, img, path):
        """mem_file_changed_big: the file is 40 MiB over its 16 pages, too
        big for a crc; a zero byte written over a zero of its hole changes
        its mtime only. The restart is refused naming the file and
        --accept-changed-files (it cannot compare); with that option it
        restores, and the program checks its mappings."""
        with open(path, "r+b") as f:
            f.seek(20 << 20)
            if f.read(1) != b"\0":
                raise Fail("the hole of data is not zero")
            f.seek(20 << 20)
            f.write(b"\0")
        log = self.p("changed.log")
        self.logs.append(log)
        r = self.run_ckpt(["restart", img, "--log", log], timeout=60)
        self.expect_error(r, "restart with the big mapped file's mtime changed",
                          must=["data': modified since the checkpoint",
                                "--accept-changed-files"])
        self.expect_gone("the refused restart")
        rp = self.restart(img, "restart", extra=["--accept-changed-files"])
        rc = self.wait_exit(rp, "ckpt restart --accept-changed-files")
        self.check_result(rc, "ckpt restart --accept-changed-files")
        with open(self.p("restart.log"), errors="replace") as f:
            if "accepted: a private mapping" not in f.read():
                raise Fail("no warning of the accepted file in restart.log")

    def flow_mbind_forged(self):
        """The image of a process with a vma bound by mbind to node 0, forged
        to bind it to node 63: where this machine has no node 63, the restart
        fails at load naming the memory, the policy and the nodes there are
        (it failed at "task state", at its mbind); then the genuine image
        restores."""
        if self.opts.no_ckpt:
            return self.native()
        if os.path.exists("/sys/devices/system/node/node63"):
            raise Skip("this machine has a NUMA node 63")
        r = self.forged_dry_run("mbind_node", 30)
        self.expect_error(r, "restart of the forged image",
                          must=["the policy of its memory at",
                                "(mbind) is bind:63, which names only NUMA nodes that this "
                                "machine does not have",
                                "nodes with memory here: "])
        log = self.p("forged.log")
        with open(log, errors="replace") as f:
            text = f.read()
        if "step spawn root" in text or "created" in text:
            raise Fail("the forged image got past load: %s" % text[-400:])
        self.expect_gone("the refused restart")
        rp = self.restart(self.p("img"), "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the genuine image")

    def flow_huge_forged(self):
        """The image of a hugetlb SysV segment forged to 1 GiB pages: where
        this machine has none, the restart fails at load naming the size and
        why; then the genuine image restores."""
        if self.opts.no_ckpt:
            return self.native()
        if os.path.exists("/sys/kernel/mm/hugepages/hugepages-1048576kB"):
            raise Skip("this machine has 1 GiB huge pages")
        r = self.forged_dry_run("shm_huge_1g", 30)
        self.expect_error(r, "restart of the forged image",
                          must=["1048576 kB pages", "this machine has none", "pdpe1gb"])
        self.expect_gone("the refused restart")
        rp = self.restart(self.p("img"), "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart of the genuine image")

    def flow_rst_addr_busy(self):
        """A restart whose listening address is taken (by the runner) fails
        naming the pid, the fd and the address, and leaves nothing behind:
        no process, no socket on the connection's ports; freed, the image
        restores fine."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        with open(self.p("port")) as f:
            port = int(f.read())
        busy = socket.socket()
        busy.bind(("127.0.0.1", port))
        busy.listen(1)
        try:
            log = self.p("busy.log")
            self.logs.append(log)
            r = self.run_ckpt(["restart", img, "--log", log, "-v"], timeout=60)
            self.expect_error(r, "restart with the listener's address taken")
            err = r.stderr.decode("utf-8", "replace")
            rx = r"pid %d fd 3 \(inet\): tcp 127\.0\.0\.1:%d: cannot bind the address: " \
                 r"address already in use" % (self.pid, port)
            if not re.search(rx, err, re.I):
                raise Fail("message %r does not match /%s/" % (err.strip(), rx))
            self.expect_gone("the failed restart")
            with open("/proc/net/tcp") as f:
                mine = [l for l in f.read().splitlines()[1:]
                        if int(l.split()[1].split(":")[1], 16) == port and
                        int(l.split()[3], 16) != 10]
            if mine:
                raise Fail("sockets on port %d left behind: %s" % (port, mine))
        finally:
            busy.close()
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart once the address is free")

    def flow_netlock_listen(self):
        """tcp_pair.c after checkpoint --kill: a new client's SYN to its
        listener's port is dropped by the network lock (its connect stays in
        progress), not answered with a reset (ECONNREFUSED) while the
        program is away; the restart then restores the program as usual."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        with open(self.p("port")) as f:
            port = int(f.read())
        probe = socket.socket()
        probe.setblocking(False)
        try:
            probe.connect_ex(("127.0.0.1", port))
            # a reset comes at once; a dropped SYN leaves the connect in
            # progress until its first retransmission (1 s)
            _, w, _ = select.select([], [probe], [], 0.5)
            if w:
                err = probe.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                raise Fail("a new client's connect to the listener's port ended while the "
                           "program was away: %s" % os.strerror(err))
        finally:
            # closed before the restart: its SYN sent again would reach the
            # restored listener, whose program takes the next connection
            # it accepts for one of its own (seen: "new connection: not
            # received")
            probe.close()
        rp = self.restart(img, "restart")
        rc = self.wake_and_wait(rp, "the program")
        self.check_result(rc, "the program")

    def connect_ends(self, port, wait):
        """A new connect to 127.0.0.1:port: its error if it ends within
        wait seconds (0: connected), None if it is still in progress (its
        SYN dropped)."""
        with socket.socket() as probe:
            probe.setblocking(False)
            probe.connect_ex(("127.0.0.1", port))
            _, w, _ = select.select([], [probe], [], wait)
            return probe.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) if w else None

    def flow_netlock_unlock(self):
        """`ckpt unlock IMAGE` after checkpoint --kill (what the checkpoint's
        host runs once the image was restarted elsewhere): the lock the
        image names goes, so a new client's SYN to the dead listener's port
        is answered by a reset at once where it was dropped before; a second
        unlock finds nothing; the restart then works (its removal of the
        lock finds it gone)."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        with open(self.p("port")) as f:
            port = int(f.read())
        if self.connect_ends(port, 0.5) is not None:
            raise Fail("a connect to the listener's port ended before the unlock")
        r = self.run_ckpt(["unlock", img])
        err = r.stderr.decode(errors="replace")
        m = re.search(r"network lock (ckpt_lock_\S+) removed", err)
        if r.returncode != 0 or not m:
            raise Fail("ckpt unlock: exit %d, %r" % (r.returncode, err.strip()))
        tables = self.nft_tables()
        if tables is not None and m.group(1) in tables:
            raise Fail("table %s still there after ckpt unlock" % m.group(1))
        got = None
        for _ in range(20):  # the reset comes at once; a retransmitted SYN takes 1 s
            got = self.connect_ends(port, 5)
            if got == errno.ECONNREFUSED:
                break
        if got != errno.ECONNREFUSED:
            raise Fail("after ckpt unlock a connect to the dead listener's port gave %r, "
                       "not ECONNREFUSED" % (got if got is None else os.strerror(got)))
        r = self.run_ckpt(["unlock", img])
        err = r.stderr.decode(errors="replace")
        if r.returncode != 0 or "was not here" not in err:
            raise Fail("a second ckpt unlock: exit %d, %r" % (r.returncode, err.strip()))
        rp = self.restart(img, "restart")
        rc = self.wake_and_wait(rp, "the program")
        self.check_result(rc, "the program")

    def flow_inspect(self):
        """inspect prints every record; --json is JSON with the same records."""
        if self.opts.no_ckpt:
            return self.native()
        img = self.checkpointed()
        r = self.run_ckpt(["inspect", img], verbose=False)
        text = r.stdout.decode(errors="replace")
        if r.returncode != 0:
            raise Fail("inspect exit %d: %s" % (r.returncode, r.stderr.decode().strip()))
        if not re.match(r"image: 1 process, 1 thread, [\d.]+ (KiB|MiB)", text):
            raise Fail("inspect's summary starts %r" % text[:80])
        r = self.run_ckpt(["inspect", img, "--records"], verbose=False)
        text = r.stdout.decode(errors="replace")
        for want in ("header:", "tree", "mm/1", "mm/4", "regs/1", "creds/1", "fdtable/1",
                     "pid: %d\n" % self.pid):
            if want not in text:
                raise Fail("inspect --records output lacks %r" % want)
        r = self.run_ckpt(["inspect", img, "--json"], verbose=False)
        try:
            j = json.loads(r.stdout.decode())
        except ValueError as e:
            raise Fail("inspect --json is not JSON: %s" % e)
        self.check_inspect_schema(j)
        types = [rec["type"] for rec in j["records"]]
        if types.count("regs/1") != 1 or "mm/1" not in types:
            raise Fail("inspect --json records: %s" % types[:20])
        regs = [rec for rec in j["records"] if rec["type"] == "regs/1"][0]["data"]
        if not isinstance(regs.get("rip"), int) or not regs["rip"]:
            raise Fail("inspect --json: regs without rip")
        with open(img, "rb") as f:
            nrec = len(walk_image(f.read())) - 1  # the trailer is not listed
        if len(types) != nrec:
            raise Fail("inspect --json lists %d records, the image has %d" % (len(types), nrec))
        rp = self.restart(img, "restart")
        rc = self.wait_exit(rp, "ckpt restart")
        self.check_result(rc, "ckpt restart")

    @staticmethod
    def image_md_keys():
        """The keys docs/IMAGE.md's inspect --json tables describe, by table:
        top, header, record, bytes."""
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "docs", "IMAGE.md")) as f:
            doc = f.read()
        part = doc.split("## `ckpt inspect --json`", 1)
        if len(part) != 2:
            raise Fail("docs/IMAGE.md has no section on ckpt inspect --json")
        tables = re.split(r"\n\n(?=\| key \|)", part[1])[1:]
        keys = [set(re.findall(r"^\| `(\w+)` \|", t.split("\n\n")[0], re.M)) for t in tables]
        byts = re.search(r"^\| bytes \| object: (.*)$", part[1], re.M)
        return keys, set(re.findall(r"`(\w+)` \(", byts.group(1))) | {"text"} if byts else set()

    def check_inspect_schema(self, j):
        """inspect --json: schema ckpt-inspect version 1, and every key it
        prints is one docs/IMAGE.md describes (a field added to the output
        without its line in the doc fails here)."""
        if j.get("schema") != "ckpt-inspect" or j.get("schema_version") != 1:
            raise Fail("inspect --json: schema %r version %r, want ckpt-inspect 1"
                       % (j.get("schema"), j.get("schema_version")))
        (top, header, record), byts = self.image_md_keys()[0][:3], self.image_md_keys()[1]
        for what, got, doc in (("top level", set(j), top), ("header", set(j["header"]), header)):
            if got != doc:
                raise Fail("inspect --json %s keys %s, docs/IMAGE.md lists %s"
                           % (what, sorted(got), sorted(doc)))
        if set(byts) != {"length", "hex", "text"}:
            raise Fail("docs/IMAGE.md's bytes encoding lists %s" % sorted(byts))
        for rec in j["records"]:
            if not set(rec) <= record or not {"index", "offset", "type", "type_id",
                                              "length"} <= set(rec):
                raise Fail("inspect --json record keys %s, docs/IMAGE.md lists %s"
                           % (sorted(rec), sorted(record)))
            if ("data" in rec) != ("message" in rec) or ("data" in rec) == ("raw" in rec):
                raise Fail("inspect --json record %d: data/message/raw %s" % (
                    rec["index"], sorted(rec)))
            if rec["type_id"] & 0xff == 0 or not isinstance(rec["offset"], int):
                raise Fail("inspect --json record %r" % {k: rec[k] for k in rec if k != "data"})
        regs = [rec for rec in j["records"] if rec["type"] == "regs/1"][0]
        xs = regs["data"].get("xstate")
        if regs["message"] != "RegsEntry" or not isinstance(xs, dict) or \
                set(xs) != {"length", "hex"} or xs["length"] < 512 or len(xs["hex"]) != 128:
            raise Fail("inspect --json: regs/1 xstate %r" % (xs if not isinstance(xs, dict) else
                                                            {k: xs[k] for k in xs if k != "hex"}))
        paths = [rec["data"]["path"] for rec in j["records"] if rec.get("message") ==
                 "FileRegEntry"]
        if not paths or not all(isinstance(p, str) and p.startswith("/") for p in paths):
            raise Fail("inspect --json: file paths %r" % paths[:5])

    def flow_inspect_summary(self):
        """inspect's summary of a tree (two processes, a thread, a pipe, a pty)
        and --diff of two checkpoints of it taken while it runs."""
        if self.opts.no_ckpt:
            return self.native()
        pr = self.start()
        self.wait_ready()
        a, b = self.p("a.img"), self.p("b.img")
        self.checkpoint(a, "ckpt-a", reap=[], kill=False)
        self.checkpoint(b, "ckpt-b", reap=[], kill=False)
        r = self.run_ckpt(["inspect", a], verbose=False)
        text = r.stdout.decode(errors="replace")
        if r.returncode != 0:
            raise Fail("inspect exit %d: %s" % (r.returncode, r.stderr.decode().strip()))
        with open("/proc/%d/task/%d/children" % (self.pid, self.pid)) as f:
            child = [int(c) for c in f.read().split()]
        want = [r"^image: 2 processes, 3 threads, [\d.]+ (KiB|MiB); made ",
                r"^  %d +insp-parent +2 threads, session " % self.pid,
                r"^    %d +insp-child +1 thread, " % (child[0] if child else -1),
                # each process's fds by kind: the parent holds the pipe and the pty
                r"^  %d +insp-parent .*\n +fds: \d+ \((?=[^)]*\bpipe [1-9])(?=[^)]*\btty [1-9])"
                r"(?=[^)]*\bfile_reg [1-9])[^)]*\)$" % self.pid,
                r"^    %d +insp-child .*\n +fds: \d+ \(" % (child[0] if child else -1),
                r"^  pipe +[\d.]+ bytes +\d+  pipes", r"^  tty +[\d.]+ (bytes|KiB) +\d+  terminals",
                r"^  mm +[\d.]+ (KiB|MiB) +\d+  address space"]
        for w in want:
            if not re.search(w, text, re.M):
                raise Fail("inspect's summary lacks /%s/:\n%s" % (w, text))
        same = self.run_ckpt(["inspect", "--diff", a, a], verbose=False)
        if same.returncode != 0 or b"the images hold the same records" not in same.stdout:
            raise Fail("inspect --diff A A: exit %d: %r" % (same.returncode, same.stdout))
        diff = self.run_ckpt(["inspect", "--diff", a, b], verbose=False)
        out = diff.stdout.decode(errors="replace")
        if diff.returncode != 1 or not re.search(r"^~ pid %d mm/\d+: [1-9]\d* changed" % self.pid,
                                                 out, re.M):
            raise Fail("inspect --diff A B (the counter ran between them): exit %d:\n%s"
                       % (diff.returncode, out))
        img = self.p("img")
        self.checkpoint(img, "ckpt", reap=[pr])
        rp = self.restart(img, "restart")
        self.check_result(self.wait_exit(rp, "ckpt restart"), "ckpt restart")

    # --- cleanup ---------------------------------------------------------

    def ours(self, pid):
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid)
        except OSError:
            return False
        if cwd == self.dir or cwd.startswith(self.dir + "/"):
            return True
        # a container whose root of its own (a directory, or an overlay's
        # layers) is in the test's directory
        try:
            with open("/proc/%d/mountinfo" % pid) as f:
                return any(l.split()[4] == "/" and self.dir + "/" in l for l in f)
        except (OSError, IndexError):
            return False

    def remove_shm(self):
        """The host SysV segment a test named in "shm.id" (id key), if it is
        still there with that key: a failed run must not leave it."""
        try:
            with open(self.p("shm.id")) as f:
                sid, key = (int(x) for x in f.read().split())
            with open("/proc/sysvipc/shm") as f:
                rows = [ln.split() for ln in f.readlines()[1:]]
        except (OSError, ValueError):
            return
        if any(len(r) > 1 and int(r[0]) == key and int(r[1]) == sid for r in rows):
            subprocess.run(["ipcrm", "-m", str(sid)], capture_output=True)

    def remove_netlocks(self):
        """The network locks the test's checkpoints left (a failed restart
        leaves them for the next one), so that none outlives the test."""
        for name in os.listdir(self.dir):
            if name.startswith("ckpt") and name.endswith(".log"):
                lock = self.netlock_of(name[:-4])
                if lock and self.nft_drops(lock[0]) is not None:
                    subprocess.run([shutil.which("nft") or "/usr/sbin/nft", "delete", "table",
                                    "inet", lock[0]], capture_output=True, timeout=20)

    def restore_hugepages(self):
        """vm.nr_hugepages (and the 1 GiB pages' nr_hugepages) as it was
        before a hugetlb test raised it (the test wrote the old value to
        hugepages.old, hugepages1g.old)."""
        for name, path in (("hugepages.old", "/proc/sys/vm/nr_hugepages"),
                           ("hugepages1g.old",
                            "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages")):
            try:
                with open(self.p(name)) as f:
                    old = int(f.read())
                with open(path, "w") as f:
                    f.write("%d\n" % old)
            except (OSError, ValueError):
                pass

    def cleanup(self):
        for where in reversed(getattr(self, "host_mounts", [])):
            subprocess.run(["umount", "-l", where], capture_output=True, timeout=30)
        self.remove_shm()
        self.restore_hugepages()
        self.remove_netlocks()
        if self.pid and self.ours(self.pid):
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        if self.t["kind"] in ("compare", "make", "redis", "nginx", "nginx_tcp", "postgres",
                              "postgres_tcp", "etcd", "mariadb_tcp", "memcached_tcp",
                              "haproxy_tcp", "apache_tcp", "varnish_tcp", "qemu_tcg") or \
                self.t["kind"].startswith("fault") or self.topo:
            # what a failed real program left: pool workers, make's
            # children, a fault victim's child
            for d in os.listdir("/proc"):
                if d.isdigit() and self.ours(int(d)):
                    try:
                        os.kill(int(d), signal.SIGKILL)
                    except OSError:
                        pass
        for pr in reversed(self.procs):
            if pr.poll() is None:
                try:
                    pr.kill()
                except OSError:
                    pass
        for pr in self.procs:
            try:
                pr.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.cg_cleanup()
        if self.topo:
            self.topo.destroy()

    def run(self):
        getattr(self, "flow_" + self.t["kind"])()


# --- the image, as described by src/img/img.h ---------------------------

HDR_SIZE_OFF = 12          # struct img_header.header_size
FRAME = struct.Struct("<IIQII")  # type, flags, length, hdr_crc, data_crc
PAD_MASK = 0xfff
TRAILER = 0xffff
INDEX = 0xfffe  # img.h IMG_REC_INDEX: entries of 96 bytes, a foot of 16
INDEX_ENTRY = 96


def walk_image(data):
    """[(index, frame_off, type, flags, data_off, data_len)], or Fail."""
    if len(data) < 16:
        raise Fail("image of %d bytes" % len(data))
    hs = struct.unpack_from("<I", data, HDR_SIZE_OFF)[0]
    pos, recs = hs, []
    while pos + FRAME.size <= len(data):
        typ, flags, length, _, _ = FRAME.unpack_from(data, pos)
        pad = flags & PAD_MASK
        if pad > length:
            break
        recs.append((len(recs), pos, typ, flags, pos + FRAME.size + pad, length - pad))
        pos += FRAME.size + length
        if typ == TRAILER:
            break
    if not recs or recs[-1][2] != TRAILER or pos != len(data):
        raise Fail("cannot follow the framing of the image (img.h changed?): "
                   "header_size %d, %d records, stopped at %d of %d" % (hs, len(recs), pos,
                                                                        len(data)))
    return recs


def zstd_records(data):
    """[(index, frame_off, data_off, data_len, zlen)] of the compressed page
    records (pages.h: the head's magic PGZ1, zlen before it)."""
    out = []
    for r in walk_image(bytes(data))[:-1]:
        end = r[4] + r[5]
        if r[5] >= 40 and data[end - 16:end - 12] == b"PGZ1":
            out.append((r[0], r[1], r[4], r[5], struct.unpack_from("<Q", data, end - 24)[0]))
    return out


def reindex(data, frame):
    """data (a bytearray) with the index entry (img.h, IMG_REC_INDEX) of the
    record whose frame is at frame made the record's again: its data
    checksum and last bytes, the index's own checksum recomputed."""
    idx = [r for r in walk_image(bytes(data)) if r[2] == INDEX]
    if not idx:
        raise Fail("the image has no index record")
    _, iframe, _, _, ioff, ilen = idx[0]
    n = struct.unpack_from("<Q", data, ioff + ilen - 8)[0]
    flen = struct.unpack_from("<Q", data, frame + 8)[0]
    pad = struct.unpack_from("<I", data, frame + 4)[0] & PAD_MASK
    end = frame + FRAME.size + flen
    for i in range(n):
        e = ioff + i * INDEX_ENTRY
        if struct.unpack_from("<Q", data, e)[0] != frame:
            continue
        k = min(64, flen - pad)
        data[e + 20:e + 24] = data[frame + 20:frame + 24]
        data[e + 32:e + 32 + k] = data[end - k:end]
        struct.pack_into("<I", data, iframe + 20, crc32c_fast(bytes(data[ioff:ioff + ilen])))
        return
    raise Fail("the index has no entry for the record at %d" % frame)


def flip(data, off):
    b = bytearray(data)
    b[off] ^= 0xff
    return bytes(b)


def d_header(data, recs):
    # in header.reserved, just before the trailing crc: only the crc can catch it
    hs = struct.unpack_from("<I", data, HDR_SIZE_OFF)[0]
    off = hs - 4 - 10
    return flip(data, off), "byte %d of the header (reserved)" % off


def d_frame(data, recs):
    off = recs[0][1]
    return flip(data, off), "byte %d: first frame's type" % off


def d_payload(data, recs):
    meta = [r for r in recs[:-1] if 0 < r[5] and (r[5] % 4096 or r[5] < 4096)
            and r[3] & PAD_MASK == 0]
    if not meta:
        raise Fail("no metadata record found in the image")
    r = meta[len(meta) // 2]
    off = r[4] + r[5] // 2
    return flip(data, off), "byte %d: middle of record %d (type %d, %d bytes)" % (
        off, r[0], r[2], r[5])


def d_pages(data, recs):
    r = max(recs[:-1], key=lambda r: r[5])
    off = r[4] + int(r[5] * 0.6)
    return flip(data, off), "byte %d: 60%% into record %d (type %d, %d bytes)" % (
        off, r[0], r[2], r[5])


def d_page_pad(data, recs):
    # the last pad byte before the largest page record's data: refused at
    # load; --lazy: the frame and pad are the index's, compared with the
    # file when the server first uses the record
    r = max((r for r in recs[:-1] if r[3] & PAD_MASK), key=lambda r: r[5])
    off = r[4] - 1
    return flip(data, off), "byte %d: the pad before record %d's data" % (off, r[0])


def d_index(data, recs):
    # the middle of the index (the record before the trailer if none):
    # --lazy does not take it, reads every frame and finds its checksum bad
    r = ([r for r in recs if r[2] == INDEX] or [recs[-2]])[0]
    off = r[4] + r[5] // 2
    return flip(data, off), "byte %d: middle of the index, record %d" % (off, r[0])


def d_trunc_half(data, recs):
    return data[:len(data) // 2], "truncated to %d bytes" % (len(data) // 2)


def d_trunc_1(data, recs):
    return data[:-1], "truncated by 1 byte"


def d_append(data, recs):
    return data + random.Random(1).randbytes(4096), "4096 bytes of garbage appended"


def d_random(data, recs):
    return random.Random(2).randbytes(1 << 20), "1 MiB of random bytes"


def d_empty(data, recs):
    return b"", "empty file"


def crc32c(data, crc=0):
    """crc32c (Castagnoli), as src/img/crc32c.c; for forging small records."""
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 & -(crc & 1))
    return crc ^ 0xffffffff


def crc32c_fast(data):
    """crc32c by table, for forging records of a few MiB."""
    global CRC32C_TABLE
    if CRC32C_TABLE is None:
        CRC32C_TABLE = []
        for n in range(256):
            c = n
            for _ in range(8):
                c = (c >> 1) ^ (0x82f63b78 & -(c & 1))
            CRC32C_TABLE.append(c)
    t, crc = CRC32C_TABLE, 0xffffffff
    for b in data:
        crc = t[(crc ^ b) & 0xff] ^ (crc >> 8)
    return crc ^ 0xffffffff


CRC32C_TABLE = None
COMPARE_CACHE = {}  # flow_compare: a test's files before its checkpointed run


def varint(data, pos):
    v = shift = 0
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return v, pos


def forge_seccomp(data, recs):
    """A well-formed image whose first seccomp instruction is invalid: it
    passes every check of the image and fails only when the restored
    process installs the filter, after the process exists."""
    out = bytearray(data)
    rec = [r for r in recs if r[2] == 0x0901]
    if not rec:
        raise Fail("the image has no seccomp record")
    _, frame, _, _, off, length = rec[0]
    p = off
    if out[p] != 0x08:            # field 1 (mode), varint
        raise Fail("unexpected seccomp record layout")
    _, p = varint(out, p + 1)
    if out[p] != 0x12:            # field 2 (a filter), length-delimited
        raise Fail("unexpected seccomp record layout")
    _, p = varint(out, p + 1)
    if out[p] != 0x0a:            # its field 1 (insns), bytes
        raise Fail("unexpected seccomp filter layout")
    _, p = varint(out, p + 1)
    struct.pack_into("<H", out, p, 0xffff)   # sock_filter.code: no such BPF op
    struct.pack_into("<I", out, frame + 20, crc32c(bytes(out[off:off + length])))
    return bytes(out)


def forged(name):
    """A forgery of tests/fuzz/forge.py: good checksums, bad content."""
    def d(data, recs):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
        import forge
        return forge.forge(name, data), "forged: " + forge.FORGERIES[name].__doc__.split(":")[0] \
            if forge.FORGERIES[name].__doc__ else "forged: " + name
    return d


DAMAGES = [("header", d_header), ("frame", d_frame), ("payload", d_payload),
           ("pages", d_pages), ("page-pad", d_page_pad), ("index", d_index),
           ("trunc-half", d_trunc_half), ("trunc-1", d_trunc_1),
           ("append", d_append), ("random", d_random), ("empty", d_empty),
           ("id-huge", forged("id_huge")), ("file-twice", forged("file_twice")),
           ("hdr-flags", forged("hdr_flags")), ("hdr-reserved", forged("hdr_reserved")),
           ("hdr-xfeatures", forged("hdr_xfeatures")), ("hdr-xsave", forged("hdr_xsave")),
           ("path-escape", forged("path_escape")), ("rec-flags", forged("rec_flags")),
           ("ns-subtree", forged("ns_subtree"))]
CHECKSUM_DAMAGES = {"header", "frame", "payload", "pages", "page-pad", "index"}


def damage_selftest(path):
    """--no-ckpt: the damage code on a synthetic image laid out as img.h says."""
    hs = 140
    hdr = bytearray(hs)
    hdr[0:8] = b"CKPTIMG\0"
    struct.pack_into("<II", hdr, 8, 1, hs)
    out = bytearray(hdr)

    def rec(typ, payload, aligned=False):
        pad = 0
        if aligned:
            pad = (-(len(out) + FRAME.size)) % 4096
        out.extend(FRAME.pack(typ, pad, pad + len(payload), 0, 0))
        out.extend(b"\0" * pad)
        out.extend(payload)

    rec(1, b"\x08\x01" * 10)
    rec(2, b"\x0a\x03abc" * 7)
    rec(3, b"P" * (8 * 4096), aligned=True)
    rec(4, b"\x10\x02" * 5)
    rec(TRAILER, struct.pack("<QQII", 4, 0, 0x444e4521, 0))
    data = bytes(out)
    recs = walk_image(data)
    if len(recs) != 5 or recs[2][4] % 4096 or recs[2][5] != 8 * 4096:
        raise Fail("damage self-test: walk_image misread the synthetic image: %r" % recs)
    for kind, fn in DAMAGES:
        d, where = fn(data, recs)
        if d == data:
            raise Fail("damage self-test: %s left the image unchanged" % kind)
    if d_pages(data, recs)[0][recs[2][4]:recs[2][4] + recs[2][5]] == data[
            recs[2][4]:recs[2][4] + recs[2][5]]:
        raise Fail("damage self-test: page damage missed the page record")
    with open(path, "wb") as f:
        f.write(data)


# --- driver ----------------------------------------------------------------

class Results:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.failures = []
        self.times = []  # (seconds, name) of every run, for the slowest list

    def ok(self, name, notes=()):
        self.passed += 1
        print("PASS %s%s" % (name, " (%s)" % ", ".join(notes) if notes else ""), flush=True)

    def timed(self, name, seconds):
        self.times.append((seconds, name))

    def slowest(self, n=15):
        """The n slowest runs and the whole, so that the suite's time is seen to grow."""
        total = sum(s for s, _ in self.times)
        top = sorted(self.times, reverse=True)[:n]
        return "time: %.0f s in all; slowest: %s" % (
            total, ", ".join("%s %.1f s" % (name, s) for s, name in top))

    def skip(self, name, why):
        self.skipped += 1
        print("SKIP %s: %s" % (name, why), flush=True)

    def bad(self, name, why, run):
        self.failed += 1
        self.failures.append(name)
        print("FAIL %s: %s" % (name, why), flush=True)
        seen = set()
        for path in run.logs:
            if path in seen:
                continue
            seen.add(path)
            t = tail(path)
            if t:
                print("  --- %s:" % os.path.relpath(path, run.dir))
                print("\n".join("  | " + l for l in t.splitlines()))
        run.keep = True


# built by meson against libckpt itself, not as e2e programs
LIB_PROGRAMS = ("api_lib", "api_key", "api_signal_soon", "api_shm_nattch")


def programs():
    """The e2e programs to build: each entry's program with a .c file here."""
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted({t["program"] for t in TESTS
                   if t["program"] not in LIB_PROGRAMS
                   and os.path.exists(os.path.join(here, t["program"] + ".c"))})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", default="build/ckpt")
    ap.add_argument("--bindir", default="build/tests/e2e")
    ap.add_argument("--no-ckpt", action="store_true",
                    help="run the programs natively, without checkpoint/restart")
    ap.add_argument("--only", help="comma-separated test names")
    ap.add_argument("--mode", choices=ALL_MODES,
                    help="run only this mode (default: every mode of every test; "
                         "with --no-ckpt: basic)")
    ap.add_argument("--keep", action="store_true", help="keep the directories of passed tests")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--programs", action="store_true",
                    help="print the test programs meson builds, one per line")
    ap.add_argument("-v", "--verbose", action="store_true")
    opts = ap.parse_args()
    opts.ckpt = os.path.abspath(opts.ckpt)
    opts.bindir = os.path.abspath(opts.bindir)
    opts.python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable

    if opts.programs:
        print("\n".join(programs()))
        return 0
    if opts.list:
        for t in TESTS:
            print("%-18s %-10s %s" % (t["name"], t["kind"], ",".join(t["modes"])))
        return 0
    if os.geteuid() != 0:
        print("warning: not root; several tests need root", file=sys.stderr)
    # started in the background of a shell (SIGINT, SIGQUIT ignored), the
    # programs would inherit that, and the tests that end a server by
    # SIGINT would wait for ever: they get the defaults
    for sig in (signal.SIGINT, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if not opts.no_ckpt and not os.access(opts.ckpt, os.X_OK):
        print("error: %s is not executable" % opts.ckpt, file=sys.stderr)
        return 2

    only = set(opts.only.split(",")) if opts.only else None
    if only:
        unknown = only - {t["name"] for t in TESTS}
        if unknown:
            print("error: unknown test(s): %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
    modes = [opts.mode] if opts.mode else ([B] if opts.no_ckpt else list(ALL_MODES))

    res = Results()
    opts.results = res
    for t in TESTS:
        if only and t["name"] not in only:
            continue
        for mode in modes:
            if mode not in t["modes"]:
                continue
            run = Run(opts, t, mode)
            run.keep = False
            started = time.monotonic()
            try:
                run.run()
                res.ok(run.name, run.notes)
            except Skip as e:
                res.skip(run.name, str(e))
            except Fail as e:
                res.bad(run.name, str(e), run)
            except Exception as e:  # a runner bug must not hide the others
                res.bad(run.name, "runner error: %r" % e, run)
            finally:
                run.cleanup()
                res.timed(run.name, time.monotonic() - started)
                if run.keep or opts.keep:
                    print("  kept %s" % run.dir, flush=True)
                else:
                    shutil.rmtree(run.dir, ignore_errors=True)

    if len(res.times) > 1:
        print(res.slowest())
    line = "%d passed, %d failed" % (res.passed, res.failed)
    if res.skipped:
        line += ", %d skipped" % res.skipped
    print(line)
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
