/*
 * core/cli/util.c - error records, output and shell quoting for the CLI.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "aks_text.h"
#include "cli.h"

int cli_error_set(cli_error *err, int code, const char *fmt, ...)
{
	va_list ap;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return code;
}

int cli_error_take(cli_error *err, int code, aks_error *src)
{
	if (src) {
		code = aks_error_code(src) ? aks_error_code(src) : code;
		cli_error_set(err, code, "%s", aks_error_message(src));
		aks_error_free(src);
	} else {
		cli_error_set(err, code, "%s", aks_strerror(code));
	}
	return code;
}

void cli_error_print(const cli_error *err)
{
	cli_warn("%s", err->message);
}

int cli_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int cli_print_report(const char *text, bool json, void (*print_text)(struct json_object *),
                     struct json_object **parsed)
{
	*parsed = json_tokener_parse(text);
	if (json) {
		if (cli_write_all(STDOUT_FILENO, text, strlen(text)) < 0 ||
		    cli_write_all(STDOUT_FILENO, "\n", 1) < 0) {
			cli_warn("cannot write the output: %s", strerror(errno));
			return CLI_EXIT_FAILURE;
		}
		return CLI_EXIT_OK;
	}
	if (*parsed)
		print_text(*parsed);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

void cli_warn(const char *fmt, ...)
{
	/* One buffer and one write(2), so the line is not interleaved with the
	 * program's stderr that was written with write(2) just before. Messages carry bytes
	 * from sandboxes and backends: escaped, so none can steer the terminal. */
	char line[2048], safe[4 * sizeof(line) + 2];
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	size_t len = m < 0 ? 0 : (size_t)m < sizeof(line) ? (size_t)m : sizeof(line) - 1;
	int n = snprintf(safe, sizeof(safe), "aksandbox: ");
	len = (size_t)n + aks__text_printable(safe + n, sizeof(safe) - (size_t)n - 1, line, len);
	safe[len++] = '\n';
	(void)cli_write_all(STDERR_FILENO, safe, len);
}

static void warn_skipped(void *userdata, const char *path)
{
	(void)userdata;
	cli_warn("ignoring %s: it has no sandbox: mapping, so it is not an aksandbox "
	         "configuration (give one with -c or $AKSANDBOX_CONFIG)",
	         path);
}

char *cli_find_config(void)
{
	return aks_settings_locate(cli_config_path, warn_skipped, NULL);
}

/* Characters that never need quoting in a POSIX shell word. */
static bool is_safe_word(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		            "_@%+=:,./-",
		            *s))
			return false;
	}
	return true;
}

/* A command word that the shell would read as something other than a command
 * name when left bare: a reserved word, or an assignment (FOO=bar). */
static bool needs_quoting_as_command(const char *s)
{
	static const char *const reserved[] = {
	    "case",     "coproc", "do", "done",   "elif", "else", "esac",  "fi",    "for",
	    "function", "if",     "in", "select", "then", "time", "until", "while", NULL};
	if (strchr(s, '='))
		return true;
	for (size_t i = 0; reserved[i]; i++) {
		if (strcmp(s, reserved[i]) == 0)
			return true;
	}
	return false;
}

char *cli_shell_join(int argc, char *const argv[])
{
	/* Worst case: every byte is a quote ('\'' = 4 bytes), plus the two
	 * enclosing quotes and a separator per word. */
	size_t size = 1;
	for (int i = 0; i < argc; i++)
		size += strlen(argv[i]) * 4 + 3;
	char *out = malloc(size);
	if (!out)
		return NULL;
	char *p = out;
	for (int i = 0; i < argc; i++) {
		const char *s = argv[i];
		if (i > 0)
			*p++ = ' ';
		if (is_safe_word(s) && !(i == 0 && needs_quoting_as_command(s))) {
			size_t n = strlen(s);
			memcpy(p, s, n);
			p += n;
			continue;
		}
		/* Inside single quotes nothing is special except the quote itself,
		 * which is closed, escaped and reopened. */
		*p++ = '\'';
		for (; *s; s++) {
			if (*s == '\'') {
				memcpy(p, "'\\''", 4);
				p += 4;
			} else {
				*p++ = *s;
			}
		}
		*p++ = '\'';
	}
	*p = '\0';
	return out;
}
