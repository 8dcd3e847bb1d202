#!/usr/bin/env python3
"""Writes the data files of the CLI tests of --data idx:/csv:/npy: into a directory.

One small classification set (3 classes, 8x8 byte "images": a bright quadrant per class plus
noise; 240 training and 60 test samples) in every format: IDX (plain, and gzip-compressed with
the labels beside the images under MNIST's names), CSV (pixel / 255 written exactly, a header
line; also with the label last) and .npy (unsigned bytes, int64 labels). Every format holds the
same samples, so runs on them must give identical metrics. Then one broken file per failure the
readers report.

  data_files.py DIR
"""

import gzip
import random
import struct
import sys
from pathlib import Path

SIDE = 8
CLASSES = 3


def samples(count, rng):
    images, labels = [], []
    for _ in range(count):
        label = rng.randrange(CLASSES)
        pixels = bytearray(rng.randrange(60) for _ in range(SIDE * SIDE))
        top = 0 if label == 0 else SIDE // 2
        left = 0 if label == 1 else SIDE // 2
        for row in range(top, top + SIDE // 2):
            for col in range(left, left + SIDE // 2):
                pixels[row * SIDE + col] = 150 + rng.randrange(106)
        images.append(bytes(pixels))
        labels.append(label)
    return images, labels


def idx_images(images):
    return struct.pack(">IIII", 0x00000803, len(images), SIDE, SIDE) + b"".join(images)


def idx_labels(labels):
    return struct.pack(">II", 0x00000801, len(labels)) + bytes(labels)


def npy(descr, shape, data):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def float32_text(byte):
    # The float the readers make of a byte, byte / 255 rounded to float32, printed so that it
    # parses back to the same float.
    value = struct.unpack("<f", struct.pack("<f", byte / 255))[0]
    return repr(value)


def csv_text(images, labels, label_last=False):
    def row(label, features):
        return ",".join(features + [label] if label_last else [label] + features)

    lines = [row("label", ["p%d" % i for i in range(SIDE * SIDE)])]
    for image, label in zip(images, labels):
        lines.append(row(str(label), [float32_text(b) for b in image]))
    return "\n".join(lines) + "\n"


def write_set(out, name, images, labels):
    (out / f"{name}-images-idx3-ubyte").write_bytes(idx_images(images))
    (out / f"{name}-labels-idx1-ubyte").write_bytes(idx_labels(labels))
    (out / f"{name}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_images(images)))
    (out / f"{name}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_labels(labels)))
    (out / f"{name}.csv").write_text(csv_text(images, labels))
    (out / f"{name}-label-last.csv").write_text(csv_text(images, labels, label_last=True))
    shape = "(%d, %d, %d)" % (len(images), SIDE, SIDE)
    (out / f"{name}-x.npy").write_bytes(npy("|u1", shape, b"".join(images)))
    labels64 = struct.pack("<%dq" % len(labels), *labels)
    (out / f"{name}-y.npy").write_bytes(npy("<i8", "(%d,)" % len(labels), labels64))


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    train_images, train_labels = samples(240, rng)
    test_images, test_labels = samples(60, rng)
    write_set(out, "train", train_images, train_labels)
    write_set(out, "t10k", test_images, test_labels)

    # Broken files, one per failure.
    images = idx_images(train_images)
    (out / "magic-images-idx3-ubyte").write_bytes(b"\x00\x01" + images[2:])
    (out / "magic-labels-idx1-ubyte").write_bytes(idx_labels(train_labels))
    x = npy("|u1", "(240, 8, 8)", b"".join(train_images))
    (out / "truncated-x.npy").write_bytes(x[:-100])
    (out / "short-y.npy").write_bytes(npy("<i8", "(239,)", struct.pack("<239q", *train_labels[:239])))
    (out / "big-endian-x.npy").write_bytes(npy(">f4", "(240, 64)", bytes(240 * 64 * 4)))
    (out / "label.csv").write_text("label,x\n1,0.5\n300,0.25\n")
    (out / "two-classes.csv").write_text("label,x\n0,0.5\n1,0.25\n")
    (out / "cell.csv").write_text("label,x,y\n1,0.5,0.25\n0,0.5,n/a\n")
    (out / "wide.csv").write_text("label,a,b,c\n1,0.5,0.25,0\n")
    (out / "label-last.csv").write_text("x,label\n-0.4416,1\n0.25,0\n")


if __name__ == "__main__":
    main()
