/* Helpers shared by lab's guest workloads (header-only, static binaries).
 *
 * Conventions every workload follows:
 *   - bad arguments: one line "NAME: what is wrong" on stderr, exit 2;
 *   - runtime failure (mbind, pthread_create...): one line on stderr, exit 1;
 *   - results: exactly one JSON object on one line on stdout, printed last.
 */
#ifndef LAB_WORKLOAD_COMMON_H
#define LAB_WORKLOAD_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* CPU numbers above this are ignored in histograms (CPU_SETSIZE is 1024). */
#define MAX_CPUS CPU_SETSIZE

static const char *prog = "workload";

__attribute__((noreturn, format(printf, 1, 2))) static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see %s --help)\n", prog);
	exit(2);
}

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

__attribute__((unused)) static long parse_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		usage_error("%s needs an integer in [%ld, %ld], got '%s'", opt, min, max, s);
	return v;
}

__attribute__((unused)) static double parse_seconds(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > 1e6)
		usage_error("%s needs a positive number of seconds, got '%s'", opt, s);
	return v;
}

/* Parse a Linux cpulist ("0-3,8,10-11") into *set.  Returns 0 or -1. */
__attribute__((unused)) static int parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	if (!*s)
		return -1;
	while (*s) {
		char *end;
		long a, b;

		if (*s < '0' || *s > '9')
			return -1;
		a = strtol(s, &end, 10);
		b = a;
		s = end;
		if (*s == '-') {
			s++;
			if (*s < '0' || *s > '9')
				return -1;
			b = strtol(s, &end, 10);
			s = end;
		}
		if (a > b || b >= MAX_CPUS)
			return -1;
		for (long c = a; c <= b; c++)
			CPU_SET(c, set);
		if (*s == ',') {
			s++;
			if (!*s)
				return -1;
		} else if (*s) {
			return -1;
		}
	}
	return 0;
}

/* getopt_long returned '?' or ':' (the optstring starts with ':' and opterr is 0,
 * so getopt itself prints nothing and the error stays on one line). */
__attribute__((unused, noreturn)) static void bad_option(int opt, char **argv)
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		usage_error("option '%s' needs a value", arg);
	if (optopt && arg[0] == '-' && arg[1] != '-')
		usage_error("unknown option '-%c'", optopt);
	usage_error("unknown option '%s'", arg);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long gettid_(void)
{
	return syscall(SYS_gettid);
}

/* Per-CPU sample counts, printed as a JSON object {"cpu": count, ...}. */
struct cpu_hist {
	unsigned int count[MAX_CPUS];
};

static void hist_sample(struct cpu_hist *h)
{
	int cpu = sched_getcpu();

	if (cpu >= 0 && cpu < MAX_CPUS)
		h->count[cpu]++;
}

static void hist_print(FILE *f, const struct cpu_hist *h)
{
	int first = 1;

	fputc('{', f);
	for (int c = 0; c < MAX_CPUS; c++) {
		if (!h->count[c])
			continue;
		fprintf(f, "%s\"%d\":%u", first ? "" : ",", c, h->count[c]);
		first = 0;
	}
	fputc('}', f);
}

#endif
