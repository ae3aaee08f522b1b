// SPDX-License-Identifier: GPL-2.0
//! Counter programming on one CPU: describe events, place them on counters,
//! check that nobody else owns those counters, program, start, stop, read,
//! and restore every PMU MSR that was touched.
//!
//! ```no_run
//! use msrbatch::counters::{check_ownership, parse_events, Plan, Session};
//! use msrbatch::{pmu, Device};
//!
//! let dev = Device::open()?;
//! let info = pmu::probe(&dev, 0)?;
//! let plan = Plan::new(&info, 0, &parse_events(&["instructions,cycles".into()])?)?;
//! assert!(check_ownership(&dev, &plan)?.is_empty());
//! let mut s = Session::program(&dev, plan)?;
//! let start = s.start()?;
//! // ... the work to measure runs on CPU 0 ...
//! let end = s.stop()?;
//! println!("{:?}", s.deltas(&start, &end));
//! s.restore()?;
//! # Ok::<(), msrbatch::Error>(())
//! ```
//!
//! Intel (SDM Vol. 3B): with a global control (version 2 and later) the
//! counters are programmed with EN set while their IA32_PERF_GLOBAL_CTRL bits
//! are clear, and started and stopped through IA32_PERF_GLOBAL_CTRL; version
//! 1 starts and stops each IA32_PERFEVTSELx's EN bit. AMD: the same with
//! PerfCntrGlobalCtl (PerfMonV2), else PERF_CTLx.En.
//!
//! The original Pentium (SDM 18.26): both counters share CESR, so every
//! write of it is a read-modify-write of the planned counters' halves that
//! leaves the other half alone; a counter is stopped (CC 000) and cleared
//! before its event changes, started by setting its CC field and stopped by
//! clearing it; CTR0/CTR1 are read with RDPMC on a Pentium with MMX
//! technology, else with RDMSR.

use crate::msr;
use crate::pmu::p5::{self as p5, CESR_CC, CESR_HALF};
use crate::pmu::{self, evsel, PmuInfo, ARCH_EVENTS};
use crate::{Backend, Batch, Error, Op, Result, Value};
use std::fmt;

/// A counter of the core PMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Counter {
    /// General-purpose counter `i` (IA32_PMCi / AMD PERF_CTRi).
    Gp(u32),
    /// Intel fixed counter `i` (IA32_FIXED_CTRi).
    Fixed(u32),
}

impl Counter {
    /// The RDPMC selector (fixed counters: [`RDPMC_FIXED`](crate::RDPMC_FIXED) set).
    pub fn rdpmc_ecx(self) -> u32 {
        match self {
            Counter::Gp(i) => i,
            Counter::Fixed(i) => crate::RDPMC_FIXED | i,
        }
    }

    /// Its bit in the global control / status registers.
    pub fn global_bit(self) -> u64 {
        match self {
            Counter::Gp(i) => 1 << i,
            Counter::Fixed(i) => 1 << (32 + i),
        }
    }

    /// Its width in bits on `pmu`.
    pub fn width(self, pmu: &PmuInfo) -> u32 {
        match self {
            Counter::Gp(_) => pmu.gp_width,
            Counter::Fixed(_) => pmu.fixed_width,
        }
    }

    /// The counter MSR.
    pub fn counter_msr(self, pmu: &PmuInfo) -> u32 {
        match self {
            Counter::Gp(i) => pmu.counter_msrs(i).1,
            Counter::Fixed(i) => msr::IA32_FIXED_CTR0 + i,
        }
    }

    /// The counter MSR's name (`IA32_PMC0`, `AMD_PERF_CTR1`, `IA32_FIXED_CTR2`).
    pub fn name(self, pmu: &PmuInfo) -> String {
        msr::Reg(self.counter_msr(pmu)).to_string()
    }
}

/// An event to count, as described: an event name or a raw encoding, plus
/// flags (`instructions:usr`, `event=0x0e:umask=0x01:usr:cmask=1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// The description as given.
    pub name: String,
    /// The event name, if it names one ([`ARCH_EVENTS`] / [`pmu::AMD_EVENTS`]).
    pub named: Option<&'static str>,
    /// Event select bits given (fields and flags; for a named event, flags only).
    pub bits: u64,
    /// `clocks`: count clocks (the event's duration) instead of events, a
    /// Pentium (P5) counter control bit.
    pub clocks: bool,
}

