/* SPDX-License-Identifier: MIT */
/*
 * smuxctl.c - the operator's command line for a mounted smuxfs (issue 11
 * item 5). It talks to the daemon only through the mount's .smux/ files:
 * it reads .smux/stats, .smux/metrics and .smux/events, and writes
 * commands to .smux/ctl, so it needs no socket, no daemon pid and no
 * privilege beyond what those files' modes give.
 *
 * The mount is found from a path inside it (the current directory by
 * default, or -m PATH): the nearest directory upwards holding .smux/stats
 * and .smux/ctl.
 *
 * Exit codes: 0 done; 1 the daemon refused the command (its errno is
 * printed; the reason is in .smux/events); 2 usage; 3 no smuxfs mount found
 * or its .smux/ files unreadable.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_REFUSED 1
#define EXIT_USAGE   2
#define EXIT_NOMOUNT 3

static const char usage_text[] =
	"usage: smuxctl [-m PATH] COMMAND [ARGS]\n"
	"\n"
	"Operates the smuxfs mount that holds PATH (default: the current\n"
	"directory), through its .smux/ files only.\n"
	"\n"
	"  status [PATH]          the backend tree: state, in-flight calls,\n"
	"                         hits, misses, errors, timeouts, p50/p99\n"
	"                         latency, last state change, pending hints\n"
	"  stats --json [PATH]    .smux/stats as it is (JSON)\n"
	"  metrics [PATH]         .smux/metrics (Prometheus text format)\n"
	"  events [-f] [PATH]     recent events, one JSON line each; -f keeps\n"
	"                         following new ones\n"
	"  drain NAME             take member NAME out of rotation (waits for\n"
	"                         its in-flight calls; open files drop it)\n"
	"  undrain NAME           put it back in rotation\n"
	"  remove NAME            drain it, then remove it from its mux\n"
	"  weight NAME W          set its weight (weighted mode)\n"
	"  repair [NAME]          replay pending hints now (every mux, or "
	"one)\n"
	"  fault NAME K=V...|off  faults of a faulty backend (tests, drills)\n"
	"  add NAME [to MUX]      add a [backend]/[mux] section of the config\n"
	"                         file (read again) to MUX or the root mux\n"
	"  reload                 re-read the config file and apply the\n"
	"                         difference (members, weights, faults)\n"
	"\n"
	"Exit status: 0 done, 1 the daemon refused the command (the reason\n"
	"is in `smuxctl events`), 2 usage, 3 no smuxfs mount found.\n";

static int usage(FILE *out, int rc)
{
	fputs(usage_text, out);
	return rc;
}

/* True when @dir holds the .smux/ files of a mount; *@gone: @dir is a
 * FUSE mount whose daemon is gone (ENOTCONN: killed, crashed). */
