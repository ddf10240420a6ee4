#!/bin/sh
# The README's second command: the whole test suite.
#
#  1. installs missing build dependencies (Debian packages), then starts
#     dockerd and builds the docker tests' image if needed, and builds (once,
#     cached) and starts the single-node Kubernetes cluster the kubernetes
#     plugin's tests run against (tests/integration/k8s-setup.sh);
#  2. checks that the C sources match .clang-format (contrib/format.sh --check),
#     builds in _build/ and runs `make check`, the slowest tests first; then runs
#     the main tests again under valgrind memcheck (_build/valgrind.out; the docker
#     plugin's contract suite among them needs the engine);
#  3. builds again with AddressSanitizer + UndefinedBehaviorSanitizer in
#     _build-asan/ and runs `make check` there (any finding fails a test), every
#     test but those that would only repeat it (sanitizer_leave_out below: no compiled
#     code, the gVisor repeats of the runc suites, two slow ones whose code runs under the
#     sanitizers elsewhere);
#  4. with the Debian packages built in the background meanwhile (_build-deb/_deb), runs
#     the worker tier in the cluster from an image of them in the background
#     (tests/integration/k8s-in-cluster.test; its TAP in _build-deb/in-cluster.tap), and
#     beside it:
#     - `make distcheck` (the tarball ships every tracked file, builds in a tree of
#       its own, installs, and passes the tests that need no service: the whole suite ran
#       twice over the same sources already; make distcheck-self-contained);
#     - each libFuzzer target for a bounded time (clang, _build-fuzz/; 2 s each: the
#       corpora already ran in make check, and make fuzz-long is the real search);
#     - the Debian packages (without their build-time tests, which make distcheck ran)
#       installed, then purged (contrib/deb-test.sh, as root; its TAP in _deb/deb-test.tap);
#     and once the worker tier's test is done, stops the cluster and the Docker Engine it
#     started;
# then prints one summary line: "N passed, N failed[, N skipped]".
#
# Every test case counts: the TAP drivers record one :test-result: per case.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)
# Tests spend most of their time waiting on containers, pods and timers (a third of two
# cores busy at -j2): one more test than cores at a time.
test_jobs=$((jobs + 1))
status=0

# Each step says when it starts and how long the one before it took, so a CI transcript
# shows where the time goes.
run_started=$(date +%s) step_started=$run_started step_name=
step() {
	now=$(date +%s)
	[ -n "$step_name" ] && printf '=== (%s: %d s)\n' "$step_name" $((now - step_started))
	step_started=$now step_name=$*
	printf '\n=== %s\n' "$*"
}

# The slowest tests of a build tree's last `make check`: a test's log is created when it
# starts (birth time) and its .trs written when it ends. Silent where the file system
# keeps no birth time.
slowest_tests() { # build dir [how many, default 15]
	find "$1" -name '*.trs' -not -path '*/aksandbox-*/*' 2>/dev/null | while read -r trs; do
		log=${trs%.trs}.log
		born=$(stat -c %W "$log" 2>/dev/null) ended=$(stat -c %Y "$trs" 2>/dev/null)
		case $born in '' | 0 | -) continue ;; esac
		echo "$((ended - born)) ${log#"$1"/}"
	done | sort -rn | head -"${2:-15}" | awk 'NR == 1 { print "slowest tests (seconds):" } { printf "  %5d %s\n", $1, $2 }'
}

step "build dependencies (contrib/install-deps.sh)"
"$top/contrib/install-deps.sh" || { echo "cannot install dependencies"; exit 1; }
# The tests start python3 thousands of times (a JSON field, a fake server, a client). Where
# the python3 on PATH is a version manager's shim (pyenv's is a bash script that costs half
# a second of CPU at every start), they get Debian's interpreter, which install-deps.sh
# installs, directly: on such a machine queue-fleet.test alone went from 165 s to 63 s.
path_python3=$(command -v python3)
case $path_python3 in
/usr/bin/python3 | /bin/python3 | '') ;;
*)
	if [ -x /usr/bin/python3 ]; then
		mkdir -p "$top/_build-tools"
		ln -sf /usr/bin/python3 "$top/_build-tools/python3"
		PATH=$top/_build-tools:$PATH
		export PATH
		echo "python3 for the tests: /usr/bin/python3 (the one on PATH is $path_python3)"
	fi
	;;
