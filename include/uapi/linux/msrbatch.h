/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * msrbatch: batched, per-CPU atomic access to x86 MSRs, performance
 * counters, the TSC and CPUID through /dev/msrbatch.
 *
 * This header is the single definition of the ABI. The layout is identical
 * for 32-bit and 64-bit callers (every field has a fixed width, user
 * pointers travel as __u64), so compat callers need no translation.
 *
 * See Documentation/abi.md for the full description of every field, op,
 * flag, limit and errno.
 */
#ifndef _UAPI_LINUX_MSRBATCH_H
#define _UAPI_LINUX_MSRBATCH_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define MSRBATCH_ABI_VERSION		1

/* Limits (also reported by MSRBATCH_IOC_INFO). */
#define MSRBATCH_MAX_OPS		65536
#define MSRBATCH_MAX_DELAY_NS		1000000		/* one DELAY op */
#define MSRBATCH_MAX_CPU_DELAY_NS	10000000	/* all DELAY ops and POLL
							 * timeouts of one CPU
							 */
#define MSRBATCH_MAX_POLL_NS		2000000		/* one POLL's timeout */
/*
 * MSRBATCH_MAX_CPU_BUSY_NS bounds the time each CPU spends running msrbatch
 * ops with interrupts off, for all batches together: every CPU has a credit
 * of at most 4/5 of it, which grows by 1/5 of the time that passes and
 * shrinks by the time the CPU spends on a share of a batch (a synchronised
 * start's wait included, for descriptors opened without CAP_SYS_RAWIO). A
 * share that starts with credit c may start ops for 5c/4 (it earns 1/5 back
 * while it runs); ops not started by then get -ETIME. So a CPU with full
 * credit runs one share for MSRBATCH_MAX_CPU_BUSY_NS, shares run back to
 * back (several callers' batches queued on one CPU) split it between them,
 * and over any span of time T a CPU spends at most 4/5 of it plus T/5 on
 * shares, plus the op each share was running when its time ran out. The
 * credit below 3/5 of MSRBATCH_MAX_CPU_BUSY_NS is kept for descriptors
 * opened with CAP_SYS_RAWIO: one opened without it may start ops for
 * 5(c - 3B/5)/4 only (B: MSRBATCH_MAX_CPU_BUSY_NS; B/4 with full credit).
 */
#define MSRBATCH_MAX_CPU_BUSY_NS	20000000

/* Op codes (struct msrbatch_op.op). 0 is never valid. */
#define MSRBATCH_OP_RDMSR		1	/* val[0] = MSR[reg] */
#define MSRBATCH_OP_WRMSR		2	/* MSR[reg] = arg[0] */
#define MSRBATCH_OP_RMWMSR		3	/* MSR[reg] = (old & ~arg[0]) | arg[1];
						 * val[0] = old, val[1] = new
						 */
#define MSRBATCH_OP_RDPMC		4	/* val[0] = RDPMC(ECX = reg) */
#define MSRBATCH_OP_RDTSC		5	/* val[0] = TSC */
#define MSRBATCH_OP_RDTSCP		6	/* val[0] = TSC, val[1] = TSC_AUX */
#define MSRBATCH_OP_CPUID		7	/* leaf reg, subleaf arg[0];
						 * val[0] = eax | ebx << 32,
						 * val[1] = ecx | edx << 32
						 */
#define MSRBATCH_OP_DELAY		8	/* busy-wait arg[0] ns;
						 * val[0] = TSC ticks elapsed
						 */
#define MSRBATCH_OP_RDCR4		9	/* val[0] = CR4 of this CPU */
/*
 * MSRBATCH_OP_POLL: read a source again and again, interrupts off, until
 * (value & arg[0]) differs from the first read's (or, with
 * MSRBATCH_POLL_F_EQUAL, equals arg[1]), or its timeout (in @flags) or the
 * CPU's busy time runs out (status -ETIMEDOUT, the outputs still written).
 * The source is MSR reg, or with MSRBATCH_POLL_F_RDPMC counter reg (RDPMC),
 * or with MSRBATCH_POLL_F_TSC the TSC (reg 0).
 * val[0] = the value of the last read (the one that saw the change);
 * val[1] = the TSC of that read, or with MSRBATCH_POLL_F_COUNT the number of
 * reads << 32 | the TSC ticks from the first read to the last (at most
 * 0xffffffff).
 */
#define MSRBATCH_OP_POLL		10
#define MSRBATCH_OP_MAX			MSRBATCH_OP_POLL

