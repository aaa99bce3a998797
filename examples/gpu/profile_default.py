"""Where the default recorder's per-step cost goes on the GPU loop: py-spy samples of this
process while the recorder records, then while it is paused (the in-process overhead design's
two arms, benchmarks/overhead_inprocess.py), the stacks written collapsed per phase.

    python examples/gpu/profile_default.py --py-spy PATH --out DIR [--seconds 20] [--rate 400]

Writes DIR/<variant>_on.txt and DIR/<variant>_off.txt (py-spy's raw format: one collapsed
stack and its count per line, thread at the root) for each variant (py: every thread; gil: only
the thread holding the GIL; native: with C frames), and DIR/steps.json (steps and step time per
phase). The difference
on the training thread between the phases, by frame, is the recorder's cost where it lands.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from overhead_workload import transformer  # noqa: E402

from workflow_lib.capture import FlightRecorder  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--py-spy", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=int, default=400)
    ap.add_argument("--variants", default="py,gil,native",
                    help="py: every thread's Python stacks; gil: only the thread holding the GIL; native: with C frames")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    cuda = torch.cuda.is_available()
    rec = FlightRecorder(incident_id="prof", incidents_dir=str(out / "inc"))
    step, sync = transformer(torch, cuda, rec)
    rec.start()
    i = 0
    for _ in range(50):  # warm-up, recorded (the trigger's own warm-up passes)
        with rec.step(i):
            step(i)
            sync()
        i += 1
    res = {}
    flags = {"py": [], "gil": ["--gil"], "native": ["--native"]}
    phases = [f"{v}_{arm}" for v in args.variants.split(",") for arm in ("on", "off")]
    for phase in phases:
        variant, arm = phase.rsplit("_", 1)
        (rec.resume if arm == "on" else rec.pause)()
        spy = subprocess.Popen([args.py_spy, "record", "--pid", str(os.getpid()), "--rate", str(args.rate),
                                "--duration", str(int(args.seconds)), "--format", "raw", "--threads",
                                *flags[variant], *([] if variant == "native" else ["--nonblocking"]),
                                "-o", str(out / f"{phase}.txt")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t0, n, durs = time.perf_counter(), 0, []
        while spy.poll() is None:
            s = time.perf_counter_ns()
            with rec.step(i):
                step(i)
                sync()
            durs.append(time.perf_counter_ns() - s)
            i += 1
            n += 1
        err = spy.stderr.read().decode(errors="replace")[-300:]
        durs.sort()
        res[phase] = {"steps": n, "seconds": time.perf_counter() - t0, "median_ms": durs[len(durs) // 2] / 1e6,
                      "mean_ms": sum(durs) / len(durs) / 1e6, "py_spy_rc": spy.returncode, "py_spy_err": err}
        print(phase, json.dumps(res[phase]), flush=True)
    rec.stop()
    (out / "steps.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
