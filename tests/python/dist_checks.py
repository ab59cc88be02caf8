"""What each rank runs in the tests: braid's result of every operation next to
Gloo's result of the same operation in the same processes (or, where Gloo has
no such operation or dtype, next to a reference every rank computes from the
inputs it regenerates for all ranks).

Each function takes (rank, world, store_path, ...) and raises AssertionError
listing every mismatch it found.
"""

import datetime
import os
import time

import torch
import torch.distributed as dist

import braid_torch  # registers "braid"

R = dist.ReduceOp
INTS = [torch.uint8, torch.int8, torch.int32, torch.int64]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
ARITH_OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
BIT_OPS = [R.BAND, R.BOR, R.BXOR]


def init(rank, world, store_path, timeout_s=60, backend="braid"):
    dist.init_process_group(backend, init_method=f"file://{store_path}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    if backend != "braid":
        return None
    return dist.new_group(backend="gloo")


def gen(rank, shape, dtype, salt):
    """The input of `rank`: small integers, so sums and products are exact in every dtype."""
    g = torch.Generator().manual_seed(7919 * salt + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.randint(0, 2, shape, generator=g).float().to(dtype)
    unsigned = dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
    low = 0 if unsigned else -3
    t = torch.randint(low, 4, shape, generator=g)
    if dtype.is_complex:
        return torch.complex(t.float(), torch.randint(-3, 4, shape, generator=g).float()).to(dtype)
    return t.to(dtype)


def reference(world, shape, dtype, salt, op):
    """op over every rank's gen() input, computed in a wide type, cast back."""
    xs = [gen(r, shape, dtype, salt) for r in range(world)]
    if dtype == torch.bool or dtype in (torch.uint16, torch.uint32, torch.uint64):
        wide = [x.to(torch.int64) for x in xs]
    elif dtype.is_floating_point:
        wide = [x.to(torch.float64) for x in xs]
    else:
        wide = [x.to(torch.int64) for x in xs]
    acc = wide[0].clone()
    for x in wide[1:]:
        if op in (R.SUM, R.AVG):
            acc += x
        elif op == R.PRODUCT:
            acc *= x
        elif op == R.MIN:
            acc = torch.minimum(acc, x)
        elif op == R.MAX:
            acc = torch.maximum(acc, x)
        elif op == R.BAND:
            acc &= x
        elif op == R.BOR:
            acc |= x
        elif op == R.BXOR:
            acc ^= x
    if op == R.AVG:
        acc = acc / world if dtype.is_floating_point else torch.div(acc, world, rounding_mode="trunc")
    if dtype == torch.bool:
        return acc != 0
    return acc.to(dtype)


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.count = 0

    def same(self, what, got, want, tol=None):
        self.count += 1
        if got.dtype != want.dtype or got.shape != want.shape:
            self.failures.append(f"{what}: got {got.dtype}{tuple(got.shape)}, want {want.dtype}{tuple(want.shape)}")
            return
        if got.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            got, want = got.float(), want.float()
        if got.dtype in (torch.uint16, torch.uint32, torch.uint64):  # few ATen ops take these
            got, want = got.to(torch.int64), want.to(torch.int64)
        if tol is None:
            ok = torch.equal(got, want)
        else:
            ok = torch.allclose(got.to(torch.complex128 if got.is_complex() else torch.float64),
                                want.to(torch.complex128 if want.is_complex() else torch.float64),
                                rtol=tol, atol=tol)
        if not ok:
            self.failures.append(f"{what}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}")

    def raises(self, what, fn, *fragments):
        self.count += 1
        try:
            fn()
        except Exception as e:  # the message must say what is wrong
            msg = str(e)
            missing = [f for f in fragments if f not in msg]
            if missing:
                self.failures.append(f"{what}: error lacks {missing}: {msg[:300]}")
            return
        self.failures.append(f"{what}: no error raised")

    def done(self):
        if self.failures:
            raise AssertionError(f"rank {self.rank}: {len(self.failures)} of {self.count} checks failed:\n  "
                                 + "\n  ".join(self.failures))
        return self.count


def _vs_gloo(chk, gloo, what, x, call, tol=None):
    a, b = x.clone(), x.clone()
    call(a, None)
    call(b, gloo)
    chk.same(what, a, b, tol)


# ---- allreduce -------------------------------------------------------------------

def check_allreduce(rank, world, chk, gloo):
    shape = (37, 3)
    for dt in [torch.bool] + INTS + FLOATS:
        for i, op in enumerate(ARITH_OPS + (BIT_OPS if not dt.is_floating_point else [])):
            x = gen(rank, shape, dt, 10 + i)
            _vs_gloo(chk, gloo, f"allreduce {dt} {op}", x, lambda t, g: dist.all_reduce(t, op=op, group=g))
    for dt in [torch.float32, torch.float64, torch.bfloat16]:  # Gloo averages floats
        x = gen(rank, shape, dt, 30)
        _vs_gloo(chk, gloo, f"allreduce {dt} AVG", x, lambda t, g: dist.all_reduce(t, op=R.AVG, group=g), tol=1e-2)
    for dt in [torch.int32, torch.int64]:  # Gloo cannot; braid truncates as NCCL does
        t = gen(rank, shape, dt, 31)
        dist.all_reduce(t, op=R.AVG)
        chk.same(f"allreduce {dt} AVG", t, reference(world, shape, dt, 31, R.AVG))
    # dtypes Gloo lacks: int16/uint16 (all-gathered, reduced locally), uint32/uint64, fp8
    for dt, ops in [(torch.int16, ARITH_OPS + BIT_OPS + [R.AVG]), (torch.uint16, ARITH_OPS + [R.BXOR, R.AVG]),
                    (torch.uint32, [R.SUM, R.MIN, R.MAX]),
                    (torch.uint64, [R.SUM, R.MAX]), (torch.float8_e4m3fn, [R.SUM, R.MAX, R.MIN]),
                    (torch.float8_e5m2, [R.SUM, R.MAX])]:
        for i, op in enumerate(ops):
            t = gen(rank, shape, dt, 40 + i)
            dist.all_reduce(t, op=op)
            chk.same(f"allreduce {dt} {op}", t, reference(world, shape, dt, 40 + i, op))
    # complex numbers: SUM as Gloo does it, AVG and PREMUL_SUM as (re, im) pairs
    x = gen(rank, shape, torch.complex64, 50)
    _vs_gloo(chk, gloo, "allreduce complex64 SUM", x, lambda t, g: dist.all_reduce(t, group=g))
    t = x.clone()
    dist.all_reduce(t, op=R.AVG)
    want = x.clone()
    dist.all_reduce(want, group=gloo)
    chk.same("allreduce complex64 AVG", t, want / world, tol=1e-6)
    # PREMUL_SUM with a Python number and with a tensor factor
    for dt in [torch.float32, torch.float16, torch.bfloat16, torch.float64]:
        x = gen(rank, shape, dt, 60)
        want = x.clone()
        dist.all_reduce(want, group=gloo)
        for label, factor in [("number", 2.0), ("tensor", torch.tensor([2.0], dtype=torch.float64))]:
            t = x.clone()
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
            chk.same(f"allreduce {dt} PREMUL_SUM({label})", t, want * 2)
    # larger than one FIFO slot, so the data moves in several steps
    x = gen(rank, (1 << 19,), torch.float32, 70)
    _vs_gloo(chk, gloo, "allreduce 2 MiB float32", x, lambda t, g: dist.all_reduce(t, group=g))
    # non-contiguous input and zero elements
    base = gen(rank, (6, 10), torch.float32, 71)
    t = base.t()
    dist.all_reduce(t)
    chk.same("allreduce transposed", t, reference(world, (6, 10), torch.float32, 71, R.SUM).t())
    chk.same("allreduce transposed base", base, reference(world, (6, 10), torch.float32, 71, R.SUM))
    sliced = gen(rank, (40,), torch.int64, 72)
    view = sliced[::3]
    dist.all_reduce(view, op=R.MAX)
    chk.same("allreduce strided view", view, reference(world, (40,), torch.int64, 72, R.MAX)[::3])
    empty = torch.empty(0)
    dist.all_reduce(empty)
    chk.same("allreduce empty", empty, torch.empty(0))
    # sparse COO tensors, SUM (as Gloo): non-zeros that overlap between ranks,
    # values with a dense dimension, and rank 1 with none at all
    def sparse(r, with_values=True):
        idx = torch.tensor([[r % 4, 2, 5 + r], [0, r % 3, 1]], dtype=torch.int64)
        val = torch.tensor([[1.0 + r, -1.0], [2.0, 0.5 * r], [3.0 * (r + 1), 4.0]])
        if not with_values or r == 1:
            idx, val = idx[:, :0], val[:0]
        return torch.sparse_coo_tensor(idx, val, (9, 3, 2), check_invariants=True)
    got = sparse(rank)
    dist.all_reduce(got)
    want = sum(sparse(r).to_dense() for r in range(world))
    chk.same("allreduce sparse SUM", got.to_dense(), want)
    chk.same("allreduce sparse stays sparse", torch.tensor(got.is_sparse), torch.tensor(True))
    none = sparse(rank, with_values=False)
    dist.all_reduce(none)
    chk.same("allreduce sparse, no non-zeros anywhere", none.to_dense(), torch.zeros(9, 3, 2))


def check_refusals(rank, world, chk, gloo):
    chk.raises("BAND float", lambda: dist.all_reduce(torch.ones(3), op=R.BAND), "BAND", "Float")
    chk.raises("AVG bool", lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=R.AVG), "AVG", "Bool")
    chk.raises("PREMUL_SUM int", lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32),
                                                         op=dist._make_nccl_premul_sum(2.0)), "PREMUL_SUM")
    chk.raises("MAX complex", lambda: dist.all_reduce(torch.ones(3, dtype=torch.complex64), op=R.MAX), "MAX")
    chk.raises("sparse MAX", lambda: dist.all_reduce(torch.eye(3).to_sparse(), op=R.MAX), "sparse", "SUM")
    chk.raises("alltoall bad splits", lambda: dist.all_to_all_single(
        torch.empty(4), torch.ones(4), output_split_sizes=[1] * world, input_split_sizes=[9] * world),
        "split sizes")
    # nothing above reached the wire: the group still works
    t = torch.ones(2)
    dist.all_reduce(t)
    chk.same("allreduce after refusals", t, torch.full((2,), float(world)))


