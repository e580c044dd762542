#!/bin/sh
# Installs the Debian packages ckpt needs to build and test, if missing.
set -e
need=""
command -v meson >/dev/null 2>&1 || need="$need meson"
command -v ninja >/dev/null 2>&1 || need="$need ninja-build"
command -v protoc-c >/dev/null 2>&1 || need="$need protobuf-c-compiler"
[ -f /usr/include/protobuf-c/protobuf-c.h ] || need="$need libprotobuf-c-dev"
# sealed images (--key): crypto_secretstream, crypto_kdf
[ -f /usr/include/sodium.h ] || need="$need libsodium-dev"
# the network lock (src/net/lock.c): nftables through libnftables
[ -f /usr/include/nftables/libnftables.h ] || need="$need libnftables-dev"
# checkpoint --compress: page store records compressed with zstd
[ -f /usr/include/zstd.h ] || need="$need libzstd-dev"
# network namespaces (src/net/rtnl.c): rtnetlink through libmnl
[ -f /usr/include/libmnl/libmnl.h ] || need="$need libmnl-dev"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v gcc >/dev/null 2>&1 || need="$need gcc"
command -v redis-server >/dev/null 2>&1 || need="$need redis-server"
# the terminal tests (real_tmux, real_screen) drive these
command -v tmux >/dev/null 2>&1 || need="$need tmux"
command -v screen >/dev/null 2>&1 || need="$need screen"
command -v vim >/dev/null 2>&1 || need="$need vim"
# the real daemons (real_nginx, real_postgres) and the client of one
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || need="$need nginx"
command -v curl >/dev/null 2>&1 || need="$need curl"
# tcp_peer drops a connection's packets while its server is down (nft)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need="$need nftables"
[ -x /usr/lib/postgresql/15/bin/postgres ] || need="$need postgresql-15"
[ -x /usr/lib/postgresql/15/bin/psql ] || need="$need postgresql-client-15"
# the container root file systems of the mount tests (ct_rootfs_*)
[ -x /bin/busybox ] || need="$need busybox-static"
# real_sshd: sshd in a ckpt run --net container, an ssh client
[ -x /usr/sbin/sshd ] || need="$need openssh-server"
command -v ssh >/dev/null 2>&1 || need="$need openssh-client"
# the two test hosts of the migration tests (tests/e2e/twohost.py, real_mig_*)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need="$need iproute2"
command -v nsenter >/dev/null 2>&1 || need="$need util-linux"
command -v redis-benchmark >/dev/null 2>&1 || need="$need redis-tools"
# real_fio_aio: fio's libaio engine across a restart (AIO contexts)
command -v fio >/dev/null 2>&1 || need="$need fio"
# real_node: Node.js's HTTP server, a worker thread
command -v node >/dev/null 2>&1 || need="$need nodejs"
# real_etcd: etcd (a Go program)
command -v etcd >/dev/null 2>&1 || need="$need etcd-server"
# real_mariadb_*: MariaDB's server, mariadb-install-db and its client
[ -x /usr/sbin/mariadbd ] || need="$need mariadb-server"
command -v mariadb >/dev/null 2>&1 || need="$need mariadb-client"
# real_apache_tcp, real_varnish_tcp: Apache (event MPM), Varnish
[ -x /usr/sbin/apache2 ] || need="$need apache2"
[ -x /usr/sbin/varnishd ] || need="$need varnish"
# real_qemu_tcg: QEMU emulating a PC (no KVM needed), gcc and ld for its boot sector
command -v qemu-system-x86_64 >/dev/null 2>&1 || need="$need qemu-system-x86"
# real_haproxy_tcp: haproxy
[ -x /usr/sbin/haproxy ] || need="$need haproxy"
# real_memcached_tcp: memcached
command -v memcached >/dev/null 2>&1 || need="$need memcached"
# real_sqlite: SQLite's shell
command -v sqlite3 >/dev/null 2>&1 || need="$need sqlite3"
# real_dbus: a session bus daemon, and dbus-send to ask it
command -v dbus-daemon >/dev/null 2>&1 || need="$need dbus-daemon"
command -v dbus-send >/dev/null 2>&1 || need="$need dbus-bin"
# real_gpg_agent: gpg-agent, and gpg-connect-agent to ask it
command -v gpg-agent >/dev/null 2>&1 || need="$need gpg-agent"
command -v gpg-connect-agent >/dev/null 2>&1 || need="$need gpgconf"
# real_java: a JVM, javac for its program, jcmd
command -v javac >/dev/null 2>&1 && command -v jcmd >/dev/null 2>&1 || need="$need openjdk-17-jdk-headless"
# real_xvnc: an Xvnc desktop (xterm, xclock) driven by X clients from outside
command -v Xvnc >/dev/null 2>&1 || need="$need tigervnc-standalone-server"
command -v xterm >/dev/null 2>&1 || need="$need xterm"
command -v xclock >/dev/null 2>&1 || need="$need x11-apps"
command -v xwininfo >/dev/null 2>&1 || need="$need x11-utils"
command -v xdotool >/dev/null 2>&1 || need="$need xdotool"
[ -f /usr/share/fonts/X11/misc/6x13-ISO8859-1.pcf.gz ] || need="$need xfonts-base"
[ -z "$need" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "missing packages:$need (run as root, or install them)" >&2
	exit 1
fi
echo "installing:$need"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq $need >/dev/null