impl EventSpec {
    /// Parses one event: items separated by `:` (or `,`): an event name,
    /// `event=`, `umask=`, `cmask=`, and flags (usr os edge pc int any inv).
    pub fn parse(spec: &str) -> Result<EventSpec> {
        let inval = |m: String| Error::new(libc::EINVAL, format!("event '{spec}': {m}"));
        let mut e = EventSpec {
            name: spec.to_string(),
            named: None,
            bits: 0,
            clocks: false,
        };
        let mut raw = false;
        for item in spec
            .split([':', ','])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if let Some((k, v)) = item.split_once('=') {
                e.bits = pmu::evsel_set_field(e.bits, k, v).map_err(inval)?;
                raw |= k == "event" || k == "umask";
            } else if let Some(bit) = pmu::evsel_flag(item) {
                if bit != evsel::EN {
                    e.bits |= bit;
                }
            } else if item == "clocks" {
                e.clocks = true;
            } else if let Some(n) = pmu::known_event_name(item) {
                if e.named.replace(n).is_some() {
                    return Err(inval("two event names".into()));
                }
            } else {
                return Err(inval(format!(
                    "unknown item '{item}' (fields: event=, umask=, cmask=; flags: usr os edge pc int any inv, and clocks on a Pentium; names: {}, and on a Pentium the mnemonics of SDM Table A-19)",
                    ARCH_EVENTS.iter().map(|e| e.name).collect::<Vec<_>>().join(" ")
                )));
            }
        }
        match (e.named.is_some(), raw) {
            (true, true) => Err(inval("a name and event=/umask= both".into())),
            (false, false) => Err(inval("no event name or event=".into())),
            _ => Ok(e),
        }
    }

    /// The event select value (without EN) this event programs on `pmu`: a
    /// named event's encoding for the vendor, USR and OS when neither is
    /// given. `EOPNOTSUPP` when the CPU does not have the event.
    pub fn config(&self, pmu: &PmuInfo) -> Result<u64> {
        if pmu.is_p5() {
            return self.p5_config(pmu);
        }
        if self.clocks {
            return Err(Error::new(
                libc::EINVAL,
                format!(
                    "event '{}': clocks is a Pentium (P5) counter control; this PMU counts durations with cmask=",
                    self.name
                ),
            ));
        }
        let mut v = self.bits;
        if let Some(n) = self.named {
            let (ev, um, avail) = pmu.event_by_name(n).ok_or_else(|| {
                Error::new(
                    libc::EOPNOTSUPP,
                    format!(
                        "event '{}': {} has no event called {n}",
                        self.name, pmu.vendor
                    ),
                )
            })?;
            if !avail {
                return Err(Error::new(
                    libc::EOPNOTSUPP,
                    format!(
                        "event '{}': CPUID says {n} is not available on this CPU",
                        self.name
                    ),
                ));
            }
            v |= u64::from(ev & 0xff) | u64::from(um) << 8 | u64::from(ev >> 8) << 32;
        }
        if !pmu.is_amd() && v & (0xf << 32) != 0 {
            return Err(Error::new(
                libc::EINVAL,
                format!("event '{}': event selects above 0xff are AMD's", self.name),
            ));
        }
        if v & evsel::ANY != 0 {
            if let Some(why) = pmu.any_thread_refusal() {
                return Err(Error::new(
                    libc::EINVAL,
                    format!("event '{}': any: {why}", self.name),
                ));
            }
        }
        if v & (evsel::USR | evsel::OS) == 0 {
            v |= evsel::USR | evsel::OS;
        }
        Ok(v)
    }
}

impl EventSpec {
    /// The CESR half (unshifted, CC set: counting) this event programs on a
    /// Pentium: its event select, CPL bits (usr: CPL 3, os: CPL 0-2, both
    /// when neither is given), clocks and pin control.
    fn p5_config(&self, pmu: &PmuInfo) -> Result<u64> {
        let inval = |m: String| Error::new(libc::EINVAL, format!("event '{}': {m}", self.name));
        let event = match self.named {
            Some(n) => {
                let (e, avail) = pmu.p5_event(n).ok_or_else(|| {
                    Error::new(
                        libc::EOPNOTSUPP,
                        format!(
                            "event '{}': the Pentium has no event called {n} (its events are the mnemonics of SDM Table A-19)",
                            self.name
                        ),
                    )
                })?;
                if !avail {
                    return Err(Error::new(
                        libc::EOPNOTSUPP,
                        format!(
                            "event '{}': {} (event 0x{:02x}) needs a Pentium with MMX technology",
                            self.name, e.name, e.event
                        ),
                    ));
                }
                e.event
            }
            None => {
                let ev = self.bits & 0xff;
                if ev > p5::CESR_ES || self.bits & (0xf << 32) != 0 {
                    return Err(inval(format!(
                        "event=0x{:x}: the Pentium's event selects are 6 bits, up to 0x3f",
                        ev | ((self.bits >> 32) & 0xf) << 8
                    )));
                }
                ev as u8
            }
        };
        let unsupported: Vec<&str> = [
            ("umask", 0xff00),
            ("cmask", 0xff << evsel::CMASK_SHIFT),
            ("edge", evsel::EDGE),
            ("int", evsel::INT),
            ("any", evsel::ANY),
            ("inv", evsel::INV),
        ]
        .iter()
        .filter(|(_, b)| self.bits & b != 0)
        .map(|(n, _)| *n)
        .collect();
        if !unsupported.is_empty() {
            return Err(inval(format!(
                "the Pentium's CESR has no {} (its fields per counter: event select, usr, os, clocks, pc)",
                unsupported.join(", ")
            )));
        }
        let (mut usr, mut os) = (self.bits & evsel::USR != 0, self.bits & evsel::OS != 0);
        if !usr && !os {
            (usr, os) = (true, true);
        }
        Ok(p5::cesr_half(
            event,
            os,
            usr,
            self.clocks,
            self.bits & evsel::PC != 0,
        ))
    }

