// SPDX-License-Identifier: GPL-2.0
//! Event select values (IA32_PERFEVTSELx and AMD PERF_CTLx share bits
//! 31:0): their bits, and their text form `event=..,umask=..,cmask=..,usr,os,...`.

use super::ARCH_EVENTS;
use crate::{Error, Result};
use std::fmt::Write as _;

/// Count at CPL > 0.
pub const USR: u64 = 1 << 16;
/// Count at CPL 0.
pub const OS: u64 = 1 << 17;
/// Edge detect.
pub const EDGE: u64 = 1 << 18;
/// Pin control (Intel).
pub const PC: u64 = 1 << 19;
/// Interrupt (PMI) on overflow.
pub const INT: u64 = 1 << 20;
/// AnyThread (Intel, version 3 and later).
pub const ANY: u64 = 1 << 21;
/// Enable.
pub const EN: u64 = 1 << 22;
/// Invert the counter-mask comparison.
pub const INV: u64 = 1 << 23;
/// Counter mask, bits 31:24.
pub const CMASK_SHIFT: u32 = 24;

/// PERFEVTSEL flag bits and their names, in canonical order.
const FLAGS: &[(&str, u64)] = &[
    ("usr", USR),
    ("os", OS),
    ("edge", EDGE),
    ("pc", PC),
    ("int", INT),
    ("any", ANY),
    ("en", EN),
    ("inv", INV),
];

/// The flag bit called `name` (usr, os, edge, pc, int, any, en, inv).
pub fn flag(name: &str) -> Option<u64> {
    FLAGS.iter().find(|(n, _)| *n == name).map(|f| f.1)
}

/// A field's value in the [number grammar](crate::number), at most `max`.
fn field(k: &str, s: &str, max: u64) -> Result<u64> {
    match crate::number::parse_u64(s) {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(Error::invalid(format!(
            "{k}={s}: want a number up to {max:#x}"
        ))),
        Err(e) => Err(Error::invalid(format!("{k}={s}: {e}"))),
    }
}

/// Sets field `k` (event, umask, cmask) of `v` to `val`.
pub fn set_field(v: u64, k: &str, val: &str) -> Result<u64> {
    Ok(match k {
        "event" => {
            let e = field(k, val, 0xfff)?;
            (v & !0xf_0000_00ff) | (e & 0xff) | ((e >> 8) << 32)
        }
        "umask" => (v & !0xff00) | (field(k, val, 0xff)? << 8),
        "cmask" => (v & !0xff00_0000) | (field(k, val, 0xff)? << CMASK_SHIFT),
        _ => {
            return Err(Error::invalid(format!(
                "unknown field '{k}' (event, umask, cmask)"
            )))
        }
    })
}

/// Encodes `event=..,umask=..,cmask=..,usr,os,...` (or an Intel architectural
/// event name) into an IA32_PERFEVTSEL value. Event selects above 0xff put
/// bits 11:8 into 35:32 (AMD's extended event select).
pub fn encode(spec: &str) -> Result<u64> {
    let mut v = 0u64;
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if let Some((k, val)) = item.split_once('=') {
            v = set_field(v, k, val)?;
        } else if let Some(bit) = flag(item) {
            v |= bit;
        } else if let Some(e) = ARCH_EVENTS.iter().find(|e| e.name == item) {
            v = (v & !0xf_0000_ffff) | u64::from(e.event) | (u64::from(e.umask) << 8);
        } else {
            return Err(Error::invalid(format!("unknown item '{item}' (fields: event=, umask=, cmask=; flags: usr os edge pc int any en inv; names: {})",
                ARCH_EVENTS.iter().map(|e| e.name).collect::<Vec<_>>().join(" "))));
        }
    }
    Ok(v)
}

/// Decodes an IA32_PERFEVTSEL value into the canonical spec that
/// [`encode`] turns back into the same value.
pub fn decode(v: u64) -> Result<String> {
    let known = 0xf_ffff_ffffu64;
    if v & !known != 0 {
        return Err(Error::invalid(format!(
            "bits {:#x} are not PERFEVTSEL fields",
            v & !known
        )));
    }
    let event = (v & 0xff) | (((v >> 32) & 0xf) << 8);
    let mut s = format!("event=0x{event:02x},umask=0x{:02x}", (v >> 8) & 0xff);
    let cmask = (v >> CMASK_SHIFT) & 0xff;
    if cmask != 0 {
        let _ = write!(s, ",cmask=0x{cmask:02x}");
    }
    for (name, bit) in FLAGS {
        if v & bit != 0 {
            let _ = write!(s, ",{name}");
        }
    }
    Ok(s)
}
