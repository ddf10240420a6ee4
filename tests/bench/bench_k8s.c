/*
 * tests/bench/bench_k8s.c - the kubernetes provider's cost, against the same
 * work done with kubectl, measured in the same run and interleaved (so drift
 * on the shared machine affects both alike):
 *
 *  exec:  one execute_command("true") in an existing pod, three ways: through
 *         aksandbox-agent (a request on the one exec stream the handle's agent
 *         runs in: no new connection), with `agent: false` (one exec WebSocket
 *         per call: handshake, the plugin's wrapper shell, the status on
 *         channel 3), and `kubectl exec <pod> -- /bin/sh -c true` (a new
 *         kubectl process: kubeconfig, TLS, the same exec upgrade);
 *  first: a new pod's first command (provider create, which waits for
 *         Running, + execute_command), against `kubectl run` + `kubectl wait
 *         --for=condition=Ready` + `kubectl exec` of the same image and
 *         command. Deletion is not timed (both delete without waiting).
 *
 * Usage: bench_k8s [-n N] [-m M]   (N exec samples, default 50; M first-command
 * samples, default 5). The agent is AKS_K8S_AGENT, else $AKS_TEST_BUILDDIR/agent/
 * aksandbox-agent (run.sh sets the latter). The cluster comes from the environment, as
 * `tests/integration/k8s-setup.sh env` prints it: AKS_K8S_KUBECTL,
 * AKS_K8S_KUBECONFIG, AKS_K8S_NAMESPACE and AKS_K8S_PY_IMAGE (a locally
 * imported image: imagePullPolicy Never). Every pod it makes carries the
 * label aksandbox-test=bench-<pid>; they are deleted at exit, also on failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

static const char *prog = "bench_k8s";
static const char *kubectl, *kubeconfig, *ns, *image;
static char *agent_path; /* the aksandbox-agent to place in the pods */
static char label[64];   /* aksandbox-test=bench-<pid> */

static const char *need_env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v) {
		fprintf(stderr,
		        "%s: %s is not set: run through tests/bench/run.sh, or eval \"$("
		        "tests/integration/k8s-setup.sh env)\" first (the cluster must be up: "
		        "k8s-setup.sh start)\n",
		        prog, name);
		exit(1);
	}
	return v;
}

/* fork + exec with stdout to /dev/null (kubectl run prints "pod/x created");
 * stderr stays, so a failure says why. Nanoseconds, or -1 unless it exited 0. */
