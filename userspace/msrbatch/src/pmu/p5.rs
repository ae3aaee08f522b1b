// SPDX-License-Identifier: GPL-2.0
//! The original Pentium's (P5) counters, SDM Vol. 3B section 18.26
//! ("Performance Monitoring (Pentium Processors)"): two 40-bit counters,
//! CTR0 (MSR 12H) and CTR1 (13H), controlled by one 32-bit MSR, CESR (11H).
//! Each counter has a half of CESR: a 6-bit event select (ES0 bits 5:0, ES1
//! bits 21:16), a 3-bit counter control (CC0 bits 8:6, CC1 bits 24:22: bit 0
//! counts at CPL 0-2, bit 1 at CPL 3, bit 2 counts clocks (duration) instead
//! of events) and a pin control flag (PC0 bit 9, PC1 bit 25: the PMx pin
//! signals an overflow instead of each increment). The events are the SDM's
//! Table A-19 (19-38 in later editions); the Pentium with MMX technology adds
//! events 2AH-3BH, most of which count something different on each counter,
//! and RDPMC of counters 0 and 1.

use crate::{Error, Result};
use std::fmt::Write as _;

/// A CESR half's event select (ES), bits 5:0.
pub const CESR_ES: u64 = 0x3f;
/// CC bit 0: count while CPL is 0, 1 or 2.
pub const CESR_CC_OS: u64 = 1 << 6;
/// CC bit 1: count while CPL is 3.
pub const CESR_CC_USR: u64 = 1 << 7;
/// CC bit 2: count clocks (the event's duration) instead of events.
pub const CESR_CC_CLOCKS: u64 = 1 << 8;
/// The counter control field (CC), bits 8:6 of a half.
pub const CESR_CC: u64 = 7 << 6;
/// Pin control (PC): the PMx/BPx pin signals an overflow (1) or each
/// increment (0).
pub const CESR_PC: u64 = 1 << 9;
/// A half: ES, CC and PC.
pub const CESR_HALF: u64 = 0x3ff;
/// The CESR bits that are fields (both halves); the others are reserved.
pub const CESR_FIELDS: u64 = CESR_HALF | CESR_HALF << 16;
/// The width of CTR0 and CTR1.
pub const P5_WIDTH: u32 = 40;

/// Where counter `counter`'s half of CESR starts (0 or 16).
pub fn cesr_shift(counter: u32) -> u32 {
    16 * counter
}

/// A Pentium event: its SDM mnemonic, its event select, the counter it is
/// counted on when it has only one (the MMX events of 2AH-3BH are two
/// events each, one per counter), and whether only the Pentium with MMX
/// technology has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct P5Event {
    /// The SDM's mnemonic, with `-` and `/` written `_`.
    pub name: &'static str,
    /// Event select (ES0/ES1).
    pub event: u8,
    /// The only counter that counts it, if it has one.
    pub counter: Option<u32>,
    /// Pentium with MMX technology only.
    pub mmx: bool,
}

const fn both(name: &'static str, event: u8) -> P5Event {
    P5Event {
        name,
        event,
        counter: None,
        mmx: false,
    }
}

const fn mmx(name: &'static str, event: u8, counter: u32) -> P5Event {
    P5Event {
        name,
        event,
        counter: Some(counter),
        mmx: true,
    }
}

