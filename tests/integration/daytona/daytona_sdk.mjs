// tests/integration/daytona/daytona_sdk.mjs - holds the fake Daytona service
// (tests/fakes/daytona/fake_daytona.py) to the real protocol: the official Daytona SDK
// (@daytonaio/sdk) drives it through every path the daytona plugin takes, and every check
// looks at what the SDK makes of the answers, at the wire the fake recorded, and at the
// effects (a file a command reads back, a process gone, a network that does not reach, a
// sandbox's tree removed, no process of the fake left after SIGTERM). Prints TAP. Run by
// daytona-sdk.test through run-node.sh, which installs the pinned SDK and copies this file
// next to its node_modules. No request may reach the real Daytona: every client is given
// the fake's URL and key, and the DAYTONA_* variables are removed before the first call.
import {
	Daytona, DaytonaError, DaytonaNotFoundError, DaytonaFileNotFoundError, DaytonaAuthenticationError,
	DaytonaRateLimitError, DaytonaServiceUnavailableError, DaytonaInternalServerError, DaytonaTimeoutError,
	DaytonaProcessExecutionTimeoutError, DaytonaProcessNotFoundError, DaytonaValidationError,
	DaytonaConflictError, DaytonaConnectionError,
} from '@daytonaio/sdk';
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, openSync, readFileSync, readdirSync, existsSync, rmSync } from 'node:fs';
import { tmpdir, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Tap, sleep, pidAlive } from './tap.mjs';

const srcdir = process.env.AKS_TEST_SRCDIR;
if (!srcdir) {
	console.log('Bail out! AKS_TEST_SRCDIR is not set (run through make check)');
	process.exit(1);
}
const FAKE = join(srcdir, 'tests/fakes/daytona/fake_daytona.py');
const T = mkdtempSync(join(tmpdir(), 'aks-daytona-sdk.'));
const STATE = join(T, 'state'), RECORD = join(T, 'record.jsonl'), LOG = join(T, 'fake.log');
const KEY = `dtn_${randomBytes(32).toString('hex')}`;
const RUN = randomBytes(4).toString('hex');       // this run's sandboxes carry it in their labels
const mark = (n) => `${1000 + n}.${parseInt(RUN, 16)}`; // sleeps only this run starts
const MINUTE_S = 2;                               // the fake's auto-stop minute, in seconds

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
const describe = (e) => (e ? `${e.constructor?.name}: ${e.message} (status ${e.statusCode}, code ${e.code}, source ${e.source})` : 'no error');

// What the fake recorded, one object per request; header names lower-cased.
function records() {
	return readFileSync(RECORD, 'utf8').trim().split('\n').map((line) => {
		const r = JSON.parse(line);
		r.headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k.toLowerCase(), v]));
		return r;
	});
}
const recorded = (method, path) => records().filter((r) => r.method === method && r.path === path);

let URL_ = '';
async function admin(method, path, body) {
	const res = await fetch(`${URL_}/_fake/${path}`, { method, body: body === undefined ? undefined : JSON.stringify(body) });
	return res.status === 204 ? null : res.json();
}
const fault = (spec) => admin('POST', 'faults', spec);
const fakeSandbox = async (id) => (await admin('GET', 'sandboxes')).find((s) => s.id === id);

// The pids of the live processes whose command line holds text.
function processesWith(text) {
	const found = [];
	for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
		try {
			if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text) && pidAlive(pid))
				found.push(Number(pid));
		} catch { /* gone meanwhile */ }
	}
	return found;
}

async function eventually(fn, ms = 3000) {
	const end = Date.now() + ms;
	let v;
	while (!(v = await fn()) && Date.now() < end)
		await sleep(50);
	return v;
}

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const fakeChains = (pid) => ['iptables', 'ip6tables'].flatMap((tool) =>
	execFileSync(tool, ['-w', '-S'], { encoding: 'utf8' }).split('\n').filter((l) => l.includes(`AKSFAKED-${pid}-`)));

// A TCP listener counting the connections that reach it.
async function listenOn(addr) {
	const l = { addr, accepted: 0 };
	l.server = createServer((c) => { l.accepted++; c.destroy(); });
	await new Promise((resolve, reject) => l.server.once('error', reject).listen(0, addr, resolve));
	l.port = l.server.address().port;
	return l;
}
// What a sandbox makes of connecting to ADDR:PORT: "connected" or the error's name.
const PROBE = `import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except OSError as e:
    print(type(e).__name__)
`;
const probe = async (sbx, l) => (await sbx.process.executeCommand(`python3 /tmp/probe.py ${l.addr} ${l.port}`)).result.trim();

async function startFake() {
	mkdirSync(STATE);
	const argv = [process.env.PYTHON || 'python3', FAKE, '--record', RECORD, '--state', STATE,
		'--minute-seconds', String(MINUTE_S)];
	const fake = spawn(argv[0], argv.slice(1), {
		env: { ...process.env, FAKE_DAYTONA_API_KEY: KEY }, stdio: ['ignore', 'pipe', openSync(LOG, 'a')],
	});
	const url = await new Promise((resolve, reject) => {
		let out = '';
		fake.stdout.on('data', (d) => {
			out += d;
			const m = out.match(/^listening on (http:\/\/127\.0\.0\.1:\d+)\n/);
			if (m)
				resolve(m[1]);
		});
		fake.on('exit', (code, sig) => reject(new Error(`the fake exited (${code ?? sig})`)));
		setTimeout(() => reject(new Error('the fake did not start in 15 s')), 15000);
	});
	return { fake, url };
}

