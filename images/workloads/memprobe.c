/* memprobe: a memory-latency probe whose buffer is bound to one node (seed 003).
 *
 * Allocates -m MiB, binds it with mbind(MPOL_BIND) to --node N (raw syscall, so
 * no libnuma and the binary stays static), touches it, links its cache lines
 * into one random cycle and chases pointers around it: every load depends on the
 * previous one, so a loop's time is the memory latency of wherever the CPU is
 * relative to the buffer.  The CPU is never pinned: where the scheduler puts the
 * probe is what is measured (--start-cpus only chooses where it starts: the
 * setup runs there, then the probe's original affinity is restored).
 *
 * --balancing adds MPOL_F_NUMA_BALANCING (Linux 5.12, numactl's --balancing) to
 * the binding: without it a VMA with its own MPOL_BIND policy is skipped by NUMA
 * balancing's scanner (task_numa_work() needs vma_policy_mof(), which only
 * MPOL_F_MOF gives), so the task's hinting faults would never see the buffer and
 * its preferred node could never become the buffer's.  With it the pages still
 * never leave the bound node (mpol_misplaced() leaves them where they are when
 * the faulting CPU's node is outside the mask) but every hinting fault counts.
 *
 * Once per loop it samples /proc/self/sched (CONFIG_SCHED_DEBUG): the task's
 * numa_preferred_nid and total_numa_faults, to show NUMA balancing at work.
 */
#include "common.h"

#include <stdint.h>
#include <sys/mman.h>

#define LINE 64
#define MPOL_BIND 2
#define MPOL_MF_STRICT (1 << 0)
#define MPOL_F_NUMA_BALANCING (1 << 13)
#define MAX_NODES 1024
#define MAX_SAMPLES 4096

struct line {
	struct line *next;
	char pad[LINE - sizeof(struct line *)];
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void help(void)
{
	printf("usage: %s [-m MIB] [--node N [--balancing]] [--start-cpus LIST] (-s SECONDS | -l LOOPS) [-k N]\n"
	       "Pointer-chase a buffer (one random cycle through its cache lines).\n"
	       "  -m, --mib M       buffer size in MiB (default 64)\n"
	       "      --node N      bind the buffer to NUMA node N with mbind(MPOL_BIND)\n"
	       "                    (default: not bound, pages go where first touched)\n"
	       "      --balancing   bind with MPOL_F_NUMA_BALANCING: NUMA balancing's scanner\n"
	       "                    sees the buffer (its hinting faults count toward the\n"
	       "                    task's preferred node); the pages stay on node N\n"
	       "      --start-cpus LIST  run the setup (allocation, first touch) on the CPUs\n"
	       "                    of LIST, then restore the affinity the probe had\n"
	       "  -s, --seconds S   run whole loops until S seconds have passed\n"
	       "  -l, --loops L     run L loops (default: -s 1; with both, whichever ends first)\n"
	       "  -k, --sample N    sample sched_getcpu every N loads (default 65536)\n"
	       "Output: one JSON line with loops, total and per-loop time, ns per load,\n"
	       "a {cpu: samples} histogram, a {node: pages} histogram of the buffer, and per\n"
	       "loop [seconds, cpu, numa_preferred_nid, total_numa_faults] from /proc/self/sched\n"
	       "(\"numa\"; -1 -1 where the kernel has no CONFIG_NUMA_BALANCING or SCHED_DEBUG).\n",
	       prog);
}

/* Which node holds each of up to 4096 pages spread over the buffer
 * (move_pages(2) with nodes == NULL only queries).  */
static void print_page_nodes(char *buf, size_t bytes)
{
	enum { SAMPLES = 4096 };
	static void *pages[SAMPLES];
	static int status[SAMPLES];
	static unsigned int per_node[MAX_NODES];
	size_t page = sysconf(_SC_PAGESIZE), npages = bytes / page, n = 0, step;
	unsigned int other = 0;
	int first = 1;

	step = npages > SAMPLES ? npages / SAMPLES : 1;
	for (size_t p = 0; p < npages && n < SAMPLES; p += step)
		pages[n++] = buf + p * page;
	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0)) {
		printf(",\"mem_nodes_error\":\"%s\"", strerror(errno));
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (status[i] >= 0 && status[i] < MAX_NODES)
			per_node[status[i]]++;
		else
			other++;
	}
	printf(",\"mem_nodes\":{");
	for (int i = 0; i < MAX_NODES; i++) {
		if (!per_node[i])
			continue;
		printf("%s\"%d\":%u", first ? "" : ",", i, per_node[i]);
		first = 0;
	}
	printf("},\"mem_pages_sampled\":%zu,\"mem_pages_unknown\":%u", n, other);
}

