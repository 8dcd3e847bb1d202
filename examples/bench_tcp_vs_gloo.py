#!/usr/bin/python3
"""Measures a dense edgesgd round over loopback TCP beside a gloo all-reduce of the same size
among as many processes, in the same run, and prints the ratio.

Usage: bench_tcp_vs_gloo.py [--edgesgd PATH] [--dim D] [--workers N] [--rounds R] [--warmup W]
                            [--trials T] [--socket-send-buffer BYTES]

The edgesgd figure is `edgesgd bench tcp`'s dense variant (server and N workers over loopback,
the model downlink: every round sends 4d bytes up and 4d down per worker) with its default
socket settings (the kernel's auto-tuned send buffers, as gloo runs), and, with
`--socket-send-buffer BYTES`, once more with that SO_SNDBUF. The peer is torch.distributed's
gloo backend (Debian's python3-torch): N processes on 127.0.0.1, each on one thread, timed twice:
all-reducing a tensor of d float32 values (the collective data-parallel training runs once per
step), and taking a whole SGD step around it with the arithmetic edgesgd's bench does besides
communicating (the synthetic gradient model - target, and the averaged update). Each is timed
over R rounds after W warm-up rounds, in T trials that alternate between gloo and edgesgd so
that the machine's changing load falls on both; every trial's ratios are printed, then their
medians. Read the ratios rather than the absolute times.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_EDGESGD = os.path.join(os.path.dirname(HERE), "build", "release", "examples", "edgesgd")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def gloo_worker(rank, world, port, dim, warmup, rounds, sgd_step, results):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    model = torch.zeros(dim, dtype=torch.float32)
    target = torch.full((dim,), float(rank + 1), dtype=torch.float32)
    gradient = torch.ones(dim, dtype=torch.float32)

    def round_once():
        if sgd_step:
            # What edgesgd's bench does around its communication: the synthetic gradient
            # (model - target) and the averaged step.
            torch.sub(model, target, out=gradient)
            dist.all_reduce(gradient)
            model.sub_(gradient, alpha=0.1 / world)
        else:
            dist.all_reduce(gradient)

    for _ in range(warmup):
        round_once()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(rounds):
        round_once()
    elapsed = time.perf_counter() - start
    results.put((rank, elapsed))
    dist.destroy_process_group()


def gloo_seconds_per_round(dim, workers, warmup, rounds, sgd_step):
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    port = free_port()
    processes = [context.Process(target=gloo_worker,
                                 args=(rank, workers, port, dim, warmup, rounds, sgd_step,
                                       results))
                 for rank in range(workers)]
    for process in processes:
        process.start()
    elapsed = [results.get(timeout=600)[1] for _ in processes]
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise RuntimeError(f"a gloo process exited with {process.exitcode}")
    return max(elapsed) / rounds  # the collective ends when its slowest member does


def edgesgd_seconds_per_round(edgesgd, dim, workers, warmup, rounds, socket_send_buffer):
    output = subprocess.run(
        [edgesgd, "bench", "tcp", "--dim", str(dim), "--workers", str(workers), "--rounds",
         str(rounds), "--warmup", str(warmup), "--uplink", "dense",
         "--socket-send-buffer", str(socket_send_buffer), "--json"],
        check=True, capture_output=True, text=True).stdout
    for variant in json.loads(output)["variants"]:
        if variant["uplink"].startswith("dense"):
            return 1.0 / variant["rounds_per_second"]
    raise RuntimeError("edgesgd bench tcp reported no dense variant")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edgesgd", default=DEFAULT_EDGESGD)
    parser.add_argument("--dim", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--socket-send-buffer", type=int, default=0)
    args = parser.parse_args()
    if args.trials < 1:
        sys.exit("bench_tcp_vs_gloo: --trials must be at least 1")
    if not os.access(args.edgesgd, os.X_OK):
        sys.exit(f"bench_tcp_vs_gloo: no edgesgd binary at {args.edgesgd} (build the release "
                 f"preset or pass --edgesgd)")
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("bench_tcp_vs_gloo: needs Debian's python3-torch (apt-get install python3-torch)"
                 " and /usr/bin/python3")
    buffers = [0] + ([args.socket_send_buffer] if args.socket_send_buffer > 0 else [])
    settings = ["default settings" if buffer == 0 else f"--socket-send-buffer {buffer}"
                for buffer in buffers]
    print(f"d = {args.dim}, {args.workers} participants on loopback, {args.rounds} rounds after "
          f"{args.warmup} warm-up, {args.trials} alternated trials")
    peers = [("gloo all-reduce", False), ("gloo SGD step", True)]
    ratios = {(setting, peer): [] for setting in settings for peer, _ in peers}
    for trial in range(1, args.trials + 1):
        peer_seconds = {}
        for peer, sgd_step in peers:
            peer_seconds[peer] = gloo_seconds_per_round(args.dim, args.workers, args.warmup,
                                                        args.rounds, sgd_step)
            print(f"trial {trial}: {peer:<52} {peer_seconds[peer] * 1e3:8.2f} ms")
        for setting, buffer in zip(settings, buffers):
            seconds = edgesgd_seconds_per_round(args.edgesgd, args.dim, args.workers,
                                                args.warmup, args.rounds, buffer)
            against = []
            for peer, _ in peers:
                ratio = seconds / peer_seconds[peer]
                ratios[(setting, peer)].append(ratio)
                against.append(f"{ratio:5.2f}x {peer}")
            label = f"edgesgd dense round, {setting}"
            print(f"trial {trial}: {label:<52} {seconds * 1e3:8.2f} ms   {', '.join(against)}")
    for (setting, peer), values in ratios.items():
        print(f"median ratio, {setting}, to {peer}: {statistics.median(values):.2f}x "
              f"(trials: {', '.join(f'{value:.2f}' for value in values)})")

if __name__ == "__main__":
    main()
