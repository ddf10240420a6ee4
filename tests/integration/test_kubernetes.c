/*
 * tests/integration/test_kubernetes.c - the kubernetes provider against a
 * real cluster (tests/integration/k8s-setup.sh: Kubernetes 1.20 built from
 * Debian's source, the kubelet on the local Docker engine), through the core
 * API: the plugin is loaded from AKS_PLUGIN_PATH and configured from YAML.
 *
 * Effects are checked with kubectl (the pod and NetworkPolicy objects as
 * the API server stores them) and with second executions in the pod (/proc,
 * files), not with return codes alone. Every pod carries the label
 * aksandbox-test=<this run>; the group teardown deletes what is left.
 *
 * Needs: `k8s-setup.sh status` to succeed (the cluster is up); its `env`
 * gives the kubeconfigs, tokens, namespace and images. Without the cluster
 * every test fails, saying how to start it.
 *
 * Built twice: test_kubernetes (K8S_TEST_AGENT "false": one exec per call) and
 * test_kubernetes_agent (the build's aksandbox-agent, placed in each pod and run over one
 * exec stream), which also runs the agent's own cases (t_agent_*).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>

#define SETUP_HINT "run tests/integration/k8s-setup.sh start (as root)"

#ifndef K8S_TEST_AGENT
#error "K8S_TEST_AGENT must be defined: false, or the aksandbox-agent to run through"
#endif
#define WITH_AGENT (strcmp(K8S_TEST_AGENT, "false") != 0)

static char run_label[64];
static char tmpdir[256];
static const aks_plugin *plugin;
/* from k8s-setup.sh env */
static char *kubectl, *admin_kc, *server, *ca, *ns, *py_image, *alice_token, *bob_token;

/* ---- helpers ------------------------------------------------------------------------ */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	return s;
}

static char *sh_out(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *sh_out(int *status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	buf[len] = '\0';
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	int st = pclose(p);
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	free(cmd);
	return buf;
}

/* kubectl as the admin; fails the test on error. */
static char *kctl(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *kctl(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *args = NULL;
	assert_true(vasprintf(&args, fmt, ap) >= 0);
	va_end(ap);
	int st;
	char *out = sh_out(&st, "'%s' --kubeconfig '%s' %s 2>&1", kubectl, admin_kc, args);
	if (st != 0)
		fail_msg("kubectl %s failed: %s", args, out);
	free(args);
	return out;
}

/* The macro evaluates the call before reading the error it fills. */
#define check_ok(expr, e)                                                                          \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		check_ok_(rc_, (e));                                                               \
	} while (0)

static void check_ok_(int rc, aks_error *err)
{
	if (rc != AKS_OK)
		fail_msg("expected AKS_OK, got %d: %s", rc,
		         err ? aks_error_message(err) : "(no error)");
	if (err)
		fail_msg("AKS_OK, but with an error set: %s", aks_error_message(err));
}

#define check_error(expr, ...)                                                                     \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		check_error_(rc_, __VA_ARGS__);                                                    \
	} while (0)

static void check_error_(int rc, aks_error **err, int code, ...)
{
	if (rc != code)
		fail_msg("expected %d, got %d: %s", code, rc,
		         *err ? aks_error_message(*err) : "(no error)");
	assert_non_null(*err);
	assert_int_equal(aks_error_code(*err), code);
	va_list ap;
	va_start(ap, code);
	for (const char *part; (part = va_arg(ap, const char *));)
		if (!strstr(aks_error_message(*err), part))
			fail_msg("the error '%s' lacks '%s'", aks_error_message(*err), part);
	va_end(ap);
	aks_error_free(*err);
	*err = NULL;
}

/* ---- fixture ---------------------------------------------------------------------------- */

typedef struct fixture {
	aks_config *config;
	aks_provider *prov;
	aks_sandbox *sb;
	char *id;
	aks_policy policy;
	aks_principal *principal;
} fixture;

static int open_provider_rc(fixture *f, const char *extra, aks_error **err)
{
	/* the defaults, unless `extra` sets the key itself */
	char *image = extra && strstr(extra, "    image:") ? strdup("")
	                                                   : xasprintf("    image: %s\n", py_image);
	char *kc = extra && strstr(extra, "    kubeconfig:")
	               ? strdup("")
	               : xasprintf("    kubeconfig: %s\n", admin_kc);
	char *agent = extra && strstr(extra, "    agent:")
	                  ? strdup("")
	                  : xasprintf("    agent: %s\n", K8S_TEST_AGENT);
	char *yaml = xasprintf("%s/config-%d.yaml", tmpdir, rand());
	char *text = xasprintf("sandbox:\n"
	                       "  enabled: true\n"
	                       "  type: kubernetes\n"
	                       "  kubernetes:\n"
	                       "    namespace: %s\n"
	                       "    image_pull_policy: Never\n"
	                       "    labels: {aksandbox-test: %s}\n"
	                       "%s%s%s%s",
	                       ns, run_label, image, kc, agent, extra ? extra : "");
	free(image);
	free(kc);
	free(agent);
	FILE *fp = fopen(yaml, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	free(text);
	int rc = aks_config_load_block(plugin, yaml, &f->config, err);
	if (rc == AKS_OK)
		rc = aks_provider_open(plugin, f->config, &f->prov, err);
	unlink(yaml);
	free(yaml);
	return rc;
}

static void open_provider(fixture *f, const char *extra)
{
	aks_error *err = NULL;
	check_ok(open_provider_rc(f, extra, &err), err);
}

static int create_rc(fixture *f, aks_error **err)
{
	aks_call call;
	aks_call_init(&call, 120, &f->policy, f->principal, NULL);
	int rc = aks_provider_create(f->prov, &call, &f->sb, err);
	if (rc == AKS_OK)
		f->id = strdup(aks_sandbox_get_id(f->sb));
	return rc;
}

static void create_sandbox(fixture *f)
{
	aks_error *err = NULL;
	check_ok(create_rc(f, &err), err);
}

static fixture *new_fixture(void)
{
	fixture *f = calloc(1, sizeof(*f));
	aks_policy_init(&f->policy);
	return f;
}

static int setup(void **state)
{
	fixture *f = new_fixture();
	open_provider(f, NULL);
	create_sandbox(f);
	*state = f;
	return 0;
}

static int setup_bare(void **state)
{
	*state = new_fixture();
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	if (f->sb)
		aks_sandbox_close(f->sb);
	if (f->id && f->prov) {
		aks_error *err = NULL;
		check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	}
	free(f->id);
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	free(f);
	return 0;
}

static int run(fixture *f, const char *language, const char *code, double timeout, aks_result **res,
               aks_error **err)
{
	aks_call call;
	aks_call_init(&call, timeout, &f->policy, f->principal, NULL);
	*res = NULL;
	if (!language)
		return aks_sandbox_execute_command(f->sb, code, &call, res, err);
	return aks_sandbox_execute_code(f->sb, code, language, &call, res, err);
}

static char *run_ok(fixture *f, const char *command)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, NULL, command, 60, &r, &err), err);
	if (aks_result_get_exit_code(r) != 0)
		fail_msg("'%s' exited with %d: %s", command, aks_result_get_exit_code(r),
		         aks_result_get_stderr(r, NULL));
	char *out = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	r = NULL;
	size_t n = strlen(out);
	while (n && out[n - 1] == '\n')
		out[--n] = '\0';
	return out;
}

/* The pod name of a sandbox id <ns>/<pod>. */
static const char *pod_of(const char *id)
{
	const char *s = strchr(id, '/');
	assert_non_null(s);
	return s + 1;
}

/* Whether `line` (`len` bytes, no newline) is one of the lines of `text`. */
static bool has_line(const char *text, const char *line, size_t len)
{
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		if (n == len && memcmp(p, line, len) == 0)
			return true;
		p += n + (p[n] == '\n');
	}
	return false;
}

/* This run's pods ("pod/<name>" lines), the ones still terminating included. */
static char *run_pods(void)
{
	return kctl("-n %s get pods -l aksandbox-test=%s -o name", ns, run_label);
}

