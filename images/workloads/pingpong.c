/* pingpong: P waker/wakee pairs doing 1-byte round trips (tbench / TCP_RR shape).
 *
 * The waker writes a byte, the wakee reads it and writes it back, the waker
 * reads the reply: every round trip is two wakeups, so the scheduler's
 * wake-affine / select_idle_sibling choice shows in where the wakee runs
 * (seed 002).  Pairs run as threads by default, as processes with --fork.
 * --start W:E,... pins pair i's waker to CPU W and its wakee to CPU E for the first
 * --settle round trips, then lets both run on every allowed CPU: where the scheduler
 * then puts them is its own choice from a known start (the waker's cluster or not).
 * Results live in a MAP_SHARED mapping so both modes report the same way.
 */
#include "common.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define QUIT 'q'
#define PING 'p'

struct side {
	long tid;
	struct cpu_hist hist;
};

struct pair {
	int index;
	int to_wakee[2];  /* waker writes [1], wakee reads [0] */
	int to_waker[2];  /* wakee writes [1], waker reads [0] */
	unsigned long rounds;
	double seconds;
	int error;        /* errno of a failed read/write, 0 if fine */
	struct side waker, wakee;
	pthread_t threads[2];
	int start_cpu[2]; /* --start: [0] wakee's, [1] waker's CPU until --settle round trips; -1: none */
};

static double run_seconds = 0;
static unsigned long max_rounds = 0;
static unsigned long sample_every = 64;
static unsigned long settle = 64;
static cpu_set_t widen_to; /* the CPUs a pinned start widens to: the process's own */

static void pin(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		fail("--start: cannot pin to CPU %d: %s", cpu, strerror(errno));
}

static void widen(void)
{
	if (sched_setaffinity(0, sizeof(widen_to), &widen_to))
		fail("--start: cannot widen the affinity again: %s", strerror(errno));
}

static int xfer(int rfd, int wfd, char *c, int do_write_first)
{
	if (do_write_first && write(wfd, c, 1) != 1)
		return errno ? errno : EIO;
	if (read(rfd, c, 1) != 1)
		return errno ? errno : EIO;
	return 0;
}

static void *waker_main(void *arg)
{
	struct pair *p = arg;
	unsigned long n = 0;
	double t0;
	char c;

	p->waker.tid = gettid_();
	if (p->start_cpu[1] >= 0)
		pin(p->start_cpu[1]);
	t0 = now();
	for (;;) {
		c = PING;
		if ((p->error = xfer(p->to_waker[0], p->to_wakee[1], &c, 1)))
			break;
		n++;
		if (p->start_cpu[1] >= 0 && n == settle)
			widen();
		if (n % sample_every == 0 || n == 1)
			hist_sample(&p->waker.hist);
		if (run_seconds > 0 && n % 16 == 0 && now() - t0 >= run_seconds)
			break;
		if (max_rounds && n >= max_rounds)
			break;
	}
	p->seconds = now() - t0;
	p->rounds = n;
	c = QUIT;
	if (write(p->to_wakee[1], &c, 1) != 1 && !p->error)
		p->error = errno;
	return NULL;
}