def check_coalesced(rank, world, chk, gloo):
    shapes = [(5,), (3, 4), (1000,)]
    xs = [gen(rank, s, torch.float32, 80 + i) for i, s in enumerate(shapes)]
    got = [x.clone() for x in xs]
    with dist._coalescing_manager():
        for t in got:
            dist.all_reduce(t)
    want = [x.clone() for x in xs]
    for t in want:
        dist.all_reduce(t, group=gloo)
    for i in range(len(xs)):
        chk.same(f"coalesced allreduce {i}", got[i], want[i])
    got = [x.clone() for x in xs]
    dist.all_reduce_coalesced(got, op=R.MAX)
    for i, s in enumerate(shapes):
        chk.same(f"all_reduce_coalesced MAX {i}", got[i], reference(world, s, torch.float32, 80 + i, R.MAX))
    # all_gather_into_tensor and reduce_scatter_tensor coalesced
    ins = [gen(rank, (n,), torch.int64, 90 + n) for n in (3, 8)]
    outs = [torch.empty(world * n, dtype=torch.int64) for n in (3, 8)]
    with dist._coalescing_manager():
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    for o, i in zip(outs, ins):
        want = torch.empty_like(o)
        dist.all_gather_into_tensor(want, i, group=gloo)
        chk.same(f"coalesced all_gather_into_tensor {i.numel()}", o, want)
    ins = [gen(rank, (world * n,), torch.float32, 95 + n) for n in (2, 5)]
    outs = [torch.empty(n) for n in (2, 5)]
    with dist._coalescing_manager():
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)
    for o, i in zip(outs, ins):
        want = torch.empty_like(o)
        dist.reduce_scatter_tensor(want, i.clone(), group=gloo)
        chk.same(f"coalesced reduce_scatter_tensor {o.numel()}", o, want)