// ---- the scenarios ----------------------------------------------------------

let daytona;   // the client: the SDK's defaults (its socket.io events included)
const labelsOf = (role) => ({ suite: 'daytona-sdk', run: RUN, role });

async function createScenario() {
	const labels = labelsOf('main');
	const envVars = { AKS_DAYTONA: 'hello world', QUOTED: `it's "quoted" $HOME` };
	const name = `aks-main-${RUN}`;
	const sbx = await daytona.create({
		name, image: 'python:3.12-slim', language: 'python', envVars, labels, autoStopInterval: 60,
		resources: { cpu: 2, memory: 4 },
	}, { timeout: 30 });
	check('create from an image: a started sandbox with a UUID id', sbx.state === 'started' &&
		/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(sbx.id), `${sbx.state} ${sbx.id}`);
	const create = recorded('POST', '/api/sandbox').find((r) => r.body?.labels?.role === 'main');
	check('create: the wire body is name, buildInfo (a Dockerfile), env, labels with code-toolbox-language, target, cpu, memory, autoStopInterval',
		isDeepStrictEqual(create?.body, {
			name, buildInfo: { dockerfileContent: 'FROM python:3.12-slim\n' }, env: envVars,
			labels: { ...labels, 'code-toolbox-language': 'python' }, target: 'us', cpu: 2, memory: 4, autoStopInterval: 60,
		}), JSON.stringify(create?.body));
	check('create: Bearer API key (recorded redacted), the SDK\'s version and source headers',
		create?.headers.authorization === '<redacted>' && create?.headers['x-daytona-sdk-version'] === '0.218.0' &&
		create?.headers['x-daytona-source'] === 'sdk-typescript' && create?.headers['user-agent'] === 'sdk-typescript/0.218.0',
		JSON.stringify(create?.headers));
	check('create: the DTO echoes resources (cpu 2, memory 4 GiB, default disk 3), user, target, env, labels, autoStopInterval',
		sbx.cpu === 2 && sbx.memory === 4 && sbx.disk === 3 && sbx.gpu === 0 && sbx.user === 'daytona' && sbx.target === 'us' &&
		isDeepStrictEqual(sbx.env, envVars) && sbx.labels.role === 'main' && sbx.autoStopInterval === 60 &&
		sbx.buildInfo?.dockerfileContent === 'FROM python:3.12-slim\n' && sbx.networkBlockAll === false && sbx.name === name,
		JSON.stringify({ cpu: sbx.cpu, memory: sbx.memory, disk: sbx.disk, user: sbx.user, env: sbx.env, auto: sbx.autoStopInterval }));
	check('create: the DTO\'s toolboxProxyUrl is the fake\'s /toolbox', sbx.toolboxProxyUrl === `${URL_}/toolbox`, sbx.toolboxProxyUrl);
	const proxy = await (await fetch(`${URL_}/api/sandbox/${sbx.id}/toolbox-proxy-url`, { headers: { Authorization: `Bearer ${KEY}` } })).json();
	check('GET /api/sandbox/{id}/toolbox-proxy-url: {url}, the same URL', isDeepStrictEqual(proxy, { url: `${URL_}/toolbox` }),
		JSON.stringify(proxy));
	const polls = recorded('GET', `/api/sandbox/${sbx.id}`);
	check('create answers \'creating\': the SDK polled GET /api/sandbox/{id} until \'started\'', polls.length >= 1, `${polls.length} polls`);

	const got = await daytona.get(name);
	check('get by name: the same sandbox, started, with its env and labels',
		got.id === sbx.id && got.state === 'started' && isDeepStrictEqual(got.env, envVars) && got.labels.run === RUN);
	const found = [];
	for await (const s of daytona.list({ labels: { run: RUN, role: 'main' } }))
		found.push(s.id);
	const list = recorded('GET', '/api/sandbox').at(-1);
	check('list by labels: this sandbox and only it; labels sent as a JSON query parameter',
		isDeepStrictEqual(found, [sbx.id]) && isDeepStrictEqual(JSON.parse(list?.query.labels ?? 'null'), { run: RUN, role: 'main' }),
		`${JSON.stringify(found)} ${JSON.stringify(list?.query)}`);
	return sbx;
}

