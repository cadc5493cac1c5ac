/*
 * lpm_bench: measure DPDK's rte_lpm / rte_lpm6 / rte_fib (DIR24_8) /
 * rte_fib6 (TRIE) on a route table and an address trace read from files,
 * so that Linerate's own LPM can be compared on exactly the same data.
 *
 *   lpm_bench ENGINE ROUTES_FILE TRACE_FILE [SECONDS]
 *
 * ENGINE is lpm | lpm6 | fib | fib6.  See README.md for the file formats.
 * Exactly one JSON object (one line) goes to stdout; everything else, DPDK's
 * own log output included, goes to stderr.
 */
#define _GNU_SOURCE
#define ALLOW_EXPERIMENTAL_API /* rte_vect_get_max_simd_bitwidth() */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
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
#include <rte_fib.h>
#include <rte_fib6.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_vect.h>

#define HARNESS_NAME "lpm_bench"
#define HARNESS_PREFIX "lpmbench"
#define HARNESS_EAL_EXTRA "LPMBENCH_EAL_EXTRA"
#include "harness.h"

#define BULK 64
#define PROGRESS_EVERY 100000u
#define MEM_MB_MIN 512u
#define MEM_MB_MAX 16384u
#define LPM6_MAX_TBL8 (1u << 21) /* rte_lpm6 stores tbl8 indexes in 21 bits */
#define LPM_MAX_TBL8 (1u << 24)

enum engine { ENG_LPM, ENG_LPM6, ENG_FIB, ENG_FIB6 };

struct route {
	uint8_t addr[16]; /* network byte order, host bits cleared */
	uint8_t len;
};




static void mask_addr(uint8_t *a, unsigned len, unsigned nbytes)
{
	for (unsigned i = 0; i < nbytes; i++) {
		unsigned lo = i * 8;
		if (len <= lo)
			a[i] = 0;
		else if (len < lo + 8)
			a[i] &= (uint8_t)(0xFFu << (8 - (len - lo)));
	}
}

/* ---------------------------------------------------------------- routes */