/// The events of SDM Table A-19, in event select order.
pub const P5_EVENTS: &[P5Event] = &[
    both("DATA_READ", 0x00),
    both("DATA_WRITE", 0x01),
    both("DATA_TLB_MISS", 0x02),
    both("DATA_READ_MISS", 0x03),
    both("DATA_WRITE_MISS", 0x04),
    both("WRITE_HIT_TO_M_OR_E_STATE_LINES", 0x05),
    both("DATA_CACHE_LINES_WRITTEN_BACK", 0x06),
    both("EXTERNAL_SNOOPS", 0x07),
    both("EXTERNAL_DATA_CACHE_SNOOP_HITS", 0x08),
    both("MEMORY_ACCESSES_IN_BOTH_PIPES", 0x09),
    both("BANK_CONFLICTS", 0x0a),
    both("MISALIGNED_DATA_MEMORY_OR_IO_REFERENCES", 0x0b),
    both("CODE_READ", 0x0c),
    both("CODE_TLB_MISS", 0x0d),
    both("CODE_CACHE_MISS", 0x0e),
    both("ANY_SEGMENT_REGISTER_LOADED", 0x0f),
    both("BRANCHES", 0x12),
    both("BTB_HITS", 0x13),
    both("TAKEN_BRANCH_OR_BTB_HIT", 0x14),
    both("PIPELINE_FLUSHES", 0x15),
    both("INSTRUCTIONS_EXECUTED", 0x16),
    both("INSTRUCTIONS_EXECUTED_V_PIPE", 0x17),
    both("BUS_CYCLE_DURATION", 0x18),
    both("WRITE_BUFFER_FULL_STALL_DURATION", 0x19),
    both("WAITING_FOR_DATA_MEMORY_READ_STALL_DURATION", 0x1a),
    both("STALL_ON_WRITE_TO_AN_E_OR_M_STATE_LINE", 0x1b),
    both("LOCKED_BUS_CYCLE", 0x1c),
    both("IO_READ_OR_WRITE_CYCLE", 0x1d),
    both("NONCACHEABLE_MEMORY_READS", 0x1e),
    both("PIPELINE_AGI_STALLS", 0x1f),
    both("FLOPS", 0x22),
    both("BREAKPOINT_MATCH_ON_DR0_REGISTER", 0x23),
    both("BREAKPOINT_MATCH_ON_DR1_REGISTER", 0x24),
    both("BREAKPOINT_MATCH_ON_DR2_REGISTER", 0x25),
    both("BREAKPOINT_MATCH_ON_DR3_REGISTER", 0x26),
    both("HARDWARE_INTERRUPTS", 0x27),
    both("DATA_READ_OR_WRITE", 0x28),
    both("DATA_READ_MISS_OR_WRITE_MISS", 0x29),
    mmx("BUS_OWNERSHIP_LATENCY", 0x2a, 0),
    mmx("BUS_OWNERSHIP_TRANSFERS", 0x2a, 1),
    mmx("MMX_INSTRUCTIONS_EXECUTED_U_PIPE", 0x2b, 0),
    mmx("MMX_INSTRUCTIONS_EXECUTED_V_PIPE", 0x2b, 1),
    mmx("CACHE_M_STATE_LINE_SHARING", 0x2c, 0),
    mmx("CACHE_LINE_SHARING", 0x2c, 1),
    mmx("EMMS_INSTRUCTIONS_EXECUTED", 0x2d, 0),
    mmx("TRANSITIONS_BETWEEN_MMX_AND_FP_INSTRUCTIONS", 0x2d, 1),
    mmx("BUS_UTILIZATION_DUE_TO_PROCESSOR_ACTIVITY", 0x2e, 0),
    mmx("WRITES_TO_NONCACHEABLE_MEMORY", 0x2e, 1),
    mmx("SATURATING_MMX_INSTRUCTIONS_EXECUTED", 0x2f, 0),
    mmx("SATURATIONS_PERFORMED", 0x2f, 1),
    mmx("NUMBER_OF_CYCLES_NOT_IN_HALT_STATE", 0x30, 0),
    mmx("DATA_CACHE_TLB_MISS_STALL_DURATION", 0x30, 1),
    mmx("MMX_INSTRUCTION_DATA_READS", 0x31, 0),
    mmx("MMX_INSTRUCTION_DATA_READ_MISSES", 0x31, 1),
    mmx("FLOATING_POINT_STALLS_DURATION", 0x32, 0),
    mmx("TAKEN_BRANCHES", 0x32, 1),
    mmx("D1_STARVATION_AND_FIFO_IS_EMPTY", 0x33, 0),
    mmx("D1_STARVATION_AND_ONLY_ONE_INSTRUCTION_IN_FIFO", 0x33, 1),
    mmx("MMX_INSTRUCTION_DATA_WRITES", 0x34, 0),
    mmx("MMX_INSTRUCTION_DATA_WRITE_MISSES", 0x34, 1),
    mmx("PIPELINE_FLUSHES_DUE_TO_WRONG_BRANCH_PREDICTIONS", 0x35, 0),
    mmx(
        "PIPELINE_FLUSHES_DUE_TO_WRONG_BRANCH_PREDICTIONS_RESOLVED_IN_WB_STAGE",
        0x35,
        1,
    ),
    mmx(
        "MISALIGNED_DATA_MEMORY_REFERENCE_ON_MMX_INSTRUCTIONS",
        0x36,
        0,
    ),
    mmx(
        "PIPELINE_ISTALL_FOR_MMX_INSTRUCTION_DATA_MEMORY_READS",
        0x36,
        1,
    ),
    mmx("MISPREDICTED_OR_UNPREDICTED_RETURNS", 0x37, 0),
    mmx("PREDICTED_RETURNS", 0x37, 1),
    mmx("MMX_MULTIPLY_UNIT_INTERLOCK", 0x38, 0),
    mmx(
        "MOVD_MOVQ_STORE_STALL_DUE_TO_PREVIOUS_MMX_OPERATION",
        0x38,
        1,
    ),
    mmx("RETURNS", 0x39, 0),
    mmx("BTB_FALSE_ENTRIES", 0x3a, 0),
    mmx("BTB_MISS_PREDICTION_ON_NOT_TAKEN_BRANCH", 0x3a, 1),
    mmx(
        "FULL_WRITE_BUFFER_STALL_DURATION_WHILE_EXECUTING_MMX_INSTRUCTIONS",
        0x3b,
        0,
    ),
    mmx(
        "PIPELINE_ISTALL_FOR_MMX_INSTRUCTION_DATA_MEMORY_WRITES",
        0x3b,
        1,
    ),
];

