#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""gen-msr-safe-lists.py DIR: writes allowlists in the file format LLNL
msr-safe ships its per-CPU-model lists in (allowlists/al_06_55 and the
others), for tests/guest/msr_safe_lists_test.c: a block of '#' comment lines,
a '# MSR # Write Mask # Comment' column line, then one line per MSR, written
'# 0x%08X 0x%016X # "NAME (source)"', every entry commented out as shipped.
No msr-safe text is copied: the MSRs are the kernel's (Linux's
arch/x86/include/asm/msr-index.h, through the generated
userspace/msrbatch/src/msr_index.rs), the comments this script's own.

Written, all "06_55-shaped" (same header shape, column layout, upper-case
hexadecimal, quoted trailing comments):
  al_06_55_shipped      every entry commented out, as msr-safe ships it
  al_06_55_site         as a site edits it: some entries uncommented (one with
                        its leading blank kept), some write masks changed
                        (one in lower case), blank lines added
  al_06_55_site_crlf    the same with CRLF line ends
  al_06_55_site_noeol   the same, its last line uncommented, no final newline
"""
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INDEX = os.path.join(TOP, "userspace/msrbatch/src/msr_index.rs")


def kernel_msrs():
    """(index, name) of each MSR msr-index.h names, one name per index
    (the first: aliases follow what they alias), sorted by index."""
    seen = {}
    with open(INDEX) as f:
        for m in re.finditer(r'\("(MSR_\w+)", (0x[0-9a-f]+)\)', f.read()):
            idx = int(m.group(2), 16)
            seen.setdefault(idx, m.group(1))
    return sorted(seen.items())


HEADER = [
    "# Model-specific registers of a family 6 model 0x55 processor, one per line,",
    "# every one commented out. This file has the layout of msr-safe's shipped",
    "# lists; its MSRs and names come from Linux's msr-index.h.",
    "# To let jobs read an MSR, remove the '# ' in front of its line.",
    "# To let them write bits of it, set those bits in its write mask.",
    "# Then write the whole file to /dev/cpu/msr_allowlist in one write.",
    "#",
    "# MSR        # Write Mask       # Comment",
]

# A site's edits: (index in the list, write mask or None to keep 0).
EDIT_EVERY = 9
MASKS = [0x0000000000000000, 0x00000000FFFF0000, 0x000000000000FFFF, 0xFFFFFFFFFFFFFFFF]


def line(idx, name, mask=0, commented=True):
    body = f'0x{idx:08X} 0x{mask:016X} # "{name} (msr-index.h)"'
    return "# " + body if commented else body


def shipped(msrs):
    return HEADER + [line(i, n) for i, n in msrs]


def site(msrs):
    out = list(HEADER)
    k = 0
    for j, (i, n) in enumerate(msrs):
        if j % EDIT_EVERY != 4:
            out.append(line(i, n))
            continue
        mask = MASKS[k % len(MASKS)]
        text = line(i, n, mask, commented=False)
        if k % 5 == 1:
            text = " " + text  # only the '#' removed
        if k % 7 == 3:
            text = text.replace(f"0x{mask:016X}", f"0x{mask:016x}")
        if k % 6 == 2:
            out.append("")
        out.append(text)
        k += 1
    return out


def write(path, lines, eol="\n", final=True):
    text = eol.join(lines) + (eol if final else "")
    assert len(text) <= 128 * 1024, f"{path}: {len(text)} bytes, over msr-safe's 128 KiB"
    with open(path, "w", newline="") as f:
        f.write(text)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    msrs = kernel_msrs()
    assert len(msrs) > 300, f"only {len(msrs)} MSRs in {INDEX}"
    # The size of a shipped list: a few hundred MSRs, about 30 KiB.
    msrs = msrs[:340]
    write(os.path.join(out, "al_06_55_shipped"), shipped(msrs))
    s = site(msrs)
    write(os.path.join(out, "al_06_55_site"), s)
    write(os.path.join(out, "al_06_55_site_crlf"), s, eol="\r\n")
    last_i, last_n = msrs[-1]
    noeol = s[:-1] + [line(last_i, last_n, 0x00000000000000FF, commented=False)]
    write(os.path.join(out, "al_06_55_site_noeol"), noeol, final=False)


if __name__ == "__main__":
    main()
