/*
 * acl_bench: measure DPDK's rte_acl on a 5-tuple rule list and a key trace
 * read from files, so that Linerate's classifier can be compared on exactly
 * the same data.
 *
 *   acl_bench FAMILY RULES_FILE TRACE_FILE [SECONDS [RESULTS_FILE]]
 *
 * FAMILY is v4 | v6.  See README.md for the file formats.  Rule i (0-based,
 * in file order) gets priority (number of rules - i), so the first matching
 * rule wins, as in an ACL.  Exactly one JSON object (one line) goes to
 * stdout; everything else, DPDK's own log output included, goes to stderr.
 */
#define _GNU_SOURCE
#define ALLOW_EXPERIMENTAL_API /* rte_vect_get_max_simd_bitwidth() */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rte_acl.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_memory.h>
#include <rte_vect.h>

#define HARNESS_NAME "acl_bench"
#define HARNESS_PREFIX "aclbench"
#define HARNESS_EAL_EXTRA "ACLBENCH_EAL_EXTRA"
#include "harness.h"

#define BURST 64
#define MEM_MB_DEFAULT 4096u
#define NO_MATCH UINT32_MAX

/*
 * Trace records: the bytes rte_acl reads, in network byte order.  The first
 * field (the protocol) is one byte on its own; every later input group is 4
 * consecutive bytes, as rte_acl requires.
 *
 *   v4 (16 bytes): proto, 3 pad, src[4], dst[4], sport[2], dport[2]
 *   v6 (40 bytes): proto, 3 pad, src[16], dst[16], sport[2], dport[2]
 */
#define V4_REC 16
#define V6_REC 40
#define OFF_PROTO 0
#define OFF_SRC 4
#define V4_OFF_DST 8
#define V4_OFF_PORTS 12
#define V6_OFF_DST 20
#define V6_OFF_PORTS 36

/* Field indexes: proto, src words, dst words, sport, dport. */
#define V4_FIELDS 5
#define V6_FIELDS 11
#define MAX_FIELDS V6_FIELDS

RTE_ACL_RULE_DEF(bench_rule, MAX_FIELDS);

struct rule_text {
	uint8_t src[16], dst[16]; /* network byte order */
	uint8_t src_len, dst_len;
	uint16_t sport_lo, sport_hi, dport_lo, dport_hi;
	uint8_t proto, proto_mask;
};




/* ----------------------------------------------------------------- rules */

/* "ADDR/LEN" into a network-order address and a length. */
static void parse_prefix(const char *path, size_t lineno, char *tok, int v6, uint8_t *addr,
			 uint8_t *len)
{
	char *slash = strchr(tok, '/');
	unsigned maxlen = v6 ? 128 : 32;
	if (!slash)
		die("%s:%zu: expected ADDR/LEN, got '%s'", path, lineno, tok);
	*slash = '\0';
	char *end;
	errno = 0;
	long l = strtol(slash + 1, &end, 10);
	if (slash[1] == '\0' || *end != '\0' || errno || l < 0 || l > (long)maxlen)
		die("%s:%zu: bad prefix length '%s' (0..%u)", path, lineno, slash + 1, maxlen);
	memset(addr, 0, 16);
	if (inet_pton(v6 ? AF_INET6 : AF_INET, tok, addr) != 1)
		die("%s:%zu: '%s' is not an %s address", path, lineno, tok, v6 ? "IPv6" : "IPv4");
	*len = (uint8_t)l;
}

/*
 * One rule per line, ClassBench's filter format:
 *   @SRC/LEN  DST/LEN  SPLO : SPHI  DPLO : DPHI  0xPROTO/0xMASK
 * Anything after the protocol is ignored; blank and '#' lines are skipped.
 */