/// The generic names (as `stat -e` uses them on every PMU) and the Pentium
/// event each stands for.
pub const P5_ALIASES: &[(&str, &str)] = &[
    ("instructions", "INSTRUCTIONS_EXECUTED"),
    ("branches", "BRANCHES"),
    ("cycles", "NUMBER_OF_CYCLES_NOT_IN_HALT_STATE"),
];

/// The Pentium event called `name`: an SDM mnemonic (any case) or one of
/// [`P5_ALIASES`].
pub fn p5_event(name: &str) -> Option<&'static P5Event> {
    let name = P5_ALIASES
        .iter()
        .find(|a| a.0 == name)
        .map_or(name, |a| a.1);
    P5_EVENTS.iter().find(|e| e.name.eq_ignore_ascii_case(name))
}

/// The event that event select `event` counts on `counter` (on a Pentium
/// with MMX technology; without it, events 2AH-3BH are reserved).
pub fn p5_event_at(event: u8, counter: u32) -> Option<&'static P5Event> {
    P5_EVENTS
        .iter()
        .find(|e| e.event == event && e.counter.is_none_or(|c| c == counter))
}

/// One half of CESR (unshifted): event select, CPL bits, clocks, pin.
pub fn cesr_half(event: u8, os: bool, usr: bool, clocks: bool, pc: bool) -> u64 {
    let flag = |b: bool, bit: u64| if b { bit } else { 0 };
    (u64::from(event) & CESR_ES)
        | flag(os, CESR_CC_OS)
        | flag(usr, CESR_CC_USR)
        | flag(clocks, CESR_CC_CLOCKS)
        | flag(pc, CESR_PC)
}

/// A counter's name: `CTR0`, `CTR1`.
fn ctr(counter: u32) -> String {
    format!("CTR{counter}")
}

/// Parses one half's spec for `counter`: an event name or `event=N` (at
/// most 0x3f), and the flags `os` (CPL 0-2), `usr` (CPL 3), `clocks`, `pc`.
/// Without `os` and `usr` the counter counts nothing (CC 000 or 100).
fn half_encode(counter: u32, spec: &str) -> Result<u64> {
    let (mut event, mut os, mut usr, mut clocks, mut pc) = (None, false, false, false, false);
    for item in spec.split(':').map(str::trim).filter(|s| !s.is_empty()) {
        match item {
            "os" => os = true,
            "usr" => usr = true,
            "clocks" => clocks = true,
            "pc" => pc = true,
            _ => {
                let code = if let Some(v) = item.strip_prefix("event=") {
                    match crate::number::parse_u64(v) {
                        Ok(n) if n <= CESR_ES => n as u8,
                        Ok(_) => {
                            return Err(Error::invalid(format!(
                                "event={v}: want a number up to 0x3f (the Pentium's event selects are 6 bits)"
                            )))
                        }
                        Err(e) => return Err(Error::invalid(format!("event={v}: {e}"))),
                    }
                } else if let Some(e) = p5_event(item) {
                    if let Some(c) = e.counter.filter(|&c| c != counter) {
                        return Err(Error::invalid(format!(
                            "{} counts only on {}, not on {}",
                            e.name,
                            ctr(c),
                            ctr(counter)
                        )));
                    }
                    e.event
                } else {
                    return Err(Error::invalid(format!(
                        "unknown item '{item}' (an event name of SDM Table A-19 or event=N up to 0x3f; flags: os usr clocks pc)"
                    )));
                };
                if event.replace(code).is_some() {
                    return Err(Error::invalid(format!("{}: two events", ctr(counter))));
                }
            }
        }
    }
    let event = event
        .ok_or_else(|| Error::invalid(format!("{}: no event name or event=", ctr(counter))))?;
    Ok(cesr_half(event, os, usr, clocks, pc))
}

