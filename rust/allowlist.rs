// SPDX-License-Identifier: GPL-2.0

//! The allowlist: what a descriptor opened without `CAP_SYS_RAWIO` may do.
//!
//! - **Where it lives.** One immutable list ([`Rules`]: entries sorted by
//!   MSR, and the `allow` lines) behind an `Arc`, in [`CURRENT`]. Loading a
//!   list builds a new `Rules` completely, then swaps the `Arc` under the
//!   lock: whoever takes the lock sees the old list or the new one, never a
//!   mix, and any error leaves the old one in force.
//! - **Fixed at open.** A descriptor opened without `CAP_SYS_RAWIO` keeps the
//!   `Arc` it got at open ([`snapshot`]) for its whole life: a later load
//!   neither widens nor narrows it.
//! - **Loading and reading.** `/dev/msrbatch_allowlist` ([`AllowlistFile`]):
//!   one `write(2)` of the whole text (format: `allowlist_text.rs`, msr-safe's)
//!   replaces the list, and needs `CAP_SYS_RAWIO` at open; reading gives the
//!   canonical text of the list in force when the file was opened.
//! - **Checking a batch.** [`Snapshot::check`] refuses, before anything runs,
//!   the first op outside the rules: `EACCES` for an MSR not listed or an op
//!   not allowed, `EROFS` for a write to an MSR with write mask 0.
//! - **Masked writes.** [`Snapshot::mask_writes`] turns each WRMSR and RMWMSR
//!   under a partial mask into the RMWMSR the rules mean, which the batch
//!   engine runs as it runs any RMWMSR: read, merge and write back to back on
//!   the target CPU with interrupts off. Bits outside the mask keep the MSR's
//!   value whatever the op asked for them (merged, as msr-safe does: a value
//!   read earlier and written back with some bits changed works). [`Masked`]
//!   puts the caller's op fields back before the results are copied out.

#[path = "allowlist_text.rs"]
pub(crate) mod text;

use crate::batch::Rejected;
use crate::uapi::{opcode, Op};
use kernel::{
    fs::{File, Kiocb},
    iov::{IovIterDest, IovIterSource},
    miscdevice::{MiscDevice, MiscDeviceRegistration},
    prelude::*,
    sync::Arc,
};
use text::{Entry, ErrorKind, Extras};

/// One allowlist, immutable once built.
pub(crate) struct Rules {
    /// Sorted by MSR, each MSR once.
    entries: KVVec<Entry>,
    extras: Extras,
}

kernel::sync::global_lock! {
    // SAFETY: `init` initialises it in module init, before any use.
    unsafe(uninit) static CURRENT: Mutex<Option<Arc<Rules>>> = None;
}

/// Initialises the list in force (empty); module init calls it once, before
/// the devices exist.
///
/// # Safety
///
/// Called once, before any other function of this module.
pub(crate) unsafe fn init() {
    // SAFETY: By the function's requirements.
    unsafe { CURRENT.init() };
}

/// Frees the list in force (module exit: no descriptor is open any more).
pub(crate) fn exit() {
    let old = CURRENT.lock().take();
    drop(old);
}

/// The rules a descriptor opened now gets. `None` inside: the empty list.
pub(crate) struct Snapshot(Option<Arc<Rules>>);

/// Takes the list in force.
pub(crate) fn snapshot() -> Snapshot {
    Snapshot(CURRENT.lock().clone())
}

/// The errno of a text error (the codes msr-safe uses for the same errors).
fn text_errno(kind: ErrorKind) -> Error {
    match kind {
        ErrorKind::TooLong => E2BIG,
        ErrorKind::TooLarge => ERANGE,
        ErrorKind::Duplicate(_) => crate::compat::enotuniq(),
        ErrorKind::NoEntry => crate::compat::enomsg(),
        ErrorKind::BadNumber | ErrorKind::BadLine | ErrorKind::UnknownAllow | ErrorKind::Unterminated => {
            EINVAL
        }
    }
}

