// SPDX-License-Identifier: GPL-2.0
//! A simulated PMU (feature `sim`): a [`Backend`] on which counter code runs
//! without the hardware or the module. Its CPUs are configured from a CPUID
//! dump of a real CPU ([`SimPmu::from_file`]); their PMU MSRs and RDPMC
//! behave as the SDM's "Architectural Performance Monitoring" (versions 1 to
//! 5) and the APM's core counters (legacy and PerfMonV2) define them, and
//! they count a scripted workload.
//!
//! Code runs batches against the simulation exactly as against the device,
//! tells it what the CPU did between batches ([`SimPmu::execute`]: so many
//! cycles in user or kernel mode, so many of each event per cycle), and
//! checks what the counters counted. `msrbatch stat --dry-run` plans on it,
//! the library's and the tool's tests run on it, and C programs open one with
//! `msrbatch_open_model()`.
//!
//! What it models, per CPU:
//! - CPUID: the dump's leaves (absent leaves read as zero).
//! - Intel: IA32_PMCx (writes take EAX sign-extended to the counter width),
//!   IA32_A_PMCx (with IA32_PERF_CAPABILITIES.FW_WRITE; bits above the width
//!   #GP), IA32_PERFEVTSELx (#GP on reserved bits: bits 63:32 except IN_TX /
//!   IN_TXCP with TSX and UMASK2 / EQ with CPUID.23H; AnyThread before
//!   version 3), IA32_FIXED_CTRx, IA32_FIXED_CTR_CTRL (#GP on fields of absent
//!   counters, AnyThread before version 3), IA32_PERF_GLOBAL_CTRL,
//!   IA32_PERF_GLOBAL_STATUS (read-only), IA32_PERF_GLOBAL_OVF_CTRL /
//!   STATUS_RESET, IA32_PERF_GLOBAL_STATUS_SET and IA32_PERF_GLOBAL_INUSE
//!   (version 4), IA32_PERF_CAPABILITIES (with PDCM; read-only, value set by
//!   the test). Counters absent from CPUID (including CPUID.23H bitmaps) #GP.
//! - AMD: PERF_CTL/PERF_CTR 0-3 at C001_0000H (legacy), 0-5 at C001_0200H
//!   with PerfCtrExtCore (the legacy MSRs alias counters 0-3), the PerfMonV2
//!   global control, status, status-clear and status-set MSRs; #GP on reserved
//!   PERF_CTL bits and on PERF_CTR bits 63:48.
//! - The original Pentium (CPUID family 5, SDM 18.26): CESR (11H; #GP on
//!   bits outside ES0/CC0/PC0 and ES1/CC1/PC1, which the SDM calls
//!   reserved), CTR0 and CTR1 (12H, 13H; 40 bits, bits above #GP, a choice
//!   of the model: the SDM says only that they are 40 bits wide); RDPMC of
//!   counters 0 and 1 with MMX technology, and #UD (an error) without. A
//!   counter counts its event select's event in the CPLs its CC field
//!   selects (bit 0: CPL 0-2, the model's kernel mode; bit 1: CPL 3), and
//!   with CC bit 2 the clocks during which the event happens; the MMX
//!   events 2AH-3BH count per counter. Counts wrap at 40 bits with no
//!   status and no interrupt; the pin control bits are kept but drive no
//!   pin.
//! - RDPMC: Intel ECX\[30\] selects a fixed counter, ECX\[29:0\] the index;
//!   anything else, or an absent counter, #GPs. AMD: core counter index.
//! - Counting: a counter counts when enabled (EN; fixed: its OS/USR field),
//!   gated by the global control where there is one, in the modes its USR/OS
//!   bits select (AMD: GuestOnly alone counts nothing, the model is a host);
//!   CMASK counts cycles whose increment reaches it (INV: falls below it),
//!   EDGE counts the cycles where that condition starts; the count wraps at
//!   the counter width and a wrap sets the counter's global status bit
//!   (version 2 and later, PerfMonV2), and counts a PMI when INT / the fixed
//!   PMI bit is set.
//! - Everything else #GPs (RDMSR/WRMSR of other MSRs), CR4 reads are
//!   unsupported, a DELAY op runs [`SimPmu::set_delay_mix`] in kernel mode for
//!   one cycle per nanosecond, and batch ops themselves retire nothing.
//!
//! Not modeled: AnyThread and SMT siblings, PEBS, LBR, freeze-on-PMI, uncore,
//! northbridge/L3/UMC counters, transactional regions (IN_TX counts nothing),
//! fixed counters above 3 (they count nothing), CPUID faulting for leaves past
//! the maximum.

use crate::msr;
use crate::pmu::{self, evsel, p5, CpuidCpu, CpuidDump, PmuInfo, ARCH_EVENTS};
use crate::{Backend, Batch, Error, Op, Result};
use std::cell::RefCell;

/// A privilege level of the scripted workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// CPL 3.
    User,
    /// CPL 0.
    Kernel,
}

/// What a phase's events are: an event name ([`ARCH_EVENTS`], or on AMD
/// [`pmu::AMD_EVENTS`]), or a raw event select and umask.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// By name, e.g. `"instructions"`.
    Named(&'static str),
    /// By encoding.
    Raw {
        /// Event select (AMD: 12 bits).
        event: u16,
        /// Unit mask.
        umask: u8,
    },
}

/// A stretch of the workload: `cycles` cycles in `mode`, each cycle adding
/// the listed increments. Cycles (and, on Intel, ref-cycles) count one per
/// cycle unless listed; other events count only when listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// Privilege level.
    pub mode: Mode,
    /// Core cycles the phase lasts.
    pub cycles: u64,
    /// Per-cycle increments.
    pub per_cycle: Vec<(Source, u32)>,
}

