"""The peers of the benchmark suite and their settings (used by bench/run; standard library only).

The peer is the PyTorch a user installs today: PyTorch 2.x from PyPI in the bench venv that
scripts/bench-venv.sh creates (${XDG_CACHE_HOME:-~/.cache}/ember/bench-venv, or $EMBER_BENCH_VENV),
with ONNX Runtime beside it as the inference peer. Without the venv the runner falls back to
Debian's /usr/bin/python3 (python3-torch 1.13, OpenBLAS for its BLAS) and says so.

Each workload's peer runs at its best settings here, measured side by side (docs/performance.md,
"The peer"):
- the OpenMP wait policy of PyTorch's worker threads (an environment variable of the peer process,
  so one process per policy): "passive" (GOMP_SPINCOUNT=0, sleep at once), "default" (libgomp's
  own bounded spin), "active" (OMP_WAIT_POLICY=ACTIVE, spin without end: only for the epoch rows,
  whose peer is a fresh process; a long-lived peer that spins while idle takes a core from Ember's
  timed reps). Where it matters (2 threads, small steps) the candidates run side by side as
  variants of the same rounds and the faster counts: which one wins depends on the load;
- Adam fused where torch has it (torch_bench.py picks it, and says so);
- channels-last for the convolution and pooling rows where it is faster (measured as a second
  eager variant; the faster one is the peer's time, and the row records which);
- torch.compile as a second peer column (compile time reported apart from the timed reps);
- large-output rows (a fresh output of 16M floats) also against the peer with a tuned allocator
  (ALLOC_ENV: glibc keeps freed memory instead of returning it, so a new output does not
  page-fault), to show how much of a lead is only PyTorch's allocator.
"""
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SYSTEM_PYTHON = "/usr/bin/python3"

# OpenMP wait policies of the peer's threads (libgomp: PyTorch's wheels and Debian's torch both
# use GNU OpenMP). Each is extra environment for the peer process.
WAIT = {"passive": {"GOMP_SPINCOUNT": "0"}, "default": {}, "active": {"OMP_WAIT_POLICY": "ACTIVE"}}

# glibc malloc tuned for PyTorch's large buffers: no mmap for big blocks (the threshold cannot be
# raised above 32 MB, so MALLOC_MMAP_MAX_=0 does it) and no trimming of the heap top, so a freed
# 64 MB output is reused by the next rep instead of being unmapped and faulted in again.
ALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40), "MALLOC_TOP_PAD_": str(256 << 20)}


def venv_dir():
    return os.environ.get("EMBER_BENCH_VENV") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ember", "bench-venv")


def default_python():
    """(interpreter, note): $EMBER_BENCH_PYTHON, else the bench venv's, else /usr/bin/python3."""
    if os.environ.get("EMBER_BENCH_PYTHON"):
        return os.environ["EMBER_BENCH_PYTHON"], None
    py = os.path.join(venv_dir(), "bin", "python")
    if os.access(py, os.X_OK):
        return py, None
    return SYSTEM_PYTHON, ("no bench venv at %s (create it with `bash scripts/bench-venv.sh`): the peer is %s "
                           "(Debian's python3-torch, if installed)" % (venv_dir(), SYSTEM_PYTHON))


def default_ort_python(peer_python):
    """ONNX Runtime's interpreter: $EMBER_BENCH_ORT_PYTHON, else the bench venv's (when the peer is the venv)."""
    if os.environ.get("EMBER_BENCH_ORT_PYTHON"):
        return os.environ["EMBER_BENCH_ORT_PYTHON"]
    if peer_python.startswith(venv_dir() + os.sep):
        return peer_python
    return None


def is_system_torch(python):
    return os.path.realpath(python).startswith("/usr/bin/")


def find_peer_blas(arg, python):
    """Debian's torch calls the generic libblas.so.3: the reference BLAS unless OpenBLAS is installed.
    bench/get-openblas.sh unpacks OpenBLAS into build/peer-openblas for that peer only. PyTorch 2.x
    wheels carry MKL inside libtorch_cpu and need nothing."""
    if arg == "none":
        return None
    if arg:
        return arg
    if not is_system_torch(python):
        return None
    sysblas = "/usr/lib/x86_64-linux-gnu/libblas.so.3"
    if "openblas" in os.path.realpath(sysblas) or "blis" in os.path.realpath(sysblas):
        return None
    local = os.path.join(ROOT, "build", "peer-openblas", "usr", "lib", "x86_64-linux-gnu", "openblas-pthread")
    return local if os.path.exists(os.path.join(local, "libblas.so.3")) else None


def peer_env(threads, wait="passive", alloc=False, blas_dir=None):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):  # the policy is ours to set
        env.pop(k, None)
    env.update(WAIT[wait])
    if alloc:
        env.update(ALLOC_ENV)
    if blas_dir:
        env["LD_LIBRARY_PATH"] = blas_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return env