async function commandScenarios(sbx) {
	const r = await sbx.process.executeCommand('echo out; echo err >&2; pwd; echo "$AKS_DAYTONA"; echo "$QUOTED"');
	check('executeCommand: exit code 0, stdout and stderr merged in result, cwd /home/daytona, the sandbox\'s env',
		r.exitCode === 0 && r.result === 'out\nerr\n/home/daytona\nhello world\nit\'s "quoted" $HOME\n', JSON.stringify(r));
	const r3 = await sbx.process.executeCommand('echo before; exit 3');
	check('executeCommand: a non-zero exit code is an answer, not an error', r3.exitCode === 3 && r3.result === 'before\n', JSON.stringify(r3));
	const rc = await sbx.process.executeCommand('pwd; echo "$X"', '/tmp', { X: 'per command' });
	const wire = recorded('POST', `/toolbox/${sbx.id}/process/execute`).at(-1);
	check('executeCommand with cwd and env: both hold; the wire body is {command, cwd, envs}',
		rc.result === '/tmp\nper command\n' &&
		isDeepStrictEqual(wire?.body, { command: 'pwd; echo "$X"', cwd: '/tmp', envs: { X: 'per command' } }),
		`${JSON.stringify(rc)} ${JSON.stringify(wire?.body)}`);
	check('toolbox requests carry the API key as a Bearer token (recorded redacted)', wire?.headers.authorization === '<redacted>');
	const env = (await sbx.process.executeCommand('env')).result;
	check('a command\'s environment: the DAYTONA_SANDBOX_* variables, never the API key',
		env.includes(`DAYTONA_SANDBOX_ID=${sbx.id}\n`) && env.includes('DAYTONA_SANDBOX_USER=daytona\n') && !env.includes(KEY), env);

	const t0 = Date.now();
	const te = await rejection(sbx.process.executeCommand(`sleep ${mark(1)}; echo never`, undefined, undefined, 1));
	check('executeCommand timeout 1 s: DaytonaProcessExecutionTimeoutError (a DaytonaTimeoutError), 408 PROCESS_EXECUTION_TIMEOUT',
		te instanceof DaytonaProcessExecutionTimeoutError && te instanceof DaytonaTimeoutError && te.statusCode === 408 &&
		te.code === 'PROCESS_EXECUTION_TIMEOUT' && te.source === 'DAYTONA_DAEMON' && Date.now() - t0 < 4000, describe(te));
	check('... the timed-out command was killed (no such sleep on the host)',
		await eventually(() => processesWith(`sleep ${mark(1)}`).length === 0), `${processesWith(`sleep ${mark(1)}`)}`);
}

async function sessionScenarios(sbx) {
	await sbx.process.createSession('main');
	const a = await sbx.process.executeSessionCommand('main', { command: 'cd /tmp && export FOO=bar' });
	const b = await sbx.process.executeSessionCommand('main', { command: 'echo "$FOO"; pwd; echo "$AKS_DAYTONA"; echo oops >&2; false' });
	check('session: cwd and exported variables persist between commands; the sandbox\'s env is there',
		a.exitCode === 0 && b.stdout === 'bar\n/tmp\nhello world\n', JSON.stringify(b));
	check('session exec (sync): stdout and stderr separate, exit code of the last command, a cmdId',
		b.exitCode === 1 && b.stderr === 'oops\n' && /^[0-9a-f-]{36}$/.test(b.cmdId), JSON.stringify(b));
	check('session exec (sync): output holds both streams with the daemon\'s markers',
		b.output.includes('\x01\x01\x01bar\n') && b.output.includes('\x02\x02\x02oops\n'), JSON.stringify(b.output));
	const exec = recorded('POST', `/toolbox/${sbx.id}/process/session/main/exec`).at(-1);
	check('session exec: the wire body is {command}; the SDK version header asks for split output',
		isDeepStrictEqual(exec?.body, { command: 'echo "$FOO"; pwd; echo "$AKS_DAYTONA"; echo oops >&2; false' }) &&
		exec?.headers['x-daytona-sdk-version'] === '0.218.0', JSON.stringify(exec));

	const command = 'echo start; sleep 1; echo done >&2; (exit 4)';
	const c = await sbx.process.executeSessionCommand('main', { command, runAsync: true });
	const asyncWire = recorded('POST', `/toolbox/${sbx.id}/process/session/main/exec`).at(-1);
	check('session exec async: a cmdId at once, no exit code yet; runAsync on the wire',
		/^[0-9a-f-]{36}$/.test(c.cmdId) && c.exitCode == null && asyncWire?.body.runAsync === true, JSON.stringify(c));
	const early = await sbx.process.getSessionCommand('main', c.cmdId);
	check('getSessionCommand while it runs: its command, no exitCode', early.command === command && early.exitCode === undefined,
		JSON.stringify(early));
	const done = await eventually(async () => (await sbx.process.getSessionCommand('main', c.cmdId)).exitCode === 4, 5000);
	check('getSessionCommand after it ends: exitCode 4', done);
	const logs = await sbx.process.getSessionCommandLogs('main', c.cmdId);
	check('getSessionCommandLogs: stdout and stderr separate (JSON), output with both',
		logs.stdout === 'start\n' && logs.stderr === 'done\n' && logs.output.includes('start\n') && logs.output.includes('done\n'),
		JSON.stringify(logs));
	const session = await sbx.process.getSession('main');
	check('getSession: its commands in order with their exit codes',
		isDeepStrictEqual(session.commands.map((x) => [x.id, x.exitCode]), [[a.cmdId, 0], [b.cmdId, 1], [c.cmdId, 4]]),
		JSON.stringify(session));
	const dup = await rejection(sbx.process.createSession('main'));
	check('createSession of an existing id: DaytonaConflictError (409)', dup instanceof DaytonaConflictError && dup.statusCode === 409, describe(dup));

	await sbx.process.createSession('bg');
	await sbx.process.executeSessionCommand('bg', { command: `sleep ${mark(2)} | cat`, runAsync: true });
	const running = await eventually(() => processesWith(`sleep ${mark(2)}`).length === 1);
	const t0 = Date.now();
	await sbx.process.deleteSession('bg');
	const took = Date.now() - t0;
	check('deleteSession kills what the session runs (its process tree): the sleep is gone when it returns',
		running && processesWith(`sleep ${mark(2)}`).length === 0 && took < 5000, `running ${running}, took ${took} ms, left ${processesWith(`sleep ${mark(2)}`)}`);
	const after = await rejection(sbx.process.getSession('bg'));
	check('getSession of a deleted session: DaytonaProcessNotFoundError (404 PROCESS_NOT_FOUND)',
		after instanceof DaytonaProcessNotFoundError && after instanceof DaytonaNotFoundError && after.code === 'PROCESS_NOT_FOUND', describe(after));
	const sessions = (await sbx.process.listSessions()).map((s) => s.sessionId);
	check('listSessions: the one left', isDeepStrictEqual(sessions, ['main']), JSON.stringify(sessions));
}

