// tests/integration/ec2_ssm/aws_sdk.mjs - holds the fake AWS service (tests/fakes/aws/fake_aws.py)
// to the real protocol: the official AWS SDK for JavaScript v3 (@aws-sdk/client-ssm,
// @aws-sdk/client-sts, @aws-sdk/credential-providers, pinned in package-lock.json) drives it
// through every path the ec2_ssm plugin takes: SigV4 with static, assumed-role, web-identity,
// instance-metadata, container and shared-file credentials, the refusals AWS answers (a wrong
// secret, region or service, an unknown key, a bad or expired token, a skewed clock), SSM Run
// Command from SendCommand to the end of the command (and its cancel and timeout), STS, and the
// faults a client must survive. Every check looks at what the SDK makes of the answers, at the
// wire the fake recorded, and at the effects (a file a command wrote, an exit code, a process
// gone, no process of the fake left after SIGTERM); one runs tests/integration/ec2_ssm/
// fake-aws.sh as the shell tests do and lets the SDK find everything in the environment it
// exports. Prints TAP. Run by aws-sdk.test through run-node.sh, which installs the pinned SDK and
// copies this file next to its node_modules. No request may reach the real AWS: every AWS_*
// variable of the host is removed first, and every client is pointed at a fake.
import {
	SSMClient, DescribeInstanceInformationCommand, SendCommandCommand, GetCommandInvocationCommand,
	CancelCommandCommand, waitUntilCommandExecuted,
} from '@aws-sdk/client-ssm';
import { STSClient, GetCallerIdentityCommand, AssumeRoleCommand } from '@aws-sdk/client-sts';
import {
	fromTokenFile, fromInstanceMetadata, fromContainerMetadata, fromHttp, fromIni,
} from '@aws-sdk/credential-providers';
import { SignatureV4 } from '@smithy/signature-v4';
import { spawn, spawnSync } from 'node:child_process';
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, mkdirSync, openSync, readFileSync, readdirSync, existsSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tap, sleep, pidAlive } from './tap.mjs';

const INSTANCE = 'i-0123456789abcdef0';
const ACCOUNT = '123456789012';
const ROLE_ARN = `arn:aws:iam::${ACCOUNT}:role/aks-test-role`;

// ---- the environment probe: run by fake-aws.sh's check below, with only what it exported ----
if (process.argv[2] === '--env-probe') {
	try {
		const ssm = new SSMClient({});
		const d = await ssm.send(new DescribeInstanceInformationCommand({
			Filters: [{ Key: 'InstanceIds', Values: [INSTANCE] }] }));
		const who = await new STSClient({}).send(new GetCallerIdentityCommand({}));
		console.log(JSON.stringify({ instances: d.InstanceInformationList.map((i) => i.InstanceId),
			arn: who.Arn, region: await ssm.config.region() }));
		process.exit(0);
	} catch (e) {
		console.log(JSON.stringify({ error: `${e.name}: ${e.message}` }));
		process.exit(1);
	}
}

const srcdir = process.env.AKS_TEST_SRCDIR;
if (!srcdir) {
	console.log('Bail out! AKS_TEST_SRCDIR is not set (run through make check)');
	process.exit(1);
}
// The host's own AWS settings never reach the SDK: every AWS_* variable goes, and the shared
// files are ones of this run that do not exist yet.
for (const k of Object.keys(process.env))
	if (k.startsWith('AWS_'))
		delete process.env[k];
const FAKE = join(srcdir, 'tests/fakes/aws/fake_aws.py');
const T = mkdtempSync(join(tmpdir(), 'aks-aws-sdk.'));
Object.assign(process.env, {
	AWS_REGION: 'us-east-1', AWS_EC2_METADATA_DISABLED: 'true', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
	AWS_SHARED_CREDENTIALS_FILE: join(T, 'no-credentials'), AWS_CONFIG_FILE: join(T, 'no-config'),
});
const KEY = { accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
	secretAccessKey: randomBytes(30).toString('base64') };
const WEB_TOKEN = `eyJhbGciOiJub25lIn0.${Buffer.from(JSON.stringify({ sub: 'aks-test-subject',
	aud: 'sts.amazonaws.com', iss: 'https://oidc.aksandbox.test' })).toString('base64url')}.c2ln`;
const ECS_TOKEN = `ecs-${randomBytes(12).toString('hex')}`;
writeFileSync(join(T, 'credentials.json'), JSON.stringify([{ access_key_id: KEY.accessKeyId,
	secret_access_key: KEY.secretAccessKey }]));

const tap = new Tap();
const check = tap.check.bind(tap);

// ---- helpers ----------------------------------------------------------------

async function rejection(promise) {
	try {
		await promise;
		return null;
	} catch (e) {
		return e;
	}
}
// The value of a promise, or what it threw.
async function settle(promise) {
	try {
		return await promise;
	} catch (e) {
		return e;
	}
}
const describe = (e) => (e instanceof Error ? `${e.name}: ${e.message} (status ${e.$metadata?.httpStatusCode ?? e.statusCode})`
	: `no error${e ? ': ' + JSON.stringify(e).slice(0, 300) : ''}`);
const j = (x) => JSON.stringify(x);

const fakes = [];
async function startFake(name, args = []) {
	const dir = join(T, name);
	mkdirSync(dir);
	const f = { name, state: join(dir, 'state'), record: join(dir, 'record.jsonl'), log: join(dir, 'fake.log') };
	const argv = [FAKE, '--record', f.record, '--state', f.state, '--credentials', join(T, 'credentials.json'),
		'--instance', INSTANCE, ...args];
	f.proc = spawn(process.env.PYTHON || 'python3', argv, { stdio: ['ignore', 'pipe', openSync(f.log, 'a')] });
	f.exited = new Promise((resolve) => f.proc.on('exit', (code, sig) => resolve(code ?? sig)));
	f.url = await new Promise((resolve, reject) => {
		let out = '';
		f.proc.stdout.on('data', (d) => {
			out += d;
			const m = out.match(/^listening on (http:\/\/127\.0\.0\.1:\d+)\n/);
			if (m)
				resolve(m[1]);
		});
		f.proc.on('exit', (code, sig) => reject(new Error(`the fake ${name} exited (${code ?? sig}): ${readFileSync(f.log, 'utf8')}`)));
		setTimeout(() => reject(new Error(`the fake ${name} did not start in 15 s`)), 15000);
	});
	fakes.push(f);
	return f;
}