/* Fails if a pod listed in `after` was not in `before`: one was created in between. Pods
 * may be gone from `after`: the ones destroyed earlier (by this case or the ones before it)
 * stay listed while they terminate (their 5 s grace period, then the kubelet's cleanup),
 * and disappear at a moment nothing here controls. */
static void assert_no_new_pod(const char *before, const char *after)
{
	for (const char *p = after; *p;) {
		size_t n = strcspn(p, "\n");
		if (n && !has_line(before, p, n))
			fail_msg("a pod was created: %.*s (before: [%s], after: [%s])", (int)n, p,
			         before, after);
		p += n + (p[n] == '\n');
	}
}

/* kubectl get -o jsonpath of an object in the test namespace. */
static char *jsonpath(const char *kind, const char *name, const char *path)
{
	return kctl("-n %s get %s %s -o jsonpath='%s'", ns, kind, name, path);
}

/* ---- group setup -------------------------------------------------------------------------- */

static char *env_value(const char *env, const char *key)
{
	char *k = xasprintf("%s=", key);
	const char *p = strstr(env, k);
	free(k);
	if (!p)
		return NULL;
	p = strchr(p, '=') + 1;
	return strndup(p, strcspn(p, "\n"));
}

static int group_setup(void **state)
{
	(void)state;
	const char *src = getenv("AKS_TEST_SRCDIR");
	char *script = xasprintf("%s/tests/integration/k8s-setup.sh", src && *src ? src : ".");
	int st;
	char *out = sh_out(&st, "'%s' status 2>&1", script);
	if (st != 0) {
		print_error("the Kubernetes test cluster is not up (%s): %s\n", out, SETUP_HINT);
		free(out);
		free(script);
		return -1;
	}
	free(out);
	char *env = sh_out(&st, "'%s' env", script);
	free(script);
	kubectl = env_value(env, "AKS_K8S_KUBECTL");
	admin_kc = env_value(env, "AKS_K8S_KUBECONFIG");
	server = env_value(env, "AKS_K8S_SERVER");
	ca = env_value(env, "AKS_K8S_CA");
	ns = env_value(env, "AKS_K8S_NAMESPACE");
	py_image = env_value(env, "AKS_K8S_PY_IMAGE");
	alice_token = env_value(env, "AKS_K8S_ALICE_TOKEN");
	bob_token = env_value(env, "AKS_K8S_BOB_TOKEN");
	free(env);
	if (!kubectl || !admin_kc || !server || !ca || !ns || !py_image || !alice_token ||
	    !bob_token) {
		print_error("k8s-setup.sh env is incomplete\n");
		return -1;
	}
	snprintf(run_label, sizeof(run_label), "run-%d-%lld", (int)getpid(), (long long)time(NULL));
	const char *t = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/aks-k8s-test-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir))
		return -1;
	srand((unsigned)getpid());
	aks_error *err = NULL;
	if (aks_plugin_load("kubernetes", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK) {
		print_error("cannot load kubernetes.so (AKS_PLUGIN_PATH=%s): %s\n",
		            getenv("AKS_PLUGIN_PATH"), err ? aks_error_message(err) : "?");
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	int st;
	free(sh_out(&st,
	            "'%s' --kubeconfig '%s' -n %s delete pod,networkpolicy -l aksandbox-test=%s "
	            "--grace-period=0 --force >/dev/null 2>&1; rm -rf '%s'; true",
	            kubectl, admin_kc, ns, run_label, tmpdir));
	free(kubectl);
	free(admin_kc);
	free(server);
	free(ca);
	free(ns);
	free(py_image);
	free(alice_token);
	free(bob_token);
	return 0;
}

/* A kubeconfig for a token user, written to the temporary directory. */
static char *token_kubeconfig(const char *token, const char *srv, const char *cafile)
{
	char *p = xasprintf("%s/kc-%d", tmpdir, rand());
	FILE *fp = fopen(p, "w");
	assert_non_null(fp);
	fprintf(fp,
	        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
	        "clusters:\n- name: c\n  cluster:\n    server: %s\n    certificate-authority: %s\n"
	        "contexts:\n- name: t\n  context: {cluster: c, user: u}\n"
	        "users:\n- name: u\n  user: {token: %s}\n",
	        srv, cafile, token);
	fclose(fp);
	return p;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

static void t_lifecycle(void **state)
{
	fixture *f = *state;
	/* <namespace>/ak-sandbox-<12 hex> */
	char *want = xasprintf("%s/ak-sandbox-", ns);
	assert_true(strncmp(f->id, want, strlen(want)) == 0);
	assert_int_equal(strlen(f->id), strlen(want) + 12);
	free(want);
	const char *pod = pod_of(f->id);
	char *phase = jsonpath("pod", pod, "{.status.phase}");
	assert_string_equal(phase, "Running");
	free(phase);
	char *labels = jsonpath("pod", pod, "{.metadata.labels}");
	assert_non_null(strstr(labels, "\"agentkernel.io/sandbox-name\":\""));
	assert_non_null(strstr(labels, "\"app.kubernetes.io/managed-by\":\"agent-kernel\""));
	assert_non_null(strstr(labels, run_label));
	free(labels);
	/* the hardened container security context, as the API server stored it */
	char *sc = jsonpath("pod", pod, "{.spec.containers[0].securityContext}");
	assert_non_null(strstr(sc, "\"allowPrivilegeEscalation\":false"));
	assert_non_null(strstr(sc, "\"drop\":[\"ALL\"]"));
	assert_non_null(strstr(sc, "\"seccompProfile\":{\"type\":\"RuntimeDefault\"}"));
	free(sc);
	/* no activeDeadlineSeconds by default (section 11 item 10) */
	char *ads = jsonpath("pod", pod, "{.spec.activeDeadlineSeconds}");
	assert_string_equal(ads, "");
	free(ads);
	/* sleep infinity is PID 1 */
	char *pid1 = run_ok(f, "tr '\\0' ' ' < /proc/1/cmdline");
	assert_string_equal(pid1, "sleep infinity ");
	free(pid1);

	/* attach to it, then destroy: the pod is deleted, destroy is idempotent,
	 * and attach now says gone */
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_sandbox *again = NULL;
	aks_error *err = NULL;
	check_ok(aks_provider_attach(f->prov, f->id, &call, &again, &err), err);
	assert_string_equal(aks_sandbox_get_id(again), f->id);
	aks_sandbox_close(again);
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	int st;
	char *out = sh_out(&st,
	                   "'%s' --kubeconfig '%s' -n %s get pod %s "
	                   "-o jsonpath='{.metadata.deletionTimestamp}' 2>&1",
	                   kubectl, admin_kc, ns, pod);
	assert_true(st != 0 || *out); /* gone, or being deleted */
	free(out);
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	check_ok(aks_provider_destroy(f->prov, "unknown-sandbox-id", &call, &err), err);
	check_error(aks_provider_attach(f->prov, f->id, &call, &again, &err), &err, AKS_EGONE,
	            f->id, NULL);
	check_error(aks_provider_attach(f->prov, "nonexistent-id", &call, &again, &err), &err,
	            AKS_EGONE, NULL);
}

/* A pod deleted behind our back is gone on attach (the core then recreates). */
static void t_gone(void **state)
{
	fixture *f = *state;
	free(kctl("-n %s delete pod %s --grace-period=0 --force", ns, pod_of(f->id)));
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_sandbox *again = NULL;
	aks_error *err = NULL;
	check_error(aks_provider_attach(f->prov, f->id, &call, &again, &err), &err, AKS_EGONE,
	            "no longer exists", NULL);
}

/* ---- executions ---------------------------------------------------------------------------------
 */

static void t_exec(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "import sys; print('out'); print('err', file=sys.stderr)", 60, &r,
	             &err),
	         err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	assert_string_equal(aks_result_get_stdout(r, NULL), "out\n");
	assert_string_equal(aks_result_get_stderr(r, NULL), "err\n");
	aks_result_free(r);
	r = NULL;
	check_ok(run(f, NULL, "echo hi; exit 3", 60, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 3);
	assert_string_equal(aks_result_get_stdout(r, NULL), "hi\n");
	aks_result_free(r);
	r = NULL;
	check_ok(run(f, "python", "raise SystemExit(42)", 60, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 42);
	aks_result_free(r);
	r = NULL;
	/* runs in /workspace */
	char *pwd = run_ok(f, "pwd");
	assert_string_equal(pwd, "/workspace");
	free(pwd);
	/* output of any size: 3 MB through, counted */
	check_ok(run(f, NULL, "head -c 3000000 /dev/zero | tr '\\0' x; echo", 60, &r, &err), err);
	assert_int_equal(aks_result_get_stream_total(r, AKS_STREAM_STDOUT), 3000001);
	aks_result_free(r);
	r = NULL;
	/* a program longer than fits a URL goes through stdin */
	size_t big = 100000;
	char *code = malloc(big + 64);
	strcpy(code, "x = '");
	memset(code + 5, 'a', big);
	strcpy(code + 5 + big, "'\nprint(len(x))\n");
	check_ok(run(f, "python", code, 60, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "100000\n");
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	r = NULL;
	free(code);
	/* and every size in between, by URL or by stdin: programs of 1.6 to 16 KB (3.2 to 32 KB
	 * percent-encoded) were once sent in the URL, which the API server answered with a 400.
	 * Lines of "x=N" are both Python and shell. */
	static const size_t lines[] = {100, 200, 250, 400, 1000, 4000};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		for (int shell = 0; shell < 2; shell++) {
			code = malloc(4 * lines[i] + 64);
			char *p = code;
			for (size_t k = 0; k < lines[i]; k++)
				p += sprintf(p, "x=%zu\n", k % 10);
			sprintf(p, shell ? "echo ran %zu lines\n" : "print('ran %zu lines')\n",
			        lines[i]);
			check_ok(run(f, shell ? NULL : "python", code, 60, &r, &err), err);
			char want[64];
			snprintf(want, sizeof(want), "ran %zu lines\n", lines[i]);
			assert_string_equal(aks_result_get_stdout(r, NULL), want);
			aks_result_free(r);
			r = NULL;
			free(code);
		}
	}
	/* an undeclared language */
	check_error(run(f, "ruby", "puts 1", 60, &r, &err), &err, AKS_ECAPABILITY, NULL);
	aks_result_free(r);
	r = NULL;
}

/* A timeout kills the whole process tree, without pkill in the image. */
static void t_timeout(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	int rc = run(f, NULL, "sleep 301 & sh -c 'sleep 302' & sleep 303", 2, &r, &err);
	check_error(rc, &err, AKS_ETIMEOUT, "exceeded timeout", NULL);
	assert_true(aks_result_timed_out(r));
	aks_result_free(r);
	r = NULL;
	char *left = run_ok(f, "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline "
	                       "2>/dev/null); case \"$c\" in 'sleep 30'*) echo \"$c\";; esac; "
	                       "done; true");
	assert_string_equal(left, "");
	free(left);
}

/* ---- files
 * ---------------------------------------------------------------------------------------- */

static void t_files(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	size_t len = 3 * 1024 * 1024 + 17;
	unsigned char *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (unsigned char)(i * 7 + i / 251);
	check_ok(aks_sandbox_upload_file(f->sb, "deep/er/blob.bin", data, len, &call, &err), err);
	char *sz = run_ok(f, "wc -c < deep/er/blob.bin");
	assert_int_equal(strtoul(sz, NULL, 10), len);
	free(sz);
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, "/deep/er/blob.bin", &call, &r, &err), err);
	size_t got = 0;
	const void *back = aks_result_get_file(r, 0, NULL, NULL, &got);
	assert_int_equal(got, len);
	assert_memory_equal(back, data, len);
	aks_result_free(r);
	r = NULL;
	free(data);
	/* empty file */
	check_ok(aks_sandbox_upload_file(f->sb, "empty", "", 0, &call, &err), err);
	check_ok(aks_sandbox_download_file(f->sb, "empty", &call, &r, &err), err);
	aks_result_get_file(r, 0, NULL, NULL, &got);
	assert_int_equal(got, 0);
	aks_result_free(r);
	r = NULL;
	/* missing file, directory: a clear not-found (section 11 item 12) */
	check_error(aks_sandbox_download_file(f->sb, "nope.txt", &call, &r, &err), &err,
	            AKS_ENOTFOUND, "file 'nope.txt' not found", NULL);
	aks_result_free(r);
	r = NULL;
	check_error(aks_sandbox_download_file(f->sb, "deep", &call, &r, &err), &err, AKS_ENOTFOUND,
	            NULL);
	aks_result_free(r);
	r = NULL;
	/* escapes */
	check_error(aks_sandbox_upload_file(f->sb, "../etc/x", "x", 1, &call, &err), &err,
	            AKS_EPOLICY, "escapes", NULL);
	check_error(aks_sandbox_download_file(f->sb, "a/../../etc/passwd", &call, &r, &err), &err,
	            AKS_EPOLICY, NULL);
	aks_result_free(r);
	r = NULL;
}

/* ---- policy
 * ------------------------------------------------------------------------------------------ */

static void t_policy_pod(void **state)
{
	fixture *f = *state;
	const char *rw[] = {"/workspace", NULL};
	f->policy.cpu = 0.5;
	f->policy.memory_mb = 128;
	f->policy.fs_allow_write = rw;
	open_provider(f, NULL);
	create_sandbox(f);
	const char *pod = pod_of(f->id);
	char *res = jsonpath("pod", pod, "{.spec.containers[0].resources}");
	assert_string_equal(res, "{\"limits\":{\"cpu\":\"500m\",\"memory\":\"128Mi\"},"
	                         "\"requests\":{\"cpu\":\"500m\",\"memory\":\"128Mi\"}}");
	free(res);
	char *ro =
	    jsonpath("pod", pod, "{.spec.containers[0].securityContext.readOnlyRootFilesystem}");
	assert_string_equal(ro, "true");
	free(ro);
	char *vol = jsonpath("pod", pod, "{.spec.volumes[?(@.name==\"workspace\")].emptyDir}");
	assert_string_equal(vol, "{}");
	free(vol);
	char *qos = jsonpath("pod", pod, "{.status.qosClass}");
	assert_string_equal(qos, "Guaranteed");
	free(qos);
	/* the root is read-only, the workspace writable */
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, NULL, "touch /rootfile", 60, &r, &err), err);
	assert_int_not_equal(aks_result_get_exit_code(r), 0);
	assert_non_null(strstr(aks_result_get_stderr(r, NULL), "Read-only file system"));
	aks_result_free(r);
	r = NULL;
	free(run_ok(f, "touch /workspace/ok && ls /workspace/ok"));
}