static bool is_mount(const char *dir, bool *gone)
{
	char p[PATH_MAX + 32];
	struct stat st;

	snprintf(p, sizeof(p), "%s/.smux/stats", dir);
	if (stat(p, &st) != 0) {
		*gone = *gone || errno == ENOTCONN;
		return false;
	}
	if (!S_ISREG(st.st_mode))
		return false;
	snprintf(p, sizeof(p), "%s/.smux/ctl", dir);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* The mount holding @path into @mnt (PATH_MAX): 0 or -1 (message
 * printed). */
static int find_mount(const char *path, char *mnt)
{
	bool gone = false;
	char *slash;

	if (!realpath(path, mnt)) {
		fprintf(stderr, "smuxctl: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (is_mount(mnt, &gone))
			return 0;
		if (gone) {
			fprintf(stderr,
				"smuxctl: %s: the mount's daemon is gone (%s): "
				"unmount it (fusermount3 -u %s) and mount it "
				"again\n",
				mnt, strerror(ENOTCONN), mnt);
			return -1;
		}
		slash = strrchr(mnt, '/');
		if (!slash || slash == mnt) {
			if (strcmp(mnt, "/") != 0 && is_mount("/", &gone)) {
				snprintf(mnt, PATH_MAX, "/");
				return 0;
			}
			fprintf(stderr,
				"smuxctl: %s is not inside a smuxfs mount "
				"(no .smux/stats above it)\n",
				path);
			return -1;
		}
		*slash = '\0';
	}
}

/* Copies .smux/@name of @mnt to stdout: 0 or EXIT_NOMOUNT. */
static int cat_file(const char *mnt, const char *name)
{
	char p[PATH_MAX + 32], buf[65536];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/.smux/%s", mnt, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "smuxctl: %s: %s\n", p, strerror(errno));
		return EXIT_NOMOUNT;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			break;
	close(fd);
	return n < 0 ? EXIT_NOMOUNT : 0;
}

/* events [-f]: the ring, then (with @follow) new lines as they come. */
static int cmd_events(const char *mnt, bool follow)
{
	char p[PATH_MAX + 32], buf[65536];
	struct pollfd pfd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/.smux/events", mnt);
	pfd.fd = open(p, O_RDONLY | O_CLOEXEC);
	if (pfd.fd < 0) {
		fprintf(stderr, "smuxctl: %s: %s\n", p, strerror(errno));
		return EXIT_NOMOUNT;
	}
	pfd.events = POLLIN;
	for (;;) {
		while ((n = read(pfd.fd, buf, sizeof(buf))) > 0) {
			fwrite(buf, 1, (size_t)n, stdout);
			fflush(stdout);
		}
		if (n < 0 || !follow)
			break;
		if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
			break;
	}
	close(pfd.fd);
	return n < 0 ? EXIT_NOMOUNT : 0;
}

/* Writes one command line to .smux/ctl: 0, or EXIT_REFUSED/EXIT_NOMOUNT
 * with a message. */
static int send_command(const char *mnt, int argc, char **argv)
{
	char p[PATH_MAX + 32], line[1024];
	size_t len = 0;
	ssize_t n;
	int fd;

	for (int i = 0; i < argc; i++) {
		int w = snprintf(line + len, sizeof(line) - len, "%s%s",
				 i ? " " : "", argv[i]);

		if (w < 0 || (size_t)w >= sizeof(line) - len - 1) {
			fprintf(stderr, "smuxctl: command too long\n");
			return EXIT_USAGE;
		}
		if (strpbrk(argv[i], "\n\r")) {
			fprintf(stderr, "smuxctl: a newline in an argument\n");
			return EXIT_USAGE;
		}
		len += (size_t)w;
	}
	line[len++] = '\n';
	snprintf(p, sizeof(p), "%s/.smux/ctl", mnt);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "smuxctl: %s: %s\n", p, strerror(errno));
		return errno == EACCES ? EXIT_REFUSED : EXIT_NOMOUNT;
	}
	n = write(fd, line, len);
	if (n < 0) {
		int e = errno;

		close(fd);
		fprintf(stderr, "smuxctl: %.*s: %s (see smuxctl events)\n",
			(int)len - 1, line, strerror(e));
		return EXIT_REFUSED;
	}
	close(fd);
	return 0;
}

/* ---- status ---- */

struct style {
	const char *up, *down, *draining, *bold, *off;
};

static const char *state_colour(const struct style *s, const char *state)
{
	if (strcmp(state, "up") == 0)
		return s->up;
	if (strcmp(state, "down") == 0)
		return s->down;
	return s->draining;
}

