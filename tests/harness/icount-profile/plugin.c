// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin for tests/harness/icount-profile.sh: counts every guest
 * instruction executed, per instruction address, and writes the counts of
 * a window the guest marks.
 *
 * Every translated instruction gets an inline counter (one add, no call),
 * keyed by its virtual address: an instruction that several translation
 * blocks hold has one counter, and an instruction is counted when it runs,
 * also when its block is left early (an exception, an interrupt). The
 * counters are not atomic: run the guest under -icount, where TCG runs
 * the vCPUs one at a time in one thread (round robin), or with -smp 1.
 *
 * Markers: the guest executes `mov $0x4d534250, %eax` ("PBSM", then
 * usually a cpuid) to open a window and `mov $0x4d534251, %eax` to close
 * it; the plugin finds them by their bytes when it translates them, and
 * the closing one appends to the output file:
 *
 *   window N
 *   ADDR COUNT        (hex address, decimal count: executions in the window)
 *   ...
 *   end N
 *
 * Arguments: out=FILE (default: icount-profile.out in QEMU's directory).
 * Built against the plugin API header of the QEMU that loads it (QEMU 7.2,
 * QEMU_PLUGIN_VERSION 1, which has no register access: hence markers that
 * are found by their bytes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

struct counter {
	uint64_t vaddr;
	uint64_t count;	/* bumped inline by the guest's code */
	uint64_t base;	/* count when the window opened */
};

/* Counters live in chunks that never move: inline ops point into them. */
#define CHUNK 65536
static struct counter **chunks;
static size_t nchunks, used;	/* used: counters in the last chunk */

/* Open addressing over pointers to the counters, rehashed at half load. */
static struct counter **table;
static size_t tsize, tcount;

static const char *out_path = "icount-profile.out";
static int window, open_window;

static size_t slot(uint64_t vaddr, size_t size)
{
	uint64_t h = vaddr * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 20) & (size - 1);
}

static void grow(void)
{
	size_t nsize = tsize ? tsize * 2 : 1 << 16;
	struct counter **nt = calloc(nsize, sizeof(*nt));

	if (!nt) {
		fprintf(stderr, "icount-profile: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < tsize; i++) {
		size_t j;

		if (!table[i])
			continue;
		for (j = slot(table[i]->vaddr, nsize); nt[j]; j = (j + 1) & (nsize - 1))
			;
		nt[j] = table[i];
	}
	free(table);
	table = nt;
	tsize = nsize;
}

static struct counter *counter_for(uint64_t vaddr)
{
	size_t j;

	if (2 * (tcount + 1) > tsize)
		grow();
	for (j = slot(vaddr, tsize); table[j]; j = (j + 1) & (tsize - 1))
		if (table[j]->vaddr == vaddr)
			return table[j];
	if (!nchunks || used == CHUNK) {
		struct counter **nc = realloc(chunks, (nchunks + 1) * sizeof(*nc));

		if (!nc || !(nc[nchunks] = calloc(CHUNK, sizeof(struct counter)))) {
			fprintf(stderr, "icount-profile: out of memory\n");
			exit(1);
		}
		chunks = nc;
		nchunks++;
		used = 0;
	}
	table[j] = &chunks[nchunks - 1][used++];
	table[j]->vaddr = vaddr;
	tcount++;
	return table[j];
}

#define FOR_EACH_COUNTER(c)                                                    \
	for (size_t k_ = 0; k_ < nchunks; k_++)                                \
		for (struct counter *c = chunks[k_];                           \
		     c < chunks[k_] + (k_ == nchunks - 1 ? used : CHUNK); c++)

static void marker(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	if (udata == (void *)1) {
		FOR_EACH_COUNTER(c)
			c->base = c->count;
		open_window = 1;
		return;
	}
	if (!open_window)
		return;
	open_window = 0;
	FILE *f = fopen(out_path, "a");

	if (!f) {
		perror(out_path);
		return;
	}
	fprintf(f, "window %d\n", window);
	FOR_EACH_COUNTER(c)
		if (c->count != c->base)
			fprintf(f, "%llx %llu\n", (unsigned long long)c->vaddr,
				(unsigned long long)(c->count - c->base));
	fprintf(f, "end %d\n", window);
	fclose(f);
	window++;
}

/* mov $0x4d534250, %eax opens a window, mov $0x4d534251, %eax closes it. */
static int marker_kind(const unsigned char *b, size_t n)
{
	if (n != 5 || b[0] != 0xb8 || b[2] != 0x42 || b[3] != 0x53 || b[4] != 0x4d)
		return 0;
	return b[1] == 0x50 ? 1 : b[1] == 0x51 ? 2 : 0;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);

	(void)id;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		struct counter *c = counter_for(qemu_plugin_insn_vaddr(insn));
		int kind = marker_kind(qemu_plugin_insn_data(insn), qemu_plugin_insn_size(insn));

		qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &c->count, 1);
		if (kind)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, marker, QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)kind);
	}
}

/* A line on QEMU's stderr at exit: proof the plugin ran and counted. */
static void at_exit(qemu_plugin_id_t id, void *udata)
{
	uint64_t total = 0;

	(void)id;
	(void)udata;
	FOR_EACH_COUNTER(c)
		total += c->count;
	fprintf(stderr, "icount-profile: %llu guest instructions at %zu addresses, %d window(s) written to %s\n",
		(unsigned long long)total, tcount, window, out_path);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv)
{
	(void)info;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4)) {
			out_path = argv[i] + 4;
		} else {
			fprintf(stderr, "icount-profile: unknown argument '%s' (out=FILE)\n", argv[i]);
			return -1;
		}
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