static void *wakee_main(void *arg)
{
	struct pair *p = arg;
	unsigned long n = 0;
	char c;

	p->wakee.tid = gettid_();
	if (p->start_cpu[0] >= 0)
		pin(p->start_cpu[0]);
	for (;;) {
		if (read(p->to_wakee[0], &c, 1) != 1 || c == QUIT)
			break;
		n++;
		if (p->start_cpu[0] >= 0 && n == settle)
			widen();
		if (n % sample_every == 0 || n == 1)
			hist_sample(&p->wakee.hist);
		if (write(p->to_waker[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

static void make_channel(int fds[2], int use_unix, int pair)
{
	if (use_unix) {
		/* one socketpair per direction keeps the fd roles the same as pipes */
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds))
			fail("socketpair for pair %d: %s", pair, strerror(errno));
	} else if (pipe(fds)) {
		fail("pipe for pair %d: %s", pair, strerror(errno));
	}
}

static void help(void)
{
	printf("usage: %s [-p PAIRS] (-s SECONDS | -n ROUNDS) [--unix] [--fork] [--cpus LIST] [-k N]\n"
	       "       [--start W:E,... [--settle N]]\n"
	       "P waker/wakee pairs doing 1-byte round trips over pipes (or UNIX sockets).\n"
	       "  -p, --pairs P       number of pairs (default 1)\n"
	       "  -s, --seconds S     run each pair for S seconds, fractional ok\n"
	       "  -n, --rounds N      run each pair for N round trips\n"
	       "                      (default: -s 1; with both, whichever ends first)\n"
	       "      --unix          UNIX stream sockets instead of pipes\n"
	       "      --fork          processes instead of threads\n"
	       "      --cpus LIST     restrict every task to a cpulist, e.g. 0-3,8\n"
	       "  -k, --sample N      sample sched_getcpu every N round trips (default 64)\n"
	       "      --start W:E,... pair i's waker starts on CPU W, its wakee on CPU E (one W:E per\n"
	       "                      pair), both pinned there for --settle round trips, then free\n"
	       "                      on every allowed CPU again\n"
	       "      --settle N      round trips before a --start pair is let go (default 64)\n"
	       "Output: one JSON line; per pair rounds, rtt_per_s and a {cpu: samples} histogram\n"
	       "for each side.\n",
	       prog);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"pairs", required_argument, NULL, 'p'},
		{"seconds", required_argument, NULL, 's'},
		{"rounds", required_argument, NULL, 'n'},
		{"unix", no_argument, NULL, 'U'},
		{"fork", no_argument, NULL, 'F'},
		{"cpus", required_argument, NULL, 'C'},
		{"sample", required_argument, NULL, 'k'},
		{"start", required_argument, NULL, 'S'},
		{"settle", required_argument, NULL, 'T'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	long npairs = 1;
	int use_unix = 0, use_fork = 0, opt, failed = 0;
	const char *cpus = NULL, *start = NULL;
	struct pair *pairs;
	pid_t (*pids)[2]; /* private memory: a forked child must not overwrite them */
	double total_rate = 0;
	unsigned long total_rounds = 0;

	opterr = 0;
	prog = "pingpong";
	while ((opt = getopt_long(argc, argv, ":p:s:n:k:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'p': npairs = parse_long("-p", optarg, 1, 4096); break;
		case 's': run_seconds = parse_seconds("-s", optarg); break;
		case 'n': max_rounds = parse_long("-n", optarg, 1, LONG_MAX); break;
		case 'U': use_unix = 1; break;
		case 'F': use_fork = 1; break;
		case 'C': cpus = optarg; break;
		case 'k': sample_every = parse_long("-k", optarg, 1, LONG_MAX); break;
		case 'S': start = optarg; break;
		case 'T': settle = parse_long("--settle", optarg, 1, LONG_MAX); break;
		case 'h': help(); return 0;
		default: bad_option(opt, argv);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (run_seconds == 0 && max_rounds == 0)
		run_seconds = 1;

	if (cpus) {
		cpu_set_t set;

		if (parse_cpulist(cpus, &set))
			usage_error("--cpus needs a cpulist like 0-3,8, got '%s'", cpus);
		if (sched_setaffinity(0, sizeof(set), &set))
			fail("cannot restrict to CPUs %s: %s", cpus, strerror(errno));
	}

	if (sched_getaffinity(0, sizeof(widen_to), &widen_to))
		fail("sched_getaffinity: %s", strerror(errno));
	pairs = mmap(NULL, npairs * sizeof(*pairs), PROT_READ | PROT_WRITE,
		     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (pairs == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	for (long i = 0; i < npairs; i++)
		pairs[i].start_cpu[0] = pairs[i].start_cpu[1] = -1;
	if (start) {
		const char *q = start;

		for (long i = 0; i < npairs; i++) {
			int w, e, used = 0;

			if (sscanf(q, "%d:%d%n", &w, &e, &used) != 2 || w < 0 || e < 0 ||
			    w >= CPU_SETSIZE || e >= CPU_SETSIZE)
				usage_error("--start needs W:E per pair, e.g. 0:4,5:1, got '%s'", start);
			if (!CPU_ISSET(w, &widen_to) || !CPU_ISSET(e, &widen_to))
				usage_error("--start %d:%d: a CPU outside the allowed ones", w, e);
			pairs[i].start_cpu[1] = w;
			pairs[i].start_cpu[0] = e;
			q += used;
			if (i + 1 < npairs && *q++ != ',')
				usage_error("--start names %ld pair(s), -p says %ld", i + 1, npairs);
		}
		if (*q)
			usage_error("--start names more pairs than -p %ld: '%s'", npairs, start);
	}
	pids = calloc(npairs, sizeof(*pids));
	if (!pids)
		fail("out of memory");
	signal(SIGPIPE, SIG_IGN);
	for (long i = 0; i < npairs; i++) {
		pairs[i].index = i;
		make_channel(pairs[i].to_wakee, use_unix, i);
		make_channel(pairs[i].to_waker, use_unix, i);
	}
	fflush(stdout);
	for (long i = 0; i < npairs; i++) {
		struct pair *p = &pairs[i];
		void *(*fn[2])(void *) = {wakee_main, waker_main};

		for (int s = 0; s < 2; s++) {
			if (use_fork) {
				pids[i][s] = fork();
				if (pids[i][s] < 0)
					fail("fork for pair %ld: %s", i, strerror(errno));
				if (pids[i][s] == 0) {
					fn[s](p);
					_exit(0);
				}
			} else {
				int err = pthread_create(&p->threads[s], NULL, fn[s], p);

				if (err)
					fail("pthread_create for pair %ld: %s", i, strerror(err));
			}
		}
	}
	for (long i = 0; i < npairs; i++) {
		for (int s = 0; s < 2; s++) {
			if (use_fork) {
				int status;

				if (waitpid(pids[i][s], &status, 0) < 0 || !WIFEXITED(status) ||
				    WEXITSTATUS(status))
					failed = 1;
			} else {
				pthread_join(pairs[i].threads[s], NULL);
			}
		}
	}

	printf("{\"workload\":\"pingpong\",\"pid\":%d,\"pairs\":%ld,\"transport\":\"%s\","
	       "\"mode\":\"%s\",\"per_pair\":[",
	       getpid(), npairs, use_unix ? "unix" : "pipe", use_fork ? "fork" : "threads");
	for (long i = 0; i < npairs; i++) {
		struct pair *p = &pairs[i];
		double rate = p->seconds > 0 ? p->rounds / p->seconds : 0;

		total_rate += rate;
		total_rounds += p->rounds;
		if (p->error)
			failed = 1;
		printf("%s{\"pair\":%d,\"waker_tid\":%ld,\"wakee_tid\":%ld,\"rounds\":%lu,"
		       "\"seconds\":%.3f,\"rtt_per_s\":%.1f,\"rtt_us\":%.2f,\"start\":[%d,%d],\"waker_cpus\":",
		       i ? "," : "", p->index, p->waker.tid, p->wakee.tid, p->rounds, p->seconds,
		       rate, rate > 0 ? 1e6 / rate : 0.0, p->start_cpu[1], p->start_cpu[0]);
		hist_print(stdout, &p->waker.hist);
		printf(",\"wakee_cpus\":");
		hist_print(stdout, &p->wakee.hist);
		putchar('}');
	}
	printf("],\"total_rounds\":%lu,\"total_rtt_per_s\":%.1f}\n", total_rounds, total_rate);
	fflush(stdout);
	for (long i = 0; i < npairs; i++)
		if (pairs[i].error)
			fail("pair %ld: transfer failed: %s", i, strerror(pairs[i].error));
	if (failed)
		fail("a pair process exited abnormally");
	return 0;
}
