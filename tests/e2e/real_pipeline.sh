#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A shell pipeline (run by runner.py as real_pipeline): producer | filter |
# consumer over INPUT, the result in OUTPUT. The producer (awk) and the
# filter (sed) are fast, the consumer (awk, which numbers the lines, burns
# some CPU every 100 lines and ends with a total) is slow: checkpointed
# mid-stream, both pipes are full and their writers blocked. The runner
# compares OUTPUT with that of an uninterrupted run.
set -u -o pipefail
in=$1
out=$2
awk '{ print NR % 7, $0 }' "$in" | sed -e 's/a/A/g; /^6 .*7 /d' |
	awk '{ n++; s += length($0); print n ": " $0
	       if (n % 100 == 0) for (i = 0; i < 15000; i++) x++ }
	     END { print "total", n, s }' >"$out"
rc=$?
echo "pipeline status $rc"
exit $rc
