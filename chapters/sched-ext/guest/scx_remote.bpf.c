/* SPDX-License-Identifier: GPL-2.0 */
/*
 * scx_remote: a FIFO sched_ext scheduler whose every Nth dispatch puts a task on the local
 * DSQ of another, busy CPU (sched-ext chapter of the kernel book).
 *
 * The chapter's patch changes only what schedule_deferred() does when the runqueue it is
 * handed belongs to another CPU. Its commit message names where that happens: an IMMED task
 * dispatched to a remote local DSQ whose CPU is running a task (not in balance or wakeup), and
 * a BPF-initiated reenqueue of a remote runqueue. This scheduler makes the first case common:
 *
 * - SCX_OPS_ALWAYS_ENQ_IMMED (set by scx_remote.c, as scx_qmap -I does): every insert into a
 *   local DSQ carries SCX_ENQ_IMMED;
 * - enqueue: every task goes to one shared FIFO DSQ;
 * - dispatch on CPU c: every remote_nth'th call first moves the oldest task that may run on the
 *   next CPU (c + 1 mod nr_cpus) from the shared DSQ to that CPU's local DSQ, then fills c's
 *   own local DSQ from the shared DSQ.
 *
 * The move locks the other CPU's runqueue from this CPU's balance step. If that CPU runs a
 * task, dsq_inc_nr() finds it not open for an IMMED task and calls schedule_reenq_local() for
 * it; its runqueue is in neither a wakeup nor its own balance, so schedule_deferred_locked()
 * falls back to schedule_deferred() for a runqueue of another CPU: the call the patch changes.
 * The deferred work then hands the task back through ops.enqueue() (SCX_ENQ_REENQ), and it
 * returns to the shared DSQ.
 */
#include <scx/common.bpf.h>

char _license[] SEC("license") = "GPL";

#define SHARED_DSQ 0

const volatile u32 remote_nth = 20;

UEI_DEFINE(uei);

/* per CPU; summed and printed by scx_remote.c */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(key_size, sizeof(u32));
	__uint(value_size, sizeof(u64));
	__uint(max_entries, 4);
} stats SEC(".maps");

enum { STAT_DISPATCH, STAT_REMOTE, STAT_REMOTE_NONE, STAT_REENQ };

static u64 stat_inc(u32 idx)
{
	u64 *cnt = bpf_map_lookup_elem(&stats, &idx);

	if (!cnt)
		return 0;
	return ++*cnt;
}

s32 BPF_STRUCT_OPS(remote_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	/* no direct dispatch: every task reaches ops.enqueue() and the shared DSQ */
	return prev_cpu;
}

void BPF_STRUCT_OPS(remote_enqueue, struct task_struct *p, u64 enq_flags)
{
	if (enq_flags & SCX_ENQ_REENQ)
		stat_inc(STAT_REENQ);
	scx_bpf_dsq_insert(p, SHARED_DSQ, SCX_SLICE_DFL, enq_flags);
}

/* move the oldest task allowed on @target from the shared DSQ to @target's local DSQ */
static void dispatch_remote(s32 target)
{
	struct task_struct *p;

	bpf_for_each(scx_dsq, p, SHARED_DSQ, 0) {
		if (!bpf_cpumask_test_cpu(target, p->cpus_ptr))
			continue;
		if (scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL_ON | target, 0)) {
			stat_inc(STAT_REMOTE);
			return;
		}
	}
	stat_inc(STAT_REMOTE_NONE);
}

void BPF_STRUCT_OPS(remote_dispatch, s32 cpu, struct task_struct *prev)
{
	u32 nr_cpus = scx_bpf_nr_cpu_ids();

	if (remote_nth && nr_cpus > 1 && !(stat_inc(STAT_DISPATCH) % remote_nth))
		dispatch_remote((cpu + 1) % nr_cpus);
	scx_bpf_dsq_move_to_local(SHARED_DSQ, 0);
}

s32 BPF_STRUCT_OPS_SLEEPABLE(remote_init)
{
	return scx_bpf_create_dsq(SHARED_DSQ, -1);
}

void BPF_STRUCT_OPS(remote_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

SCX_OPS_DEFINE(remote_ops,
	       .select_cpu		= (void *)remote_select_cpu,
	       .enqueue			= (void *)remote_enqueue,
	       .dispatch		= (void *)remote_dispatch,
	       .init			= (void *)remote_init,
	       .exit			= (void *)remote_exit,
	       .name			= "remote");
