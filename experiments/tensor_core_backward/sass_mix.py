"""Static SASS instruction mix of the blend backwards' per-pair loops (issue 20), sm_90a.

    python experiments/tensor_core_backward/sass_mix.py > experiments/tensor_core_backward/sass_mix.txt
    python experiments/tensor_core_backward/sass_mix.py --same-as d48bcb5   # the plain kernels unchanged?

CPU only: compiles the kernels with the project's flags, disassembles them with line info and counts
by class the warp instructions of the loop holding each anchor's lines. Full path (every branch taken):
what a warp issues for one Gaussian x its 32 pixels when some lane contributes; the exact kernel's
short path too (no lane's alpha passes: the branch after the exp and the one after the vote taken).
No timing is implied (the 2026-12-05 warp-culling study in README.md is why).
"""
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NVCC = "/usr/local/cuda-13.0/bin/nvcc"


def _nvdisasm() -> str:
    """nvdisasm on the PATH, else the one triton (a torch dependency) ships."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        import triton
    except ImportError:
        return "nvdisasm"
    return str(Path(triton.__file__).parent / "backends/nvidia/bin/nvdisasm")


NVDISASM = _nvdisasm()
FLAGS = ["-O3", "--use_fast_math", "-lineinfo", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17"]

# Anchors: lines of the kernel's own .cu, found from its text (so that edits above them do not
# move them). Line info is too coarse to cut a loop by (ptxas tags loop control and hoisted values
# with the lines around them), so we take the innermost loop (a backward BRA) that holds most of
# the anchor's instructions, and count that loop's whole address range.
def source(name: str) -> list[str]:
    return (ROOT / "csrc" / name).read_text().splitlines()


def find(lines, text: str, after: int = 0) -> int:
    """1-based number of the first line from `after` on that contains `text`."""
    return next(n for n, line in enumerate(lines, 1) if n >= after and text in line)


def body(lines, text: str) -> range:
    """The lines inside the braces of the block whose first line contains `text`."""
    first, depth = find(lines, text), 0
    for n in range(first, len(lines) + 1):
        depth += lines[n - 1].count("{") - lines[n - 1].count("}")
        if depth == 0:
            return range(first + 1, n)
    raise ValueError(f"unbalanced braces after {text!r}")


EXACT, GEMM = source("backward.cu"), source("backward_gemm.cu")
EXACT_PAIR = body(EXACT, "for (int j = 0; j < count; ++j)")  # one Gaussian, the warp's pixels
GEMM_PAIR = body(GEMM, "for (int g = 0; g < GROUP; ++g)")    # one pair (ptxas unrolls it 2x)
_group = body(GEMM, "for (int j0 = 0;")                        # 16 Gaussians: mma, chain rule, atomics
GEMM_GROUP = range(find(GEMM, "if (mask == 0 ||", _group.start) + 1, _group.stop)
# What the GEMM form removes from the exact loop: the per-pair products feeding the sums (the
# colour weight, the mean/conic/opacity terms), the 9 warp sums and lane 0's addresses + atomics.
REDUCTION_SPANS = [(find(EXACT, "g[6 + ch] = weight"),) * 2,
                   (find(EXACT, "g[5] = "), find(EXACT, "g[4] = ")),
                   (find(EXACT, "if (!__any_sync(") + 1, find(EXACT, "grad_add<PROBE>(&args.grad_colors"))]
EXACT_REDUCTION = {n for a, b in REDUCTION_SPANS for n in range(a, b + 1)}

CLASSES = [  # (row, SASS opcodes); the rest is integer / move / uniform datapath
    ("FFMA/FMUL/FADD", {"FFMA", "FMUL", "FADD"}), ("FMNMX/FSEL", {"FMNMX", "FSEL"}),
    ("MUFU (ex2, rcp)", {"MUFU"}), ("SHFL", {"SHFL"}), ("VOTE", {"VOTE", "VOTEU"}),
    ("RED/ATOM global", {"RED", "REDG", "ATOM", "ATOMG"}), ("LDS", {"LDS"}), ("STS", {"STS"}),
    ("LDG/STG/LDC", {"LDG", "STG", "LDC", "ULDC"}), ("HMMA", {"HMMA"}), ("BAR/WARPSYNC", {"BAR", "WARPSYNC"}),
    ("BRA/BSSY/BSYNC", {"BRA", "BSSY", "BSYNC", "EXIT"}), ("ISETP/FSETP/PLOP3", {"ISETP", "FSETP", "PLOP3"}),
]
OTHER = "int/move/other"


def disassemble(src: str, text: str | None = None) -> dict:
    """{kernel name: [(addr, kernel-file line, opcode, text, predicated)]} plus each kernel's label
    addresses. text: compile this source instead of csrc/<src> (with csrc's headers)."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin, path = f"{tmp}/k.cubin", f"{ROOT}/csrc/{src}"
        if text is not None:
            path = f"{tmp}/{src}"
            Path(path).write_text(text)
        subprocess.run([NVCC, *FLAGS, f"-I{ROOT}/csrc", "-cubin", "-o", cubin, path], check=True)
        sass = subprocess.run([NVDISASM, "-gi", "-c", cubin], check=True, capture_output=True,
                              text=True).stdout
    kernels, name, line = {}, None, 0
    for raw in sass.splitlines():
        if m := re.match(r"\s*\.text\.(\S+):", raw):
            name, kernels[m.group(1)] = m.group(1), ([], {})
        elif m := re.search(r'//## File "([^"]+)", line (\d+)', raw):
            if m.group(1).endswith(src):  # -gi prints the inlined line, then the call site's: keep ours
                line = int(m.group(2))
        elif m := re.match(r"(\.L_x_\d+):", raw.strip()):
            kernels[name][1][m.group(1)] = None  # resolved to the next instruction's address
        elif m := re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(.*?);", raw):
            code, labels = kernels[name]
            addr = int(m.group(1), 16)
            for k in [k for k, v in labels.items() if v is None]:
                labels[k] = addr
            code.append((addr, line, m.group(3).split(".")[0], m.group(3) + m.group(4), bool(m.group(2))))
    return kernels


def loop_of(code, labels, anchor) -> tuple:
    """(start, end) of the innermost loop that holds most of the anchor lines' instructions."""
    exits = [a for a, _, op, *_ in code if op == "EXIT"]  # a backward BRA over an EXIT is no loop but the
    loops = [(t, a) for a, _, op, txt, _ in code if op == "BRA"  # return from BRA.DIV's out-of-line fallback
             and (m := re.search(r"\((\.L_x_\d+)\)", txt))
             and (t := labels[m.group(1)]) < a and not any(t < e < a for e in exits)]
    votes = collections.Counter()
    for a, line, *_ in code:
        inner = [lp for lp in loops if lp[0] <= a <= lp[1] and line in anchor]
        if inner:
            votes[min(inner, key=lambda lp: lp[1] - lp[0])] += 1
    return votes.most_common(1)[0][0]


def mix(instrs) -> collections.Counter:
    c = collections.Counter(next((row for row, ops in CLASSES if op in ops), OTHER) for _, _, op, *_ in instrs)
    c["total"] = len(instrs)
    return c


def walk(body, labels, take) -> int:
    """Warp instructions issued from the loop's first instruction around to its back edge,
    branching where take(instruction, instructions seen so far) says, else falling through."""
    at = {i[0]: n for n, i in enumerate(body)}
    n, seen = 0, []
    while n < len(body):
        ins = body[n]
        seen.append(ins)
        if ins[2] == "BRA" and (m := re.search(r"\((\.L_x_\d+)\)", ins[3])):
            target = labels[m.group(1)]
            if target <= body[0][0]:
                break  # the back edge: one step done
            if (not ins[4] or take(ins, seen)) and target in at:
                n = at[target]
                continue
        n += 1
    return len(seen)


def short_step(ins, seen) -> bool:
    """No lane takes the entry: the first branch after the exp (alpha below 1/255) and the one
    right after the warp's vote are taken."""
    after_exp = [i for i in seen if ".EX2" in i[3]]
    if seen[-2][2] in ("VOTE", "VOTEU"):
        return True
    return bool(after_exp) and not any(i[2] == "BRA" for i in seen[seen.index(after_exp[-1]):-1])


def exact_kernel() -> tuple:
    """(code, labels) of backward.cu's kernel without probes, absgrad or depth."""
    kernels = disassemble("backward.cu")
    return next(v for k, v in kernels.items() if "ILi0ELb0ELb0E" in k)  # <PROBE, ABS, DEPTH>


def same_as(rev: str) -> int:
    """--same-as REV: backward.cu's kernels at git revision REV against this tree's, instruction by
    instruction (addresses and line numbers aside). 0 when every one matches."""
    old_text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:csrc/backward.cu"], check=True,
                              capture_output=True, text=True).stdout
    def key(name):
        return name[name.index("blend_backward"):]
    old = {key(k): [i[2:] for i in v[0]] for k, v in disassemble("backward.cu", old_text).items()}
    new = {key(k): [i[2:] for i in v[0]] for k, v in disassemble("backward.cu").items()}
    bad = 0
    for name, code in old.items():
        same = new.get(name) == code
        bad += not same
        print(f"{name[:60]}: {'identical' if same else 'DIFFERS'} ({len(code)} instructions)")
    return 1 if bad or not old else 0