static void t_max_lifetime(void **state)
{
	fixture *f = *state;
	open_provider(f, "    max_lifetime: 7200\n");
	create_sandbox(f);
	char *ads = jsonpath("pod", pod_of(f->id), "{.spec.activeDeadlineSeconds}");
	assert_string_equal(ads, "7200");
	free(ads);
}

static void t_netpol(void **state)
{
	fixture *f = *state;
	open_provider(f, "    network_policy: true\n");
	/* the instance reports egress enforcement */
	const aks_capabilities *caps = aks_provider_get_capabilities(f->prov);
	assert_true(caps->policy_network);
	f->policy.network_egress = AKS_EGRESS_DENY;
	create_sandbox(f);
	const char *pod = pod_of(f->id);
	char *spec = jsonpath("networkpolicy", pod, "{.spec}");
	char *want = xasprintf("{\"podSelector\":{\"matchLabels\":{\"agentkernel.io/sandbox-name\":"
	                       "\"%s\"}},\"policyTypes\":[\"Egress\"]}",
	                       pod);
	/* egress [] is stored as absent: no egress rule at all */
	assert_string_equal(spec, want);
	free(spec);
	free(want);
	char *labels = jsonpath("networkpolicy", pod, "{.metadata.labels}");
	assert_string_equal(labels, "{\"agentkernel.io/sandbox\":\"true\","
	                            "\"app.kubernetes.io/managed-by\":\"agent-kernel\"}");
	free(labels);
	/* destroy deletes it */
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	int st;
	free(sh_out(&st, "'%s' --kubeconfig '%s' -n %s get networkpolicy %s >/dev/null 2>&1",
	            kubectl, admin_kc, ns, pod));
	assert_int_not_equal(st, 0);
	free(f->id);
	f->id = NULL;

	/* an allowlist: with the agent its egress proxy is the pod's way out, and the
	 * NetworkPolicy denies all egress (tests/integration/egress-kubernetes.test drives the
	 * proxy); without it, one rule over the CIDRs */
	const char *allow[] = {"10.1.2.3/16", "192.0.2.7", NULL};
	f->policy.network_egress = AKS_EGRESS_ALLOWLIST;
	f->policy.network_allow = allow;
	f->policy.strict = true;
	assert_int_equal(caps->egress_proxy, WITH_AGENT);
	create_sandbox(f);
	pod = pod_of(f->id);
	char *egress = jsonpath("networkpolicy", pod, "{.spec.egress}");
	assert_string_equal(egress, WITH_AGENT
	                                ? ""
	                                : "[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.1.0.0/16\"}},"
	                                  "{\"ipBlock\":{\"cidr\":\"192.0.2.7/32\"}}]}]");
	free(egress);
	if (WITH_AGENT)
		return; /* names are the proxy's to allow, not refused */

	/* domains under strict: refused before anything is created */
	const char *dom[] = {"pypi.org", "10.0.0.0/8", NULL};
	f->policy.network_allow = dom;
	aks_sandbox *sb2 = NULL;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	char *before = run_pods();
	check_error(aks_provider_create(f->prov, &call, &sb2, &err), &err, AKS_EPOLICY,
	            "NetworkPolicy cannot enforce domain-name egress entries ['pypi.org']", NULL);
	char *after = run_pods();
	assert_no_new_pod(before, after);
	free(before);
	free(after);
}