esac
[ -x configure ] || autoreconf -fi >/dev/null || exit 1
# The kubernetes plugin's tests need a real cluster: k8s-setup.sh builds Kubernetes v1.20.2
# from Debian's source package once (6-10 min cold on 2 cores, cached in
# /var/cache/aksandbox-k8s), then starts it on the Docker Engine (about 30 s). The build
# needs no Docker: it runs in the background while the Docker step below fetches and
# unpacks its image (mostly waiting on the network); `start` later waits for it, and
# builds again itself if this one failed.
k8s_build_log=$top/_k8s-build.log
( "$top/tests/integration/k8s-setup.sh" install && "$top/tests/integration/k8s-setup.sh" build ) \
	>"$k8s_build_log" 2>&1 &
k8s_build=$!
# The docker plugin's tests need a Docker Engine (with gVisor's runsc) and the
# locally built image aksandbox-test:bookworm: start/build them once here.
step "Docker Engine and the test image (tests/integration/docker-setup.sh)"
"$top/tests/integration/docker-setup.sh" start ||
	{ echo "FATAL: tests/integration/docker-setup.sh failed: the docker tests cannot run"; exit 1; }
step "Kubernetes test cluster (tests/integration/k8s-setup.sh)"
wait "$k8s_build" || { echo "the background Kubernetes build failed; its log:"; tail -20 "$k8s_build_log"; }
"$top/tests/integration/k8s-setup.sh" start >/dev/null ||
	{ echo "FATAL: tests/integration/k8s-setup.sh start failed: the kubernetes tests cannot run"; exit 1; }

# A log's failed cases, each with what the case printed before its result (the last 25
# lines since the previous result: stderr is merged into the log in order, so cmocka's
# fail_msg() and a crash's report are there) and the diagnostics after it ("# ...", where
# cmocka puts an assertion's values and place). The driver's own result lines, which
# start with "RESULT: <test name> ", are left out.
failed_cases() { # log, test name
	awk -v name="$2" '
	function is_driver_line() {
		return match($0, /^(PASS|FAIL|XFAIL|XPASS|SKIP|ERROR): /) &&
		       index(substr($0, RLENGTH + 1), name " ") == 1
	}
	function show_context() { for (i = 0; i < n; i++) print ctx[i]; n = 0 }
	is_driver_line() { next }
	/^not ok/ || /^Bail out!/ { show_context(); print; after = 1; next }
	/^ok( |$)/ { n = 0; after = 0; next }
	after && /^#/ { print; next }
	{
		after = 0
		if (n == 25) { for (i = 1; i < n; i++) ctx[i - 1] = ctx[i]; n-- }
		ctx[n++] = $0
	}' "$1"
}

