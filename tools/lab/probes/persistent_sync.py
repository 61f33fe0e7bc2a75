"""Probe: cost of a phase boundary inside one persistent kernel (atomic work queue, per-phase done
counters) against a kernel boundary (one launch per phase, programmatic dependent launch), both in a
CUDA graph. The work per item is a trivial 4 KB copy, so the times are the synchronisation costs.

    python tools/lab/probes/persistent_sync.py
"""
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

PHASES = [144, 768, 72, 64, 96, 144, 64]  # items per phase of a 124M decode layer (products, attention, LN)
LAYERS, STEPS = 12, 144
WIDTH = 1024


@triton.jit
def _copy_item(src, dst, item, WIDTH: tl.constexpr, CG: tl.constexpr):
    cols = tl.arange(0, WIDTH)
    if CG:
        v = tl.load(src + item * WIDTH + cols, cache_modifier=".cg")
    else:
        v = tl.load(src + item * WIDTH + cols)
    tl.store(dst + item * WIDTH + cols, v + 1.0)


@triton.jit
def _phase_kernel(src, dst, WIDTH: tl.constexpr, PDL: tl.constexpr):
    if PDL:
        gdc_wait()
    _copy_item(src, dst, tl.program_id(0), WIDTH, False)


@triton.jit
def _persistent(src, dst, sync, E0, E1, E2, E3, E4, E5, E6, WIDTH: tl.constexpr, PDL: tl.constexpr):
    if PDL:
        gdc_wait()
    item = tl.atomic_add(sync, 1)
    seen = 0  # phases known complete
    while item < E6:
        phase = tl.where(item < E0, 0, tl.where(item < E1, 1, tl.where(item < E2, 2, tl.where(
            item < E3, 3, tl.where(item < E4, 4, tl.where(item < E5, 5, 6))))))
        start = tl.where(phase == 0, 0, tl.where(phase == 1, E0, tl.where(phase == 2, E1, tl.where(
            phase == 3, E2, tl.where(phase == 4, E3, tl.where(phase == 5, E4, E5))))))
        if phase > seen:
            prev_start = tl.where(phase == 1, 0, tl.where(phase == 2, E0, tl.where(phase == 3, E1, tl.where(
                phase == 4, E2, tl.where(phase == 5, E3, E4)))))
            need = start - prev_start
            while tl.atomic_add(sync + phase, 0, sem="acquire") < need:
                pass
            seen = phase
        _copy_item(src, dst, item - start, WIDTH, True)
        tl.debug_barrier()
        tl.atomic_add(sync + 1 + phase, 1, sem="release")
        item = tl.atomic_add(sync, 1)


def graph_time(fn, reps=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay(); torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return min(times)


def main():
    n_items = max(PHASES)
    src = torch.randn(n_items, WIDTH, device="cuda")
    dst = torch.empty_like(src)
    ends = torch.tensor(PHASES).cumsum(0).tolist()
    launches = LAYERS * STEPS

    def separate():
        for _ in range(launches):
            for n in PHASES:
                _phase_kernel[(n,)](src, dst, WIDTH=WIDTH, PDL=True, launch_pdl=True, num_warps=4)

    t_sep = graph_time(separate)
    print(f"separate kernels: {t_sep:.2f} ms for {launches} layers x {len(PHASES)} phases "
          f"= {1000 * t_sep / (launches * len(PHASES)):.2f} us per phase")
    for programs in [int(a) for a in (sys.argv[1:] or ["132", "264", "528"])]:
        sync = torch.zeros(launches, 8, dtype=torch.int32, device="cuda")

        def persistent():
            sync.zero_()
            for i in range(launches):
                _persistent[(programs,)](src, dst, sync[i], *ends, WIDTH=WIDTH, PDL=True, launch_pdl=True, num_warps=4)

        t = graph_time(persistent)
        print(f"persistent, {programs} programs: {t:.2f} ms = {1000 * t / (launches * len(PHASES)):.2f} us per phase "
              f"({1000 * t / launches:.1f} us per layer)")
    ok = torch.equal(dst[:n_items], src[:n_items] + 1.0)
    print("results correct:", ok)


if __name__ == "__main__":
    main()
