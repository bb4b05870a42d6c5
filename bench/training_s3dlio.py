#!/usr/bin/env python3
"""An emulated training epoch with s3dlio (the reports' own library) as the reader.

usage: training_s3dlio.py URI ACCELERATORS BATCH COMPUTE_S READERS PREFETCH
The files under URI (`s3dlio.list`) are shuffled and split over the accelerators as PyTorch's
DistributedSampler splits them (rank r takes r, r + n, ...). Per accelerator, a loader thread
reads each batch of BATCH files with `s3dlio.get_many(..., max_in_flight=READERS)` into a queue
of PREFETCH batches, and the accelerator thread takes them in order and "computes" COMPUTE_S
seconds per step (a sleep, the GIL released). (s3dlio's `create_async_loader` ignored
`shard_rank` here: every accelerator read every file, so the split is done by hand.) Prints one JSON line:
samples/s (all samples / the epoch's length), AU as benchrun computes it (compute / wall from
the epoch's start, all accelerators) and as DLIO does (the first step left out), bytes.
"""
import json, queue, random, sys, threading, time
import s3dlio

uri, acc, batch, compute, readers, prefetch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
out = [None] * acc


files = s3dlio.list(uri)
random.Random(7).shuffle(files)


def accelerator(rank):
    mine = files[rank::acc]
    batches = [mine[i:i + batch] for i in range(0, len(mine), batch)]
    q = queue.Queue(maxsize=prefetch)

    def load():
        for b in batches:
            q.put(s3dlio.get_many(b, max_in_flight=readers))
    threading.Thread(target=load, daemon=True).start()
    samples = nbytes = steps = 0
    comp = comp_after_first = first_step_end = 0.0
    for _ in batches:
        items = q.get()
        samples += len(items)
        nbytes += sum(len(v.memoryview()) for _, v in items)
        t = time.monotonic()
        time.sleep(compute)
        d = time.monotonic() - t
        comp += d
        steps += 1
        if steps == 1:
            first_step_end = time.monotonic()
        else:
            comp_after_first += d
    end = time.monotonic()
    out[rank] = dict(samples=samples, bytes=nbytes, steps=steps, compute=comp,
                     wall=end - start, compute_after_first=comp_after_first,
                     wall_after_first=end - first_step_end)


start = time.monotonic()
threads = [threading.Thread(target=accelerator, args=(r,)) for r in range(acc)]
for t in threads:
    t.start()
for t in threads:
    t.join()
elapsed = max(o["wall"] for o in out)
samples = sum(o["samples"] for o in out)
print(json.dumps(dict(
    samples=samples,
    bytes=sum(o["bytes"] for o in out),
    seconds=elapsed,
    samples_per_sec=samples / elapsed,
    au_mean=100 * sum(o["compute"] for o in out) / sum(o["wall"] for o in out),
    au_min=min(100 * o["compute"] / o["wall"] for o in out),
    au_dlio=sum(100 * o["compute_after_first"] / o["wall_after_first"] for o in out) / acc,
    steps=sum(o["steps"] for o in out),
)))