static int64_t spawn_quiet(char *const argv[])
{
	int64_t t0 = bench_now_ns();
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		if (fd >= 0)
			dup2(fd, STDOUT_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	int st = 0;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	int64_t t = bench_now_ns() - t0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

static void must(int64_t t, const char *what)
{
	if (t < 0) {
		fprintf(stderr, "%s: %s failed\n", prog, what);
		exit(1);
	}
}

/* kubectl as the admin in the test namespace, with ARGS (NULL-terminated) after
 * "-n <namespace>": spawn_quiet's figure. */
static int64_t kctl(const char *const args[])
{
	char *argv[24] = {(char *)kubectl, "--kubeconfig", (char *)kubeconfig, "-n", (char *)ns};
	size_t k = 5;
	for (size_t i = 0; args[i] && k < sizeof(argv) / sizeof(argv[0]) - 1; i++)
		argv[k++] = (char *)args[i];
	argv[k] = NULL;
	return spawn_quiet(argv);
}

/* Whatever this run made, whichever way it ends (bench_die exits too). */
static void delete_ours(void)
{
	const char *args[] = {"delete", "pods", "-l", label, "--wait=false", "--ignore-not-found",
	                      NULL};
	if (kctl(args) < 0)
		fprintf(stderr, "%s: cannot delete the pods labelled %s in %s\n", prog, label, ns);
}

/* agent: the aksandbox-agent to run through, or "false" (one exec per call). */
static aks_provider *open_k8s(const char *agent)
{
	aks_error *err = NULL;
	const aks_plugin *plugin = NULL;
	if (aks_plugin_load("kubernetes", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK)
		bench_die(prog, "loading kubernetes.so", err);
	char yaml[] = "/tmp/bench-k8s-XXXXXX";
	int fd = mkstemp(yaml);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		perror("mkstemp");
		exit(1);
	}
	fprintf(f,
	        "sandbox:\n  enabled: true\n  type: kubernetes\n  kubernetes:\n"
	        "    kubeconfig: %s\n    namespace: %s\n    image: %s\n"
	        "    image_pull_policy: Never\n    labels: {aksandbox-test: %s}\n"
	        "    agent: %s\n",
	        kubeconfig, ns, image, strchr(label, '=') + 1, agent);
	fclose(f);
	aks_config *config = NULL; /* lives as long as the run (never freed) */
	int rc = aks_config_load_block(plugin, yaml, &config, &err);
	unlink(yaml);
	if (rc != AKS_OK)
		bench_die(prog, "loading the config", err);
	aks_provider *prov = NULL;
	if (aks_provider_open(plugin, config, &prov, &err) != AKS_OK)
		bench_die(prog, "opening the provider", err);
	return prov;
}

static void plugin_true(aks_sandbox *sb)
{
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_result *r = NULL;
	if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
		bench_die(prog, "execute_command", err);
	if (aks_result_get_exit_code(r) != 0) {
		fprintf(stderr, "%s: true exited with %d in pod %s\n", prog,
		        aks_result_get_exit_code(r), aks_sandbox_get_id(sb));
		exit(1);
	}
	aks_result_free(r);
}

/* A new pod through the plugin: create (until Running) + the first command;
 * then its deletion (not timed: the API call returns before the pod is gone). */
static int64_t plugin_first(aks_provider *prov)
{
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 180, NULL, NULL, NULL);
	aks_sandbox *sb = NULL;
	int64_t t0 = bench_now_ns();
	if (aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
		bench_die(prog, "create", err);
	plugin_true(sb);
	int64_t t = bench_now_ns() - t0;
	char *sid = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	if (aks_provider_destroy(prov, sid, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);
	free(sid);
	return t;
}

/* A new session's first run_command through the tool layer, with a warm pool of one pod
 * (pool: {size: 1}; filled between samples, untimed): into out[0..m). */
static void pooled_first(size_t m, int64_t *out)
{
	char *yaml = NULL;
	if (asprintf(&yaml,
	             "sandbox:\n  enabled: true\n  default_profile: pooled\n  profiles:\n"
	             "    pooled:\n      type: kubernetes\n      pool: {size: 1}\n"
	             "      kubernetes:\n        kubeconfig: %s\n        namespace: %s\n"
	             "        image: %s\n        image_pull_policy: Never\n"
	             "        labels: {aksandbox-test: %s}\n        agent: %s\n",
	             kubeconfig, ns, image, strchr(label, '=') + 1, agent_path) < 0) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	bench_runtime b;
	bench_runtime_open(prog, yaml, &b);
	free(yaml);
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "bench", NULL);
	for (size_t i = 0; i < m; i++)
		out[i] = bench_pooled_first(prog, b.rt, &ctx, "pooled");
	bench_runtime_close(prog, &b);
}

/* The same pod by hand: the same image, `sleep infinity` as PID 1, the same
 * label; run, wait for Ready, exec; deleted with the plugin's grace (5 s),
 * without waiting (not timed). */
static void kubectl_first(size_t i, const char *lbl, int64_t *run_ns, int64_t *wait_ns,
                          int64_t *exec_ns)
{
	char name[64], podarg[80], labels_arg[96], image_arg[256];
	snprintf(name, sizeof(name), "aks-bench-%ld-%zu", (long)getpid(), i);
	snprintf(podarg, sizeof(podarg), "pod/%s", name);
	snprintf(labels_arg, sizeof(labels_arg), "--labels=%s", lbl);
	snprintf(image_arg, sizeof(image_arg), "--image=%s", image);
	const char *run[] = {"run",
	                     name,
	                     image_arg,
	                     "--image-pull-policy=Never",
	                     "--restart=Never",
	                     labels_arg,
	                     "--command",
	                     "--",
	                     "sleep",
	                     "infinity",
	                     NULL};
	const char *wait[] = {"wait", "--for=condition=Ready", "--timeout=180s", podarg, NULL};
	const char *x[] = {"exec", name, "--", "/bin/sh", "-c", "true", NULL};
	const char *del[] = {"delete", podarg, "--grace-period=5", "--wait=false", NULL};
	must(*run_ns = kctl(run), "kubectl run");
	must(*wait_ns = kctl(wait), "kubectl wait --for=condition=Ready");
	must(*exec_ns = kctl(x), "kubectl exec (first command)");
	must(kctl(del), "kubectl delete");
}

static void report(const char *what, int64_t *v, size_t n)
{
	double med = bench_median_ms(v, n);
	printf("  %-56s %9.3f ms  (p10 %.3f, p90 %.3f)\n", what, med,
	       bench_percentile_ms(v, n, 0.1), bench_percentile_ms(v, n, 0.9));
}

/* The pod name of a sandbox id "<namespace>/<pod>". */
static const char *pod_of(const char *id)
{
	const char *s = strchr(id, '/');
	return s ? s + 1 : id;
}

int main(int argc, char **argv)
{
	size_t n = 50, m = 5;
	int opt;
	while ((opt = getopt(argc, argv, "n:m:")) != -1) {
		if (opt == 'n')
			n = (size_t)atol(optarg);
		else if (opt == 'm')
			m = (size_t)atol(optarg);
		else {
			fprintf(stderr, "usage: %s [-n N] [-m M]\n", prog);
			return 2;
		}
	}
	if (n < 2 || m < 2) {
		fprintf(stderr, "%s: -n and -m must be at least 2\n", prog);
		return 2;
	}
	kubectl = need_env("AKS_K8S_KUBECTL");
	kubeconfig = need_env("AKS_K8S_KUBECONFIG");
	ns = need_env("AKS_K8S_NAMESPACE");
	image = need_env("AKS_K8S_PY_IMAGE");
	snprintf(label, sizeof(label), "aksandbox-test=bench-%ld", (long)getpid());
	atexit(delete_ours);

	const char *a = getenv("AKS_K8S_AGENT"), *b = getenv("AKS_TEST_BUILDDIR");
	if (a && *a)
		agent_path = strdup(a);
	else if (!b || !*b || asprintf(&agent_path, "%s/agent/aksandbox-agent", b) < 0) {
		fprintf(stderr, "%s: set AKS_K8S_AGENT (or AKS_TEST_BUILDDIR) to the agent\n",
		        prog);
		return 1;
	}
	aks_provider *prov = open_k8s(agent_path);
	aks_provider *percall = open_k8s("false");
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 180, NULL, NULL, NULL);
	aks_sandbox *sb = NULL, *sb_pc = NULL;
	if (aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
		bench_die(prog, "create", err);
	char *id = strdup(aks_sandbox_get_id(sb));
	char *pod = strdup(pod_of(id));
	/* the same pod, one exec per call */
	if (aks_provider_attach(percall, id, &call, &sb_pc, &err) != AKS_OK)
		bench_die(prog, "attach", err);

	const char *kexec[] = {"exec", pod, "--", "/bin/sh", "-c", "true", NULL};
	int64_t *plug = calloc(n, sizeof(int64_t)), *pc = calloc(n, sizeof(int64_t)),
	        *cli = calloc(n, sizeof(int64_t));
	if (!plug || !pc || !cli) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	for (int i = 0; i < 3; i++) { /* warm-up: the agent's placement and start, connections,
		                         page cache, the pod's shell */
		plugin_true(sb);
		plugin_true(sb_pc);
		must(kctl(kexec), "kubectl exec");
	}
	for (size_t i = 0; i < n; i++) {
		/* rotate which goes first, so none always follows another */
		for (size_t j = 0; j < 3; j++) {
			switch ((i + j) % 3) {
			case 0: {
				int64_t t0 = bench_now_ns();
				plugin_true(sb);
				plug[i] = bench_now_ns() - t0;
				break;
			}
			case 1: {
				int64_t t0 = bench_now_ns();
				plugin_true(sb_pc);
				pc[i] = bench_now_ns() - t0;
				break;
			}
			default:
				must(cli[i] = kctl(kexec), "kubectl exec");
			}
		}
	}
	printf("kubernetes: one command (true) in an existing pod, image %s\n", image);
	double p = bench_median_ms(plug, n), q = bench_median_ms(pc, n),
	       k = bench_median_ms(cli, n);
	report("plugin execute_command through aksandbox-agent", plug, n);
	report("plugin execute_command, agent: false (one exec WebSocket)", pc, n);
	report("kubectl exec <pod> -- /bin/sh -c true (a new process)", cli, n);
	printf("  agent / kubectl exec: %.3fx (%+.3f ms)\n", p / k, p - k);
	printf("  agent / agent: false: %.3fx (%+.3f ms)\n", p / q, p - q);
	printf("  agent: false / kubectl exec: %.2fx (%+.3f ms)\n", q / k, q - k);

	aks_sandbox_close(sb);
	aks_sandbox_close(sb_pc);
	aks_call_init(&call, 180, NULL, NULL, NULL);
	if (aks_provider_destroy(prov, id, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);
	aks_provider_close(percall);

	/* a new pod's first command */
	int64_t *first = calloc(m, sizeof(int64_t)), *kall = calloc(m, sizeof(int64_t)),
	        *krun = calloc(m, sizeof(int64_t)), *kwait = calloc(m, sizeof(int64_t)),
	        *kx = calloc(m, sizeof(int64_t));
	if (!first || !kall || !krun || !kwait || !kx) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	for (size_t i = 0; i < m; i++) {
		/* alternate which goes first, as above */
		if (i % 2)
			kubectl_first(i, label, &krun[i], &kwait[i], &kx[i]);
		first[i] = plugin_first(prov);
		if (!(i % 2))
			kubectl_first(i, label, &krun[i], &kwait[i], &kx[i]);
		kall[i] = krun[i] + kwait[i] + kx[i];
	}
	printf("kubernetes: a new pod's first command (true)\n");
	double f = bench_median_ms(first, m), ka = bench_median_ms(kall, m);
	report("plugin create (until Running) + execute_command (+ agent)", first, m);
	report("kubectl run + wait Ready + exec (sum)", kall, m);
	report("  of which kubectl run", krun, m);
	report("  of which kubectl wait --for=condition=Ready", kwait, m);
	report("  of which kubectl exec", kx, m);
	printf("  plugin / kubectl: %.2fx (%+.3f ms)\n", f / ka, f - ka);
	int64_t *pooled = calloc(m, sizeof(int64_t));
	if (!pooled) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	pooled_first(m, pooled);
	double pf = bench_median_ms(pooled, m);
	report("a new session's first run_command with a warm pool (tool layer)", pooled, m);
	printf("  with a pool / kubectl: %.3fx (%+.3f ms)\n", pf / ka, pf - ka);
	free(pooled);

	free(plug);
	free(pc);
	free(cli);
	free(agent_path);
	free(first);
	free(kall);
	free(krun);
	free(kwait);
	free(kx);
	free(pod);
	free(id);
	aks_provider_close(prov);
	return 0;
}