    /// The general-purpose counters that can count this event on `pmu`
    /// (bit i: counter i): all of them, but on a Pentium with MMX technology
    /// most of the events 2AH-3BH count on one counter only, and on Core 2,
    /// Nehalem and Westmere some events count where Linux's constraints
    /// say ([`PmuInfo::event_counter_mask`]).
    pub fn counter_mask(&self, pmu: &PmuInfo) -> u64 {
        match self.named.and_then(|n| pmu.p5_event(n)) {
            Some((e, _)) => e.counter.map_or(pmu.gp_mask, |c| pmu.gp_mask & (1 << c)),
            None if pmu.is_p5() => pmu.gp_mask,
            None => self
                .config(pmu)
                .map_or(pmu.gp_mask, |v| pmu.event_counter_mask(v)),
        }
    }
}

/// Parses `-e` lists: events separated by commas, each `name[:flag...]` or
/// `event=0x..:umask=0x..[:flag...]`.
pub fn parse_events(list: &[String]) -> Result<Vec<EventSpec>> {
    let out: Vec<EventSpec> = list
        .iter()
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(EventSpec::parse)
        .collect::<Result<_>>()?;
    if out.is_empty() {
        return Err(Error::new(libc::EINVAL, "no events"));
    }
    Ok(out)
}

/// An event placed on a counter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    /// The event.
    pub event: EventSpec,
    /// Its counter.
    pub counter: Counter,
    /// General-purpose: the event select without EN. Fixed: the counter's
    /// IA32_FIXED_CTR_CTRL field (bit 0 OS, bit 1 USR).
    pub config: u64,
}

/// Events placed on the counters of one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The CPU.
    pub cpu: u32,
    /// Its PMU.
    pub pmu: PmuInfo,
    /// One slot per event, in the events' order.
    pub slots: Vec<Slot>,
}

/// The fixed counter that counts `config` (event select, umask and only the
/// USR/OS flags), if the PMU has it.
fn fixed_for(pmu: &PmuInfo, config: u64, used: &[Counter]) -> Option<u32> {
    if pmu.is_amd() || pmu.version < 2 || config & !(0xffff | evsel::USR | evsel::OS) != 0 {
        return None;
    }
    (0..16u32).find(|&j| {
        pmu.fixed_mask & (1 << j) != 0
            && !used.contains(&Counter::Fixed(j))
            && pmu::fixed_counter_event(j).is_some_and(|k| {
                let e = ARCH_EVENTS[k];
                config & 0xffff == u64::from(e.event) | u64::from(e.umask) << 8
            })
    })
}

impl Plan {
    /// Places `events` on the counters of `pmu` (CPU `cpu`): an event a fixed
    /// counter counts (with no flags but usr/os) goes there, the others on
    /// general-purpose counters in order, those that only some counters
    /// count (the Pentium's MMX events) first. `ENOSPC` if they do not fit,
    /// `ENODEV` without a PMU.
    pub fn new(pmu: &PmuInfo, cpu: u32, events: &[EventSpec]) -> Result<Plan> {
        if !pmu.present() {
            return Err(Error::new(libc::ENODEV, pmu.absence()));
        }
        let configs: Vec<u64> = events
            .iter()
            .map(|e| e.config(pmu))
            .collect::<Result<_>>()?;
        let mut placed: Vec<Option<(Counter, u64)>> = vec![None; events.len()];
        let mut used = Vec::new();
        for (k, &config) in configs.iter().enumerate() {
            if let Some(j) = fixed_for(pmu, config, &used) {
                let field =
                    u64::from(config & evsel::OS != 0) | u64::from(config & evsel::USR != 0) << 1;
                used.push(Counter::Fixed(j));
                placed[k] = Some((Counter::Fixed(j), field));
            }
        }
        let mut rest: Vec<(usize, u64)> = (0..events.len())
            .filter(|&k| placed[k].is_none())
            .map(|k| (k, events[k].counter_mask(pmu)))
            .collect();
        rest.sort_by_key(|&(_, m)| m.count_ones());
        for (k, mask) in rest {
            let i = (0..64u32)
                .find(|&i| mask & (1 << i) != 0 && !used.contains(&Counter::Gp(i)))
                .ok_or_else(|| Self::no_room(pmu, cpu, events, &placed, k, mask))?;
            used.push(Counter::Gp(i));
            placed[k] = Some((Counter::Gp(i), configs[k]));
        }
        let slots = events
            .iter()
            .zip(placed)
            .map(|(e, p)| {
                let (counter, config) = p.expect("every event placed");
                Slot {
                    event: e.clone(),
                    counter,
                    config,
                }
            })
            .collect();
        Ok(Plan {
            cpu,
            pmu: pmu.clone(),
            slots,
        })
    }