impl Phase {
    /// `cycles` cycles in user mode.
    pub fn user(cycles: u64) -> Self {
        Phase {
            mode: Mode::User,
            cycles,
            per_cycle: Vec::new(),
        }
    }

    /// `cycles` cycles in kernel mode.
    pub fn kernel(cycles: u64) -> Self {
        Phase {
            mode: Mode::Kernel,
            ..Phase::user(cycles)
        }
    }

    /// Adds `n` per cycle of the event `name`.
    pub fn with(mut self, name: &'static str, n: u32) -> Self {
        self.per_cycle.push((Source::Named(name), n));
        self
    }

    /// Adds `n` per cycle of a raw event.
    pub fn raw(mut self, event: u16, umask: u8, n: u32) -> Self {
        self.per_cycle.push((Source::Raw { event, umask }, n));
        self
    }
}

const MAX: usize = 32;

/// One modeled CPU.
#[derive(Clone, Debug)]
struct Cpu {
    cpuid: CpuidCpu,
    pmu: PmuInfo,
    perf_capabilities: u64,
    sel: [u64; MAX],
    ctr: [u64; MAX],
    edge: [bool; MAX],
    fixed: [u64; MAX],
    fixed_ctrl: u64,
    global_ctrl: u64,
    global_status: u64,
    cesr: u64,
    pmis: u64,
    tsc: u64,
}

/// A #GP.
struct Gp;

type Access<T> = std::result::Result<T, Gp>;

impl Cpu {
    fn new(cpuid: CpuidCpu) -> Self {
        let pmu = cpuid.pmu();
        Cpu {
            cpuid,
            pmu,
            perf_capabilities: 0,
            sel: [0; MAX],
            ctr: [0; MAX],
            edge: [false; MAX],
            fixed: [0; MAX],
            fixed_ctrl: 0,
            global_ctrl: 0,
            global_status: 0,
            cesr: 0,
            pmis: 0,
            tsc: 0,
        }
    }

    fn amd(&self) -> bool {
        self.pmu.is_amd()
    }

    fn gp(&self, i: u32) -> bool {
        (i as usize) < MAX && self.pmu.gp_mask & (1 << i) != 0
    }

    fn fixed_ok(&self, i: u32) -> bool {
        !self.amd()
            && self.pmu.version >= 2
            && (i as usize) < 16
            && self.pmu.fixed_mask & (1 << i) != 0
    }

    fn global(&self) -> bool {
        self.pmu.version >= 2
    }

    /// Bits of the global control (and of the counter bits of status).
    fn counter_bits(&self) -> u64 {
        if self.amd() {
            self.pmu.gp_mask
        } else {
            self.pmu.gp_mask | (self.pmu.fixed_mask & 0xffff) << 32
        }
    }

    /// Bits IA32_PERF_GLOBAL_OVF_CTRL / STATUS_RESET / STATUS_SET accept.
    fn status_bits(&self) -> u64 {
        let mut b = self.counter_bits();
        if !self.amd() {
            b |= 3 << 62; // OvfBuf, CondChgd
            if self.pmu.version >= 4 {
                b |= 0xf << 58; // LBR_Frz, CTR_Frz, ASCI, Ovf_Uncore
            }
        }
        b
    }

    /// Event select bits that may be 1 for counter `i`.
    fn sel_allowed(&self, i: u32) -> u64 {
        if self.amd() {
            // APM PERF_CTL: 7:0, 15:8, USR, OS, Edge, Int, En, Inv, CntMask,
            // EventSelect[11:8] (35:32), GuestOnly (40), HostOnly (41).
            return (0xffff_ffff & !(evsel::PC | evsel::ANY)) | (0xf << 32) | (3 << 40);
        }
        let mut a = 0xffff_ffffu64;
        if self.pmu.version < 3 {
            a &= !evsel::ANY;
        }
        if self.pmu.tsx {
            a |= 1 << 32; // IN_TX
            if i == 2 {
                a |= 1 << 33; // IN_TXCP
            }
        }
        if let Some((umask2, eq)) = self.pmu.ext_leaf_23 {
            if umask2 {
                a |= 0xff << 40;
            }
            if eq {
                a |= 1 << 50;
            }
        }
        a
    }

    fn fixed_ctrl_allowed(&self) -> u64 {
        let field = if self.pmu.version >= 3 { 0xf } else { 0xb };
        (0..16)
            .filter(|&i| self.fixed_ok(i))
            .fold(0, |m, i| m | field << (4 * i))
    }

    fn inuse(&self) -> u64 {
        let mut v = 0;
        let mut pmi = false;
        for i in 0..MAX as u32 {
            if self.gp(i) {
                if self.sel[i as usize] & 0xff != 0 {
                    v |= 1 << i;
                }
                pmi |= self.sel[i as usize] & evsel::INT != 0;
            }
        }
        for i in 0..16 {
            let f = (self.fixed_ctrl >> (4 * i)) & 0xf;
            if f & 3 != 0 {
                v |= 1 << (32 + i);
            }
            pmi |= f & 8 != 0;
        }
        if pmi {
            v |= 1 << 63;
        }
        v
    }

    /// (counter index, is the legacy alias) of an AMD counter MSR.
    fn amd_counter(&self, m: u32) -> Option<(u32, bool)> {
        let a = self.pmu.amd?;
        if (msr::AMD_K7_PERF_CTL0..msr::AMD_K7_PERF_CTL0 + 8).contains(&m) {
            let off = m - msr::AMD_K7_PERF_CTL0;
            return Some((off % 4, off >= 4));
        }
        if (a.core_ext || a.perfmon_v2)
            && (msr::AMD_PERF_CTL0..msr::AMD_PERF_CTL0 + 2 * self.pmu.gp_counters).contains(&m)
        {
            let off = m - msr::AMD_PERF_CTL0;
            return Some((off / 2, off % 2 == 1));
        }
        None
    }

