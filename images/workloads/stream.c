/* stream: STREAM-like triad bandwidth, one set of arrays per thread.
 *
 * The main thread creates the workers one after the other and then only waits,
 * so each worker's first placement is the kernel's fork-time choice
 * (sched_wakeup_new), which is what seed 000 looks at.  With --main-works the
 * main thread is worker 0, as an OpenMP master is one of its team: it creates
 * workers 1..N-1, then runs its own share, so N threads occupy N CPUs and no
 * thread that only forks and waits holds one of them (with N workers pinned to
 * N CPUs the main thread made N+1 tasks, and the last fork had no free CPU).
 * Workers never set their
 * own affinity: pin the whole process from outside (taskset / numactl -C).
 * Each worker allocates and first-touches its arrays after it starts, so the
 * pages land on the node it runs on.  With --gate a worker first spins (a pause /
 * yield loop: it stays runnable, as an OpenMP thread spins at its team's first
 * barrier) until the last worker is created, and only then allocates: without it a
 * worker's malloc() and first touch wait on the mm's lock that the creator's next
 * pthread_create() holds (its stack mmap()), the worker sleeps, its CPU looks idle
 * to the next fork's placement, and forks pile up on CPUs whose workers only slept.
 */
#include "common.h"

#include <pthread.h>

struct worker {
	pthread_t thread;
	int index;
	long tid;
	int cpu_create; /* main thread's CPU when it created this worker */
	int cpu_start, cpu_end;
	int allowed; /* CPUs in this worker's affinity mask */
	unsigned long iterations;
	double seconds;
	double mbps;
	struct cpu_hist hist;
};

static size_t elems;
static double run_seconds = 1.0;
static int gate; /* --gate: wait for the last pthread_create() before allocating */
static int gate_open;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	double *a, *b, *c, t0, t;
	const double scalar = 3.0;
	cpu_set_t mask;

	w->tid = gettid_();
	w->cpu_start = sched_getcpu();
	if (sched_getaffinity(0, sizeof(mask), &mask) == 0)
		w->allowed = CPU_COUNT(&mask);
	while (gate && !__atomic_load_n(&gate_open, __ATOMIC_ACQUIRE))
		cpu_relax();
	a = malloc(elems * sizeof(*a));
	b = malloc(elems * sizeof(*b));
	c = malloc(elems * sizeof(*c));
	if (!a || !b || !c)
		fail("thread %d: cannot allocate 3 x %zu bytes", w->index, elems * sizeof(double));
	for (size_t i = 0; i < elems; i++) { /* first touch, on this thread's node */
		a[i] = 0.0;
		b[i] = 1.0;
		c[i] = 2.0;
	}
	t0 = now();
	do {
		for (size_t i = 0; i < elems; i++)
			a[i] = b[i] + scalar * c[i];
		w->iterations++;
		hist_sample(&w->hist);
		t = now();
	} while (t - t0 < run_seconds);
	w->seconds = t - t0;
	/* triad moves 3 doubles per element (STREAM's convention) */
	w->mbps = 3.0 * sizeof(double) * elems * w->iterations / w->seconds / 1e6;
	if (a[elems / 2] != b[0] + scalar * c[0])
		fail("thread %d: triad result is wrong", w->index);
	w->cpu_end = sched_getcpu();
	free(a);
	free(b);
	free(c);
	return NULL;
}