    /// Why event `k` (which counts on the counters of `mask`) found no counter.
    fn no_room(
        pmu: &PmuInfo,
        cpu: u32,
        events: &[EventSpec],
        placed: &[Option<(Counter, u64)>],
        k: usize,
        mask: u64,
    ) -> Error {
        if mask != pmu.gp_mask {
            let (names, holders): (Vec<String>, Vec<String>) = (0..64u32)
                .filter(|i| mask & (1 << i) != 0)
                .map(|i| {
                    let holder = placed
                        .iter()
                        .position(|p| matches!(p, Some((Counter::Gp(j), _)) if *j == i))
                        .map_or("another event".to_string(), |h| {
                            format!("'{}'", events[h].name)
                        });
                    (Counter::Gp(i).name(pmu), holder)
                })
                .unzip();
            return Error::new(
                libc::ENOSPC,
                format!(
                    "event '{}' counts only on {}, which {} {}",
                    events[k].name,
                    names.join(" and "),
                    holders.join(" and "),
                    if holders.len() == 1 { "has" } else { "have" }
                ),
            );
        }
        let what = if pmu.is_p5() {
            "2 Pentium counters (CTR0, CTR1)".to_string()
        } else {
            format!(
                "{} general-purpose and {} fixed counters",
                pmu.gp_counters, pmu.fixed_counters
            )
        };
        Error::new(
            libc::ENOSPC,
            format!("{} events do not fit CPU {cpu}'s {what}", events.len()),
        )
    }

    /// Splits `events` into groups that each fit the counters (for running
    /// the measured work once per group), keeping their order.
    pub fn groups(pmu: &PmuInfo, cpu: u32, events: &[EventSpec]) -> Result<Vec<Plan>> {
        let mut groups = Vec::new();
        let mut start = 0;
        while start < events.len() {
            let mut end = start + 1;
            let mut best = Plan::new(pmu, cpu, &events[start..end])?;
            while end < events.len() {
                match Plan::new(pmu, cpu, &events[start..=end]) {
                    Ok(p) => {
                        best = p;
                        end += 1;
                    }
                    Err(e) if e.errno().0 == libc::ENOSPC => break,
                    Err(e) => return Err(e),
                }
            }
            groups.push(best);
            start = end;
        }
        Ok(groups)
    }

    /// Packs `events` into as few groups as fit the counters, for a sweep
    /// that counts each event exactly in one run of the measured work: each
    /// group takes, in order, every event not yet placed that still fits
    /// beside the ones it has (so an event that only one counter counts
    /// does not end a group another event could fill). Returns each group's
    /// plan and the indices of its events in `events`.
    pub fn pack(pmu: &PmuInfo, cpu: u32, events: &[EventSpec]) -> Result<Vec<(Plan, Vec<usize>)>> {
        let mut left: Vec<usize> = (0..events.len()).collect();
        let mut out = Vec::new();
        while let Some(&first) = left.first() {
            let mut taken = vec![first];
            let mut plan = Plan::new(pmu, cpu, &events[first..=first])?;
            for &k in &left[1..] {
                let mut more = taken.clone();
                more.push(k);
                let evs: Vec<EventSpec> = more.iter().map(|&i| events[i].clone()).collect();
                match Plan::new(pmu, cpu, &evs) {
                    Ok(p) => {
                        plan = p;
                        taken = more;
                    }
                    Err(e) if e.errno().0 == libc::ENOSPC => {}
                    Err(e) => return Err(e),
                }
            }
            left.retain(|k| !taken.contains(k));
            out.push((plan, taken));
        }
        Ok(out)
    }

    /// The global control bits of the planned counters.
    pub fn mask(&self) -> u64 {
        self.slots.iter().fold(0, |m, s| m | s.counter.global_bit())
    }

    fn fixed_fields(&self) -> (u64, u64) {
        self.slots
            .iter()
            .fold((0, 0), |(clear, set), s| match s.counter {
                Counter::Fixed(j) => (clear | 0xf << (4 * j), set | s.config << (4 * j)),
                Counter::Gp(_) => (clear, set),
            })
    }

    /// Pentium: the CESR bits of the planned counters' halves, their CC
    /// fields, and the halves' values (counting).
    fn cesr_fields(&self) -> (u64, u64, u64) {
        self.slots
            .iter()
            .fold((0, 0, 0), |(half, cc, set), s| match s.counter {
                Counter::Gp(i) => {
                    let sh = p5::cesr_shift(i);
                    (
                        half | CESR_HALF << sh,
                        cc | CESR_CC << sh,
                        set | s.config << sh,
                    )
                }
                Counter::Fixed(_) => (half, cc, set),
            })
    }