static struct rule_text *load_rules(const char *path, int v6, size_t *count)
{
	FILE *f = fopen(path, "r");
	if (!f)
		die("cannot open rules file '%s': %s", path, strerror(errno));
	size_t cap = 1024, n = 0, lineno = 0;
	struct rule_text *r = malloc(cap * sizeof(*r));
	char *line = NULL;
	size_t linecap = 0;
	if (!r)
		die("out of memory");
	while (getline(&line, &linecap, f) >= 0) {
		lineno++;
		char *p = line;
		while (*p && isspace((unsigned char)*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		if (*p == '@')
			p++;
		char *save = NULL;
		char *src = strtok_r(p, " \t", &save);
		char *dst = strtok_r(NULL, " \t", &save);
		char *rest = strtok_r(NULL, "\n", &save);
		if (!src || !dst || !rest)
			die("%s:%zu: expected '@SRC/LEN DST/LEN SP : SP DP : DP 0xP/0xM'", path,
			    lineno);
		if (n == cap) {
			cap *= 2;
			r = realloc(r, cap * sizeof(*r));
			if (!r)
				die("out of memory");
		}
		struct rule_text *t = &r[n];
		memset(t, 0, sizeof(*t));
		parse_prefix(path, lineno, src, v6, t->src, &t->src_len);
		parse_prefix(path, lineno, dst, v6, t->dst, &t->dst_len);
		unsigned slo, shi, dlo, dhi, pr, pm;
		if (sscanf(rest, " %u : %u %u : %u %x/%x", &slo, &shi, &dlo, &dhi, &pr, &pm) != 6)
			die("%s:%zu: cannot read ports and protocol from '%s'", path, lineno, rest);
		if (slo > shi || shi > 65535 || dlo > dhi || dhi > 65535 || pr > 255 || pm > 255)
			die("%s:%zu: port range or protocol out of bounds", path, lineno);
		t->sport_lo = (uint16_t)slo;
		t->sport_hi = (uint16_t)shi;
		t->dport_lo = (uint16_t)dlo;
		t->dport_hi = (uint16_t)dhi;
		t->proto = (uint8_t)pr;
		t->proto_mask = (uint8_t)pm;
		n++;
	}
	free(line);
	if (ferror(f))
		die("error reading '%s'", path);
	fclose(f);
	if (n == 0)
		die("no rules in '%s'", path);
	*count = n;
	return r;
}

static uint32_t be32_at(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return ntohl(v);
}

/* The part of a prefix of length len that falls in 32-bit word w. */
static uint32_t word_len(unsigned len, unsigned w)
{
	int l = (int)len - 32 * (int)w;
	return l <= 0 ? 0 : (l >= 32 ? 32 : (uint32_t)l);
}

static void mask_field(struct rte_acl_field *fl, uint32_t value, uint32_t len)
{
	/* Host bits cleared: rte_acl wants the value under its mask. */
	uint32_t m = len == 0 ? 0 : (uint32_t)(UINT32_MAX << (32 - len));
	fl->value.u32 = value & m;
	fl->mask_range.u32 = len;
}

static void to_acl_rule(const struct rule_text *t, int v6, size_t i, size_t n,
			struct bench_rule *out)
{
	memset(out, 0, sizeof(*out));
	out->data.category_mask = 1;
	out->data.priority = (int32_t)(n - i);
	out->data.userdata = (uint32_t)(i + 1); /* 0 means no match */
	out->field[0].value.u8 = t->proto;
	out->field[0].mask_range.u8 = t->proto_mask;
	unsigned words = v6 ? 4 : 1, k = 1;
	for (unsigned w = 0; w < words; w++, k++)
		mask_field(&out->field[k], be32_at(t->src + 4 * w), word_len(t->src_len, w));
	for (unsigned w = 0; w < words; w++, k++)
		mask_field(&out->field[k], be32_at(t->dst + 4 * w), word_len(t->dst_len, w));
	out->field[k].value.u16 = t->sport_lo;
	out->field[k].mask_range.u16 = t->sport_hi;
	k++;
	out->field[k].value.u16 = t->dport_lo;
	out->field[k].mask_range.u16 = t->dport_hi;
}

static unsigned field_defs(int v6, struct rte_acl_field_def *d)
{
	unsigned words = v6 ? 4 : 1, k = 0;
	uint32_t off_dst = v6 ? V6_OFF_DST : V4_OFF_DST;
	uint32_t off_ports = v6 ? V6_OFF_PORTS : V4_OFF_PORTS;
	d[k] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_BITMASK,
					   .size = 1,
					   .field_index = (uint8_t)k,
					   .input_index = 0,
					   .offset = OFF_PROTO };
	k++;
	for (unsigned w = 0; w < words; w++, k++)
		d[k] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_MASK,
						   .size = 4,
						   .field_index = (uint8_t)k,
						   .input_index = (uint8_t)k,
						   .offset = OFF_SRC + 4 * w };
	for (unsigned w = 0; w < words; w++, k++)
		d[k] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_MASK,
						   .size = 4,
						   .field_index = (uint8_t)k,
						   .input_index = (uint8_t)k,
						   .offset = off_dst + 4 * w };
	/* Both ports share one 4-byte input group. */
	uint8_t ports_input = (uint8_t)k;
	d[k] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_RANGE,
					   .size = 2,
					   .field_index = (uint8_t)k,
					   .input_index = ports_input,
					   .offset = off_ports };
	k++;
	d[k] = (struct rte_acl_field_def){ .type = RTE_ACL_FIELD_TYPE_RANGE,
					   .size = 2,
					   .field_index = (uint8_t)k,
					   .input_index = ports_input,
					   .offset = off_ports + 2 };
	k++;
	return k;
}

