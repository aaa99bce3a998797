"""Run a training script unchanged under torch.profiler, the way a user gets a Kineto trace of
it: one ProfilerStep per optimizer step (torch's global optimizer step hook calls prof.step()),
steps --wait .. --wait+--active recorded, the trace written as Chrome JSON (gzip by suffix).

    python kineto_run.py --trace out.json.gz --wait 31 --active 20 -- prog.py ARGS
"""
import argparse
import runpy
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trace", required=True)
    p.add_argument("--wait", type=int, default=31)
    p.add_argument("--active", type=int, default=20)
    p.add_argument("prog", nargs=argparse.REMAINDER)
    a = p.parse_args()
    prog = a.prog[1:] if a.prog[:1] == ["--"] else a.prog
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    prof = torch.profiler.profile(activities=acts,
                                  schedule=torch.profiler.schedule(wait=a.wait, warmup=1, active=a.active, repeat=1),
                                  on_trace_ready=lambda pr: pr.export_chrome_trace(a.trace))
    register_optimizer_step_post_hook(lambda *_: prof.step())
    sys.argv = prog
    with prof:
        runpy.run_path(prog[0], run_name="__main__")


if __name__ == "__main__":
    main()
