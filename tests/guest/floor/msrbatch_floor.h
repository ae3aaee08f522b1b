/* SPDX-License-Identifier: GPL-2.0 */
/* TEST ONLY: what tests/guest/icount_bench.c and the floor driver share. */
#ifndef MSRBATCH_FLOOR_H
#define MSRBATCH_FLOOR_H

/* The floor driver takes batches of 1 to this many ops (below FLOOR_END). */
#define FLOOR_MAX_OPS 8

#endif