    /// The Pentium counter of CTR0/CTR1 MSR `m`.
    fn p5_counter(m: u32) -> Option<usize> {
        (msr::P5_CTR0..=msr::P5_CTR1)
            .contains(&m)
            .then(|| (m - msr::P5_CTR0) as usize)
    }

    fn rdmsr(&self, m: u32) -> Access<u64> {
        if self.pmu.is_p5() {
            return match m {
                msr::P5_CESR => Ok(self.cesr),
                _ => Self::p5_counter(m).map(|i| self.ctr[i]).ok_or(Gp),
            };
        }
        if self.amd() {
            if let Some((i, is_ctr)) = self.amd_counter(m) {
                return Ok(if is_ctr {
                    self.ctr[i as usize]
                } else {
                    self.sel[i as usize]
                });
            }
            let v2 = self.global();
            return match m {
                msr::AMD_PERF_CNTR_GLOBAL_STATUS if v2 => Ok(self.global_status),
                msr::AMD_PERF_CNTR_GLOBAL_CTL if v2 => Ok(self.global_ctrl),
                msr::AMD_PERF_CNTR_GLOBAL_STATUS_CLR | msr::AMD_PERF_CNTR_GLOBAL_STATUS_SET
                    if v2 =>
                {
                    Ok(0)
                }
                _ => Err(Gp),
            };
        }
        let g = self.global();
        let v4 = self.pmu.version >= 4;
        match m {
            _ if (msr::IA32_PMC0..msr::IA32_PMC0 + MAX as u32).contains(&m)
                && self.gp(m - msr::IA32_PMC0) =>
            {
                Ok(self.ctr[(m - msr::IA32_PMC0) as usize])
            }
            _ if (msr::IA32_A_PMC0..msr::IA32_A_PMC0 + MAX as u32).contains(&m)
                && self.gp(m - msr::IA32_A_PMC0)
                && self.perf_capabilities & pmu::PERF_CAP_FW_WRITE != 0 =>
            {
                Ok(self.ctr[(m - msr::IA32_A_PMC0) as usize])
            }
            _ if (msr::IA32_PERFEVTSEL0..msr::IA32_PERFEVTSEL0 + MAX as u32).contains(&m)
                && self.gp(m - msr::IA32_PERFEVTSEL0) =>
            {
                Ok(self.sel[(m - msr::IA32_PERFEVTSEL0) as usize])
            }
            _ if (msr::IA32_FIXED_CTR0..msr::IA32_FIXED_CTR0 + 16).contains(&m)
                && self.fixed_ok(m - msr::IA32_FIXED_CTR0) =>
            {
                Ok(self.fixed[(m - msr::IA32_FIXED_CTR0) as usize])
            }
            msr::IA32_PERF_CAPABILITIES if self.pmu.pdcm => Ok(self.perf_capabilities),
            msr::IA32_FIXED_CTR_CTRL if g => Ok(self.fixed_ctrl),
            msr::IA32_PERF_GLOBAL_STATUS if g => Ok(self.global_status),
            msr::IA32_PERF_GLOBAL_CTRL if g => Ok(self.global_ctrl),
            msr::IA32_PERF_GLOBAL_OVF_CTRL if g => Ok(0),
            msr::IA32_PERF_GLOBAL_STATUS_SET if v4 => Ok(0),
            msr::IA32_PERF_GLOBAL_INUSE if v4 => Ok(self.inuse()),
            _ => Err(Gp),
        }
    }