/* struct msrbatch_op.flags of a POLL: bits 0-3, and the timeout in bits 4-15. */
#define MSRBATCH_POLL_F_EQUAL		(1U << 0)	/* until (value & arg[0]) == arg[1] */
#define MSRBATCH_POLL_F_RDPMC		(1U << 1)	/* source: RDPMC(ECX = reg) */
#define MSRBATCH_POLL_F_TSC		(1U << 2)	/* source: the TSC; reg 0 */
#define MSRBATCH_POLL_F_COUNT		(1U << 3)	/* val[1]: reads and ticks */
#define MSRBATCH_POLL_F_ALL		(MSRBATCH_POLL_F_EQUAL | \
					 MSRBATCH_POLL_F_RDPMC | \
					 MSRBATCH_POLL_F_TSC | \
					 MSRBATCH_POLL_F_COUNT)
/*
 * The timeout in microseconds, 1 .. MSRBATCH_MAX_POLL_NS / 1000, in bits
 * 4-15 of a POLL's flags: flags = MSRBATCH_POLL_F_* | MSRBATCH_POLL_TIMEOUT_US(us).
 */
#define MSRBATCH_POLL_TIMEOUT_SHIFT	4
#define MSRBATCH_POLL_TIMEOUT_US(us)	((us) << MSRBATCH_POLL_TIMEOUT_SHIFT)

/* Batch flags (struct msrbatch_batch.flags). */
#define MSRBATCH_F_STOP_ON_ERROR	(1U << 0)	/* per CPU: the ops after
							 * a failed one get
							 * -ECANCELED
							 */
/*
 * MSRBATCH_F_SYNC_START: every target CPU waits, interrupts off, until all
 * have arrived, then all start together; ETIMEDOUT (nothing ran) if one does
 * not arrive within MSRBATCH_SYNC_TIMEOUT_NS, has no busy credit left, or,
 * on a descriptor opened without CAP_SYS_RAWIO, waits longer than its credit
 * allows (there the wait is part of the CPU's share: charged, and what is
 * left of it after the wait is the ops'; with CAP_SYS_RAWIO it is not).
 * MSRBATCH_F_TIMESTAMPS: val[1] of every op is the TSC right after it ran;
 * not with RDTSCP, CPUID, RMWMSR, POLL (EINVAL).
 */
#define MSRBATCH_F_SYNC_START	(1U << 1)
#define MSRBATCH_F_TIMESTAMPS	(1U << 2)
#define MSRBATCH_F_ALL			(MSRBATCH_F_STOP_ON_ERROR | \
					 MSRBATCH_F_SYNC_START | \
					 MSRBATCH_F_TIMESTAMPS)

/* How long a CPU of a MSRBATCH_F_SYNC_START batch waits for the others. */
#define MSRBATCH_SYNC_TIMEOUT_NS	20000000

/* Batch out_flags (struct msrbatch_batch.out_flags). */
#define MSRBATCH_OUT_RAN		(1U << 0)	/* the ops were executed */

/* err_index when no single op is to blame. */
#define MSRBATCH_NO_INDEX		0xffffffffU

/**
 * struct msrbatch_op - one operation on one CPU (48 bytes)
 * @op:     MSRBATCH_OP_* code.
 * @flags:  POLL: MSRBATCH_POLL_F_* and MSRBATCH_POLL_TIMEOUT_US(); other
 *          ops: must be 0.
 * @cpu:    logical CPU number the op runs on.
 * @reg:    MSR index (RDMSR, WRMSR, RMWMSR), counter selector in ECX
 *          (RDPMC; bit 30 selects Intel fixed counters) or CPUID leaf.
 *          Must be 0 for ops that take no register.
 * @status: out: 0, or a negative errno for this op (-EIO: the instruction
 *          faulted; -ECANCELED: not run after an earlier failure on the
 *          same CPU with MSRBATCH_F_STOP_ON_ERROR; -ETIME: not run, the
 *          CPU's busy credit ran out, see MSRBATCH_MAX_CPU_BUSY_NS;
 *          -ETIMEDOUT: a POLL saw no change in time).
 *          Ignored on input.
 * @arg:    inputs; entries an op does not use must be 0.
 * @val:    outputs; ignored on input, zeroed for entries an op does not set.
 */
struct msrbatch_op {
	__u16 op;
	__u16 flags;
	__u32 cpu;
	__u32 reg;
	__s32 status;
	__u64 arg[2];
	__u64 val[2];
};