static void help(void)
{
	printf("usage: %s [-t THREADS] [-s SECONDS] [-m MIB] [--pin-main CPU] [--main-works] [--gate]\n"
	       "STREAM-like triad a[i] = b[i] + 3*c[i]; each thread owns 3 arrays of MIB MiB.\n"
	       "  -t, --threads N     worker threads (default 1)\n"
	       "  -s, --seconds S     run time per thread, fractional ok (default 1)\n"
	       "  -m, --mib M         size of each array in MiB (default 8)\n"
	       "      --pin-main CPU  move the main thread to CPU before creating workers, then\n"
	       "                      restore its affinity so workers inherit the process mask\n"
	       "      --main-works    the main thread is thread 0 (an OpenMP master): it creates\n"
	       "                      threads 1..N-1, then runs its own share (N threads, N-1 forks)\n"
	       "      --gate          workers spin, runnable, until the last one is created, then\n"
	       "                      allocate and run (an OpenMP team at its first barrier)\n"
	       "Output: one JSON line with per-thread tid, cpu_start, cpu_end, allowed (CPUs in\n"
	       "its mask), iterations, mbps, and a {cpu: samples} histogram; total_mbps.\n",
	       prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"threads", required_argument, NULL, 't'},
		{"seconds", required_argument, NULL, 's'},
		{"mib", required_argument, NULL, 'm'},
		{"pin-main", required_argument, NULL, 'P'},
		{"main-works", no_argument, NULL, 'W'},
		{"gate", no_argument, NULL, 'G'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	long nthreads = 1, mib = 8, pin_main = -1;
	int main_works = 0;
	struct worker *workers;
	double total = 0;
	int opt;

	opterr = 0;
	prog = "stream";
	while ((opt = getopt_long(argc, argv, ":t:s:m:h", opts, NULL)) != -1) {
		switch (opt) {
		case 't': nthreads = parse_long("-t", optarg, 1, 4096); break;
		case 's': run_seconds = parse_seconds("-s", optarg); break;
		case 'm': mib = parse_long("-m", optarg, 1, 1 << 20); break;
		case 'P': pin_main = parse_long("--pin-main", optarg, 0, MAX_CPUS - 1); break;
		case 'W': main_works = 1; break;
		case 'G': gate = 1; break;
		case 'h': help(); return 0;
		default: bad_option(opt, argv);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	elems = (size_t)mib * 1024 * 1024 / sizeof(double);

	if (pin_main >= 0) {
		cpu_set_t orig, one;

		if (sched_getaffinity(0, sizeof(orig), &orig))
			fail("sched_getaffinity: %s", strerror(errno));
		if (!CPU_ISSET(pin_main, &orig))
			usage_error("--pin-main %ld is not in the allowed CPUs", pin_main);
		CPU_ZERO(&one);
		CPU_SET(pin_main, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			fail("cannot move to CPU %ld: %s", pin_main, strerror(errno));
		/* Restore the mask at once: workers inherit the creator's mask at
		 * clone(), and we must not narrow it.  The main thread is running on
		 * pin_main now and stays there unless something preempts it. */
		if (sched_setaffinity(0, sizeof(orig), &orig))
			fail("sched_setaffinity: %s", strerror(errno));
	}

	workers = calloc(nthreads, sizeof(*workers));
	if (!workers)
		fail("out of memory");
	for (long i = main_works ? 1 : 0; i < nthreads; i++) {
		int err;

		workers[i].index = i;
		workers[i].cpu_create = sched_getcpu();
		err = pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
		if (err)
			fail("pthread_create for thread %ld: %s", i, strerror(err));
	}
	__atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
	if (main_works) { /* thread 0 is this one: no fork, it runs where it is */
		workers[0].index = 0;
		workers[0].cpu_create = -1;
		worker_main(&workers[0]);
	}
	for (long i = main_works ? 1 : 0; i < nthreads; i++)
		pthread_join(workers[i].thread, NULL);

	printf("{\"workload\":\"stream\",\"pid\":%d,\"threads\":%ld,\"main_works\":%s,\"gate\":%s,"
	       "\"mib_per_array\":%ld,\"seconds\":%.3f,\"per_thread\":[",
	       getpid(), nthreads, main_works ? "true" : "false", gate ? "true" : "false", mib, run_seconds);
	for (long i = 0; i < nthreads; i++) {
		struct worker *w = &workers[i];

		total += w->mbps;
		printf("%s{\"thread\":%d,\"tid\":%ld,\"cpu_create\":%d,\"cpu_start\":%d,"
		       "\"cpu_end\":%d,\"allowed\":%d,\"iterations\":%lu,\"seconds\":%.3f,"
		       "\"mbps\":%.1f,\"cpus\":",
		       i ? "," : "", w->index, w->tid, w->cpu_create, w->cpu_start, w->cpu_end,
		       w->allowed, w->iterations, w->seconds, w->mbps);
		hist_print(stdout, &w->hist);
		putchar('}');
	}
	printf("],\"total_mbps\":%.1f}\n", total);
	free(workers);
	return 0;
}