/// The errno msr-safe's `/dev/cpu/msr_allowlist` gives a text error: as
/// [`text_errno`], but a text that ends inside an entry is `EILSEQ`
/// (msr-safe's "unexpected EOF").
fn msr_safe_errno(kind: ErrorKind) -> Error {
    match kind {
        ErrorKind::Unterminated => crate::compat::eilseq(),
        kind => text_errno(kind),
    }
}

impl Rules {
    /// Parses `text` into a list.
    fn parse(text: &[u8]) -> Result<Rules> {
        Self::parse_with(text, text_errno)
    }

    /// Parses `text` into a list; `errno` names each text error's errno.
    fn parse_with(text: &[u8], errno: fn(ErrorKind) -> Error) -> Result<Rules> {
        let fail = |e: text::ParseError| {
            pr_info!("allowlist refused: line {}: {}\n", e.line, e.kind.message());
            errno(e.kind)
        };
        // Count, allocate, fill: two passes over at most 128 KiB.
        let mut n = 0usize;
        text::parse(text, |_| n += 1).map_err(fail)?;
        let mut entries = KVVec::with_capacity(n, GFP_KERNEL)?;
        let mut lost = false;
        let extras = text::parse(text, |e| lost |= entries.push_within_capacity(e).is_err()).map_err(fail)?;
        if lost {
            return Err(ENOMEM);
        }
        text::sort_entries(&mut entries).map_err(fail)?;
        Ok(Rules { entries, extras })
    }
}

/// Parses `text` and makes it the list in force, atomically; on any error
/// the list in force stays.
pub(crate) fn load(text: &[u8]) -> Result {
    let rules = Rules::parse(text)?;
    text::check_entries(text.len(), rules.entries.len(), rules.extras).map_err(|e| {
        pr_info!("allowlist refused: no entry in {} bytes\n", text.len());
        text_errno(e.kind)
    })?;
    install(rules)
}

/// [`load`] as msr-safe's `/dev/cpu/msr_allowlist` does it: a write of at
/// most 2 bytes empties the list; a text without an MSR is `ENOMSG` (`allow`
/// lines do not count); a text that ends inside an entry is `EILSEQ`; the
/// other errors as [`load`].
pub(crate) fn load_msr_safe(text: &[u8]) -> Result {
    if text.len() <= 2 {
        return install(Rules::parse(b"")?);
    }
    let rules = Rules::parse_with(text, msr_safe_errno)?;
    text::check_entries(text.len(), rules.entries.len(), Extras::default()).map_err(|e| {
        pr_info!("allowlist refused: no MSR in {} bytes\n", text.len());
        text_errno(e.kind)
    })?;
    install(rules)
}

/// Makes `rules` the list in force, atomically.
fn install(rules: Rules) -> Result {
    let new = Arc::new(rules, GFP_KERNEL)?;
    let old = CURRENT.lock().replace(new);
    // The old list is freed here, outside the lock, unless descriptors hold it.
    drop(old);
    Ok(())
}

/// Collects formatted text; an allocation failure is a formatting error.
struct TextBuf(KVVec<u8>);

impl core::fmt::Write for TextBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.extend_from_slice(s.as_bytes(), GFP_KERNEL_ACCOUNT).map_err(|_| core::fmt::Error)
    }
}

/// The write mask of `msr` among `entries` (sorted by MSR), if it is listed.
#[inline(always)]
fn lookup(entries: &[Entry], msr: u32) -> Option<u64> {
    let i = entries.binary_search_by_key(&msr, |e| e.msr).ok()?;
    entries.get(i).map(|e| e.mask)
}

/// What a WRMSR or RMWMSR becomes under write mask `mask` (not 0): its code
/// and arguments. A full mask changes nothing; otherwise an RMWMSR whose
/// clear and set masks are those of the op restricted to the mask (a WRMSR of
/// `v`: clear the mask, set `v & mask`), so `new = (old & !mask) | (v & mask)`.
fn masked(op: &Op, mask: u64) -> (u16, [u64; 2]) {
    match op.op {
        _ if mask == u64::MAX => (op.op, op.arg),
        opcode::WRMSR => (opcode::RMWMSR, [mask, op.arg[0] & mask]),
        _ => (op.op, [op.arg[0] & mask, op.arg[1] & mask]),
    }
}