    fn wrmsr(&mut self, m: u32, v: u64) -> Access<()> {
        if self.pmu.is_p5() {
            if m == msr::P5_CESR && v & !p5::CESR_FIELDS == 0 {
                self.cesr = v;
                return Ok(());
            }
            return match Self::p5_counter(m) {
                Some(i) if v & !pmu::low_mask(p5::P5_WIDTH) == 0 => {
                    self.ctr[i] = v;
                    Ok(())
                }
                _ => Err(Gp),
            };
        }
        if self.amd() {
            if let Some((i, is_ctr)) = self.amd_counter(m) {
                if is_ctr {
                    if v & !pmu::low_mask(self.pmu.gp_width) != 0 {
                        return Err(Gp);
                    }
                    self.ctr[i as usize] = v;
                } else {
                    if v & !self.sel_allowed(i) != 0 {
                        return Err(Gp);
                    }
                    self.sel[i as usize] = v;
                }
                return Ok(());
            }
            let v2 = self.global();
            let bits = self.counter_bits();
            return match m {
                msr::AMD_PERF_CNTR_GLOBAL_CTL if v2 && v & !bits == 0 => {
                    self.global_ctrl = v;
                    Ok(())
                }
                msr::AMD_PERF_CNTR_GLOBAL_STATUS_CLR if v2 && v & !bits == 0 => {
                    self.global_status &= !v;
                    Ok(())
                }
                msr::AMD_PERF_CNTR_GLOBAL_STATUS_SET if v2 && v & !bits == 0 => {
                    self.global_status |= v;
                    Ok(())
                }
                _ => Err(Gp),
            };
        }
        let g = self.global();
        let v4 = self.pmu.version >= 4;
        let gpw = pmu::low_mask(self.pmu.gp_width);
        match m {
            _ if (msr::IA32_PMC0..msr::IA32_PMC0 + MAX as u32).contains(&m)
                && self.gp(m - msr::IA32_PMC0) =>
            {
                // EAX sign-extended; EDX ignored.
                self.ctr[(m - msr::IA32_PMC0) as usize] = (v as u32 as i32 as i64 as u64) & gpw;
                Ok(())
            }
            _ if (msr::IA32_A_PMC0..msr::IA32_A_PMC0 + MAX as u32).contains(&m)
                && self.gp(m - msr::IA32_A_PMC0)
                && self.perf_capabilities & pmu::PERF_CAP_FW_WRITE != 0 =>
            {
                if v & !gpw != 0 {
                    return Err(Gp);
                }
                self.ctr[(m - msr::IA32_A_PMC0) as usize] = v;
                Ok(())
            }
            _ if (msr::IA32_PERFEVTSEL0..msr::IA32_PERFEVTSEL0 + MAX as u32).contains(&m)
                && self.gp(m - msr::IA32_PERFEVTSEL0) =>
            {
                let i = m - msr::IA32_PERFEVTSEL0;
                if v & !self.sel_allowed(i) != 0 {
                    return Err(Gp);
                }
                self.sel[i as usize] = v;
                Ok(())
            }
            _ if (msr::IA32_FIXED_CTR0..msr::IA32_FIXED_CTR0 + 16).contains(&m)
                && self.fixed_ok(m - msr::IA32_FIXED_CTR0) =>
            {
                if v & !pmu::low_mask(self.pmu.fixed_width) != 0 {
                    return Err(Gp);
                }
                self.fixed[(m - msr::IA32_FIXED_CTR0) as usize] = v;
                Ok(())
            }
            msr::IA32_FIXED_CTR_CTRL if g && v & !self.fixed_ctrl_allowed() == 0 => {
                self.fixed_ctrl = v;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_CTRL if g && v & !self.counter_bits() == 0 => {
                self.global_ctrl = v;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_OVF_CTRL if g && v & !self.status_bits() == 0 => {
                self.global_status &= !v;
                Ok(())
            }
            msr::IA32_PERF_GLOBAL_STATUS_SET if v4 && v & !self.status_bits() == 0 => {
                self.global_status |= v;
                Ok(())
            }
            _ => Err(Gp),
        }
    }

    fn rdpmc(&self, ecx: u32) -> Access<u64> {
        if let Some(p) = self.pmu.p5 {
            // RDPMC came with MMX technology; before it, #UD.
            return if p.mmx && ecx < 2 {
                Ok(self.ctr[ecx as usize])
            } else {
                Err(Gp)
            };
        }
        if self.amd() {
            return if ecx < self.pmu.gp_counters {
                Ok(self.ctr[ecx as usize])
            } else {
                Err(Gp)
            };
        }
        let index = ecx & 0x3fff_ffff;
        match ecx >> 30 {
            0 if self.gp(index) => Ok(self.ctr[index as usize]),
            1 if self.fixed_ok(index) => Ok(self.fixed[index as usize]),
            _ => Err(Gp),
        }
    }

    /// The per-cycle increment of event `event`/`umask` in `phase`.
    fn rate(&self, phase: &Phase, event: u16, umask: u8) -> u64 {
        let named = |name: &str| {
            self.pmu
                .event_by_name(name)
                .is_some_and(|(e, u, _)| e == event && u == umask)
        };
        for &(src, n) in &phase.per_cycle {
            let hit = match src {
                Source::Raw { event: e, umask: u } => e == event && u == umask,
                Source::Named(name) => named(name),
            };
            if hit {
                return u64::from(n);
            }
        }
        u64::from(named("cycles") || (!self.amd() && named("ref-cycles")))
    }

    /// The per-cycle increment of Pentium event select `es` on `counter` in
    /// `phase`: a named event counts where it is that counter's event (the
    /// MMX events differ per counter); NUMBER_OF_CYCLES_NOT_IN_HALT_STATE
    /// (MMX, counter 0) counts one per cycle unless listed.
    fn p5_rate(&self, phase: &Phase, es: u8, counter: u32) -> u64 {
        let is = |name: &str| {
            self.pmu.p5_event(name).is_some_and(|(e, ok)| {
                ok && e.event == es && e.counter.is_none_or(|c| c == counter)
            })
        };
        for &(src, n) in &phase.per_cycle {
            let hit = match src {
                Source::Raw { event, umask } => event == u16::from(es) && umask == 0,
                Source::Named(name) => is(name),
            };
            if hit {
                return u64::from(n);
            }
        }
        u64::from(is("cycles"))
    }

    fn execute_p5(&mut self, phase: &Phase) {
        let user = phase.mode == Mode::User;
        for i in 0..2u32 {
            let h = (self.cesr >> p5::cesr_shift(i)) & p5::CESR_HALF;
            let cc = (h & p5::CESR_CC) >> 6;
            if cc & if user { 2 } else { 1 } == 0 {
                continue;
            }
            let inc = self.p5_rate(phase, (h & p5::CESR_ES) as u8, i);
            let add = if cc & 4 != 0 {
                // Clocks: the cycles in which the event happens.
                if inc > 0 {
                    phase.cycles
                } else {
                    0
                }
            } else {
                inc * phase.cycles
            };
            Self::add(&mut self.ctr[i as usize], add, p5::P5_WIDTH);
        }
    }

    /// Adds `n` to a counter of width `w`; true if it wrapped.
    fn add(counter: &mut u64, n: u64, w: u32) -> bool {
        let m = pmu::low_mask(w);
        let sum = u128::from(*counter) + u128::from(n);
        *counter = (sum & u128::from(m)) as u64;
        sum > u128::from(m)
    }

    fn execute(&mut self, phase: &Phase) {
        self.tsc = self.tsc.wrapping_add(phase.cycles);
        if phase.cycles == 0 {
            return;
        }
        if self.pmu.is_p5() {
            self.execute_p5(phase);
            return;
        }
        let user = phase.mode == Mode::User;
        for i in 0..MAX as u32 {
            let s = self.sel[i as usize];
            if !self.gp(i) || s & evsel::EN == 0 {
                continue;
            }
            if self.global() && self.global_ctrl & (1 << i) == 0 {
                continue;
            }
            let mode_ok = if user { s & evsel::USR } else { s & evsel::OS } != 0;
            let host_ok = !self.amd() || (s >> 40) & 3 != 1; // GuestOnly alone
            let in_tx = !self.amd() && s & (1 << 32) != 0;
            let event = if self.amd() {
                (s & 0xff) as u16 | (((s >> 32) & 0xf) as u16) << 8
            } else {
                (s & 0xff) as u16
            };
            let inc = if mode_ok && host_ok && !in_tx {
                self.rate(phase, event, (s >> 8) as u8)
            } else {
                0
            };
            let cmask = (s >> evsel::CMASK_SHIFT) & 0xff;
            let edge = s & evsel::EDGE != 0;
            let add = if cmask == 0 && !edge {
                inc * phase.cycles
            } else {
                let thr = cmask.max(1);
                let cond = if s & evsel::INV != 0 && cmask != 0 {
                    inc < thr
                } else {
                    inc >= thr
                };
                let cond = cond && mode_ok && host_ok && !in_tx;
                let prev = std::mem::replace(&mut self.edge[i as usize], cond);
                match (edge, cond) {
                    (false, true) => phase.cycles,
                    (true, true) if !prev => 1,
                    _ => 0,
                }
            };
            if Self::add(&mut self.ctr[i as usize], add, self.pmu.gp_width) {
                if self.amd() && !self.global() {
                    // Legacy AMD: no global status; only the interrupt.
                } else {
                    self.global_status |= 1 << i;
                }
                if s & evsel::INT != 0 {
                    self.pmis += 1;
                }
            }
        }
        for j in 0..16 {
            let f = (self.fixed_ctrl >> (4 * j)) & 0xf;
            if !self.fixed_ok(j) || self.global_ctrl & (1 << (32 + j)) == 0 {
                continue;
            }
            let mode_ok = if user { f & 2 } else { f & 1 } != 0;
            let add = match pmu::fixed_counter_event(j) {
                Some(k) if mode_ok => {
                    let e = ARCH_EVENTS[k];
                    self.rate(phase, u16::from(e.event), e.umask) * phase.cycles
                }
                _ => 0,
            };
            if Self::add(&mut self.fixed[j as usize], add, self.pmu.fixed_width) {
                self.global_status |= 1 << (32 + j);
                if f & 8 != 0 {
                    self.pmis += 1;
                }
            }
        }
    }
}

#[derive(Debug)]
struct State {
    cpus: Vec<Cpu>,
    delay: Vec<(Source, u32)>,
    nmi_watchdog: Option<bool>,
}

/// The simulated PMU: one CPU per CPU of a CPUID dump, numbered from 0 in the
/// dump's order.
#[derive(Debug)]
pub struct SimPmu {
    state: RefCell<State>,
}

impl SimPmu {
    /// A model of the CPUs of `dump`. The PMU MSRs start at zero.
    pub fn new(dump: &CpuidDump) -> Self {
        SimPmu {
            state: RefCell::new(State {
                cpus: dump.cpus.iter().cloned().map(Cpu::new).collect(),
                delay: Vec::new(),
                nmi_watchdog: Some(false),
            }),
        }
    }

    /// A model of the CPUs of the dump in file `path`.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> crate::Result<Self> {
        Ok(Self::new(&CpuidDump::read(path)?))
    }

    /// Number of CPUs.
    pub fn nr_cpus(&self) -> u32 {
        self.state.borrow().cpus.len() as u32
    }

    /// Sets the value IA32_PERF_CAPABILITIES reads as on `cpu` (it exists
    /// with CPUID.01H:ECX.PDCM; bit 13, FW_WRITE, enables IA32_A_PMCx).
    pub fn set_perf_capabilities(&self, cpu: u32, value: u64) {
        if let Some(c) = self.state.borrow_mut().cpus.get_mut(cpu as usize) {
            c.perf_capabilities = value;
        }
    }

    /// What [`Backend::nmi_watchdog`] answers.
    pub fn set_nmi_watchdog(&self, on: Option<bool>) {
        self.state.borrow_mut().nmi_watchdog = on;
    }

    /// The per-cycle increments of a DELAY op (one kernel-mode cycle per
    /// nanosecond). Default: none (cycles and ref-cycles only).
    pub fn set_delay_mix(&self, mix: Vec<(Source, u32)>) {
        self.state.borrow_mut().delay = mix;
    }

    /// Runs `phases` on `cpu`, counting as the programmed counters say.
    pub fn execute(&self, cpu: u32, phases: &[Phase]) {
        if let Some(c) = self.state.borrow_mut().cpus.get_mut(cpu as usize) {
            for p in phases {
                c.execute(p);
            }
        }
    }

    /// RDMSR on `cpu` as the model has it (None: #GP or no such CPU).
    pub fn rdmsr(&self, cpu: u32, m: u32) -> Option<u64> {
        self.state.borrow().cpus.get(cpu as usize)?.rdmsr(m).ok()
    }

    /// WRMSR on `cpu` (false: #GP or no such CPU).
    pub fn wrmsr(&self, cpu: u32, m: u32, v: u64) -> bool {
        self.state
            .borrow_mut()
            .cpus
            .get_mut(cpu as usize)
            .is_some_and(|c| c.wrmsr(m, v).is_ok())
    }

    /// PMIs the counters of `cpu` have raised.
    pub fn pmis(&self, cpu: u32) -> u64 {
        self.state
            .borrow()
            .cpus
            .get(cpu as usize)
            .map_or(0, |c| c.pmis)
    }

    /// The decode of `cpu`'s CPUID the model was configured from.
    pub fn pmu(&self, cpu: u32) -> Option<PmuInfo> {
        self.state
            .borrow()
            .cpus
            .get(cpu as usize)
            .map(|c| c.pmu.clone())
    }
}

const EIO: i32 = -libc::EIO;

impl Backend for SimPmu {
    fn run(&self, batch: &mut Batch) -> Result<()> {
        let mut st = self.state.borrow_mut();
        let n = st.cpus.len() as u32;
        // As the kernel: a refusal names the op to blame, in the error and
        // in the batch.
        let refuse = |batch: &mut Batch, errno, i: usize| {
            batch.set_refused(Some(i as u32));
            Err(Error::new(errno, "MSRBATCH_IOC_BATCH (model)").with_index(Some(i as u32)))
        };
        if let Some(i) = (0..batch.len()).find(|&i| batch.op(i).is_some_and(|(c, _)| c >= n)) {
            return refuse(batch, libc::ENXIO, i);
        }
        // As the kernel: timestamps go into val[1], so the ops that return
        // something there are refused.
        let stamps = batch.has_timestamps();
        if let Some(i) = (0..batch.len()).find(|&i| {
            stamps
                && batch.op(i).is_some_and(|(_, op)| {
                    matches!(op, Op::RdTscp | Op::Cpuid { .. } | Op::RmwMsr { .. })
                })
        }) {
            return refuse(batch, libc::EINVAL, i);
        }
        let stop = batch.stops_on_error();
        let mut failed_cpu = vec![false; n as usize];
        let mut nr_failed = 0;
        let delay = st.delay.clone();
        for i in 0..batch.len() {
            let Some((cpu, op)) = batch.op(i) else {
                continue;
            };
            let c = &mut st.cpus[cpu as usize];
            let (status, val) = if stop && failed_cpu[cpu as usize] {
                (-libc::ECANCELED, [0, 0])
            } else {
                match op {
                    Op::RdMsr { msr } => c.rdmsr(msr).map_or((EIO, [0, 0]), |v| (0, [v, 0])),
                    Op::WrMsr { msr, value } => {
                        c.wrmsr(msr, value).map_or((EIO, [0, 0]), |()| (0, [0, 0]))
                    }
                    Op::RmwMsr { msr, clear, set } => match c.rdmsr(msr) {
                        Ok(old) => {
                            let new = (old & !clear) | set;
                            // A failed write still reports what was read
                            // and tried, as the module does.
                            c.wrmsr(msr, new)
                                .map_or((EIO, [old, new]), |()| (0, [old, new]))
                        }
                        Err(Gp) => (EIO, [0, 0]),
                    },
                    Op::RdPmc { ecx } => c.rdpmc(ecx).map_or((EIO, [0, 0]), |v| (0, [v, 0])),
                    Op::RdTsc => (0, [c.tsc, 0]),
                    Op::RdTscp => (0, [c.tsc, u64::from(cpu)]),
                    Op::Cpuid { leaf, subleaf } => {
                        let [a, b, cx, d] = c.cpuid.get(leaf, subleaf);
                        (
                            0,
                            [
                                u64::from(a) | u64::from(b) << 32,
                                u64::from(cx) | u64::from(d) << 32,
                            ],
                        )
                    }
                    Op::Delay { ns } => {
                        c.execute(&Phase {
                            mode: Mode::Kernel,
                            cycles: ns,
                            per_cycle: delay.clone(),
                        });
                        (0, [ns, 0])
                    }
                    // The model has no time passing within an op.
                    Op::RdCr4 | Op::Poll(_) => (-libc::EOPNOTSUPP, [0, 0]),
                }
            };
            if status != 0 {
                nr_failed += 1;
                failed_cpu[cpu as usize] = true;
            }
            let ran = status != -libc::ECANCELED;
            let val = if stamps && ran { [val[0], c.tsc] } else { val };
            batch.set_result(i, status, val);
        }
        // The model runs its CPUs one after another from one TSC each: no
        // spread to report.
        batch.set_ran(nr_failed, 0);
        Ok(())
    }