// What a fake recorded, one object per request; header names lower-cased.
function records(f) {
	if (!existsSync(f.record))
		return [];
	return readFileSync(f.record, 'utf8').trim().split('\n').filter(Boolean).map((line) => {
		const r = JSON.parse(line);
		r.headers = Object.fromEntries(Object.entries(r.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
		return r;
	});
}
async function admin(f, method, path, body) {
	const res = await fetch(`${f.url}/_fake/${path}`, { method, body: body === undefined ? undefined : j(body) });
	return res.json();
}
const fakeCommand = async (f, id) => (await admin(f, 'GET', 'commands')).find((c) => c.CommandId === id);

// The pids of the live processes whose command line holds text, or whose process group is one of groups.
function processesOf(text, groups = new Set()) {
	const found = [];
	for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
		try {
			const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
			const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
			if ((groups.has(pgrp) || readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text)) && pidAlive(pid))
				found.push(Number(pid));
		} catch { /* gone meanwhile */ }
	}
	return found;
}
const groupsOf = (f) => new Set(existsSync(join(f.state, 'pgids'))
	? readFileSync(join(f.state, 'pgids'), 'utf8').split('\n').filter(Boolean).map(Number) : []);

async function stopFake(f) {
	f.proc.kill('SIGTERM');
	const code = await Promise.race([f.exited, sleep(10000).then(() => 'timeout')]);
	fakes.splice(fakes.indexOf(f), 1);
	return { code, left: processesOf(`${f.state}/`, groupsOf(f)) };
}

async function eventually(fn, ms = 5000) {
	const end = Date.now() + ms;
	let v;
	while (!(v = await fn()) && Date.now() < end)
		await sleep(30);
	return v;
}

// A sha256 for the SDK's own SigV4 signer (@smithy/signature-v4), from node:crypto.
class Sha256 {
	constructor(secret) { this.h = secret ? createHmac('sha256', secret) : createHash('sha256'); }
	update(d) { this.h.update(d); }
	async digest() { return new Uint8Array(this.h.digest()); }
}
// A request signed by the SDK's signer for SERVICE, sent as it is signed; {status, body}.
async function signedFetch(f, { service, target, body, headers = {}, region = 'us-east-1', credentials = KEY }) {
	const url = new URL(f.url);
	const request = { method: 'POST', protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: '/',
		query: {}, headers: { host: url.host, ...headers, ...(target ? { 'x-amz-target': target,
			'content-type': 'application/x-amz-json-1.1' } : { 'content-type': 'application/x-www-form-urlencoded' }) },
		body };
	const signer = new SignatureV4({ credentials, region, service, sha256: Sha256 });
	const signed = await signer.sign(request);
	const res = await fetch(f.url, { method: 'POST', headers: signed.headers, body });
	return { status: res.status, body: await res.text(), headers: res.headers };
}

const ssmClient = (f, credentials = KEY, extra = {}) => new SSMClient({ endpoint: f?.url, credentials, ...extra });
const stsClient = (f, credentials = KEY, extra = {}) => new STSClient({ endpoint: f?.url, credentials, ...extra });
const byId = (id) => ({ Filters: [{ Key: 'InstanceIds', Values: [id] }] });

// Polls GetCommandInvocation (every 30 ms) until the command is done; the statuses and error
// names seen on the way, in order, without repeats.
async function runToEnd(ssm, commandId, instanceId = INSTANCE, ms = 10000) {
	const seen = [];
	const end = Date.now() + ms;
	for (;;) {
		let r;
		try {
			r = await ssm.send(new GetCommandInvocationCommand({ CommandId: commandId, InstanceId: instanceId }));
		} catch (e) {
			if (seen.at(-1) !== e.name)
				seen.push(e.name);
			if (e.name !== 'InvocationDoesNotExist' || Date.now() > end)
				throw e;
			await sleep(30);
			continue;
		}
		if (seen.at(-1) !== r.Status)
			seen.push(r.Status);
		if (!['Pending', 'InProgress', 'Delayed', 'Cancelling'].includes(r.Status) || Date.now() > end)
			return { r, seen };
		await sleep(30);
	}
}
async function send(ssm, commands, extra = {}) {
	const { Parameters, ...rest } = extra;
	const out = await ssm.send(new SendCommandCommand({ DocumentName: 'AWS-RunShellScript', InstanceIds: [INSTANCE],
		Parameters: { commands, ...Parameters }, ...rest }));
	return out.Command;
}

// ---- the scenarios ----------------------------------------------------------

async function describeScenarios(f) {
	const ssm = ssmClient(); // its endpoint: AWS_ENDPOINT_URL, the SDK's standard variable
	const d = await ssm.send(new DescribeInstanceInformationCommand(byId(INSTANCE)));
	const i = d.InstanceInformationList?.[0];
	check('DescribeInstanceInformation (Filters InstanceIds): the registered instance, Online, Linux, with its agent',
		d.InstanceInformationList.length === 1 && i.InstanceId === INSTANCE && i.PingStatus === 'Online' &&
		i.PlatformType === 'Linux' && typeof i.PlatformName === 'string' && /^\d+\.\d+\.\d+\.\d+$/.test(i.AgentVersion) &&
		i.ResourceType === 'EC2Instance', j(d.InstanceInformationList));
	check('DescribeInstanceInformation: LastPingDateTime (epoch seconds on the wire) is a recent Date to the SDK',
		i.LastPingDateTime instanceof Date && Math.abs(i.LastPingDateTime - Date.now()) < 60000, String(i.LastPingDateTime));
	const wire = records(f).filter((r) => r.target === 'AmazonSSM.DescribeInstanceInformation').at(-1);
	check('the wire: POST / with X-Amz-Target AmazonSSM.DescribeInstanceInformation, application/x-amz-json-1.1, signed by the key',
		wire?.method === 'POST' && wire.path === '/' && wire.headers['content-type'] === 'application/x-amz-json-1.1' &&
		wire.key_id === KEY.accessKeyId && wire.status === 200 && /^AWS4-HMAC-SHA256 Credential=AKIA\w+\/\d{8}\/us-east-1\/ssm\/aws4_request, SignedHeaders=/.test(wire.headers.authorization) &&
		['host', 'x-amz-date', 'x-amz-target', 'content-type'].every((h) => wire.signed_headers.includes(h)) &&
		j(wire.body) === j(byId(INSTANCE)), j(wire));
	const old = await ssm.send(new DescribeInstanceInformationCommand({
		InstanceInformationFilterList: [{ key: 'InstanceIds', valueSet: [INSTANCE] }] }));
	check('DescribeInstanceInformation (InstanceInformationFilterList, key/valueSet): the same instance',
		old.InstanceInformationList.length === 1 && old.InstanceInformationList[0].InstanceId === INSTANCE, j(old));
	const none = await ssm.send(new DescribeInstanceInformationCommand(byId('i-0fedcba9876543210')));
	check('DescribeInstanceInformation of an instance not registered: an empty list, no error',
		Array.isArray(none.InstanceInformationList) && none.InstanceInformationList.length === 0, j(none));
	const bad = await rejection(ssm.send(new DescribeInstanceInformationCommand(byId('not-an-instance'))));
	check('DescribeInstanceInformation of a malformed id: InvalidInstanceId (400)',
		bad?.name === 'InvalidInstanceId' && bad.$metadata.httpStatusCode === 400 && bad.$fault === 'client', describe(bad));

	const other = 'i-0abcdef1234567890';
	await admin(f, 'POST', `instances/${other}`);
	const reg = await ssm.send(new DescribeInstanceInformationCommand(byId(other)));
	await admin(f, 'DELETE', `instances/${other}`);
	const dereg = await ssm.send(new DescribeInstanceInformationCommand(byId(other)));
	check('an instance registered (POST /_fake/instances/ID) is described; deregistered (DELETE), it is not',
		reg.InstanceInformationList[0]?.InstanceId === other && dereg.InstanceInformationList.length === 0,
		`${j(reg)} ${j(dereg)}`);
}

