"""Data movement, cold start and compilation, injected at known steps, captured twice each.

    OUT=/some/dir python examples/gpu/h200_data_movement.py [--tiny] [--budget-s 400]

A small transformer (embedding, 2 encoder layers, d=512, bf16 autocast, AdamW) trained from a
real `torch.utils.data.DataLoader` (2 workers, pinned batches copied non_blocking), 20 steps
per process, each process a cold start: the recorder or profiler is on before the first step,
which creates the DataLoader's workers and pays lazy init, handles and (where compiled) the
first compile. Every step ends when its GPU work does (a stream synchronize, as a loop that
times its steps has). One cause per process, on known steps:

  cold_start   nothing else: the first steps are the cause (warm_up, reported once)
  pageable     a 256 MiB batch extra from pageable host memory, .to(device)      -> transfer_stall
  item         per-sample metrics: 128 x loss_i.item() in span "metrics.per_sample" -> transfer_stall
               (the per-sample means computed once before the reads)
  dtoh_pack    a 512 MiB activation pack into a pinned buffer on the training stream -> transfer_stall
  recompile    torch.compile'd loss with a changing sequence length (static shapes)   -> compilation
  autotune     a @triton.autotune kernel meeting a new size (4 configs benchmarked)   -> compilation

Each case runs in two processes (torch.profiler and cupti-python both own CUPTI):
  recorder  FlightRecorder with host, nvml, sched, cupti; torch._dynamo's compile callbacks, the
            compiler's entry points (compile_hooks.COMPILE_ENTRY_POINTS, by code object: Python >= 3.12)
            and Triton's autotuner benchmark open recorder spans ("dynamo.compile",
            "dynamo.compile.frame", "inductor.*", "triton.autotune.benchmark": hooks that name
            what the trace cannot)
  kineto    the same loop under torch.profiler (CPU + CUDA), imported with
            `stallcase import kineto` (host spans thinned by nesting depth until <= 2 MB,
            compile, autotune and wait spans kept at every depth)
A fixture still over 2 MB drops the benchmark's event bookkeeping calls inside compile spans
(thin_fixture; `--thin INCIDENT_DIR` does it to one already written).
Each capture becomes a fixture directory <case>-<form>/ with incident/, truth.json (which steps
got which cause, the intended check, the accepted causes) and provenance.json (date, GPU,
driver, torch, command), scored at once by tests/data_movement_scoring.py; everything is
packed into $OUT/data.tar.gz (the only file written to $OUT) with summary.json and the logs.

Without CUDA (or --tiny) the model shrinks (d=32, 1 layer) and only the cases a CPU can show
run (cold_start, recompile with the aot_eager backend); the others are listed as skipped with
the reason. The whole run stops starting new processes when --budget-s is spent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

STEPS = 20
CASES = {
    # case: (injected steps, the cause's name in truth, the check that must explain it, needs)
    "cold_start": ((), None, "warm_up", ()),
    "pageable": ((6, 11, 16), "pageable_htod", "transfer_stall", ("cuda",)),
    "item": ((5, 10, 15), "sync_dtoh_item", "transfer_stall", ("cuda",)),
    "dtoh_pack": ((7, 12, 17), "dtoh_pack", "transfer_stall", ("cuda",)),
    "recompile": ((8, 14), "recompile", "compilation", ()),
    "autotune": ((9, 15), "late_autotune", "compilation", ("cuda", "triton")),
}
# Share of an injected step's excess the right cause must explain (tests/data_movement_scoring.py).
# The .item() loop's host ops (select, item) between the copies are host work in named spans:
# the credit rule gives them to host_submission, so the copies' own share is lower.
MIN_SHARE = {"item": 0.5}
DEFAULT_SHARE = 0.8
FIXTURE_LIMIT = 2 << 20
BENCH_CALLS = [0]  # Triton autotune benchmarks seen (the hook counts them: the truth of the autotune case)


def _sizes(tiny: bool) -> dict:
    if tiny:
        return {"d": 32, "layers": 1, "ff": 64, "heads": 4, "vocab": 256, "seq": 16, "batch": 4, "workers": 1,
                "pageable_mb": 4, "pack_mb": 4, "items": 16}
    return {"d": 512, "layers": 2, "ff": 2048, "heads": 8, "vocab": 8192, "seq": 128, "batch": 16, "workers": 2,
            "pageable_mb": 256, "pack_mb": 512, "items": 128}


class Tokens:
    """Synthetic next-token data read through the DataLoader (variable sequence length per item
    index, for the recompile case)."""

    def __init__(self, n: int, seq_of, vocab: int):
        self.n, self.seq_of, self.vocab = n, seq_of, vocab

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch

        g = torch.Generator().manual_seed(i)
        t = torch.randint(0, self.vocab, (self.seq_of(i) + 1,), generator=g)
        return t[:-1], t[1:]


def _triton_kernel():
    """A fused scale+add with @triton.autotune keyed on the size: a new size benchmarks every
    config (do_bench per config) in the step that meets it."""
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (512, 4), (1024, 4), (2048, 8))],
                     key=["n"])
    @triton.jit
    def scale_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 0.5 + tl.load(y_ptr + offs, mask=m), mask=m)

    def run(x, y):
        out = x.new_empty(x.shape)
        n = x.numel()
        scale_add[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, n)
        return out

    return run


def _hooks(rec, record_function):
    """Name compiles and autotune benchmarks in the recorder through the product's hooks
    (workflow_lib/capture/inprocess/compile_hooks.py: dynamo's compile callbacks, the compiler's
    entry points, Triton's Autotuner._bench), and in Kineto for Triton, which annotates nothing
    itself; the autotune case counts its benchmarks (its truth)."""
    from contextlib import contextmanager

    from workflow_lib.capture.inprocess import compile_hooks

    @contextmanager
    def around(name):
        BENCH_CALLS[0] += 1
        with record_function(name):
            yield

    from workflow_lib.capture.steps import NULL_SPAN

    span = rec.span if rec is not None else (lambda name: NULL_SPAN)
    return compile_hooks.install(span, around)


def run_case(case: str, form: str, tiny: bool, work: Path) -> dict:
    """One process: train STEPS steps with the case's cause at its steps; write the capture."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from workflow_lib.capture import Budget, FlightRecorder

    t_proc = time.perf_counter()
    cuda = torch.cuda.is_available() and not tiny
    tiny = tiny or not cuda
    device = torch.device("cuda" if cuda else "cpu")
    z = _sizes(tiny)
    steps_at, _, _, _ = CASES[case]
    rec = None
    if form == "recorder":
        sources = ("host", "nvml", "sched", "cupti") if cuda else ("host", "sched")
        rec = FlightRecorder(incident_id=f"{case}-recorder", incidents_dir=str(work / "incidents"),
                             budget=Budget(retained_bytes=48 << 20, sched_period_s=0.05), sources=sources)
        rec.declare_source(__file__)
        rec.start()
    prof = None
    if form == "kineto":
        prof = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []))
        prof.__enter__()
    hooks = _hooks(rec, record_function)

    def span(name):
        class Both:
            def __enter__(self):
                self.r = record_function(name)
                self.r.__enter__()
                self.s = rec.span(name) if rec is not None else None
                if self.s is not None:
                    self.s.__enter__()

            def __exit__(self, *exc):
                if self.s is not None:
                    self.s.__exit__(*exc)
                self.r.__exit__(*exc)
        return Both()

    # The recompile case changes the sequence length on its steps (first sight of each length).
    extra = {s: z["seq"] + 8 * (k + 1) for k, s in enumerate(steps_at)} if case == "recompile" else {}
    batch = z["batch"]
    seq_of = lambda i: extra.get(i // batch, z["seq"])  # noqa: E731  (item index -> its step's length)
    loader = torch.utils.data.DataLoader(Tokens((STEPS + 2) * batch, seq_of, z["vocab"]), batch_size=batch, shuffle=False,
                                         num_workers=z["workers"], prefetch_factor=2, pin_memory=cuda, persistent_workers=True)
    torch.manual_seed(0)
    layers = [torch.nn.TransformerEncoderLayer(z["d"], z["heads"], z["ff"], batch_first=True, dropout=0.0) for _ in range(z["layers"])]
    emb, head = torch.nn.Embedding(z["vocab"], z["d"]), torch.nn.Linear(z["d"], z["vocab"])
    model = torch.nn.ModuleList([emb, *layers, head]).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    amp = torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    def loss_fn(logits, y):
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")

    if case == "recompile":
        torch._dynamo.config.automatic_dynamic_shapes = False  # each new length recompiles (static shapes)
        loss_fn = torch.compile(loss_fn, backend="inductor" if cuda else "aot_eager")
    scale_add = _triton_kernel() if case == "autotune" else None
    if case == "pageable":
        pageable = torch.randn(z["pageable_mb"] << 18)  # float32: MiB << 18 elements, not pinned
        # The extra batch and its consumer (feats.sum() * 0) run once before the loop: their kernels'
        # first launch (lazy module loading, 8.5 ms of host time at the first injected step of the
        # first H200 run) is warm-up, not the copy's.
        _ = pageable.to(device).sum() * 0  # the same sizes, so the same kernels
    if case == "dtoh_pack":
        pack_src = torch.empty(z["pack_mb"] << 19, dtype=torch.bfloat16, device=device)
        pack_dst = torch.empty(z["pack_mb"] << 19, dtype=torch.bfloat16, pin_memory=cuda)
    if case == "autotune":
        side = torch.randn(1 << 16, device=device)

    def graphs():
        try:
            return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
        except (AttributeError, KeyError):
            return 0

    compiled_at, tuned_at, walls, it, out_metrics = [], [], {}, None, []
    for i in range(STEPS):
        g0, b0 = graphs(), BENCH_CALLS[0]
        t0 = time.perf_counter()
        step_cm = rec.step(i) if rec is not None else None
        if step_cm is not None:
            step_cm.__enter__()
        with record_function(f"ProfilerStep#{i}"):
            with span("data.next_batch"):
                if it is None:
                    it = iter(loader)  # worker start: the first step's
                x, y = next(it)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if case == "pageable" and i in steps_at:
                with span("data.extra_features"):
                    feats = pageable.to(device)
            with span("forward"), amp:
                h = emb(x)
                for k, layer in enumerate(layers):
                    h = layer(h)
                    if case == "dtoh_pack" and i in steps_at and k == 0:
                        with span("activations.pack"):
                            pack_dst.copy_(pack_src, non_blocking=True)  # on the training stream
                if scale_add is not None:
                    n = side.numel() - (64 * (steps_at.index(i) + 1) if i in steps_at else 0)
                    h = h + scale_add(side[:n], side[:n]).sum().to(h.dtype) * 0
                logits = head(h)
                per = loss_fn(logits, y)
                loss = per.mean() + (feats.sum() * 0 if case == "pageable" and i in steps_at else 0)
            with span("backward"):
                loss.backward()
            with span("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            if case == "item" and i in steps_at:
                with span("metrics.per_sample"):
                    # The means once, then one read per sample: the reads are the injection. (The
                    # first H200 run recomputed the means per read; under the profiler their host
                    # time, 36 us a read, was most of the step's excess and host_submission's.)
                    means = per.detach().reshape(batch, -1).mean(1)
                    out_metrics.append(max(means[k % batch].item() for k in range(z["items"])))
            if cuda:
                # The step ends when its GPU work does, as a loop that times its steps makes it. Without
                # it the Kineto form's host ran ahead of the GPU (no per-step wait there) and absorbed
                # the 9.7 ms DtoH pack in its lead: no injected step got slower in the first H200 run.
                torch.cuda.current_stream().synchronize()
        if step_cm is not None:
            step_cm.__exit__(None, None, None)
        walls[i] = round((time.perf_counter() - t0) * 1e3, 3)
        if graphs() > g0:
            compiled_at.append(i)
        if BENCH_CALLS[0] > b0:
            tuned_at.append(i)
    if cuda:
        torch.cuda.synchronize()
    out = {"case": case, "form": form, "walls_ms": walls, "compiled_at_steps": compiled_at, "autotuned_at_steps": tuned_at,
           "hooks": hooks,
           "process_s": round(time.perf_counter() - t_proc, 2), "cuda": cuda, "tiny": tiny, "sizes": z}
    if rec is not None:
        path = rec.snapshot("workload_boundary")
        rec.stop()
        out["incident"] = str(path)
    if prof is not None:
        prof.__exit__(None, None, None)
        trace = work / f"{case}.kineto.json"
        prof.export_chrome_trace(str(trace))
        out["trace"] = str(trace)
    return out


def _injected(case: str, got: dict) -> list[int]:
    """The steps that got the cause: as planned, or for compiles as the counters saw them."""
    planned = list(CASES[case][0])
    seen = {"recompile": got["compiled_at_steps"], "autotune": got["autotuned_at_steps"]}.get(case)
    if seen is None:
        return planned
    # As the counters saw them after warm-up; planned where the counter or hook was unavailable.
    return [s for s in seen if s >= 2] or planned


def _dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def _kineto_fixture(trace: Path, dest: Path, incident_id: str) -> dict:
    """`stallcase import kineto` the trace, then thin host spans by nesting depth until the
    incident fits FIXTURE_LIMIT (a gap inside a deep span lies inside its shallower ancestor,
    so the host evidence keeps a coarser name). Spans that are evidence by their name alone
    (compilation and autotune regions, declared waits) are kept at every depth: the H200's
    late-autotune capture thinned to depth 0 lost its triton.autotune.benchmark spans (depth 2)
    and with them the cause."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from workflow_lib.diagnose import DiagnoseOptions
    from workflow_lib.core.incident import read_incident, write_incident
    from workflow_lib.core.vocabulary import COMPILE_RE

    tmp = dest.parent / (dest.name + ".import")
    cmd = [sys.executable, "-m", "workflow_lib.cli", "import", "kineto", str(trace), "--incident", incident_id,
           "--incidents-dir", str(tmp)]
    subprocess.run(cmd, check=True, timeout=240)
    inc = read_incident(tmp / incident_id)
    data = {name: inc.table(name) for name in inc.manifest["tables"]}
    manifest = {k: v for k, v in inc.manifest.items() if k not in ("tables", "created_unix_ns")}
    for a in manifest.get("artifacts", []):
        a["path"] = trace.name  # the run's file name, not the capturing machine's path
    kept = None
    sp = data["spans"]
    wait_re = DiagnoseOptions().wait_regex()
    named = pa.array([bool(COMPILE_RE.search(n) or wait_re.search(n)) for n in sp["name"].to_pylist()], pa.bool_())
    for depth in (None, 4, 3, 2, 1, 0):
        if dest.exists():
            shutil.rmtree(dest)
        d = dict(data)
        if depth is not None:
            d["spans"] = sp.filter(pc.or_(pc.less_equal(sp["depth"], depth), named))
            manifest["sources"]["spans"].setdefault("detail", {})["thinned"] = (
                f"host spans of nesting depth <= {depth}, and compile, autotune and wait spans at any depth, kept "
                f"({d['spans'].num_rows} of {sp.num_rows}) for the fixture's size")
        write_incident(dest, manifest, d)
        kept = depth
        if _dir_bytes(dest) <= FIXTURE_LIMIT:
            break
    shutil.rmtree(tmp, ignore_errors=True)
    return {"span_depth_kept": kept, "bytes": _dir_bytes(dest), "spans_total": sp.num_rows}


# Host CUDA calls a fixture keeps inside compile/autotune spans: launches (their correlation ids
# place the kernels), synchronizing, copy and allocator calls. The rest there is the benchmark's
# timing bookkeeping (cudaEventCreate/Record/Query/ElapsedTime/Destroy: 45 of the 61 thousand
# calls of a late-autotune step on the H200), time the span claims for compilation whatever
# call it is in.
def _kept_call(name: str) -> bool:
    from workflow_lib.core import vocabulary

    return bool(vocabulary.LAUNCH_RE.search(name) or vocabulary.is_sync_call(name) or vocabulary.is_alloc_call(name)
                or "mem" in vocabulary.base_name(name).lower())


def thin_fixture(incident: Path, limit: int = FIXTURE_LIMIT) -> dict:
    """Bring a fixture's incident within `limit` bytes, when it is over, by dropping the host CUDA
    calls inside compile/autotune spans that _kept_call does not keep; the manifest's
    runtime_api source says so. Returns {"bytes", "calls_dropped"}."""
    import numpy as np
    import pyarrow as pa

    from workflow_lib.core.incident import read_incident, write_incident
    from workflow_lib.core.vocabulary import COMPILE_RE

    if _dir_bytes(incident) <= limit:
        return {"bytes": _dir_bytes(incident), "calls_dropped": 0}
    inc = read_incident(incident)
    data = {name: inc.table(name) for name in inc.manifest["tables"]}
    manifest = {k: v for k, v in inc.manifest.items() if k != "tables"}
    sp, rt = data["spans"], data["runtime_api"]
    comp = np.array([bool(COMPILE_RE.search(n)) for n in sp["name"].to_pylist()], bool)
    s0 = sp["start_ns"].to_numpy()[comp]
    e0 = sp["end_ns"].to_numpy()[comp]
    st, en = rt["start_ns"].to_numpy(), rt["end_ns"].to_numpy()
    inside = np.zeros(rt.num_rows, bool)
    for a, b in zip(s0.tolist(), e0.tolist()):  # compile spans: a few dozen
        inside |= (st >= a) & (en <= b)
    keep_name = {n: _kept_call(n) for n in set(rt["name"].to_pylist())}
    keep = ~inside | np.array([keep_name[n] for n in rt["name"].to_pylist()], bool)
    data["runtime_api"] = rt.filter(pa.array(keep))
    dropped = int((~keep).sum())
    # The source that holds the host calls: runtime_api in an import, cupti in a recorder capture.
    src = manifest["sources"].get("runtime_api") or manifest["sources"]["cupti"]
    src.setdefault("detail", {})["thinned"] = (
        f"{dropped} of {rt.num_rows} host CUDA calls dropped for the fixture's size: those inside compile/autotune "
        "spans other than launch, synchronizing, copy/memset and allocator calls (the benchmark's event bookkeeping)")
    tmp = incident.parent / (incident.name + ".thin")
    write_incident(tmp, manifest, data)
    shutil.rmtree(incident)
    tmp.rename(incident)
    return {"bytes": _dir_bytes(incident), "calls_dropped": dropped}


def _provenance(args, case: str, form: str) -> dict:
    import torch

    prov = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "torch": torch.__version__,
            "python": sys.version.split()[0], "command": f"python examples/gpu/h200_data_movement.py --case {case} --form {form}"
            + (" --tiny" if args.tiny else ""), "script": "examples/gpu/h200_data_movement.py"}
    if torch.cuda.is_available() and not args.tiny:
        prov["gpu"] = torch.cuda.get_device_name(0)
        try:
            import pynvml

            pynvml.nvmlInit()
            prov["driver"] = pynvml.nvmlSystemGetDriverVersion()
            pynvml.nvmlShutdown()
        except Exception as exc:  # NVML absent or refused: say so, the fixture stays usable
            prov["driver"] = f"unknown ({type(exc).__name__})"
        prov["cuda"] = torch.version.cuda
    else:
        prov["gpu"] = "none (CPU run)"
    return prov


def _truth(case: str, form: str, got: dict) -> dict:
    _, cause, check, _ = CASES[case]
    steps = _injected(case, got)
    return {
        "case": case, "form": form, "steps_total": STEPS,
        "injected": {cause: steps} if cause else {},
        "intended_check": {cause: check} if cause else {},
        "accepted_causes": {cause: [check]} if cause else {},
        "min_right_share": {cause: MIN_SHARE.get(case, DEFAULT_SHARE)} if cause else {},
        "warm_up_steps": [0],
        "host_walls_ms": got["walls_ms"], "compiled_at_steps": got["compiled_at_steps"],
        "autotuned_at_steps": got["autotuned_at_steps"], "hooks": got["hooks"], "sizes": got["sizes"],
        "cuda": got["cuda"],
    }


def one(args) -> int:
    """Child process: one case in one form; writes <work>/<case>-<form>/ and a result line."""
    work = Path(args.work)
    got = run_case(args.case, args.form, args.tiny, work)
    dest = work / "data-movement" / f"{args.case}-{args.form}"
    dest.mkdir(parents=True, exist_ok=True)
    info = {}
    if args.form == "recorder":
        shutil.copytree(got["incident"], dest / "incident")
        info["bytes"] = _dir_bytes(dest / "incident")
    else:
        info = _kineto_fixture(Path(got["trace"]), dest / "incident", f"{args.case}-kineto")
        Path(got["trace"]).unlink()
    info.update(thin_fixture(dest / "incident"))
    (dest / "truth.json").write_text(json.dumps(_truth(args.case, args.form, got), indent=2) + "\n")
    (dest / "provenance.json").write_text(json.dumps({**_provenance(args, args.case, args.form), "fixture": info,
                                                      "process_s": got["process_s"]}, indent=2) + "\n")
    return 0


def _score(fixture: Path) -> dict:
    from tests.data_movement_scoring import failures, score
    from workflow_lib.diagnose import diagnose_dir

    truth = json.loads((fixture / "truth.json").read_text())
    sc = score(diagnose_dir(fixture / "incident"), truth)
    return {**sc, "failures": failures(sc)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="tiny sizes on the CPU (the script's own test)")
    ap.add_argument("--budget-s", type=float, default=400.0, help="stop starting processes after this many seconds")
    ap.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)
    ap.add_argument("--form", choices=("recorder", "kineto"), help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--thin", metavar="INCIDENT_DIR", help="thin an already written fixture's incident to 2 MiB (thin_fixture)")
    args = ap.parse_args(argv)
    if args.thin:
        print(json.dumps(thin_fixture(Path(args.thin))))
        return 0
    if args.case:
        return one(args)
    if not os.environ.get("OUT"):
        print("error: set OUT to the output directory", file=sys.stderr)
        return 2
    out = Path(os.environ["OUT"])
    out.mkdir(parents=True, exist_ok=True)
    import importlib.util

    import torch

    cuda = torch.cuda.is_available() and not args.tiny
    have = {"cuda": cuda, "triton": cuda and importlib.util.find_spec("triton") is not None}
    t0 = time.monotonic()
    summary: dict = {"cuda": cuda, "runs": {}, "skipped": {}}
    with tempfile.TemporaryDirectory(prefix="data-movement-") as tmp:
        work = Path(tmp)
        logs = work / "logs"
        logs.mkdir()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for case, (_, _, _, needs) in CASES.items():
            lacking = [n for n in needs if not have[n]]
            if lacking:
                summary["skipped"][case] = f"needs {', '.join(lacking)} (not on this machine)"
                continue
            for form in ("recorder", "kineto"):
                name = f"{case}-{form}"
                left = args.budget_s - (time.monotonic() - t0)
                if left < 30:
                    summary["skipped"][name] = f"time budget spent ({args.budget_s:.0f} s)"
                    continue
                # A fresh compile cache per process: every capture's compiles are cold, as in a new job.
                penv = dict(env, TORCHINDUCTOR_CACHE_DIR=str(work / "cache" / name), TRITON_CACHE_DIR=str(work / "cache" / name / "triton"))
                cmd = [sys.executable, __file__, "--case", case, "--form", form, "--work", str(work)] + (["--tiny"] if args.tiny else [])
                s0 = time.monotonic()
                with open(logs / f"{name}.log", "w") as log:
                    try:
                        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=penv, timeout=min(left, 240)).returncode
                    except subprocess.TimeoutExpired:
                        rc = "timeout"
                run = {"rc": rc, "seconds": round(time.monotonic() - s0, 1)}
                fixture = work / "data-movement" / name
                if rc == 0 and (fixture / "truth.json").exists():
                    try:
                        run["score"] = _score(fixture)
                    except Exception as exc:  # a scoring fault must not lose the captures: record it
                        run["score_error"] = f"{type(exc).__name__}: {exc}"
                summary["runs"][name] = run
                print(f"{name}: rc={rc} {run['seconds']} s " + (
                    f"failures={len(run['score']['failures'])}" if "score" in run else run.get("score_error", "")), flush=True)
        summary["seconds"] = round(time.monotonic() - t0, 1)
        shutil.rmtree(work / "cache", ignore_errors=True)
        (work / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        with tarfile.open(out / "data.tar.gz", "w:gz") as tar:
            for part in ("data-movement", "logs", "summary.json"):
                if (work / part).exists():
                    tar.add(work / part, arcname=part)
    ok = [n for n, r in summary["runs"].items() if r["rc"] == 0]
    print(json.dumps({"ok": ok, "failed": [n for n in summary["runs"] if n not in ok], "skipped": summary["skipped"],
                      "failures": {n: r["score"]["failures"] for n, r in summary["runs"].items() if r.get("score", {}).get("failures")},
                      "seconds": summary["seconds"], "archive": str(out / "data.tar.gz")}, indent=1))
    return 0 if ok and len(ok) == len(summary["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