impl Snapshot {
    fn rules(&self) -> Option<&Rules> {
        self.0.as_deref()
    }

    /// The list's MSRs, sorted (none without a list).
    fn entries(&self) -> &[Entry] {
        self.rules().map_or(&[], |r| &r.entries[..])
    }

    /// The write mask of `msr`, if it is listed.
    pub(crate) fn mask(&self, msr: u32) -> Option<u64> {
        lookup(self.entries(), msr)
    }

    fn allows(&self, bit: u8) -> bool {
        self.rules().is_some_and(|r| r.extras.has(bit))
    }

    /// Whether the list lets the descriptor take a PCE grant (`allow pce`).
    pub(crate) fn allows_pce(&self) -> bool {
        self.allows(Extras::PCE)
    }

    /// Whether the rules let the descriptor poll `op`'s source: a listed
    /// MSR, the TSC, or a counter under `allow rdpmc` (`EACCES` otherwise).
    fn may_poll(&self, op: &Op) -> Result {
        use crate::uapi::poll;
        if op.flags & poll::F_TSC != 0 {
            Ok(())
        } else if op.flags & poll::F_RDPMC != 0 {
            if self.allows(Extras::RDPMC) { Ok(()) } else { Err(EACCES) }
        } else {
            self.mask(op.reg).map(|_| ()).ok_or(EACCES)
        }
    }

    /// Refuses the first op of `ops` (validated by `batch::plan`) that the
    /// rules do not allow: `EACCES` (MSR not listed; RDPMC or RDCR4 without
    /// its `allow` line), `EROFS` (a write to an MSR with write mask 0).
    #[inline(always)]
    pub(crate) fn check(&self, ops: &[Op]) -> Result<(), Rejected> {
        // One look at the list for all the ops, and the commonest op, a read
        // of a listed MSR, decided in a loop that calls nothing: this runs
        // for every op of a confined plain batch.
        let entries = self.entries();
        // The MSR of the last read found listed (before the first, none: MSR
        // numbers are `u32`s). Batches read the same MSRs on each CPU, or
        // again and again on one: a read of it again needs no search.
        let mut listed = u64::MAX;
        // (A loop, not a closure that `all` would call: it was not inlined.)
        for op in ops {
            if op.op != opcode::RDMSR {
                return self.check_from(entries, ops);
            }
            let msr = u64::from(op.reg);
            if msr != listed {
                if lookup(entries, op.reg).is_none() {
                    return self.check_from(entries, ops);
                }
                listed = msr;
            }
        }
        // Every op a read of a listed MSR. (A refused batch is checked again
        // from its first op: this loop does not count them.)
        Ok(())
    }

    /// [`Snapshot::check`] of a batch that has an op other than a read of
    /// a listed MSR: one [`Snapshot::verdict`] per op, from the first.
    #[inline(never)]
    fn check_from(&self, entries: &[Entry], ops: &[Op]) -> Result<(), Rejected> {
        for (i, op) in ops.iter().enumerate() {
            self.verdict(entries, op).map_err(|err| Rejected {
                err,
                index: i as u32,
            })?;
        }
        Ok(())
    }

    /// Whether the rules (their MSRs: `entries`) allow `op` (see
    /// [`Snapshot::check`]).
    fn verdict(&self, entries: &[Entry], op: &Op) -> Result {
        match op.op {
            opcode::RDMSR => lookup(entries, op.reg).map(|_| ()).ok_or(EACCES),
            opcode::WRMSR | opcode::RMWMSR => match lookup(entries, op.reg) {
                None => Err(EACCES),
                Some(0) => Err(EROFS),
                Some(_) => Ok(()),
            },
            opcode::RDPMC if self.allows(Extras::RDPMC) => Ok(()),
            opcode::RDCR4 if self.allows(Extras::RDCR4) => Ok(()),
            opcode::RDTSC | opcode::RDTSCP | opcode::CPUID | opcode::DELAY => Ok(()),
            // A POLL reads what a read of its source may read.
            opcode::POLL => self.may_poll(op),
            _ => Err(EACCES),
        }
    }