# The failing cases of a build tree's last `make check`, each with what it printed, and
# the end of each failing log, so a CI transcript says what failed and why. A test that
# died without a "not ok" (a crash, a sanitizer's abort) has the driver's "ERROR:" line.
show_failures() { # build dir
	for log in $(grep -lE '^(not ok|Bail out!|ERROR: )' $(find "$1" -name '*.log' -not -name 'test-suite.log' \
	             -not -name 'config.log' 2>/dev/null) 2>/dev/null); do
		name=${log#"$1"/}
		printf '\n--- %s: the failed cases with their output\n' "$log"
		failed_cases "$log" "${name%.log}"
		printf -- '--- %s: the end of the log\n' "$log"
		tail -30 "$log"
	done
}

# The tests a build tree's `make check` runs (TESTS), in the order to run them: automake
# starts them in order, $test_jobs at a time, so the slowest go first and none starts late
# and runs alone at the end. Slowest by the durations a reference tree's last run measured,
# then by the list below (the slowest in CI, slowest first), then the rest in TESTS order.
# The two queue fleets start with sessions.test beside them, not with test_docker_agent:
# their workers and emulators are timing-sensitive, and a run that started all three
# heaviest at once saw the sqs fleet's two sessions run one after the other.
slow_tests="tests/integration/queue-fleet.test tests/integration/queue-fleet-aws.test
tests/integration/sessions.test tests/integration/test_docker_agent
tests/plugins/runner-rejects.test tests/integration/test_kubernetes_agent
tests/integration/e2b/e2b-cli.test tests/integration/daytona/daytona-cli.test
tests/integration/ec2_ssm/ec2_ssm-cli.test
tests/integration/configure.test tests/integration/test_docker
tests/integration/docker-contract-runsc.test tests/integration/test_kubernetes
plugins/kubernetes/contract-agent.test tests/plugins/contract-kubernetes.test
tests/security/probes-runsc.test tests/security/probes-docker.test tests/plugins/proof.test
tests/integration/mcp/mcp_http.test"
ordered_tests() { # build dir, reference dir
	all=$(cd "$1" && make -s -f Makefile -f - print-tests <<'MAKE'
print-tests: ; @echo $(TESTS)
MAKE
)
	{
		slowest_tests "$2" 1000 | awk 'NR > 1 {print $2}'
		printf '%s\n' $slow_tests $all
	} | awk -v all="$all" '
	# a test by its log'"'"'s name: automake drops the .test of a script
	function key(t) { sub(/\.(log|test)$/, "", t); return t }
	BEGIN { n = split(all, list, " "); for (i = 1; i <= n; i++) test[key(list[i])] = list[i] }
	{
		t = test[key($0)]
		if (t != "" && !seen[t]++) print t
	}' | tr '\n' ' '
}

# What the sanitizer suite leaves out, because it would only repeat it, to keep the CI run
# within its hour: configure's switches and the official E2B and Daytona SDKs against the
# fake services and the official AWS SDK against the fake AWS endpoints (no compiled code of
# ours); the suites that run again under gVisor what the
# same suite just ran under runc (the host's code is the same; gVisor's own branches in it
# are the runsc cases of test_docker and test_docker_agent, which stay); e2b-cli.test and
# daytona-cli.test (the plugins' code runs under the sanitizers in their contract suites,
# e2b-tls.test and examples.test; the cli tests' own cost is the fakes' sandboxes);
# runner-rejects.test (its
# minutes are the cpu checks' measured busy loops; the runner's code runs under the
# sanitizers in every contract suite); sqs-sdk.test and dynamodb-sdk.test (they drive the
# emulators with the official AWS SDK in JavaScript: no compiled code of ours; the plugins'
# compiled code runs under the sanitizers in sqs-contract.test, sqs-errors.test,
# dynamodb-contract.test and dynamodb-errors.test); queue-fleet-aws.test (queue-fleet.test's
# scenarios again over sqs and dynamodb: the worker's and the broker's code runs under the
# sanitizers in queue-fleet.test, the two plugins' in their contract and error suites, and its
# own cost is the emulators'); queue-fleet.test itself (its minutes are its servers' and
# workers' waits; the worker's code runs under the sanitizers in test_worker, worker-cli.test
# and queue-config.test, the nats and redis plugins' in their contract suites and
# test_nats_transport); k8s-manifests.test (kubectl and YAML only). The plain suite runs them
# all.
sanitizer_leave_out="tests/integration/configure.test tests/integration/e2b/e2b-sdk.test
tests/integration/e2b/e2b-cli.test tests/plugins/runner-rejects.test
tests/integration/daytona/daytona-sdk.test tests/integration/daytona/daytona-cli.test
tests/integration/ec2_ssm/aws-sdk.test
tests/integration/docker-contract-runsc.test tests/integration/docker-contract-runsc-agent.test
tests/integration/egress-runsc.test tests/security/probes-runsc.test
tests/integration/sqs/sqs-sdk.test tests/integration/dynamodb/dynamodb-sdk.test
tests/integration/queue-fleet-aws.test tests/integration/queue-fleet.test
tests/integration/k8s-manifests.test"
# Everything the tests run is made before the first one starts (in a build dir). `make -j`
# starts or queues every test whose log it can start at once, and comes back to one whose
# prerequisites still need a recipe only when that queue is empty: a generated script, and
# every compiled test through config.h, whose rule runs whenever config.status's stamp is
# newer than it, as it always is after configure. So CI's slowest compiled tests started 17
# minutes into the plain suite, after every script, and ran at its end two or three at a
# time. Made here, with the stamp given config.h's time (what a rule run would conclude),
# the tests start in the order given. (A tree configured again whose config.h did not change
# keeps a config.h older than config.status: its rule runs, and only the order suffers.)
make_tests_ready() { # tests
	make -j"$jobs" check TESTS= >/dev/null && make -j"$jobs" $1 >/dev/null || return 1
	if [ config.h -nt config.status ] && [ config.h -nt "$top/config.h.in" ]; then
		touch -r config.h stamp-h1
	fi
}
run_suite() { # dir, reference dir, tests to leave out, configure flags...
	dir=$1 ref=$2 leave_out=$(echo $3); shift 3 # one space between names
	mkdir -p "$dir"
	( cd "$dir" &&
	  { [ -f Makefile ] || ../configure --quiet "$@" >/dev/null; } &&
	  make -j"$jobs" >/dev/null &&
	  tests=$(for t in $(ordered_tests . "$top/$ref"); do
	          case " $leave_out " in *" $t "*) ;; *) printf '%s ' "$t" ;; esac; done) &&
	  make_tests_ready "$tests" &&
	  make -j"$test_jobs" check TESTS="$tests" ) ||
		{ status=1; show_failures "$dir"; }
	slowest_tests "$dir"
}

