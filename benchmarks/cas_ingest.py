"""CAS ingest throughput against b3sum on the same file, in the same run.

Usage: python benchmarks/cas_ingest.py [--size-mib 1024] [--rounds 3] [--dir DIR]

Measures, interleaved over several rounds on one freshly written file:
  - hash:   workflow_lib.core.cas.hash_file (blake3 update_mmap, all cores)  vs  `b3sum --no-names FILE`
  - ingest: CAS.put_file (copy into the store while hashing)           (reported for reference)
Prints median MiB/s of each and the ratio stallcase/b3sum (target >= 0.8 for hashing).
The page cache is warm for both after the first round; both read the same cached file.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from workflow_lib.core.cas import CAS, hash_file  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--smoke", action="store_true", help="CI's smoke size (.ci/bench_smoke): seconds; it runs, its numbers mean nothing")
    args = ap.parse_args()
    if args.smoke:
        args.size_mib, args.rounds = 8, 1
    b3sum = shutil.which("b3sum")
    if not b3sum and not args.smoke:
        print("b3sum not found: install the Debian package 'b3sum' (the reference this benchmark compares against)", file=sys.stderr)
        return 2
    if not b3sum:
        print("no b3sum (smoke run): the reference is the blake3 package on one core")

    def reference(path: Path) -> str:
        if b3sum:
            return subprocess.run([b3sum, "--no-names", str(path)], capture_output=True, text=True, check=True).stdout.strip()
        import blake3

        return blake3.blake3(path.read_bytes()).hexdigest()

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="cas-bench-") as tmp:
        f = Path(tmp) / "blob"
        chunk = os.urandom(1 << 20)
        with open(f, "wb") as fh:
            for _ in range(args.size_mib):
                fh.write(chunk)
        size_mib = f.stat().st_size / (1 << 20)
        ours, ref, ingest = [], [], []
        for r in range(args.rounds):
            t = time.perf_counter()
            d1 = hash_file(f)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            out = reference(f)
            ref.append(time.perf_counter() - t)
            if out != d1:
                print(f"digest disagreement: stallcase {d1} b3sum {out}", file=sys.stderr)
                return 1
            store = Path(tmp) / f"store{r}"
            t = time.perf_counter()
            CAS(store).put_file(f)
            ingest.append(time.perf_counter() - t)
            shutil.rmtree(store)
        m_ours, m_ref, m_ing = (size_mib / statistics.median(x) for x in (ours, ref, ingest))
        print(f"file: {size_mib:.0f} MiB, rounds: {args.rounds}, cores: {os.cpu_count()}")
        print(f"stallcase hash_file : {m_ours:8.0f} MiB/s (median)")
        print(f"b3sum               : {m_ref:8.0f} MiB/s (median)")
        print(f"CAS.put_file (copy) : {m_ing:8.0f} MiB/s (median)")
        print(f"ratio hash stallcase/b3sum: {m_ours / m_ref:.2f} (target >= 0.80)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
