# tests/integration/ec2_ssm/fake-aws.sh - sourced by the tests that run the ec2_ssm plugin (and
# the AWS code of plugins/common) against the fake AWS service (tests/fakes/aws/fake_aws.py):
# starts it with a fresh key pair in a temporary directory, points the AWS SDKs' own variables
# (and so the plugin) at it, and stops it (and checks that no process of its commands is left)
# when the test is done. No request may reach the real AWS, and none of the host's AWS settings
# (profiles, tokens, container or instance credentials) may leak in.
#
#   . fake-aws.sh        needs $tmp (a directory the test owns) and AKS_TEST_SRCDIR
#   fake_start [ARGS]    starts it with --instance i-0123456789abcdef0 and ARGS, the fake's own
#                        flags (tests/fakes/aws/README.md):
#                          --instance ID            one more registered, Online instance
#                          --cred-seconds N         lifetime of the credentials it issues (STS,
#                                                   IMDS, ECS; default 3600)
#                          --invocation-delay-ms N  GetCommandInvocation answers
#                                                   InvocationDoesNotExist that long after
#                                                   SendCommand (default 200)
#                          --delivery-delay-ms N    the command starts that long after SendCommand
#                                                   (default 300)
#                          --web-identity-token T   the only token AssumeRoleWithWebIdentity takes
#                          --ecs-auth-token T       the Authorization /_ecs/credentials requires
#                          --clock-skew-s N         the server's clock is N seconds off
#                          --imds-role NAME, --imds-v1, --region R, --account A
#                        exports FAKE_URL, FAKE_RECORD, FAKE_STATE, FAKE_CREDENTIALS (the
#                        --credentials file, for a second fake with the same key), AWS_ACCESS_KEY_ID,
#                        AWS_SECRET_ACCESS_KEY (the fresh pair), AWS_REGION=us-east-1,
#                        AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_SSM, AWS_ENDPOINT_URL_STS and
#                        AWS_EC2_METADATA_SERVICE_ENDPOINT (all $FAKE_URL),
#                        AWS_EC2_METADATA_DISABLED=true (a test that wants IMDS unsets it),
#                        AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE (files under $tmp that
#                        do not exist until a test writes them); unsets AWS_PROFILE,
#                        AWS_DEFAULT_PROFILE, AWS_SESSION_TOKEN, AWS_WEB_IDENTITY_TOKEN_FILE,
#                        AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME, AWS_CONTAINER_*, AWS_DEFAULT_REGION;
#                        sets FAKE_PID. The ECS endpoint is $FAKE_URL/_ecs/credentials (for
#                        AWS_CONTAINER_CREDENTIALS_FULL_URI).
#   fake_fault JSON      queues a fault (POST /_fake/faults), e.g.
#                        '{"status": 400, "type": "ThrottlingException", "target": "AmazonSSM.SendCommand", "count": 2}'
#                        '{"drop": true, "target": "AssumeRole"}'
#   fake_get PATH        GET of a /_fake/ path, the body on stdout (e.g. /_fake/commands)
#   fake_post PATH [JSON] POST of a /_fake/ path (e.g. /_fake/instances/i-0abcdef1234567890,
#                        /_fake/credentials/ASIA.../expire, /_fake/clock '{"skew_s": 900}')
#   fake_delete PATH     DELETE of a /_fake/ path (e.g. /_fake/instances/ID)
#   fake_requests FILTER the recorded requests (JSON lines) matching a python expression over r,
#                        e.g. 'r["service"] == "ssm" and r["target"] == "AmazonSSM.SendCommand"'
#   fake_stop            stops it: 0 when it exited and left no process behind

