#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The command of a bubblewrap sandbox (runner.py, sb_bwrap): bwrap
# --unshare-all --share-net --ro-bind / / --proc /proc --dev /dev --tmpfs
# /tmp --bind DIR DIR. Its /dev is a tmpfs with the host's null, zero, ...
# bound onto empty files, its root and every host mount under it read-only.
# After the restart it checks from inside that it is the same sandbox: pid
# 2 under bwrap's pid 1, uid 0 of its user namespace (or $1: bwrap run by
# user nobody maps only nobody), /dev/null a device
# it can write to, the root still read-only, /tmp its tmpfs with its file,
# /dev its writable tmpfs with its devpts on /dev/pts.
got=0
trap 'got=1' USR1
fail() { echo "FAIL: $*"; exit 1; }
d=$(pwd)
echo kept > /tmp/keep || fail "cannot write /tmp"
exec 3> /dev/null
[ -c /dev/null ] || fail "/dev/null is not a device before"
(: > /sb_bwrap_probe) 2> /dev/null && fail "the root is writable before"
ro_before=$(awk '$5 == "/" { print $6 }' /proc/self/mountinfo | cut -d, -f1)
[ "$ro_before" = ro ] || fail "the root is $ro_before before"
# bwrap binds parts of its /proc read-only (/proc/bus, /proc/irq ...)
procs() { awk '$5 ~ /^\/proc\// { split($6, o, ","); print $5, o[1] }' /proc/self/mountinfo | sort; }
procs_before=$(procs)
echo 1 > "$d/ready.tmp" && mv "$d/ready.tmp" "$d/ready"
while [ $got = 0 ]; do sleep 0.05; done
[ "$$" = 2 ] || fail "pid $$ inside, want 2"
[ "$(id -u)" = "${1:-0}" ] || fail "uid $(id -u) inside, want ${1:-0}"
[ -c /dev/null ] || fail "/dev/null is not a device: $(stat -c %F /dev/null)"
echo x >&3 || fail "cannot write fd 3 (/dev/null)"
echo x > /dev/null || fail "cannot write /dev/null"
[ "$(cat /tmp/keep)" = kept ] || fail "/tmp/keep: $(cat /tmp/keep 2>&1)"
[ "$(stat -f -c %T /tmp)" = tmpfs ] || fail "/tmp is $(stat -f -c %T /tmp)"
[ "$(stat -f -c %T /dev/pts)" = devpts ] || fail "/dev/pts is $(stat -f -c %T /dev/pts)"
[ -c /dev/ptmx ] || fail "/dev/ptmx is not a device (it leads to $(readlink /dev/ptmx))"
: > /dev/sb_bwrap_probe && rm /dev/sb_bwrap_probe || fail "/dev (bwrap's tmpfs) is not writable"
(: > /sb_bwrap_probe) 2> /dev/null && { rm -f /sb_bwrap_probe; fail "the root is writable"; }
ro=$(awk '$5 == "/" { print $6 }' /proc/self/mountinfo | cut -d, -f1)
[ "$ro" = ro ] || fail "the root is $ro"
[ "$(procs)" = "$procs_before" ] || fail "the mounts under /proc: $(procs | tr '\n' ' '), were $(echo "$procs_before" | tr '\n' ' ')"
# (bwrap run by a user binds none)
[ -n "$procs_before" ] || [ "${1:-0}" != 0 ] || fail "bwrap bound nothing under /proc"
echo PASS
