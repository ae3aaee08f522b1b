#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The tables of tests/harness/icount-profile.sh.

report.py WINDOWS OUTPUT_LOG VMLINUX MODULE_KO USER_BIN BUDGETS [TOP] [INSNS] [ANNOTATE] [FLOOR_KO]

WINDOWS: the plugin's file (per window: instruction address, executions).
OUTPUT_LOG: the guest's output: `icount_profile: window K: SHAPE: ...`
lines, the module's section addresses (`SECTION NAME ADDR`) and the
kernel's _stext from /proc/kallsyms (`KALLSYMS ADDR _stext`), and those
of the floor driver (tests/guest/floor, `FSECTION NAME ADDR`) when loaded.
Each window's instructions go to the function that contains each one
(kernel: VMLINUX's symbols, moved by KASLR's offset if any; module: the
.ko's symbols at the guest's section addresses; user space: USER_BIN's),
per call (the window's count over its N calls), sorted.
TOP: rows per table (default 25); INSNS: that many hottest instructions
too (default 0); ANNOTATE: a regular expression: the disassembly of each
function it matches that ran, each instruction with its executions per call.
FLOOR_KO: the floor driver's .ko, whose functions are named `[floor] ...`.
"""
import bisect
import re
import subprocess
import sys

READELF = "llvm-readelf-22"


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def elf_functions(path, section_base=None):
    """(address, name) of PATH's functions; section_base maps a section name
    to its load address (a module), else the symbols' own values."""
    sections = {}
    for line in run(READELF, "-SW", path).splitlines():
        m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)", line)
        if m:
            sections[m.group(1)] = m.group(2)
    out = []
    for line in run(READELF, "-sW", "--demangle", path).splitlines():
        f = line.split(None, 7)
        if len(f) < 8 or f[3] not in ("FUNC", "NOTYPE") or not f[6].isdigit():
            continue
        sec = sections.get(f[6], "")
        if not sec.startswith(".text") and not sec.startswith(".noinstr") and \
                not sec.startswith(".entry") and not sec.startswith(".init.text"):
            continue
        if f[3] == "NOTYPE" and (f[7].startswith(".L") or f[7].startswith("$")):
            continue
        addr = int(f[1], 16)
        if section_base is not None:
            if sec not in section_base:
                continue
            addr += section_base[sec]
            SECTION_OF[addr] = (sec, int(f[1], 16))
        out.append((addr, f[7]))
    return out


SECTION_OF = {}  # module function address: (section, offset in it)


def disassemble(elf, lo, hi, section=None):
    """{address: text} of ELF's instructions in [lo, hi) (section-relative
    in a module's SECTION)."""
    cmd = ["objdump", "-dr", "--no-show-raw-insn", "-C", f"--start-address={lo:#x}", f"--stop-address={hi:#x}"]
    if section:
        cmd += ["-j", section]
    lines, last = {}, None
    for line in run(*cmd, elf).splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
        if m and not re.match(r"\s*[0-9a-f]+:\s+R_X86_64", line):
            last = int(m.group(1), 16)
            lines[last] = m.group(2).strip()
        elif last is not None and "R_X86_64" in line:
            lines[last] += "  <" + line.split()[-1] + ">"
    return lines


class Symbols:
    def __init__(self, entries):
        # Prefer a function over a __pfx_ padding label or a NOTYPE alias at
        # the same address: keep the first non-__pfx_ name.
        # Identical functions folded into one (tiny Rust ones often are)
        # share an address: all their names, " = " between.
        best = {}
        for a, n in entries:
            if n.startswith("__pfx_") or n.startswith("__cfi_"):
                best.setdefault(a, [])
                continue
            names = best.setdefault(a, [])
            if n not in names:
                names.append(n)
        self.addrs = sorted(best)
        self.names = [" = ".join(best[a][:3]) + (" = ..." if len(best[a]) > 3 else "") or "?"
                      for a in self.addrs]

    def find(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0:
            return None, 0
        return self.names[i], addr - self.addrs[i]

    def bounds(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        return self.addrs[i], self.addrs[i + 1] if i + 1 < len(self.addrs) else self.addrs[i] + 4096


def shorten(name):
    # Rust's generic noise: keep the path, drop the crate hashes.
    name = re.sub(r"::h[0-9a-f]{16}$", "", name)
    return name


def main():
    windows_path, log_path, vmlinux, module, user_bin, budgets_path = sys.argv[1:7]
    top = int(sys.argv[7]) if len(sys.argv) > 7 else 25
    ninsns = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    annotate = re.compile(sys.argv[9]) if len(sys.argv) > 9 and sys.argv[9] else None
    floor_ko = sys.argv[10] if len(sys.argv) > 10 and sys.argv[10] else None

    shapes, sections, fsections, stext = {}, {}, {}, None
    for line in open(log_path, errors="replace"):
        line = line.strip()
        m = re.match(r"icount_profile: window (\d+): (\S+): (\d+) calls, (\d+) failed, rdtsc min (\d+)", line)
        if m:
            shapes[int(m.group(1))] = (m.group(2), int(m.group(3)), int(m.group(4)), int(m.group(5)))
        m = re.match(r"SECTION (\S+) 0x([0-9a-f]+)$", line)
        if m:
            sections[m.group(1)] = int(m.group(2), 16)
        m = re.match(r"FSECTION (\S+) 0x([0-9a-f]+)$", line)
        if m:
            fsections[m.group(1)] = int(m.group(2), 16)
        m = re.match(r"KALLSYMS ([0-9a-f]+) \S+ _stext$", line)
        if m:
            stext = int(m.group(1), 16)

    kernel = elf_functions(vmlinux)
    koff = 0
    if stext:
        base = [a for a, n in kernel if n == "_stext"]
        if base:
            koff = stext - base[0]
    ksyms = Symbols([(a + koff, n) for a, n in kernel])
    msyms = Symbols(elf_functions(module, sections)) if sections else None
    usyms = Symbols(elf_functions(user_bin))
    mod_lo = min(sections.get(s, 1 << 64) for s in sections if s.startswith(".text")) if sections else 0
    fsyms = Symbols(elf_functions(floor_ko, fsections)) if floor_ko and fsections else None
    floor_lo = min(fsections.get(s, 1 << 64) for s in fsections if s.startswith(".text")) if fsections else 0

    budgets = {}
    for line in open(budgets_path):
        f = line.split("#")[0].split()
        if len(f) == 2:
            budgets[f[0]] = float(f[1])

    counts, cur = {}, None
    for line in open(windows_path):
        f = line.split()
        if f[0] == "window":
            cur = int(f[1])
            counts[cur] = {}
        elif f[0] == "end":
            cur = None
        elif cur is not None:
            counts[cur][int(f[0], 16)] = int(f[1])

    def where(addr):
        if addr < 1 << 47:
            n, off = usyms.find(addr)
            return "[user] " + (n or "?"), off
        # The module loaded last (the higher address) first: the other's
        # last function would seem to run on into it.
        for lo, syms, name in sorted(((mod_lo, msyms, "[msrbatch] "), (floor_lo, fsyms, "[floor] ")),
                                     key=lambda m: -m[0]):
            if syms and addr >= lo:
                n, off = syms.find(addr)
                if n and off < 1 << 20:
                    return name + shorten(n), off
        n, off = ksyms.find(addr)
        return (n or "?"), off

    print(f"# kernel symbols: {vmlinux} (KASLR offset {koff:#x}); module: {module} at "
          + ", ".join(f"{s} {a:#x}" for s, a in sorted(sections.items()) if s.startswith(".text")))
    for w in sorted(counts):
        shape, n, failed, rdtsc = shapes.get(w, (f"window{w}", 1, 0, 0))
        per_fn = {}
        total = 0
        for addr, c in counts[w].items():
            fn, _ = where(addr)
            per_fn[fn] = per_fn.get(fn, 0) + c
            total += c
        print()
        print(f"== {shape}: {n} calls{', %d FAILED' % failed if failed else ''}")
        # The loop of icount_profile around the calls is not the call's.
        loop = sum(per_fn.pop(fn, 0) for fn in ("[user] run", "[user] main")) if w in shapes else 0
        total -= loop
        user = sum(c for fn, c in per_fn.items() if fn.startswith("[user]"))
        print(f"per call {total / n:.1f} guest instructions: kernel {(total - user) / n:.1f}, user space "
              f"{user / n:.1f} (libc's wrapper; the loop's own {loop / n:.1f} left out)")
        # The kernel's share split three ways: a floor of a path is at least
        # the kernel's own instructions on it (issue #26's floor rule).
        own = sum(c for fn, c in per_fn.items() if fn.startswith("[msrbatch]") or fn.startswith("[floor]"))
        crate = sum(c for fn, c in per_fn.items() if fn.startswith("rust_helper_") or ("kernel::" in fn and not fn.startswith("[")))
        rest = total - user - own - crate
        print(f"  of the kernel's: the module {own / n:.1f}, the kernel crate and its C helpers for Rust {crate / n:.1f}, "
              f"the rest {rest / n:.1f} (entry, VFS, cross-calls, idle, and what the module calls)")
        if rdtsc:
            print(f"  icount_bench's way in the same boot (RDTSC, cheapest of 31 calls): {rdtsc} "
                  f"(this profile {100 * (total / n - rdtsc) / rdtsc:+.1f} %)")
        key = "c_" + shape
        if key in budgets:
            b = budgets[key]
            print(f"  tests/harness/icount-budget.txt {key}: {b:.0f} (this profile {100 * (total / n - b) / b:+.1f} %)")
        print(f"{'instr/call':>10} {'%':>6} {'cum%':>6}  function")
        cum = 0
        rows = sorted(per_fn.items(), key=lambda kv: -kv[1])
        for i, (fn, c) in enumerate(rows):
            cum += c
            if i < top:
                print(f"{c / n:10.1f} {100 * c / total:6.1f} {100 * cum / total:6.1f}  {fn}")
        if len(rows) > top:
            rest = sum(c for _, c in rows[top:])
            print(f"{rest / n:10.1f} {100 * rest / total:6.1f} {100.0:6.1f}  ({len(rows) - top} more functions)")
        if ninsns:
            print(f"-- hottest instructions ({shape})")
            for addr, c in sorted(counts[w].items(), key=lambda kv: -kv[1])[:ninsns]:
                fn, off = where(addr)
                print(f"{c / n:10.2f}  {addr:#x} {fn}+{off:#x}")
        if annotate:
            done = set()
            for fn, _ in rows:
                if fn in done or not annotate.search(fn) or fn.startswith("[user]"):
                    continue
                done.add(fn)
                addr = next(a for a in counts[w] if where(a)[0] == fn)
                if fn.startswith("[msrbatch]") or fn.startswith("[floor]"):
                    syms, ko = (msyms, module) if fn.startswith("[msrbatch]") else (fsyms, floor_ko)
                    lo, hi = syms.bounds(addr)
                    sec, off = SECTION_OF[lo]
                    text = {lo + a - off: t for a, t in disassemble(ko, off, off + hi - lo, sec).items()}
                else:
                    lo, hi = ksyms.bounds(addr)
                    text = {a + koff: t for a, t in disassemble(vmlinux, lo - koff, hi - koff).items()}
                print(f"-- {fn} ({shape}): executions per call, instruction")
                for a in sorted(text):
                    c = counts[w].get(a, 0)
                    print(f"{c / n:10.2f}  {a - lo:#6x}  {text[a]}")


main()