/* numa_preferred_nid and total_numa_faults from /proc/self/sched; -1 when absent. */
static void numa_sched(long *pnid, long *faults)
{
	char line[256];
	FILE *f = fopen("/proc/self/sched", "r");

	*pnid = *faults = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		if (!strncmp(line, "numa_preferred_nid", 18))
			*pnid = strtol(colon + 1, NULL, 10);
		else if (!strncmp(line, "total_numa_faults", 17))
			*faults = strtol(colon + 1, NULL, 10);
	}
	fclose(f);
}

struct sample {
	double t;
	int cpu;
	long pnid, faults;
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"mib", required_argument, NULL, 'm'},
		{"node", required_argument, NULL, 'N'},
		{"seconds", required_argument, NULL, 's'},
		{"loops", required_argument, NULL, 'l'},
		{"sample", required_argument, NULL, 'k'},
		{"balancing", no_argument, NULL, 'B'},
		{"start-cpus", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	long mib = 64, node = -1, max_loops = 0, sample_every = 65536;
	double run_seconds = 0, t0, t, tl, loop_min = 1e30, loop_max = 0;
	size_t bytes, nlines;
	struct cpu_hist *hist;
	struct line *buf, *p;
	size_t *order;
	unsigned long loops = 0, since_sample = 0;
	int opt, cpu_setup, cpu_start, cpu_end, balancing = 0;
	const char *start_cpus = NULL;
	cpu_set_t orig_set;
	static struct sample samples[MAX_SAMPLES];
	size_t nsamples = 0;

	opterr = 0;
	prog = "memprobe";
	while ((opt = getopt_long(argc, argv, ":m:s:l:k:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'm': mib = parse_long("-m", optarg, 1, 1 << 20); break;
		case 'N': node = parse_long("--node", optarg, 0, MAX_NODES - 1); break;
		case 's': run_seconds = parse_seconds("-s", optarg); break;
		case 'l': max_loops = parse_long("-l", optarg, 1, LONG_MAX); break;
		case 'k': sample_every = parse_long("-k", optarg, 1, LONG_MAX); break;
		case 'B': balancing = 1; break;
		case 'C': start_cpus = optarg; break;
		case 'h': help(); return 0;
		default: bad_option(opt, argv);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (run_seconds == 0 && max_loops == 0)
		run_seconds = 1;
	if (balancing && node < 0)
		usage_error("--balancing needs --node");
	if (start_cpus) {
		cpu_set_t set;

		if (parse_cpulist(start_cpus, &set))
			usage_error("--start-cpus needs a cpulist like 0-3,8, got '%s'", start_cpus);
		if (sched_getaffinity(0, sizeof(orig_set), &orig_set))
			fail("sched_getaffinity: %s", strerror(errno));
		if (sched_setaffinity(0, sizeof(set), &set))
			fail("cannot start on CPUs %s: %s", start_cpus, strerror(errno));
	}

	bytes = (size_t)mib << 20;
	nlines = bytes / LINE;
	buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		fail("cannot map %ld MiB: %s", mib, strerror(errno));
	if (node >= 0) {
		unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))] = {0};
		char path[64];

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%ld", node);
		mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
		/* maxnode counts one past the last bit: the kernel's get_nodes()
		 * decrements it first (libnuma passes size + 1 too). */
		if (syscall(SYS_mbind, buf, bytes, MPOL_BIND | (balancing ? MPOL_F_NUMA_BALANCING : 0),
			    mask, MAX_NODES + 1, MPOL_MF_STRICT)) {
			int err = errno;

			fail("mbind of %ld MiB to node %ld%s failed: %s%s", mib, node,
			     balancing ? " with MPOL_F_NUMA_BALANCING" : "", strerror(err),
			     access(path, F_OK) ? " (no such node: see /sys/devices/system/node)"
			     : balancing && err == EINVAL ? " (MPOL_F_NUMA_BALANCING needs Linux 5.12)" : "");
		}
	}

	/* Sattolo's shuffle: a single cycle through every line. */
	order = malloc(nlines * sizeof(*order));
	if (!order)
		fail("cannot allocate the %zu-entry shuffle table", nlines);
	for (size_t i = 0; i < nlines; i++)
		order[i] = i;
	for (size_t i = nlines - 1; i > 0; i--) {
		size_t j = xorshift() % i, tmp = order[i];

		order[i] = order[j];
		order[j] = tmp;
	}
	for (size_t i = 0; i < nlines; i++) /* first touch happens here, under the policy */
		buf[order[i]].next = &buf[order[(i + 1) % nlines]];
	free(order);
	cpu_setup = sched_getcpu(); /* where the setup ran: inside --start-cpus when given */
	if (start_cpus && sched_setaffinity(0, sizeof(orig_set), &orig_set))
		fail("cannot restore the affinity after the setup: %s", strerror(errno));

	hist = calloc(1, sizeof(*hist));
	if (!hist)
		fail("out of memory");
	cpu_start = sched_getcpu();
	p = &buf[0];
	t0 = tl = now();
	for (;;) {
		for (size_t i = 0; i < nlines; i++) {
			p = p->next;
			if (++since_sample == (unsigned long)sample_every) {
				since_sample = 0;
				hist_sample(hist);
			}
		}
		loops++;
		t = now();
		if (t - tl < loop_min)
			loop_min = t - tl;
		if (t - tl > loop_max)
			loop_max = t - tl;
		tl = t;
		if (nsamples < MAX_SAMPLES) {
			struct sample *sp = &samples[nsamples++];

			sp->t = t - t0;
			sp->cpu = sched_getcpu();
			numa_sched(&sp->pnid, &sp->faults);
		}
		if (max_loops && loops >= (unsigned long)max_loops)
			break;
		if (run_seconds > 0 && t - t0 >= run_seconds)
			break;
	}
	cpu_end = sched_getcpu();
	if (p != &buf[0]) /* a full cycle returns to the start; also keeps p live */
		fail("pointer chase did not close its cycle");
	hist_sample(hist);

	printf("{\"workload\":\"memprobe\",\"pid\":%d,\"tid\":%ld,\"mib\":%ld,\"node\":%ld,"
	       "\"loops\":%lu,\"total_s\":%.6f,\"loop_s\":%.6f,\"loop_min_s\":%.6f,"
	       "\"loop_max_s\":%.6f,\"ns_per_load\":%.2f,\"cpu_setup\":%d,\"cpu_start\":%d,\"cpu_end\":%d,\"cpus\":",
	       getpid(), gettid_(), mib, node, loops, t - t0, (t - t0) / loops, loop_min,
	       loop_max, (t - t0) * 1e9 / ((double)loops * nlines), cpu_setup, cpu_start, cpu_end);
	hist_print(stdout, hist);
	print_page_nodes((char *)buf, bytes);
	printf(",\"balancing\":%s,\"numa\":[", balancing ? "true" : "false");
	for (size_t i = 0; i < nsamples; i++)
		printf("%s[%.3f,%d,%ld,%ld]", i ? "," : "", samples[i].t, samples[i].cpu, samples[i].pnid,
		       samples[i].faults);
	printf("]}\n");
	return 0;
}
