"""SASS of one kernel instantiation, for reading the schedule (diagnostic).
NVRTC's PTX is assembled by the ptxas that ships with triton (its PTX ISA
version lowered to what that ptxas knows) and disassembled by its nvdisasm:
close to, not byte-equal with, what the library loads.
    PYTHONPATH=. python tools/sass_of.py topk.cu 'topk_csm<float, 8>' sm_90 [-DFLAG ...] > out.sass"""
import os, re, subprocess, sys, tempfile
from cupy_backends.cuda.libs import nvrtc
from cusoftmax._loader import COMPILE_OPTIONS, expanded_source
import triton  # only for its bundled ptxas / nvdisasm (the library never imports it)

src, name, arch = sys.argv[1:4]
prog = nvrtc.createProgram(expanded_source(src), src, [], [])
nvrtc.addNameExpression(prog, name)
nvrtc.compileProgram(prog, list(COMPILE_OPTIONS) + [f"-arch=compute_{arch[3:]}"] + sys.argv[4:])
ptx = nvrtc.getPTX(prog)
ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
ptx = ptx.rstrip("\x00")
bind = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin")
with tempfile.TemporaryDirectory() as d:
    for ver in ("8.8", "8.7", "8.6", "8.5", "8.4"):
        p = re.sub(r"^\.version \S+", f".version {ver}", ptx, count=1, flags=re.M)
        open(f"{d}/k.ptx", "w").write(p)
        r = subprocess.run([f"{bind}/ptxas", f"-arch={arch}", "-v", f"{d}/k.ptx", "-o", f"{d}/k.cubin"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            break
    print(r.stderr, file=sys.stderr)
    out = subprocess.run([f"{bind}/nvdisasm", "-c", f"{d}/k.cubin"], capture_output=True, text=True)
print(out.stdout or out.stderr)
