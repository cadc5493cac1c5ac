/*
 * hash_bench: measure DPDK's rte_hash as a MAC address table, on the keys
 * Linerate's own table is measured with, so the two compare on the same data.
 *
 *   hash_bench KEYS_FILE LOOKUPS_FILE [SECONDS]
 *
 * KEYS_FILE holds the keys to insert (8 bytes each: bridge domain and MAC, as
 * Linerate's MacKey packs them, little-endian u64), in insertion order;
 * LOOKUPS_FILE the same keys in the order to look them up. The table is made
 * for exactly as many entries as keys, with lock-free readers and one writer at
 * a time (RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF: what Linerate's table
 * offers), CRC32 hashing, the key's member index as its data. Measured: every
 * insert of a new key, once; then single lookups and bulk lookups (32 at a
 * time) over the lookup trace, repeated for SECONDS each.
 * Exactly one JSON object (one line) goes to stdout.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#define HARNESS_NAME "hash_bench"
#define HARNESS_PREFIX "hashbench"
#define HARNESS_EAL_EXTRA "HASHBENCH_EAL_EXTRA"
#include "harness.h"

#define BULK 32

static void usage(void)
{
	fputs("usage: hash_bench KEYS_FILE LOOKUPS_FILE [SECONDS]\n", stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	json_to_real_stdout();
	if (argc < 3 || argc > 4)
		usage();
	double secs = 2.0;
	if (argc == 4) {
		char *e;
		secs = strtod(argv[3], &e);
		if (*argv[3] == '\0' || *e != '\0' || !(secs > 0 && secs < 1e6))
			die("bad SECONDS '%s'", argv[3]);
	}
	size_t nkeys, nlook;
	uint64_t *keys = (uint64_t *)load_trace(argv[1], 8, &nkeys);
	uint64_t *look = (uint64_t *)load_trace(argv[2], 8, &nlook);

	/* rte_hash's tables plus its key store: about 100 bytes a key at most. */
	unsigned mem_mb = (unsigned)(nkeys * 160 / (1u << 20)) + 256;
	eal_init(mem_mb);
	uint64_t heap0 = heap_alloc_bytes();

	struct rte_hash_parameters p = {
		.name = "mac_table",
		.entries = (uint32_t)nkeys,
		.key_len = 8,
		.hash_func = rte_hash_crc,
		.hash_func_init_val = 0,
		.socket_id = (int)rte_socket_id(),
		.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF,
	};
	struct rte_hash *h = rte_hash_create(&p);
	if (!h)
		die("rte_hash_create(%zu entries): %s", nkeys, rte_strerror(rte_errno));
	uint64_t bytes = heap_alloc_bytes() - heap0;

	size_t inserted = 0, refused = 0;
	double t0 = now_s();
	for (size_t i = 0; i < nkeys; i++) {
		int r = rte_hash_add_key_data(h, &keys[i], (void *)(uintptr_t)(i & 0xfffff));
		if (r == 0)
			inserted++;
		else
			refused++;
	}
	double insert_s = now_s() - t0;

	/* Single lookups: what a worker does per frame. */
	uint64_t found = 0, done = 0;
	t0 = now_s();
	double t;
	do {
		for (size_t i = 0; i < nlook; i++) {
			void *d;
			found += rte_hash_lookup_data(h, &look[i], &d) >= 0;
		}
		done += nlook;
		t = now_s() - t0;
	} while (t < secs);
	double single = (double)done / t;
	uint64_t found_single = found;

	/* Bulk lookups, 32 at a time. */
	const void *kp[BULK];
	void *data[BULK];
	uint64_t hits;
	found = 0;
	done = 0;
	t0 = now_s();
	do {
		for (size_t i = 0; i + BULK <= nlook; i += BULK) {
			for (int j = 0; j < BULK; j++)
				kp[j] = &look[i + j];
			if (rte_hash_lookup_bulk_data(h, kp, BULK, &hits, data) >= 0)
				found += (uint64_t)__builtin_popcountll(hits);
		}
		done += nlook / BULK * BULK;
		t = now_s() - t0;
	} while (t < secs);
	double bulk = (double)done / t;

	fprintf(json_out,
		"{\"engine\":\"rte_hash\",\"keys\":%zu,\"inserted\":%zu,\"refused\":%zu,"
		"\"insert_per_s\":%.0f,\"lookup_per_s\":%.0f,\"lookup_bulk_per_s\":%.0f,"
		"\"found_single\":%" PRIu64 ",\"found_bulk\":%" PRIu64 ",\"bytes\":%" PRIu64 "}\n",
		nkeys, inserted, refused, (double)inserted / insert_s, single, bulk, found_single,
		found, bytes);
	fflush(json_out);
	rte_hash_free(h);
	rte_eal_cleanup();
	return 0;
}
