#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_api.c into the folder given as argument
(tests/reliability/corpus): one small program per operation and tier, and
sequences that chain them, in the input format fuzz_api.c decodes.  The
corpus is committed; rerun this after changing that format."""

import os
import sys

# Opcodes, in the order of enum operation in fuzz_api.c.
(MALLOC, MALLOC_AGAIN, CALLOC, REALLOC, REALLOCARRAY, POSIX_MEMALIGN, ALIGNED_ALLOC,
 MEMALIGN, VALLOC, PVALLOC, FREE, FREE_AGAIN, USE_USABLE_SIZE, REMOTE_FREE,
 REMOTE_MALLOC, VERIFY_ALL) = range(16)

# Tier bytes of decode_size: the byte modulo 16 picks the tier.
EDGE_SIZES = [
    0, 1, 7, 8, 9, 15, 16, 17, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097,
    32767, 32768, 32769, 65536, 1048575, 1048576, 1048577, 2097152, 2097153,
]


def small(size):
    assert 0 <= size <= 1024
    return bytes([0]) + size.to_bytes(2, "big")


def mid(size):
    assert 1025 <= size <= 32768
    return bytes([8]) + (size - 1025).to_bytes(2, "big")


def l25(size):
    assert 32769 <= size <= 1 << 20
    return bytes([11]) + (size - 32769).to_bytes(3, "big")


def large(size):
    assert (1 << 20) < size <= 4 << 20
    return bytes([13]) + (size - (1 << 20) - 1).to_bytes(3, "big")


def edge(size):
    return bytes([30, EDGE_SIZES.index(size)])


def impossible(index):
    return bytes([15, index])


def size_spec(size):
    if size in EDGE_SIZES and size not in (0, 1, 16, 100):
        return edge(size)
    if size <= 1024:
        return small(size)
    if size <= 32768:
        return mid(size)
    if size <= 1 << 20:
        return l25(size)
    return large(size)


def alignment(log2):
    return bytes([log2])


def op(opcode, slot, *operands):
    return bytes([opcode, slot]) + b"".join(operands)


TIER_SIZES = [1, 16, 100, 1000, 1025, 5000, 32768, 40000, 300000, 1 << 20, (1 << 20) + 1,
              3 << 20]


def single_operations():
    for size in TIER_SIZES:
        yield "malloc_%d" % size, op(MALLOC, 0, size_spec(size)) + op(FREE, 0)
        yield "calloc_%d" % size, op(CALLOC, 1, bytes([3]), size_spec(size))
    for size in (1, 5000, 300000, 3 << 20):
        yield "valloc_%d" % size, op(VALLOC, 2, size_spec(size))
        yield "pvalloc_%d" % size, op(PVALLOC, 3, size_spec(size)) + op(USE_USABLE_SIZE, 3)
    for log2 in (0, 4, 6, 12, 16, 21):
        yield "posix_memalign_%d" % log2, op(POSIX_MEMALIGN, 4, alignment(log2), size_spec(5000))
        yield "memalign_%d" % log2, op(MEMALIGN, 5, alignment(log2), size_spec(100))
        yield "aligned_alloc_%d" % log2, op(ALIGNED_ALLOC, 6, alignment(log2),
                                             size_spec(300000))
    yield "odd_alignments", b"".join(
        op(code, 7, bytes([selector]), size_spec(64))
        for code in (POSIX_MEMALIGN, MEMALIGN, ALIGNED_ALLOC)
        for selector in (224, 225, 226, 227, 233))
    yield "impossible_sizes", b"".join(
        op(code, 8, impossible(index)) for code in (MALLOC, REALLOC, VALLOC, PVALLOC)
        for index in range(8))
    yield "overflowing_arrays", (op(MALLOC, 9, size_spec(300))
                                 + op(REALLOCARRAY, 9, bytes([255]), impossible(1))
                                 + op(CALLOC, 10, bytes([200]), impossible(0))
                                 + op(REALLOCARRAY, 9, bytes([30]), size_spec(40)))


def sequences():
    grow = op(MALLOC, 0, size_spec(1))
    for size in TIER_SIZES[1:]:
        grow += op(REALLOC, 0, size_spec(size))
    yield "realloc_grow_through_tiers", grow
    shrink = op(MALLOC, 0, size_spec(3 << 20))
    for size in reversed(TIER_SIZES[:-1]):
        shrink += op(REALLOC, 0, size_spec(size))
    yield "realloc_shrink_through_tiers", shrink + op(REALLOC, 0, edge(0))
    yield "remote_frees", b"".join(
        op(MALLOC, slot, size_spec(size)) + op(REMOTE_FREE, slot)
        for slot, size in enumerate(TIER_SIZES))
    yield "remote_mallocs", b"".join(
        op(REMOTE_MALLOC, slot, size_spec(size)) + op(REALLOC, slot, size_spec(size + 7))
        for slot, size in enumerate(TIER_SIZES[:-1]))
    fill = b"".join(op(MALLOC, slot, size_spec(16 + 8 * slot)) for slot in range(32))
    yield "fill_table_small", fill + op(VERIFY_ALL, 0)
    yield "free_every_other", fill + b"".join(op(FREE, slot, b"") for slot in range(0, 32, 2)) \
        + fill + op(VERIFY_ALL, 0)
    yield "usable_size_then_realloc", b"".join(
        op(MALLOC, 0, size_spec(size)) + op(USE_USABLE_SIZE, 0)
        + op(REALLOC, 0, size_spec(size * 2)) for size in (13, 700, 3000, 50000))
    churn = b""
    for round_ in range(6):
        for slot in range(8):
            size = TIER_SIZES[(slot + round_) % len(TIER_SIZES)]
            churn += op(MALLOC if (slot + round_) % 3 else CALLOC, slot,
                        *(([bytes([2])] if (slot + round_) % 3 == 0 else []) + [size_spec(size)]))
        churn += op(REMOTE_FREE, round_ % 8) + op(VERIFY_ALL, 0)
    yield "mixed_churn", churn
    yield "every_edge_size", b"".join(
        op(MALLOC, index % 32, edge(size)) for index, size in enumerate(EDGE_SIZES))


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                                "corpus")
    os.makedirs(folder, exist_ok=True)
    count = 0
    for name, data in list(single_operations()) + list(sequences()):
        with open(os.path.join(folder, name), "wb") as out:
            out.write(data)
        count += 1
    print("wrote %d inputs to %s" % (count, folder))


if __name__ == "__main__":
    main()
