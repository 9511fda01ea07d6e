// SPDX-License-Identifier: GPL-2.0
/*
 * kmalloc_bench: the cost of kmalloc() on one CPU with preemption disabled.
 *
 * The qpw chapter's re-implementation of the method in the QPW v3 cover
 * letter: keep @iterations objects of @size bytes, allocated with
 * GFP_ATOMIC inside one preempt_disable() section (see below for RT) and timed with
 * get_cycles() (rdtsc on x86), so that no object is freed and reused
 * while the loop runs.  The objects are then freed in a second timed
 * section, because the series changes the free path's locking too.
 *
 * Loading the module runs the benchmark once and prints one line:
 *   kmalloc_bench: size=64 iterations=9000000 cpu=0 alloc_cycles=...
 *   free_cycles=... failed=0
 * which chapters/qpw/parse.py reads.  The averages are computed there, from
 * the totals, so no precision is lost to integer division here.  Under
 * QEMU's -icount the TSC counts guest instructions, so the same line then
 * gives instructions per kmalloc().
 *
 * On PREEMPT_RT the timed sections disable migration instead of preemption.
 * The cover letter's module calls kmalloc() with preemption disabled, which
 * is invalid on RT: a refill takes barn->lock and zone->lock, spinlock_t and
 * so rtmutexes there, and works only as long as neither is contended.  Its
 * free loop runs after preempt_enable() and is not timed.  Our first version
 * also put the free loop under preempt_disable(), and a PREEMPT_RT,
 * pwlocks=1 boot hit "BUG: scheduling while atomic" there (that boot's log
 * is not committed).  migrate_disable() keeps the task on its CPU: the CPU
 * pinning that local_lock_t itself does on RT before it takes its per-CPU
 * spinlock_t.  Every migrate_disable() inside the timed sections (the local
 * lock's, the PW lock's, rt_spin_trylock()'s) then nests in ours, and the
 * sections are preemptible, so the RT counts are comparable with each other
 * in direction only, not with the cover letter's in size.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/preempt.h>
#include <linux/smp.h>
#include <linux/timex.h>

#ifdef CONFIG_PREEMPT_RT
#define bench_pin()	migrate_disable()
#define bench_unpin()	migrate_enable()
#else
#define bench_pin()	preempt_disable()
#define bench_unpin()	preempt_enable()
#endif

static unsigned int size = 64;
module_param(size, uint, 0444);
MODULE_PARM_DESC(size, "bytes per allocation");

static unsigned int iterations = 9000000;
module_param(iterations, uint, 0444);
MODULE_PARM_DESC(iterations, "allocations in the timed loop");

static int __init kmalloc_bench_init(void)
{
	cycles_t start, alloc_cycles, free_cycles;
	unsigned int i, failed = 0;
	void **objs;
	int cpu;

	if (!iterations || !size)
		return -EINVAL;

	/* the array itself is not timed, and vmalloc() may sleep */
	objs = vmalloc_array(iterations, sizeof(*objs));
	if (!objs)
		return -ENOMEM;

	bench_pin();
	cpu = smp_processor_id();
	start = get_cycles();
	for (i = 0; i < iterations; i++)
		objs[i] = kmalloc(size, GFP_ATOMIC);
	alloc_cycles = get_cycles() - start;
	bench_unpin();

	for (i = 0; i < iterations; i++)
		failed += !objs[i];

	bench_pin();
	start = get_cycles();
	for (i = 0; i < iterations; i++)
		kfree(objs[i]);
	free_cycles = get_cycles() - start;
	bench_unpin();

	vfree(objs);
	pr_info("kmalloc_bench: size=%u iterations=%u cpu=%d alloc_cycles=%llu free_cycles=%llu failed=%u\n",
		size, iterations, cpu, (unsigned long long)alloc_cycles,
		(unsigned long long)free_cycles, failed);
	return 0;
}

static void __exit kmalloc_bench_exit(void)
{
}

module_init(kmalloc_bench_init);
module_exit(kmalloc_bench_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kmalloc() cost on one CPU with preemption disabled (kernel book, qpw chapter)");