    fn nmi_watchdog(&self) -> Option<bool> {
        self.state.borrow().nmi_watchdog
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::tests::dump;

    #[test]
    fn intel_msr_semantics() {
        let m = SimPmu::new(&dump("skylake.txt"));
        // IA32_PMCx: EAX sign-extended to 48 bits, EDX ignored.
        assert!(m.wrmsr(0, msr::IA32_PMC0 + 7, 0xdead_0000_8000_0000));
        assert_eq!(m.rdmsr(0, msr::IA32_PMC0 + 7), Some(0xffff_8000_0000));
        // No IA32_A_PMCx without FW_WRITE; with it, bits above 47 #GP.
        assert!(!m.wrmsr(0, msr::IA32_A_PMC0, 1));
        m.set_perf_capabilities(0, pmu::PERF_CAP_FW_WRITE);
        assert!(m.wrmsr(0, msr::IA32_A_PMC0, 0xffff_ffff_ffff));
        assert!(!m.wrmsr(0, msr::IA32_A_PMC0, 1 << 48));
        // IA32_PERFEVTSELx: bits 63:32 reserved without TSX / leaf 23H.
        assert!(m.wrmsr(0, msr::IA32_PERFEVTSEL0, 0xffff_ffff));
        assert!(!m.wrmsr(0, msr::IA32_PERFEVTSEL0, 1 << 32));
        // Fixed counters 0-2 (48 bits); IA32_FIXED_CTR3 is absent.
        assert!(m.wrmsr(0, msr::IA32_FIXED_CTR0 + 2, 0xffff_ffff_ffff));
        assert!(!m.wrmsr(0, msr::IA32_FIXED_CTR0 + 2, 1 << 48));
        assert!(!m.wrmsr(0, msr::IA32_FIXED_CTR0 + 3, 0));
        // IA32_FIXED_CTR_CTRL: three 4-bit fields (version 4 has AnyThread).
        assert!(m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0xfff));
        assert!(!m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0x1000));
        // Global control: PMC0-7 and FIXED_CTR0-2 only.
        assert!(m.wrmsr(0, msr::IA32_PERF_GLOBAL_CTRL, 0x7_0000_00ff));
        assert!(!m.wrmsr(0, msr::IA32_PERF_GLOBAL_CTRL, 1 << 8));
        assert!(!m.wrmsr(0, msr::IA32_PERF_GLOBAL_CTRL, 1 << 35));
        // Status is read-only; STATUS_SET / OVF_CTRL set and clear it.
        assert!(!m.wrmsr(0, msr::IA32_PERF_GLOBAL_STATUS, 0));
        assert!(m.wrmsr(0, msr::IA32_PERF_GLOBAL_STATUS_SET, 1 << 63 | 1 << 33 | 1));
        assert!(m.wrmsr(0, msr::IA32_PERF_GLOBAL_OVF_CTRL, 1));
        assert_eq!(
            m.rdmsr(0, msr::IA32_PERF_GLOBAL_STATUS),
            Some(1 << 63 | 1 << 33)
        );
        // INUSE: event selects with a nonzero event, fixed fields, PMI.
        assert!(m.wrmsr(0, msr::IA32_PERFEVTSEL0 + 1, 0x10_0000));
        assert_eq!(
            m.rdmsr(0, msr::IA32_PERF_GLOBAL_INUSE),
            Some(1 | 0x7 << 32 | 1 << 63)
        );
        assert!(!m.wrmsr(0, msr::IA32_PERF_GLOBAL_INUSE, 0), "read-only");
        // Other MSRs #GP.
        assert_eq!(m.rdmsr(0, 0x10), None);
    }