    fn has_fixed(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s.counter, Counter::Fixed(_)))
    }

    /// One line per slot: `instructions: IA32_FIXED_CTR0 (IA32_FIXED_CTR_CTRL field 0x3)`,
    /// `branches: IA32_PERFEVTSEL0 = 0x4300c4` (the event select with EN).
    pub fn describe(&self) -> Vec<String> {
        self.slots
            .iter()
            .map(|s| match s.counter {
                Counter::Gp(i) if self.pmu.is_p5() => format!(
                    "{}: P5_CESR bits {}:{} = {:#05x} ({})",
                    s.event.name,
                    p5::cesr_shift(i) + 9,
                    p5::cesr_shift(i),
                    s.config,
                    p5::cc_words(s.config >> 6)
                ),
                Counter::Gp(i) => {
                    let sel = msr::Reg(self.pmu.counter_msrs(i).0);
                    format!("{}: {sel} = {:#x}", s.event.name, s.config | evsel::EN)
                }
                Counter::Fixed(j) => format!(
                    "{}: IA32_FIXED_CTR{j} (IA32_FIXED_CTR_CTRL field {:#x})",
                    s.event.name, s.config
                ),
            })
            .collect()
    }
}

/// A reason not to touch the planned counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Conflict {
    /// The counter is enabled (EN set, or its fixed control field nonzero).
    Enabled {
        /// The counter.
        counter: Counter,
        /// The control MSR and the value read.
        msr: u32,
        /// The value read.
        value: u64,
    },
    /// IA32_PERF_GLOBAL_INUSE says the counter is in use.
    InUse {
        /// The counter.
        counter: Counter,
        /// IA32_PERF_GLOBAL_INUSE.
        inuse: u64,
    },
    /// The kernel's NMI watchdog is on: it keeps a counter running.
    NmiWatchdog,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Enabled { counter, msr, value } => write!(
                f,
                "{counter:?} is enabled ({} = {value:#x}): perf or another tool owns it",
                msr::Reg(*msr)
            ),
            Conflict::InUse { counter, inuse } => {
                write!(f, "{counter:?} is in use (IA32_PERF_GLOBAL_INUSE = {inuse:#x})")
            }
            Conflict::NmiWatchdog => write!(
                f,
                "the NMI watchdog is on (/proc/sys/kernel/nmi_watchdog); it owns a counter (echo 0 > /proc/sys/kernel/nmi_watchdog)"
            ),
        }
    }
}

fn u64_of(b: &Batch, i: usize) -> Result<u64> {
    match b.result(i).map(|r| (r.op, r.value)) {
        Some((_, Ok(Value::U64(v)))) => Ok(v),
        Some((_, Ok(Value::Rmw { new, .. }))) => Ok(new),
        Some((op, Err(e))) => Err(Error::new(e.0, format!("{op} faulted"))),
        _ => Err(Error::new(libc::EIO, format!("op {i}: no value"))),
    }
}

/// Reads what says whether the planned counters are free: their control
/// registers, IA32_PERF_GLOBAL_INUSE (version 4 and later), and the NMI
/// watchdog setting. An empty list means free.
pub fn check_ownership<B: Backend + ?Sized>(dev: &B, plan: &Plan) -> Result<Vec<Conflict>> {
    let pmu = &plan.pmu;
    let mut b = Batch::new();
    let mut sel = Vec::new();
    for s in &plan.slots {
        if let Counter::Gp(i) = s.counter {
            let m = pmu.counter_msrs(i).0;
            sel.push((s.counter, m, b.push(plan.cpu, Op::RdMsr { msr: m })));
        }
    }
    let fixed = plan.has_fixed().then(|| {
        b.push(
            plan.cpu,
            Op::RdMsr {
                msr: msr::IA32_FIXED_CTR_CTRL,
            },
        )
    });
    let inuse = pmu.has_inuse().then(|| {
        b.push(
            plan.cpu,
            Op::RdMsr {
                msr: msr::IA32_PERF_GLOBAL_INUSE,
            },
        )
    });
    dev.run(&mut b)?;
    let mut out = Vec::new();
    for (counter, m, i) in sel {
        let value = u64_of(&b, i)?;
        let counting = match counter {
            // CC 000 and 100 count nothing.
            Counter::Gp(j) if pmu.is_p5() => {
                (value >> p5::cesr_shift(j)) & p5::CESR_CC & !p5::CESR_CC_CLOCKS != 0
            }
            _ => value & evsel::EN != 0,
        };
        if counting {
            out.push(Conflict::Enabled {
                counter,
                msr: m,
                value,
            });
        }
    }
    if let Some(i) = fixed {
        let value = u64_of(&b, i)?;
        for s in &plan.slots {
            if let Counter::Fixed(j) = s.counter {
                if (value >> (4 * j)) & 3 != 0 {
                    out.push(Conflict::Enabled {
                        counter: s.counter,
                        msr: msr::IA32_FIXED_CTR_CTRL,
                        value,
                    });
                }
            }
        }
    }
    if let Some(i) = inuse {
        let v = u64_of(&b, i)?;
        for s in &plan.slots {
            if v & s.counter.global_bit() != 0 {
                out.push(Conflict::InUse {
                    counter: s.counter,
                    inuse: v,
                });
            }
        }
    }
    if dev.nmi_watchdog() == Some(true) {
        out.push(Conflict::NmiWatchdog);
    }
    Ok(out)
}

