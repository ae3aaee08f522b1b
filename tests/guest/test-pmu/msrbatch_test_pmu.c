// SPDX-License-Identifier: GPL-2.0
/*
 * TEST ONLY, loaded in the test guest and nowhere else: a stand-in for the
 * x86 core PMU's "rdpmc" knob (/sys/bus/event_source/devices/cpu/rdpmc), for
 * a guest that has no PMU (QEMU TCG: CPUID.0AH is zero, so perf registers no
 * "cpu" PMU and the knob does not exist).
 *
 * It registers a PMU named "cpu" at PERF_TYPE_RAW, the type the x86 core PMU
 * takes, so perf routes hardware events to it, with one device attribute,
 * "rdpmc" (0, 1 or 2), which msrbatch finds at load the way it finds the real
 * one: through a disabled kernel counter's PMU device. Its events count
 * nothing and cannot be scheduled.
 *
 * A write to the real knob also calls cr4_update_pce() on every CPU, which
 * makes the kernel's CR4 shadow follow the new policy for the current mm;
 * this one does not (that function is not exported). For 1 -> 0 and 0 -> 1,
 * the cases tests/guest/pce_policy_test.c checks, the two agree: the granted
 * thread's shadow has PCE clear before and after, so the kernel writes no
 * CR4 either way, and only msrbatch itself can end or restore the PCE it
 * sets. msrbatch holds a reference on this module while it may call the
 * knob's show method: unload msrbatch first.
 */
#include <linux/device.h>
#include <linux/kstrtox.h>
#include <linux/module.h>
#include <linux/perf_event.h>
#include <linux/sysfs.h>

static int policy = 1;

static ssize_t rdpmc_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(policy));
}

static ssize_t rdpmc_store(struct device *dev, struct device_attribute *attr,
			   const char *buf, size_t count)
{
	unsigned long v;
	int r = kstrtoul(buf, 0, &v);

	if (r)
		return r;
	if (v > 2)
		return -EINVAL;
	WRITE_ONCE(policy, v);
	return count;
}
static DEVICE_ATTR_RW(rdpmc);

static struct attribute *test_pmu_attrs[] = {
	&dev_attr_rdpmc.attr,
	NULL,
};

static const struct attribute_group test_pmu_group = {
	.attrs = test_pmu_attrs,
};

static const struct attribute_group *test_pmu_groups[] = {
	&test_pmu_group,
	NULL,
};

static int test_pmu_event_init(struct perf_event *event)
{
	if (event->attr.type != PERF_TYPE_HARDWARE && event->attr.type != PERF_TYPE_RAW)
		return -ENOENT;
	return 0;
}

/* No counters: an event that is enabled fails to schedule. */
static int test_pmu_add(struct perf_event *event, int flags)
{
	return -EINVAL;
}

static void test_pmu_del(struct perf_event *event, int flags)
{
}

static void test_pmu_start(struct perf_event *event, int flags)
{
}

static void test_pmu_stop(struct perf_event *event, int flags)
{
}

static void test_pmu_read(struct perf_event *event)
{
}

static struct pmu test_pmu = {
	.module = THIS_MODULE,
	.task_ctx_nr = perf_invalid_context,
	.capabilities = PERF_PMU_CAP_NO_INTERRUPT,
	.attr_groups = test_pmu_groups,
	.event_init = test_pmu_event_init,
	.add = test_pmu_add,
	.del = test_pmu_del,
	.start = test_pmu_start,
	.stop = test_pmu_stop,
	.read = test_pmu_read,
};

static int __init test_pmu_init(void)
{
	return perf_pmu_register(&test_pmu, "cpu", PERF_TYPE_RAW);
}

static void __exit test_pmu_exit(void)
{
	WARN_ON(perf_pmu_unregister(&test_pmu));
}

module_init(test_pmu_init);
module_exit(test_pmu_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("TEST ONLY: a PMU with an rdpmc knob, for msrbatch's guest tests");