# ---- data movement ----------------------------------------------------------------

def check_broadcast_reduce(rank, world, chk, gloo):
    for root in range(world):
        for dt in [torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.complex64, torch.float8_e5m2]:
            x = gen(rank, (9, 2), dt, 100 + root)
            if dt == torch.float8_e5m2:  # Gloo cannot move fp8: every rank knows the root's input
                t = x.clone()
                dist.broadcast(t, src=root)
                chk.same(f"broadcast fp8 root {root}", t, gen(root, (9, 2), dt, 100 + root))
                continue
            _vs_gloo(chk, gloo, f"broadcast {dt} root {root}", x, lambda t, g: dist.broadcast(t, src=root, group=g))
        base = gen(rank, (4, 5), torch.float64, 110 + root)
        t = base.t()
        dist.broadcast(t, src=root)
        chk.same(f"broadcast transposed root {root}", t, gen(root, (4, 5), torch.float64, 110 + root).t())
        for op in [R.SUM, R.MAX, R.BXOR]:
            dt = torch.int32 if op == R.BXOR else torch.float32
            x = gen(rank, (33,), dt, 120 + root)
            a = x.clone()
            dist.reduce(a, dst=root, op=op)
            if rank == root:
                chk.same(f"reduce {op} root {root}", a, reference(world, (33,), dt, 120 + root, op))
        x = gen(rank, (33,), torch.float32, 130 + root)
        a, b = x.clone(), x.clone()
        dist.reduce(a, dst=root)
        dist.reduce(b, dst=root, group=gloo)
        if rank == root:
            chk.same(f"reduce vs gloo root {root}", a, b)


def check_allgather(rank, world, chk, gloo):
    for dt in [torch.float32, torch.int8, torch.bool, torch.complex64, torch.float16]:
        x = gen(rank, (4, 3), dt, 140)
        got = [torch.empty_like(x) for _ in range(world)]
        want = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(got, x)
        dist.all_gather(want, x, group=gloo)
        for r in range(world):
            chk.same(f"all_gather {dt} [{r}]", got[r], want[r])
        out = torch.empty(world * 4, 3, dtype=dt)
        ref = torch.empty(world * 4, 3, dtype=dt)
        dist.all_gather_into_tensor(out, x)
        dist.all_gather_into_tensor(ref, x, group=gloo)
        chk.same(f"all_gather_into_tensor {dt}", out, ref)
    # all_gather_coalesced: output_lists[r][i] is rank r's input i
    ins = [gen(rank, (2, 2), torch.float32, 145), gen(rank, (3,), torch.float32, 146)]
    got = [[torch.empty_like(t) for t in ins] for _ in range(world)]
    want = [[torch.empty_like(t) for t in ins] for _ in range(world)]
    dist.all_gather_coalesced(got, ins)
    dist.all_gather_coalesced(want, ins, group=gloo)
    for r in range(world):
        for i in range(len(ins)):
            chk.same(f"all_gather_coalesced [{r}][{i}]", got[r][i], want[r][i])
    # uneven sizes (Gloo refuses them): rank r contributes r + 1 elements
    x = gen(rank, (rank + 1,), torch.int64, 150)
    got = [torch.empty(r + 1, dtype=torch.int64) for r in range(world)]
    dist.all_gather(got, x)
    for r in range(world):
        chk.same(f"all_gather uneven [{r}]", got[r], gen(r, (r + 1,), torch.int64, 150))
    # non-contiguous output tensor and input view
    out = torch.zeros(3, world * 2).t()
    dist.all_gather_into_tensor(out, gen(rank, (2, 3), torch.float32, 151).t().contiguous().t())
    want = torch.cat([gen(r, (2, 3), torch.float32, 151) for r in range(world)])
    chk.same("all_gather_into_tensor transposed", out, want)