async function codeScenarios(sbx) {
	const c1 = await sbx.process.codeRun('import sys\nprint("py", sys.version_info[0])\nprint(sum(range(10)))');
	check('codeRun (python): exit code 0 and the output', c1.exitCode === 0 && c1.result === 'py 3\n45\n', JSON.stringify(c1));
	const c2 = await sbx.process.codeRun('import sys\nprint("bye")\nsys.exit(5)');
	check('codeRun: a non-zero exit code', c2.exitCode === 5 && c2.result === 'bye\n', JSON.stringify(c2));
	const c3 = await sbx.process.codeRun('1/0');
	check('codeRun: an exception is exit code 1 with the traceback in result', c3.exitCode === 1 && /ZeroDivisionError/.test(c3.result),
		JSON.stringify(c3));
	const c4 = await sbx.process.codeRun('import os, sys\nprint(sys.argv[1:], os.environ["ONLY"], os.getcwd())', { argv: ['a', 'b'], env: { ONLY: 'x' } });
	const wire = recorded('POST', `/toolbox/${sbx.id}/process/code-run`).at(-1);
	check('codeRun with argv and env: both hold; the wire body is {code, language: python, argv, envs}',
		c4.result === "['a', 'b'] x /home/daytona\n" &&
		isDeepStrictEqual(wire?.body, { code: 'import os, sys\nprint(sys.argv[1:], os.environ["ONLY"], os.getcwd())', language: 'python', argv: ['a', 'b'], envs: { ONLY: 'x' } }),
		`${JSON.stringify(c4)} ${JSON.stringify(wire?.body)}`);
}

