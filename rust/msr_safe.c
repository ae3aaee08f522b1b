// SPDX-License-Identifier: GPL-2.0
/*
 * msrbatch: the device nodes of the msr-safe personality (module parameter
 * msr_safe=1). msr_safe.rs has what they do; here is what only C reaches:
 * character device regions, classes whose devnode callbacks put the nodes
 * under /dev/cpu (as arch/x86/kernel/msr.c does for /dev/cpu/N/msr), and a
 * CPU hotplug state that adds and removes the per-CPU nodes.
 *
 * The classes have msr-safe's names (msr_safe, msr_batch, msr_allowlist,
 * msr_safe_version), so a site's udev rules match the same SUBSYSTEM and
 * KERNEL names; the file operations forward to Rust. Every open file holds
 * the module (fops.owner).
 */

#include <linux/cpu.h>
#include <linux/cpuhotplug.h>
#include <linux/device.h>
#include <linux/fs.h>
#include <linux/kdev_t.h>
#include <linux/module.h>
#include <linux/namei.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/stringify.h>
#include <linux/uaccess.h>

#include "../include/uapi/linux/msrbatch_msr_safe.h"
#include "helpers.h"

static bool msr_safe;
module_param(msr_safe, bool, 0444);
MODULE_PARM_DESC(msr_safe,
		 "Also register msr-safe 1.8's nodes /dev/cpu/msr_batch, /dev/cpu/N/msr_safe, /dev/cpu/msr_allowlist and /dev/cpu/msr_safe_version, every access checked against the allowlist (Documentation/msr-safe.md)");

/* What /dev/cpu/msr_safe_version reads: msr-safe's string, with its NUL. */
static const char ms_version[] = __stringify(MSR_SAFE_VERSION_MAJOR) "."
	__stringify(MSR_SAFE_VERSION_MINOR) "." __stringify(MSR_SAFE_VERSION_PATCH);

/* The longest allowlist text msr-safe takes, and its smallest read. */
#define MS_MAX_TEXT	(128 * 1024)
#define MS_MIN_READ	60

static int ms_open(struct inode *inode, struct file *file, bool render)
{
	void *f = msrbatch_ms_open(render);

	if (!f)
		return -ENOMEM;
	file->private_data = f;
	return 0;
}

static int ms_release(struct inode *inode, struct file *file)
{
	msrbatch_ms_release(file->private_data);
	return 0;
}

/* /dev/cpu/N/msr_safe: one MSR, 8 bytes at offset = MSR address. */

static int ms_cpu_open(struct inode *inode, struct file *file)
{
	unsigned int cpu = iminor(inode);

	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -ENXIO;
	return ms_open(inode, file, false);
}

static ssize_t ms_cpu_rw(struct file *file, u64 *val, size_t count, loff_t pos, bool write)
{
	int err;

	if (count != sizeof(*val))
		return -EINVAL;
	if (pos < 0 || pos > U32_MAX)
		return -EINVAL;
	err = msrbatch_ms_msr(file->private_data, iminor(file_inode(file)), (u32)pos, val,
			      file->f_mode & FMODE_WRITE, write);
	return err ? err : sizeof(*val);
}

static ssize_t ms_cpu_read(struct file *file, char __user *buf, size_t count, loff_t *ppos)
{
	u64 val = 0;
	ssize_t ret = ms_cpu_rw(file, &val, count, *ppos, false);

	if (ret > 0 && copy_to_user(buf, &val, sizeof(val)))
		return -EFAULT;
	return ret;
}

static ssize_t ms_cpu_write(struct file *file, const char __user *buf, size_t count, loff_t *ppos)
{
	u64 val;

	if (count != sizeof(val))
		return -EINVAL;
	if (copy_from_user(&val, buf, sizeof(val)))
		return -EFAULT;
	return ms_cpu_rw(file, &val, count, *ppos, true);
}

/* SEEK_SET and SEEK_CUR only, as msr-safe. */
static loff_t ms_cpu_llseek(struct file *file, loff_t offset, int whence)
{
	switch (whence) {
	case SEEK_SET:
		break;
	case SEEK_CUR:
		if (check_add_overflow(offset, file->f_pos, &offset))
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (offset < 0)
		return -EINVAL;
	file->f_pos = offset;
	return offset;
}

static const struct file_operations ms_cpu_fops = {
	.owner = THIS_MODULE,
	.open = ms_cpu_open,
	.release = ms_release,
	.read = ms_cpu_read,
	.write = ms_cpu_write,
	.llseek = ms_cpu_llseek,
};

/* /dev/cpu/msr_batch */

static int ms_batch_open(struct inode *inode, struct file *file)
{
	return ms_open(inode, file, false);
}

/* 64-bit callers only, as msr-safe (see msrbatch_msr_safe.h): no compat_ioctl. */
static long ms_batch_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	return msrbatch_ms_ioctl(file->private_data, cmd, arg, file->f_mode & FMODE_READ,
				 file->f_mode & FMODE_WRITE);
}

static const struct file_operations ms_batch_fops = {
	.owner = THIS_MODULE,
	.open = ms_batch_open,
	.release = ms_release,
	.unlocked_ioctl = ms_batch_ioctl,
};

/* /dev/cpu/msr_allowlist: reading gives the list in force at open. */

static int ms_allowlist_open(struct inode *inode, struct file *file)
{
	return ms_open(inode, file, file->f_mode & FMODE_READ);
}

static ssize_t ms_allowlist_read(struct file *file, char __user *buf, size_t count, loff_t *ppos)
{
	size_t len;
	const u8 *text = msrbatch_ms_text(file->private_data, &len);

	if (count < MS_MIN_READ)
		return -E2BIG;
	return simple_read_from_buffer(buf, count, ppos, text, len);
}