/* ---- identity
 * ------------------------------------------------------------------------------------------ */

static aks_principal user_principal(const char *subject, const char *const *groups,
                                    const char *const *creds)
{
	aks_principal p = {AKS_PRINCIPAL_VERSION,
	                   sizeof(aks_principal),
	                   AKS_IDENTITY_USER,
	                   subject,
	                   groups,
	                   creds};
	return p;
}

/* The admin impersonates: bob (no rights) gets the API server's 403, alice runs. */
static void t_impersonation(void **state)
{
	fixture *f = *state;
	open_provider(f, NULL);
	aks_principal bob = user_principal("bob", NULL, NULL);
	f->principal = &bob;
	aks_error *err = NULL;
	check_error(create_rc(f, &err), &err, AKS_EPROVISION, "forbidden (403)",
	            "User \"bob\" cannot create resource \"pods\"", "needs RBAC 'create' on 'pods'",
	            NULL);
	const char *creds[] = {"user", "alice", NULL};
	aks_principal alice = user_principal("someone-else", NULL, creds);
	f->principal = &alice;
	create_sandbox(f);
	char *out = run_ok(f, "echo as-alice");
	assert_string_equal(out, "as-alice");
	free(out);
	/* no user at all */
	aks_principal none = user_principal(NULL, NULL, NULL);
	f->principal = &none;
	aks_sandbox *sb2 = NULL;
	aks_call call;
	aks_call_init(&call, 60, &f->policy, &none, NULL);
	check_error(aks_provider_create(f->prov, &call, &sb2, &err), &err, AKS_EPOLICY,
	            "carries no user identity", NULL);
	f->principal = NULL; /* teardown destroys under the configured identity */
}

/* Every group is its own Impersonate-Group header: bob reads pods only
 * through aks-g1 or aks-g2, so a second group that grants it proves the
 * second header reached the server. */
static void t_groups(void **state)
{
	fixture *f = *state; /* a sandbox made by the admin */
	aks_call call;
	aks_sandbox *sb2 = NULL;
	aks_error *err = NULL;
	aks_principal bob = user_principal("bob", NULL, NULL);
	aks_call_init(&call, 30, &f->policy, &bob, NULL);
	check_error(aks_provider_attach(f->prov, f->id, &call, &sb2, &err), &err, AKS_EPROVISION,
	            "User \"bob\" cannot get resource \"pods\"", NULL);
	const char *g2_second[] = {"no-such-group", "aks-g2", NULL};
	bob = user_principal("bob", g2_second, NULL);
	check_ok(aks_provider_attach(f->prov, f->id, &call, &sb2, &err), err);
	aks_sandbox_close(sb2);
	const char *creds[] = {"user", "bob", "groups", "x-group, aks-g1", NULL};
	bob = user_principal("whoever", NULL, creds);
	check_ok(aks_provider_attach(f->prov, f->id, &call, &sb2, &err), err);
	/* but bob cannot exec: the handshake's 403, explained */
	aks_result *r = NULL;
	aks_call_init(&call, 30, &f->policy, &bob, NULL);
	check_error(aks_sandbox_execute_command(sb2, "true", &call, &r, &err), &err, AKS_EPROVISION,
	            "pods/exec", NULL);
	aks_result_free(r);
	r = NULL;
	aks_sandbox_close(sb2);
}

/* ---- connection errors
 * --------------------------------------------------------------------------------- */

static void t_connection_errors(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	/* unreachable */
	char *kc = token_kubeconfig(alice_token, "https://127.0.0.1:1", ca);
	char *extra = xasprintf("    kubeconfig: %s\n", kc);
	open_provider(f, extra);
	check_error(create_rc(f, &err), &err, AKS_EPROVISION,
	            "cannot reach the API server at "
	            "https://127.0.0.1:1",
	            NULL);
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	f->prov = NULL;
	f->config = NULL;
	free(extra);
	free(kc);
	/* a certificate we cannot verify: the system CAs instead of the cluster's */
	kc = token_kubeconfig(alice_token, server, "/etc/ssl/certs/ca-certificates.crt");
	extra = xasprintf("    kubeconfig: %s\n", kc);
	open_provider(f, extra);
	check_error(create_rc(f, &err), &err, AKS_EPROVISION, "cannot be verified", NULL);
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	f->prov = NULL;
	f->config = NULL;
	free(extra);
	free(kc);
	/* 401 */
	kc = token_kubeconfig("not-a-token", server, ca);
	extra = xasprintf("    kubeconfig: %s\n", kc);
	open_provider(f, extra);
	check_error(create_rc(f, &err), &err, AKS_EPROVISION, "401", NULL);
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	f->prov = NULL;
	f->config = NULL;
	free(extra);
	free(kc);
	/* a token user with rights: works end to end (bearer auth on REST and exec) */
	kc = token_kubeconfig(alice_token, server, ca);
	extra = xasprintf("    kubeconfig: %s\n", kc);
	open_provider(f, extra);
	create_sandbox(f);
	char *out = run_ok(f, "echo token-ok");
	assert_string_equal(out, "token-ok");
	free(out);
	free(extra);
	free(kc);
	/* a missing kubeconfig is a config error at open */
	fixture *g = new_fixture();
	check_error(open_provider_rc(g, "    kubeconfig: /nonexistent/kc\n", &err), &err,
	            AKS_ECONFIG, "/nonexistent/kc", NULL);
	aks_config_free(g->config);
	free(g);
}

