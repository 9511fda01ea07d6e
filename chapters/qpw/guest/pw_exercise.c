// SPDX-License-Identifier: GPL-2.0
/*
 * pw_exercise: run two paths of the PW-lock series that the kmalloc benchmark
 * never reaches, on the CPU the module is loaded on, and print one line saying
 * what ran.  Only the debug kernels load it (chapters/qpw/guest/debug.sh);
 * what lockdep and the spinlock checks make of it is in the kernel log.
 *
 * test=flush
 *	Free @objects objects of a cache of our own after kmem_cache_shrink()
 *	emptied its barn, while fault injection (failslab with its task filter,
 *	set up by the script) fails every slab allocation of this task.  Each
 *	time the main sheaf is full, __pcs_replace_full_main() finds no empty
 *	sheaf in the barn, cannot allocate one, and flushes the main sheaf in
 *	place: sheaf_try_flush_main(), which takes the lock with
 *	pw_trylock_local().  In v4 4/4 as posted the flush released it with
 *	pw_unlock(), which does not undo the preempt_disable() (on PREEMPT_RT,
 *	migrate_disable()) of the _local trylock once the PW locks are on.  The
 *	line gives both counters before and after the loop; the module then
 *	tries to give back what leaked, which CONFIG_DEBUG_PREEMPT refuses once
 *	the leak has carried the count past the preempt byte.
 *
 * test=irq
 *	kfree_nolock() of @objects kmalloc_nolock() objects (its contract:
 *	only those) from a hard-interrupt hrtimer callback, a batch per
 *	millisecond.  kfree_nolock() may be called
 *	from any context and reaches free_to_pcs() -> pw_trylock_local().
 *	PREEMPT_RT's local_trylock() refuses in hard interrupt context; the PW
 *	lock's spin mode calls spin_trylock() there instead, an rtmutex on RT.
 */
#include <linux/completion.h>
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <linux/numa.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/string.h>
#include <linux/vmalloc.h>

#define IRQ_BATCH	64

static char *test = "flush";
module_param(test, charp, 0444);
MODULE_PARM_DESC(test, "flush or irq");

static unsigned int objects = 20000;
module_param(objects, uint, 0444);
MODULE_PARM_DESC(objects, "objects freed by the test");

static void **objs;
static unsigned int next_obj, freed_in_hardirq;
static struct hrtimer timer;
static DECLARE_COMPLETION(irq_done);

static unsigned int migration_disabled(void)
{
#ifdef CONFIG_SMP
	return current->migration_disabled;
#else
	return 0;
#endif
}

/* failslab's task filter fails the slab allocations of a task that has this set */
static void fail_my_allocations(bool on)
{
#ifdef CONFIG_FAULT_INJECTION
	current->make_it_fail = on;
#endif
}

static int run_flush(void)
{
	unsigned int preempt_before, preempt_after, migrate_before, migrate_after;
	struct kmem_cache_args args = {};
	struct kmem_cache *cache;
	unsigned int i, n;

	if (!IS_ENABLED(CONFIG_FAILSLAB))
		return -EOPNOTSUPP;
	cache = kmem_cache_create("pw_exercise", 64, &args, 0);
	if (!cache)
		return -ENOMEM;
	for (i = 0; i < objects; i++) {
		objs[i] = kmem_cache_alloc(cache, GFP_KERNEL);
		if (!objs[i])
			break;
	}
	if (i < objects) {
		while (i--)
			kmem_cache_free(cache, objs[i]);
		kmem_cache_destroy(cache);
		return -ENOMEM;
	}
	/* no empty sheaf left in the barn: the frees must allocate one */
	kmem_cache_shrink(cache);

	preempt_before = preempt_count();
	migrate_before = migration_disabled();
	fail_my_allocations(true);
	for (i = 0; i < objects; i++)
		kmem_cache_free(cache, objs[i]);
	fail_my_allocations(false);
	preempt_after = preempt_count();
	migrate_after = migration_disabled();

	for (n = preempt_after; n > preempt_before; n--)
		preempt_enable();
	for (n = migrate_after; n > migrate_before; n--)
		migrate_enable();

	kmem_cache_destroy(cache);
	pr_info("pw_exercise: test=flush objects=%u cpu=%d preempt_before=%u preempt_after=%u migrate_before=%u migrate_after=%u\n",
		objects, raw_smp_processor_id(), preempt_before, preempt_after,
		migrate_before, migrate_after);
	return 0;
}

static enum hrtimer_restart free_batch(struct hrtimer *t)
{
	unsigned int n;

	for (n = 0; n < IRQ_BATCH && next_obj < objects; n++, next_obj++) {
		freed_in_hardirq += !!in_hardirq();
		kfree_nolock(objs[next_obj]);
	}
	if (next_obj < objects) {
		hrtimer_forward_now(t, ms_to_ktime(1));
		return HRTIMER_RESTART;
	}
	complete(&irq_done);
	return HRTIMER_NORESTART;
}

static int run_irq(void)
{
	unsigned int i;

	for (i = 0; i < objects; i++) {
		objs[i] = kmalloc_nolock(64, 0, NUMA_NO_NODE);
		if (!objs[i])
			break;
	}
	if (i < objects) {
		while (i--)
			kfree_nolock(objs[i]);
		return -ENOMEM;
	}
	hrtimer_setup(&timer, free_batch, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	hrtimer_start(&timer, ms_to_ktime(1), HRTIMER_MODE_REL_PINNED_HARD);
	wait_for_completion(&irq_done);
	pr_info("pw_exercise: test=irq objects=%u cpu=%d freed_in_hardirq=%u\n",
		objects, raw_smp_processor_id(), freed_in_hardirq);
	return 0;
}

static int __init pw_exercise_init(void)
{
	int ret;

	if (!objects)
		return -EINVAL;
	objs = vmalloc_array(objects, sizeof(*objs));
	if (!objs)
		return -ENOMEM;
	if (!strcmp(test, "flush"))
		ret = run_flush();
	else if (!strcmp(test, "irq"))
		ret = run_irq();
	else
		ret = -EINVAL;
	vfree(objs);
	return ret;
}

static void __exit pw_exercise_exit(void)
{
}

module_init(pw_exercise_init);
module_exit(pw_exercise_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Runs the PW-lock sheaf flush and hard-irq kfree_nolock() paths (kernel book, qpw chapter)");