def env_text(wait, alloc=False):
    kv = dict(WAIT[wait], **(ALLOC_ENV if alloc else {}))
    return " ".join("%s=%s" % kv_ for kv_ in kv.items()) or "no OpenMP wait variable"


# ---------------------------------------------------------------------------------------------
# Per-workload choices. The best wait policy depends on the machine's load more than on the
# workload: on a quiet machine spinning wins for small steps (an MLP epoch at 2 threads: 2.99 s
# passive, 1.65 s with OMP_WAIT_POLICY=ACTIVE), on a loaded one (load average 8-9 on 2 cores)
# passive wins by 10-25x (the same epoch: passive 9,535 images/s, libgomp's default 890, active
# 371), because a spinning thread waits for one that is not running. So the rows where the policy
# matters measure the candidates side by side in the same rounds and the faster counts; the rest
# use passive, which is never far off for large, data-parallel ops.
#
# Suite rows (long-lived peer processes: passive or default only, see the module comment). One
# thread has no worker to wait for, so one variant.
SMALL_STEP_GROUPS = {"training", "inference", "overhead"}


def suite_waits(w, threads, override=None):
    if override:
        return override
    if threads > 1 and w["group"] in SMALL_STEP_GROUPS:
        return ["passive", "default"]
    return ["passive"]


# Epoch rows: fresh processes, so active is allowed.
def epoch_waits(model, threads, override=None):
    if override:
        return override
    return ["passive", "active"] if threads > 1 else ["passive"]


# A variant this much slower than the fastest after the first round is not run again (a spinning
# peer on a loaded machine can take minutes per epoch).
DROP_FACTOR = 2.0
# Convolution and pooling rows get a channels-last variant of the eager peer.
CHANNELS_LAST_KINDS = {"conv2d", "max_pool2d"}
# Fresh outputs at least this large get the allocator-tuned peer column.
BIG_OUTPUT_BYTES = 16 << 20


def peer_sides(w, args, fused, threads):
    """The peer sides of workload w: a list of (name, role, wait, opts, alloc). role: "eager" (the
    fastest eager variant is the peer's time), "alloc" (eager with ALLOC_ENV) or "compiled"."""
    if not w["peer"] or not fused:
        return []
    if w["peer"] == "libtorch":
        return [("peer", "eager", "passive", {}, False)]
    waits = suite_waits(w, threads, args.peer_wait)
    sides = []
    for i, wait in enumerate(waits):
        suffix = "" if i == 0 else "." + wait
        sides.append(("peer" + suffix, "eager", wait, {}, False))
        if w["kind"] in CHANNELS_LAST_KINDS and not args.smoke:
            sides.append(("peer.cl" + suffix, "eager", wait, {"channels_last": True}, False))
    if args.smoke:
        return sides[:1]
    if w.get("out_bytes", 0) >= BIG_OUTPUT_BYTES and not args.no_alloc_variant:
        sides.append(("peer_alloc", "alloc", waits[0], {}, True))
    if not args.no_compile:
        sides.append(("compiled", "compiled", waits[0], {"compile": True}, False))
    return sides


def variant_label(name, wait, opts, alloc):
    parts = [wait]
    if opts.get("channels_last"):
        parts.append("channels-last")
    if opts.get("compile"):
        parts.append("torch.compile")
    if alloc:
        parts.append("tuned malloc")
    return ", ".join(parts)


# ---------------------------------------------------------------------------------------------
def describe(peer):
    """One sentence naming the peer as it really is: interpreter, torch version, and the BLAS and
    kernels its build uses (torch.__config__), or the system BLAS it loaded (Debian's 1.13)."""
    if not peer:
        return "PyTorch (skipped)"
    b = peer.get("build") or {}
    libs = []
    if b.get("blas_info") == "mkl" or b.get("mkl"):
        libs.append("MKL %s" % b["mkl"] if b.get("mkl") else "MKL")
    elif peer.get("blas"):
        m = re.search(r"openblas\w*-r([0-9.]+)\.so", peer["blas"])
        libs.append("OpenBLAS %s" % m.group(1) if m else "BLAS %s" % peer["blas"].split(",")[0])
    elif b.get("blas_info"):
        libs.append("BLAS_INFO=%s" % b["blas_info"])
    if b.get("onednn"):
        libs.append("oneDNN %s" % b["onednn"])
    if b.get("cpu_capability"):
        libs.append("ATen CPU kernels %s" % b["cpu_capability"])
    text = "PyTorch %s" % peer["version"] + (" under %s" % peer["python"] if peer.get("python") else "")
    if libs:
        text += " (" + ", ".join(libs) + ")"
    return text


def interpreter_has(python, module):
    try:
        return subprocess.run([python, "-c", "import " + module], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