def check_reduce_scatter(rank, world, chk, gloo):
    for op in [R.SUM, R.MAX, R.MIN]:
        for dt in [torch.float32, torch.int32]:
            ins = [gen(rank, (6,), dt, 160 + r) for r in range(world)]
            got, want = torch.empty(6, dtype=dt), torch.empty(6, dtype=dt)
            dist.reduce_scatter(got, [i.clone() for i in ins], op=op)
            dist.reduce_scatter(want, [i.clone() for i in ins], op=op, group=gloo)
            chk.same(f"reduce_scatter {dt} {op}", got, want)
            x = gen(rank, (world * 7,), dt, 170)
            got, want = torch.empty(7, dtype=dt), torch.empty(7, dtype=dt)
            dist.reduce_scatter_tensor(got, x.clone(), op=op)
            dist.reduce_scatter_tensor(want, x.clone(), op=op, group=gloo)
            chk.same(f"reduce_scatter_tensor {dt} {op}", got, want)
    x = gen(rank, (world * 5,), torch.int64, 180)
    got = torch.empty(5, dtype=torch.int64)
    dist.reduce_scatter_tensor(got, x, op=R.BOR)
    chk.same("reduce_scatter_tensor BOR", got, reference(world, (world * 5,), torch.int64, 180, R.BOR)[rank * 5:][:5])
    x = gen(rank, (world * 5,), torch.float32, 181)
    got = torch.empty(5)
    dist.reduce_scatter_tensor(got, x, op=R.AVG)
    chk.same("reduce_scatter_tensor AVG", got,
             reference(world, (world * 5,), torch.float32, 181, R.AVG)[rank * 5:][:5], tol=1e-6)


def check_alltoall(rank, world, chk, gloo):
    # equal splits, rows of 3 elements
    x = gen(rank, (world * 2, 3), torch.float32, 190)
    got, want = torch.empty_like(x), torch.empty_like(x)
    dist.all_to_all_single(got, x)
    dist.all_to_all_single(want, x, group=gloo)
    chk.same("all_to_all_single equal", got, want)
    # uneven: rank r sends (r + p) % 3 + 1 rows to rank p (and some sends are empty)
    rows = lambda src, dst: (src + dst) % 3 + (0 if (src + dst) % 4 == 1 else 1)  # noqa: E731
    in_splits = [rows(rank, p) for p in range(world)]
    out_splits = [rows(p, rank) for p in range(world)]
    x = gen(rank, (sum(in_splits), 2), torch.int64, 191)
    got = torch.empty(sum(out_splits), 2, dtype=torch.int64)
    want = torch.empty_like(got)
    dist.all_to_all_single(got, x, out_splits, in_splits)
    dist.all_to_all_single(want, x, out_splits, in_splits, group=gloo)
    chk.same("all_to_all_single uneven", got, want)
    # list form (Gloo has none): tensor r of rank s holds (s, r) and has s + r + 1 elements
    ins = [torch.full((rank + r + 1,), float(10 * rank + r)) for r in range(world)]
    outs = [torch.empty(r + rank + 1) for r in range(world)]
    dist.all_to_all(outs, ins)
    for r in range(world):
        chk.same(f"all_to_all list [{r}]", outs[r], torch.full((r + rank + 1,), float(10 * r + rank)))


def check_gather_scatter(rank, world, chk, gloo):
    for root in range(world):
        x = gen(rank, (5,), torch.float64, 200 + root)
        got = [torch.empty(5, dtype=torch.float64) for _ in range(world)] if rank == root else None
        want = [torch.empty(5, dtype=torch.float64) for _ in range(world)] if rank == root else None
        dist.gather(x, got, dst=root)
        dist.gather(x, want, dst=root, group=gloo)
        if rank == root:
            for r in range(world):
                chk.same(f"gather root {root} [{r}]", got[r], want[r])
        chunks = [gen(r, (4,), torch.int32, 210 + root) for r in range(world)] if rank == root else None
        got, want = torch.empty(4, dtype=torch.int32), torch.empty(4, dtype=torch.int32)
        dist.scatter(got, chunks, src=root)
        dist.scatter(want, chunks, src=root, group=gloo)
        chk.same(f"scatter root {root}", got, want)


