/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * msrbatch's msr-safe personality (module parameter msr_safe=1): the ABI of
 * LLNL msr-safe 1.8 as its README and msr_safe.h document it, written here
 * from that documentation so that programs built for msr-safe build against
 * this header unchanged (same struct and field names, same ioctl number).
 * Documentation/msr-safe.md says what is the same and what differs.
 *
 *   /dev/cpu/msr_batch          ioctl X86_IOC_MSR_BATCH
 *   /dev/cpu/<N>/msr_safe       8-byte pread/pwrite at offset = MSR
 *   /dev/cpu/msr_allowlist      read: the list; write: replace it
 *   /dev/cpu/msr_safe_version   read: "1.8.0"
 */
#ifndef _UAPI_LINUX_MSRBATCH_MSR_SAFE_H
#define _UAPI_LINUX_MSRBATCH_MSR_SAFE_H

#include <linux/ioctl.h>
#include <linux/types.h>

/* The msr-safe version this personality implements. */
#define MSR_SAFE_VERSION_MAJOR 1
#define MSR_SAFE_VERSION_MINOR 8
#define MSR_SAFE_VERSION_PATCH 0
/* msr_batch_array.version: major << 16 | minor << 8 | patch. */
#define MSR_SAFE_VERSION_u32 \
	((MSR_SAFE_VERSION_MAJOR << 16) | (MSR_SAFE_VERSION_MINOR << 8) | MSR_SAFE_VERSION_PATCH)

/* One operation of a batch: 32 bytes. */
struct msr_batch_op {
	__u16 cpu;	/* In: the CPU to run on */
	__u16 isrdmsr;	/* In: 0 = write, anything else = read */
	__s32 err;	/* Out: 0 or a negative errno (EACCES, EROFS, ENXIO, EIO) */
	__u32 msr;	/* In: MSR address */
	__u64 msrdata;	/* In/Out: the value to write, or the value read */
	__u64 wmask;	/* Out: the allowlist's write mask for msr */
};

struct msr_batch_array {
	__u32 numops;			/* In: number of ops */
	__u32 version;			/* In: MSR_SAFE_VERSION_u32 (major checked) */
	struct msr_batch_op *ops;	/* In: array of numops ops */
};

/*
 * As with msr-safe, 64-bit callers only: for a 32-bit caller both structs
 * have other layouts (a 4-byte pointer; __u64 4-byte aligned), so its ioctl
 * number differs and the batch node answers ENOTTY.
 */
#define X86_IOC_MSR_BATCH _IOWR('c', 0xA2, struct msr_batch_array)

#endif /* _UAPI_LINUX_MSRBATCH_MSR_SAFE_H */
