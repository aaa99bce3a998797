# Sourced (not run) at the start of a command on the lent H200, from the repo root:
#   source examples/gpu/device_env.sh
# The machine has no network: the Python packages stallcase needs beyond the image's
# (snakemake and its deps, blake3, jsonschema, google-re2, cupti-python with a matching
# nvidia-cuda-cupti, setuptools for the C span) travel as wheels in .whl/ and go to /tmp/site.
# Then the C span extension is built in place, so the recorder's span path is the C one.
REPO=${REPO:-$PWD}
WHEELS=${WHEELS:-$REPO/.whl}   # a smaller set where a command needs no snakemake
if [ -d "$WHEELS" ] && [ ! -f /tmp/site/.stallcase-ready ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
    && touch /tmp/site/.stallcase-ready || { echo "device_env: wheel install failed" >&2; return 1; }
fi
export PYTHONPATH=/tmp/site:$REPO${PYTHONPATH:+:$PYTHONPATH}
export PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
# Several GPUs share a host elsewhere: NVLink multicast stays off (device README).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
(cd "$REPO" && python3 setup.py -q build_ext --inplace >/tmp/build_ext.log 2>&1) || echo "device_env: C span not built (see /tmp/build_ext.log)" >&2
