#!/usr/bin/env python3
"""A TCP relay that records what crosses it, as an observer on the network would see it.

    tap_relay.py TARGET_HOST TARGET_PORT PORT_FILE RECORD_FILE [FLIP_AT]

Listens on an ephemeral loopback port (written to PORT_FILE), forwards every connection to
TARGET_HOST:TARGET_PORT, and appends every byte of both directions to RECORD_FILE. With FLIP_AT,
the byte at that offset of each connection's client-to-server stream is changed on the way (an
attacker on the path). Runs until killed.
"""
import socket
import sys
import threading


def pump(src, dst, record, lock, flip_at):
    seen = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if flip_at is not None and seen <= flip_at < seen + len(data):
                i = flip_at - seen
                data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
            seen += len(data)
            with lock:
                record.write(data)
                record.flush()
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    host, port, port_file, record_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    flip_at = int(sys.argv[5]) if len(sys.argv) > 5 else None
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    record = open(record_file, "ab")
    lock = threading.Lock()
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection((host, port))
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=pump, args=(client, upstream, record, lock, flip_at),
                         daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client, record, lock, None),
                         daemon=True).start()


if __name__ == "__main__":
    main()
