#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The module's view of the ABI (rust/uapi.rs) must match the C header.

Compiles a C program that prints, from include/uapi/linux/msrbatch.h, the
size of each struct, the offset of each of its fields, and the value of each
constant the module mirrors; for -m64 and -m32. Compares all of it with the
assert_layout! lines and constants of rust/uapi.rs, and checks that those
lines name every field of the C structs.
"""
import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
header = open(os.path.join(TOP, "include/uapi/linux/msrbatch.h")).read()
rust = open(os.path.join(TOP, "rust/uapi.rs")).read()
STRUCTS = {"Op": "msrbatch_op", "Batch": "msrbatch_batch", "Info": "msrbatch_info",
           "Prepare": "msrbatch_prepare", "OpResult": "msrbatch_result",
           "SampleReq": "msrbatch_sample_req", "RingPage": "msrbatch_ring"}
CONSTS = {"ABI_VERSION": "MSRBATCH_ABI_VERSION", "MAX_OPS": "MSRBATCH_MAX_OPS",
          "MAX_DELAY_NS": "MSRBATCH_MAX_DELAY_NS", "MAX_CPU_DELAY_NS": "MSRBATCH_MAX_CPU_DELAY_NS",
          "F_STOP_ON_ERROR": "MSRBATCH_F_STOP_ON_ERROR", "F_ALL": "MSRBATCH_F_ALL",
          "NO_INDEX": "MSRBATCH_NO_INDEX",
          "SAMPLE_MIN_PERIOD_NS": "MSRBATCH_SAMPLE_MIN_PERIOD_NS",
          "SAMPLE_MAX_PERIOD_NS": "MSRBATCH_SAMPLE_MAX_PERIOD_NS",
          "SAMPLE_MAX_RING_PAGES": "MSRBATCH_SAMPLE_MAX_RING_PAGES",
          "MAX_SAMPLERS": "MSRBATCH_MAX_SAMPLERS", "RING_VERSION": "MSRBATCH_RING_VERSION",
          "MAX_SAMPLERS_CONFINED": "MSRBATCH_MAX_SAMPLERS_CONFINED",
          "SAMPLE_MAX_OPS_PER_SEC": "MSRBATCH_SAMPLE_MAX_OPS_PER_SEC",
          "RING_STOPPED": "MSRBATCH_RING_STOPPED"}
# rust/uapi.rs rec_layout: offsets and sizes of the ring's records.
RECS = {"HEADER": "sizeof(struct msrbatch_record)",
        "SAMPLE_SEQ": "offsetof(struct msrbatch_rec_sample, seq)",
        "SAMPLE_TSC": "offsetof(struct msrbatch_rec_sample, tsc)",
        "SAMPLE_FAILED": "offsetof(struct msrbatch_rec_sample, failed)",
        "SAMPLE_VAL": "offsetof(struct msrbatch_rec_sample, val)",
        "LOST_LOST": "offsetof(struct msrbatch_rec_lost, lost)",
        "LOST_SIZE": "sizeof(struct msrbatch_rec_lost)",
        "CPU_SEQ": "offsetof(struct msrbatch_rec_cpu, seq)",
        "CPU_TSC": "offsetof(struct msrbatch_rec_cpu, tsc)",
        "CPU_SIZE": "sizeof(struct msrbatch_rec_cpu)"}
RECTYPES = ["PAD", "SAMPLE", "LOST", "ONLINE", "OFFLINE"]
OPS = ["RDMSR", "WRMSR", "RMWMSR", "RDPMC", "RDTSC", "RDTSCP", "CPUID", "DELAY", "RDCR4", "MAX"]

fails = []
# Rust side: assert_layout!(Name, size, (field, off), ...)
rust_layout = {}
for m in re.finditer(r"assert_layout!\((\w+),\s*(\d+),(.*?)\);", rust, re.S):
    fields = re.findall(r"\((\w+),\s*(\d+)\)", m.group(3))
    rust_layout[m.group(1)] = (int(m.group(2)), {f: int(o) for f, o in fields})
rust_consts = {}
for k, expr in re.findall(r"pub\(crate\) const (\w+): u(?:32|64) = ([^;]+);", rust):
    expr = re.sub(r"(?<=\d)_(?=\d)", "", expr).replace("u32::MAX", str(0xFFFFFFFF))
    rust_consts[k] = eval(expr, {"__builtins__": {}}, dict(rust_consts))
rust_ops = {k: int(v) for k, v in re.findall(r"pub\(crate\) const (\w+): u16 = (\d+);", rust)}
rust_ops["MAX"] = rust_ops.get(re.search(r"const MAX: u16 = (\w+);", rust).group(1), -1)
rec_mod = re.search(r"mod rec_layout \{(.*?)\n\}", rust, re.S).group(1)
rust_recs = {k: int(v) for k, v in re.findall(r"pub\(crate\) const (\w+): usize = (\d+);", rec_mod)}
type_mod = re.search(r"mod rec \{(.*?)\n\}", rust, re.S).group(1)
rust_rectypes = {k: int(v) for k, v in re.findall(r"pub\(crate\) const (\w+): u32 = (\d+);", type_mod)}

# C side: every field of each struct.
c_fields = {}
for rname, cname in STRUCTS.items():
    body = re.search(r"struct %s \{(.*?)\};" % cname, header, re.S).group(1)
    c_fields[rname] = re.findall(r"(\w+)(?:\[\d+\])?;", body)
    missing = set(c_fields[rname]) - set(rust_layout.get(rname, (0, {}))[1])
    if missing:
        fails.append(f"rust/uapi.rs assert_layout!({rname}) misses fields {sorted(missing)}")

prog = ["#include <stdio.h>", "#include <stddef.h>", "#include <linux/msrbatch.h>", "int main(void) {"]
for rname, cname in STRUCTS.items():
    prog.append(f'printf("{rname} size %zu\\n", sizeof(struct {cname}));')
    for f in c_fields[rname]:
        prog.append(f'printf("{rname}.{f} %zu\\n", offsetof(struct {cname}, {f}));')
for rname, cname in CONSTS.items():
    prog.append(f'printf("const {rname} %llu\\n", (unsigned long long){cname});')
for op in OPS:
    prog.append(f'printf("op {op} %llu\\n", (unsigned long long)MSRBATCH_OP_{op});')
for k, expr in RECS.items():
    prog.append(f'printf("rec {k} %zu\\n", {expr});')
for t in RECTYPES:
    prog.append(f'printf("rectype {t} %llu\\n", (unsigned long long)MSRBATCH_REC_{t});')
prog.append("return 0; }")

with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "layout.c")
    open(src, "w").write("\n".join(prog) + "\n")
    for bits in ("-m64", "-m32"):
        exe = os.path.join(d, "layout" + bits)
        subprocess.run(["gcc", bits, "-I", os.path.join(TOP, "include/uapi"), "-o", exe, src], check=True)
        for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
            key, val = line.rsplit(" ", 1)
            val = int(val)
            if key.startswith("const "):
                want = rust_consts.get(key[6:])
            elif key.startswith("rec "):
                want = rust_recs.get(key[4:])
            elif key.startswith("rectype "):
                want = rust_rectypes.get(key[8:])
            elif key.startswith("op "):
                want = rust_ops.get(key[3:])
            elif key.endswith(" size"):
                want = rust_layout.get(key[:-5], (None,))[0]
            else:
                s, f = key.split(".")
                want = rust_layout.get(s, (0, {}))[1].get(f)
            if want != val:
                fails.append(f"{bits}: C says {key} = {val}, rust/uapi.rs says {want}")

for f in fails:
    print("not ok - " + f)
if fails:
    sys.exit(1)
n = sum(len(v) for v in c_fields.values())
print(f"ok - rust/uapi.rs matches the C header for -m64 and -m32: {len(STRUCTS)} sizes, {n} offsets, "
      f"{len(CONSTS)} constants, {len(OPS)} op codes, {len(RECS)} record offsets, "
      f"{len(RECTYPES)} record types")