    /// Rewrites every write of `ops` (all passed [`Snapshot::check`]) into
    /// what its write mask allows (see [`masked`]); returns what to put back.
    pub(crate) fn mask_writes(&self, ops: &mut [Op]) -> Result<Masked> {
        let mut saved = KVVec::new();
        for (i, op) in ops.iter_mut().enumerate() {
            if !crate::batch::is_write(op) {
                continue;
            }
            // A write the rules do not allow never gets here; fail closed.
            let mask = self.mask(op.reg).ok_or(EACCES)?;
            let (code, arg) = masked(op, mask);
            if (code, arg) != (op.op, op.arg) {
                saved.push((i, op.op, op.arg), GFP_KERNEL_ACCOUNT)?;
                op.op = code;
                op.arg = arg;
            }
        }
        Ok(Masked(saved))
    }

    /// The list as msr-safe's `/dev/cpu/msr_allowlist` prints it: its MSRs
    /// only (msr-safe's readers know no `allow` line), in the order of the
    /// text they were loaded from, as msr-safe keeps them.
    pub(crate) fn render_msr_safe(&self) -> Result<KVVec<u8>> {
        let mut buf = TextBuf(KVVec::new());
        let entries = self.rules().map_or(&[][..], |r| &r.entries[..]);
        let mut in_text_order = KVVec::with_capacity(entries.len(), GFP_KERNEL_ACCOUNT)?;
        in_text_order.extend_from_slice(entries, GFP_KERNEL_ACCOUNT)?;
        // Each entry has a line of its own.
        text::heapsort::sort_by_key(&mut in_text_order, |e| e.line);
        text::render_msr_safe(&mut buf, &in_text_order).map_err(|_| ENOMEM)?;
        Ok(buf.0)
    }

    /// The canonical text of the list.
    fn render(&self) -> Result<KVVec<u8>> {
        let mut buf = TextBuf(KVVec::new());
        let (entries, extras) = match self.rules() {
            Some(r) => (&r.entries[..], r.extras),
            None => (&[][..], Extras::default()),
        };
        text::render(&mut buf, entries, extras).map_err(|_| ENOMEM)?;
        Ok(buf.0)
    }
}

/// The caller's fields of the ops [`Snapshot::mask_writes`] rewrote: index,
/// op code and arguments.
pub(crate) struct Masked(KVVec<(usize, u16, [u64; 2])>);

impl Masked {
    /// Whether no op was rewritten.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Puts the caller's op codes and arguments back after the run. A WRMSR
    /// reports nothing (`val` zeroed, as the ABI says) but, with `stamps`
    /// (`MSRBATCH_F_TIMESTAMPS`), its timestamp in `val[1]`, as an unmasked
    /// one does; an RMWMSR keeps the value read and the value written (the
    /// merged one).
    pub(crate) fn unmask(self, ops: &mut [Op], stamps: bool) {
        for &(i, code, arg) in self.0.iter() {
            if let Some(op) = ops.get_mut(i) {
                op.op = code;
                op.arg = arg;
                if code == opcode::WRMSR {
                    op.val = [0, if stamps { op.val[1] } else { 0 }];
                }
            }
        }
    }
}

/// An open `/dev/msrbatch_allowlist`: the text of the list in force at open,
/// when opened for reading.
pub(crate) struct AllowlistFile {
    text: KVVec<u8>,
}

