"""In-process capture with no edit to the program (`stallcase record -- python train.py`).

The runner (capture/run.py) puts `site/` first on PYTHONPATH, so every Python process of the
run (the program, torchrun's ranks, multiprocessing children) imports `site/sitecustomize.py`
at start-up, which opens a `Session` (session.py). The session records into one
FlightRecorder per process and installs, once torch is imported (post_import.py), the hooks
of torch_hooks.py (steps from optimizer steps, DataLoader waits, forward/backward, checkpoint
saves, collectives, synchronous device reads), gc_hooks.py (Python GC collections) and
compile_hooks.py (dynamo, inductor, Triton). docs/capture.md lists each with its cost.
"""