/* A pod that cannot start: the running wait's message, and nothing left behind. */
static void t_create_timeout(void **state)
{
	fixture *f = *state;
	/* (15 s: a kubelet on a busy machine took more than 6 to say why the pod waits) */
	open_provider(f, "    image: aksandbox-no-such-image:1\n    create_timeout: 15\n");
	aks_error *err = NULL;
	check_error(create_rc(f, &err), &err, AKS_EPROVISION, "did not reach Running within 15s",
	            "ErrImageNeverPull", NULL);
	/* the failed pod was deleted (gone or terminating) */
	char *left =
	    kctl("-n %s get pods -l aksandbox-test=%s -o "
	         "jsonpath='{range .items[?(@.spec.containers[0].image==\"aksandbox-no-such-"
	         "image:1\")]}{.metadata.name}:{.metadata.deletionTimestamp}{\"\\n\"}{end}'",
	         ns, run_label);
	for (char *l = strtok(left, "\n"); l; l = strtok(NULL, "\n"))
		if (l[strlen(l) - 1] == ':')
			fail_msg("pod %s was left running", l);
	free(left);
}

/* Through the tools: a pod deleted behind our back is recreated, with the notice. */
static void t_self_heal(void **state)
{
	(void)state;
	char *yaml = xasprintf("%s/heal.yaml", tmpdir);
	FILE *fp = fopen(yaml, "w");
	assert_non_null(fp);
	fprintf(fp,
	        "sandbox:\n  enabled: true\n  type: kubernetes\n  scope: per_session\n"
	        "  kubernetes:\n    kubeconfig: %s\n    namespace: %s\n    image: %s\n"
	        "    image_pull_policy: Never\n    labels: {aksandbox-test: %s, aksandbox-case: "
	        "heal}\n    agent: %s\n",
	        admin_kc, ns, py_image, run_label, K8S_TEST_AGENT);
	fclose(fp);
	char *state_dir = xasprintf("%s/state", tmpdir);
	aks_settings *settings = NULL;
	aks_runtime *rt = NULL;
	aks_error *err = NULL;
	check_ok(aks_settings_load(yaml, NULL, &settings, &err), err);
	check_ok(aks_runtime_open(settings, state_dir, &rt, &err), err);
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-heal", "tester");
	char *out = NULL;
	check_ok(aks_runtime_call_tool(rt, "run_command", "{\"command\": \"echo 1 > f; cat f\"}",
	                               &ctx, &out, &err),
	         err);
	assert_non_null(strstr(out, "\"exit_code\": 0"));
	free(out);
	char *pods =
	    kctl("-n %s get pods -l aksandbox-test=%s,aksandbox-case=heal -o name", ns, run_label);
	assert_true(strncmp(pods, "pod/ak-sandbox-", 15) == 0 && !strchr(pods, '\n'));
	free(kctl("-n %s delete %s --grace-period=0 --force", ns, pods));
	check_ok(aks_runtime_call_tool(rt, "run_command", "{\"command\": \"cat f; echo new\"}",
	                               &ctx, &out, &err),
	         err);
	if (!strstr(out, "recreated"))
		fail_msg("no recreated notice: %.600s", out);
	assert_non_null(strstr(out, "new"));
	free(out);
	char *now = kctl("-n %s get pods -l aksandbox-test=%s,aksandbox-case=heal "
	                 "--field-selector=status.phase=Running -o name",
	                 ns, run_label);
	assert_true(strncmp(now, "pod/ak-sandbox-", 15) == 0);
	assert_string_not_equal(now, pods);
	free(now);
	free(pods);
	aks_runtime_close(rt);
	aks_settings_free(settings);
	free(state_dir);
	free(yaml);
}

/* environment: attached: bind to an existing pod, never created or deleted by us. */
static void t_attach_to(void **state)
{
	fixture *f = *state;
	char *name = xasprintf("aks-ext-%d", rand() % 100000);
	free(kctl("-n %s run %s --image=%s --image-pull-policy=Never --restart=Never "
	          "--labels=aksandbox-test=%s --command -- sleep 3600",
	          ns, name, py_image, run_label));
	free(kctl("-n %s wait --for=condition=Ready pod/%s --timeout=60s", ns, name));
	char *target = xasprintf("%s/%s", ns, name);
	char *extra = xasprintf("    attach_to: %s\n", target);
	open_provider(f, extra);
	create_sandbox(f);
	assert_string_equal(f->id, target);
	char *out = run_ok(f, "echo attached; pwd");
	assert_string_equal(out, "attached\n/workspace");
	free(out);
	/* destroy leaves it alone */
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	char *phase = jsonpath("pod", name, "{.status.phase}");
	assert_string_equal(phase, "Running");
	free(phase);
	free(f->id);
	f->id = NULL;
	free(kctl("-n %s delete pod %s --grace-period=0 --force", ns, name));
	free(extra);
	free(target);
	free(name);
}

/* ---- the agent ---------------------------------------------------------------------------
 * Checks inside the pod go through kubectl exec: a separate per-call exec, not the agent. */

/* kubectl exec in a pod: its stdout (trailing newlines cut); fails the test on error. */
static char *pod_sh(const char *pod, const char *script)
{
	char *q = xasprintf("%s", script);
	/* single quotes for the host's shell */
	size_t n = 0;
	for (const char *c = q; *c; c++)
		n += *c == '\'' ? 4 : 1;
	char *esc = malloc(n + 1), *o = esc;
	for (const char *c = q; *c; c++) {
		if (*c == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *c;
		}
	}
	*o = '\0';
	char *out = kctl("-n %s exec %s -- /bin/sh -c '%s'", ns, pod, esc);
	free(esc);
	free(q);
	return out;
}

/* The pids of the agents in a pod, space-separated, "" for none: live processes whose comm
 * is aksandbox-agent (the file name's first 15 bytes) but not their parent's (the agent's
 * run supervisors are forked copies of it). Zombies do not count: PID 1, `sleep`, reaps
 * nothing. */
static char *agent_pids(const char *pod)
{
	return pod_sh(pod,
	              "for p in /proc/[0-9]*; do c=$(cat $p/comm 2>/dev/null); "
	              "[ \"$c\" = aksandbox-agent ] || continue; "
	              "[ \"$(cut -d' ' -f3 $p/stat 2>/dev/null)\" = Z ] && continue; "
	              "pp=$(cut -d' ' -f4 $p/stat 2>/dev/null); "
	              /* an exec's process (a relay to the resident agent) has no parent in the
	               * pod; a supervisor's parent is the agent */
	              "[ \"$pp\" = 0 ] && continue; "
	              "[ \"$(cat /proc/$pp/comm 2>/dev/null)\" = aksandbox-agent ] && continue; "
	              "printf '%s ' ${p#/proc/}; done; true");
}

static size_t words(const char *s)
{
	size_t n = 0;
	for (bool in = false; *s; s++) {
		bool sp = *s == ' ';
		if (!sp && !in)
			n++;
		in = !sp;
	}
	return n;
}

#if defined(__SANITIZE_ADDRESS__)
/* the ASan runtime's (sanitizer/allocator_interface.h, not installed here) */
size_t __sanitizer_get_current_allocated_bytes(void);
/* Under ASan freed memory sits in its quarantine (256 MiB by default), so VmHWM counts
 * every frame buffer ever freed; the live heap is what shows retention there. */
#define MEM_WHAT "live heap (ASan)"
static long mem_kb(void)
{
	return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
}
#else
#define MEM_WHAT "VmHWM"
static long vm_hwm_kb(void);
static long mem_kb(void)
{
	return vm_hwm_kb();
}
#endif

__attribute__((unused)) static long vm_hwm_kb(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	assert_non_null(fp);
	char line[256];
	long kb = -1;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(fp);
	return kb;
}

