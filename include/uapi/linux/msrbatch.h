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
#define MSRBATCH_F_ALL			MSRBATCH_F_STOP_ON_ERROR

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
 * @reserved:  must be 0.
 */
struct msrbatch_batch {
	__u32 version;
	__u32 flags;
	__u32 nr_ops;
	__u32 nr_failed;
	__u64 ops;
	__u32 err_index;
	__u32 out_flags;
	__u64 reserved[2];
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

#define MSRBATCH_IOC_PCE_GRANT	_IO(MSRBATCH_IOC_MAGIC, 0x10)
#define MSRBATCH_IOC_PCE_REVOKE	_IO(MSRBATCH_IOC_MAGIC, 0x11)

#endif /* _UAPI_LINUX_MSRBATCH_H */
