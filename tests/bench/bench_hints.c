/* SPDX-License-Identifier: MIT */
/*
 * bench_hints.c - `make bench-hints`: what a member outage costs a mirror
 * over file backends, with the hint journal on disk.
 *
 * A mirror of two file members "a" and "b" (b behind a faulty wrapper),
 * journal in a state directory:
 * 0. The journal alone: T threads add N hints (each add returns once its
 *    record is durable). Prints adds per second and fdatasyncs saved.
 * 1. b fails every call; T threads put N small objects (b is down: each
 *    put is acknowledged after its hint for b is journaled). Prints puts
 *    per second.
 * 2. b is back; one smux_mux_repair replays the N hints. Prints the time
 *    and hints per second.
 *
 * Usage: bench_hints [N [T [nofsync]]] (default 10000 puts, 4 threads;
 * "nofsync": the file members skip their fsyncs, leaving the journal's
 * fdatasync as the only one a put waits for). Numbers
 * are for reading, not asserting: timed assertions flake on a shared
 * machine.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/mux_internal.h"
#include "smux/faulty.h"
#include "smux/file.h"
#include "smux/mux.h"

static void die(const char *what, const struct smux_error *err)
{
	char buf[512];

	fprintf(stderr, "%s: %s\n", what,
		err ? smux_error_format(err, buf, sizeof(buf)) : "failed");
	exit(1);
}

static bool no_fsync;

static struct smux_backend *file_member(const char *root, const char *name)
{
	struct smux_file_opts fo = {.no_fsync = no_fsync};
	struct smux_backend *b = NULL;
	struct smux_error err;
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", root, name);
	if (mkdir(path, 0700) != 0)
		die(path, NULL);
	fo.path = path;
	if (smux_file_new(name, &fo, &b, &err) != 0)
		die("file backend", &err);
	return b;
}

struct worker {
	struct smux_backend *mux;
	int from, to;
	atomic_int *failed;
};

static void *put_range(void *arg)
{
	struct worker *w = arg;

	for (int i = w->from; i < w->to; i++) {
		struct smux_error err;
		struct smux_ctx ctx;
		char key[32], val[64];

		snprintf(key, sizeof(key), "d%d/k%d", i % 16, i);
		snprintf(val, sizeof(val), "value %d\n", i);
		smux_ctx_init(&ctx);
		if (smux_backend_put_buf(w->mux, &ctx, key, val, strlen(val),
					 &err) != 0)
			atomic_fetch_add(w->failed, 1);
	}
	return NULL;
}

struct jworker {
	struct smux__hints *h;
	int from, to;
};

static void *add_range(void *arg)
{
	struct jworker *w = arg;
	char key[32];

	for (int i = w->from; i < w->to; i++) {
		snprintf(key, sizeof(key), "j/k%d", i);
		if (smux__hints_add(w->h, "b", key, SMUX__HINT_PUT, NULL,
				    NULL) != 0)
			die("hints_add", NULL);
	}
	return NULL;
}

static void journal_only(const char *root, int n, int t)
{
	struct smux__hints *h = NULL;
	struct smux_error err;
	struct jworker w[64];
	pthread_t th[64];
	char dir[600];
	int64_t t0, t1;

	snprintf(dir, sizeof(dir), "%s/jstate", root);
	if (smux__hints_open(dir, "bench", &h, &err) != 0)
		die("hints_open", &err);
	t0 = smux_now_ns();
	for (int i = 0; i < t; i++) {
		w[i] = (struct jworker){h, (int)((long)n * i / t),
					(int)((long)n * (i + 1) / t)};
		pthread_create(&th[i], NULL, add_range, &w[i]);
	}
	for (int i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	t1 = smux_now_ns();
	printf("journal: %d adds by %d threads in %.3f s: %.0f adds/s\n", n, t,
	       (double)(t1 - t0) / 1e9, n / ((double)(t1 - t0) / 1e9));
	smux__hints_close(h);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10000;
	int t = argc > 2 ? atoi(argv[2]) : 4;
	char root[] = "/tmp/bench_hints.XXXXXX";
	struct smux_faulty_opts down = {.error_rate = 1.0}, up = {0};
	struct smux_mux_opts opts = {.mode = SMUX_MODE_MIRROR};
	struct smux_mux_member m[2] = {{0}};
	struct smux_backend *a, *fb, *b, *mux;
	pthread_t th[64];
	struct worker w[64];
	atomic_int failed = 0;
	unsigned replayed = 0, pending = 0;
	struct smux_error err;
	struct smux_ctx ctx;
	char state[600], cmd[700];
	int64_t t0, t1;

	no_fsync = argc > 3 && strcmp(argv[3], "nofsync") == 0;
	if (n < 1 || t < 1 || t > 64 || !mkdtemp(root))
		die("usage: bench_hints [N [T<=64]]", NULL);
	journal_only(root, 2000, t);
	snprintf(state, sizeof(state), "%s/state", root);
	a = file_member(root, "a");
	fb = file_member(root, "bfile");
	if (smux_faulty_new("b", fb, &up, &b, &err) != 0)
		die("faulty", &err);
	m[0].backend = a;
	m[1].backend = b;
	opts.state_dir = state;
	/* b comes back soon after it is healthy again */
	opts.cooldown_ms = 100;
	opts.max_cooldown_ms = 100;
	if (smux_mux_new("bench", &opts, m, 2, &mux, &err) != 0)
		die("mux", &err);

	smux_faulty_set(b, &down);
	t0 = smux_now_ns();
	for (int i = 0; i < t; i++) {
		w[i] = (struct worker){mux, (int)((long)n * i / t),
				       (int)((long)n * (i + 1) / t), &failed};
		pthread_create(&th[i], NULL, put_range, &w[i]);
	}
	for (int i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	t1 = smux_now_ns();
	printf("outage: %d puts by %d threads in %.3f s: %.0f puts/s "
	       "(%d failed), %u hints pending\n",
	       n, t, (double)(t1 - t0) / 1e9, n / ((double)(t1 - t0) / 1e9),
	       atomic_load(&failed), smux_mux_pending_hints(mux));

	smux_faulty_set(b, &up);
	smux_ctx_init(&ctx);
	/* past b's cooldown: the replay probes it */
	usleep(300 * 1000);
	t0 = smux_now_ns();
	if (smux_mux_repair(mux, &ctx, &replayed, &pending, &err) != 0)
		die("repair", &err);
	t1 = smux_now_ns();
	printf("repair: %u hints replayed in %.3f s: %.0f hints/s, "
	       "%u pending\n",
	       replayed, (double)(t1 - t0) / 1e9,
	       replayed / ((double)(t1 - t0) / 1e9), pending);

	smux_backend_unref(mux);
	smux_backend_unref(b);
	smux_backend_unref(fb);
	smux_backend_unref(a);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : 1;
}
