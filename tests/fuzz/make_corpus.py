#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets into corpus/<target>/.

The layouts mirror src/bootstrap/wire.h and transports/tcp/tcp_wire.h (host
byte order, x86-64), and the magic/nonce/job values mirror fuzz_check.h. Each
target gets a few valid messages, so fuzzing starts past the magic checks, and
a few that must be refused. Run it again after changing a layout.
"""
import os
import socket
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x0123456789abcdef
NONCE = 0xfedcba9876543210
NRANKS = 4
AF_INET, AF_INET6 = socket.AF_INET, socket.AF_INET6


def sockaddr_in(ip, port):
    return struct.pack("<H", AF_INET) + struct.pack(">H", port) + socket.inet_aton(ip) + bytes(8)


def sockaddr_in6(ip, port):
    return (struct.pack("<H", AF_INET6) + struct.pack(">H", port) + bytes(4) +
            socket.inet_pton(AF_INET6, ip) + bytes(4))


def wire_addr(sa):  # WireAddr: 28 bytes
    return sa + bytes(28 - len(sa))


def storage(sa):  # sockaddr_storage: 128 bytes
    return sa + bytes(128 - len(sa))


def frame_check(magic):
    return (magic ^ (magic >> 32) ^ 0x9e3779b9) & 0xffffffff


def unique_id(magic, flags, root, version=1, sig=b"braid-id"):
    body = sig + struct.pack("<IIQ", version, flags, magic) + wire_addr(root)
    return body + bytes(128 - len(body))


def hello(kind, rank, nranks, addr, magic=MAGIC):
    return struct.pack("<QIiiI", magic, kind, rank, nranks, 0) + wire_addr(addr) + bytes(4)


def root_reply(kind, count, payload=b"", magic=MAGIC):
    return struct.pack("<QII", magic, kind, count) + payload


def conn_header(rank, magic=MAGIC):
    return struct.pack("<QiI", magic, rank, 0)


def frame_header(tag, size, magic=MAGIC):
    return struct.pack("<IIQ", frame_check(magic), tag, size)


def tcp_blob(nonce, slot_bytes, nslots, addr, nsockets=1, magic=0x504354444941524b):
    return struct.pack("<QQQii", magic, nonce, slot_bytes, nslots, nsockets) + storage(addr)


def tcp_hello(nonce, slot_bytes, rank, channel, nslots, nsockets=1, index=0,
              magic=0x4f4c4c4548444941):
    return struct.pack("<QQQiiiiii", magic, nonce, slot_bytes, rank, channel, nslots, nsockets,
                       index, 0)


def tcp_frame(nbytes, seq):
    return struct.pack("<QQ", nbytes, seq)


V4 = sockaddr_in("127.0.0.1", 40000)
V6 = sockaddr_in6("::1", 40001)
CHECKIN, QUERY = 0x48454c4f, 0x51525920
TABLE, MISSING = 0x5441424c, 0x4d495353

SEEDS = {
    "unique_id": [unique_id(MAGIC, 1, V4), unique_id(MAGIC, 0, V6),
                  unique_id(MAGIC, 1, V4, version=2), unique_id(0, 1, V4)],
    "root_hello": [hello(CHECKIN, 0, NRANKS, V4), hello(QUERY, 3, NRANKS, V6),
                   hello(CHECKIN, 2, 1 << 30, V4), hello(CHECKIN, 1, NRANKS, V4, magic=MAGIC ^ 1),
                   hello(CHECKIN, 1, NRANKS, V4)[:20]],
    "root_reply": [root_reply(TABLE, NRANKS, b"".join(wire_addr(V4) for _ in range(NRANKS))),
                   root_reply(TABLE, NRANKS, b"".join(wire_addr(a) for a in (V4, V6, V4, V6))),
                   root_reply(MISSING, 2, struct.pack("<ii", 1, -3)),
                   root_reply(MISSING, 0), root_reply(TABLE, 1, wire_addr(V6)),
                   root_reply(MISSING, 1, struct.pack("<i", -2**31))],
    "conn_header": [conn_header(0), conn_header(3), conn_header(1), conn_header(0, MAGIC + 1)],
    "frame_header": [frame_header(1, 0), frame_header(0x1000, 4096), frame_header(2, 1 << 40),
                     frame_header(3, 16, magic=MAGIC + 1)],
    "tcp_blob": [tcp_blob(NONCE, 4096, 8, V4), tcp_blob(1, 1 << 20, 2, V6, nsockets=4),
                 tcp_blob(NONCE, 0, 8, V4), tcp_blob(NONCE, 4096, 8, V4)[:40],
                 tcp_blob(NONCE, 4096, 8, V4, nsockets=65), tcp_blob(NONCE, 4096, 8, V4, nsockets=0)],
    "tcp_hello": [tcp_hello(NONCE, 4096, 1, 0, 8), tcp_hello(NONCE, 1 << 20, 3, 2, 2, 4, 3),
                  tcp_hello(NONCE + 1, 4096, 1, 0, 8), tcp_hello(NONCE, 4096, -1, 0, 8),
                  tcp_hello(NONCE, 4096, 1, 0, 8, 2, 2), tcp_hello(NONCE, 4096, 1, 0, 8, 64, -1)],
    "tcp_frame_header": [tcp_frame(100, 7), tcp_frame(4096, 7), tcp_frame(4097, 7),
                         tcp_frame(0, 8), tcp_frame(2**64 - 1, 7), tcp_frame(100, 7)],
}


def main():
    for target, seeds in SEEDS.items():
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for old in os.listdir(d):
            os.remove(os.path.join(d, old))
        for i, seed in enumerate(seeds):
            with open(os.path.join(d, "seed%02d" % i), "wb") as f:
                f.write(seed)


if __name__ == "__main__":
    main()