    #[test]
    fn version_2_and_absent_msrs() {
        let m = SimPmu::new(&dump("core2-conroe.txt"));
        // Version 2: no AnyThread, no STATUS_SET/INUSE, 40-bit counters;
        // the 3 fixed counters CPUID does not enumerate (the decode's quirk)
        // are there, 40 bits wide, with no AnyThread bit and no fourth.
        assert!(!m.wrmsr(0, msr::IA32_PERFEVTSEL0, evsel::ANY));
        assert!(!m.wrmsr(0, msr::IA32_PERF_GLOBAL_STATUS_SET, 1));
        assert_eq!(m.rdmsr(0, msr::IA32_PERF_GLOBAL_INUSE), None);
        assert!(m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0xbbb));
        assert!(!m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0x4));
        assert!(!m.wrmsr(0, msr::IA32_FIXED_CTR_CTRL, 0x1000));
        assert!(m.wrmsr(0, msr::IA32_FIXED_CTR0 + 2, 0xff_ffff_ffff));
        assert!(!m.wrmsr(0, msr::IA32_FIXED_CTR0 + 2, 1 << 40));
        assert_eq!(m.rdmsr(0, msr::IA32_FIXED_CTR0 + 3), None);
        assert!(m.wrmsr(0, msr::IA32_PMC0 + 1, 0xffff_ffff));
        assert_eq!(m.rdmsr(0, msr::IA32_PMC0 + 1), Some(0xff_ffff_ffff));
        assert_eq!(m.rdmsr(0, msr::IA32_PMC0 + 2), None);
        assert_eq!(m.rdmsr(0, msr::IA32_PERF_CAPABILITIES), Some(0), "PDCM");
    }

    #[test]
    fn pentium_msr_semantics() {
        let m = SimPmu::new(&dump("pentium-mmx-tillamook.txt"));
        // CESR: both halves' fields; bits 15:10 and 31:26 (and above) #GP.
        assert!(m.wrmsr(0, msr::P5_CESR, 0x03ff_03ff));
        assert_eq!(m.rdmsr(0, msr::P5_CESR), Some(0x03ff_03ff));
        for bit in [10, 15, 26, 31, 32] {
            assert!(!m.wrmsr(0, msr::P5_CESR, 1 << bit), "bit {bit}");
        }
        // CTR0/CTR1: 40 bits.
        assert!(m.wrmsr(0, msr::P5_CTR1, 0xff_ffff_ffff));
        assert!(!m.wrmsr(0, msr::P5_CTR1, 1 << 40));
        assert_eq!(rdpmc(&m, 1), Ok(0xff_ffff_ffff));
        // No architectural MSRs on a Pentium.
        assert_eq!(m.rdmsr(0, msr::IA32_PMC0), None);
        assert_eq!(m.rdmsr(0, msr::IA32_PERFEVTSEL0), None);
        assert_eq!(m.rdmsr(0, 0x14), None);
        // Without MMX: no RDPMC at all.
        let p54c = SimPmu::new(&dump("pentium-p54c.txt"));
        assert!(p54c.wrmsr(0, msr::P5_CTR0, 5));
        assert_eq!(rdpmc(&p54c, 0), Err(libc::EIO));
        assert_eq!(p54c.rdmsr(0, msr::P5_CTR0), Some(5));
    }

    fn rdpmc(m: &SimPmu, ecx: u32) -> std::result::Result<u64, i32> {
        let mut b = Batch::new();
        b.push(0, Op::RdPmc { ecx });
        m.run(&mut b).unwrap();
        b.result(0)
            .unwrap()
            .value
            .map(|v| v.as_u64().unwrap())
            .map_err(|e| e.0)
    }

    #[test]
    fn rdpmc_index_encoding() {
        let m = SimPmu::new(&dump("icelake-u.txt"));
        assert!(m.wrmsr(0, msr::IA32_FIXED_CTR0 + 3, 42));
        assert!(m.wrmsr(0, msr::IA32_PMC0 + 7, 7));
        assert_eq!(rdpmc(&m, 1 << 30 | 3), Ok(42), "bit 30: fixed counter 3");
        assert_eq!(rdpmc(&m, 7), Ok(7));
        assert_eq!(rdpmc(&m, 8), Err(libc::EIO), "no PMC8");
        assert_eq!(rdpmc(&m, 1 << 30 | 4), Err(libc::EIO), "no fixed 4");
        assert_eq!(rdpmc(&m, 1 << 31), Err(libc::EIO));
        let amd = SimPmu::new(&dump("zen2-matisse.txt"));
        assert!(amd.wrmsr(0, msr::AMD_PERF_CTR0 + 10, 5));
        assert_eq!(rdpmc(&amd, 5), Ok(5));
        assert_eq!(rdpmc(&amd, 6), Err(libc::EIO));
    }

    #[test]
    fn amd_msr_semantics() {
        let m = SimPmu::new(&dump("zen4-raphael.txt"));
        // PERF_CTL: bits 19, 21 and 63:42 but 41:40 reserved.
        assert!(m.wrmsr(0, msr::AMD_PERF_CTL0, 3 << 40 | 0xf_ffd7_ffff));
        assert!(!m.wrmsr(0, msr::AMD_PERF_CTL0, evsel::PC));
        assert!(!m.wrmsr(0, msr::AMD_PERF_CTL0, 1 << 42));
        // PERF_CTR: 48 bits.
        assert!(!m.wrmsr(0, msr::AMD_PERF_CTR0, 1 << 48));
        // PerfMonV2: six counter bits.
        assert!(m.wrmsr(0, msr::AMD_PERF_CNTR_GLOBAL_CTL, 0x3f));
        assert!(!m.wrmsr(0, msr::AMD_PERF_CNTR_GLOBAL_CTL, 0x40));
        assert!(m.wrmsr(0, msr::AMD_PERF_CNTR_GLOBAL_STATUS_SET, 0x21));
        assert!(m.wrmsr(0, msr::AMD_PERF_CNTR_GLOBAL_STATUS_CLR, 0x1));
        assert_eq!(m.rdmsr(0, msr::AMD_PERF_CNTR_GLOBAL_STATUS), Some(0x20));
        // Zen 2 has no PerfMonV2 MSRs.
        let z2 = SimPmu::new(&dump("zen2-matisse.txt"));
        assert_eq!(z2.rdmsr(0, msr::AMD_PERF_CNTR_GLOBAL_CTL), None);
        // GuestOnly alone counts nothing on the (host) model.
        assert!(z2.wrmsr(
            0,
            msr::AMD_PERF_CTL0,
            1 << 40 | evsel::EN | evsel::USR | 0x76
        ));
        assert!(z2.wrmsr(
            0,
            msr::AMD_PERF_CTL0 + 2,
            1 << 41 | evsel::EN | evsel::USR | 0x76
        ));
        z2.execute(0, &[Phase::user(10)]);
        assert_eq!(z2.rdmsr(0, msr::AMD_PERF_CTR0), Some(0));
        assert_eq!(z2.rdmsr(0, msr::AMD_PERF_CTR0 + 2), Some(10));
    }

    #[test]
    fn stop_on_error_cancels_the_rest_of_the_cpu() {
        let m = SimPmu::new(&dump("skylake.txt"));
        let mut b = Batch::new();
        b.stop_on_error(true);
        b.push(0, Op::RdMsr { msr: 0x10 });
        b.push(0, Op::RdTsc);
        m.run(&mut b).unwrap();
        assert_eq!(
            b.result(1).unwrap().value,
            Err(crate::Errno(libc::ECANCELED))
        );
        assert_eq!(b.nr_failed(), 2);
    }

    /// An RMWMSR whose write faults reports what it read and tried to
    /// write, as the module does (`run_op`); one whose read faults, zeros.
    #[test]
    fn a_failed_rmw_reports_what_it_tried() {
        let m = SimPmu::new(&dump("skylake.txt"));
        assert!(m.wrmsr(0, msr::IA32_PERF_GLOBAL_STATUS_SET, 1));
        let mut b = Batch::new();
        // IA32_PERF_GLOBAL_STATUS reads, and #GPs on a write; 0x10 #GPs.
        b.push(
            0,
            Op::RmwMsr {
                msr: msr::IA32_PERF_GLOBAL_STATUS,
                clear: 0,
                set: 2,
            },
        );
        b.push(
            0,
            Op::RmwMsr {
                msr: 0x10,
                clear: 0,
                set: 2,
            },
        );
        m.run(&mut b).unwrap();
        let ops = b.raw_ops();
        assert_eq!((ops[0].status, ops[0].val), (-libc::EIO, [1, 3]));
        assert_eq!((ops[1].status, ops[1].val), (-libc::EIO, [0, 0]));
    }

    /// Timestamps as the kernel gives them: val[1] of each op is the CPU's
    /// TSC after it (a DELAY advances it), and a batch with an op that
    /// returns its own val[1] is refused, naming the op.
    #[test]
    fn timestamps_follow_the_tsc() {
        let m = SimPmu::new(&dump("skylake.txt"));
        let mut b = Batch::new();
        b.timestamps(true);
        b.push(0, Op::RdTsc);
        b.push(0, Op::Delay { ns: 500 });
        b.push(0, Op::RdMsr { msr: 0x10 });
        m.run(&mut b).unwrap();
        let tsc: Vec<_> = b.results().map(|r| r.tsc).collect();
        let t0 = b.result(0).unwrap().value.unwrap().as_u64().unwrap();
        assert_eq!(tsc, [Some(t0), Some(t0 + 500), Some(t0 + 500)]);
        b.push(0, Op::RdTscp);
        let e = m.run(&mut b).unwrap_err();
        assert_eq!((e.errno().0, e.op_index()), (libc::EINVAL, Some(3)));
        assert_eq!(b.err_index(), Some(3));
        b.timestamps(false);
        m.run(&mut b).unwrap();
        assert!(b.results().all(|r| r.tsc.is_none()));
    }
}