fake_start() {
	FAKE_RECORD=$tmp/fake-requests.jsonl
	FAKE_STATE=$tmp/fake-state
	FAKE_CREDENTIALS=$tmp/fake-credentials.json
	AWS_ACCESS_KEY_ID=AKIA$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n' | tr a-f A-F)
	AWS_SECRET_ACCESS_KEY=$(od -An -N30 -tx1 /dev/urandom | tr -d ' \n')
	printf '[{"access_key_id": "%s", "secret_access_key": "%s"}]\n' \
		"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$FAKE_CREDENTIALS"
	unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN AWS_SECURITY_TOKEN \
		AWS_WEB_IDENTITY_TOKEN_FILE AWS_ROLE_ARN AWS_ROLE_SESSION_NAME AWS_DEFAULT_REGION \
		AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI \
		AWS_CONTAINER_AUTHORIZATION_TOKEN AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE \
		AWS_EC2_METADATA_V1_DISABLED AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE AWS_CA_BUNDLE \
		AWS_STS_REGIONAL_ENDPOINTS AWS_USE_FIPS_ENDPOINT AWS_USE_DUALSTACK_ENDPOINT
	export FAKE_RECORD FAKE_STATE FAKE_CREDENTIALS AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	python3 "$AKS_TEST_SRCDIR/tests/fakes/aws/fake_aws.py" \
		--port-file "$tmp/fake.port" --record "$FAKE_RECORD" --state "$FAKE_STATE" \
		--credentials "$FAKE_CREDENTIALS" --instance i-0123456789abcdef0 "$@" \
		>"$tmp/fake.out" 2>"$tmp/fake.err" &
	FAKE_PID=$!
	i=0
	while [ ! -s "$tmp/fake.port" ] && [ $i -lt 150 ] && kill -0 "$FAKE_PID" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	if [ ! -s "$tmp/fake.port" ]; then
		echo "Bail out! the fake AWS service did not start: $(tail -5 "$tmp/fake.err")"
		exit 1
	fi
	FAKE_URL=http://127.0.0.1:$(cat "$tmp/fake.port")
	AWS_REGION=us-east-1
	AWS_ENDPOINT_URL=$FAKE_URL AWS_ENDPOINT_URL_SSM=$FAKE_URL AWS_ENDPOINT_URL_STS=$FAKE_URL
	AWS_EC2_METADATA_SERVICE_ENDPOINT=$FAKE_URL AWS_EC2_METADATA_DISABLED=true
	AWS_SHARED_CREDENTIALS_FILE=$tmp/aws-credentials AWS_CONFIG_FILE=$tmp/aws-config
	export FAKE_URL AWS_REGION AWS_ENDPOINT_URL AWS_ENDPOINT_URL_SSM AWS_ENDPOINT_URL_STS \
		AWS_EC2_METADATA_SERVICE_ENDPOINT AWS_EC2_METADATA_DISABLED \
		AWS_SHARED_CREDENTIALS_FILE AWS_CONFIG_FILE
}

fake_fault() {
	curl -sf -X POST -H 'Content-Type: application/json' -d "$1" "$FAKE_URL/_fake/faults" >/dev/null
}
fake_get() { curl -sf "$FAKE_URL$1"; }
fake_post() { curl -sf -X POST -H 'Content-Type: application/json' ${2:+-d "$2"} "$FAKE_URL$1" >/dev/null; }
fake_delete() { curl -sf -X DELETE "$FAKE_URL$1" >/dev/null; }

fake_requests() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if eval(sys.argv[2]):
        print(line, end="")' "$FAKE_RECORD" "$1"
}

fake_stop() {
	[ -n "${FAKE_PID:-}" ] || return 0
	kill -TERM "$FAKE_PID" 2>/dev/null
	i=0
	while kill -0 "$FAKE_PID" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 "$FAKE_PID" 2>/dev/null && { kill -KILL "$FAKE_PID"; return 1; }
	FAKE_PID=
	# A command's shell carries its script's path (under the state directory) in its command
	# line; what it started may not, but stays in its process group (the fake lists every one
	# in $FAKE_STATE/pgids).
	! pgrep -f "$FAKE_STATE/" >/dev/null || return 1
	python3 -c '
import os, sys
groups = {int(l) for l in open(sys.argv[1]) if l.strip()} if os.path.exists(sys.argv[1]) else set()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    f = stat[stat.rfind(")") + 2:].split()
    if int(f[2]) in groups and f[0] not in "ZX":
        sys.exit(1)' "$FAKE_STATE/pgids"
}
