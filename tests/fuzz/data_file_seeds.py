#!/usr/bin/env python3
"""Writes the seed corpora of the data-file reader targets (idx_reader, csv_reader, npy_reader):
small valid files of each kind the readers take, in the input layouts of data_file_fuzz.h, built
with the CLI tests' writers (tests/cli/data_files.py).

  data_file_seeds.py tests/fuzz/corpus
"""

import random
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
import data_files  # noqa: E402


def one_file(flags, first_row, max_rows, content):
    return bytes([flags, first_row, max_rows]) + content


def file_pair(flags, first_row, max_rows, features, labels):
    return struct.pack("<BHBB", flags, len(features), first_row, max_rows) + features + labels


def write(corpus, target, name, data):
    folder = corpus / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


def main():
    corpus = Path(sys.argv[1])
    images, labels = data_files.samples(3, random.Random(1))
    idx_images = data_files.idx_images(images)
    idx_labels = data_files.idx_labels(labels)
    write(corpus, "idx_reader", "bytes", file_pair(0, 0, 0, idx_images, idx_labels))
    write(corpus, "idx_reader", "bytes-from-row-1", file_pair(0, 1, 1, idx_images, idx_labels))
    write(corpus, "idx_reader", "gzip", file_pair(3, 0, 0, idx_images, idx_labels))
    floats = struct.pack(">IIII", 0x00000D03, 2, 1, 2) + struct.pack(">4f", 0.5, -1, 2, 0)
    write(corpus, "idx_reader", "floats", file_pair(0, 0, 0, floats, data_files.idx_labels([1, 0])))

    pixels = b"".join(images)
    npy_bytes = data_files.npy("|u1", "(3, 8, 8)", pixels)
    npy_labels = data_files.npy("<i8", "(3,)", struct.pack("<3q", *labels))
    write(corpus, "npy_reader", "bytes", file_pair(0, 0, 0, npy_bytes, npy_labels))
    write(corpus, "npy_reader", "bytes-from-row-2", file_pair(0, 2, 0, npy_bytes, npy_labels))
    write(corpus, "npy_reader", "gzip", file_pair(3, 0, 0, npy_bytes, npy_labels))
    f4 = data_files.npy("<f4", "(2, 2)", struct.pack("<4f", 0.5, -1, 2, 0))
    column = data_files.npy("|u1", "(2, 1)", bytes([1, 0]))
    write(corpus, "npy_reader", "float32-column-labels", file_pair(0, 0, 0, f4, column))
    f8 = data_files.npy("<f8", "(2, 1)", struct.pack("<2d", 0.25, 1e3))
    i4 = data_files.npy("<i4", "(2,)", struct.pack("<2i", 2, 0))
    write(corpus, "npy_reader", "float64-int32", file_pair(0, 0, 0, f8, i4))

    text = data_files.csv_text(images, labels).encode()
    write(corpus, "csv_reader", "header", one_file(0, 0, 0, text))
    write(corpus, "csv_reader", "header-from-row-1", one_file(0, 1, 1, text))
    write(corpus, "csv_reader", "gzip", one_file(1, 0, 0, text))
    loose = b"\xef\xbb\xbf2, 0.5 ,-1e-3\r\n\r\n0,+4,5.0\n1.0,6,7"
    write(corpus, "csv_reader", "no-header-spacing", one_file(0, 0, 0, loose))


if __name__ == "__main__":
    main()
