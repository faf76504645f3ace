// SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only
//
// openslob's latency layers, traced in the kernel (host/ebpf.py loads this; the object
// data/layers.bpf.o is built from it by `python -m openslob.host.bpfbuild`).
//
// Four layers, each a histogram in the op histograms' buckets (model/histogram.py) plus
// its calls, bytes and the calls it could not time, kept per CPU (no shared cache line
// between CPUs) and read by the client at each interval boundary:
//   0 db_read_call  pread64 / preadv / preadv2 of the server's processes, enter -> exit
//   1 log_sync      fsync / fdatasync of the same processes
//   2 device_read   read requests of the data directory's disks, issue -> completion
//   3 device_write  write requests of the same disks
// The server's processes: the server itself (MariaDB's threads) or its children
// (PostgreSQL's backends, walwriter, I/O workers).
//
// Cost is the point of this design (bench/ebpf_cost.py): BTF tracepoints (no perf buffer, a
// direct call), the call's start kept in the task's own storage (no hash map keyed by tid),
// the device's issue time read from the request itself when the block layer stamps it (its
// stats accounting: wbt, iolatency), so one program runs per request; a hash keyed by the
// request only for disks whose requests carry no stamp.
//
// CO-RE: only the fields used are declared (preserve_access_index); libbpf relocates them
// against the running kernel's BTF, so one object serves every kernel with BTF.

typedef unsigned long long u64;
typedef unsigned int u32;

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define SLOTS 2048       // model/histogram.py SLOTS
#define LINEAR_LIMIT 128 // below it one bucket per microsecond
#define SUB_SHIFT 6      // log2(SUB_BUCKETS): [64, 128) holds the mantissa
#define LAYERS 4
#define DEVS_MAX 8

#define DB_READ_CALL 0
#define LOG_SYNC 1
#define DEVICE_READ 2
#define DEVICE_WRITE 3

#define REQ_OP_MASK 0xff // blk_opf_t: the operation in the low 8 bits
#define REQ_OP_READ 0
#define REQ_OP_WRITE 1

struct task_struct {
	int tgid;
	struct task_struct *real_parent;
} __attribute__((preserve_access_index));

struct gendisk {
	int major;
	int first_minor;
} __attribute__((preserve_access_index));

struct request_queue {
	struct gendisk *disk;
} __attribute__((preserve_access_index));

struct request {
	struct request_queue *q;
	unsigned int cmd_flags;
	u64 __sector;
	u64 io_start_time_ns;
} __attribute__((preserve_access_index));

// Filled in by the client before the load (host/ebpf.py Config, same layout).
struct config {
	u32 server_tgid;
	u32 ndevs;
	u32 devs[DEVS_MAX]; // dev_t as the kernel keeps it: major << 20 | minor
	u32 read_nr[3];     // this architecture's pread64, preadv, preadv2
	u32 sync_nr[2];     // fsync, fdatasync
	u32 use_stamps;     // 0: time every request from the issue probe (the tests' check of it)
};
const volatile struct config cfg = {};

// The calls (or completed requests) are the histogram's counts plus the untimed ones: no
// counter of its own, so that a call touches one cache line of this (its bucket's).
struct layer {
	u64 bytes;   // of the completed requests (device layers)
	u64 untimed; // completed requests whose issue time was not known
	u64 hist[SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LAYERS);
	__type(key, u32);
	__type(value, struct layer);
} layers SEC(".maps");

// The call in progress of a task of the server: its start and its layer.
struct call {
	u64 start_ns;
	u32 layer;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call);
} calls SEC(".maps");

// Issue times of requests on disks that do not stamp them, keyed by the request struct;
// the sector tells a completion whether the entry is its own request's (a request the
// block layer ends without issuing it, e.g. an empty pre-flush write on a disk without a
// write cache, finds the struct's previous request there). An entry whose completion was
// not seen stays until its struct is issued again (the block layer reuses a fixed set per
// queue), so the map stays bounded.
struct issue {
	u64 ns;
	u64 sector;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u64);
	__type(value, struct issue);
} issued SEC(".maps");

// Per data disk: 1 once one of its completions carried the block layer's issue stamp; the
// issue probe then leaves that disk alone, and its completions without a stamp (requests
// ended without being issued) are counted untimed, never timed from the map's older
// entries.
u32 stamped[DEVS_MAX] = {};

// model/histogram.py bucket_index, for whole microseconds.
static __always_inline u32 bucket(u64 us)
{
	if (us < LINEAR_LIMIT)
		return us;
	u64 x = us;
	u32 lg = 0;
	if (x >= (1ULL << 32)) { x >>= 32; lg += 32; }
	if (x >= (1ULL << 16)) { x >>= 16; lg += 16; }
	if (x >= (1ULL << 8)) { x >>= 8; lg += 8; }
	if (x >= (1ULL << 4)) { x >>= 4; lg += 4; }
	if (x >= (1ULL << 2)) { x >>= 2; lg += 2; }
	if (x >= (1ULL << 1)) { lg += 1; }
	u32 e = lg - SUB_SHIFT;
	u64 idx = ((u64)e << SUB_SHIFT) + (us >> e);
	return idx > SLOTS - 1 ? SLOTS - 1 : idx;
}