def check_p2p(rank, world, chk, gloo):
    # pairs: even ranks send first, odd ranks receive first
    peer = rank ^ 1
    if peer < world:
        mine = gen(rank, (300,), torch.float32, 220)
        theirs = torch.empty(300)
        if rank % 2 == 0:
            dist.send(mine, dst=peer)
            dist.recv(theirs, src=peer)
        else:
            dist.recv(theirs, src=peer)
            dist.send(mine, dst=peer)
        chk.same("send/recv pair", theirs, gen(peer, (300,), torch.float32, 220))
    # a ring in one batch: every rank sends and receives 4 MiB at once
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    mine = gen(rank, (1 << 20,), torch.float32, 221)
    got = torch.empty(1 << 20)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, mine, nxt), dist.P2POp(dist.irecv, got, prv)])
    for r in reqs:
        r.wait()
    chk.same("batch_isend_irecv ring", got, gen(prv, (1 << 20,), torch.float32, 221))
    dist.barrier()


def check_any_source(rank, world, chk, gloo):
    """recv without a source takes each sender's messages in the order sent,
    after the ones a named recv took, and says who sent it."""
    def value(src, i):
        return torch.full((5,), float(100 * src + i))

    sent = {src: (3 if src == 1 else 2) for src in range(1, world)}  # rank 1 sends one more
    if rank == 0:
        first = torch.empty(5)
        dist.recv(first, src=1)  # takes rank 1's message 0: any source must not take it again
        chk.same("named recv before any source", first, value(1, 0))
        nxt = {src: (1 if src == 1 else 0) for src in sent}
        for k in range(sum(sent.values()) - 1):
            t = torch.empty(5)
            if k % 2 == 0:
                src = dist.recv(t)
            else:
                w = dist.irecv(t)
                w.wait()
                src = w._source_rank()
            if src not in nxt or nxt[src] >= sent[src]:
                chk.failures.append(f"recv from any source: message {k} claims rank {src}")
                continue
            chk.same(f"any source message {k} from rank {src}", t, value(src, nxt[src]))
            nxt[src] += 1
        chk.same("every message taken once", torch.tensor(list(nxt.values())), torch.tensor(list(sent.values())))
    else:
        works = [dist.isend(value(rank, i), dst=0) for i in range(sent[rank])]
        for w in works:
            w.wait()
    t = torch.empty(1)
    if rank == world - 1:  # a named recv's work knows its source too
        w = dist.irecv(t, src=0)
        w.wait()
        chk.same("named irecv source rank", torch.tensor(w._source_rank()), torch.tensor(0))
    elif rank == 0:
        dist.send(torch.ones(1), dst=world - 1)
    dist.barrier()


def check_async(rank, world, chk, gloo):
    xs = [gen(rank, (100 + i,), torch.float32, 230 + i) for i in range(6)]
    ts = [x.clone() for x in xs]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    futs = [w.get_future().then(lambda f: f.value()[0] * 2) for w in works]
    done = torch.futures.wait_all(futs)
    for i, w in enumerate(works):
        w.wait()
        chk.same(f"async work {i} completed", torch.tensor(w.is_completed()), torch.tensor(True))
        want = reference(world, (100 + i,), torch.float32, 230 + i, R.SUM)
        chk.same(f"async allreduce {i}", ts[i], want)
        chk.same(f"future.then {i}", done[i], want * 2)
    out = torch.empty(world * 3)
    w = dist.all_gather_into_tensor(out, torch.full((3,), float(rank)), async_op=True)
    value = w.get_future().wait()
    chk.same("all_gather future value", value[0], torch.arange(world).float().repeat_interleave(3))
    w = dist.broadcast(torch.zeros(2), src=0, async_op=True)
    w.wait()
    chk.same("broadcast work result", w.result()[0], torch.zeros(2))


def check_objects(rank, world, chk, gloo):
    # pickled objects of different sizes per rank travel as byte tensors
    obj = {"rank": rank, "payload": list(range(rank * 50))}
    got = [None] * world
    dist.all_gather_object(got, obj)
    want = [None] * world
    dist.all_gather_object(want, obj, group=gloo)
    chk.count += 1
    if got != want:
        chk.failures.append(f"all_gather_object: {str(got)[:200]}")
    items = [f"from root {i}" for i in range(3)] if rank == 0 else [None] * 3
    dist.broadcast_object_list(items, src=0)
    chk.count += 1
    if items != [f"from root {i}" for i in range(3)]:
        chk.failures.append(f"broadcast_object_list: {items}")
    out = [None]
    dist.scatter_object_list(out, [("for", r) for r in range(world)] if rank == world - 1 else None, src=world - 1)
    chk.count += 1
    if out[0] != ("for", rank):
        chk.failures.append(f"scatter_object_list: {out}")