async function fileScenarios(sbx) {
	const data = Buffer.alloc(1 << 20);
	for (let i = 0; i < data.length; i++)
		data[i] = (i * 7 + (i >> 8)) & 255;
	const sum = sha256(data);
	await sbx.fs.uploadFile(data, 'blob.bin');
	const up = recorded('POST', `/toolbox/${sbx.id}/files/bulk-upload`).at(-1);
	check('uploadFile: a multipart bulk-upload of the whole MiB',
		/^multipart\/form-data; ?boundary=/.test(up?.headers['content-type']) && up?.body_bytes > (1 << 20), JSON.stringify(up?.headers));
	const back = await sbx.fs.downloadFile('blob.bin');
	check('downloadFile: the same 1 MiB, every byte value', Buffer.isBuffer(back) && Buffer.compare(back, data) === 0,
		`${back?.length} bytes, sha256 ${back && sha256(back)}`);
	const seen = await sbx.process.executeCommand('sha256sum /home/daytona/blob.bin');
	check('a command sees the uploaded bytes (a relative path is under /home/daytona)', seen.result.startsWith(`${sum} `), seen.result);
	const inTree = join(STATE, sbx.id, 'home/daytona/blob.bin');
	check('they are in the sandbox\'s tree in the fake\'s state directory', existsSync(inTree) && sha256(readFileSync(inTree)) === sum);
	await sbx.process.executeCommand("printf 'from a command' > /tmp/cmd.txt");
	check('downloadFile of what a command wrote', (await sbx.fs.downloadFile('/tmp/cmd.txt')).toString() === 'from a command');

	const f = await sbx.fs.getFileDetails('blob.bin');
	check('getFileDetails of a file: name, size, mode -rw-r--r--, permissions 0644, isDir false',
		f.name === 'blob.bin' && f.size === 1 << 20 && f.mode === '-rw-r--r--' && f.permissions === '0644' && f.isDir === false,
		JSON.stringify(f));
	check('getFileDetails: modTime as Go\'s time.String(), modifiedAt in RFC 3339, both now',
		/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? \+0000 UTC$/.test(f.modTime) && Math.abs(Date.parse(f.modifiedAt) - Date.now()) < 60_000,
		`${f.modTime} ${f.modifiedAt}`);
	const d = await sbx.fs.getFileDetails('/home/daytona');
	check('getFileDetails of a directory: isDir, mode drwxr-xr-x', d.isDir === true && d.mode === 'drwxr-xr-x' && d.name === 'daytona',
		JSON.stringify(d));
	await sbx.process.executeCommand('mkfifo /home/daytona/pipe');
	const p = await sbx.fs.getFileDetails('pipe');
	check('getFileDetails of a FIFO (mkfifo): mode prw-r--r--, not a directory', p.mode === 'prw-r--r--' && p.isDir === false,
		JSON.stringify(p));
	const missing = await rejection(sbx.fs.getFileDetails('missing.txt'));
	check('getFileDetails of a missing file: DaytonaFileNotFoundError (404 FILE_NOT_FOUND from the daemon)',
		missing instanceof DaytonaFileNotFoundError && missing.statusCode === 404 && missing.code === 'FILE_NOT_FOUND' &&
		missing.source === 'DAYTONA_DAEMON' && /no such file or directory/.test(missing.message), describe(missing));
	const dmissing = await rejection(sbx.fs.downloadFile('missing.txt'));
	check('downloadFile of a missing file: DaytonaFileNotFoundError (the bulk answer\'s error part)',
		dmissing instanceof DaytonaFileNotFoundError && dmissing.statusCode === 404, describe(dmissing));
	const ddir = await rejection(sbx.fs.downloadFile('/home/daytona'));
	check('downloadFile of a directory: a 400 DaytonaError, not "not found"',
		ddir instanceof DaytonaError && !(ddir instanceof DaytonaNotFoundError) && ddir.statusCode === 400 && /directory/.test(ddir.message),
		describe(ddir));
	const names = (await sbx.fs.listFiles('.')).map((e) => e.name);
	check('listFiles: the uploaded file and the FIFO', names.includes('blob.bin') && names.includes('pipe') && !names.includes('.'),
		JSON.stringify(names));
	await sbx.fs.createFolder('d/e', '750');
	const de = await sbx.fs.getFileDetails('d/e');
	check('createFolder with mode 750: both levels made, drwxr-x---', de.isDir && de.mode === 'drwxr-x---', JSON.stringify(de));
	const nr = await rejection(sbx.fs.deleteFile('d'));
	await sbx.fs.deleteFile('d', true);
	const gone = await rejection(sbx.fs.getFileDetails('d'));
	check('deleteFile of a directory: refused without recursive (400), done with it',
		nr instanceof DaytonaValidationError && nr.statusCode === 400 && gone instanceof DaytonaFileNotFoundError, `${describe(nr)}; ${describe(gone)}`);
	const ro = await rejection(sbx.fs.uploadFile(Buffer.from('x'), `/etc/aks-daytona-${RUN}`));
	check('uploadFile outside /home/daytona and /tmp: refused (400, a read-only root), the host untouched',
		ro instanceof DaytonaError && ro.statusCode === 400 && !existsSync(`/etc/aks-daytona-${RUN}`), describe(ro));
	await sbx.fs.uploadFile(Buffer.from(PROBE), '/tmp/probe.py');
}

async function validationScenarios() {
	const creates = () => recorded('POST', '/api/sandbox').length;
	const before = creates();
	const res = await rejection(daytona.create({ snapshot: 'daytonaio/sandbox:0.4.3', resources: { cpu: 2 }, labels: labelsOf('bad') }));
	check('create from a snapshot with resources: DaytonaValidationError 400, Daytona\'s message',
		res instanceof DaytonaValidationError && res.statusCode === 400 && res.message === 'Cannot specify Sandbox resources when using a snapshot',
		describe(res));
	const both = await rejection(daytona.create({ snapshot: 'daytonaio/sandbox:0.4.3', image: 'python:3.12', labels: labelsOf('bad') }));
	check('create with a snapshot and an image: 400 (a snapshot with a build info)',
		both instanceof DaytonaValidationError && /Cannot specify a snapshot when using a build info entry/.test(both.message), describe(both));
	const notCidr = await rejection(daytona.create({ networkAllowList: 'example.com', labels: labelsOf('bad') }));
	const noPrefix = await rejection(daytona.create({ networkAllowList: '10.0.0.1', labels: labelsOf('bad') }));
	const eleven = Array.from({ length: 11 }, (_, i) => `10.0.${i}.0/24`).join(',');
	const tooMany = await rejection(daytona.create({ networkAllowList: eleven, labels: labelsOf('bad') }));
	check('networkAllowList: a non-CIDR entry, a missing prefix, more than 10 networks: each a 400 with Daytona\'s message',
		notCidr instanceof DaytonaValidationError && /Invalid IP address: "example.com"/.test(notCidr.message) &&
		noPrefix?.statusCode === 400 && /Missing CIDR prefix length/.test(noPrefix.message) &&
		tooMany?.statusCode === 400 && /more than 10 networks/.test(tooMany.message),
		[notCidr, noPrefix, tooMany].map(describe).join('; '));
	const left = (await admin('GET', 'sandboxes')).filter((s) => s.labels.role === 'bad');
	check('... they reached the API and made no sandbox', creates() === before + 5 && left.length === 0, `${creates() - before} creates`);
}