/// Encodes `ctr0=SPEC,ctr1=SPEC` (either may be left out: its half stays
/// zero) into a CESR value; a SPEC is `NAME[:os][:usr][:clocks][:pc]` or
/// `event=N[:...]`.
pub fn cesr_encode(spec: &str) -> Result<u64> {
    let mut v = 0u64;
    let mut seen = [false; 2];
    for part in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, half) = part
            .split_once('=')
            .ok_or_else(|| Error::invalid(format!("'{part}': want ctr0=SPEC or ctr1=SPEC")))?;
        let counter = match k.trim().to_ascii_lowercase().as_str() {
            "ctr0" => 0,
            "ctr1" => 1,
            _ => {
                return Err(Error::invalid(format!(
                    "'{k}': the Pentium has two counters, ctr0 and ctr1"
                )))
            }
        };
        if std::mem::replace(&mut seen[counter as usize], true) {
            return Err(Error::invalid(format!("{} given twice", ctr(counter))));
        }
        v |= half_encode(counter, half)? << cesr_shift(counter);
    }
    if !seen.contains(&true) {
        return Err(Error::invalid("no ctr0= or ctr1="));
    }
    Ok(v)
}

/// Decodes a CESR value into the spec [`cesr_encode`] turns back into it.
/// Halves that are all zero are left out.
pub fn cesr_decode(v: u64) -> Result<String> {
    if v & !CESR_FIELDS != 0 {
        return Err(Error::invalid(format!(
            "bits {:#x} are not CESR fields (bits 9:0 and 25:16)",
            v & !CESR_FIELDS
        )));
    }
    let mut parts = Vec::new();
    for counter in 0..2 {
        let h = (v >> cesr_shift(counter)) & CESR_HALF;
        if h == 0 && v != 0 {
            continue;
        }
        let es = (h & CESR_ES) as u8;
        let mut s = match p5_event_at(es, counter) {
            Some(e) => format!("ctr{counter}={}", e.name),
            None => format!("ctr{counter}=event=0x{es:02x}"),
        };
        for (name, bit) in [
            ("os", CESR_CC_OS),
            ("usr", CESR_CC_USR),
            ("clocks", CESR_CC_CLOCKS),
            ("pc", CESR_PC),
        ] {
            if h & bit != 0 {
                let _ = write!(s, ":{name}");
            }
        }
        parts.push(s);
    }
    Ok(parts.join(","))
}

/// What counter control `cc` (0-7) does, in words.
pub fn cc_words(cc: u64) -> &'static str {
    match cc & 7 {
        1 => "counts events while CPL is 0, 1 or 2",
        2 => "counts events while CPL is 3",
        3 => "counts events at any CPL",
        5 => "counts clocks (duration) while CPL is 0, 1 or 2",
        6 => "counts clocks (duration) while CPL is 3",
        7 => "counts clocks (duration) at any CPL",
        _ => "counts nothing (disabled)",
    }
}

/// Both halves of a CESR value in words, one line per counter. Names of
/// events 2AH-3BH are the MMX ones when `mmx`, else those are reserved.
pub fn cesr_describe(v: u64, mmx: bool) -> Vec<String> {
    (0..2)
        .map(|counter| {
            let sh = cesr_shift(counter);
            let h = (v >> sh) & CESR_HALF;
            let es = (h & CESR_ES) as u8;
            let name = p5_event_at(es, counter)
                .filter(|e| mmx || !e.mmx)
                .map_or("reserved", |e| e.name);
            let pin = if h & CESR_PC != 0 {
                "overflows"
            } else {
                "increments"
            };
            format!(
                "CTR{counter}: ES{counter}=0x{es:02x} ({name}), CC{counter}={:03b}: {}; PC{counter}={}: the PM{counter}/BP{counter} pin signals when it {pin}",
                (h & CESR_CC) >> 6,
                cc_words((h & CESR_CC) >> 6),
                u8::from(h & CESR_PC != 0),
            )
        })
        .collect()
}