ALL_CHECKS = [check_allreduce, check_refusals, check_coalesced, check_broadcast_reduce, check_allgather,
              check_reduce_scatter, check_alltoall, check_gather_scatter, check_p2p, check_any_source, check_async,
              check_objects]


def run_checks(rank, world, store_path, names):
    gloo = init(rank, world, store_path)
    chk = Checker(rank)
    for fn in ALL_CHECKS:
        if fn.__name__ in names:
            fn(rank, world, chk, gloo)
    dist.barrier()
    chk.done()


# ---- groups ------------------------------------------------------------------------

def groups(rank, world, store_path):
    gloo = init(rank, world, store_path)
    chk = Checker(rank)
    assert dist.get_backend() == "braid"
    # disjoint subgroups; every rank takes part in creating every group
    halves = [list(range(0, world, 2)), list(range(1, world, 2))]
    subgroups = [dist.new_group(h) for h in halves]
    mine = halves[rank % 2]
    g = subgroups[rank % 2]
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=g)
    chk.same("subgroup allreduce", t, torch.tensor([float(sum(mine))]))
    t = torch.tensor([float(rank)])
    dist.broadcast(t, group_src=len(mine) - 1, group=g)
    chk.same("subgroup broadcast", t, torch.tensor([float(mine[-1])]))
    chk.same("subgroup rank", torch.tensor(dist.get_rank(g)), torch.tensor(mine.index(rank)))
    # objects on a subgroup, and the backend's sequence numbers agree across
    # the subgroup's ranks (ProcessGroup forwards them only for its built-in
    # backends, so they are read from the backend)
    objs = [None] * len(mine)
    dist.all_gather_object(objs, ("from", rank), group=g)
    chk.count += 1
    if objs != [("from", r) for r in mine]:
        chk.failures.append(f"all_gather_object on a subgroup: {objs}")
    backend = g._get_backend(torch.device("cpu"))
    backend._set_sequence_number_for_group()
    seq = torch.tensor([backend._get_sequence_number_for_group()])
    seqs = [torch.zeros(1, dtype=torch.int64) for _ in mine]
    dist.all_gather(seqs, seq, group=g)
    chk.count += 1
    if any(s.item() != seq.item() for s in seqs) or seq.item() == 0:
        chk.failures.append(f"sequence numbers of the subgroup: {[s.item() for s in seqs]}")
    # a group of the last rank and the first, in that order of creation
    pair = dist.new_group([world - 1, 0])
    if rank in (0, world - 1):
        t = torch.tensor([rank + 1])
        dist.all_reduce(t, group=pair, op=R.PRODUCT)
        chk.same("pair group", t, torch.tensor([world]))
    # two groups in flight: ranks issue on them in opposite orders, with no
    # wait in between; each group's worker progresses independently
    g1 = dist.new_group(list(range(world)))
    g2 = dist.new_group(list(range(world)))
    a = gen(rank, (1 << 19,), torch.float32, 300)
    b = gen(rank, (1 << 19,), torch.float32, 301)
    if rank % 2 == 0:
        wa = dist.all_reduce(a, group=g1, async_op=True)
        wb = dist.all_reduce(b, group=g2, async_op=True)
    else:
        wb = dist.all_reduce(b, group=g2, async_op=True)
        wa = dist.all_reduce(a, group=g1, async_op=True)
    wa.wait()
    wb.wait()
    chk.same("group 1 in flight", a, reference(world, (1 << 19,), torch.float32, 300, R.SUM))
    chk.same("group 2 in flight", b, reference(world, (1 << 19,), torch.float32, 301, R.SUM))
    # a group created with a backend argument, next to a gloo one of the same ranks
    g3 = dist.new_group(list(range(world)), backend="braid")
    t = torch.ones(3, dtype=torch.int64)
    dist.all_reduce(t, group=g3)
    chk.same("new_group(backend='braid')", t, torch.full((3,), world))
    for sg in subgroups + [pair, g1, g2, g3]:
        if sg != dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(sg)
    dist.destroy_process_group()
    # destroy and re-init: once from a URL, then twice with one explicit store
    # object, where the second group must not pick up the first one's unique id
    store = dist.FileStore(f"{store_path}.explicit", world)
    for round_ in range(3):
        if round_ == 0:
            dist.init_process_group("braid", init_method=f"file://{store_path}.url", rank=rank, world_size=world)
        else:
            dist.init_process_group("braid", store=store, rank=rank, world_size=world)
        t = torch.full((4,), float(rank + round_))
        dist.all_reduce(t)
        chk.same(f"re-init {round_}", t, torch.full((4,), float(sum(range(world)) + world * round_)))
        dist.destroy_process_group()
    chk.done()


# ---- failures ------------------------------------------------------------------------

