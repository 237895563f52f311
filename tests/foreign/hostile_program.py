"""A program that breaks the process protocol (notes/PROTOCOL.md) in the way its first argument names, after
answering correctly where the case needs it: ``python hostile_program.py CASE``."""

import struct
import sys

CASE = sys.argv[1]
stdin, stdout = sys.stdin.buffer, sys.stdout.buffer


def send(text: bytes, payload: bytes = b""):
    stdout.write(text + payload)
    stdout.flush()


def read_call():
    header = stdin.readline()
    if not header or header.strip() == b"SDC 1 bye":
        sys.exit(0)
    _, _, _, call, seed, count = header.split()
    sizes = []
    for _ in range(int(count)):
        words = stdin.readline().split()
        if words[1] == b"same":  # the previous call's array: its dims as they were, no bytes
            sizes.append((words[0].decode(), LAST[words[0].decode()], 0))
            continue
        n = 1
        for d in words[3:3 + int(words[2])]:
            n *= int(d)
        sizes.append((words[0].decode(), [int(d) for d in words[3:3 + int(words[2])]], n * 8))
    arrays = {name: stdin.read(size) for name, _, size in sizes}
    LAST.update({name: dims for name, dims, _ in sizes})
    return int(call), {name: dims for name, dims, _ in sizes}, arrays


LAST = {}


if CASE == "exits_at_once":
    sys.exit(3)
if CASE == "prints_before_handshake":
    send(b"hello world, loading my kernel...\n")
stdin.readline()  # the checker's hello
if CASE == "other_version":
    send(b"SDC 2 hello future-kernel\n")
    sys.exit(0)
send(b"SDC 1 hello hostile-" + CASE.encode() + b"\n")
while True:
    call, dims, arrays = read_call()
    batch, gamma = dims["draft_token_ids"]
    if CASE == "closes_stdout" and call == 2:
        stdout.close()
        sys.exit(0)
    if CASE == "never_answers" and call == 2:
        import time
        time.sleep(3600)
    if CASE == "floods_stderr" and call == 2:
        sys.stderr.buffer.write(b"x" * (8 << 20))  # 8 MiB: more than any pipe holds
        sys.stderr.flush()
        sys.exit(7)
    if CASE == "garbage" and call == 2:
        send(b"\x00\x01binary garbage instead of an answer\n")
        continue
    if CASE == "error_message":
        send(b"SDC 1 error %d CUDA error: an illegal memory access was encountered\n" % call)
        continue
    width = gamma + 1 + (1 if CASE == "wrong_shape" else 0)
    out = []
    for b in range(batch):  # accept nothing: the first draft is rejected, token 0 recovered (a wrong law)
        out += [0] + [-1] * (width - 1)
    send(b"SDC 1 result %d 1\noutput i64 2 %d %d\n" % (call, batch, width), struct.pack(f"<{len(out)}q", *out))