step "source format (contrib/format.sh --check: .clang-format, clang-format 14)"
format_result=pass
"$top/contrib/format.sh" --check || { format_result=fail; status=1; }

# The sanitizer and fuzzing trees are pure CPU work that needs nothing of the plain suite: they
# build in the background, one compiler at a time (-j1) at the lowest priority (nice 19). The
# sanitizer tree builds while `make check` below mostly waits on containers, pods and timers
# (a third of two cores busy); the fuzzing tree only after it, while valgrind and the
# sanitizer suite run, which measure no cpu limit anyway: every always-runnable compiler
# makes the busy loops the plain suite's cpu checks time wait for a CPU (the runner then says
# NOT VERIFIED), so the plain suite shares the machine with one compiler only, and only as
# long as the sanitizer tree takes. Each phase waits for its tree; a failed build fails the
# run with its log shown, and the phase then builds again in the foreground (as without
# this), reporting the errors there.
bg_start() { # build dir, configure flags, make goals (one word list per make run)...
	dir=$1 flags=$2
	shift 2
	mkdir -p "$dir"
	rm -f "$dir"/background-build.*
	(
		( cd "$dir" &&
		  { [ -f Makefile ] || nice -n 19 ../configure --quiet $flags >/dev/null; } &&
		  for goals in "$@"; do nice -n 19 make -j1 $goals >/dev/null || exit 1; done
		) >"$dir/background-build.log" 2>&1
		echo $? >"$dir/background-build.rc"
	) &
}
bg_wait() { # build dir, pid: waits for its background build; shows its log and fails the run if it failed
	waited=$(date +%s)
	while [ ! -f "$1/background-build.rc" ] && kill -0 "$2" 2>/dev/null &&
	      [ "$(ps -o stat= -p "$2" 2>/dev/null | cut -c1)" != Z ]; do
		sleep 2
	done
	wait "$2"
	if [ "$(cat "$1/background-build.rc" 2>/dev/null)" = 0 ]; then
		printf 'the background build of %s: done (waited %d s for it)\n' "$1" $(($(date +%s) - waited))
	else
		status=1
		printf 'FAIL: the background build of %s failed (exit %s); its log, %s/background-build.log:\n' \
			"$1" "$(cat "$1/background-build.rc" 2>/dev/null || echo none)" "$1"
		tail -40 "$1/background-build.log"
	fi
}
bg_start _build-asan --enable-sanitizers "" "check TESTS="
bg_asan=$!

step "make check"
run_suite _build _build ""
bg_start _build-fuzz "CC=clang --enable-fuzzing" fuzz-build
bg_fuzz=$!
# The Debian packages (without their build-time tests: make distcheck runs them), for the
# in-cluster test's worker image and then for deb-test.sh.
bg_start _build-deb "" "deb DEB_BUILD_OPTIONS=nocheck"
bg_deb=$!
step "valgrind memcheck over the unit tests, the provider tests and the contract suite"
( cd _build && make --no-print-directory check-valgrind ) >_build/valgrind.out 2>&1 || status=1
cat _build/valgrind.out
step "make check under AddressSanitizer + UndefinedBehaviorSanitizer"
bg_wait _build-asan "$bg_asan"
run_suite _build-asan _build "$sanitizer_leave_out" --enable-sanitizers

# The worker tier in the cluster (k8s-in-cluster.test) mostly waits on image builds, pods and
# timers; it runs in the background while distcheck, the fuzzers and the package tests, which
# need neither Docker nor the cluster, use the cores (distcheck at nice 10 took 406 s beside
# it, 283 s alone: it runs at the normal priority; the test waits for a task that outlives
# its agent's wait). Once the test is done, the same background job stops the services:
# nothing after it needs a container or a pod. Each phase says how long it took.
step "the worker tier in the Kubernetes cluster (tests/integration/k8s-in-cluster.test), in the background"
bg_wait _build-deb "$bg_deb"
deb_built=$(cat _build-deb/background-build.rc 2>/dev/null)
mkdir -p _build-deb
rm -f _build-deb/in-cluster.tap _build-deb/in-cluster.seconds _build-deb/stop-services.log
(
	started=$(date +%s)
	AKS_TEST_SRCDIR="$top" AKS_TEST_BUILDDIR="$top/_build" AKS_DEB_DIR="$top/_build-deb/_deb" \
		sh "$top/tests/integration/k8s-in-cluster.test" >_build-deb/in-cluster.tap 2>&1
	rc=$?
	echo $(($(date +%s) - started)) >_build-deb/in-cluster.seconds
	# Stop the cluster k8s-setup.sh started (before dockerd: kubelet drives it), then the
	# dockerd docker-setup.sh started, if it started one (never another).
	{ "$top/tests/integration/k8s-setup.sh" stop
	  "$top/tests/integration/docker-setup.sh" stop; } >_build-deb/stop-services.log 2>&1
	exit $rc
) &
in_cluster=$!

