#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Remakes the seed images of corpus/: each e2e program below checkpointed
# once (runner.py --keep, mode basic), its image gzip'd. Run it when the
# image format changes (record types, protobuf fields), from the source
# root, after `make build`:  tests/fuzz/make-corpus.sh [BUILD]
set -eu
build=${1:-build}
tests="epoll_watch eventfd_count fifo_data file_fds inotify_watch locks_posix memfd_fd
memfd_map mqueue_msgs pidfd_child pipe_read ptimer_basic sig_pending signalfd_mask
sysv_shm timerfd_armed tree_share unix_listen unix_pair netlink_sock id_timens mem_remake
unix_renamed"
out=tests/fuzz/corpus
for t in $tests; do
	log=$(python3 tests/e2e/runner.py --ckpt "$build/ckpt" --bindir "$build/tests/e2e" \
		--only "$t" --mode basic --keep 2>&1) || { echo "$log"; exit 1; }
	dir=$(echo "$log" | sed -n 's/.*kept \(\/[^ ]*\).*/\1/p' | tail -n 1)
	[ -f "$dir/img" ] || { echo "$t: no image kept ($log)"; exit 1; }
	gzip -9n < "$dir/img" > "$out/$t.img.gz"
	rm -rf "$dir"
	echo "$t: $(stat -c %s "$out/$t.img.gz") bytes"
done