/* ----------------------------------------------------------------- trace */


/* ------------------------------------------------------------------- EAL */






/* rte_acl_dump's "NAME=VALUE" lines (it prints to stdout), captured through a
 * temporary file, for the algorithm and the number of tries it built: the
 * context's layout is private. */
static void dump_fields(const struct rte_acl_ctx *ctx, unsigned *alg, unsigned *tries)
{
	*alg = 0;
	*tries = 0;
	FILE *tmp = tmpfile();
	if (!tmp)
		return;
	fflush(stdout);
	int saved = dup(STDOUT_FILENO);
	if (saved < 0) {
		fclose(tmp);
		return;
	}
	dup2(fileno(tmp), STDOUT_FILENO);
	rte_acl_dump(ctx);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	char buf[4096];
	rewind(tmp);
	size_t n = fread(buf, 1, sizeof(buf) - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
	const char *p;
	if ((p = strstr(buf, "alg=")))
		*alg = (unsigned)strtoul(p + 4, NULL, 10);
	if ((p = strstr(buf, "num_tries=")))
		*tries = (unsigned)strtoul(p + 10, NULL, 10);
}

static const char *alg_name(unsigned a)
{
	switch (a) {
	case RTE_ACL_CLASSIFY_SCALAR:
		return "scalar";
	case RTE_ACL_CLASSIFY_SSE:
		return "sse";
	case RTE_ACL_CLASSIFY_AVX2:
		return "avx2";
	case RTE_ACL_CLASSIFY_NEON:
		return "neon";
	case RTE_ACL_CLASSIFY_ALTIVEC:
		return "altivec";
	case RTE_ACL_CLASSIFY_AVX512X16:
		return "avx512x16";
	case RTE_ACL_CLASSIFY_AVX512X32:
		return "avx512x32";
	default:
		return "default";
	}
}

static int alg_from_name(const char *s)
{
	for (unsigned a = RTE_ACL_CLASSIFY_SCALAR; a <= RTE_ACL_CLASSIFY_AVX512X32; a++)
		if (!strcmp(s, alg_name(a)))
			return (int)a;
	die("ACLBENCH_ALG must be scalar, sse, avx2, avx512x16 or avx512x32, not '%s'", s);
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
	fprintf(stderr,
		"usage: acl_bench FAMILY RULES_FILE TRACE_FILE [SECONDS [RESULTS_FILE]]\n"
		"  FAMILY: v4 | v6\n"
		"  RULES_FILE: text, ClassBench filter format, one rule per line\n"
		"  TRACE_FILE: binary records, %d bytes (v4) or %d bytes (v6) each\n"
		"  SECONDS: minimum timed classification time (default 2.0)\n"
		"  RESULTS_FILE: written with one little-endian u32 per trace record: the\n"
		"    index of the matching rule, or 0xffffffff for none\n",
		V4_REC, V6_REC);
	exit(2);
}

int main(int argc, char **argv)
{
	json_to_real_stdout();

	if (argc < 4 || argc > 6)
		usage();
	int v6;
	if (!strcmp(argv[1], "v4"))
		v6 = 0;
	else if (!strcmp(argv[1], "v6"))
		v6 = 1;
	else
		usage();
	double min_secs = 2.0;
	if (argc >= 5) {
		char *e;
		min_secs = strtod(argv[4], &e);
		if (*argv[4] == '\0' || *e != '\0' || !(min_secs > 0 && min_secs < 1e6))
			die("bad SECONDS '%s'", argv[4]);
	}
	const char *results_path = argc >= 6 ? argv[5] : NULL;
	size_t rec = v6 ? V6_REC : V4_REC;

	size_t nrules;
	struct rule_text *rules = load_rules(argv[2], v6, &nrules);
	if (nrules >= (size_t)RTE_ACL_MAX_PRIORITY)
		die("too many rules (%zu)", nrules);
	size_t trace_len;
	uint8_t *trace = (uint8_t *)load_trace(argv[3], rec, &trace_len);

	unsigned mem_mb = MEM_MB_DEFAULT;
	const char *mem_env = getenv("ACLBENCH_MEM_MB");
	if (mem_env && *mem_env) {
		char *e;
		unsigned long v = strtoul(mem_env, &e, 10);
		if (*e != '\0' || v < 64 || v > 65536)
			die("bad ACLBENCH_MEM_MB '%s'", mem_env);
		mem_mb = (unsigned)v;
	}
	eal_init(mem_mb);

	/* (1) create and add, then build (timed): heap growth over all three. */
	struct rte_acl_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.num_categories = 1;
	cfg.num_fields = field_defs(v6, cfg.defs);
	cfg.max_size = 0;
	uint64_t bytes_before = heap_alloc_bytes();
	struct rte_acl_param prm = {
		.name = "aclbench",
		.socket_id = SOCKET_ID_ANY,
		.rule_size = (uint32_t)RTE_ACL_RULE_SZ(cfg.num_fields),
		.max_rule_num = (uint32_t)nrules,
	};
	struct rte_acl_ctx *ctx = rte_acl_create(&prm);
	if (!ctx)
		die("rte_acl_create(%zu rules) failed: %s", nrules, rte_strerror(rte_errno));
	double t0 = now_s();
	struct bench_rule r;
	for (size_t i = 0; i < nrules; i++) {
		to_acl_rule(&rules[i], v6, i, nrules, &r);
		int rc = rte_acl_add_rules(ctx, (const struct rte_acl_rule *)&r, 1);
		if (rc != 0)
			die("rte_acl_add_rules (rule %zu) failed: %s", i, strerror(-rc));
	}
	double add_s = now_s() - t0;
	uint64_t bytes_rules = heap_alloc_bytes() - bytes_before;
	t0 = now_s();
	int rc = rte_acl_build(ctx, &cfg);
	double build_s = now_s() - t0;
	if (rc != 0)
		die("rte_acl_build(%zu rules) failed: %s (try ACLBENCH_MEM_MB above %u)", nrules,
		    strerror(-rc), mem_mb);
	uint64_t bytes = heap_alloc_bytes() - bytes_before;
	const char *alg_env = getenv("ACLBENCH_ALG");
	if (alg_env && *alg_env) {
		int a = alg_from_name(alg_env);
		rc = rte_acl_set_ctx_classify(ctx, (enum rte_acl_classify_alg)a);
		if (rc != 0)
			die("rte_acl_set_ctx_classify(%s) failed: %s", alg_env, strerror(-rc));
	}
	unsigned alg, tries;
	dump_fields(ctx, &alg, &tries);
	fprintf(stderr,
		"acl_bench: %s: %zu rules, trace %zu keys, add %.3f s, build %.3f s, %" PRIu64
		" bytes, alg %s, %u tries\n",
		v6 ? "v6" : "v4", nrules, trace_len, add_s, build_s, bytes, alg_name(alg), tries);

	/* (2) one pass over the trace: results and their checksum. */
	const uint8_t **ptrs = malloc(trace_len * sizeof(*ptrs));
	uint32_t *res = malloc(trace_len * sizeof(*res));
	if (!ptrs || !res)
		die("out of memory");
	for (size_t i = 0; i < trace_len; i++)
		ptrs[i] = trace + i * rec;
	uint64_t matched = 0, index_sum = 0;
	for (size_t off = 0; off < trace_len; off += BURST) {
		uint32_t n = (uint32_t)(trace_len - off < BURST ? trace_len - off : BURST);
		rc = rte_acl_classify(ctx, ptrs + off, res + off, n, 1);
		if (rc != 0)
			die("rte_acl_classify failed: %s", strerror(-rc));
	}
	for (size_t i = 0; i < trace_len; i++) {
		if (res[i] == 0) {
			res[i] = NO_MATCH;
		} else {
			res[i] -= 1;
			matched++;
			index_sum += res[i];
		}
	}
	if (results_path) {
		FILE *rf = fopen(results_path, "wb");
		if (!rf)
			die("cannot create '%s': %s", results_path, strerror(errno));
		for (size_t i = 0; i < trace_len; i++) {
			uint8_t le[4] = { (uint8_t)res[i], (uint8_t)(res[i] >> 8),
					  (uint8_t)(res[i] >> 16), (uint8_t)(res[i] >> 24) };
			if (fwrite(le, 1, 4, rf) != 4)
				die("cannot write '%s'", results_path);
		}
		if (fclose(rf) != 0)
			die("cannot write '%s'", results_path);
	}

	/* (3) timed loop: bursts over the trace, wrapping; the clock is read
	 * every 64 bursts. */
	uint32_t out[BURST];
	uint64_t classified = 0, checksum = 0;
	size_t off = 0;
	double start = now_s(), elapsed = 0;
	for (;;) {
		for (int b = 0; b < 64; b++) {
			uint32_t n = (uint32_t)(trace_len - off < BURST ? trace_len - off : BURST);
			rte_acl_classify(ctx, ptrs + off, out, n, 1);
			for (uint32_t j = 0; j < n; j++)
				checksum += out[j];
			classified += n;
			off += n;
			if (off >= trace_len)
				off = 0;
		}
		elapsed = now_s() - start;
		if (elapsed >= min_secs)
			break;
	}

	double rate = (double)classified / elapsed;
	fprintf(json_out,
		"{\"engine\":\"rte_acl\",\"family\":\"%s\",\"rules\":%zu,\"fields\":%u"
		",\"add_s\":%.6f,\"build_s\":%.6f,\"bytes\":%" PRIu64 ",\"bytes_rules\":%" PRIu64
		",\"bytes_per_rule\":%.2f,\"alg\":\"%s\",\"tries\":%u,\"eal_mem_mb\":%u"
		",\"simd_bitwidth\":%u,\"trace_len\":%zu,\"matched_one_pass\":%" PRIu64
		",\"index_sum_one_pass\":%" PRIu64 ",\"classifications\":%" PRIu64
		",\"secs\":%.6f,\"mclass_per_s\":%.3f,\"ns_per_class\":%.4f"
		",\"checksum\":%" PRIu64 "}\n",
		v6 ? "ipv6" : "ipv4", nrules, cfg.num_fields, add_s, build_s, bytes, bytes_rules,
		(double)bytes / (double)nrules, alg_name(alg), tries, mem_mb,
		(unsigned)rte_vect_get_max_simd_bitwidth(), trace_len, matched, index_sum,
		classified, elapsed, rate / 1e6, 1e9 / rate, checksum);
	fflush(json_out);

	rte_acl_free(ctx);
	free(ptrs);
	free(res);
	free(trace);
	free(rules);
	rte_eal_cleanup();
	return 0;
}