step "make distcheck (make distcheck-self-contained)"
distcheck_result=pass
( cd _build && make -j"$jobs" distcheck-self-contained >distcheck.out 2>&1 ) ||
	{ distcheck_result=fail; status=1; tail -40 _build/distcheck.out; show_failures _build/aksandbox-*/_build/sub; }

# The fuzzers run for a bounded time each, whatever the CPU they get: they run beside the
# package tests (alone after distcheck, they added their 40 s to the run).
step "fuzzing (libFuzzer, bounded time per target) and, beside it, the Debian packages: lintian, install and run, purge (contrib/deb-test.sh)"
fuzz_result=pass
bg_wait _build-fuzz "$bg_fuzz"
mkdir -p _build-fuzz
( cd _build-fuzz &&
  { [ -f Makefile ] || ../configure --quiet CC=clang --enable-fuzzing >/dev/null; } &&
  nice -n 10 make -j"$jobs" fuzz-build >/dev/null &&
  nice -n 10 make -j"$jobs" fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-2}" ) >_build-fuzz/fuzz.out 2>&1 &
bg_fuzz_run=$!
mkdir -p _deb
# nocheck: the package build's own tests (make check-packaging) are a part of what make
# distcheck ran above from the same tarball; what deb-test.sh checks is the packages.
# The packages built in the background are used as they are (when that build failed, this
# builds them again and shows why).
[ "$deb_built" = 0 ] && export AKS_DEB_BUILT=1
DEB_BUILD_OPTIONS=nocheck nice -n 10 "$top/contrib/deb-test.sh" "$top/_build-deb" >_deb/deb-test.tap 2>&1 ||
	status=1
wait "$bg_fuzz_run" || { fuzz_result=fail; status=1; }
cat _build-fuzz/fuzz.out _deb/deb-test.tap

step "the worker tier in the Kubernetes cluster: its results; the services stopped"
waited=$(date +%s)
wait "$in_cluster" || status=1
printf 'waited %d s for it; it took %s s\n' $(($(date +%s) - waited)) "$(cat _build-deb/in-cluster.seconds 2>/dev/null || echo '?')"
cat _build-deb/in-cluster.tap
cat _build-deb/stop-services.log 2>/dev/null

# Count every test case of both suites.
trs=$(find _build _build-asan -name '*.trs' -not -path '*/aksandbox-*/*' 2>/dev/null)
passed=0 failed=0 skipped=0
for f in $trs; do
	p=$(grep -c '^:test-result: PASS' "$f"); x=$(grep -c '^:test-result: XFAIL' "$f")
	e=$(grep -cE '^:test-result: (FAIL|ERROR|XPASS)' "$f"); s=$(grep -c '^:test-result: SKIP' "$f")
	passed=$((passed + p + x)); failed=$((failed + e)); skipped=$((skipped + s))
done
for r in "$format_result" "$distcheck_result" "$fuzz_result"; do
	if [ "$r" = pass ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
done
[ "$failed" -gt 0 ] && status=1
[ -z "$trs" ] && { echo "no test results found"; status=1; }
vp=$(grep -c '^ok ' _build/valgrind.out 2>/dev/null) vf=$(grep -c '^not ok ' _build/valgrind.out 2>/dev/null)
[ "${vp:-0}" -eq 0 ] && vf=$((${vf:-0} + 1)) # no valgrind result at all is a failure
passed=$((passed + ${vp:-0})); failed=$((failed + ${vf:-0}))
for tap in _deb/deb-test.tap _build-deb/in-cluster.tap; do
	tp=$(grep -c '^ok ' $tap 2>/dev/null) tf=$(grep -cE '^(not ok |Bail out!)' $tap 2>/dev/null)
	if grep -q '^1\.\.0 # SKIP' $tap 2>/dev/null; then
		skipped=$((skipped + 1)) # it says why; never a pass
	elif [ "${tp:-0}" -eq 0 ]; then
		tf=$((${tf:-0} + 1)) # no result at all is a failure
	fi
	passed=$((passed + ${tp:-0})); failed=$((failed + ${tf:-0}))
done
printf '=== (%s: %d s)\n=== the whole run: %d s\n' "$step_name" $(($(date +%s) - step_started)) \
	$(($(date +%s) - run_started))
echo
if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
exit $status
