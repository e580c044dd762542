#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# contrib/ckpt.bash-completion against the ckpt just built: commands,
# each command's options, values of options that take a file.
# usage: test-completion.sh SOURCE_ROOT CKPT
set -u
root=$1 ckpt=$2 failed=0
source "$root/contrib/ckpt.bash-completion"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
touch "$dir/image.ckpt"

expect() { # expect "WANT" WORDS...: COMPREPLY (sorted, unique) is WANT
    local want=$1; shift
    COMP_WORDS=("$ckpt" "$@"); COMP_CWORD=$#; COMPREPLY=()
    _ckpt
    local got
    got=$(printf '%s\n' "${COMPREPLY[@]}" | LC_ALL=C sort -u | tr '\n' ' ' | sed 's/ $//')
    if [[ $got != "$want" ]]; then
        echo "FAIL: ckpt $*: got '$got', want '$want'"; failed=1
    fi
}
expect "check checkpoint" ch
expect "--key --kill" checkpoint --k
expect "--detach-clients" checkpoint 1 --det
expect "--detach --dry-run" restart --d
expect "--diff" inspect --di
expect "$dir/image.ckpt" checkpoint 1 -o "$dir/ima"
expect "$dir/image.ckpt" restart "$dir/ima"
expect "$dir/image.ckpt" checkpoint 1 --log "$dir/ima"
expect "echo" run -- ech
expect "echo" run ech
[[ $failed == 0 ]] && echo "completion: all passed"
exit $failed