def timeout(rank, world, store_path):
    """Rank 1 is late for one operation and absent for the next."""
    init(rank, world, store_path, timeout_s=3)
    chk = Checker(rank)
    t = torch.ones(8)
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)
        chk.raises("wait with a timeout", lambda: work.wait(timeout=datetime.timedelta(milliseconds=300)),
                   "did not complete within", "allreduce")
        work.wait()  # rank 1 arrives after about 1 s: the same work then completes
        chk.same("late allreduce", t, torch.full((8,), float(world)))
        start = time.monotonic()
        chk.raises("allreduce with a missing rank", lambda: dist.all_reduce(torch.ones(4)),
                   "allreduce", "timed out", "rank 1")
        elapsed = time.monotonic() - start
        if not 2.0 <= elapsed <= 30:
            chk.failures.append(f"timeout took {elapsed:.1f} s for a 3 s process group timeout")
        chk.raises("operation after the failure", lambda: dist.broadcast(torch.ones(2), src=0),
                   "earlier operation")
    else:
        time.sleep(1.0)
        dist.all_reduce(t)
        chk.same("late allreduce", t, torch.full((8,), float(world)))
        time.sleep(8)  # absent while rank 0 times out
    chk.done()


def any_source_timeout(rank, world, store_path):
    """A receive from any source that no rank sends to fails within the
    group's timeout, naming the rank and what it saw."""
    init(rank, world, store_path, timeout_s=3)
    chk = Checker(rank)
    if rank == 0:
        start = time.monotonic()
        chk.raises("recv from any source with no sender", lambda: dist.recv(torch.empty(2)),
                   "recvAnySource", "no rank sent a message", "rank 0", "rank 1 0/0")
        elapsed = time.monotonic() - start
        if not 2.0 <= elapsed <= 30:
            chk.failures.append(f"any-source timeout took {elapsed:.1f} s for a 3 s process group timeout")
    else:
        time.sleep(8)  # sends nothing while rank 0 times out
    chk.done()


def subgroup_timeout(rank, world, store_path):
    """A subgroup's own timeout, far below the default group's, bounds its
    collectives: rank 1 never joins the second allreduce on it."""
    init(rank, world, store_path, timeout_s=120)
    chk = Checker(rank)
    short = dist.new_group(list(range(world)), timeout=datetime.timedelta(seconds=2))
    t = torch.ones(4)
    dist.all_reduce(t, group=short)  # every rank: the connections exist before the timeout test
    chk.same("subgroup allreduce", t, torch.full((4,), float(world)))
    if rank == 0:
        start = time.monotonic()
        chk.raises("subgroup allreduce with a missing rank", lambda: dist.all_reduce(torch.ones(4), group=short),
                   "allreduce", "timed out", "rank 1")
        elapsed = time.monotonic() - start
        if elapsed > 60:  # the default group's 120 s, or braid's 600 s, would take longer
            chk.failures.append(f"subgroup timeout took {elapsed:.1f} s for a 2 s subgroup timeout")
    # rank 1 waits here, on the default group, until rank 0 has seen its failure
    dist.barrier()
    chk.done()


# ---- the process environment -------------------------------------------------------------