async function networkScenarios(main) {
	const lo = await listenOn('127.0.0.1');
	const off = await daytona.create({ networkBlockAll: true, labels: labelsOf('offline') });
	const body = recorded('POST', '/api/sandbox').find((r) => r.body?.labels?.role === 'offline')?.body;
	check('create from the default snapshot with networkBlockAll: no buildInfo, networkBlockAll true on the wire and in the DTO',
		body && !('buildInfo' in body) && !('snapshot' in body) && body.networkBlockAll === true && off.networkBlockAll === true &&
		off.snapshot && off.cpu === 1 && off.memory === 1, JSON.stringify(body));
	await off.fs.uploadFile(Buffer.from(PROBE), '/tmp/probe.py');
	const mainSees = await probe(main, lo);
	const offSees = await probe(off, lo);
	check(`networkBlockAll: the sandbox cannot connect to a listener on the host's 127.0.0.1 (a sandbox without it can)`,
		mainSees === 'connected' && offSees !== 'connected' && lo.accepted === 1, `main ${mainSees}, offline ${offSees}, accepted ${lo.accepted}`);
	const dev = (await off.process.executeCommand('tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "')).result;
	check('... it has no interface but loopback', dev === 'lo\n', dev);

	// networkAllowList: only those networks (the fake's iptables chain for the sandbox's group).
	const other = Object.values(networkInterfaces()).flat().find((a) => a.family === 'IPv4' && !a.internal)?.address;
	if (!other)
		check('networkAllowList: this host has an IPv4 address besides the loopback to test it with', false);
	const out = other ? await listenOn(other) : null;
	const allow = await daytona.create({ networkAllowList: '127.0.0.1/32', labels: labelsOf('allow') });
	const fake = await fakeSandbox(allow.id);
	await allow.fs.uploadFile(Buffer.from(PROBE), '/tmp/probe.py');
	const toLo = await probe(allow, lo);
	const toOther = out ? await probe(allow, out) : 'no other address';
	check('networkAllowList 127.0.0.1/32: echoed in the DTO; 127.0.0.1 is reached, the host\'s other address is not',
		allow.networkAllowList === '127.0.0.1/32' && toLo === 'connected' && toOther !== 'connected' && out?.accepted === 0 &&
		fake?.chains.length === 1, `${allow.networkAllowList}: lo ${toLo}, ${other} ${toOther}, chains ${JSON.stringify(fake?.chains)}`);
	await allow.delete();
	check('... deleted: its iptables chain is gone', fakeChains(FAKE_PID).length === 0, fakeChains(FAKE_PID).join('\n'));
	lo.server.close();
	out?.server.close();
	return off;
}

async function lifeScenarios(off) {
	await off.process.executeCommand(`sleep ${mark(3)} >/dev/null 2>&1 &`);
	const running = await eventually(() => processesWith(`sleep ${mark(3)}`).length === 1);
	await off.fs.uploadFile(Buffer.from('kept across a stop'), 'kept.txt');
	await off.stop();
	// a killed process may take a moment to be reaped on a loaded machine
	const gone = await eventually(() => processesWith(`sleep ${mark(3)}`).length === 0);
	check('stop: the SDK waits for \'stopped\'; the sandbox\'s processes are gone',
		off.state === 'stopped' && running && gone, `${off.state} ${running} ${gone}`);
	const stopped = await rejection(off.process.executeCommand('true'));
	check('a toolbox request to a stopped sandbox: 400 "Is the Sandbox started?"',
		stopped instanceof DaytonaError && stopped.statusCode === 400 && /Is the Sandbox started\?/.test(stopped.message), describe(stopped));
	await off.start();
	const kept = await off.fs.downloadFile('kept.txt');
	const back = await off.process.executeCommand('echo back');
	check('start: \'started\' again, the files kept, commands run', off.state === 'started' &&
		kept.toString() === 'kept across a stop' && back.result === 'back\n', `${off.state} ${kept}`);
	check('stop and start on the wire: POST /api/sandbox/{id}/stop and /start',
		recorded('POST', `/api/sandbox/${off.id}/stop`).length === 1 && recorded('POST', `/api/sandbox/${off.id}/start`).length === 1);
}

async function slowStartScenario() {
	await fault({ start_delay_s: 2, path_prefix: '/api/sandbox', method: 'POST' });
	let sawCreating = false, polling = true;
	const watcher = (async () => {
		while (polling) {
			sawCreating ||= (await admin('GET', 'sandboxes')).some((s) => s.labels.role === 'slow' && s.state === 'creating');
			await sleep(100);
		}
	})();
	const t0 = Date.now();
	const slow = await daytona.create({ labels: labelsOf('slow') });
	const took = Date.now() - t0;
	polling = false;
	await watcher;
	const polls = recorded('GET', `/api/sandbox/${slow.id}`).length;
	check('slow start (2 s): the sandbox stays \'creating\', the SDK polls GET until \'started\'',
		slow.state === 'started' && sawCreating && took >= 1900 && polls >= 2, `took ${took} ms, ${polls} polls, creating seen ${sawCreating}`);
	return slow;
}