/* Python keeps its state between calls through the agent, and not without it. */
static void t_stateful(void **state)
{
	fixture *f = *state;
	const aks_capabilities *caps = aks_provider_get_capabilities(f->prov);
	assert_int_equal(caps->stateful, WITH_AGENT);
	const char *d = aks_provider_get_description(f->prov);
	if (WITH_AGENT)
		assert_non_null(strstr(d, "through aksandbox-agent"));
	else
		assert_non_null(strstr(d, "one exec per call (agent disabled"));
	/* honest about process limits: none of ours, the kubelet's if the cluster sets one */
	if (!strstr(d, "; pods without a task limit of ours") || !strstr(d, "podPidsLimit"))
		fail_msg("description: %s", d);
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 60, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	check_ok(run(f, "python", "print(x + 1)", 60, &r, &err), err);
	if (WITH_AGENT) {
		assert_int_equal(aks_result_get_exit_code(r), 0);
		assert_string_equal(aks_result_get_stdout(r, NULL), "42\n");
	} else {
		assert_int_equal(aks_result_get_exit_code(r), 1);
		assert_non_null(strstr(aks_result_get_stderr(r, NULL), "NameError"));
	}
	assert_null(aks_result_get_notice(r));
	aks_result_free(r);
	/* commands stay programs of their own either way */
	char *out = run_ok(f, "echo ${x:-unset}");
	assert_string_equal(out, "unset");
	free(out);
	/* the agent runs in the pod (or not at all), placed in its emptyDir */
	const char *pod = pod_of(f->id);
	char *pids = agent_pids(pod);
	assert_int_equal(words(pids), WITH_AGENT ? 1 : 0);
	free(pids);
	char *mnt = jsonpath("pod", pod, "{.spec.volumes[?(@.name==\"aksandbox\")].emptyDir}");
	assert_string_equal(mnt, WITH_AGENT ? "{}" : "");
	free(mnt);
	if (WITH_AGENT) {
		char *ls = pod_sh(pod, "ls /.aksandbox");
		assert_true(strncmp(ls, "aksandbox-agent-", 16) == 0 && !strchr(ls, '\n'));
		free(ls);
	}
}

/* Closing the handle closes only its stream: the agent stays resident in the pod, with what
 * it started and its Python state, and the handle's relay is gone; a new handle (as another
 * host process would) reaches the same agent. */
static void t_agent_close(void **state)
{
	fixture *f = *state;
	const char *pod = pod_of(f->id);
	free(run_ok(f, "nohup sleep 621 >/dev/null 2>&1 & echo started"));
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 60, &r, &err), err);
	aks_result_free(r);
	char *pids = agent_pids(pod);
	assert_int_equal(words(pids), 1);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	char *relays = NULL;
	for (int i = 0; i < 50; i++) {
		free(relays);
		relays = pod_sh(pod, "for p in /proc/[0-9]*; do c=$(cat $p/comm 2>/dev/null); "
		                     "[ \"$c\" = aksandbox-agent ] || continue; "
		                     "[ \"$(cut -d' ' -f4 $p/stat)\" = 0 ] && printf '%s ' "
		                     "${p#/proc/}; done; true");
		if (!*relays)
			break;
		usleep(200 * 1000);
	}
	if (*relays)
		fail_msg("the handle's relay is still running in the pod after close: %s", relays);
	free(relays);
	char *sleeps = pod_sh(pod, "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline "
	                           "2>/dev/null); case \"$c\" in 'sleep 621'*) echo \"$c\";; "
	                           "esac; done; true");
	assert_string_equal(sleeps, "sleep 621 ");
	free(sleeps);
	char *again = agent_pids(pod);
	assert_string_equal(again, pids);
	free(again);
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	check_ok(aks_provider_attach(f->prov, f->id, &call, &f->sb, &err), err);
	check_ok(run(f, "python", "print(x + 1)", 60, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "42\n");
	assert_null(aks_result_get_notice(r));
	aks_result_free(r);
	again = agent_pids(pod);
	assert_string_equal(again, pids);
	free(again);
	free(pids);
}

/* A timeout kills a double-forked background process too (the agent is a subreaper). */
static void t_agent_timeout_tree(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	int rc = run(f, NULL,
	             "(setsid sh -c 'sleep 631' </dev/null >/dev/null 2>&1 &); "
	             "(sh -c 'sleep 632 &' >/dev/null 2>&1); echo forked; sleep 633",
	             3, &r, &err);
	check_error(rc, &err, AKS_ETIMEOUT, "kubernetes exec exceeded timeout 3s", NULL);
	assert_true(aks_result_timed_out(r));
	assert_int_equal(aks_result_get_exit_code(r), -1);
	assert_string_equal(aks_result_get_stdout(r, NULL), "forked\n");
	aks_result_free(r);
	char *left = pod_sh(pod_of(f->id),
	                    "for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
	                    "case \"$c\" in 'sleep 63'*) echo \"$c\";; esac; done; true");
	assert_string_equal(left, "");
	free(left);
	/* and the agent is still there for the next call */
	char *out = run_ok(f, "echo alive");
	assert_string_equal(out, "alive");
	free(out);
}

/* A large output streams through in bounded memory: kept up to the cap, counted whole. */
static void t_agent_big_output(void **state)
{
	fixture *f = *state;
	const uint64_t size = 200ull << 20; /* 200 MiB */
	long before = mem_kb();
	aks_result *r = NULL;
	aks_error *err = NULL;
	char *cmd = xasprintf("head -c %llu /dev/zero", (unsigned long long)size);
	check_ok(run(f, NULL, cmd, 300, &r, &err), err);
	free(cmd);
	long after = mem_kb();
	assert_int_equal(aks_result_get_exit_code(r), 0);
	assert_true(aks_result_get_stream_total(r, AKS_STREAM_STDOUT) == size);
	assert_true(aks_result_is_truncated(r, AKS_STREAM_STDOUT));
	size_t kept = 0;
	aks_result_get_stdout(r, &kept);
	assert_true(kept < size / 8);
	aks_result_free(r);
	print_message("# 200 MiB of output: %s %ld kB -> %ld kB (+%ld kB)\n", MEM_WHAT, before,
	              after, after - before);
	/* far below the output's size */
	assert_true(after - before < 48 * 1024);
}

/* A file write is verified by its hash (agent side) and lands whole (checked in the pod). */
static void t_agent_file_hash(void **state)
{
	fixture *f = *state;
	size_t len = 5 * 1024 * 1024 + 3;
	unsigned char *data = malloc(len);
	int fd = open("/dev/urandom", O_RDONLY);
	assert_true(fd >= 0);
	for (size_t got = 0; got < len;) {
		ssize_t n = read(fd, data + got, len - got);
		assert_true(n > 0);
		got += (size_t)n;
	}
	close(fd);
	char *local = xasprintf("%s/hash.bin", tmpdir);
	FILE *fp = fopen(local, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	fclose(fp);
	int st;
	char *want = sh_out(&st, "sha256sum < '%s' | cut -d' ' -f1", local);
	assert_int_equal(st, 0);
	aks_call call;
	aks_call_init(&call, 120, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "sub/dir/random.bin", data, len, &call, &err), err);
	char *got =
	    pod_sh(pod_of(f->id), "sha256sum < /workspace/sub/dir/random.bin | cut -d' ' -f1");
	assert_string_equal(got, want);
	free(got);
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, "sub/dir/random.bin", &call, &r, &err), err);
	size_t back_len = 0;
	const unsigned char *back = aks_result_get_file(r, 0, NULL, NULL, &back_len);
	assert_int_equal(back_len, len);
	assert_memory_equal(back, data, len);
	aks_result_free(r);
	free(want);
	free(local);
	free(data);
}

/* Runs first (shell) in the pod, then SIGKILLs its one agent and waits until it is gone.
 * Returns the pid it killed. */
static char *kill_agent(const char *pod, const char *first)
{
	char *pids = agent_pids(pod);
	assert_int_equal(words(pids), 1);
	char *kill_cmd = xasprintf("%skill -9 %s", first, pids);
	free(pod_sh(pod, kill_cmd));
	free(kill_cmd);
	char *now = NULL;
	for (int i = 0; i < 50; i++) {
		free(now);
		now = agent_pids(pod);
		if (!*now)
			break;
		usleep(100 * 1000);
	}
	assert_string_equal(now, "");
	free(now);
	return pids;
}

/* A killed agent, its file removed, is noticed at the next call: re-placed, restarted,
 * and the result says that the Python state was lost. */