class EnvWatcher:
    """Records every value the C library's getenv returns for `names`, read in
    a loop on a thread of its own (libbraid and other native code read the C
    environment; os.environ is Python's copy of it). ctypes calls drop the GIL,
    so the loop runs on while the backend creates communicators."""

    def __init__(self, names):
        import ctypes
        self._getenv = ctypes.CDLL(None).getenv
        self._getenv.restype = ctypes.c_char_p
        self._getenv.argtypes = [ctypes.c_char_p]
        self._names = [n.encode() for n in names]
        self.seen = {n: set() for n in names}
        self.reads = 0
        self._stop = None
        self._thread = None

    def read(self, name):
        v = self._getenv(name.encode())
        return None if v is None else v.decode()

    def _loop(self):
        getenv, names, seen = self._getenv, self._names, self.seen
        while not self._stop.is_set():
            for n in names:
                v = getenv(n)
                seen[n.decode()].add(None if v is None else v.decode())
            self.reads += 1

    def __enter__(self):
        import threading
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def environment_untouched(rank, world, store_path):
    """Creating groups touches none of NCCL_COMM_ID, BRAID_TIMEOUT and
    BRAID_BOOTSTRAP_TIMEOUT, and the group's timeout, not the user's BRAID_TIMEOUT,
    bounds collectives."""
    chk = Checker(rank)
    symbols = braid_torch._C.optional_symbols()
    for name in ("braidGetPrivateUniqueId", "braidCommInitRankTimeout"):
        if not symbols.get(name):
            chk.failures.append(f"the loaded libbraid lacks {name}: this test would test the fallback")
    # ncclGetUniqueId fails on this NCCL_COMM_ID (it is no host:port), so every
    # group is made only if the backend makes private ids without blanking it.
    # All three exist beforehand, so that the watcher's concurrent getenv stays
    # safe even against a regression that overwrites one in place.
    user = {"NCCL_COMM_ID": "not-a-host-port", "BRAID_TIMEOUT": "1", "BRAID_BOOTSTRAP_TIMEOUT": "555"}
    os.environ.update(user)  # putenv: the C environment too
    with EnvWatcher(user) as creating:
        dist.init_process_group("braid", init_method=f"file://{store_path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        groups = [dist.new_group(list(range(world))) for _ in range(10)]
    for name, value in user.items():
        if creating.seen[name] != {value}:
            chk.failures.append(f"{name} while creating groups: {creating.seen[name]} ({creating.reads} reads)")
    watcher = EnvWatcher(user)
    for name, value in user.items():
        if watcher.read(name) != value or os.environ.get(name) != value:
            chk.failures.append(f"{name} after creating groups: getenv {watcher.read(name)!r}, "
                                f"os.environ {os.environ.get(name)!r}, want {value!r}")
    with watcher:
        for g in [None] + groups:
            t = torch.full((3,), float(rank))
            dist.all_reduce(t, group=g)
            chk.same("allreduce", t, torch.full((3,), float(sum(range(world)))))
        # Late by more than the user's BRAID_TIMEOUT=1, far within the group's 60 s.
        if rank == 1:
            time.sleep(3)
        t = torch.ones(2)
        dist.all_reduce(t)
        chk.same("allreduce with a late rank", t, torch.full((2,), float(world)))
    for name, value in user.items():
        if watcher.seen[name] != {value}:
            chk.failures.append(f"{name} during collectives: {watcher.seen[name]}")
    dist.barrier()
    chk.done()


# ---- training ---------------------------------------------------------------------------

def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def _train_ddp(rank, group, steps=20, hook=None):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(_model(seed=rank), process_group=group)  # different seeds: DDP must broadcast rank 0's
    if hook is not None:
        model.register_comm_hook(group, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        x, y = _batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def ddp(rank, world, store_path):
    gloo = init(rank, world, store_path)
    chk = Checker(rank)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    on_braid = _train_ddp(rank, None)
    on_gloo = _train_ddp(rank, gloo)
    # a Python communication hook: all_reduce(async_op=True).get_future().then(...)
    with_hook = _train_ddp(rank, None, hook=default_hooks.allreduce_hook)
    # two ranks add in the same order on both backends; more may round differently
    tol = None if world == 2 else 1e-5
    chk.same("DDP weights braid vs gloo", on_braid, on_gloo, tol=tol)
    chk.same("DDP weights with allreduce_hook vs gloo", with_hook, on_gloo, tol=tol)
    replicas = [torch.empty_like(on_braid) for _ in range(world)]
    dist.all_gather(replicas, on_braid, group=gloo)
    for r in range(world):
        chk.same(f"DDP replica {r} equal", replicas[r], on_braid)
    untrained = torch.cat([p.detach().flatten() for p in _model(seed=0).parameters()])
    if torch.equal(on_braid, untrained):
        chk.failures.append("DDP did not change the weights")
    chk.done()


def ddp_reproducible(rank, world, store_path, algo, shuffle, out_path):
    """DDP in reproducible mode, under NCCL_ALGO=`algo`, with the data shards
    handed to the ranks in the order `shuffle` gives; rank 0 saves the weights
    (the caller compares the runs bit for bit)."""
    os.environ["NCCL_ALGO"] = algo
    init(rank, world, store_path)
    import braid_torch
    braid_torch.set_reproducible()
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(_model(seed=0))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    shard = shuffle[rank]
    for step in range(20):
        x, y = _batch(shard, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    if rank == 0:
        torch.save(torch.cat([p.detach().flatten() for p in model.parameters()]), out_path)


def ddp_wire(rank, world, store_path, wire, out_path, steps=200):
    """DDP learning a fixed linear map for `steps` steps with the group's float32
    gradients sent as `wire` (None: float32) through error_feedback_hook; rank 0
    saves every step's loss."""
    init(rank, world, store_path)
    import braid_torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(_model(seed=0))
    if wire is not None:
        braid_torch.set_wire_type(None, wire)
        model.register_comm_hook(braid_torch.ErrorFeedbackState(None, wire), braid_torch.error_feedback_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    teacher = torch.randn(4, 16, generator=torch.Generator().manual_seed(7))
    losses = []
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(32, 16, generator=g)
        y = x @ teacher.T + 0.01 * torch.randn(32, 4, generator=g)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if rank == 0:
        torch.save(torch.tensor(losses), out_path)


def fsdp(rank, world, store_path):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    init(rank, world, store_path)
    chk = Checker(rank)
    mesh = init_device_mesh("cpu", (world,))
    model = _model(seed=0)
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    reference_model = _model(seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    ref_opt = torch.optim.SGD(reference_model.parameters(), lr=0.05)
    for step in range(10):
        x, y = _batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        # the same step on one process over every rank's batch
        xs, ys = zip(*[_batch(r, step) for r in range(world)])
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference_model(torch.cat(xs)), torch.cat(ys)).backward()
        ref_opt.step()
    for (name, p), q in zip(model.named_parameters(), reference_model.parameters()):
        full = p.full_tensor() if hasattr(p, "full_tensor") else p
        chk.same(f"FSDP2 {name}", full.detach(), q.detach(), tol=1e-5)
    chk.done()