async function faultScenarios(sbx) {
	const id = sbx.id;
	await fault({ status: 429, retry_after: 3, path_prefix: `/api/sandbox/${id}`, method: 'GET' });
	const e429 = await rejection(daytona.get(id));
	check('fault 429: DaytonaRateLimitError with Retry-After and the throttler\'s message',
		e429 instanceof DaytonaRateLimitError && e429.statusCode === 429 && e429.headers?.['retry-after'] === '3' &&
		e429.message === 'ThrottlerException: Too Many Requests', describe(e429));
	await fault({ status: 503, path_prefix: `/api/sandbox/${id}`, method: 'GET' });
	const e503 = await rejection(daytona.get(id));
	check('fault 503: DaytonaServiceUnavailableError', e503 instanceof DaytonaServiceUnavailableError && e503.statusCode === 503, describe(e503));
	await fault({ status: 500, message: 'boom', target: 'toolbox', path_prefix: `/toolbox/${id}/process/execute` });
	const e500 = await rejection(sbx.process.executeCommand('true'));
	check('fault 500 on the toolbox: DaytonaInternalServerError with the message',
		e500 instanceof DaytonaInternalServerError && e500.message === 'boom', describe(e500));
	const execs = recorded('POST', `/toolbox/${id}/process/execute`).length;
	await fault({ drop: true, path_prefix: `/toolbox/${id}/process/execute` });
	const dropped = await rejection(sbx.process.executeCommand('true'));
	check('fault drop on a POST: DaytonaConnectionError, not retried',
		dropped instanceof DaytonaConnectionError && recorded('POST', `/toolbox/${id}/process/execute`).length === execs + 1, describe(dropped));
	const gets = recorded('GET', `/api/sandbox/${id}`).length;
	await fault({ drop: true, path_prefix: `/api/sandbox/${id}`, method: 'GET' });
	const retried = await rejection(daytona.get(id));
	check('fault drop on a GET: the SDK retries it (idempotent) and succeeds',
		retried === null && recorded('GET', `/api/sandbox/${id}`).length === gets + 2, describe(retried));
	// axios hands a body that is not JSON over as a string: the SDK does not notice on the
	// toolbox (no exit code, no result), and fails on the API when it reads the DTO.
	await fault({ malformed: true, path_prefix: `/toolbox/${id}/process/execute` });
	const cut = await sbx.process.executeCommand('echo fine');
	const next = await sbx.process.executeCommand('echo next');
	check('fault malformed on the toolbox (a cut JSON answer): the SDK reads no exit code and no result; the next call is fine',
		cut.exitCode === undefined && cut.result === '' && next.result === 'next\n', JSON.stringify(cut));
	await fault({ malformed: true, path_prefix: `/api/sandbox/${id}`, method: 'GET' });
	const badDto = await rejection(daytona.get(id));
	check('fault malformed on the API: daytona.get fails (no sandbox id in what it read)',
		badDto instanceof Error && !(badDto instanceof DaytonaNotFoundError) && /sandboxId/.test(badDto.message), describe(badDto));
	const impatient = new Daytona({ apiUrl: `${URL_}/api`, apiKey: KEY, target: 'us', requestTimeoutMs: 300, useDeprecatedPolling: true });
	await fault({ delay_ms: 1500, path_prefix: `/api/sandbox/${id}`, method: 'GET' });
	const t0 = Date.now();
	const slow = await rejection(impatient.get(id));
	check('fault delay past requestTimeoutMs: DaytonaTimeoutError after about 300 ms',
		slow instanceof DaytonaTimeoutError && Date.now() - t0 < 1400, describe(slow));
	const left = await admin('GET', 'faults');
	check('every fault was used up', left.length === 0, JSON.stringify(left));

	const wrong = new Daytona({ apiUrl: `${URL_}/api`, apiKey: 'dtn_wrong', target: 'us', useDeprecatedPolling: true });
	const auth = await rejection(wrong.get(id));
	check('a wrong API key: DaytonaAuthenticationError (401 Invalid credentials)',
		auth instanceof DaytonaAuthenticationError && auth.statusCode === 401 && auth.message === 'Invalid credentials', describe(auth));
	const res = await fetch(`${URL_}/toolbox/${id}/process/execute`, {
		method: 'POST', headers: { Authorization: 'Bearer dtn_wrong', 'Content-Type': 'application/json' }, body: '{"command":"true"}',
	});
	const body = await res.json();
	check('a wrong API key on the toolbox: the proxy\'s 401 ErrorResponse', res.status === 401 && body.statusCode === 401 &&
		body.code === 'UNAUTHORIZED' && body.source === 'DAYTONA_PROXY' && typeof body.timestamp === 'string', JSON.stringify(body));
}

