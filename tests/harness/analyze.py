#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Judge a guest run from its console log.

Reads the kernel console (ttyS0), finds the harness markers written by the
guest's /init, any kernel splat (panic, oops, BUG, WARNING, KASAN, UBSAN,
lockdep, KFENCE, RCU stall), and the KTAP output of KUnit suites.
Prints a summary; exits 0 when the run is clean, 1 otherwise. The guest
command's own exit status is printed as "guest-exit=N" on the last line.
"""
import argparse
import re
import sys

TS = re.compile(r"^\[\s*\d+\.\d+\]\s?")
SPLATS = [
    re.compile(p) for p in (
        r"Kernel panic",
        r"\bOops\b",
        r"\bBUG:",
        r"kernel BUG at",
        r"WARNING:",
        r"general protection fault",
        r"KASAN:",
        r"UBSAN:",
        r"KFENCE:",
        r"possible (recursive|circular) locking",
        r"inconsistent lock state",
        r"INFO: (task .* blocked|rcu_.* self-detected stall|rcu .*stall)",
        r"rcu: INFO: rcu_\w+ (self-)?detected stall",
        r"Call Trace:",
        r"rust_panic|panicked at",
        r"list_(add|del) corruption",
    )
]
RESULT = re.compile(r"^(\s*)(not ok|ok) (\d+)(?: (?:- )?([^#]*?))?\s*(#.*)?$")


def parse_ktap(lines):
    """Return [(suite, passed, failed, skipped, ok)] for each top-level suite."""
    suites, current, subtest = [], None, None
    for line in lines:
        m = re.match(r"^\s*# Subtest: (\S+)", line)
        if m and line.startswith("    ") and current is not None:
            subtest = m.group(1)
            continue
        if m:
            current = [m.group(1), 0, 0, 0]
            continue
        m = RESULT.match(line)
        if not m or current is None:
            continue
        indent, verdict, _, name, directive = m.groups()
        skip = bool(directive and "SKIP" in directive.upper())
        if len(indent) == 4:  # a test case of the current suite
            if skip:
                current[3] += 1
            elif verdict == "ok":
                current[1] += 1
            else:
                current[2] += 1
        elif len(indent) == 0 and name and name.strip() == current[0]:
            suites.append((*current, verdict == "ok"))
            current = None
    return suites


def memcg_oom_reports(lines):
    """Indices of the lines of OOM-killer reports that a memory cgroup's
    limit caused (from "... invoked oom-killer:" to its
    "oom-kill:constraint=CONSTRAINT_MEMCG" line): the cgroup doing its job
    (memcg_test runs into it on purpose), not a kernel defect, though the
    report has a "Call Trace:". A global OOM's report stays a splat."""
    excused, start = set(), None
    for i, l in enumerate(lines):
        if "invoked oom-killer:" in l:
            start = i
        elif start is not None and "oom-kill:constraint=" in l:
            if "constraint=CONSTRAINT_MEMCG" in l:
                excused.update(range(start, i + 1))
            start = None
    return excused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("console")
    ap.add_argument("--timed-out", action="store_true")
    ap.add_argument("--expect-suite", action="append", default=[],
                    help="a KUnit suite that must have run (repeatable)")
    ap.add_argument("--allow-unload-failure", action="store_true")
    args = ap.parse_args()

    with open(args.console, errors="replace") as f:
        lines = [TS.sub("", l.rstrip("\r\n")) for l in f]

    problems = []
    excused = memcg_oom_reports(lines)
    splat_lines = [i for i, l in enumerate(lines)
                   if i not in excused and any(p.search(l) for p in SPLATS)]
    if splat_lines:
        first = splat_lines[0]
        problems.append("kernel splat: " + lines[first].strip())
        print("---- console around the first splat ----")
        for l in lines[max(0, first - 5):first + 40]:
            print("  " + l)
        print("----")

    exits = [re.search(r"msrbatch-harness: exit=(\d+)", l) for l in lines]
    exits = [int(m.group(1)) for m in exits if m]
    if args.timed_out:
        problems.append("guest timed out")
    if not exits:
        problems.append("guest did not report an exit status (crash, panic or timeout)")
    if any("msrbatch-harness: insmod failed" in l for l in lines):
        problems.append("insmod msrbatch.ko failed")
    if any("msrbatch-harness: unload=failed" in l for l in lines) and not args.allow_unload_failure:
        problems.append("rmmod msrbatch failed after the command")

    suites = parse_ktap(lines)
    if suites or args.expect_suite:
        p = sum(s[1] for s in suites)
        fl = sum(s[2] for s in suites)
        sk = sum(s[3] for s in suites)
        print(f"kunit: {len(suites)} suites, {p} passed, {fl} failed, {sk} skipped")
        for name, sp, sf, ss, ok in suites:
            print(f"kunit:   {'ok    ' if ok else 'FAILED'} {name}: {sp} passed, {sf} failed, {ss} skipped")
            if not ok:
                problems.append(f"KUnit suite {name} failed")
        for name in args.expect_suite:
            if name not in [s[0] for s in suites]:
                problems.append(f"KUnit suite {name} did not run")

    for p in problems:
        print("harness: FAIL: " + p)
    print(f"guest-exit={exits[-1] if exits else 'none'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