/// The values a session saved before programming, restored at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Saved {
    /// Global control (where there is one).
    pub global_ctrl: u64,
    /// Global status (where there is one).
    pub global_status: u64,
    /// IA32_FIXED_CTR_CTRL (when fixed counters are planned).
    pub fixed_ctrl: u64,
    /// Per slot: the event select (0 for fixed counters) and the counter.
    pub slots: Vec<(u64, u64)>,
}

/// Where [`Session::push_read`] put its ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    first: usize,
}

impl Reading {
    /// The reading whose CPUID fence is op `fence` of its batch.
    pub fn after_fence(fence: usize) -> Self {
        Reading { first: fence + 1 }
    }

    /// The index of its CPUID fence.
    pub fn fence(self) -> usize {
        self.first - 1
    }
}

/// Values of a restore that could not be put back exactly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// One line per inexact restore.
    pub inexact: Vec<String>,
}

/// Programmed counters on one CPU. Dropping it restores what it touched (and
/// ignores errors): call [`Session::restore`] to see them.
pub struct Session<'a, B: Backend + ?Sized> {
    dev: &'a B,
    plan: Plan,
    saved: Saved,
    restored: bool,
}

impl<B: Backend + ?Sized> fmt::Debug for Session<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("plan", &self.plan)
            .field("saved", &self.saved)
            .field("restored", &self.restored)
            .finish()
    }
}

impl<'a, B: Backend + ?Sized> Session<'a, B> {
    /// One batch, stopping at the first fault: save every MSR the plan
    /// touches, stop the planned counters (global control), then zero and
    /// program them. Counting starts with [`Session::start`]. On a fault
    /// nothing stays changed: what was written is restored and the error
    /// names the op.
    pub fn program(dev: &'a B, plan: Plan) -> Result<Self> {
        let pmu = &plan.pmu;
        let cpu = plan.cpu;
        let global = pmu.has_global();
        let mut b = Batch::new();
        b.stop_on_error(true);
        let rd = |b: &mut Batch, msr: u32| b.push(cpu, Op::RdMsr { msr });
        let gi = global.then(|| {
            (
                rd(&mut b, pmu.global_ctrl()),
                rd(&mut b, pmu.global_status()),
            )
        });
        let fi = plan
            .has_fixed()
            .then(|| rd(&mut b, msr::IA32_FIXED_CTR_CTRL));
        let si: Vec<(Option<usize>, usize)> = plan
            .slots
            .iter()
            .map(|s| match s.counter {
                Counter::Gp(i) => {
                    let (sel, ctr) = pmu.counter_msrs(i);
                    (Some(rd(&mut b, sel)), rd(&mut b, ctr))
                }
                Counter::Fixed(j) => (None, rd(&mut b, msr::IA32_FIXED_CTR0 + j)),
            })
            .collect();
        let reads = b.len();
        plan.push_program(&mut b);
        dev.run(&mut b)?;
        let mut saved = Saved::default();
        if let Some((g, s)) = gi {
            saved.global_ctrl = u64_of(&b, g)?;
            saved.global_status = u64_of(&b, s)?;
        }
        if let Some(f) = fi {
            saved.fixed_ctrl = u64_of(&b, f)?;
        }
        for (sel, ctr) in si {
            let sel = sel.map(|i| u64_of(&b, i)).transpose()?.unwrap_or(0);
            saved.slots.push((sel, u64_of(&b, ctr)?));
        }
        let fault = (reads..b.len()).find_map(|i| {
            let r = b.result(i)?;
            r.value
                .err()
                .map(|e| Error::new(e.0, format!("programming CPU {cpu}: {} faulted", r.op)))
        });
        let mut s = Session {
            dev,
            plan,
            saved,
            restored: false,
        };
        if let Some(e) = fault {
            s.restore()?;
            return Err(e);
        }
        Ok(s)
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The values saved before programming.
    pub fn saved(&self) -> &Saved {
        &self.saved
    }

    /// Appends the ops that start the counters.
    pub fn push_start(&self, b: &mut Batch) {
        self.plan.push_start(b);
    }

    /// Appends the ops that stop the counters.
    pub fn push_stop(&self, b: &mut Batch) {
        self.plan.push_stop(b);
    }

    /// Appends a CPUID fence and one RDPMC per slot.
    pub fn push_read(&self, b: &mut Batch) -> Reading {
        self.plan.push_read(b)
    }

    /// The counts a [`Reading`] in `b` got, one per slot.
    pub fn values(&self, b: &Batch, r: Reading) -> Result<Vec<u64>> {
        (0..self.plan.slots.len())
            .map(|k| u64_of(b, r.first + k))
            .collect()
    }

    fn run_with(&self, f: impl FnOnce(&Self, &mut Batch) -> Reading) -> Result<Vec<u64>> {
        let mut b = Batch::new();
        let r = f(self, &mut b);
        self.dev.run(&mut b)?;
        self.values(&b, r)
    }

    /// Starts the counters and reads them (one batch).
    pub fn start(&self) -> Result<Vec<u64>> {
        self.run_with(|s, b| {
            s.push_start(b);
            s.push_read(b)
        })
    }

    /// Reads the counters and stops them (one batch).
    pub fn stop(&self) -> Result<Vec<u64>> {
        self.run_with(|s, b| {
            let r = s.push_read(b);
            s.push_stop(b);
            r
        })
    }

    /// Reads the counters.
    pub fn read(&self) -> Result<Vec<u64>> {
        self.run_with(|s, b| s.push_read(b))
    }

    /// `end - start` per slot, modulo each counter's width.
    pub fn deltas(&self, start: &[u64], end: &[u64]) -> Vec<u64> {
        self.plan
            .slots
            .iter()
            .zip(start.iter().zip(end))
            .map(|(s, (a, b))| b.wrapping_sub(*a) & pmu::low_mask(s.counter.width(&self.plan.pmu)))
            .collect()
    }

    /// Puts back every MSR [`Session::program`] saved (one batch): stops
    /// the counters, restores event selects, counters, fixed control, clears
    /// the overflow bits the session set, and restores the global control.
    pub fn restore(&mut self) -> Result<RestoreReport> {
        self.restored = true;
        let (mut b, report) = self.plan.restore_batch(&self.saved);
        self.dev.run(&mut b)?;
        let failed: Vec<String> = b
            .results()
            .filter(|r| r.value.is_err())
            .map(|r| r.op.to_string())
            .collect();
        if !failed.is_empty() {
            return Err(Error::new(
                libc::EIO,
                format!(
                    "restoring CPU {}: {} faulted",
                    self.plan.cpu,
                    failed.join(", ")
                ),
            ));
        }
        Ok(report)
    }
}

impl<B: Backend + ?Sized> Drop for Session<'_, B> {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.restore();
        }
    }
}

