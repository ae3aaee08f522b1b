#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Draw ns/op (or guest instructions/op, from --icount) against N (log-log)
from msrbatch-bench JSON as an SVG."""
import json
import math
import sys

SERIES = [("msrbatch_rdmsr", "msrbatch RDMSR batch", "#1f77b4"),
          ("msrbatch_prepared_rdmsr", "msrbatch prepared RDMSR rerun", "#9467bd"),
          ("intree_pread", "in-tree /dev/cpu/0/msr pread", "#d62728"),
          ("msrbatch_rdtsc", "msrbatch RDTSC batch", "#2ca02c"),
          ("user_rdtsc", "user-space RDTSC loop", "#7f7f7f")]


def main():
    data = json.load(open(sys.argv[1]))
    rows = data["rows"]
    unit = "guest instructions" if data.get("icount") else "ns"
    W, H, L, R, T, B = 720, 440, 70, 230, 40, 50
    xs = sorted({r["n"] for r in rows})
    ys = [r["ns_per_op"] for r in rows if r["ns_per_op"] > 0]
    x0, x1 = math.log10(min(xs)), math.log10(max(xs))
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    if y1 == y0:
        y1 += 1
    px = lambda n: L + (math.log10(n) - x0) / (x1 - x0) * (W - L - R)
    py = lambda v: H - B - (math.log10(v) - y0) / (y1 - y0) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L}" y="22" font-size="14">msrbatch vs in-tree msr driver: {unit} per op against batch size N'
           f'{" (emulated: compare ratios)" if data.get("hypervisor") and not data.get("icount") else ""}</text>']
    for e in range(y0, y1 + 1):
        y = py(10 ** e)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">1e{e}</text>')
    for n in xs:
        x = px(n)
        out.append(f'<line x1="{x:.1f}" y1="{T}" x2="{x:.1f}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{H - B + 16}" text-anchor="middle">{n}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">ops per batch (N)</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" '
               f'text-anchor="middle">{unit} per op</text>')
    for i, (key, label, color) in enumerate(SERIES):
        pts = sorted((r["n"], r["ns_per_op"]) for r in rows if r["series"] == key and r["ns_per_op"] > 0)
        if not pts:
            continue
        path = " ".join(f"{px(n):.1f},{py(v):.1f}" for n, v in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for n, v in pts:
            out.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="3" fill="{color}"/>')
        ly = T + 20 + 20 * i
        out.append(f'<line x1="{W - R + 15}" y1="{ly}" x2="{W - R + 35}" y2="{ly}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{W - R + 40}" y="{ly + 4}">{label}</text>')
    out.append("</svg>")
    open(sys.argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
