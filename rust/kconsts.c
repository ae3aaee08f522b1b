// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel constants the Rust code needs at compile time (as asm! operands),
 * taken from the kernel's own headers: the C compiler evaluates them here,
 * like arch/x86/kernel/asm-offsets.c, and rust/Kbuild turns the result into
 * generated.rs. Never linked into the module.
 */
#include <linux/errno.h>
#include <linux/kbuild.h>
#include <asm/extable_fixup_types.h>

/*
 * The exception table data word of every fault-safe instruction (insn.rs):
 * on a fault, store -EIO into r8 (8 in the x86 register encoding that the
 * kernel's extable_type_reg assembler macro uses) and resume after the
 * instruction.
 */
#define MSRBATCH_EX_REG_R8 8

void msrbatch_kconsts(void);

void msrbatch_kconsts(void)
{
	DEFINE(EX_DATA_IMM_REG_R8_EIO,
	       EX_TYPE_IMM_REG | EX_DATA_REG(MSRBATCH_EX_REG_R8) | EX_DATA_IMM(-EIO));
}
