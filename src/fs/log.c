/* SPDX-License-Identifier: MIT */
/*
 * log.c - the daemon's log: stderr in the foreground, syslog (ident
 * "smuxfs", facility daemon) once it runs in the background. -d lets debug
 * messages through.
 *
 * Owns: where messages go and which levels pass. Never logs a secret: the
 * callers pass keys, names and error messages only.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "fs/fs.h"

/* Set once by smux_log_init() before any thread starts; read-only after. */
static bool log_foreground = true;
static bool log_debug;

void smux_log_init(bool foreground, bool debug)
{
	log_foreground = foreground;
	log_debug = debug;
	if (!foreground)
		openlog("smuxfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

bool smux_log_enabled(int level)
{
	return level != LOG_DEBUG || log_debug;
}

static const char *level_name(int level)
{
	switch (level) {
	case LOG_EMERG:
	case LOG_ALERT:
	case LOG_CRIT:
	case LOG_ERR:
		return "error";
	case LOG_WARNING:
		return "warning";
	case LOG_NOTICE:
	case LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

void smux_log(int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!smux_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_foreground)
		/* one fprintf per line: stdio locks the stream, so lines
		 * from several threads do not interleave */
		fprintf(stderr, "smuxfs: %s: %s\n", level_name(level), msg);
	else
		syslog(level, "%s", msg);
}