/* "12s ago", "3m ago", "2h ago", "4d ago" or "-" for @at_ms (wall ms). */
static void ago(long long at_ms, char *out, size_t cap)
{
	struct timespec now;
	long long s;

	if (at_ms <= 0) {
		snprintf(out, cap, "-");
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	s = ((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000 - at_ms) /
	    1000;
	if (s < 0)
		s = 0;
	if (s < 120)
		snprintf(out, cap, "%llds ago", s);
	else if (s < 7200)
		snprintf(out, cap, "%lldm ago", s / 60);
	else if (s < 172800)
		snprintf(out, cap, "%lldh ago", s / 3600);
	else
		snprintf(out, cap, "%lldd ago", s / 86400);
}

static long long num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_number(v) ? (long long)json_number_value(v) : 0;
}

static double dbl(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "?";
}

/* One mux and its members, indented by @depth. */
static void print_mux(json_t *mux, int depth, const struct style *st)
{
	json_t *backends = json_object_get(mux, "backends"), *b;
	size_t i;

	printf("%*s%s%s%s (%s)  calls %lld  failovers %lld  fan-out partials "
	       "%lld  pending hints %lld\n",
	       depth * 2, "", st->bold, str(mux, "name"), st->off,
	       str(mux, "mode"), num(mux, "totalCalls"),
	       num(mux, "totalFailovers"), num(mux, "totalFanoutPartials"),
	       num(mux, "pendingHints"));
	json_array_foreach(backends, i, b)
	{
		const char *state = str(b, "status");
		json_t *child = json_object_get(b, "mux");
		char when[32], weight[32] = "";
		int pad = 20 - 2 * (depth + 1);

		ago(num(b, "lastTransitionAt"), when, sizeof(when));
		if (json_is_number(json_object_get(b, "weight")))
			snprintf(weight, sizeof(weight), "  w %g",
				 dbl(b, "weight"));
		printf("%*s%-*s %s%-8s%s %4lld %9lld %7lld %7lld %8lld "
		       "%8.2f %8.2f  %s%s\n",
		       (depth + 1) * 2, "", pad > 1 ? pad : 1, str(b, "name"),
		       state_colour(st, state), state, st->off,
		       num(b, "inFlightCount"), num(b, "hits"),
		       num(b, "misses"), num(b, "errors"), num(b, "timeouts"),
		       dbl(b, "p50LatencyMs"), dbl(b, "p99LatencyMs"), when,
		       weight);
		if (json_is_object(child))
			print_mux(child, depth + 2, st);
	}
}

static int cmd_status(const char *mnt)
{
	static const struct style colour = {"\033[32m", "\033[31m", "\033[33m",
					    "\033[1m", "\033[0m"};
	static const struct style plain = {"", "", "", "", ""};
	const char *nc = getenv("NO_COLOR");
	const struct style *st =
		isatty(STDOUT_FILENO) && !(nc && nc[0]) ? &colour : &plain;
	char p[PATH_MAX + 32];
	json_error_t jerr;
	json_t *root, *rc;

	snprintf(p, sizeof(p), "%s/.smux/stats", mnt);
	root = json_load_file(p, 0, &jerr);
	if (!root) {
		fprintf(stderr, "smuxctl: %s: %s\n", p, jerr.text);
		return EXIT_NOMOUNT;
	}
	printf("%s\n", mnt);
	if (!json_is_array(json_object_get(root, "backends"))) {
		printf("  %s (%s): a single backend\n", str(root, "name"),
		       str(root, "kind"));
	} else {
		printf("  %-18s %-8s %4s %9s %7s %7s %8s %8s %8s  %s\n",
		       "BACKEND", "STATE", "INFL", "HITS", "MISSES", "ERRORS",
		       "TIMEOUTS", "P50 MS", "P99 MS", "LAST CHANGE");
		print_mux(root, 0, st);
	}
	rc = json_object_get(root, "readCache");
	if (json_is_object(rc) && json_is_true(json_object_get(rc, "enabled")))
		printf("read cache: %lld of %lld bytes, %lld hits, %lld "
		       "misses, %lld evictions\n",
		       num(rc, "bytes"), num(rc, "capacityBytes"),
		       num(rc, "hits"), num(rc, "misses"),
		       num(rc, "evictions"));
	json_decref(root);
	return 0;
}

int main(int argc, char **argv)
{
	const char *where = ".", *cmd;
	char mnt[PATH_MAX];
	bool follow = false, as_json = false;
	int i = 1;

	if (argc > 1 &&
	    (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
		return usage(stdout, 0);
	if (argc > 2 &&
	    (strcmp(argv[1], "-m") == 0 || strcmp(argv[1], "--mount") == 0)) {
		where = argv[2];
		i = 3;
	}
	if (i >= argc)
		return usage(stderr, EXIT_USAGE);
	cmd = argv[i++];
	/* the read-only commands take their options and a PATH */
	if (strcmp(cmd, "status") == 0 || strcmp(cmd, "stats") == 0 ||
	    strcmp(cmd, "metrics") == 0 || strcmp(cmd, "events") == 0) {
		for (; i < argc; i++) {
			if (strcmp(argv[i], "-f") == 0 &&
			    strcmp(cmd, "events") == 0)
				follow = true;
			else if (strcmp(argv[i], "--json") == 0 &&
				 strcmp(cmd, "stats") == 0)
				as_json = true;
			else if (argv[i][0] != '-' && i == argc - 1)
				where = argv[i];
			else
				return usage(stderr, EXIT_USAGE);
		}
		if (find_mount(where, mnt))
			return EXIT_NOMOUNT;
		if (strcmp(cmd, "status") == 0 ||
		    (strcmp(cmd, "stats") == 0 && !as_json))
			return cmd_status(mnt);
		if (strcmp(cmd, "stats") == 0)
			return cat_file(mnt, "stats");
		if (strcmp(cmd, "metrics") == 0)
			return cat_file(mnt, "metrics");
		return cmd_events(mnt, follow);
	}
	if (strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0 ||
	    strcmp(cmd, "remove") == 0 || strcmp(cmd, "weight") == 0 ||
	    strcmp(cmd, "repair") == 0 || strcmp(cmd, "fault") == 0 ||
	    strcmp(cmd, "add") == 0 || strcmp(cmd, "reload") == 0) {
		if (find_mount(where, mnt))
			return EXIT_NOMOUNT;
		/* the daemon checks the arguments (one place for the rules) */
		return send_command(mnt, argc - i + 1, argv + i - 1);
	}
	fprintf(stderr, "smuxctl: unknown command \"%s\"\n\n", cmd);
	return usage(stderr, EXIT_USAGE);
}