static void t_agent_restart(void **state)
{
	fixture *f = *state;
	const char *pod = pod_of(f->id);
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 60, &r, &err), err);
	aks_result_free(r);
	char *pids = kill_agent(pod, "rm -f /.aksandbox/aksandbox-agent-*; ");
	sleep(2); /* an idle agent is pinged first: the kill need not have reached the stream */
	check_ok(run(f, "python", "print(x + 1)", 60, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 1);
	assert_non_null(strstr(aks_result_get_stderr(r, NULL), "NameError"));
	const char *notice = aks_result_get_notice(r);
	if (!notice || !strstr(notice, "restarted") ||
	    !strstr(notice, "state from earlier calls was lost"))
		fail_msg("no restart notice: %s", notice ? notice : "(none)");
	aks_result_free(r);
	char *now = agent_pids(pod);
	assert_int_equal(words(now), 1);
	assert_string_not_equal(now, pids);
	free(now);
	free(pids);
	char *ls = pod_sh(pod, "ls /.aksandbox");
	assert_true(strncmp(ls, "aksandbox-agent-", 16) == 0);
	free(ls);
	/* stateful again, with no further notice */
	check_ok(run(f, "python", "y = 1", 60, &r, &err), err);
	aks_result_free(r);
	check_ok(run(f, "python", "print(y + 1)", 60, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "2\n");
	assert_null(aks_result_get_notice(r));
	aks_result_free(r);
}

/* A handle that never reached the killed agent (as the next host process) hears from the
 * new one that the Python state was lost, through the note in the pod's emptyDir; the
 * handle after it hears nothing. */
static void t_agent_lost_across_handles(void **state)
{
	fixture *f = *state;
	const char *pod = pod_of(f->id);
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 60, &r, &err), err);
	aks_result_free(r);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	free(kill_agent(pod, ""));
	for (int handle = 0; handle < 2; handle++) {
		aks_call call;
		aks_call_init(&call, 60, &f->policy, NULL, NULL);
		check_ok(aks_provider_attach(f->prov, f->id, &call, &f->sb, &err), err);
		check_ok(run(f, "python", "print('x' in globals())", 60, &r, &err), err);
		assert_string_equal(aks_result_get_stdout(r, NULL), "False\n");
		const char *notice = aks_result_get_notice(r);
		if (handle == 0 &&
		    (!notice || !strstr(notice, "state from earlier calls was lost")))
			fail_msg("no notice of the lost state: %s", notice ? notice : "(none)");
		if (handle == 1 && notice)
			fail_msg("told twice: %s", notice);
		aks_result_free(r);
		aks_sandbox_close(f->sb);
		f->sb = NULL;
	}
}

/* Another user's program holds the resident agent's name before the first call (as code
 * with CAP_SETUID could: an attached pod of the cluster's defaults, root with its
 * capabilities): the relay refuses to serve it and says why on stderr, and that reason,
 * from inside the pod, is what the refused call says. */
static void t_agent_relay_refused(void **state)
{
	fixture *f = *state;
	char *pod = xasprintf("aks-held-%d", rand() % 100000);
	free(kctl("-n %s run %s --image=%s --image-pull-policy=Never --restart=Never "
	          "--labels=aksandbox-test=%s -- sleep 3600",
	          ns, pod, py_image, run_label));
	free(kctl("-n %s wait --for=condition=Ready pod/%s --timeout=60s", ns, pod));
	/* The providers' name: 16 hex digits of the agent's SHA-256, '.', the id ('/' as '_'). */
	int st;
	char *sha = sh_out(&st, "sha256sum '%s' | cut -c1-16", K8S_TEST_AGENT);
	assert_int_equal(st, 0);
	sha[strcspn(sha, "\n")] = '\0';
	char *plant = xasprintf(
	    "nohup python3 -c \"import os, socket, time\n"
	    "s = socket.socket(socket.AF_UNIX)\n"
	    "s.bind('\\0aksandbox-agent/%s.%s_%s')\n"
	    "os.setgid(65534); os.setuid(65534)\n"
	    "s.listen(1); open('/tmp/planted', 'w').close(); time.sleep(600)\" >/dev/null "
	    "2>/tmp/plant.err & "
	    "for i in $(seq 50); do [ -e /tmp/planted ] && break; sleep 0.1; done; "
	    "cat /tmp/plant.err; ls /tmp/planted",
	    sha, ns, pod);
	char *planted = pod_sh(pod, plant);
	assert_non_null(strstr(planted, "/tmp/planted"));
	free(planted);
	free(plant);
	free(sha);
	char *extra = xasprintf("    attach_to: %s/%s\n", ns, pod);
	open_provider(f, extra);
	free(extra);
	create_sandbox(f);
	aks_result *r = NULL;
	aks_error *err = NULL;
	int rc = run(f, NULL, "echo hi", 60, &r, &err);
	const char *said = rc == AKS_OK ? aks_result_get_notice(r) : aks_error_message(err);
	if (!said || !strstr(said, "did not start") || !strstr(said, "runs as uid 65534"))
		fail_msg("the relay's reason is not in what the call says: %s",
		         said ? said : "(nothing)");
	aks_result_free(r);
	aks_error_free(err);
	free(f->id); /* never destroyed: not ours */
	f->id = NULL;
	free(kctl("-n %s delete pod %s --grace-period=0 --force", ns, pod));
	free(pod);
}

/* stderr into a file between capture_start and capture_end (the plugins' log lines); no
 * assertion in between, or its message would vanish into the file. */
static int saved_stderr = -1;
static char *capture_path;

static void capture_start(void)
{
	capture_path = xasprintf("%s/stderr-%d", tmpdir, rand());
	fflush(stderr);
	saved_stderr = dup(2);
	int fd = open(capture_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved_stderr >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
}

static char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	saved_stderr = -1;
	char *text = calloc(1, 65536);
	FILE *fp = fopen(capture_path, "r");
	if (fp) {
		text[fread(text, 1, 65535, fp)] = '\0';
		fclose(fp);
	}
	unlink(capture_path);
	free(capture_path);
	return text;
}

/* Two Python calls and a command in a pod where the agent cannot run: per call, so no
 * state, and the first result says why (its log warning too). */
static void check_fallback(fixture *f, const char *why)
{
	capture_start();
	aks_error *err = NULL, *err1 = NULL, *err2 = NULL, *err3 = NULL;
	aks_result *r1 = NULL, *r2 = NULL, *r3 = NULL;
	int rc = create_rc(f, &err);
	int rc1 = rc == AKS_OK ? run(f, "python", "x = 41", 60, &r1, &err1) : rc;
	int rc2 = rc == AKS_OK ? run(f, "python", "print(x + 1)", 60, &r2, &err2) : rc;
	int rc3 = rc == AKS_OK ? run(f, NULL, "echo per-call", 60, &r3, &err3) : rc;
	char *log = capture_end();
	check_ok(rc, err);
	check_ok(rc1, err1);
	check_ok(rc2, err2);
	check_ok(rc3, err3);
	assert_int_equal(aks_result_get_exit_code(r1), 0);
	const char *n = aks_result_get_notice(r1);
	if (!n || !strstr(n, why) || !strstr(n, "Python keeps no state"))
		fail_msg("no fallback notice: %s", n ? n : "(none)");
	assert_int_equal(aks_result_get_exit_code(r2), 1);
	assert_non_null(strstr(aks_result_get_stderr(r2, NULL), "NameError"));
	assert_null(aks_result_get_notice(r2));
	assert_string_equal(aks_result_get_stdout(r3, NULL), "per-call\n");
	if (!strstr(log, "aksandbox-agent cannot be used in pod") || !strstr(log, why))
		fail_msg("no fallback warning in the log: %s", log);
	free(log);
	aks_result_free(r1);
	aks_result_free(r2);
	aks_result_free(r3);
	char *pids = agent_pids(pod_of(f->id));
	assert_string_equal(pids, "");
	free(pids);
}

