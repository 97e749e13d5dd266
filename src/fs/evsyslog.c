/* SPDX-License-Identifier: MIT */
/*
 * evsyslog.c - the mux tree's events in the daemon's log (stderr in the
 * foreground, syslog in the background): one JSON line each, at a level
 * chosen per topic, rate-limited (issue 11 item 2).
 *
 * Owns: the topic-to-level table and the rate limiter's window. Runs on
 * the event bus's dispatcher thread only (one subscriber), so the
 * limiter's counters need no lock.
 */
#include <stdlib.h>
#include <syslog.h>

#include "fs/fs.h"
#include "smux/ctx.h"

/* The log level of an event: what an operator must fix (a configuration
 * a server refused) above what they must see (a backend down, replicas
 * reconciled after a crash) above the routine (hints, fan-outs). */
int smuxfs_event_level(enum smux_topic t)
{
	switch (t) {
	case SMUX_EV_BACKEND_MISCONFIGURED:
		/* every call of the member fails until the file is fixed */
		return LOG_ERR;
	case SMUX_EV_BACKEND_DOWN:
	case SMUX_EV_RECONCILED:
		return LOG_WARNING;
	case SMUX_EV_BACKEND_RECOVERED:
	case SMUX_EV_DRAIN_STARTED:
	case SMUX_EV_DRAIN_COMPLETED:
	case SMUX_EV_BACKEND_ADDED:
	case SMUX_EV_BACKEND_REMOVED:
	case SMUX_EV_WEIGHT_CHANGED:
		return LOG_NOTICE;
	default:
		return LOG_INFO;
	}
}

#define EVENT_LOG_PER_S 50

/* Every event of the mux tree goes to the log (one JSON line each), at
 * most EVENT_LOG_PER_S routine ones a second (warnings and errors always): an outage
 * hinting thousands of writes must not flood syslog; the lines left out
 * are counted in the next one logged. Runs on the bus's dispatcher thread
 * only, so the counters need no lock. */
void smuxfs_log_event(void *arg, const struct smux_event *ev)
{
	static int64_t window_s;
	static unsigned in_window, suppressed;
	int level = smuxfs_event_level(ev->topic);
	int64_t now_s = smux_now_ns() / 1000000000;
	char *json;

	(void)arg;
	if (now_s != window_s) {
		window_s = now_s;
		in_window = 0;
	}
	if (level > LOG_WARNING && ++in_window > EVENT_LOG_PER_S) {
		suppressed++;
		return;
	}
	if (suppressed) {
		smux_log(LOG_NOTICE,
			 "%u event(s) not logged (more than %d a "
			 "second; .smux/events has them)",
			 suppressed, EVENT_LOG_PER_S);
		suppressed = 0;
	}
	json = smux_event_to_json(ev);
	if (json)
		smux_log(level, "event %s", json);
	free(json);
}
