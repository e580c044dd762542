# SPDX-License-Identifier: LGPL-2.1-or-later
"""A python3 asyncio server, run by runner.py as pid 1 of a `ckpt run`
container (ct_asyncio).

One event loop (an epoll selector: the listening socket, every
connection, the signal wake-up socket are epoll watches) serves a line
protocol on the unix socket aio.sock in the test directory: SET k v, GET k,
STATS, anything else is echoed. A client of its own, in the same loop,
connects first and stays connected across the checkpoint; a ticker task
counts 20 ms sleeps. It writes "ready" (its pid, 1 in the container) and
waits for SIGUSR1 (loop.add_signal_handler). Meanwhile the runner
connects from outside before the checkpoint (SET before) and after the
restart (GET before, SET outside): those connections are served by the
restored loop only if its epoll watches came back. On SIGUSR1 the client
connected across checks, over its old connection, its own key, the
runner's keys and the number of connections served; the ticker must have
gone on. Prints PASS or FAIL: reason.
"""
import asyncio
import os
import signal
import sys


async def handle(reader, writer, state):
    state["conns"] += 1
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            cmd = line.decode().rstrip("\n")
            if cmd == "STATS":
                reply = "conns=%d" % state["conns"]
            elif cmd.startswith("GET "):
                reply = state["kv"].get(cmd[4:], "-")
            elif cmd.startswith("SET "):
                k, v = cmd[4:].split(" ", 1)
                state["kv"][k] = v
                reply = "OK"
            else:
                reply = "echo " + cmd
            writer.write((reply + "\n").encode())
            await writer.drain()
    finally:
        writer.close()


async def ticker(state):
    while True:
        await asyncio.sleep(0.02)
        state["ticks"] += 1


async def ask(reader, writer, cmd):
    writer.write((cmd + "\n").encode())
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 20)
    return line.decode().rstrip("\n")


async def main():
    d = os.environ.get("CKPT_TEST_DIR", ".")
    path = os.path.join(d, "aio.sock")
    if os.path.lexists(path):
        os.unlink(path)
    state = {"conns": 0, "kv": {}, "ticks": 0}
    server = await asyncio.start_unix_server(lambda r, w: handle(r, w, state), path)
    reader, writer = await asyncio.open_unix_connection(path)
    fails = []
    if await ask(reader, writer, "SET mine 42") != "OK":
        fails.append("SET over the first connection failed")
    tick = asyncio.get_running_loop().create_task(ticker(state))
    woken = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, woken.set)
    with open(os.path.join(d, "ready"), "w") as f:
        f.write("%d\n" % os.getpid())

    await woken.wait()

    ticks = state["ticks"]
    for cmd, want in (("GET mine", "42"), ("GET before", "from the runner"),
                      ("GET outside", "after the restart"), ("hello", "echo hello")):
        got = await ask(reader, writer, cmd)
        if got != want:
            fails.append("%r over the connection kept across: %r, want %r" % (cmd, got, want))
    got = await ask(reader, writer, "STATS")
    # this one, the runner's before the checkpoint and after the restart
    if got != "conns=3":
        fails.append("STATS: %r, want conns=3" % got)
    await asyncio.sleep(0.2)
    if state["ticks"] <= ticks:
        fails.append("the ticker stopped at %d" % ticks)
    tick.cancel()
    writer.close()
    server.close()
    await server.wait_closed()
    return fails


def run():
    try:
        fails = asyncio.run(main())
    except Exception as e:
        fails = ["%s: %s" % (type(e).__name__, str(e)[:200])]
    for f in fails:
        print("FAIL: " + f, flush=True)
    if fails:
        return 1
    print("PASS", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run())