impl Plan {
    /// Appends the programming ops (after the saves of [`Session::program`]):
    /// clear the planned global control bits, then per general-purpose
    /// counter disable, zero and write its event select (with EN where a
    /// global control gates it), then the fixed control fields and zeroed
    /// fixed counters.
    ///
    /// Pentium: stop the planned counters (their CC fields cleared in one
    /// read-modify-write of CESR), clear them, then set their event selects
    /// and pin controls with CC still 000; the other half of CESR keeps its
    /// value throughout.
    pub fn push_program(&self, b: &mut Batch) {
        let pmu = &self.pmu;
        let cpu = self.cpu;
        if pmu.is_p5() {
            let (half, cc, set) = self.cesr_fields();
            let cesr = msr::P5_CESR;
            b.push(
                cpu,
                Op::RmwMsr {
                    msr: cesr,
                    clear: cc,
                    set: 0,
                },
            );
            for s in &self.slots {
                if let Counter::Gp(i) = s.counter {
                    b.push(
                        cpu,
                        Op::WrMsr {
                            msr: pmu.counter_msrs(i).1,
                            value: 0,
                        },
                    );
                }
            }
            b.push(
                cpu,
                Op::RmwMsr {
                    msr: cesr,
                    clear: half,
                    set: set & !cc,
                },
            );
            return;
        }
        let global = pmu.has_global();
        if global {
            self.push_stop(b);
        }
        for s in &self.slots {
            if let Counter::Gp(i) = s.counter {
                let (sel, ctr) = pmu.counter_msrs(i);
                b.push(cpu, Op::WrMsr { msr: sel, value: 0 });
                b.push(cpu, Op::WrMsr { msr: ctr, value: 0 });
                let en = if global { evsel::EN } else { 0 };
                b.push(
                    cpu,
                    Op::WrMsr {
                        msr: sel,
                        value: s.config | en,
                    },
                );
            }
        }
        if self.has_fixed() {
            let (clear, set) = self.fixed_fields();
            b.push(
                cpu,
                Op::RmwMsr {
                    msr: msr::IA32_FIXED_CTR_CTRL,
                    clear,
                    set,
                },
            );
            for s in &self.slots {
                if let Counter::Fixed(j) = s.counter {
                    b.push(
                        cpu,
                        Op::WrMsr {
                            msr: msr::IA32_FIXED_CTR0 + j,
                            value: 0,
                        },
                    );
                }
            }
        }
    }

    /// Appends the ops that start the planned counters: set their global
    /// control bits, or (no global control) set EN in each event select.
    pub fn push_start(&self, b: &mut Batch) {
        self.push_enable(b, true);
    }

    /// Appends the ops that stop them.
    pub fn push_stop(&self, b: &mut Batch) {
        self.push_enable(b, false);
    }