/**
 * struct msrbatch_batch - argument of MSRBATCH_IOC_BATCH (48 bytes)
 * @version:   MSRBATCH_ABI_VERSION.
 * @flags:     MSRBATCH_F_* flags; unknown bits must be 0.
 * @nr_ops:    number of entries at @ops, 1..MSRBATCH_MAX_OPS.
 * @nr_failed: out: number of ops whose status is not 0.
 * @ops:       user address of struct msrbatch_op[@nr_ops].
 * @err_index: out: when the ioctl fails validating an op, that op's index,
 *             else MSRBATCH_NO_INDEX.
 * @out_flags: out: MSRBATCH_OUT_* bits; ignored on input.
 * @reserved0: must be 0.
 * @start_spread: out: for a batch on several CPUs, the TSC ticks between
 *             the first and the last CPU starting its ops (smaller with
 *             MSRBATCH_F_SYNC_START); 0 on one CPU. Ignored on input.
 */
struct msrbatch_batch {
	__u32 version;
	__u32 flags;
	__u32 nr_ops;
	__u32 nr_failed;
	__u64 ops;
	__u32 err_index;
	__u32 out_flags;
	__u64 reserved0;
	__u64 start_spread;
};

/**
 * struct msrbatch_info - argument of MSRBATCH_IOC_INFO (64 bytes, out)
 * @version:          MSRBATCH_ABI_VERSION of the running module.
 * @max_ops:          MSRBATCH_MAX_OPS.
 * @max_delay_ns:     MSRBATCH_MAX_DELAY_NS.
 * @max_cpu_delay_ns: MSRBATCH_MAX_CPU_DELAY_NS.
 * @ops_supported:    bit N set when op code N is supported.
 * @flags_supported:  MSRBATCH_F_* bits the module accepts.
 * @max_cpu_busy_ns:  MSRBATCH_MAX_CPU_BUSY_NS.
 * @reserved:         0.
 */
struct msrbatch_info {
	__u32 version;
	__u32 max_ops;
	__u32 max_delay_ns;
	__u32 max_cpu_delay_ns;
	__u64 ops_supported;
	__u32 flags_supported;
	__u32 max_cpu_busy_ns;
	__u64 reserved[4];
};

/**
 * struct msrbatch_prepare - argument of MSRBATCH_IOC_PREPARE (48 bytes)
 * @version:     MSRBATCH_ABI_VERSION.
 * @flags:       MSRBATCH_F_* batch flags; unknown bits must be 0.
 * @nr_ops:      number of entries at @ops, 1..MSRBATCH_MAX_OPS.
 * @handle:      out: the prepared batch's handle, for MSRBATCH_IOC_RUN and
 *               MSRBATCH_IOC_UNPREPARE.
 * @ops:         user address of struct msrbatch_op[@nr_ops]; read once.
 * @mmap_offset: out: mmap() the descriptor at this offset to see the
 *               results, struct msrbatch_result[@nr_ops].
 * @mmap_size:   out: the size of that mapping (whole pages).
 * @err_index:   out: when the ioctl fails validating an op, that op's index,
 *               else MSRBATCH_NO_INDEX.
 * @reserved:    must be 0.
 */
struct msrbatch_prepare {
	__u32 version;
	__u32 flags;
	__u32 nr_ops;
	__u32 handle;
	__u64 ops;
	__u64 mmap_offset;
	__u64 mmap_size;
	__u32 err_index;
	__u32 reserved;
};

/**
 * struct msrbatch_result - one op's outputs in a prepared batch's mapping (24 bytes)
 * @status:   as struct msrbatch_op's, written by every run.
 * @reserved: 0.
 * @val:      as struct msrbatch_op's.
 */
struct msrbatch_result {
	__s32 status;
	__u32 reserved;
	__u64 val[2];
};

/* Prepared batches a descriptor may hold at once; each mapping's stride. */
#define MSRBATCH_MAX_PREPARED		64
#define MSRBATCH_PREPARED_STRIDE	(2U << 20)

/*
 * Samplers (Documentation/sampling.md): MSRBATCH_IOC_SAMPLE starts, from a
 * prepared batch of this descriptor whose ops only read, a kernel timer on
 * every CPU the batch names. Every period each of those CPUs runs its ops,
 * interrupts off, and appends a record to a ring that the caller maps from
 * the sampler descriptor the ioctl returns (O_RDWR | O_CLOEXEC). The sampler
 * runs until MSRBATCH_SAMPLER_IOC_STOP on that descriptor or its last
 * close; the device descriptor and the prepared batch may be closed and
 * freed meanwhile (the sampler keeps its own copy of the ops).
 */