async function commandScenarios(f) {
	const ssm = ssmClient();
	const cmd = await send(ssm, ['echo hello', 'echo "$AWS_SSM_INSTANCE_ID $AWS_SSM_REGION_NAME" > marker.txt',
		'echo oops >&2']);
	check('SendCommand: a Command with a UUID CommandId, Pending, the document, instance and parameters, RequestedDateTime a Date',
		/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(cmd.CommandId) && cmd.Status === 'Pending' &&
		cmd.DocumentName === 'AWS-RunShellScript' && j(cmd.InstanceIds) === j([INSTANCE]) &&
		cmd.Parameters.commands.length === 3 && cmd.RequestedDateTime instanceof Date && cmd.TimeoutSeconds === 3600 &&
		cmd.ExpiresAfter instanceof Date, j(cmd));
	const first = await rejection(ssm.send(new GetCommandInvocationCommand({ CommandId: cmd.CommandId, InstanceId: INSTANCE })));
	check('GetCommandInvocation right after SendCommand: InvocationDoesNotExist, as the SDK names it',
		first?.name === 'InvocationDoesNotExist' && first.$metadata.httpStatusCode === 400, describe(first));
	const { r, seen } = await runToEnd(ssm, cmd.CommandId);
	check('polled to the end: InvocationDoesNotExist, then Pending/InProgress, then Success',
		seen[0] === 'InvocationDoesNotExist' && seen.at(-1) === 'Success' &&
		seen.slice(1, -1).every((s) => ['Pending', 'InProgress'].includes(s)), j(seen));
	check('the invocation: Success, ResponseCode 0, stdout and stderr, aws:runShellScript, start and end times',
		r.Status === 'Success' && r.StatusDetails === 'Success' && r.ResponseCode === 0 &&
		r.StandardOutputContent === 'hello\n' && r.StandardErrorContent === 'oops\n' && r.PluginName === 'aws:runShellScript' &&
		/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(r.ExecutionStartDateTime) &&
		/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(r.ExecutionEndDateTime) && /^PT\d+\.\d{3}S$/.test(r.ExecutionElapsedTime),
		j(r));
	const fc = await fakeCommand(f, cmd.CommandId);
	const marker = fc && join(fc.dir, 'marker.txt');
	check('the command really ran: marker.txt is in its working directory (the orchestration directory, under the instance\'s tree), with the agent\'s variables',
		fc?.dir.startsWith(join(f.state, 'instances', INSTANCE)) && existsSync(marker) &&
		readFileSync(marker, 'utf8') === `${INSTANCE} us-east-1\n` && fc.script === cmd.Parameters.commands.join('\n'),
		j(fc));

	const w = await send(ssm, ['sleep 0.3', 'echo waited']);
	const res = await rejection(waitUntilCommandExecuted({ client: ssm, maxWaitTime: 15, minDelay: 0.1, maxDelay: 0.2 },
		{ CommandId: w.CommandId, InstanceId: INSTANCE }).then((x) => { throw x; }));
	check('waitUntilCommandExecuted (the SDK\'s waiter, through InvocationDoesNotExist and InProgress): SUCCESS with the output',
		res?.state === 'SUCCESS' && res.reason?.StandardOutputContent === 'waited\n', j(res?.state ? { state: res.state, reason: res.reason?.Status } : describe(res)));

	const c3 = await send(ssm, ['echo before', 'echo why >&2', 'exit 3', 'echo never']);
	const r3 = (await runToEnd(ssm, c3.CommandId)).r;
	check('exit 3: Failed, ResponseCode 3, the output before it; stderr ends with the agent\'s "failed to run commands: exit status 3"',
		r3.Status === 'Failed' && r3.StatusDetails === 'Failed' && r3.ResponseCode === 3 && r3.StandardOutputContent === 'before\n' &&
		r3.StandardErrorContent === 'why\nfailed to run commands: exit status 3', j(r3));
	const wf = await send(ssm, ['exit 1']);
	const wfe = await rejection(waitUntilCommandExecuted({ client: ssm, maxWaitTime: 15, minDelay: 0.1, maxDelay: 0.2 },
		{ CommandId: wf.CommandId, InstanceId: INSTANCE }));
	check('waitUntilCommandExecuted of a failing command: the waiter fails (FAILURE)', /"state":"FAILURE"/.test(wfe?.message ?? ''),
		describe(wfe));

	const big = await send(ssm, ['head -c 100000 /dev/zero | tr "\\0" a', 'head -c 100000 /dev/zero | tr "\\0" b >&2']);
	const rb = (await runToEnd(ssm, big.CommandId)).r;
	check('100,000 bytes of stdout and of stderr: the first 24,000 and 8,000 characters come back',
		rb.Status === 'Success' && rb.StandardOutputContent === 'a'.repeat(24000) && rb.StandardErrorContent === 'b'.repeat(8000),
		`${rb.Status} ${rb.StandardOutputContent.length} ${rb.StandardErrorContent.length}`);
	const wide = await send(ssm, ['printf "%030000d" 0 | sed "s/0/é/g"']);
	const rw = (await runToEnd(ssm, wide.CommandId)).r;
	check('30,000 two-byte characters of stdout: 24,000 characters (not bytes) come back',
		rw.StandardOutputContent === 'é'.repeat(24000), `${rw.Status} ${rw.StandardOutputContent.length}`);

	const bg = await send(ssm, ['(sleep 1; echo late) &', 'echo early']);
	const b0 = Date.now();
	const { r: rbg, seen: seenBg } = await runToEnd(ssm, bg.CommandId);
	check('a background process that keeps stdout open keeps the command InProgress until it ends (as the agent\'s pipes do)',
		rbg.Status === 'Success' && rbg.StandardOutputContent === 'early\nlate\n' && Date.now() - b0 >= 900 &&
		seenBg.includes('InProgress'), `${j(seenBg)} ${j(rbg.StandardOutputContent)} ${Date.now() - b0} ms`);
	const wd = join(T, 'workdir');
	mkdirSync(wd);
	const cwd = (await runToEnd(ssm, (await send(ssm, ['pwd'], { Parameters: { workingDirectory: [wd] } })).CommandId)).r;
	const nowd = (await runToEnd(ssm, (await send(ssm, ['pwd'], { Parameters: { workingDirectory: [join(T, 'nowhere')] } })).CommandId)).r;
	check('workingDirectory: the command runs there; one that does not exist: Failed, ResponseCode 1, the agent\'s chdir error',
		cwd.StandardOutputContent === `${wd}\n` && nowd.Status === 'Failed' && nowd.ResponseCode === 1 &&
		/^failed to run commands: chdir .*nowhere: no such file or directory$/.test(nowd.StandardErrorContent),
		`${j(cwd.StandardOutputContent)} ${nowd.Status} ${nowd.ResponseCode} ${j(nowd.StandardErrorContent)}`);

	const s = await send(ssm, ['sleep 300 & echo $! > sleeper.pid', 'wait']);
	const running = await eventually(async () => {
		const c = await fakeCommand(f, s.CommandId);
		return c?.status === 'InProgress' && c.alive && c;
	});
	const inv = await ssm.send(new GetCommandInvocationCommand({ CommandId: s.CommandId, InstanceId: INSTANCE }));
	check('a running command: InProgress, ResponseCode -1, no output yet, no end time', inv.Status === 'InProgress' &&
		inv.ResponseCode === -1 && inv.StandardOutputContent === '' && inv.ExecutionEndDateTime === '', j(inv));
	const sleeper = running && Number(readFileSync(join(running.dir, 'sleeper.pid'), 'utf8'));
	await ssm.send(new CancelCommandCommand({ CommandId: s.CommandId }));
	const rc = await ssm.send(new GetCommandInvocationCommand({ CommandId: s.CommandId, InstanceId: INSTANCE }));
	const after = await fakeCommand(f, s.CommandId);
	check('CancelCommand of a sleep 300: Cancelled, ResponseCode -1; its whole process group (the sleep too) is gone',
		running && rc.Status === 'Cancelled' && rc.StatusDetails === 'Cancelled' && rc.ResponseCode === -1 &&
		after.alive === false && !pidAlive(running.pid) && sleeper > 0 && !pidAlive(sleeper),
		`${j(rc)} ${j(after)} sleeper ${sleeper}`);
	const unknown = await rejection(ssm.send(new CancelCommandCommand({ CommandId: randomUUID() })));
	check('CancelCommand of an unknown command: InvalidCommandId', unknown?.name === 'InvalidCommandId', describe(unknown));

	const t = await send(ssm, ['echo started', 'sleep 30'], { Parameters: { executionTimeout: ['1'] } });
	const t0 = Date.now();
	const rt = (await runToEnd(ssm, t.CommandId)).r;
	const tc = await fakeCommand(f, t.CommandId);
	check('executionTimeout 1 on a sleep 30: TimedOut (ExecutionTimedOut) after about a second, its process group killed',
		rt.Status === 'TimedOut' && rt.StatusDetails === 'ExecutionTimedOut' && rt.StandardOutputContent === 'started\n' &&
		Date.now() - t0 < 5000 && tc.alive === false, `${j(rt)} ${j(tc)}`);
	const deliveryTimeout = await rejection(send(ssm, ['true'], { TimeoutSeconds: 5 }));
	check('TimeoutSeconds (the delivery timeout) below 30: ValidationException',
		deliveryTimeout?.name === 'ValidationException' && /timeoutSeconds/.test(deliveryTimeout.message), describe(deliveryTimeout));
	const badTimeout = await rejection(send(ssm, ['true'], { Parameters: { executionTimeout: ['0'] } }));
	check('executionTimeout 0: InvalidParameters', badTimeout?.name === 'InvalidParameters', describe(badTimeout));

	const notReg = await rejection(ssm.send(new SendCommandCommand({ DocumentName: 'AWS-RunShellScript',
		InstanceIds: ['i-0fedcba9876543210'], Parameters: { commands: ['true'] } })));
	check('SendCommand to an instance not registered: InvalidInstanceId', notReg?.name === 'InvalidInstanceId', describe(notReg));
	const badDoc = await rejection(ssm.send(new SendCommandCommand({ DocumentName: 'AWS-NoSuchDocument',
		InstanceIds: [INSTANCE], Parameters: { commands: ['true'] } })));
	check('SendCommand of another document: InvalidDocument', badDoc?.name === 'InvalidDocument', describe(badDoc));

	// an instance whose agent is away: the command waits, undelivered, until cancelled
	await admin(f, 'POST', `instances/${INSTANCE}`, { PingStatus: 'ConnectionLost' });
	const lost = (await ssm.send(new DescribeInstanceInformationCommand(byId(INSTANCE)))).InstanceInformationList[0];
	const p = await send(ssm, ['touch delivered'], { TimeoutSeconds: 30 });
	await sleep(600);
	const pending = await ssm.send(new GetCommandInvocationCommand({ CommandId: p.CommandId, InstanceId: INSTANCE }));
	await ssm.send(new CancelCommandCommand({ CommandId: p.CommandId, InstanceIds: [INSTANCE] }));
	const pc = await ssm.send(new GetCommandInvocationCommand({ CommandId: p.CommandId, InstanceId: INSTANCE }));
	await admin(f, 'POST', `instances/${INSTANCE}`, { PingStatus: 'Online' });
	check('an instance ConnectionLost: described so; its command stays Pending (never started) until cancelled',
		lost.PingStatus === 'ConnectionLost' && pending.Status === 'Pending' && pc.Status === 'Cancelled' &&
		(await fakeCommand(f, p.CommandId)).pid === null, `${lost.PingStatus} ${pending.Status} ${pc.Status}`);
	return s;
}

