/* SPDX-License-Identifier: MIT */
/*
 * bench_core.c - `make bench-core`: what selection and a mux operation
 * cost, per mode.
 *
 * 1. Nanoseconds per selection (the cursor's first pick: exactly what
 *    every operation pays to choose a member) at 2, 10 and 100 members,
 *    in the thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a machine
 *    shared with other work, wall time mostly measures the time this
 *    thread waited for a CPU. The best of three runs is printed.
 * 2. Mux operations per second (a 4 KiB get through the whole mux path:
 *    routing, bulkhead hand-off to a worker thread, stats, health) over
 *    memory members, at 1 and 2 caller threads.
 *
 * Prints one table each. Numbers are for reading, not asserting: timed
 * assertions flake on a shared machine.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/mux_internal.h"
#include "smux/memory.h"
#include "smux/mux.h"

static const int sizes[] = {2, 10, 100};

static struct smux_backend *make_mux(enum smux_mode mode, int n)
{
	struct smux_mux_member *m = calloc((size_t)n, sizeof(*m));
	struct smux_mux_opts opts = {.mode = mode};
	struct smux_backend *mux = NULL;
	struct smux_error err;

	for (int i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "m%d", i);
		if (smux_memory_new(name, &m[i].backend, &err) != 0)
			abort();
		m[i].has_weight = true;
		m[i].weight = 1 + i % 7;
		/* every member holds the keys the throughput runs read, as
		 * identical replicas would */
		for (int k = 0; k < 8; k++) {
			unsigned char buf[4096];
			struct smux_ctx ctx;
			char key[32];

			memset(buf, 'x', sizeof(buf));
			smux_ctx_init(&ctx);
			snprintf(key, sizeof(key), "k%d", k);
			if (smux_backend_put_buf(m[i].backend, &ctx, key, buf,
						 sizeof(buf), &err) != 0)
				abort();
		}
	}
	if (smux_mux_new("bench", &opts, m, (unsigned)n, &mux, &err) != 0) {
		char buf[512];

		fprintf(stderr, "%s\n",
			smux_error_format(&err, buf, sizeof(buf)));
		abort();
	}
	for (int i = 0; i < n; i++)
		smux_backend_unref(m[i].backend);
	free(m);
	return mux;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double select_once(struct smux_mux *mux, const char **keys, int nkeys)
{
	const long iters = 2000000;
	int64_t t0 = thread_cpu_ns();
	unsigned long sink = 0;

	for (long i = 0; i < iters; i++) {
		struct mux_cursor c;
		struct mux_member *m;
		bool probe;

		/* failover and shield walk members in order (mirror reads
		 * race every member, so its "selection" is that walk too) */
		smux__cursor_init(&c, mux, keys[i % nkeys],
				  mux->mode == SMUX_MODE_FAILOVER ||
					  mux->mode == SMUX_MODE_SHIELD ||
					  mux->mode == SMUX_MODE_MIRROR);
		m = smux__cursor_next(&c, &probe);
		sink += m ? m->index : 0;
		smux__member_put(m);
		smux__cursor_release(&c);
	}
	if (sink == 42)
		fputc(' ', stderr); /* keep the loop */
	return (double)(thread_cpu_ns() - t0) / (double)iters;
}

static double select_ns(struct smux_backend *b, const char **keys, int nkeys)
{
	struct smux_mux *mux = smux__mux_of(b);
	double best = 0;

	for (int run = 0; run < 3; run++) {
		double ns = select_once(mux, keys, nkeys);

		if (run == 0 || ns < best)
			best = ns;
	}
	return best;
}

struct worker {
	struct smux_backend *mux;
	int64_t until;
	long ops;
	int id;
};

static void *drive(void *arg)
{
	struct worker *w = arg;
	unsigned char buf[4096];
	struct smux_ctx ctx;
	char key[32];

	smux_ctx_init(&ctx);
	snprintf(key, sizeof(key), "k%d", w->id % 8);
	while (smux_now_ns() < w->until) {
		struct smux_sink sink;
		struct smux_error err;

		smux_sink_buf(&sink, buf, sizeof(buf));
		if (smux_backend_get(w->mux, &ctx, key, NULL, &sink, NULL,
				     &err) != 0)
			abort();
		w->ops++;
	}
	return NULL;
}

static double ops_per_sec(struct smux_backend *mux, int threads)
{
	struct worker w[8];
	pthread_t t[8];
	long total = 0;
	int64_t dur = 1000000000LL;

	for (int i = 0; i < threads; i++) {
		w[i] = (struct worker){
			.mux = mux, .until = smux_now_ns() + dur, .id = i};
		pthread_create(&t[i], NULL, drive, &w[i]);
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		total += w[i].ops;
	}
	return (double)total * 1e9 / (double)dur;
}

int main(void)
{
	const char *keys[64];
	char keybuf[64][32];

	for (int i = 0; i < 64; i++) {
		snprintf(keybuf[i], sizeof(keybuf[i]),
			 "photos/2026/img%04d.jpg", i);
		keys[i] = keybuf[i];
	}
	printf("selection cost, ns of CPU per selection (first member chosen, "
	       "best of 3)\n");
	printf("%-14s %10s %10s %10s\n", "mode", "2", "10", "100");
	for (int mode = 0; mode < SMUX_MODE_COUNT; mode++) {
		printf("%-14s", smux_mode_name((enum smux_mode)mode));
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			struct smux_backend *mux =
				make_mux((enum smux_mode)mode, sizes[s]);

			printf(" %10.1f", select_ns(mux, keys, 64));
			smux_backend_unref(mux);
		}
		printf("\n");
	}
	printf("\nmux throughput, 4 KiB gets per second over 3 memory "
	       "members\n");
	printf("%-14s %12s %12s\n", "mode", "1 thread", "2 threads");
	for (int mode = 0; mode < SMUX_MODE_COUNT; mode++) {
		struct smux_backend *mux = make_mux((enum smux_mode)mode, 3);

		printf("%-14s %12.0f", smux_mode_name((enum smux_mode)mode),
		       ops_per_sec(mux, 1));
		printf(" %12.0f\n", ops_per_sec(mux, 2));
		smux_backend_unref(mux);
	}
	return 0;
}