// ns / 1000 without a 64-bit division below 2**31 ns (2.1 s): floor(ns * M / 2**42) with
// M = ceil(2**42 / 1000) is exact there (ns * M fits in 64 bits, and the error
// M * 1000 - 2**42 = 896 stays under 2**42 / ns); the rare longer call divides.
static __always_inline u64 us_of(u64 ns)
{
	if (ns < (1ULL << 31))
		return (ns * 4398046512ULL) >> 42;
	return ns / 1000;
}

static __always_inline void record(u32 layer, u64 ns, u64 bytes, int timed)
{
	struct layer *l = bpf_map_lookup_elem(&layers, &layer);
	if (!l)
		return;
	if (bytes)
		l->bytes += bytes;
	if (!timed) {
		l->untimed++;
		return;
	}
	u32 i = bucket(us_of(ns));
	// the verifier cannot follow the clamp in bucket() through the division: mask again
	asm volatile("%0 &= 2047" : "+r"(i));
	l->hist[i]++;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter, struct pt_regs *regs, long id)
{
	u32 layer;
	if (id == cfg.read_nr[0] || id == cfg.read_nr[1] || id == cfg.read_nr[2])
		layer = DB_READ_CALL;
	else if (id == cfg.sync_nr[0] || id == cfg.sync_nr[1])
		layer = LOG_SYNC;
	else
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	if (task->tgid != cfg.server_tgid && task->real_parent->tgid != cfg.server_tgid)
		return 0;
	struct call *call = bpf_task_storage_get(&calls, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!call)
		return 0;
	call->layer = layer;
	call->start_ns = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit, struct pt_regs *regs, long ret)
{
	// a task that never entered a traced call has no storage: the lookup ends at once
	struct call *call = bpf_task_storage_get(&calls, bpf_get_current_task_btf(), 0, 0);
	if (!call || !call->start_ns)
		return 0;
	u64 ns = bpf_ktime_get_ns() - call->start_ns;
	call->start_ns = 0;
	record(call->layer, ns, 0, 1);
	return 0;
}

// The request's disk among the data disks (its index), else -1.
static __always_inline int data_disk(struct request *rq)
{
	struct gendisk *disk = rq->q->disk;
	if (!disk)
		return -1;
	u32 dev = ((u32)disk->major << 20) | (u32)disk->first_minor;
	for (int i = 0; i < DEVS_MAX; i++) {
		if (i >= cfg.ndevs)
			break;
		if (cfg.devs[i] == dev)
			return i;
	}
	return -1;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(rq_issue, struct request *rq)
{
	int i = data_disk(rq);
	if (i < 0 || i >= DEVS_MAX || stamped[i])
		return 0;
	u64 key = (u64)rq;
	struct issue issue = {.ns = bpf_ktime_get_ns(), .sector = rq->__sector};
	bpf_map_update_elem(&issued, &key, &issue, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(rq_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	int i = data_disk(rq);
	if (i < 0 || i >= DEVS_MAX)
		return 0;
	u32 op = rq->cmd_flags & REQ_OP_MASK;
	u32 layer;
	if (op == REQ_OP_READ)
		layer = DEVICE_READ;
	else if (op == REQ_OP_WRITE)
		layer = DEVICE_WRITE;
	else
		return 0; // flushes, discards: not counted (as /proc/diskstats counts them apart)
	u64 start = cfg.use_stamps ? rq->io_start_time_ns : 0;
	if (start) {
		if (!stamped[i])
			stamped[i] = 1;
	} else if (!stamped[i]) {
		u64 key = (u64)rq;
		struct issue *issue = bpf_map_lookup_elem(&issued, &key);
		if (issue) {
			if (issue->sector == rq->__sector)
				start = issue->ns;
			bpf_map_delete_elem(&issued, &key);
		}
	}
	u64 now = bpf_ktime_get_ns();
	int timed = start && now > start;
	record(layer, timed ? now - start : 0, nr_bytes, timed);
	return 0;
}

// Empty programs at the same tracepoints, attached only while the kernel times programs
// (kernel.bpf_stats_enabled = 1): their run time is what that timing and a program call
// cost by themselves, which host/ebpf.py takes off the probes' measured time.
SEC("tp_btf/sys_enter")
int BPF_PROG(control_enter, struct pt_regs *regs, long id)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(control_exit, struct pt_regs *regs, long ret)
{
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(control_complete, struct request *rq, int error, unsigned int nr_bytes)
{
	return 0;
}

// Not attached: run by the tests through BPF_PROG_TEST_RUN (args[0]: microseconds), so
// that the bucket formula compiled for the kernel is held to model/histogram.py.
SEC("raw_tp")
int bucket_of(struct bpf_raw_tracepoint_args *ctx)
{
	return bucket(ctx->args[0]);
}

// The same for a duration in nanoseconds: the bucket of its whole microseconds.
SEC("raw_tp")
int bucket_of_ns(struct bpf_raw_tracepoint_args *ctx)
{
	return bucket(us_of(ctx->args[0]));
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