#define MSRBATCH_SAMPLE_MIN_PERIOD_NS	100000ULL	/* 100 us */
#define MSRBATCH_SAMPLE_MAX_PERIOD_NS	60000000000ULL	/* 60 s */
#define MSRBATCH_SAMPLE_MAX_OPS		64	/* ops of one CPU per sample */
#define MSRBATCH_SAMPLE_MAX_RING_PAGES	1024	/* data pages of one ring */
#define MSRBATCH_SAMPLE_MAX_OPS_PER_SEC	64000	/* all samplers' ops on one CPU */
/* Of them, what samplers made by descriptors without CAP_SYS_RAWIO may take. */
#define MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED	32000
/* All samplers' timer expiries a second on one CPU, and the confined ones' share. */
#define MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC	20000
#define MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC_CONFINED	10000
#define MSRBATCH_MAX_SAMPLERS		64	/* until their files are released, system-wide */
#define MSRBATCH_MAX_SAMPLERS_CONFINED	16	/* of them, made by descriptors without
						 * CAP_SYS_RAWIO
						 */

/**
 * struct msrbatch_sample_req - argument of MSRBATCH_IOC_SAMPLE (48 bytes)
 * @version:    MSRBATCH_ABI_VERSION.
 * @flags:      0.
 * @handle:     a prepared batch of this descriptor. Its ops may be RDMSR,
 *              RDPMC, RDTSC, RDTSCP and CPUID (others, POLL too: EINVAL, err_index
 *              names the op), at most MSRBATCH_SAMPLE_MAX_OPS per CPU (E2BIG).
 *              Its batch flags are ignored.
 * @ring_pages: pages of the ring's data area: a power of two (EINVAL), at
 *              most MSRBATCH_SAMPLE_MAX_RING_PAGES (E2BIG).
 * @period_ns:  MSRBATCH_SAMPLE_MIN_PERIOD_NS..MSRBATCH_SAMPLE_MAX_PERIOD_NS
 *              (ERANGE), and long enough that no CPU runs more than
 *              MSRBATCH_SAMPLE_MAX_OPS_PER_SEC ops a second (for a
 *              descriptor without CAP_SYS_RAWIO,
 *              MSRBATCH_SAMPLE_MAX_OPS_PER_SEC_CONFINED) (ERANGE, err_index
 *              names that CPU's first op); EBUSY when, with the other
 *              samplers, a CPU would run more ops, or take more timer
 *              expiries (one per sampler and period), than
 *              MSRBATCH_SAMPLE_MAX_OPS_PER_SEC and
 *              MSRBATCH_SAMPLE_MAX_EXPIRIES_PER_SEC allow all samplers, or
 *              the _CONFINED limits allow confined ones together.
 * @watermark:  poll() reports the sampler readable (EPOLLIN) once this many
 *              bytes are unread; 0 means one record. Less than the data
 *              area (EINVAL).
 * @err_index:  out: the op blamed, else MSRBATCH_NO_INDEX.
 * @mmap_size:  out: mmap() the sampler descriptor at offset 0 with this size
 *              (or less) and PROT_READ | PROT_WRITE: one page of struct
 *              msrbatch_ring, then the data area.
 * @reserved:   must be 0.
 */
struct msrbatch_sample_req {
	__u32 version;
	__u32 flags;
	__u32 handle;
	__u32 ring_pages;
	__u64 period_ns;
	__u32 watermark;
	__u32 err_index;
	__u64 mmap_size;
	__u64 reserved;
};

#define MSRBATCH_RING_VERSION		1
#define MSRBATCH_RING_STOPPED		(1U << 0)	/* struct msrbatch_ring.flags */