async function authScenarios(f) {
	const wrong = await rejection(ssmClient(undefined, { ...KEY, secretAccessKey: 'wrong' + KEY.secretAccessKey }, { maxAttempts: 1 })
		.send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	check('a wrong secret: InvalidSignatureException (400), AWS\'s message with the canonical request it expected',
		wrong?.name === 'InvalidSignatureException' && wrong.$metadata.httpStatusCode === 400 &&
		wrong.message.startsWith('The request signature we calculated does not match the signature you provided.') &&
		wrong.message.includes('The Canonical String for this request should have been'), describe(wrong));
	const region = await rejection(ssmClient(undefined, KEY, { region: 'eu-west-1', maxAttempts: 1 })
		.send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	check('signed for another region: refused, "Credential should be scoped to a valid region"',
		region?.name === 'InvalidSignatureException' && /Credential should be scoped to a valid region, not 'eu-west-1'/.test(region.message),
		describe(region));
	const unknown = await rejection(ssmClient(undefined, { accessKeyId: 'AKIAUNKNOWNUNKNOWN00', secretAccessKey: 'x' })
		.send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	check('an unknown key: UnrecognizedClientException, "The security token included in the request is invalid."',
		unknown?.name === 'UnrecognizedClientException' && unknown.message === 'The security token included in the request is invalid.',
		describe(unknown));
	const stsUnknown = await rejection(stsClient(undefined, { accessKeyId: 'AKIAUNKNOWNUNKNOWN00', secretAccessKey: 'x' })
		.send(new GetCallerIdentityCommand({})));
	check('STS, an unknown key: InvalidClientTokenId (403)', stsUnknown?.name === 'InvalidClientTokenId' &&
		stsUnknown.$metadata.httpStatusCode === 403, describe(stsUnknown));
	const stsWrong = await rejection(stsClient(undefined, { ...KEY, secretAccessKey: 'wrong' }, { maxAttempts: 1 })
		.send(new GetCallerIdentityCommand({})));
	check('STS, a wrong secret: SignatureDoesNotMatch (403)', stsWrong?.name === 'SignatureDoesNotMatch' &&
		stsWrong.$metadata.httpStatusCode === 403, describe(stsWrong));

	// the SDK's own signer, for another service than the one the request is for
	const asSts = await signedFetch(f, { service: 'sts', target: 'AmazonSSM.DescribeInstanceInformation', body: '{}' });
	check('an SSM request signed for sts: 400 InvalidSignatureException "Credential should be scoped to correct service: \'ssm\'"',
		asSts.status === 400 && JSON.parse(asSts.body).__type.endsWith('#InvalidSignatureException') &&
		/Credential should be scoped to correct service: 'ssm'/.test(asSts.body) &&
		/^InvalidSignatureException:/.test(asSts.headers.get('x-amzn-errortype')), `${asSts.status} ${asSts.body}`);
	const asSsm = await signedFetch(f, { service: 'ssm', body: 'Action=GetCallerIdentity&Version=2011-06-15' });
	check('an STS request signed for ssm: 403 SignatureDoesNotMatch in an ErrorResponse',
		asSsm.status === 403 && /<ErrorResponse xmlns="https:\/\/sts.amazonaws.com\/doc\/2011-06-15\/">/.test(asSsm.body) &&
		/<Code>SignatureDoesNotMatch<\/Code>/.test(asSsm.body) && /scoped to correct service: 'sts'/.test(asSsm.body), asSsm.body);
	const bare = await fetch(f.url, { method: 'POST', body: '{}', headers: { 'x-amz-target': 'AmazonSSM.DescribeInstanceInformation',
		'content-type': 'application/x-amz-json-1.1' } });
	const bareSts = await fetch(f.url, { method: 'POST', body: 'Action=GetCallerIdentity&Version=2011-06-15',
		headers: { 'content-type': 'application/x-www-form-urlencoded' } });
	const bareBody = await bare.json(), bareStsBody = await bareSts.text();
	check('unsigned: SSM 400 MissingAuthenticationTokenException, STS 403 MissingAuthenticationToken',
		bare.status === 400 && bareBody.__type.endsWith('#MissingAuthenticationTokenException') && bareBody.message === 'Missing Authentication Token' &&
		bareSts.status === 403 && /<Code>MissingAuthenticationToken<\/Code>/.test(bareStsBody), `${j(bareBody)} ${bareStsBody}`);
	const noHost = await (async () => {
		const url = new URL(f.url);
		const signer = new SignatureV4({ credentials: KEY, region: 'us-east-1', service: 'ssm', sha256: Sha256 });
		const signed = await signer.sign({ method: 'POST', protocol: 'http:', hostname: url.hostname, port: Number(url.port),
			path: '/', query: {}, body: '{}', headers: { host: url.host, 'x-amz-target': 'AmazonSSM.DescribeInstanceInformation',
				'content-type': 'application/x-amz-json-1.1' } }, { unsignableHeaders: new Set(['host']) });
		const res = await fetch(f.url, { method: 'POST', headers: signed.headers, body: '{}' });
		return { status: res.status, body: await res.json(), signed: signed.headers.authorization };
	})();
	check('Host left out of SignedHeaders: 400 IncompleteSignatureException', noHost.status === 400 &&
		noHost.body.__type.endsWith('#IncompleteSignatureException') && !/SignedHeaders=[^,]*host/.test(noHost.signed), j(noHost));
	const ok = await signedFetch(f, { service: 'ssm', target: 'AmazonSSM.DescribeInstanceInformation', body: j(byId(INSTANCE)) });
	check('the SDK\'s SigV4 signer by itself (no SDK client): accepted', ok.status === 200 &&
		JSON.parse(ok.body).InstanceInformationList[0].InstanceId === INSTANCE, `${ok.status} ${ok.body}`);
	const tampered = await (async () => {
		const url = new URL(f.url);
		const body = j(byId(INSTANCE));
		const signer = new SignatureV4({ credentials: KEY, region: 'us-east-1', service: 'ssm', sha256: Sha256 });
		const signed = await signer.sign({ method: 'POST', protocol: 'http:', hostname: url.hostname, port: Number(url.port),
			path: '/', query: {}, body, headers: { host: url.host, 'x-amz-target': 'AmazonSSM.DescribeInstanceInformation',
				'content-type': 'application/x-amz-json-1.1' } });
		const res = await fetch(f.url, { method: 'POST', headers: signed.headers, body: body.replace(INSTANCE, 'i-0fedcba9876543210') });
		return { status: res.status, body: await res.text() };
	})();
	check('a body changed after signing: InvalidSignatureException', tampered.status === 400 &&
		/InvalidSignatureException/.test(tampered.body), j(tampered));
}

async function stsScenarios(f) {
	const sts = stsClient();
	const who = await sts.send(new GetCallerIdentityCommand({}));
	check('STS GetCallerIdentity: the key\'s account, user ARN and AIDA user id', who.Account === ACCOUNT &&
		who.Arn === `arn:aws:iam::${ACCOUNT}:user/aks-fake-user` && /^AIDA[A-Z0-9]{17}$/.test(who.UserId), j(who));
	const wire = records(f).filter((r) => r.action === 'GetCallerIdentity').at(-1);
	check('STS\'s wire: the query protocol, POST / with a form body Action=GetCallerIdentity&Version=2011-06-15, signed for sts',
		wire?.service === 'sts' && wire.method === 'POST' && wire.path === '/' &&
		wire.headers['content-type'] === 'application/x-www-form-urlencoded' &&
		j(wire.body) === j({ Action: 'GetCallerIdentity', Version: '2011-06-15' }) &&
		/\/us-east-1\/sts\/aws4_request/.test(wire.headers.authorization), j(wire));

	const ar = await sts.send(new AssumeRoleCommand({ RoleArn: ROLE_ARN, RoleSessionName: 'aks-session', DurationSeconds: 900 }));
	const c = ar.Credentials;
	check('AssumeRole: ASIA credentials, a session token, an Expiration Date 15 minutes ahead, the assumed-role user',
		/^ASIA[A-Z0-9]{16}$/.test(c.AccessKeyId) && c.SecretAccessKey.length === 40 && c.SessionToken.length > 100 &&
		c.Expiration instanceof Date && Math.abs(c.Expiration - Date.now() - 900000) < 5000 &&
		ar.AssumedRoleUser.Arn === `arn:aws:sts::${ACCOUNT}:assumed-role/aks-test-role/aks-session` &&
		/^AROA[A-Z0-9]{17}:aks-session$/.test(ar.AssumedRoleUser.AssumedRoleId), j(ar));
	const temp = { accessKeyId: c.AccessKeyId, secretAccessKey: c.SecretAccessKey, sessionToken: c.SessionToken };
	const d = await ssmClient(undefined, temp).send(new DescribeInstanceInformationCommand(byId(INSTANCE)));
	const used = records(f).filter((r) => r.service === 'ssm' && r.key_id === c.AccessKeyId).at(-1);
	check('the assumed role\'s credentials sign SSM: the instance is described; X-Amz-Security-Token was sent and signed',
		d.InstanceInformationList[0]?.InstanceId === INSTANCE && used?.status === 200 &&
		used.headers['x-amz-security-token'] === '<redacted>' && used.signed_headers.includes('x-amz-security-token'), j(used));
	const whoRole = await stsClient(undefined, temp).send(new GetCallerIdentityCommand({}));
	check('GetCallerIdentity with them: the assumed-role ARN', whoRole.Arn === ar.AssumedRoleUser.Arn &&
		whoRole.UserId === ar.AssumedRoleUser.AssumedRoleId, j(whoRole));
	const badToken = await rejection(ssmClient(undefined, { ...temp, sessionToken: temp.sessionToken.slice(0, -4) + 'AAAA' })
		.send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const noToken = await rejection(ssmClient(undefined, { ...temp, sessionToken: undefined })
		.send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	check('temporary credentials with a wrong or without their session token: UnrecognizedClientException',
		badToken?.name === 'UnrecognizedClientException' && noToken?.name === 'UnrecognizedClientException',
		`${describe(badToken)} / ${describe(noToken)}`);
	const badName = await rejection(sts.send(new AssumeRoleCommand({ RoleArn: ROLE_ARN, RoleSessionName: 'bad name!' })));
	check('AssumeRole with RoleSessionName "bad name!": ValidationError (400), the pattern in the message',
		badName?.name === 'ValidationError' && badName.$metadata.httpStatusCode === 400 && /roleSessionName/.test(badName.message),
		describe(badName));
	const badArn = await rejection(sts.send(new AssumeRoleCommand({ RoleArn: 'arn:aws:iam::nope:user/someone-else', RoleSessionName: 'ok-name' })));
	check('AssumeRole of something that is not a role ARN: ValidationError', badArn?.name === 'ValidationError', describe(badArn));
	const tooLong = await rejection(sts.send(new AssumeRoleCommand({ RoleArn: ROLE_ARN, RoleSessionName: 'ok-name', DurationSeconds: 7200 })));
	check('AssumeRole for longer than the role\'s MaxSessionDuration (1 hour): ValidationError',
		tooLong?.name === 'ValidationError' && /MaxSessionDuration/.test(tooLong.message), describe(tooLong));

	await admin(f, 'POST', `credentials/${c.AccessKeyId}/expire`);
	const expired = await rejection(ssmClient(undefined, temp).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const stsExpired = await rejection(stsClient(undefined, temp).send(new GetCallerIdentityCommand({})));
	check('expired (POST /_fake/credentials/ID/expire): SSM ExpiredTokenException, STS ExpiredToken, "The security token included in the request is expired"',
		expired?.name === 'ExpiredTokenException' && stsExpired?.name === 'ExpiredToken' &&
		expired.message === 'The security token included in the request is expired', `${describe(expired)} / ${describe(stsExpired)}`);
}

async function providerScenarios(f) {
	// web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, read by the SDK's provider
	const tokenFile = join(T, 'web-identity-token');
	writeFileSync(tokenFile, WEB_TOKEN);
	Object.assign(process.env, { AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: ROLE_ARN,
		AWS_ROLE_SESSION_NAME: 'aks-web', AWS_ENDPOINT_URL: f.url });
	const web = await settle(ssmClient(undefined, fromTokenFile()).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const arwwi = records(f).filter((r) => r.action === 'AssumeRoleWithWebIdentity').at(-1);
	const webKey = records(f).filter((r) => r.service === 'ssm').at(-1)?.key_id;
	const issued = (await admin(f, 'GET', 'credentials')).find((c) => c.access_key_id === webKey);
	check('fromTokenFile: AssumeRoleWithWebIdentity, unsigned, with the token, role and session; its credentials sign SSM',
		web?.InstanceInformationList?.[0]?.InstanceId === INSTANCE && arwwi?.status === 200 && !('authorization' in arwwi.headers) &&
		arwwi.body.RoleArn === ROLE_ARN && arwwi.body.RoleSessionName === 'aks-web' && arwwi.body.WebIdentityToken === '<redacted>' &&
		issued?.kind === 'sts:AssumeRoleWithWebIdentity' && issued.arn === `arn:aws:sts::${ACCOUNT}:assumed-role/aks-test-role/aks-web`,
		`${describe(web)} ${j(arwwi)} ${j(issued)}`);
	writeFileSync(tokenFile, 'not-the-token');
	const wrongWeb = await rejection(fromTokenFile()());
	const wireCode = records(f).filter((r) => r.action === 'AssumeRoleWithWebIdentity').at(-1)?.error;
	check('fromTokenFile with another token: InvalidIdentityToken on the wire, InvalidIdentityTokenException to the SDK',
		wrongWeb?.name === 'InvalidIdentityTokenException' && wrongWeb.$metadata?.httpStatusCode === 400 &&
		wireCode === 'InvalidIdentityToken', `${describe(wrongWeb)} ${wireCode}`);
	for (const k of ['AWS_WEB_IDENTITY_TOKEN_FILE', 'AWS_ROLE_ARN', 'AWS_ROLE_SESSION_NAME', 'AWS_ENDPOINT_URL'])
		delete process.env[k];

	// IMDSv2
	process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT = f.url;
	const before = records(f).length;
	const imds = await settle(ssmClient(f, fromInstanceMetadata()).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const seen = records(f).slice(before);
	const md = seen.filter((r) => r.service === 'imds');
	const signedBy = seen.find((r) => r.service === 'ssm')?.key_id;
	const imdsCred = (await admin(f, 'GET', 'credentials')).find((c) => c.access_key_id === signedBy);
	check('fromInstanceMetadata: PUT /latest/api/token first, then the role and its credentials with the token; they sign SSM',
		imds?.InstanceInformationList?.[0]?.InstanceId === INSTANCE && md[0]?.method === 'PUT' && md[0].path === '/latest/api/token' &&
		md[0].headers['x-aws-ec2-metadata-token-ttl-seconds'] === '21600' &&
		md.slice(1).map((r) => r.path).join(' ') === '/latest/meta-data/iam/security-credentials/ /latest/meta-data/iam/security-credentials/aks-fake-instance-role' &&
		md.slice(1).every((r) => r.headers['x-aws-ec2-metadata-token'] === '<redacted>' && r.status === 200) &&
		imdsCred?.kind === 'imds', `${describe(imds)} ${j(md)} ${j(imdsCred)}`);
	delete process.env.AWS_EC2_METADATA_SERVICE_ENDPOINT;
	const tok = await fetch(`${f.url}/latest/api/token`, { method: 'PUT', headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '60' } });
	const token = await tok.text();
	const get = (path, headers = { 'X-aws-ec2-metadata-token': token }) => fetch(`${f.url}${path}`, { headers });
	const v1 = await get('/latest/meta-data/iam/security-credentials/', {});
	const badTok = await get('/latest/meta-data/iam/security-credentials/', { 'X-aws-ec2-metadata-token': 'nope' });
	const ttl0 = await fetch(`${f.url}/latest/api/token`, { method: 'PUT', headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '0' } });
	const regionText = await (await get('/latest/meta-data/placement/region')).text();
	const doc = await (await get('/latest/dynamic/instance-identity/document')).json();
	check('IMDS: without a token (IMDSv1) 401, with a wrong one 401, a TTL of 0 400; the region and the identity document',
		tok.status === 200 && tok.headers.get('x-aws-ec2-metadata-token-ttl-seconds') === '60' && v1.status === 401 &&
		badTok.status === 401 && ttl0.status === 400 && regionText === 'us-east-1' && doc.region === 'us-east-1' &&
		doc.instanceId === INSTANCE && doc.accountId === ACCOUNT, `${tok.status} ${v1.status} ${badTok.status} ${ttl0.status} ${regionText} ${j(doc)}`);

	// ECS container credentials
	process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = `${f.url}/_ecs/credentials`;
	process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN = ECS_TOKEN;
	const ecs = await settle(ssmClient(f, fromContainerMetadata()).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const ecsReq = records(f).filter((r) => r.service === 'ecs').at(-1);
	check('fromContainerMetadata (AWS_CONTAINER_CREDENTIALS_FULL_URI, AWS_CONTAINER_AUTHORIZATION_TOKEN): its credentials sign SSM',
		ecs?.InstanceInformationList?.[0]?.InstanceId === INSTANCE && ecsReq?.status === 200 &&
		ecsReq.headers.authorization === '<redacted>', `${describe(ecs)} ${j(ecsReq)}`);
	process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN = 'wrong-token';
	const ecsWrong = await rejection(fromContainerMetadata()());
	check('fromContainerMetadata with a wrong token: refused (401)', ecsWrong?.statusCode === 401, describe(ecsWrong));
	delete process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN;
	writeFileSync(join(T, 'ecs-token'), ECS_TOKEN);
	process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE = join(T, 'ecs-token');
	const http = await settle(stsClient(f, fromHttp()).send(new GetCallerIdentityCommand({})));
	check('fromHttp (the default chain\'s container provider) with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE: the task role signs STS',
		http?.Arn === `arn:aws:sts::${ACCOUNT}:assumed-role/aks-fake-task-role/aks-fake-task`, describe(http) + j(http));
	delete process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE;
	delete process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI;

	// the shared files: a profile's keys, and a profile that assumes a role with them
	const credFile = join(T, 'aws-credentials'), configFile = join(T, 'aws-config');
	writeFileSync(credFile, `[aks]\naws_access_key_id = ${KEY.accessKeyId}\naws_secret_access_key = ${KEY.secretAccessKey}\n`);
	writeFileSync(configFile, `[profile aks-role]\nrole_arn = ${ROLE_ARN}\nsource_profile = aks\nrole_session_name = aks-ini\n`);
	Object.assign(process.env, { AWS_SHARED_CREDENTIALS_FILE: credFile, AWS_CONFIG_FILE: configFile, AWS_ENDPOINT_URL: f.url });
	const ini = await settle(stsClient(f, fromIni({ profile: 'aks' })).send(new GetCallerIdentityCommand({})));
	const iniRole = await settle(stsClient(f, fromIni({ profile: 'aks-role' })).send(new GetCallerIdentityCommand({})));
	const assumed = records(f).filter((r) => r.action === 'AssumeRole').at(-1);
	check('fromIni: profile aks (the key in the shared credentials file); profile aks-role assumes the role with it',
		ini?.Arn === `arn:aws:iam::${ACCOUNT}:user/aks-fake-user` &&
		iniRole?.Arn === `arn:aws:sts::${ACCOUNT}:assumed-role/aks-test-role/aks-ini` && assumed?.key_id === KEY.accessKeyId,
		`${describe(ini)} ${describe(iniRole)} ${j(assumed)}`);
	Object.assign(process.env, { AWS_SHARED_CREDENTIALS_FILE: join(T, 'no-credentials'), AWS_CONFIG_FILE: join(T, 'no-config') });
	delete process.env.AWS_ENDPOINT_URL;
}

async function faultScenarios(f) {
	const ssm = ssmClient(f);
	const n = records(f).length;
	await admin(f, 'POST', 'faults', { status: 500, target: 'AmazonSSM.DescribeInstanceInformation' });
	await admin(f, 'POST', 'faults', { status: 400, type: 'ThrottlingException', message: 'Rate exceeded', target: 'ssm' });
	const d = await ssm.send(new DescribeInstanceInformationCommand(byId(INSTANCE)));
	const tries = records(f).slice(n).filter((r) => r.target === 'AmazonSSM.DescribeInstanceInformation').map((r) => `${r.status}${r.error ? ' ' + r.error : ''}`);
	check('a 500 then a ThrottlingException (faults): the SDK retries both and gets the answer',
		d.InstanceInformationList.length === 1 && j(tries) === j(['500 InternalServerError', '400 ThrottlingException', '200']) &&
		d.$metadata.attempts === 3, j(tries));
	await admin(f, 'POST', 'faults', { drop: true, target: 'GetCallerIdentity' });
	const who = await settle(stsClient(f).send(new GetCallerIdentityCommand({})));
	const dropped = records(f).filter((r) => r.action === 'GetCallerIdentity').slice(-2);
	check('a connection closed without an answer (drop): the SDK retries it', who?.Account === ACCOUNT &&
		dropped[0]?.dropped === true && dropped[1]?.status === 200, `${describe(who)} ${j(dropped)}`);
	await admin(f, 'POST', 'faults', { status: 403, type: 'AccessDenied', message: 'User is not authorized to perform: sts:AssumeRole', target: 'AssumeRole' });
	const denied = await rejection(stsClient(f).send(new AssumeRoleCommand({ RoleArn: ROLE_ARN, RoleSessionName: 'denied' })));
	check('an STS fault (403 AccessDenied): an ErrorResponse the SDK names AccessDenied, with the message',
		denied?.name === 'AccessDenied' && denied.$metadata.httpStatusCode === 403 && /not authorized/.test(denied.message), describe(denied));
}

async function expiryScenario() {
	const g = await startFake('short-creds', ['--cred-seconds', '2']);
	const ar = await stsClient(g).send(new AssumeRoleCommand({ RoleArn: ROLE_ARN, RoleSessionName: 'short', DurationSeconds: 900 }));
	const c = ar.Credentials;
	const temp = { accessKeyId: c.AccessKeyId, secretAccessKey: c.SecretAccessKey, sessionToken: c.SessionToken };
	const fresh = await settle(ssmClient(g, temp).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	await sleep(Math.max(0, c.Expiration - Date.now()) + 300);
	const late = await rejection(ssmClient(g, temp).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	check('--cred-seconds 2: AssumeRole\'s credentials expire 2 s on (DurationSeconds 900 notwithstanding): good, then ExpiredTokenException',
		c.Expiration - Date.now() < 5000 && fresh?.InstanceInformationList?.length === 1 && late?.name === 'ExpiredTokenException',
		`${c.Expiration.toISOString()} ${describe(fresh)} ${describe(late)}`);
	const { code, left } = await stopFake(g);
	check('the short-credentials fake: exits 0 on SIGTERM', code === 0 && left.length === 0, `${code} ${left}`);
}

async function skewScenario() {
	const g = await startFake('skewed', ['--clock-skew-s', '900']);
	const d = await settle(ssmClient(g).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const tries = records(g).filter((r) => r.service === 'ssm');
	check('a server clock 15 minutes ahead: SSM refuses the first try ("Signature expired"), the SDK corrects its clock by the Date header and succeeds',
		d?.InstanceInformationList?.length === 1 && tries.length === 2 && tries[0].status === 400 &&
		tries[0].error === 'InvalidSignatureException' && /^Signature expired: \d{8}T\d{6}Z is now earlier than/.test(tries[0].message) &&
		tries[1].status === 200, `${describe(d)} ${j(tries.map((r) => [r.status, r.message]))}`);
	const who = await settle(stsClient(g).send(new GetCallerIdentityCommand({})));
	const stsTries = records(g).filter((r) => r.service === 'sts');
	check('the same for STS: SignatureDoesNotMatch first, then the answer',
		who?.Account === ACCOUNT && stsTries.length === 2 && stsTries[0].error === 'SignatureDoesNotMatch' && stsTries[1].status === 200,
		`${describe(who)} ${j(stsTries.map((r) => [r.status, r.message]))}`);
	await admin(g, 'POST', 'clock', { skew_s: -900 });
	const n = records(g).length;
	const back = await settle(ssmClient(g).send(new DescribeInstanceInformationCommand(byId(INSTANCE))));
	const later = records(g).slice(n);
	check('a server clock 15 minutes behind (POST /_fake/clock): "Signature not yet current", then corrected',
		back?.InstanceInformationList?.length === 1 && later.length === 2 && /^Signature not yet current:/.test(later[0].message) &&
		later[1].status === 200, `${describe(back)} ${j(later.map((r) => [r.status, r.message]))}`);
	const { code, left } = await stopFake(g);
	check('the skewed fake: exits 0 on SIGTERM', code === 0 && left.length === 0, `${code} ${left}`);
}

// fake-aws.sh, as the shell tests source it: the SDK, given nothing but the environment it
// exports, finds the fake (AWS_ENDPOINT_URL*, AWS_REGION) and the key (AWS_ACCESS_KEY_ID...).
function starterScenario() {
	const tmp = join(T, 'sh');
	mkdirSync(tmp);
	const self = fileURLToPath(import.meta.url);
	const script = `. "$AKS_TEST_SRCDIR/tests/integration/ec2_ssm/fake-aws.sh"
fake_start --invocation-delay-ms 100
[ "$AWS_ENDPOINT_URL_SSM" = "$FAKE_URL" ] && [ "$AWS_EC2_METADATA_SERVICE_ENDPOINT" = "$FAKE_URL" ] &&
	[ "$AWS_EC2_METADATA_DISABLED" = true ] && [ ! -e "$AWS_SHARED_CREDENTIALS_FILE" ] && [ -z "\${AWS_PROFILE+x}" ] &&
	[ -z "\${AWS_SESSION_TOKEN+x}" ] && [ -z "\${AWS_CONTAINER_CREDENTIALS_FULL_URI+x}" ] && [ -s "$FAKE_CREDENTIALS" ] || exit 7
node "$1" --env-probe; rc=$?
fake_requests 'r["service"] == "ssm"' | grep -q "$AWS_ACCESS_KEY_ID" || rc=8
fake_stop || rc=9
exit $rc`;
	const env = { ...process.env, tmp, AWS_PROFILE: 'host-profile', AWS_SESSION_TOKEN: 'host-token',
		AWS_CONTAINER_CREDENTIALS_FULL_URI: 'http://169.254.170.2/nowhere' };
	const r = spawnSync('bash', ['-c', script, 'starter', self], { env, encoding: 'utf8', timeout: 30000 });
	let out = {};
	try {
		out = JSON.parse(r.stdout.trim().split('\n').at(-1));
	} catch { /* reported below */ }
	check('fake-aws.sh: fake_start exports what the SDK needs and unsets the host\'s settings; the default chain finds the fake and its key; fake_stop leaves nothing',
		r.status === 0 && j(out.instances) === j([INSTANCE]) && out.arn === `arn:aws:iam::${ACCOUNT}:user/aks-fake-user` &&
		out.region === 'us-east-1', `exit ${r.status} ${r.stdout} ${r.stderr}`);
}

async function shutdownScenario(f) {
	const ssm = ssmClient(f);
	const leave = await send(ssm, ['sleep 300 >/dev/null 2>&1 &', 'echo left']);
	const done = (await runToEnd(ssm, leave.CommandId)).r;
	const c = await fakeCommand(f, leave.CommandId);
	check('a command that leaves a process behind: Success, and /_fake/commands says its group is alive',
		done.Status === 'Success' && c.alive === true, j(c));
	const groups = groupsOf(f);
	const { code, left } = await stopFake(f);
	check('SIGTERM: the fake exits 0, and no process of any command\'s group (nor of its state tree) is left',
		code === 0 && left.length === 0 && groups.size > 5, `exit ${code}, left ${left}, groups ${[...groups]}`);
}

// ---- main -------------------------------------------------------------------

let main;
try {
	main = await startFake('main', ['--web-identity-token', WEB_TOKEN, '--ecs-auth-token', ECS_TOKEN]);
	process.env.AWS_ENDPOINT_URL = main.url;
	await describeScenarios(main);
	await commandScenarios(main);
	await authScenarios(main);
	await stsScenarios(main);
	delete process.env.AWS_ENDPOINT_URL;
	await providerScenarios(main);
	await faultScenarios(main);
	await Promise.all([expiryScenario(), skewScenario()]);
	starterScenario();
	await shutdownScenario(main);
} catch (e) {
	tap.exception(e);
}
for (const f of [...fakes]) {
	f.proc.kill('SIGKILL');
	console.log(`# killed the fake ${f.name}; its log: ${readFileSync(f.log, 'utf8').split('\n').slice(-5).join(' | ')}`);
}
if (!tap.failed)
	rmSync(T, { recursive: true, force: true });
else
	console.log(`# kept ${T}`);
process.exit(tap.finish());
