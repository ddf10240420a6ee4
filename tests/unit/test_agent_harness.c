/*
 * tests/unit/test_agent_harness.c - see test_agent_harness.h.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/plugin/host_api.h"
#include "test_agent_harness.h"

const char *th_agent_path(void)
{
	static char path[4096];
	const char *env = getenv("AKS_TEST_AGENT");
	if (env && *env)
		return env;
	const char *b = getenv("AKS_TEST_BUILDDIR");
	snprintf(path, sizeof(path), "%s/agent/aksandbox-agent", b ? b : ".");
	return path;
}

/* args: the agent's options (NULL-terminated), or NULL for none. */
static void spawn_agent(th_agent *t, const char *const *args)
{
	memset(t, 0, sizeof(*t));
	int in[2], out[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	const char *path = th_agent_path();
	assert_int_equal(access(path, X_OK), 0);
	const char *argv[64] = {path};
	for (size_t i = 0; args && args[i]; i++) {
		assert_true(i + 2 < sizeof(argv) / sizeof(argv[0]));
		argv[i + 1] = args[i];
	}
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->to = in[1];
	t->from = out[0];
}

void th_start(th_agent *t)
{
	th_start_args(t, NULL);
}

void th_start_args(th_agent *t, const char *const *args)
{
	spawn_agent(t, args);
	aks_error *err = NULL;
	int rc = aks__agent_start(aks__host_api(), t->from, t->to, NULL, &t->conn, &err);
	if (rc != AKS_OK)
		fail_msg("agent start: %s", aks_error_message(err));
	t->to = t->from = -1; /* owned by the connection now */
	assert_true(aks__agent_pid(t->conn) == (uint32_t)t->pid);
}

void th_start_resident(th_agent *t, const char *name)
{
	th_start_resident_in(t, name, NULL);
}

void th_start_resident_in(th_agent *t, const char *name, const char *state_dir)
{
	const char *args[] = {"--resident", name, state_dir ? "--state-dir" : NULL, state_dir,
	                      NULL};
	spawn_agent(t, args);
	aks_error *err = NULL;
	int rc = aks__agent_start(aks__host_api(), t->from, t->to, NULL, &t->conn, &err);
	if (rc != AKS_OK)
		fail_msg("resident agent %s: %s", name, aks_error_message(err));
	t->to = t->from = -1;
	/* the relay is our child; the agent it reaches is not */
	assert_true(aks__agent_pid(t->conn) != (uint32_t)t->pid);
}

void th_start_raw(th_agent *t)
{
	th_start_raw_args(t, NULL);
}

void th_start_raw_args(th_agent *t, const char *const *args)
{
	spawn_agent(t, args);
	assert_int_equal(aks__agent_decoder_init(&t->dec, AKS_AGENT_MAX_PAYLOAD), 0);
}

int th_stop(th_agent *t)
{
	if (t->conn)
		aks__agent_free(t->conn);
	t->conn = NULL;
	if (t->to >= 0)
		close(t->to);
	if (t->from >= 0)
		close(t->from);
	t->to = t->from = -1;
	aks__agent_decoder_free(&t->dec);
	int st = 0;
	for (int i = 0; i < 1000; i++) {
		pid_t p = waitpid(t->pid, &st, WNOHANG);
		if (p == t->pid)
			return st;
		usleep(10000);
	}
	kill(t->pid, SIGKILL);
	waitpid(t->pid, &st, 0);
	fail_msg("the agent did not exit within 10 s of EOF");
	return -1;
}

void th_send(th_agent *t, aks_agent_buf *b)
{
	assert_false(b->failed);
	size_t off = 0;
	while (off < b->len) {
		ssize_t n = write(t->to, b->data + off, b->len - off);
		assert_true(n > 0);
		off += (size_t)n;
	}
	b->off = b->len = 0;
}

void th_send_hello(th_agent *t)
{
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_HELLO, 0, 1);
	aks__agent_put_u32(&b, AKS_AGENT_T_VERSION_MIN, 1);
	aks__agent_put_u32(&b, AKS_AGENT_T_VERSION_MAX, 1);
	aks__agent_frame_end(&b, s);
	th_send(t, &b);
	aks__agent_buf_free(&b);
	aks_agent_frame f;
	uint8_t payload[1024];
	th_recv(t, &f, payload, sizeof(payload), 5000);
	assert_int_equal(f.type, AKS_AGENT_HELLO_OK);
	assert_int_equal(th_field_u32(&f, AKS_AGENT_T_VERSION), 1);
}

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void th_recv(th_agent *t, aks_agent_frame *f, uint8_t *payload, size_t cap, int timeout_ms)
{
	int64_t until = mono_ms() + timeout_ms;
	for (;;) {
		uint32_t code;
		int rc = aks__agent_decoder_next(&t->dec, f, &code);
		assert_int_not_equal(rc, AKS_AGENT_DEC_ERROR);
		if (rc == AKS_AGENT_DEC_FRAME) {
			assert_true(f->len <= cap);
			memcpy(payload, f->payload, f->len);
			f->payload = payload;
			return;
		}
		int left = (int)(until - mono_ms());
		if (left <= 0)
			fail_msg("no frame from the agent within %d ms", timeout_ms);
		struct pollfd pf = {t->from, POLLIN, 0};
		if (poll(&pf, 1, left) <= 0)
			continue;
		size_t avail;
		uint8_t *p = aks__agent_decoder_space(&t->dec, &avail);
		ssize_t n = read(t->from, p, avail);
		if (n <= 0)
			fail_msg("the agent closed its output");
		aks__agent_decoder_commit(&t->dec, (size_t)n);
	}
}

uint32_t th_field_u32(const aks_agent_frame *f, uint16_t tag)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t t;
	const uint8_t *v;
	uint32_t n;
	while (aks__agent_tlv_next(&it, &t, &v, &n) > 0)
		if (t == tag && n == 4)
			return aks__agent_get32(v);
	fail_msg("no u32 field %u in a frame of type 0x%02x", tag, f->type);
	return 0;
}

char *th_tmpdir(void)
{
	char *d = strdup("/tmp/aks-agent-test-XXXXXX");
	assert_non_null(d);
	assert_non_null(mkdtemp(d));
	return d;
}

void th_rmdir(char *dir)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	int rc = system(cmd);
	(void)rc;
	free(dir);
}

pid_t th_read_pid(const char *dir, const char *name, int wait_ms)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int waited = 0;; waited += 10) {
		FILE *f = fopen(path, "r");
		long pid = -1;
		if (f) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = -1;
			fclose(f);
		}
		if (pid > 0 || waited >= wait_ms)
			return (pid_t)pid;
		usleep(10000);
	}
}

bool th_alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	char *paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

bool th_gone_within(pid_t pid, int wait_ms)
{
	for (int waited = 0; waited <= wait_ms; waited += 10) {
		if (!th_alive(pid))
			return true;
		usleep(10000);
	}
	return false;
}

long th_vm_hwm_kb(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}