/**
 * struct msrbatch_ring - the first page of a sampler's mapping
 * @version:     MSRBATCH_RING_VERSION.
 * @flags:       MSRBATCH_RING_STOPPED once no CPU will append again.
 * @data_offset: where the data area starts, from the mapping's start.
 * @data_size:   its size in bytes (a power of two).
 * @period_ns:   the sampling period.
 * @epoch_ns:    CLOCK_MONOTONIC time of period 0; period N is due at
 *               @epoch_ns + N * @period_ns on every CPU.
 * @lost:        records not appended because the ring was full, in all.
 * @data_head:   written by the kernel: bytes ever appended. Load it with
 *               acquire semantics, then read the records below it.
 * @data_tail:   written by the reader: bytes ever consumed. Store it with
 *               release semantics after reading; the kernel never appends
 *               over unread bytes.
 *
 * Every other field is written by the kernel only and is constant except
 * @flags, @lost and @data_head. Record N starts at data offset
 * (position & (@data_size - 1)); records are 16-byte aligned (their @size is
 * a multiple of 16: a record may end in padding) and never wrap around the
 * end of the data area (a MSRBATCH_REC_PAD record fills the rest).
 */
struct msrbatch_ring {
	__u32 version;
	__u32 flags;
	__u64 data_offset;
	__u64 data_size;
	__u64 period_ns;
	__u64 epoch_ns;
	__u64 lost;
	__u64 reserved0[2];
	__u64 data_head;	/* offset 64 */
	__u64 reserved1[7];
	__u64 data_tail;	/* offset 128 */
	__u64 reserved2[7];
};

/* Record types (struct msrbatch_record.type). */
#define MSRBATCH_REC_PAD	0	/* skip @size bytes (to the end of the area) */
#define MSRBATCH_REC_SAMPLE	1	/* struct msrbatch_rec_sample */
#define MSRBATCH_REC_LOST	2	/* struct msrbatch_rec_lost */
#define MSRBATCH_REC_ONLINE	3	/* struct msrbatch_rec_cpu: @cpu starts sampling */
#define MSRBATCH_REC_OFFLINE	4	/* struct msrbatch_rec_cpu: @cpu stops (hotplug, stop) */

/**
 * struct msrbatch_record - the header of every record (16 bytes)
 * @type: MSRBATCH_REC_*; readers skip types they do not know.
 * @cpu:  the CPU the record is about.
 * @size: bytes of the whole record, header included, a multiple of 16.
 * @nr:   SAMPLE: number of ops, i.e. of @val pairs; otherwise 0.
 */
struct msrbatch_record {
	__u32 type;
	__u32 cpu;
	__u32 size;
	__u32 nr;
};

/**
 * struct msrbatch_rec_sample - one CPU's ops, run once
 * @hdr:    type MSRBATCH_REC_SAMPLE.
 * @seq:    the period this sample was due in (see struct msrbatch_ring).
 * @tsc:    the TSC just before the first op.
 * @failed: bit i set: op i faulted (-EIO) and its values are 0.
 * @val:    @hdr.nr pairs: val[0] and val[1] of each of this CPU's ops, in
 *          the prepared batch's array order.
 */
struct msrbatch_rec_sample {
	struct msrbatch_record hdr;
	__u64 seq;
	__u64 tsc;
	__u64 failed;
	__u64 val[][2];
};

/**
 * struct msrbatch_rec_lost - records this CPU could not append (ring full)
 * @hdr:  type MSRBATCH_REC_LOST.
 * @lost: how many, since this CPU's last LOST record.
 */
struct msrbatch_rec_lost {
	struct msrbatch_record hdr;
	__u64 lost;
};

/**
 * struct msrbatch_rec_cpu - a CPU starts or stops sampling
 * @hdr: type MSRBATCH_REC_ONLINE or MSRBATCH_REC_OFFLINE.
 * @seq: ONLINE: the first period it will sample; OFFLINE: the period due next.
 * @tsc: the TSC when it happened, on that CPU.
 */
struct msrbatch_rec_cpu {
	struct msrbatch_record hdr;
	__u64 seq;
	__u64 tsc;
};

#define MSRBATCH_IOC_MAGIC	0xB9

/*
 * A descriptor opened with CAP_SYS_RAWIO may run every op. One opened
 * without it (the node's mode decides who may open) may run only what the
 * allowlist in force at open allows, for its whole life: RDMSR of listed
 * MSRs, WRMSR/RMWMSR of listed MSRs with a non-zero write mask (only the bits
 * in the mask change; the others keep the MSR's value), RDTSC, RDTSCP, CPUID
 * and DELAY, POLL of what it may read (listed MSRs, the TSC, counters where
 * RDPMC is allowed), and RDPMC, RDCR4 and PCE grants where the list allows them. A
 * batch with another op fails with EACCES (EROFS: a write to an MSR with
 * write mask 0) and err_index set, before anything runs. The list is loaded
 * by writing it, in msr-safe's format, to /dev/msrbatch_allowlist. See
 * Documentation/security.md.
 */