static struct route *load_routes(const char *path, int v6, size_t *count)
{
	FILE *f = fopen(path, "r");
	if (!f)
		die("cannot open routes file '%s': %s", path, strerror(errno));
	size_t cap = 1024, n = 0, lineno = 0;
	struct route *r = malloc(cap * sizeof(*r));
	char *line = NULL;
	size_t linecap = 0;
	unsigned maxlen = v6 ? 128 : 32;
	if (!r)
		die("out of memory");
	while (getline(&line, &linecap, f) >= 0) {
		lineno++;
		char *p = line;
		while (*p && isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		char *end = p;
		while (*end && !isspace((unsigned char)*end))
			end++;
		*end = '\0';
		char *slash = strchr(p, '/');
		if (!slash)
			die("%s:%zu: expected PREFIX/LEN, got '%s'", path, lineno, p);
		*slash = '\0';
		char *lenstr = slash + 1, *lenend;
		errno = 0;
		long len = strtol(lenstr, &lenend, 10);
		if (*lenstr == '\0' || *lenend != '\0' || errno || len < 0 || len > (long)maxlen)
			die("%s:%zu: bad prefix length '%s' (must be 0..%u)", path, lineno,
			    lenstr, maxlen);
		if (n == cap) {
			cap *= 2;
			r = realloc(r, cap * sizeof(*r));
			if (!r)
				die("out of memory");
		}
		memset(&r[n], 0, sizeof(r[n]));
		if (inet_pton(v6 ? AF_INET6 : AF_INET, p, r[n].addr) != 1)
			die("%s:%zu: '%s' is not an %s address (this engine takes only %s routes)",
			    path, lineno, p, v6 ? "IPv6" : "IPv4", v6 ? "IPv6" : "IPv4");
		r[n].len = (uint8_t)len;
		mask_addr(r[n].addr, (unsigned)len, v6 ? 16 : 4);
		n++;
	}
	free(line);
	if (ferror(f))
		die("error reading '%s'", path);
	fclose(f);
	if (n == 0)
		die("no routes in '%s'", path);
	*count = n;
	return r;
}

static uint32_t v4_host(const struct route *r)
{
	uint32_t be;
	memcpy(&be, r->addr, 4);
	return ntohl(be);
}

/* Number of distinct /24s that hold at least one route longer than /24:
 * exactly the number of tbl8 groups rte_lpm / DIR24_8 need. */
static uint64_t v4_tbl8_needed(const struct route *r, size_t n)
{
	uint8_t *bm = calloc((1u << 24) / 8, 1);
	uint64_t cnt = 0;
	if (!bm)
		die("out of memory");
	for (size_t i = 0; i < n; i++) {
		if (r[i].len <= 24)
			continue;
		uint32_t s = v4_host(&r[i]) >> 8;
		if (!(bm[s >> 3] & (1u << (s & 7)))) {
			bm[s >> 3] |= (uint8_t)(1u << (s & 7));
			cnt++;
		}
	}
	free(bm);
	return cnt;
}

static int cmp16(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* IPv6 tables are tbl24 followed by 8-bit tbl8 levels.  A tbl8 at level k
 * (k = 3..15, i.e. indexed by address byte k) is identified by the first k
 * bytes, and exists iff some route is longer than 8*k bits under that
 * prefix.  The sum over levels of distinct such prefixes is the exact
 * number of tbl8 groups rte_lpm6 needs when routes are only added. */
static uint64_t v6_tbl8_needed(const struct route *r, size_t n)
{
	uint8_t (*keys)[16] = malloc((n ? n : 1) * 16);
	uint64_t total = 0;
	if (!keys)
		die("out of memory");
	for (unsigned k = 3; k < 16; k++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			if (r[i].len <= 8 * k)
				continue;
			memset(keys[m], 0, 16);
			memcpy(keys[m], r[i].addr, k);
			m++;
		}
		if (m == 0)
			break; /* no longer routes at deeper levels either */
		qsort(keys, m, 16, cmp16);
		uint64_t d = 1;
		for (size_t i = 1; i < m; i++)
			if (memcmp(keys[i], keys[i - 1], 16) != 0)
				d++;
		total += d;
	}
	free(keys);
	return total;
}

/* rte_fib6 (TRIE) reserves tbl8s per added route before it looks at what is
 * actually shared: up to (ceil8(len) - 24) / 8 per route longer than /24.
 * The sum of those is a bound it can never exceed. */
static uint64_t v6_trie_reserve_bound(const struct route *r, size_t n)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i++)
		if (r[i].len > 24)
			s += (uint64_t)((r[i].len + 7) / 8 - 3);
	return s;
}

/* Insertion order: indexes sorted by (prefix length, file position).  Stable,
 * so for duplicate prefixes the later line still wins. */
static const struct route *sort_routes;

static int cmp_by_len(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	if (sort_routes[x].len != sort_routes[y].len)
		return sort_routes[x].len < sort_routes[y].len ? -1 : 1;
	return x < y ? -1 : (x > y);
}

/* ----------------------------------------------------------------- trace */


/* ------------------------------------------------------------------- EAL */






/* ------------------------------------------------------------------ main */

static void usage(void)
{
	fprintf(stderr,
		"usage: lpm_bench ENGINE ROUTES_FILE TRACE_FILE [SECONDS [TRACE_FILE...]]\n"
		"  ENGINE: lpm | lpm6 | fib | fib6\n"
		"  ROUTES_FILE: text, first token per line PREFIX/LEN\n"
		"  TRACE_FILE: binary addresses, network byte order (4 or 16 bytes each)\n"
		"  SECONDS: minimum timed lookup duration (default 2.0)\n"
		"  more TRACE_FILEs: measured on the same table, one JSON line each\n");
	exit(2);
}