#[vtable]
impl MiscDevice for AllowlistFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        crate::helpers::file_has_own_fops(file)?;
        let access = crate::policy::Access::of(file);
        // Loading a list grants MSR access: it takes what raw access takes.
        if access.write && !crate::policy::has_rawio() {
            return Err(EPERM);
        }
        let text = if access.read { snapshot().render()? } else { KVVec::new() };
        Ok(KBox::pin(AllowlistFile { text }, GFP_KERNEL_ACCOUNT)?)
    }

    fn read_iter(mut kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterDest<'_>) -> Result<usize> {
        let me = kiocb.file();
        iov.simple_read_from_buffer(kiocb.ki_pos_mut(), &me.text)
    }

    /// The whole list in one write at offset 0 (a second write to the same
    /// open file, e.g. the second chunk of a text too long for one, is
    /// `EINVAL`).
    fn write_iter(mut kiocb: Kiocb<'_, Self::Ptr>, iov: &mut IovIterSource<'_>) -> Result<usize> {
        if kiocb.ki_pos() != 0 {
            return Err(EINVAL);
        }
        let len = iov.len();
        if len > text::MAX_TEXT {
            return Err(E2BIG);
        }
        let mut buf = KVVec::with_capacity(len, GFP_KERNEL_ACCOUNT)?;
        if iov.copy_from_iter_vec(&mut buf, GFP_KERNEL_ACCOUNT)? != len {
            return Err(EFAULT);
        }
        load(&buf)?;
        *kiocb.ki_pos_mut() = len as i64;
        Ok(len)
    }
}