/* The sandbox's root overwrites the agent's copy with something of the same size and kills
 * the agent (as hostile code would, to disable it): the copy is checked by its SHA-256
 * before it is started again, found not ours and placed again: still the real agent. */
static void t_agent_replaced_inside(void **state)
{
	fixture *f = *state;
	const char *pod = pod_of(f->id);
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 60, &r, &err), err);
	aks_result_free(r);
	char *pids = agent_pids(pod);
	assert_int_equal(words(pids), 1);
	char *cmd = xasprintf("for f in /.aksandbox/aksandbox-agent-*; do n=$(wc -c < $f); "
	                      "head -c $n /dev/zero > $f.x && chmod 755 $f.x && mv $f.x $f; done; "
	                      "kill -9 %s",
	                      pids);
	free(pod_sh(pod, cmd));
	free(cmd);
	free(pids);
	sleep(2); /* an idle agent is pinged first */
	check_ok(run(f, "python", "print('after')", 60, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "after\n");
	const char *notice = aks_result_get_notice(r);
	if (!notice || !strstr(notice, "restarted"))
		fail_msg("no restart notice: %s", notice ? notice : "(none)");
	aks_result_free(r);
	pids = agent_pids(pod);
	assert_int_equal(words(pids), 1); /* through an agent, ours again */
	free(pids);
	char *elf =
	    pod_sh(pod, "for f in /.aksandbox/aksandbox-agent-*; do head -c 4 $f | tail -c 3; "
	                "done");
	assert_string_equal(elf, "ELF");
	free(elf);
}

/* The fallback: an agent built for another CPU than the node's is not run; a pod with no
 * writable place (read-only root, attached) gets none. Both say so: a warning in the log,
 * the first result's notice, and the instance's description names the fallback. */
static void t_agent_fallback(void **state)
{
	fixture *f = *state;
	/* the same agent, its ELF header saying aarch64 (e_machine 183) */
	char *fake = xasprintf("%s/aksandbox-agent-arm64", tmpdir);
	int st;
	free(sh_out(&st,
	            "cp '%s' '%s' && printf '\\267\\000' | dd of='%s' bs=1 seek=18 "
	            "conv=notrunc 2>/dev/null",
	            K8S_TEST_AGENT, fake, fake));
	assert_int_equal(st, 0);
	char *extra = xasprintf("    agent: %s\n", fake);
	open_provider(f, extra);
	free(extra);
	assert_non_null(strstr(aks_provider_get_description(f->prov),
	                       "one exec per call where it cannot be placed"));
	check_fallback(f, "the agent is built for aarch64 and the pod's node is x86_64");
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	free(f->id);
	f->id = NULL;
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	f->prov = NULL;
	f->config = NULL;
	free(fake);

	/* an attached pod whose root is read-only (no emptyDir of ours; only /workspace is
	 * writable, and it is the user's, never a place for the agent) */
	char *name = xasprintf("aks-ro-%d", rand() % 100000);
	free(kctl("-n %s run %s --image=%s --image-pull-policy=Never --restart=Never "
	          "--labels=aksandbox-test=%s --overrides='{\"spec\":{\"containers\":[{\"name\":"
	          "\"%s\",\"image\":\"%s\",\"command\":[\"sleep\",\"3600\"],\"workingDir\":"
	          "\"/tmp\",\"securityContext\":{\"readOnlyRootFilesystem\":true},"
	          "\"volumeMounts\":[{\"name\":\"w\",\"mountPath\":\"/workspace\"}]}],"
	          "\"volumes\":[{\"name\":\"w\",\"emptyDir\":{}}]}}'",
	          ns, name, py_image, run_label, name, py_image));
	free(kctl("-n %s wait --for=condition=Ready pod/%s --timeout=60s", ns, name));
	extra = xasprintf("    attach_to: %s/%s\n", ns, name);
	open_provider(f, extra);
	free(extra);
	check_fallback(f, "no writable place where a program may run");
	free(f->id); /* never destroyed: not ours */
	f->id = NULL;
	free(kctl("-n %s delete pod %s --grace-period=0 --force", ns, name));
	free(name);
}

/* A restarted container (an attached pod that restarts: its PID 1 ends) lost the agent
 * and its copy in /tmp: the next call re-places and restarts it, with the notice. */
static void t_agent_container_restart(void **state)
{
	fixture *f = *state;
	char *name = xasprintf("aks-rs-%d", rand() % 100000);
	free(kctl("-n %s run %s --image=%s --image-pull-policy=Never --restart=Always "
	          "--labels=aksandbox-test=%s --command -- /bin/sh -c "
	          "'trap \"exit 0\" TERM; while :; do sleep 1; done'",
	          ns, name, py_image, run_label));
	free(kctl("-n %s wait --for=condition=Ready pod/%s --timeout=60s", ns, name));
	char *extra = xasprintf("    attach_to: %s/%s\n", ns, name);
	open_provider(f, extra);
	free(extra);
	create_sandbox(f);
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 60, &r, &err), err);
	assert_null(aks_result_get_notice(r));
	aks_result_free(r);
	char *ls = pod_sh(name, "ls /tmp/.aksandbox");
	assert_true(strncmp(ls, "aksandbox-agent-", 16) == 0);
	free(ls);
	free(pod_sh(name, "kill 1"));
	char *restarts = NULL;
	for (int i = 0; i < 120; i++) {
		free(restarts);
		restarts = jsonpath("pod", name,
		                    "{.status.containerStatuses[0].restartCount}/"
		                    "{.status.containerStatuses[0].ready}");
		if (strcmp(restarts, "0/true") != 0 && strstr(restarts, "/true"))
			break;
		usleep(250 * 1000);
	}
	assert_string_not_equal(restarts, "0/true");
	free(restarts);
	char *gone = pod_sh(name, "ls /tmp/.aksandbox 2>/dev/null; true");
	assert_string_equal(gone, ""); /* a fresh container: its copy is gone */
	free(gone);
	sleep(2);
	check_ok(run(f, "python", "print(x + 1)", 60, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 1);
	assert_non_null(strstr(aks_result_get_stderr(r, NULL), "NameError"));
	const char *notice = aks_result_get_notice(r);
	if (!notice || !strstr(notice, "restarted"))
		fail_msg("no restart notice: %s", notice ? notice : "(none)");
	aks_result_free(r);
	ls = pod_sh(name, "ls /tmp/.aksandbox");
	assert_true(strncmp(ls, "aksandbox-agent-", 16) == 0); /* placed again */
	free(ls);
	char *pids = agent_pids(name);
	assert_int_equal(words(pids), 1);
	free(pids);
	free(f->id); /* not ours to destroy */
	f->id = NULL;
	free(kctl("-n %s delete pod %s --grace-period=0 --force", ns, name));
	free(name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_gone, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_exec, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_policy_pod, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_max_lifetime, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_netpol, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_impersonation, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_groups, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_connection_errors, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_attach_to, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_self_heal, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_create_timeout, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_stateful, setup, teardown),
	};
	const struct CMUnitTest agent_tests[] = {
	    cmocka_unit_test_setup_teardown(t_agent_close, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_timeout_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_big_output, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_file_hash, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_lost_across_handles, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_relay_refused, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_replaced_inside, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_container_restart, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_fallback, setup_bare, teardown),
	};
	struct CMUnitTest
	    all[sizeof(tests) / sizeof(tests[0]) + sizeof(agent_tests) / sizeof(agent_tests[0])];
	size_t n = 0;
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		all[n++] = tests[i];
	/* the agent's own cases exist only through it */
	for (size_t i = 0; WITH_AGENT && i < sizeof(agent_tests) / sizeof(agent_tests[0]); i++)
		all[n++] = agent_tests[i];
	/* AKS_K8S_TEST_FILTER=t_files runs one case (a cmocka glob) */
	const char *filter = getenv("AKS_K8S_TEST_FILTER");
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return _cmocka_run_group_tests(WITH_AGENT ? "test_kubernetes_agent" : "test_kubernetes",
	                               all, n, group_setup, group_teardown);
}