async function endScenarios(main, slow, idle) {
	await main.setAutostopInterval(0);
	check('setAutostopInterval(0): POST /api/sandbox/{id}/autostop/0, the DTO says 0',
		main.autoStopInterval === 0 && recorded('POST', `/api/sandbox/${main.id}/autostop/0`).length === 1, `${main.autoStopInterval}`);
	const idleFor = Date.now() - idle.created;
	if (idleFor < 3 * MINUTE_S * 1000)
		await sleep(3 * MINUTE_S * 1000 - idleFor);
	await idle.sbx.refreshData();
	check(`auto-stop: a sandbox with autoStopInterval 1, idle (the fake's minute is ${MINUTE_S} s), is 'stopped'`,
		idle.sbx.state === 'stopped' && idle.sbx.autoStopInterval === 1, idle.sbx.state);

	const ids = [];
	for await (const s of daytona.list({ labels: { run: RUN }, limit: 2 }))
		ids.push(s.id);
	const pages = recorded('GET', '/api/sandbox').filter((r) => r.query.limit === '2');
	check('list with limit 2: every sandbox of this run, page by page (nextCursor, then cursor=)',
		ids.length === 4 && new Set(ids).size === 4 && pages.length === 2 && !pages[0].query.cursor && pages[1].query.cursor,
		`${ids.length} ids, ${pages.length} pages`);

	const fake = await fakeSandbox(slow.id);
	await admin('POST', `sandboxes/${slow.id}/kill`);
	const afterKill = await rejection(slow.process.executeCommand('true'));
	check('killed behind the client\'s back: the toolbox answers the proxy\'s 401 (DaytonaAuthenticationError)',
		afterKill instanceof DaytonaAuthenticationError && afterKill.source === 'DAYTONA_PROXY', describe(afterKill));
	check('... its agent is gone and its tree removed', !pidAlive(fake.agentPid) && !existsSync(fake.root));

	await main.delete();
	const del = recorded('DELETE', `/api/sandbox/${main.id}`);
	const gone = await rejection(daytona.get(main.id));
	check('delete, then get: DaytonaNotFoundError (404, Daytona\'s message)',
		del.length === 1 && gone instanceof DaytonaNotFoundError && gone.statusCode === 404 &&
		gone.message === `Sandbox with ID or name ${main.id} not found`, describe(gone));
	check('... its tree is removed', !existsSync(join(STATE, main.id)));
	const again = await rejection(main.delete());
	check('delete again: DaytonaNotFoundError', again instanceof DaytonaNotFoundError, describe(again));
}

async function shutdown(fake, left) {
	const sockets = recorded('GET', '/api/socket.io/');
	check('the SDK tried its socket.io events (/api/socket.io/, a WebSocket), got a 404 and worked by polling',
		sockets.length >= 1 && sockets[0].query.transport === 'websocket', `${sockets.length} attempts`);
	const before = await fakeSandbox(left.id);
	const exited = new Promise((resolve) => fake.on('exit', (code, sig) => resolve(code ?? sig)));
	fake.kill('SIGTERM');
	const status = await Promise.race([exited, sleep(10_000).then(() => 'still running after 10 s')]);
	check('SIGTERM: the fake exits with 0', status === 0, `exit: ${status}`);
	const leftover = await eventually(() => processesWith(STATE).length === 0 && !pidAlive(fake.pid) && !pidAlive(before?.agentPid), 3000);
	check('no process of the fake is left (the fake, its sandboxes\' agents and what they ran)', leftover, `left: ${processesWith(STATE)}`);
	check('its state directory is empty', existsSync(STATE) && readdirSync(STATE).length === 0, readdirSync(STATE).join(' '));
	check('no iptables chain of the fake is left', fakeChains(fake.pid).length === 0);
	const text = readFileSync(RECORD, 'utf8') + readFileSync(LOG, 'utf8');
	check('the record and the log never hold the API key', !text.includes(KEY) && !text.includes(KEY.slice(4)));
	const auths = records().map((r) => r.headers.authorization).filter(Boolean);
	check('every Authorization header in the record is <redacted>', auths.length > 50 && auths.every((v) => v === '<redacted>'),
		`${auths.length} headers`);
}

// ---- main ---------------------------------------------------------------------

for (const k of Object.keys(process.env))
	if (k.startsWith('DAYTONA_'))
		delete process.env[k];
let fake, FAKE_PID = 0;
const t0 = Date.now();
try {
	let url;
	({ fake, url } = await startFake());
	URL_ = url;
	FAKE_PID = fake.pid;
	daytona = new Daytona({ apiUrl: `${url}/api`, apiKey: KEY, target: 'us' });
	const idle = { sbx: await daytona.create({ autoStopInterval: 1, labels: labelsOf('autostop') }), created: Date.now() };
	const main = await createScenario();
	await commandScenarios(main);
	await sessionScenarios(main);
	await codeScenarios(main);
	await fileScenarios(main);
	await validationScenarios();
	const off = await networkScenarios(main);
	await lifeScenarios(off);
	const slow = await slowStartScenario();
	await faultScenarios(main);
	await endScenarios(main, slow, idle);
	await shutdown(fake, off);
} catch (e) {
	tap.exception(e);
	if (fake && fake.exitCode === null)
		fake.kill('SIGKILL');
}
console.log(`# ${((Date.now() - t0) / 1000).toFixed(1)} s; the fake's record and log: ${T}`);
const status = tap.finish();
if (status === 0 && !process.env.AKS_DAYTONA_KEEP)
	rmSync(T, { recursive: true, force: true });
process.exit(status);
