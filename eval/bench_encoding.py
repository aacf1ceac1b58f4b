"""ragsync's decoders and Python's codecs against the Encoding Standard's indexes.

For Shift_JIS, gb18030 (and GBK), Big5, EUC-KR, EUC-JP and every single-byte encoding, each
sequence the Standard's decoder defines (every one- and two-byte sequence of the multi-byte
encodings, every four-byte one of gb18030, every byte of the single-byte ones) is decoded by
the Standard's algorithm from its index, by ``ragsync.encoding.decode`` and by the Python
codecs one might name instead; the counts of sequences on which each disagrees with the
Standard are printed (a sequence one decodes and the other rejects counts too). The indexes
are those of a checkout of https://github.com/whatwg/encoding (``indexes.json`` and
``index-gb18030-ranges.txt``); the network is not used.

Usage: python eval/bench_encoding.py --indexes <whatwg/encoding checkout>
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ragsync.encoding import decode  # noqa: E402
from ragsync.encoding.decoders import PYTHON_CODECS, SINGLE_BYTE  # noqa: E402

Reference = Callable[[bytes], "str | None"]


def python(codec: str) -> Reference:
    def read(sequence: bytes) -> str | None:
        try:
            return sequence.decode(codec)
        except UnicodeDecodeError:
            return None

    return read


def ragsync(encoding: str) -> Reference:
    def read(sequence: bytes) -> str | None:
        try:
            return decode(sequence, encoding, strict=True)
        except UnicodeDecodeError:
            return None

    return read


def pairs(leads: range, trails: list[int]) -> Iterator[bytes]:
    for lead in leads:
        for trail in trails:
            yield bytes([lead, trail])


def shift_jis(index: dict) -> tuple[Reference, Iterator[bytes]]:
    jis0208 = index["jis0208"]

    def standard(sequence: bytes) -> str | None:
        if len(sequence) == 1:
            byte = sequence[0]
            if byte <= 0x80:
                return chr(byte)
            return chr(0xFF61 - 0xA1 + byte) if 0xA1 <= byte <= 0xDF else None
        lead, byte = sequence
        pointer = (lead - (0x81 if lead < 0xA0 else 0xC1)) * 188 + byte
        pointer -= 0x40 if byte < 0x7F else 0x41
        if 8836 <= pointer <= 10715:
            return chr(0xE000 - 8836 + pointer)
        code = jis0208[pointer] if pointer < len(jis0208) else None
        return chr(code) if code is not None else None

    leads = [*range(0x81, 0xA0), *range(0xE0, 0xFD)]
    singles = (bytes([b]) for b in range(256) if b not in leads)
    trails = [*range(0x40, 0x7F), *range(0x80, 0xFD)]
    two = (bytes([a, b]) for a in leads for b in trails)
    return standard, (s for part in (singles, two) for s in part)


def gb18030(index: dict, ranges: list[tuple[int, int]]) -> tuple[Reference, Iterator[bytes]]:
    table = index["gb18030"]
    starts = [pointer for pointer, _ in ranges]

    def standard(sequence: bytes) -> str | None:
        if len(sequence) == 1:
            return "€" if sequence == b"\x80" else None
        if len(sequence) == 2:
            lead, byte = sequence
            pointer = (lead - 0x81) * 190 + byte - (0x40 if byte < 0x7F else 0x41)
            code = table[pointer] if pointer < len(table) else None
            return chr(code) if code is not None else None
        a, b, c, d = sequence
        pointer = (a - 0x81) * 12600 + (b - 0x30) * 1260 + (c - 0x81) * 10 + d - 0x30
        if 39419 < pointer < 189000 or pointer > 1237575:
            return None
        if pointer == 7457:
            return "\ue7c7"
        if pointer >= 189000:
            return chr(0x10000 + pointer - 189000)
        at = bisect.bisect_right(starts, pointer) - 1
        return chr(ranges[at][1] + pointer - ranges[at][0])

    trails = [*range(0x40, 0x7F), *range(0x80, 0xFF)]
    four = (
        bytes([a, b, c, d])
        for a in [*range(0x81, 0x85), *range(0x90, 0xE4)]
        for b in range(0x30, 0x3A)
        for c in range(0x81, 0xFF)
        for d in range(0x30, 0x3A)
    )
    sequences = (s for part in ([b"\x80"], pairs(range(0x81, 0xFF), trails), four) for s in part)
    return standard, sequences


def two_byte(
    table: list, leads: range, trails: list[int], pointer: Callable[[int, int], int | None]
) -> tuple[Reference, Iterator[bytes]]:
    def standard(sequence: bytes) -> str | None:
        at = pointer(*sequence)
        code = table[at] if at is not None and at < len(table) else None
        return chr(code) if code is not None else None

    return standard, pairs(leads, trails)


def big5_pointer(lead: int, byte: int) -> int | None:
    if not (0x40 <= byte <= 0x7E or 0xA1 <= byte <= 0xFE):
        return None
    return (lead - 0x81) * 157 + byte - (0x40 if byte < 0x7F else 0x62)


def compare(
    name: str, standard: Reference, sequences: Iterator[bytes], readers: dict[str, Reference]
) -> None:
    differ = dict.fromkeys(readers, 0)
    total = 0
    for sequence in sequences:
        total += 1
        want = standard(sequence)
        for reader, read in readers.items():
            if read(sequence) != want:
                differ[reader] += 1
    found = ", ".join(f"{reader}: {count:,}" for reader, count in differ.items())
    print(f"{name:15} {total:>9,} sequences; differ from the Standard: {found}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--indexes", type=Path, required=True, help="a whatwg/encoding checkout")
    args = parser.parse_args()
    index = json.loads((args.indexes / "indexes.json").read_text())
    ranges = [
        (int(line.split()[0]), int(line.split()[1], 16))
        for line in (args.indexes / "index-gb18030-ranges.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    standard, sequences = shift_jis(index)
    readers = {"ragsync": ragsync("Shift_JIS"), "cp932": python("cp932")}
    compare("Shift_JIS", standard, sequences, {**readers, "shift_jis": python("shift_jis")})
    standard, sequences = gb18030(index, ranges)
    readers = {"ragsync": ragsync("gb18030"), "gb18030": python("gb18030")}
    compare("gb18030", standard, sequences, readers)
    standard, sequences = gb18030(index, ranges)
    compare("GBK", standard, (s for s in sequences if len(s) < 4), {"gbk": python("gbk")})
    trails = [*range(0x40, 0x7F), *range(0xA1, 0xFF)]
    standard, sequences = two_byte(index["big5"], range(0x81, 0xFF), trails, big5_pointer)
    specials = {b"\x88\x62", b"\x88\x64", b"\x88\xa3", b"\x88\xa5"}  # two code points each
    readers = {"ragsync": ragsync("Big5"), "big5hkscs": python("big5hkscs")}
    compare("Big5", standard, (s for s in sequences if s not in specials), readers)
    standard, sequences = two_byte(
        index["euc-kr"],
        range(0x81, 0xFF),
        list(range(0x41, 0xFF)),
        lambda lead, byte: (lead - 0x81) * 190 + byte - 0x41,
    )
    readers = {"ragsync": ragsync("EUC-KR"), "cp949": python("cp949"), "euc_kr": python("euc_kr")}
    compare("EUC-KR", standard, sequences, readers)
    standard, sequences = two_byte(
        index["jis0208"],
        range(0xA1, 0xFF),
        list(range(0xA1, 0xFF)),
        lambda lead, byte: (lead - 0xA1) * 94 + byte - 0xA1,
    )
    compare("EUC-JP", standard, sequences, {"ragsync": ragsync("EUC-JP")})
    for name in sorted(SINGLE_BYTE - {"x-user-defined"}):
        table = index[name.lower().removesuffix("-i")]  # ISO-8859-8-I: ISO-8859-8's index

        def single(sequence: bytes, table: list = table) -> str | None:
            byte = sequence[0]
            code = byte if byte < 0x80 else table[byte - 0x80]
            return chr(code) if code is not None else None

        readers = {"ragsync": ragsync(name), PYTHON_CODECS[name]: python(PYTHON_CODECS[name])}
        compare(name, single, (bytes([b]) for b in range(256)), readers)


if __name__ == "__main__":
    main()