#[kunit_tests(msrbatch_allowlist)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Result<Snapshot> {
        Ok(Snapshot(Some(Arc::new(Rules::parse(text.as_bytes())?, GFP_KERNEL)?)))
    }

    fn op(code: u16, reg: u32, arg: [u64; 2]) -> Op {
        Op {
            op: code,
            reg,
            arg,
            ..Op::default()
        }
    }

    const LIST: &str = "# MSR # Write Mask # Comment\n\
        0x00000010 0x0000000000000000 # \"TSC\"\n\
        0xC0000103 0x00000000FFFFF000 # \"TSC_AUX\"\n\
        0x00000199 0xffffffffffffffff\n";

    #[test]
    fn parse_errors_are_msr_safes_errnos() -> Result {
        let cases = [
            ("0x10 0\n0x10 1\n", crate::compat::enotuniq()),
            ("0x10\n", EINVAL),
            ("0x10 0xq\n", EINVAL),
            ("0x10 0", EINVAL),
            ("allow wrmsr\n", EINVAL),
            ("0x100000000 0\n", ERANGE),
        ];
        for (text, err) in cases {
            assert!(Rules::parse(text.as_bytes()).err() == Some(err));
        }
        let empty = Rules::parse(b"# nothing\n")?;
        assert!(empty.entries.is_empty());
        Ok(())
    }

    /// (helper-24's review.) `Snapshot::check` against one verdict per op, in order, on
    /// random batches of reads of listed and unlisted MSRs and writes.
    #[test]
    fn check_matches_its_verdicts_op_by_op() -> Result {
        let r = rules(LIST)?;
        let entries = r.entries();
        let mut seed = crate::helpers::XorShift(0x2545_f491_4f6c_dd1d);
        let mut rnd = move |n: u64| seed.below(n);
        let pool = [
            op(opcode::RDMSR, 0x10, [0, 0]),
            op(opcode::RDMSR, 0x10, [0, 0]),
            op(opcode::RDMSR, 0xc000_0103, [0, 0]),
            op(opcode::RDMSR, 0x199, [0, 0]),
            op(opcode::RDMSR, 0x11, [0, 0]),
            op(opcode::WRMSR, 0x10, [0, 0]),
            op(opcode::WRMSR, 0xc000_0103, [5, 0]),
            op(opcode::RDPMC, 0x10, [0, 0]),
            op(opcode::RDTSC, 0, [0, 0]),
        ];
        let mut ops = KVVec::new();
        for _ in 0..5000 {
            ops.clear();
            let n = 1 + rnd(12);
            let bad = 1 + rnd(30);
            for _ in 0..n {
                let k = if rnd(bad) == 0 { rnd(pool.len() as u64) } else { rnd(4) };
                ops.push(pool[k as usize], GFP_KERNEL)?;
            }
            let want = ops
                .iter()
                .enumerate()
                .find_map(|(i, o)| r.verdict(entries, o).err().map(|err| Rejected { err, index: i as u32 }));
            assert!(r.check(&ops).err() == want);
        }
        Ok(())
    }

    #[test]
    fn check_names_the_first_op_outside_the_rules() -> Result {
        let r = rules(LIST)?;
        let ok = [
            op(opcode::RDMSR, 0x10, [0, 0]),
            op(opcode::WRMSR, 0xc000_0103, [5, 0]),
            op(opcode::RMWMSR, 0x199, [1, 2]),
            op(opcode::RDTSC, 0, [0, 0]),
            op(opcode::RDTSCP, 0, [0, 0]),
            op(opcode::CPUID, 0, [0, 0]),
            op(opcode::DELAY, 0, [10, 0]),
        ];
        assert!(r.check(&ok).is_ok());
        let refused = [
            (op(opcode::RDMSR, 0x11, [0, 0]), EACCES),
            (op(opcode::WRMSR, 0x10, [0, 0]), EROFS),
            (op(opcode::RMWMSR, 0x10, [1, 0]), EROFS),
            (op(opcode::WRMSR, 0x1b, [0, 0]), EACCES),
            (op(opcode::RDPMC, 0, [0, 0]), EACCES),
            (op(opcode::RDCR4, 0, [0, 0]), EACCES),
        ];
        for (bad, err) in refused {
            let ops = [ok[0], ok[3], bad, ok[1]];
            assert!(r.check(&ops) == Err(Rejected { err, index: 2 }));
        }
        // The allow lines; and the empty list allows no MSR at all.
        let more = rules("allow rdpmc\nallow rdcr4\n")?;
        assert!(more.check(&[op(opcode::RDPMC, 0, [0, 0]), op(opcode::RDCR4, 0, [0, 0])]).is_ok());
        assert!(!more.allows_pce() && rules("allow pce\n")?.allows_pce());
        // A POLL reads what its source's read may: a listed MSR, the TSC,
        // a counter under `allow rdpmc`.
        use crate::uapi::poll;
        let poll_of = |flags: u16, reg| Op { flags: flags | (1 << poll::TIMEOUT_SHIFT), ..op(opcode::POLL, reg, [1, 0]) };
        assert!(r.check(&[poll_of(0, 0x10), poll_of(poll::F_TSC, 0)]).is_ok());
        for bad in [poll_of(0, 0x11), poll_of(poll::F_RDPMC, 0)] {
            assert!(r.check(&[ok[0], bad]) == Err(Rejected { err: EACCES, index: 1 }));
        }
        assert!(more.check(&[poll_of(poll::F_RDPMC, 0)]).is_ok());
        // The loop of listed reads stops at an unlisted one, whatever its place.
        let reads = [ok[0], ok[0], op(opcode::RDMSR, 0x11, [0, 0]), ok[0]];
        assert!(r.check(&reads[..2]).is_ok());
        assert!(r.check(&reads[1..]) == Err(Rejected { err: EACCES, index: 1 }));
        assert!(r.check(&reads) == Err(Rejected { err: EACCES, index: 2 }));
        // A read of the MSR found listed just before needs no search, but
        // another MSR does, listed or not, also after a write or a read of
        // an MSR that is listed too.
        let aux = op(opcode::RDMSR, 0xc000_0103, [0, 0]);
        assert!(r.check(&[ok[0], ok[0], aux, aux, ok[0]]).is_ok());
        assert!(r.check(&[ok[0], ok[1], reads[2]]) == Err(Rejected { err: EACCES, index: 2 }));
        assert!(r.check(&[ok[0], aux, ok[0], reads[2], ok[0]]) == Err(Rejected { err: EACCES, index: 3 }));
        let none = Snapshot(None);
        assert!(none.check(&ok[3..]).is_ok());
        assert!(none.check(&ok[..1]) == Err(Rejected { err: EACCES, index: 0 }));
        Ok(())
    }

    #[test]
    fn masked_writes_change_only_the_mask_and_are_put_back() -> Result {
        let r = rules(LIST)?;
        let aux = 0xc000_0103;
        let mut ops = [
            op(opcode::WRMSR, aux, [0x0000_0100_abcd_efff, 0]),
            op(opcode::RMWMSR, aux, [u64::MAX, 0x0000_0001_0000_2001]),
            op(opcode::WRMSR, 0x199, [7, 0]),
            op(opcode::RDMSR, 0x10, [0, 0]),
        ];
        let orig = ops;
        let saved = r.mask_writes(&mut ops)?;
        // WRMSR v: new = (old & !mask) | (v & mask).
        assert!((ops[0].op, ops[0].arg) == (opcode::RMWMSR, [0xffff_f000, 0xabcd_e000]));
        // RMWMSR: clear and set restricted to the mask.
        assert!((ops[1].op, ops[1].arg) == (opcode::RMWMSR, [0xffff_f000, 0x2000]));
        // A full mask and a read change nothing.
        assert!(ops[2] == orig[2] && ops[3] == orig[3]);
        // The merge on a sample old value: outside bits kept.
        let (old, [clear, set]) = (0x0000_0000_1234_5003u64, ops[0].arg);
        assert!(((old & !clear) | set) == 0xabcd_e003);
        // Results as the engine leaves them, then the caller's fields back.
        ops[0].val = [old, 0xabcd_e003];
        ops[1].val = [old, 0x0000_2003];
        let mut stamped = ops;
        let again = r.mask_writes(&mut orig.clone())?;
        saved.unmask(&mut ops, false);
        assert!((ops[0].op, ops[0].arg, ops[0].val) == (opcode::WRMSR, orig[0].arg, [0, 0]));
        assert!((ops[1].op, ops[1].arg, ops[1].val) == (opcode::RMWMSR, orig[1].arg, [old, 0x2003]));
        // With timestamps a WRMSR keeps its stamp in val[1] (the engine wrote
        // it over the value written).
        stamped[0].val = [old, 0x1234];
        again.unmask(&mut stamped, true);
        assert!((stamped[0].op, stamped[0].val) == (opcode::WRMSR, [0, 0x1234]));
        Ok(())
    }

    #[test]
    fn msr_safe_node_errnos_and_text() -> Result {
        let parse = |t: &str| Rules::parse_with(t.as_bytes(), msr_safe_errno).err();
        assert!(parse("0x10 0") == Some(crate::compat::eilseq()));
        assert!(parse("0x10 0\n0x10 1\n") == Some(crate::compat::enotuniq()));
        assert!(parse("0x10 0xq\n") == Some(EINVAL));
        assert!(parse("0x100000000 0\n") == Some(ERANGE));
        // What msr-safe's /dev/cpu/msr_allowlist prints: no allow lines.
        // What msr-safe's /dev/cpu/msr_allowlist prints: its header, the
        // entries in the text's order, no allow lines; nothing when empty.
        let text = rules("allow pce\n0x199 0xffff\n0x10 0\n")?.render_msr_safe()?;
        let want = b"#MSR       Write mask        \n0x00000199 0x000000000000FFFF\n0x00000010 0x0000000000000000\n";
        assert!(text[..] == want[..]);
        assert!(Snapshot(None).render_msr_safe()?.is_empty());
        // No entry: ENOMSG (allow lines are no MSR), 2 bytes empty the list.
        for t in ["# 0x00000010 0x0000000000000000 # \"TSC\"\n", "allow pce\n"] {
            assert!(load_msr_safe(t.as_bytes()) == Err(crate::compat::enomsg()));
        }
        Ok(())
    }

    #[test]
    fn render_reads_back() -> Result {
        let r = rules("allow pce\n0x199 0xffff\n0x10 0\n")?;
        let text = r.render()?;
        let again = Rules::parse(&text)?;
        let first = r.rules().ok_or(EINVAL)?;
        assert!(again.extras == first.extras && again.entries.len() == 2);
        for (a, b) in again.entries.iter().zip(first.entries.iter()) {
            assert!((a.msr, a.mask) == (b.msr, b.mask));
        }
        let want = b"# msrbatch allowlist: 2 MSRs\n# MSR      Write mask\n\
            0x00000010 0x0000000000000000\n0x00000199 0x000000000000FFFF\nallow pce\n";
        assert!(text[..] == want[..]);
        Ok(())
    }
}