int main(int argc, char **argv)
{
	json_to_real_stdout();

	if (argc < 4)
		usage();
	enum engine eng;
	const char *ename;
	if (!strcmp(argv[1], "lpm")) {
		eng = ENG_LPM;
		ename = "rte_lpm";
	} else if (!strcmp(argv[1], "lpm6")) {
		eng = ENG_LPM6;
		ename = "rte_lpm6";
	} else if (!strcmp(argv[1], "fib")) {
		eng = ENG_FIB;
		ename = "rte_fib";
	} else if (!strcmp(argv[1], "fib6")) {
		eng = ENG_FIB6;
		ename = "rte_fib6";
	} else {
		fprintf(stderr, "lpm_bench: unknown engine '%s'\n", argv[1]);
		usage();
	}
	double min_secs = 2.0;
	if (argc >= 5) {
		char *e;
		min_secs = strtod(argv[4], &e);
		if (*argv[4] == '\0' || *e != '\0' || !(min_secs > 0 && min_secs < 1e6))
			die("bad SECONDS '%s'", argv[4]);
	}
	int v6 = (eng == ENG_LPM6 || eng == ENG_FIB6);

	/* (1) routes and table sizing, all before EAL so -m can be computed. */
	size_t nroutes;
	struct route *routes = load_routes(argv[2], v6, &nroutes);
	size_t trace_len;
	void *trace = load_trace(argv[3], v6 ? 16 : 4, &trace_len);
	if (!v6) {
		uint32_t *t = trace;
		for (size_t i = 0; i < trace_len; i++)
			t[i] = ntohl(t[i]);
	}

	uint64_t tbl8_min = v6 ? v6_tbl8_needed(routes, nroutes)
			       : v4_tbl8_needed(routes, nroutes);
	uint64_t tbl8s;
	const uint64_t MiB = 1024 * 1024;
	uint64_t fixed = 64 * MiB + 16 * MiB; /* tbl24 (4-byte entries) + slack */
	uint64_t per_tbl8, per_route;
	switch (eng) {
	case ENG_LPM:
		tbl8s = tbl8_min + 1024;
		if (tbl8s > LPM_MAX_TBL8)
			tbl8s = LPM_MAX_TBL8;
		per_tbl8 = 1024;
		per_route = 16; /* rules table, 8 B per rule */
		break;
	case ENG_FIB:
		tbl8s = tbl8_min + 1024;
		if (tbl8s > LPM_MAX_TBL8)
			tbl8s = LPM_MAX_TBL8;
		per_tbl8 = 1024 + 8;
		per_route = 2 * 192; /* RIB: up to 2 mempool nodes per route */
		break;
	case ENG_LPM6:
		tbl8s = tbl8_min + 1024;
		if (tbl8s > LPM6_MAX_TBL8) {
			fprintf(stderr,
				"lpm_bench: warning: routes need %" PRIu64
				" tbl8 groups, rte_lpm6 allows at most %u; expect ENOSPC failures\n",
				tbl8_min, LPM6_MAX_TBL8);
			tbl8s = LPM6_MAX_TBL8;
		}
		per_tbl8 = 1024 + 16;
		per_route = 256; /* rules hash (1.2x entries) */
		break;
	case ENG_FIB6:
	default:
		tbl8s = v6_trie_reserve_bound(routes, nroutes) + 1024;
		per_tbl8 = 1024 + 8;
		per_route = 2 * 224; /* RIB6: up to 2 mempool nodes per route */
		break;
	}
	/* Manual override of the tbl8 group count (for experiments). */
	const char *tbl8_env = getenv("LPMBENCH_TBL8S");
	if (tbl8_env && *tbl8_env) {
		char *e;
		unsigned long long v = strtoull(tbl8_env, &e, 10);
		if (*e != '\0' || v == 0 || v > UINT32_MAX)
			die("bad LPMBENCH_TBL8S '%s'", tbl8_env);
		tbl8s = v;
	}
	/* Estimated heap need, +25%, +256 MB for EAL itself. */
	uint64_t budget = (uint64_t)(MEM_MB_MAX - 256) * MiB * 4 / 5;
	uint64_t est = fixed + tbl8s * per_tbl8 + (uint64_t)nroutes * per_route;
	if (est > budget) {
		uint64_t other = fixed + (uint64_t)nroutes * per_route;
		if (other >= budget)
			die("%zu routes need about %" PRIu64 " MB, over the %u MB limit",
			    nroutes, est / MiB, MEM_MB_MAX);
		uint64_t fit = (budget - other) / per_tbl8;
		fprintf(stderr,
			"lpm_bench: warning: %" PRIu64 " tbl8 groups would need %" PRIu64
			" MB; capping at %" PRIu64 " (adds may fail with ENOSPC)\n",
			tbl8s, est / MiB, fit);
		tbl8s = fit;
		est = other + tbl8s * per_tbl8;
	}
	uint64_t mem_mb = 256 + (est * 5 / 4 + MiB - 1) / MiB;
	if (mem_mb < MEM_MB_MIN)
		mem_mb = MEM_MB_MIN;
	if (mem_mb > MEM_MB_MAX)
		mem_mb = MEM_MB_MAX;
	fprintf(stderr,
		"lpm_bench: %s: %zu routes, trace %zu addresses, tbl8 groups %" PRIu64
		" (needed at least %" PRIu64 "), -m %" PRIu64 "\n",
		ename, nroutes, trace_len, tbl8s, tbl8_min, mem_mb);

	/* Insertion order.  rte_fib/rte_fib6 in DPDK 22.11 corrupt the whole
	 * table when a prefix ending at the top of the address space (e.g.
	 * 255.128.0.0/9) is added while more-specific routes already cover it
	 * completely (ledge/redge wrap to 0, which means "whole table").  Adding
	 * shorter prefixes first never has more-specifics present, so that is
	 * the default for fib/fib6; file order for lpm/lpm6. */
	int by_len = (eng == ENG_FIB || eng == ENG_FIB6);
	const char *ord_env = getenv("LPMBENCH_ADD_ORDER");
	if (ord_env && *ord_env) {
		if (!strcmp(ord_env, "file"))
			by_len = 0;
		else if (!strcmp(ord_env, "length"))
			by_len = 1;
		else
			die("LPMBENCH_ADD_ORDER must be 'file' or 'length', not '%s'", ord_env);
	}
	uint32_t *order = NULL;
	if (by_len) {
		if (nroutes > UINT32_MAX)
			die("too many routes");
		order = malloc(nroutes * sizeof(*order));
		if (!order)
			die("out of memory");
		for (size_t i = 0; i < nroutes; i++)
			order[i] = (uint32_t)i;
		sort_routes = routes;
		qsort(order, nroutes, sizeof(*order), cmp_by_len);
	}

	eal_init((unsigned)mem_mb);

	/* (2) create, measuring rte_malloc heap usage around create + adds. */
	uint64_t bytes_before = heap_alloc_bytes();
	struct rte_lpm *lpm = NULL;
	struct rte_lpm6 *lpm6 = NULL;
	struct rte_fib *fib = NULL;
	struct rte_fib6 *fib6 = NULL;
	if (nroutes > INT32_MAX)
		die("too many routes");
	switch (eng) {
	case ENG_LPM: {
		struct rte_lpm_config c = {
			.max_rules = (uint32_t)nroutes,
			.number_tbl8s = (uint32_t)tbl8s,
			.flags = 0,
		};
		lpm = rte_lpm_create("lpmbench", SOCKET_ID_ANY, &c);
		if (!lpm)
			die("rte_lpm_create(max_rules=%u, number_tbl8s=%u) failed: %s",
			    c.max_rules, c.number_tbl8s, rte_strerror(rte_errno));
		break;
	}
	case ENG_LPM6: {
		struct rte_lpm6_config c = {
			.max_rules = (uint32_t)nroutes,
			.number_tbl8s = (uint32_t)tbl8s,
			.flags = 0,
		};
		lpm6 = rte_lpm6_create("lpmbench", SOCKET_ID_ANY, &c);
		if (!lpm6)
			die("rte_lpm6_create(max_rules=%u, number_tbl8s=%u) failed: %s",
			    c.max_rules, c.number_tbl8s, rte_strerror(rte_errno));
		break;
	}
	case ENG_FIB: {
		struct rte_fib_conf c;
		memset(&c, 0, sizeof(c));
		c.type = RTE_FIB_DIR24_8;
		c.default_nh = 0;
		c.max_routes = (int)nroutes;
		c.rib_ext_sz = 0;
		c.dir24_8.nh_sz = RTE_FIB_DIR24_8_4B;
		c.dir24_8.num_tbl8 = (uint32_t)tbl8s;
		fib = rte_fib_create("lpmbench", SOCKET_ID_ANY, &c);
		if (!fib)
			die("rte_fib_create(DIR24_8, max_routes=%d, num_tbl8=%u) failed: %s",
			    c.max_routes, c.dir24_8.num_tbl8, rte_strerror(rte_errno));
		break;
	}
	case ENG_FIB6: {
		struct rte_fib6_conf c;
		memset(&c, 0, sizeof(c));
		c.type = RTE_FIB6_TRIE;
		c.default_nh = 0;
		c.max_routes = (int)nroutes;
		c.rib_ext_sz = 0;
		c.trie.nh_sz = RTE_FIB6_TRIE_4B;
		c.trie.num_tbl8 = (uint32_t)tbl8s;
		fib6 = rte_fib6_create("lpmbench", SOCKET_ID_ANY, &c);
		if (!fib6)
			die("rte_fib6_create(TRIE, max_routes=%d, num_tbl8=%u) failed: %s",
			    c.max_routes, c.trie.num_tbl8, rte_strerror(rte_errno));
		break;
	}
	}

	/* (3) add all routes, timed.  The next hop always comes from the
	 * route's position in the file, whatever the insertion order. */
	uint64_t added = 0, failures = 0, enospc = 0, einval = 0;
	double t0 = now_s();
	for (size_t k = 0; k < nroutes; k++) {
		size_t i = order ? order[k] : k;
		const struct route *r = &routes[i];
		uint32_t nh = (uint32_t)(i % 1000) + 1;
		int rc = 0;
		switch (eng) {
		case ENG_LPM:
			rc = rte_lpm_add(lpm, v4_host(r), r->len, nh);
			break;
		case ENG_LPM6:
			rc = rte_lpm6_add(lpm6, r->addr, r->len, nh);
			break;
		case ENG_FIB:
			rc = rte_fib_add(fib, v4_host(r), r->len, nh);
			break;
		case ENG_FIB6:
			rc = rte_fib6_add(fib6, r->addr, r->len, nh);
			break;
		}
		if (rc == 0) {
			added++;
		} else {
			failures++;
			if (rc == -ENOSPC)
				enospc++;
			if (rc == -EINVAL)
				einval++;
			if (failures <= 5) {
				char buf[INET6_ADDRSTRLEN];
				inet_ntop(v6 ? AF_INET6 : AF_INET, r->addr, buf, sizeof(buf));
				fprintf(stderr, "lpm_bench: add #%zu %s/%u failed: %s\n", i,
					buf, r->len, strerror(-rc));
			}
		}
		if ((k + 1) % PROGRESS_EVERY == 0)
			fprintf(stderr, "lpm_bench: %s: added %zu/%zu routes, %.1f s\n",
				ename, k + 1, nroutes, now_s() - t0);
	}
	double build_s = now_s() - t0;
	uint64_t bytes_after = heap_alloc_bytes();
	uint64_t bytes = bytes_after - bytes_before;
	if (failures)
		fprintf(stderr,
			"lpm_bench: %" PRIu64 " adds failed (%" PRIu64 " ENOSPC, %" PRIu64
			" EINVAL%s)\n",
			failures, enospc, einval,
			(eng == ENG_LPM || eng == ENG_LPM6) && einval
				? "; rte_lpm/rte_lpm6 reject /0 routes"
				: "");

	/* (4) lookups, once per trace file (argv[3], then argv[5...]): the table is built once,
	 * which matters when building it takes minutes. One JSON line per trace. */
	for (int ti = 3; ti < argc; ti = (ti == 3 ? 5 : ti + 1)) {
	if (ti != 3) {
		free(trace);
		trace = load_trace(argv[ti], v6 ? 16 : 4, &trace_len);
		if (!v6) {
			uint32_t *t = trace;
			for (size_t i = 0; i < trace_len; i++)
				t[i] = ntohl(t[i]);
		}
	}
	uint32_t nh32[BULK];
	int32_t nhs32[BULK];
	uint64_t nh64[BULK];
	uint32_t *t4 = trace;
	uint8_t(*t16)[16] = trace;
	uint64_t hits = 0, nh_sum = 0;
	for (size_t off = 0; off < trace_len; off += BULK) {
		unsigned n = (unsigned)(trace_len - off < BULK ? trace_len - off : BULK);
		switch (eng) {
		case ENG_LPM:
			rte_lpm_lookup_bulk(lpm, t4 + off, nh32, n);
			for (unsigned j = 0; j < n; j++)
				if (nh32[j] & RTE_LPM_LOOKUP_SUCCESS) {
					hits++;
					nh_sum += nh32[j] & 0x00FFFFFF;
				}
			break;
		case ENG_LPM6:
			rte_lpm6_lookup_bulk_func(lpm6, t16 + off, nhs32, n);
			for (unsigned j = 0; j < n; j++)
				if (nhs32[j] != -1) {
					hits++;
					nh_sum += (uint32_t)nhs32[j];
				}
			break;
		case ENG_FIB:
			rte_fib_lookup_bulk(fib, t4 + off, nh64, (int)n);
			for (unsigned j = 0; j < n; j++)
				if (nh64[j] != 0) {
					hits++;
					nh_sum += nh64[j];
				}
			break;
		case ENG_FIB6:
			rte_fib6_lookup_bulk(fib6, t16 + off, nh64, (int)n);
			for (unsigned j = 0; j < n; j++)
				if (nh64[j] != 0) {
					hits++;
					nh_sum += nh64[j];
				}
			break;
		}
	}

	/* Timed loop: whole bulks over the trace, wrapping; the clock is read
	 * every 64 bulks. */
	uint64_t lookups = 0, checksum = 0;
	size_t off = 0;
	double start = now_s(), elapsed = 0;
	for (;;) {
		for (int b = 0; b < 64; b++) {
			unsigned n = (unsigned)(trace_len - off < BULK ? trace_len - off : BULK);
			switch (eng) {
			case ENG_LPM:
				rte_lpm_lookup_bulk(lpm, t4 + off, nh32, n);
				for (unsigned j = 0; j < n; j++)
					checksum += nh32[j];
				break;
			case ENG_LPM6:
				rte_lpm6_lookup_bulk_func(lpm6, t16 + off, nhs32, n);
				for (unsigned j = 0; j < n; j++)
					checksum += (uint32_t)nhs32[j];
				break;
			case ENG_FIB:
				rte_fib_lookup_bulk(fib, t4 + off, nh64, (int)n);
				for (unsigned j = 0; j < n; j++)
					checksum += nh64[j];
				break;
			case ENG_FIB6:
				rte_fib6_lookup_bulk(fib6, t16 + off, nh64, (int)n);
				for (unsigned j = 0; j < n; j++)
					checksum += nh64[j];
				break;
			}
			lookups += n;
			off += n;
			if (off >= trace_len)
				off = 0;
		}
		elapsed = now_s() - start;
		if (elapsed >= min_secs)
			break;
	}

	double mlps = (double)lookups / elapsed / 1e6;
	fprintf(json_out,
		"{\"engine\":\"%s\",\"routes\":%zu,\"routes_added\":%" PRIu64
		",\"add_failures\":%" PRIu64 ",\"add_enospc\":%" PRIu64
		",\"add_order\":\"%s\",\"build_s\":%.6f,\"adds_per_s\":%.0f,\"bytes\":%" PRIu64
		",\"bytes_per_route\":%.2f,\"tbl8s\":%" PRIu64 ",\"tbl8s_min\":%" PRIu64
		",\"eal_mem_mb\":%" PRIu64 ",\"simd_bitwidth\":%u"
		",\"trace_len\":%zu,\"hits_one_pass\":%" PRIu64 ",\"nh_sum_one_pass\":%" PRIu64
		",\"lookups\":%" PRIu64 ",\"secs\":%.6f,\"mlookups_per_s\":%.3f"
		",\"ns_per_lookup\":%.4f,\"checksum\":%" PRIu64 "}\n",
		ename, nroutes, added, failures, enospc, by_len ? "length" : "file", build_s,
		build_s > 0 ? (double)nroutes / build_s : 0.0, bytes,
		(double)bytes / (double)nroutes, tbl8s, tbl8_min, mem_mb,
		(unsigned)rte_vect_get_max_simd_bitwidth(), trace_len, hits, nh_sum,
		lookups, elapsed, mlps, elapsed * 1e9 / (double)lookups, checksum);
	fflush(json_out);
	}

	rte_lpm_free(lpm);
	rte_lpm6_free(lpm6);
	rte_fib_free(fib);
	rte_fib6_free(fib6);
	free(trace);
	free(routes);
	free(order);
	rte_eal_cleanup();
	return 0;
}
