#!/usr/bin/python3
"""Mixed architectures over loopback TCP: an x86-64 `edgesgd server` with one aarch64 and one
armhf `edgesgd worker` (run under qemu-user) completes a run whose final model equals the
all-native run's (x86-64 server and workers), for majority vote and for top_k + EF.

With two workers both aggregates are independent of the order updates arrive in (a vote count;
a float sum of two terms, which commutes), and the wire bytes are architecture-independent
(golden vectors), so any difference comes from a worker computing differently on ARM. Majority
vote must be bit-identical: a vote is a sign. Top_k + EF sends the gradients' values, and the
model's dot products are reduced in SIMD-width order (SSE2 on x86-64, NEON or scalar on ARM:
docs/architecture.md, Determinism), so its model may differ in the last bits: every coordinate within
1e-5 * (1 + |x|) and the same final accuracy within 0.5 points. Usage:
    cross_arch_test.py HOST_EDGESGD AARCH64_EDGESGD ARMHF_EDGESGD WORK_DIR
"""

import os
import sys
import time

import tcp_cluster_test as tcp

AARCH64 = ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
ARMHF = ["qemu-arm", "-L", "/usr/arm-linux-gnueabihf"]
COMMON = ["--workers", "2", "--rounds", "30", "--seed", "11", "--quorum", "2"]
# name: (flags, whether the models must be bit-identical)
CONFIGS = {
    "majority": (COMMON + tcp.MAJORITY, True),
    "top_k_ef": (COMMON + ["--codec", "top_k", "--k-ratio", "0.1", "--feedback", "ef",
                           "--lr", "0.1"], False),
}
TOLERANCE = 1e-5


def compare(cluster, name, args, exact, aarch64, armhf):
    native, native_summary = tcp.train_over_tcp(cluster, args, 2, name=name + "_native")
    mixed, mixed_summary = tcp.train_over_tcp(
        cluster, args, 2, name=name + "_mixed",
        worker_programs={1: AARCH64 + [aarch64], 2: ARMHF + [armhf]})
    tcp.check(len(native) == len(mixed) and len(native) > 0, "%s: model sizes differ" % name)
    worst = max(abs(a - b) / (1 + abs(a)) for a, b in zip(native, mixed))
    native_accuracy = native_summary["final"]["accuracy"]
    mixed_accuracy = mixed_summary["final"]["accuracy"]
    if exact:
        tcp.check(native == mixed, "%s: x86-64 + aarch64 + armhf model differs from the "
                  "all-native one (max relative diff %g)" % (name, worst))
        tcp.check(native_accuracy == mixed_accuracy, "%s: accuracy differs" % name)
    else:
        tcp.check(worst <= TOLERANCE, "%s: x86-64 + aarch64 + armhf model differs from the "
                  "all-native one by %g (> %g)" % (name, worst, TOLERANCE))
        tcp.check(abs(native_accuracy - mixed_accuracy) <= 0.005,
                  "%s: accuracy %s vs all-native %s" % (name, mixed_accuracy, native_accuracy))
    tcp.check(mixed_accuracy > 0.7, "%s: trained to only %s" % (name, mixed_accuracy))
    print("%s: %s (%d parameters, max relative difference %g, accuracy %s)" % (
        name, "bit-identical" if native == mixed else "within tolerance", len(native), worst,
        mixed_accuracy))


def main():
    if len(sys.argv) != 5:
        print("usage: cross_arch_test.py HOST_EDGESGD AARCH64_EDGESGD ARMHF_EDGESGD WORK_DIR")
        return 2
    host, aarch64, armhf, work = sys.argv[1:]
    for path, stage in ((host, "release"), (aarch64, "aarch64"), (armhf, "armhf")):
        if not os.access(path, os.X_OK):
            print("tcp cross_arch: FAILED: %s is missing: build the %s preset first "
                  "(tests/run_all.sh builds release and aarch64 before armhf)" % (path, stage))
            return 1
    cluster = tcp.Cluster(host, os.path.join(work, "cross_arch"))
    start = time.time()
    try:
        for name, (args, exact) in CONFIGS.items():
            compare(cluster, name, args, exact, aarch64, armhf)
    except tcp.Failure as failure:
        print("tcp cross_arch: FAILED: %s" % failure)
        return 1
    finally:
        cluster.close()
    print("tcp cross_arch: passed in %.1f s" % (time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