    fn push_enable(&self, b: &mut Batch, on: bool) {
        let pmu = &self.pmu;
        if pmu.is_p5() {
            // One read-modify-write of CESR starts (or stops) the planned
            // counters together: their CC fields, nothing else.
            let (_, cc, set) = self.cesr_fields();
            let (clear, set) = if on { (cc, set & cc) } else { (cc, 0) };
            b.push(
                self.cpu,
                Op::RmwMsr {
                    msr: msr::P5_CESR,
                    clear,
                    set,
                },
            );
            return;
        }
        if pmu.has_global() {
            let (clear, set) = if on {
                (0, self.mask())
            } else {
                (self.mask(), 0)
            };
            b.push(
                self.cpu,
                Op::RmwMsr {
                    msr: pmu.global_ctrl(),
                    clear,
                    set,
                },
            );
            return;
        }
        for s in &self.slots {
            if let Counter::Gp(i) = s.counter {
                let en = if on { evsel::EN } else { 0 };
                b.push(
                    self.cpu,
                    Op::WrMsr {
                        msr: pmu.counter_msrs(i).0,
                        value: s.config | en,
                    },
                );
            }
        }
    }

    /// Appends a CPUID fence (serializing, as the SDM's RDPMC asks) and one
    /// RDPMC per slot (a Pentium without RDPMC: one RDMSR of CTR0/CTR1).
    pub fn push_read(&self, b: &mut Batch) -> Reading {
        b.push(
            self.cpu,
            Op::Cpuid {
                leaf: 0,
                subleaf: 0,
            },
        );
        let first = b.len();
        let rdpmc = self.pmu.reads_with_rdpmc();
        for s in &self.slots {
            let op = if rdpmc {
                Op::RdPmc {
                    ecx: s.counter.rdpmc_ecx(),
                }
            } else {
                Op::RdMsr {
                    msr: s.counter.counter_msr(&self.pmu),
                }
            };
            b.push(self.cpu, op);
        }
        Reading { first }
    }

    /// The restore batch for `saved`, and what it cannot restore exactly
    /// (an Intel counter without full-width writes takes only EAX,
    /// sign-extended).
    pub fn restore_batch(&self, saved: &Saved) -> (Batch, RestoreReport) {
        let pmu = &self.pmu;
        let cpu = self.cpu;
        let mut b = Batch::new();
        let mut report = RestoreReport::default();
        if pmu.is_p5() {
            // Stop, put the counters back, then the planned halves of CESR
            // as they were (the other half is not touched).
            self.push_stop(&mut b);
            for (s, &(_, ctr)) in self.slots.iter().zip(&saved.slots) {
                b.push(
                    cpu,
                    Op::WrMsr {
                        msr: s.counter.counter_msr(pmu),
                        value: ctr,
                    },
                );
            }
            let (half, _, _) = self.cesr_fields();
            let old = saved.slots.first().map_or(0, |s| s.0);
            b.push(
                cpu,
                Op::RmwMsr {
                    msr: msr::P5_CESR,
                    clear: half,
                    set: old & half,
                },
            );
            return (b, report);
        }
        let global = pmu.has_global();
        if global {
            self.push_stop(&mut b);
        }
        for (s, &(sel, ctr)) in self.slots.iter().zip(&saved.slots) {
            match s.counter {
                Counter::Gp(i) => {
                    let (sel_msr, ctr_msr) = pmu.counter_msrs(i);
                    b.push(
                        cpu,
                        Op::WrMsr {
                            msr: sel_msr,
                            value: sel,
                        },
                    );
                    let m = pmu.counter_full_write_msr(i).unwrap_or_else(|| {
                        let sext = ctr as u32 as i32 as i64 as u64 & pmu::low_mask(pmu.gp_width);
                        if sext != ctr {
                            report.inexact.push(format!(
                                "{}: saved {ctr:#x}, restored {sext:#x} (no full-width writes: IA32_PERF_CAPABILITIES.FW_WRITE is clear)",
                                s.counter.name(pmu)
                            ));
                        }
                        ctr_msr
                    });
                    b.push(cpu, Op::WrMsr { msr: m, value: ctr });
                }
                Counter::Fixed(j) => {
                    b.push(
                        cpu,
                        Op::WrMsr {
                            msr: msr::IA32_FIXED_CTR0 + j,
                            value: ctr,
                        },
                    );
                }
            }
        }
        if self.has_fixed() {
            b.push(
                cpu,
                Op::WrMsr {
                    msr: msr::IA32_FIXED_CTR_CTRL,
                    value: saved.fixed_ctrl,
                },
            );
        }
        if global {
            let clear = self.mask() & !saved.global_status;
            if clear != 0 {
                b.push(
                    cpu,
                    Op::WrMsr {
                        msr: pmu.global_status_clear(),
                        value: clear,
                    },
                );
            }
            b.push(
                cpu,
                Op::WrMsr {
                    msr: pmu.global_ctrl(),
                    value: saved.global_ctrl,
                },
            );
        }
        (b, report)
    }
}

#[cfg(test)]
mod tests;
