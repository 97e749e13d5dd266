#!/usr/bin/python3
"""silent_server.py PORTFILE [SECONDS]: a TCP server on 127.0.0.1 that
accepts every connection, reads what the client sends and never answers
(a hung server: the kernel completes the handshake, nothing comes back).
Writes its port to PORTFILE once it listens; exits after SECONDS (default
120) so a test that dies leaves nothing running for long. Prints
"accepted N" to stdout at each accepted connection (it answers nothing,
so it has no control port: tests count connections in its output)."""
import os
import selectors
import socket
import sys
import time


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: silent_server.py PORTFILE [SECONDS]\n")
        return 2
    portfile = sys.argv[1]
    lifetime = float(sys.argv[2]) if len(sys.argv) == 3 else 120.0
    if not 0 < lifetime <= 3600:
        sys.stderr.write("silent_server.py: SECONDS must be in (0, 3600]\n")
        return 2
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(128)
    lsock.setblocking(False)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % lsock.getsockname()[1])
    os.rename(tmp, portfile)

    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ)
    end = time.monotonic() + lifetime
    accepted = 0
    conns = []
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        for key, _ in sel.select(timeout=min(left, 1.0)):
            if key.fileobj is lsock:
                try:
                    c, _ = lsock.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
                conns.append(c)
                accepted += 1
                print("accepted %d" % accepted, flush=True)
                continue
            # read and discard; a closed client is forgotten
            try:
                data = key.fileobj.recv(65536)
            except (BlockingIOError, ConnectionError):
                data = b"x"
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                conns.remove(key.fileobj)
    for c in conns:
        c.close()
    lsock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