def main():
    missing = [tool for tool in (NVCC, NVDISASM) if not Path(tool).exists()]
    if missing:
        sys.exit(f"sass_mix.py: {', '.join(missing)} not found; set NVCC / NVDISASM at the top of this file "
                 "to a CUDA 12+ nvcc and its nvdisasm")
    if sys.argv[1:2] == ["--same-as"] and len(sys.argv) == 3:
        return same_as(sys.argv[2])
    cols, spans = {}, []  # column -> Counter of classes
    code, labels = exact_kernel()
    lo, hi = loop_of(code, labels, EXACT_PAIR)
    body = [i for i in code if lo <= i[0] <= hi]
    assert sum(".EX2" in i[3] for i in body) == 1, "the exact loop should hold one pair"
    cols["exact"], cols["exact:red"] = mix(body), mix([i for i in body if i[1] in EXACT_REDUCTION])
    short = walk(body, labels, short_step)
    spans.append(f"exact pair {lo:#06x}-{hi:#06x}")
    for name, (code, labels) in sorted(disassemble("backward_gemm.cu").items()):
        if "ELi0ELb0E" not in name:
            continue  # a probe's or depth's kernel: template <bool SPLIT, int PROBE, bool DEPTH>
        tag = "fp32" if "ILb1E" in name else "tf32"  # gemm_fp32 / gemm_tf32
        (plo, phi), (glo, ghi) = loop_of(code, labels, GEMM_PAIR), loop_of(code, labels, GEMM_GROUP)
        pair = [i for i in code if plo <= i[0] <= phi]
        unroll = sum(".EX2" in i[3] for i in pair)  # one exp per pair: how many pairs the body holds
        cols[f"{tag} pair"] = mix(pair)
        cols[f"{tag} group"] = mix([i for i in code if glo <= i[0] <= ghi and not plo <= i[0] <= phi])
        cols[f"{tag} /pair"] = {k: cols[f"{tag} pair"][k] / unroll + cols[f"{tag} group"][k] / 16
                                for k in cols[f"{tag} pair"] | cols[f"{tag} group"]}
        spans.append(f"{tag} pair {plo:#06x}-{phi:#06x} (x{unroll} unrolled), group {glo:#06x}-{ghi:#06x}")
    red_lines = ",".join(f"{a}-{b}" if a < b else f"{a}" for a, b in REDUCTION_SPANS)
    print(f"warp instructions, full path. exact: one Gaussian x 32 pixels; exact:red: lines {red_lines}.\n"
          "gemm: 'pair' = the g-loop body as compiled, 'group' = rest of the j0 loop (16 Gaussians), "
          "'/pair' = pair/unroll + group/16.")
    print(f"{'class':19s}" + "".join(f"{c:>11s}" for c in cols))
    for r in [r for r, _ in CLASSES] + [OTHER, "total"]:
        print(f"{r:19s}" + "".join(f"{cols[c].get(r, 0):>11.4g}" for c in cols))
    print("loops (SASS addresses, inclusive): " + "; ".join(spans))
    ex, red = cols["exact"]["total"], cols["exact:red"]["total"]
    print(f"exact: reduction = {red} of {ex} ({red / ex:.0%}); "
          f"issue-bound limit if it cost nothing: {ex / (ex - red):.2f}x")
    for tag in ("tf32", "fp32"):
        g = cols[f"{tag} /pair"]["total"]
        print(f"gemm_{tag}: {g:.1f} per pair (groups of 16 full); issue-bound speed-up {ex / g:.2f}x")
    print(f"exact: a warp's step over an entry none of its pixels takes (the short path): {short}")


if __name__ == "__main__":
    sys.exit(main())