/* Each write replaces the list: the whole text in one write. */
static ssize_t ms_allowlist_write(struct file *file, const char __user *buf, size_t count,
				  loff_t *ppos)
{
	void *text;
	int err;

	if (count > MS_MAX_TEXT)
		return -E2BIG;
	text = vmemdup_user(buf, count);
	if (IS_ERR(text))
		return PTR_ERR(text);
	err = msrbatch_ms_load(text, count);
	kvfree(text);
	return err ? err : count;
}

static const struct file_operations ms_allowlist_fops = {
	.owner = THIS_MODULE,
	.open = ms_allowlist_open,
	.release = ms_release,
	.read = ms_allowlist_read,
	.write = ms_allowlist_write,
};

/* /dev/cpu/msr_safe_version */

static ssize_t ms_version_read(struct file *file, char __user *buf, size_t count, loff_t *ppos)
{
	return simple_read_from_buffer(buf, count, ppos, ms_version, sizeof(ms_version));
}

static const struct file_operations ms_version_fops = {
	.owner = THIS_MODULE,
	.read = ms_version_read,
};

static char *ms_cpu_devnode(const struct device *dev, umode_t *mode)
{
	return kasprintf(GFP_KERNEL, "cpu/%u/msr_safe", MINOR(dev->devt));
}

static char *ms_devnode(const struct device *dev, umode_t *mode)
{
	return kasprintf(GFP_KERNEL, "cpu/%s", dev_name(dev));
}

static char *ms_version_devnode(const struct device *dev, umode_t *mode)
{
	if (mode)
		*mode = 0400;	/* msr-safe's */
	return ms_devnode(dev, mode);
}

enum { MS_CPU, MS_BATCH, MS_ALLOWLIST, MS_VERSION, MS_NODES };

static struct ms_node {
	const struct class class;
	const struct file_operations *fops;
	int major;		/* > 0 once registered */
	bool class_registered, device_created;
} ms_nodes[MS_NODES] = {
	[MS_CPU] = { .class = { .name = "msr_safe", .devnode = ms_cpu_devnode },
		     .fops = &ms_cpu_fops },
	[MS_BATCH] = { .class = { .name = "msr_batch", .devnode = ms_devnode },
		       .fops = &ms_batch_fops },
	[MS_ALLOWLIST] = { .class = { .name = "msr_allowlist", .devnode = ms_devnode },
			   .fops = &ms_allowlist_fops },
	[MS_VERSION] = { .class = { .name = "msr_safe_version", .devnode = ms_version_devnode },
			 .fops = &ms_version_fops },
};

static int ms_cpu_state = -1;

static unsigned int ms_minors(int i)
{
	return i == MS_CPU ? nr_cpu_ids : 1;
}

static int ms_cpu_online(unsigned int cpu)
{
	struct ms_node *n = &ms_nodes[MS_CPU];

	return PTR_ERR_OR_ZERO(device_create(&n->class, NULL, MKDEV(n->major, cpu), NULL,
					     "msr_safe%u", cpu));
}

static int ms_cpu_offline(unsigned int cpu)
{
	struct ms_node *n = &ms_nodes[MS_CPU];

	device_destroy(&n->class, MKDEV(n->major, cpu));
	return 0;
}

/* Whether the module msr_safe (msr-safe itself) is loaded. */
static bool ms_msr_safe_loaded(void)
{
	struct path path;

	if (kern_path("/sys/module/msr_safe", 0, &path))
		return false;
	path_put(&path);
	return true;
}

void msrbatch_ms_exit(void)
{
	int i;

	if (ms_cpu_state >= 0)
		cpuhp_remove_state(ms_cpu_state);
	ms_cpu_state = -1;
	for (i = MS_NODES - 1; i >= 0; i--) {
		struct ms_node *n = &ms_nodes[i];

		if (n->device_created)
			device_destroy(&n->class, MKDEV(n->major, 0));
		n->device_created = false;
		if (n->class_registered)
			class_unregister(&n->class);
		n->class_registered = false;
		if (n->major > 0)
			__unregister_chrdev(n->major, 0, ms_minors(i), n->class.name);
		n->major = 0;
	}
}

int msrbatch_ms_init(void)
{
	int i, err;

	if (!msr_safe)
		return 0;
	if (ms_msr_safe_loaded()) {
		pr_warn("msr_safe=1 refused: msr-safe is loaded and owns /dev/cpu/msr_*; only /dev/msrbatch is registered\n");
		return 0;
	}
	for (i = 0; i < MS_NODES; i++) {
		struct ms_node *n = &ms_nodes[i];

		err = __register_chrdev(0, 0, ms_minors(i), n->class.name, n->fops);
		if (err < 0)
			goto fail;
		n->major = err;
		err = class_register(&n->class);
		if (err)
			goto fail;
		n->class_registered = true;
		if (i == MS_CPU)
			continue;
		err = PTR_ERR_OR_ZERO(device_create(&n->class, NULL, MKDEV(n->major, 0), NULL, "%s",
						    n->class.name));
		if (err)
			goto fail;
		n->device_created = true;
	}
	err = cpuhp_setup_state(CPUHP_AP_ONLINE_DYN, "msrbatch/msr_safe:online", ms_cpu_online,
				ms_cpu_offline);
	if (err < 0)
		goto fail;
	ms_cpu_state = err;
	pr_info("msr_safe=1: msr-safe %s nodes in /dev/cpu\n", ms_version);
	return 0;
fail:
	pr_err("msr_safe=1: registering the msr-safe nodes failed (%d)\n", err);
	msrbatch_ms_exit();
	return err;
}
