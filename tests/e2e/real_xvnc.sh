#!/bin/sh
# The Xvnc desktop of the real_xvnc tests, as pid 1 of `ckpt run`: Xvnc on
# display $1 with the VNC listener $2 ("unix": -rfbunixpath vnc.sock, no TCP
# at all; "tcp": its default TCP port 5900+N, on loopback; "net": the same
# port on every address, in a container with a network of its own), an xterm whose
# bash keeps a variable of its own (set by its rc file, not exported), and
# xclock. Writes "ready" (its pid, 1) once both windows are mapped; then
# waits (the runner kills the container).
d=$1 listen=$2
case $listen in
unix) Xvnc ":$d" -SecurityTypes None -rfbunixpath "$PWD/vnc.sock" -rfbport -1 \
	-nolisten tcp -geometry 800x600 -depth 24 >xvnc.log 2>&1 & ;;
tcp) Xvnc ":$d" -SecurityTypes None -localhost -geometry 800x600 -depth 24 \
	>xvnc.log 2>&1 & ;;
net) Xvnc ":$d" -SecurityTypes None -geometry 800x600 -depth 24 >xvnc.log 2>&1 & ;;
esac
export DISPLAY=":$d"
i=0
until xdpyinfo >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -gt 600 ] && { echo "FAIL: Xvnc did not start"; exit 1; }
	sleep 0.1
done
cat >bashrc <<'RC'
PS1='xvnc$ '
MYVAR="kept-$RANDOM-$RANDOM"
RC
xterm -geometry 80x24+0+0 -title xvnc-term -e bash --noprofile --rcfile "$PWD/bashrc" -i \
	>xterm.log 2>&1 &
xclock -update 1 -geometry 120x120+600+0 >xclock.log 2>&1 &
i=0
until xwininfo -name xvnc-term 2>/dev/null | grep -q IsViewable &&
	xwininfo -name xclock 2>/dev/null | grep -q IsViewable; do
	i=$((i + 1)); [ $i -gt 600 ] && { echo "FAIL: no xterm or xclock window"; exit 1; }
	sleep 0.1
done
echo $$ >ready
wait