#define MSRBATCH_IOC_INFO	_IOR(MSRBATCH_IOC_MAGIC, 0x00, struct msrbatch_info)
#define MSRBATCH_IOC_BATCH	_IOWR(MSRBATCH_IOC_MAGIC, 0x01, struct msrbatch_batch)

/*
 * User-mode RDPMC (CR4.PCE) for the calling thread, while it runs, on every
 * CPU. Needs a descriptor opened for writing. A thread holds one grant at
 * most (EBUSY). The argument is a set of MSRBATCH_PCE_F_* flags. Without
 * MSRBATCH_PCE_F_THREAD the grant ends on revoke, on close of the file that
 * made it, and on exit of the thread; with it only on revoke and on exit, so
 * the thread may close every descriptor and execve() a program that gets
 * none. MSRBATCH_PCE_F_INHERIT extends the grant to the other threads of the
 * caller's process and to every thread and process that any of them creates
 * from then on, until the caller's own grant ends (EOPNOTSUPP on a kernel
 * without tracepoints). REVOKE (argument 0) ends the calling thread's grant,
 * whichever file made it, through any msrbatch descriptor. See
 * Documentation/pce.md.
 */
#define MSRBATCH_PCE_F_THREAD	(1U << 0)
#define MSRBATCH_PCE_F_INHERIT	(1U << 1)

/*
 * Prepared batches: PREPARE validates a batch once and keeps the kernel's
 * own copy of its ops; RUN (argument: the handle) runs it again and again
 * and returns the number of failed ops, writing every op's status and values
 * into the results that the caller has mapped; UNPREPARE (argument: the
 * handle) frees it. See Documentation/abi.md.
 */
#define MSRBATCH_IOC_PREPARE	_IOWR(MSRBATCH_IOC_MAGIC, 0x02, struct msrbatch_prepare)
#define MSRBATCH_IOC_RUN	_IO(MSRBATCH_IOC_MAGIC, 0x03)
#define MSRBATCH_IOC_UNPREPARE	_IO(MSRBATCH_IOC_MAGIC, 0x04)

/*
 * Restore on close (argument 0; needs a descriptor opened for writing): from
 * now on, every MSR a batch on this file writes is read on its CPU just
 * before the file's first write to it, and written back when the process
 * that asked (its thread group) closes a descriptor of the file or exits,
 * also when it is killed, whoever else holds the file (a fork() child,
 * SCM_RIGHTS, pidfd_getfd()); from then on batches that write through the
 * file are refused (EPIPE). Asked again by another process: EBUSY. Asked,
 * or a write through the file, while the caller's descriptor table is shared
 * with another process (clone(CLONE_FILES), whose exit closes nothing): EXDEV.
 * RESTORE_NOW (argument 0) writes them back now and returns how many could
 * not be (CPU offline, fault).
 */
#define MSRBATCH_IOC_RESTORE_ON_CLOSE	_IO(MSRBATCH_IOC_MAGIC, 0x05)
#define MSRBATCH_IOC_RESTORE_NOW	_IO(MSRBATCH_IOC_MAGIC, 0x06)

/*
 * MSRBATCH_IOC_SAMPLE returns the sampler's descriptor. Needs a descriptor
 * opened for reading; ENOSPC while MSRBATCH_MAX_SAMPLERS exist (a sampler
 * exists until its file is released: a mapping holds it), or
 * MSRBATCH_MAX_SAMPLERS_CONFINED made without CAP_SYS_RAWIO, for such a
 * descriptor. On the sampler descriptor, MSRBATCH_SAMPLER_IOC_STOP (argument
 * 0) stops every CPU's timer (each CPU then appends an OFFLINE record) and
 * sets MSRBATCH_RING_STOPPED before it returns; the ring stays readable
 * until it is unmapped.
 */
#define MSRBATCH_IOC_SAMPLE	_IOWR(MSRBATCH_IOC_MAGIC, 0x07, struct msrbatch_sample_req)
#define MSRBATCH_SAMPLER_IOC_STOP	_IO(MSRBATCH_IOC_MAGIC, 0x20)

#define MSRBATCH_IOC_PCE_GRANT	_IO(MSRBATCH_IOC_MAGIC, 0x10)
#define MSRBATCH_IOC_PCE_REVOKE	_IO(MSRBATCH_IOC_MAGIC, 0x11)

#endif /* _UAPI_LINUX_MSRBATCH_H */
