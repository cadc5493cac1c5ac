/* What the DPDK comparison harnesses share: errors, a clock, reading a binary
 * trace, DPDK's heap use, and EAL setup with a per-process runtime directory that
 * is removed at exit. Each harness defines HARNESS_NAME ("lpm_bench") and
 * HARNESS_PREFIX ("lpmbench": EAL's --file-prefix and the environment variable
 * HARNESS_PREFIX_EAL_EXTRA, upper-cased by the includer as HARNESS_EAL_EXTRA)
 * before including this file. Everything here is static: one translation unit
 * per harness. */
#ifndef LINERATE_DPDK_HARNESS_H
#define LINERATE_DPDK_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_malloc.h>

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
	va_list ap;
	fputs(HARNESS_NAME ": error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static FILE *json_out; /* the real stdout; fd 1 is pointed at stderr */

/* Keeps stdout for the JSON lines only: DPDK logs to stdout by default, so fd 1
 * becomes stderr and the JSON goes to json_out. */
static void json_to_real_stdout(void)
{
	int jfd = dup(STDOUT_FILENO);
	if (jfd < 0 || !(json_out = fdopen(jfd, "w"))) {
		perror("dup stdout");
		exit(1);
	}
	dup2(STDERR_FILENO, STDOUT_FILENO);
	rte_openlog_stream(stderr);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A whole binary trace file of fixed-size records, 64-byte aligned. */
static void *load_trace(const char *path, size_t elem, size_t *count)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (!f)
		die("cannot open trace file '%s': %s", path, strerror(errno));
	if (fstat(fileno(f), &st) != 0)
		die("cannot stat '%s': %s", path, strerror(errno));
	size_t sz = (size_t)st.st_size;
	if (sz == 0)
		die("trace file '%s' is empty", path);
	if (sz % elem)
		die("trace file '%s' is %zu bytes, not a multiple of %zu", path, sz, elem);
	void *buf = aligned_alloc(64, (sz + 63) & ~(size_t)63);
	if (!buf)
		die("out of memory for a %zu byte trace", sz);
	if (fread(buf, 1, sz, f) != sz)
		die("short read on '%s'", path);
	fclose(f);
	*count = sz / elem;
	return buf;
}

/* Bytes allocated from DPDK's heaps, all sockets: what a structure costs. */
static uint64_t heap_alloc_bytes(void)
{
	uint64_t sum = 0;
	unsigned ns = rte_socket_count();
	for (unsigned i = 0; i < ns; i++) {
		struct rte_malloc_socket_stats st;
		int sid = rte_socket_id_by_idx(i);
		if (sid >= 0 && rte_malloc_get_socket_stats(sid, &st) == 0)
			sum += st.heap_allocsz_bytes;
	}
	return sum;
}

/* This process's own EAL runtime directory (.../HARNESS_PREFIX<pid>), removed
 * at exit so repeated runs leave nothing behind. */
static char runtime_dir[4096];

static void remove_runtime_dir(void)
{
	if (!strstr(runtime_dir, HARNESS_PREFIX))
		return;
	DIR *d = opendir(runtime_dir);
	if (!d)
		return;
	struct dirent *e;
	char p[sizeof(runtime_dir) + 260];
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", runtime_dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(runtime_dir);
}

/* EAL without hugepages or PCI, on core 0, with mem_mb of memory; extra EAL
 * flags (e.g. --force-max-simd-bitwidth=512) from HARNESS_EAL_EXTRA. */
static void eal_init(unsigned mem_mb)
{
	static char a_prefix[64], a_mem[32];
	static char *argv[64];
	int argc = 0;
	snprintf(a_mem, sizeof(a_mem), "%u", mem_mb);
	snprintf(a_prefix, sizeof(a_prefix), "--file-prefix=" HARNESS_PREFIX "%ld", (long)getpid());
	argv[argc++] = HARNESS_NAME;
	argv[argc++] = "--no-huge";
	argv[argc++] = "--no-pci";
	argv[argc++] = "-m";
	argv[argc++] = a_mem;
	argv[argc++] = "-l";
	argv[argc++] = "0";
	argv[argc++] = "--no-telemetry";
	argv[argc++] = "--log-level=lib.eal:error";
	argv[argc++] = a_prefix;
	/* The copy is kept for the life of the process: EAL may keep argv pointers. */
	const char *extra = getenv(HARNESS_EAL_EXTRA);
	if (extra && *extra) {
		char *copy = strdup(extra);
		for (char *tok = strtok(copy, " \t"); tok && argc < 62; tok = strtok(NULL, " \t"))
			argv[argc++] = tok;
	}
	argv[argc] = NULL;
	fprintf(stderr, HARNESS_NAME ": EAL args:");
	for (int i = 1; i < argc; i++)
		fprintf(stderr, " %s", argv[i]);
	fputc('\n', stderr);
	if (rte_eal_init(argc, argv) < 0)
		die("rte_eal_init failed: %s (-m %u MB)", rte_strerror(rte_errno), mem_mb);
	const char *rd = rte_eal_get_runtime_dir();
	if (rd) {
		snprintf(runtime_dir, sizeof(runtime_dir), "%s", rd);
		atexit(remove_runtime_dir);
	}
}

#endif
