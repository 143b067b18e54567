/* tracedump: copy every CPU's ftrace ring buffer out of tracefs as raw pages, for the
 * host to assemble into a trace.dat (lab/trace/tracedat.py) that trace-cmd, KernelShark,
 * LISA and Perfetto open.
 *
 *   tracedump TRACEFS OUTDIR    writes OUTDIR/cpuN (the pages of per_cpu/cpuN/trace_pipe_raw,
 *                               verbatim) and OUTDIR/page_size
 *
 * Busybox cannot do this: trace_pipe_raw blocks on an empty buffer unless it is opened
 * O_NONBLOCK (tracing_buffers_read() waits in wait_on_pipe()), and tracing is off by
 * the time lab reads it, so a plain `cat` would wait forever.  Reading consumes the
 * events: lab_trace_off saves the text trace first.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CPUS CPU_SETSIZE

/* common.h's conventions (bad arguments exit 2, failures exit 1, one line on stderr),
 * without its workload helpers, which -Werror would call unused here. */
__attribute__((noreturn, format(printf, 2, 3))) static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "tracedump: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}
#define fail(...) die(1, __VA_ARGS__)

static int cpu_number(const char *name)
{
	char *end;
	long n;

	if (strncmp(name, "cpu", 3) != 0 || !name[3])
		return -1;
	n = strtol(name + 3, &end, 10);
	return (*end || n < 0 || n >= MAX_CPUS) ? -1 : (int)n;
}

int main(int argc, char **argv)
{
	char path[PATH_MAX];
	long page = sysconf(_SC_PAGESIZE);
	unsigned long long total = 0;
	int cpus = 0;
	char *buf;
	DIR *d;
	struct dirent *e;
	FILE *f;

	if (argc == 2 && !strcmp(argv[1], "--help")) {
		printf("usage: tracedump TRACEFS OUTDIR\n"
		       "Copy each CPU's ring buffer (TRACEFS/per_cpu/cpuN/trace_pipe_raw, read until empty)\n"
		       "to OUTDIR/cpuN as raw pages, and the page size to OUTDIR/page_size.\n");
		return 0;
	}
	if (argc != 3)
		die(2, "needs TRACEFS and OUTDIR, got %d argument(s) (see tracedump --help)", argc - 1);
	buf = malloc(page);
	if (!buf)
		fail("out of memory");
	snprintf(path, sizeof(path), "%s/page_size", argv[2]);
	f = fopen(path, "w");
	if (!f)
		fail("cannot write %s: %s", path, strerror(errno));
	fprintf(f, "%ld\n", page);
	fclose(f);
	snprintf(path, sizeof(path), "%s/per_cpu", argv[1]);
	d = opendir(path);
	if (!d)
		fail("cannot open %s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		int cpu = cpu_number(e->d_name), in, out;
		ssize_t n;

		if (cpu < 0)
			continue;
		snprintf(path, sizeof(path), "%s/per_cpu/%s/trace_pipe_raw", argv[1], e->d_name);
		in = open(path, O_RDONLY | O_NONBLOCK);
		if (in < 0)
			fail("cannot open %s: %s", path, strerror(errno));
		snprintf(path, sizeof(path), "%s/cpu%d", argv[2], cpu);
		out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (out < 0)
			fail("cannot write %s: %s", path, strerror(errno));
		/* One page per read; EAGAIN (or 0) once the buffer is empty. */
		while ((n = read(in, buf, page)) > 0) {
			if (write(out, buf, n) != n)
				fail("cannot write %s: %s", path, strerror(errno));
			total += n;
		}
		if (n < 0 && errno != EAGAIN)
			fail("cannot read cpu%d's trace_pipe_raw: %s", cpu, strerror(errno));
		close(in);
		close(out);
		cpus++;
	}
	closedir(d);
	printf("{\"workload\": \"tracedump\", \"cpus\": %d, \"bytes\": %llu, \"page_size\": %ld}\n", cpus, total, page);
	return 0;
}
