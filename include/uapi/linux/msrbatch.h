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
#define MSRBATCH_MAX_CPU_DELAY_NS	10000000	/* all DELAY ops of one CPU */
#define MSRBATCH_MAX_CPU_BUSY_NS	20000000	/* one CPU's share of a batch,
							 * interrupts off, delays
							 * included; ops not started
							 * by then get -ETIME
							 */

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
#define MSRBATCH_OP_MAX			MSRBATCH_OP_RDCR4

/* Batch flags (struct msrbatch_batch.flags). */
#define MSRBATCH_F_STOP_ON_ERROR	(1U << 0)	/* per CPU: the ops after
							 * a failed one get
							 * -ECANCELED
							 */
/*
 * MSRBATCH_F_SYNC_START: every target CPU waits, interrupts off, until all
 * have arrived, then all start together; ETIMEDOUT (nothing ran) if one does
 * not arrive within MSRBATCH_SYNC_TIMEOUT_NS.
 * MSRBATCH_F_TIMESTAMPS: val[1] of every op is the TSC right after it ran;
 * not with RDTSCP, CPUID, RMWMSR (EINVAL).
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
 * @flags:  reserved, must be 0.
 * @cpu:    logical CPU number the op runs on.
 * @reg:    MSR index (RDMSR, WRMSR, RMWMSR), counter selector in ECX
 *          (RDPMC; bit 30 selects Intel fixed counters) or CPUID leaf.
 *          Must be 0 for ops that take no register.
 * @status: out: 0, or a negative errno for this op (-EIO: the instruction
 *          faulted; -ECANCELED: not run after an earlier failure on the
 *          same CPU with MSRBATCH_F_STOP_ON_ERROR; -ETIME: not run, the
 *          CPU's share took longer than MSRBATCH_MAX_CPU_BUSY_NS). Ignored
 *          on input.
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

#define MSRBATCH_IOC_MAGIC	0xB9

/*
 * A descriptor opened with CAP_SYS_RAWIO may run every op. One opened
 * without it (the node's mode decides who may open) may run only what the
 * allowlist in force at open allows, for its whole life: RDMSR of listed
 * MSRs, WRMSR/RMWMSR of listed MSRs with a non-zero write mask (only the bits
 * in the mask change; the others keep the MSR's value), RDTSC, RDTSCP, CPUID
 * and DELAY, and RDPMC, RDCR4 and PCE grants where the list allows them. A
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
 * most (EBUSY). The argument is 0 or MSRBATCH_PCE_F_THREAD. With 0 the grant
 * ends on revoke, on close of the file that made it, and on exit of the
 * thread; with MSRBATCH_PCE_F_THREAD it ends only on revoke and on exit, so
 * the thread may close every descriptor and execve() a program that gets
 * none. REVOKE (argument 0) ends the calling thread's grant, whichever file
 * made it, through any msrbatch descriptor. See Documentation/pce.md.
 */
#define MSRBATCH_PCE_F_THREAD	(1U << 0)

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
 * before the file's first write to it, and written back when the file is
 * closed, also when its process is killed. RESTORE_NOW (argument 0) writes
 * them back now and returns how many could not be (CPU offline, fault).
 */
#define MSRBATCH_IOC_RESTORE_ON_CLOSE	_IO(MSRBATCH_IOC_MAGIC, 0x05)
#define MSRBATCH_IOC_RESTORE_NOW	_IO(MSRBATCH_IOC_MAGIC, 0x06)

#define MSRBATCH_IOC_PCE_GRANT	_IO(MSRBATCH_IOC_MAGIC, 0x10)
#define MSRBATCH_IOC_PCE_REVOKE	_IO(MSRBATCH_IOC_MAGIC, 0x11)

#endif /* _UAPI_LINUX_MSRBATCH_H */
