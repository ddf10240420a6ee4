// tests/integration/e2b/e2b_sdk.mjs - holds the fake E2B service (tests/fakes/e2b/fake_e2b.py)
// to the real protocol: the official E2B SDKs (e2b, @e2b/code-interpreter) drive it, and
// every check looks at what the SDK makes of the answers, at the wire the fake recorded,
// and at the effects (a file a command reads back, a process gone, a sandbox's tree
// removed, egress rules that hold, a command's signals at their defaults, no process and
// no iptables chain of the fake left after SIGTERM). Prints TAP. Run by e2b-sdk.test
// through run-node.sh, which installs the pinned SDKs and copies this file next to their
// node_modules. No request may reach the real E2B: the SDK's every URL and key is the
// fake's, set in the environment before the first call.
import {
	Sandbox, CommandExitError, AuthenticationError, RateLimitError, ServiceBusyError,
	SandboxError, SandboxNotFoundError, FileNotFoundError, TimeoutError, ALL_TRAFFIC,
} from 'e2b';
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter';
import { spawn, execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import {
	mkdtempSync, mkdirSync, openSync, readFileSync, readdirSync, existsSync, rmSync,
} from 'node:fs';
import { tmpdir, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Tap, sleep, pidAlive } from './tap.mjs';

const srcdir = process.env.AKS_TEST_SRCDIR;
if (!srcdir) {
	console.log('Bail out! AKS_TEST_SRCDIR is not set (run through make check)');
	process.exit(1);
}
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 20 || (major === 20 && minor < 18)) {
	console.log(`Bail out! the E2B SDK needs Node.js >= 20.18.1, this is ${process.versions.node}`);
	process.exit(1);
}
const FAKE = join(srcdir, 'tests/fakes/e2b/fake_e2b.py');
const T = mkdtempSync(join(tmpdir(), 'aks-e2b-sdk.'));
const STATE = join(T, 'state'), RECORD = join(T, 'record.jsonl'), LOG = join(T, 'fake.log');
const KEY = `e2b_${randomBytes(20).toString('hex')}`;
const RUN = randomBytes(4).toString('hex');   // this run's sandboxes carry it in their metadata
const MARK = `1000.${parseInt(RUN, 16)}`;      // a sleep only this run starts
const tokens = [];                              // every envd access token the fake handed out

const tap = new Tap();
const check = tap.check.bind(tap);

// ---- helpers ----------------------------------------------------------------

// The error a promise rejects with (null: it did not).
async function rejection(promise) {
	try {
		await promise;
		return null;
	} catch (e) {
		return e;
	}
}
const describe = (e) => (e ? `${e.constructor?.name} ${e.name}: ${e.message}` : 'no error');

// What the fake recorded, one object per request; header names lower-cased.
function records() {
	return readFileSync(RECORD, 'utf8').trim().split('\n').map((line) => {
		const r = JSON.parse(line);
		r.headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k.toLowerCase(), v]));
		return r;
	});
}
const recorded = (method, path) => records().filter((r) => r.method === method && r.path === path);

let URL_ = '', FAKE_PID = 0;
async function admin(method, path, body) {
	const res = await fetch(`${URL_}/_fake/${path}`, {
		method, body: body === undefined ? undefined : JSON.stringify(body),
	});
	return res.status === 204 ? null : res.json();
}
const fault = (spec) => admin('POST', 'faults', spec);
const fakeSandbox = async (id) => (await admin('GET', 'sandboxes')).find((s) => s.sandboxID === id);

// The pids of the processes whose command line holds text.
function processesWith(text) {
	const found = [];
	for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
		try {
			if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text) &&
			    pidAlive(pid))
				found.push(Number(pid));
		} catch { /* gone meanwhile */ }
	}
	return found;
}

// fn() until it is truthy or ms have passed; its last value.
async function eventually(fn, ms = 3000) {
	const end = Date.now() + ms;
	let v;
	while (!(v = await fn()) && Date.now() < end)
		await sleep(50);
	return v;
}

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

// The fake's iptables and ip6tables chains (AKSFAKE-<its pid>-...), as `-S` lists them.
function fakeChains(pid) {
	const lines = [];
	for (const tool of ['iptables', 'ip6tables'])
		lines.push(...execFileSync(tool, ['-w', '-S'], { encoding: 'utf8' }).split('\n')
			.filter((l) => l.includes(`AKSFAKE-${pid}-`)).map((l) => `${tool} ${l}`));
	return lines;
}

// The signals a process ignores, from the SigIgn mask of /proc/PID/status.
function ignoredSignals(pid) {
	const mask = BigInt(`0x${readFileSync(`/proc/${pid}/status`, 'utf8').match(/^SigIgn:\s*(\S+)/m)[1]}`);
	return [...Array(64).keys()].map((i) => i + 1).filter((sig) => mask & (1n << BigInt(sig - 1)));
}

// A TCP listener and a UDP socket on addr, counting what reaches them.
async function listenOn(addr) {
	const l = { addr, accepted: 0, datagrams: 0 };
	l.tcp = createServer((c) => { l.accepted++; c.destroy(); });
	await new Promise((resolve, reject) => l.tcp.once('error', reject).listen(0, addr, resolve));
	l.udp = createSocket('udp4', () => l.datagrams++);
	await new Promise((resolve, reject) => l.udp.once('error', reject).bind(0, addr, resolve));
	l.tcpPort = l.tcp.address().port;
	l.udpPort = l.udp.address().port;
	l.close = () => { l.tcp.close(); l.udp.close(); };
	return l;
}

// What a sandbox reaches of the listeners: {"tcp ADDR": "connected" or the errno's name,
// "udp ADDR": "sent" or the errno's name}.
const NET_PROBE = `import errno, json, socket, sys
out = {}
for addr, tcp, udp in json.loads(sys.argv[1]):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((addr, tcp))
        out["tcp " + addr] = "connected"
    except OSError as e:
        out["tcp " + addr] = errno.errorcode.get(e.errno, str(e))
    s.close()
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.sendto(b"probe", (addr, udp))
        out["udp " + addr] = "sent"
    except OSError as e:
        out["udp " + addr] = errno.errorcode.get(e.errno, str(e))
print(json.dumps(out, sort_keys=True))
`;
async function netProbe(sbx, listeners) {
	const before = listeners.reduce((n, l) => n + l.datagrams, 0);
	const r = await sbx.commands.run(`python3 /tmp/net_probe.py '${JSON.stringify(listeners.map((l) => [l.addr, l.tcpPort, l.udpPort]))}'`);
	const seen = JSON.parse(r.stdout);
	// the datagrams that were sent have arrived (or never will)
	const sent = Object.entries(seen).filter(([k, v]) => k.startsWith('udp ') && v === 'sent').length;
	await eventually(() => listeners.reduce((n, l) => n + l.datagrams, 0) >= before + sent, 1000);
	return seen;
}
const netInterfaces = (text) => text.split('\n').slice(2).map((l) => l.split(':')[0].trim()).filter(Boolean).sort();

// ---- the fake ---------------------------------------------------------------

// The fake starts as a script's `fake_e2b.py &` starts it: with SIGINT and SIGQUIT ignored
// (a shell without job control does that). Its sandboxes' programs must not inherit that.
async function startFake() {
	mkdirSync(STATE);
	const argv = [process.env.PYTHON || 'python3', FAKE, '--record', RECORD, '--state', STATE];
	const fake = spawn('/bin/sh', ['-c', 'trap "" INT QUIT; exec "$@"', 'sh', ...argv], {
		env: { ...process.env, FAKE_E2B_API_KEY: KEY },
		stdio: ['ignore', 'pipe', openSync(LOG, 'a')],
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

async function createScenario() {
	const metadata = { suite: 'e2b-sdk', run: RUN, role: 'main' };
	const sbx = await CodeSandbox.create({ metadata, envs: { AKS_E2B: 'hello world' }, timeoutMs: 120_000 });
	tokens.push(sbx.envdAccessToken);
	check('create: a sandbox id as E2B makes them (20 of [a-z0-9])', /^[a-z0-9]{20}$/.test(sbx.sandboxId), sbx.sandboxId);
	const create = recorded('POST', '/v2/sandboxes').find((r) => r.body?.metadata?.role === 'main');
	check('create: the wire body is templateID, metadata, envVars and timeout in seconds, no network',
		isDeepStrictEqual(create?.body, { templateID: 'code-interpreter-v1', metadata, envVars: { AKS_E2B: 'hello world' }, timeout: 120 }),
		JSON.stringify(create?.body));
	check('create: the API key went as X-API-KEY (recorded redacted)', create?.headers['x-api-key'] === '<redacted>');
	const info = await sbx.getInfo();
	check('getInfo: its template, metadata, state and a 120 s life',
		info.sandboxId === sbx.sandboxId && info.templateId === 'code-interpreter-v1' &&
		isDeepStrictEqual(info.metadata, metadata) && info.state === 'running' &&
		Math.abs(info.endAt - info.startedAt - 120_000) < 2000, JSON.stringify(info));
	const listed = await Sandbox.list({ query: { metadata: { run: RUN, role: 'main' } } }).nextItems();
	check('list by metadata: this sandbox, and only it', isDeepStrictEqual(listed.map((s) => s.sandboxId), [sbx.sandboxId]),
		JSON.stringify(listed.map((s) => s.sandboxId)));
	return sbx;
}

async function commandScenarios(sbx) {
	const cmd = 'echo "out:$AKS_E2B"; echo err >&2; pwd; echo "user:$USER home:$HOME"';
	const r = await sbx.commands.run(cmd);
	check('run: stdout, stderr, exit code 0; the sandbox\'s envs, cwd /home/user, user "user"',
		r.exitCode === 0 && r.stdout === 'out:hello world\n/home/user\nuser:user home:/home/user\n' && r.stderr === 'err\n',
		JSON.stringify(r));
	const start = recorded('POST', '/process.Process/Start').at(-1);
	check('run: the wire is /bin/bash -l -c CMD and stdin false (optional: sent though false)',
		isDeepStrictEqual(start?.body, { process: { cmd: '/bin/bash', args: ['-l', '-c', cmd] }, stdin: false }),
		JSON.stringify(start?.body));
	check('run: Connect streaming headers, envd port and sandbox id, access token',
		start?.headers['content-type'] === 'application/connect+json' && start?.headers['connect-protocol-version'] === '1' &&
		start?.headers['connect-timeout-ms'] === '60000' && start?.headers['keepalive-ping-interval'] === '50' &&
		start?.headers['e2b-sandbox-port'] === '49983' && start?.headers['e2b-sandbox-id'] === sbx.sandboxId &&
		start?.headers['x-access-token'] === '<redacted>', JSON.stringify(start?.headers));

	const sigs = await sbx.commands.run('grep -E "^Sig(Blk|Ign)" /proc/self/status');
	const fakeIgnores = ignoredSignals(FAKE_PID);
	check('a command starts with every signal at its default and none blocked, though the fake ignores SIGQUIT',
		sigs.stdout === 'SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n' && fakeIgnores.includes(3),
		`${sigs.stdout}the fake ignores ${fakeIgnores}`);

	const r2 = await sbx.commands.run('pwd; echo "$X"', { cwd: '/tmp', envs: { X: 'per command' } });
	check('run with cwd and envs', r2.stdout === '/tmp\nper command\n', JSON.stringify(r2));

	const e = await rejection(sbx.commands.run('echo before; echo oops >&2; exit 7'));
	check('a non-zero exit: CommandExitError with exitCode, stdout, stderr and error',
		e instanceof CommandExitError && e.exitCode === 7 && e.stdout === 'before\n' && e.stderr === 'oops\n' &&
		e.error === 'exit status 7', describe(e));

	const seen = [];
	const t0 = Date.now();
	await sbx.commands.run('echo a; sleep 1; echo b', { onStdout: (d) => seen.push({ d, at: Date.now() - t0 }) });
	const done = Date.now() - t0;
	check('streaming: onStdout gets "a" a second before the command ends, then "b"',
		seen[0]?.d === 'a\n' && done - seen[0].at >= 500 && seen.map((s) => s.d).join('') === 'a\nb\n',
		`${JSON.stringify(seen)} ended at ${done}`);

	const h = await sbx.commands.run(`sleep ${MARK}`, { background: true });
	const alive = await sbx.commands.run(`kill -0 ${h.pid} && echo alive`);
	check('background: the command runs (seen from another command)', alive.stdout === 'alive\n', alive.stdout);
	const listed = await sbx.commands.list();
	check('commands.list shows it with its command line',
		listed.some((p) => p.pid === h.pid && p.cmd === '/bin/bash' && p.args[2] === `sleep ${MARK}`), JSON.stringify(listed));
	check('kill() of a running command: true', (await h.kill()) === true);
	const we = await rejection(h.wait());
	check('its wait(): CommandExitError, exitCode -1, "signal: killed"',
		we instanceof CommandExitError && we.exitCode === -1 && we.error === 'signal: killed', describe(we));
	const gone = await sbx.commands.run(`kill -0 ${h.pid} 2>/dev/null && echo alive || echo gone; ps -eo args | grep -c '^sleep ${MARK}$' || true`);
	check('the killed command is gone (seen from another command)', gone.stdout === 'gone\n0\n', gone.stdout);
	check('kill() of it again: false (envd no longer knows the pid)', (await sbx.commands.kill(h.pid)) === false);

	const fed = await sbx.commands.run('cat; echo " read"', { background: true, stdin: true });
	await fed.sendStdin('from stdin');
	await fed.closeStdin();
	const fedOut = await fed.wait();
	const input = recorded('POST', '/process.Process/SendInput').at(-1);
	check('stdin: sendStdin (base64 in JSON on the wire), closeStdin, and the command reads it',
		fedOut.stdout === 'from stdin read\n' &&
		isDeepStrictEqual(input?.body, { process: { pid: fed.pid }, input: { stdin: Buffer.from('from stdin').toString('base64') } }),
		`${fedOut.stdout} ${JSON.stringify(input?.body)}`);

	const late = await sbx.commands.run('sleep 0.5; echo late', { background: true });
	const joined = [];
	const conn = await sbx.commands.connect(late.pid, { onStdout: (d) => joined.push(d) });
	const lateOut = await conn.wait();
	check('commands.connect: a second stream of a running command gets its output and its end',
		lateOut.stdout === 'late\n' && isDeepStrictEqual(joined, ['late\n']), JSON.stringify(lateOut));

	const t1 = Date.now();
	const te = await rejection(sbx.commands.run(`sleep ${MARK}; echo never`, { timeoutMs: 1000 }));
	check('timeoutMs: TimeoutError after about a second', te instanceof TimeoutError && Date.now() - t1 < 5000, describe(te));
	const timed = recorded('POST', '/process.Process/Start').at(-1);
	check('timeoutMs: sent as Connect-Timeout-Ms', timed?.headers['connect-timeout-ms'] === '1000', JSON.stringify(timed?.headers));
	const killed = await eventually(async () =>
		(await sbx.commands.run(`ps -eo args | grep -c '^sleep ${MARK}' || true`)).stdout === '0\n');
	check('timeoutMs: the command was killed at its deadline', killed);
}

async function fileScenarios(sbx) {
	const data = new Uint8Array(1 << 20);
	for (let i = 0; i < data.length; i++)
		data[i] = (i * 7 + (i >> 8)) & 255;
	const sum = sha256(data);
	const w = await sbx.files.write('/home/user/blob.bin', data);
	check('write 1 MiB (multipart, the SDK\'s default): its entry',
		w.path === '/home/user/blob.bin' && w.name === 'blob.bin' && w.type === 'file', JSON.stringify(w));
	const back = await sbx.files.read('/home/user/blob.bin', { format: 'bytes' });
	check('read it back: the same bytes, all 256 values', Buffer.compare(Buffer.from(back), Buffer.from(data)) === 0,
		`${back.length} bytes, sha256 ${sha256(back)}`);
	const seen = await sbx.commands.run('sha256sum /home/user/blob.bin');
	check('a command sees the same bytes (sha256sum)', seen.stdout.startsWith(`${sum} `), seen.stdout);
	const inTree = join(STATE, sbx.sandboxId, 'home/user/blob.bin');
	check('they are in the sandbox\'s tree in the fake\'s state directory', existsSync(inTree) && sha256(readFileSync(inTree)) === sum);
	await sbx.files.write('/tmp/raw.bin', data, { useOctetStream: true });
	const raw = await sbx.commands.run('sha256sum /tmp/raw.bin');
	check('write as application/octet-stream, to /tmp: a command sees the same bytes', raw.stdout.startsWith(`${sum} `), raw.stdout);
	const uploads = recorded('POST', '/files').filter((r) => r.headers['e2b-sandbox-id'] === sbx.sandboxId);
	check('upload bodies on the wire: multipart/form-data, then application/octet-stream',
		/^multipart\/form-data; ?boundary=/.test(uploads[0]?.headers['content-type']) &&
		uploads[1]?.headers['content-type'] === 'application/octet-stream' && uploads[1]?.query.path === '/tmp/raw.bin',
		JSON.stringify(uploads.map((u) => [u.headers['content-type'], u.query])));

	const many = await sbx.files.write([{ path: 'multi/one.txt', data: 'one' }, { path: '/tmp/two.bin', data: data.subarray(0, 256) }]);
	const manySeen = await sbx.commands.run('cat /home/user/multi/one.txt; sha256sum < /tmp/two.bin');
	check('write of several files in one request (each part\'s filename is its path)',
		isDeepStrictEqual(many.map((e) => e.path), ['/home/user/multi/one.txt', '/tmp/two.bin']) &&
		manySeen.stdout === `one${sha256(data.subarray(0, 256))}  -\n` && recorded('POST', '/files').at(-1)?.query.path === undefined,
		`${JSON.stringify(many)} ${manySeen.stdout}`);
	const rel = await sbx.files.write('notes/a.txt', 'note');
	const cat = await sbx.commands.run('cat /home/user/notes/a.txt');
	check('a relative path is under /home/user', rel.path === '/home/user/notes/a.txt' && cat.stdout === 'note', JSON.stringify(rel));
	check('read as text', (await sbx.files.read('notes/a.txt')) === 'note');
	// Signed URLs, for a client without the token. E2B routes them by host name
	// (49983-ID.e2b.app); the fake's one URL needs the routing headers.
	const routing = { 'E2b-Sandbox-Id': sbx.sandboxId, 'E2b-Sandbox-Port': '49983' };
	const down = await fetch(await sbx.downloadUrl('notes/a.txt'), { headers: routing });
	const forged = new URL(await sbx.downloadUrl('notes/a.txt'));
	forged.searchParams.set('signature', 'v1_forged');
	const refused = await fetch(forged, { headers: routing });
	const up = await fetch(await sbx.uploadUrl('signed.txt', { useSignatureExpiration: 60 }), {
		method: 'POST', headers: { ...routing, 'Content-Type': 'application/octet-stream' }, body: 'signed',
	});
	check('signed URLs (downloadUrl, uploadUrl with an expiration) work without the token; a forged one gets 401',
		down.status === 200 && (await down.text()) === 'note' && refused.status === 401 && up.status === 200 &&
		(await sbx.files.read('signed.txt')) === 'signed', `${down.status} ${refused.status} ${up.status}`);
	const missing = await rejection(sbx.files.read('/home/user/missing'));
	check('read of a missing file: FileNotFoundError', missing instanceof FileNotFoundError, describe(missing));
	const ro = await rejection(sbx.files.write(`/etc/aks-e2b-${RUN}`, 'x'));
	check('the root outside /home/user and /tmp is read-only (and the host\'s untouched)',
		ro instanceof SandboxError && !existsSync(`/etc/aks-e2b-${RUN}`), describe(ro));

	check('makeDir: true, then false when it exists',
		(await sbx.files.makeDir('/home/user/d/e')) === true && (await sbx.files.makeDir('/home/user/d/e')) === false);
	await sbx.files.write('/home/user/d/f.txt', 'eff');
	const list = await sbx.files.list('/home/user/d');
	check('list: names, types, paths, size, permissions, modification time',
		isDeepStrictEqual(list.map((e) => [e.name, e.type, e.path]), [['e', 'dir', '/home/user/d/e'], ['f.txt', 'file', '/home/user/d/f.txt']]) &&
		list[1].size === 3 && list[1].permissions === '-rw-r--r--' && Math.abs(list[1].modifiedTime - Date.now()) < 60_000,
		JSON.stringify(list));
	check('exists: true for a file there', (await sbx.files.exists('/home/user/d/f.txt')) === true);
	const moved = await sbx.files.rename('/home/user/d/f.txt', '/home/user/d/g.txt');
	check('rename: the new entry; the old name is gone',
		moved.name === 'g.txt' && moved.path === '/home/user/d/g.txt' &&
		!(await sbx.files.exists('/home/user/d/f.txt')) && (await sbx.files.read('/home/user/d/g.txt')) === 'eff',
		JSON.stringify(moved));
	await sbx.files.remove('/home/user/d');
	check('remove: the whole directory is gone', (await sbx.files.exists('/home/user/d')) === false);
	const nolist = await rejection(sbx.files.list('/home/user/d'));
	check('list of a missing directory: FileNotFoundError', nolist instanceof FileNotFoundError, describe(nolist));
}

async function codeScenarios(sbx) {
	const e1 = await sbx.runCode('x = 41');
	const e2 = await sbx.runCode('print(x + 1)');
	check('runCode keeps state: x = 41, then print(x + 1) prints 42',
		!e1.error && isDeepStrictEqual(e2.logs.stdout, ['42\n']) && e2.logs.stderr.length === 0 && !e2.error,
		JSON.stringify(e2));
	const e3 = await sbx.runCode('x * 2');
	check('runCode: a final expression is the main result', e3.text === '82' && e3.results.length === 1 && e3.results[0].isMainResult,
		JSON.stringify(e3));
	const e4 = await sbx.runCode('1/0');
	check('runCode: an exception is execution.error (ZeroDivisionError)',
		e4.error?.name === 'ZeroDivisionError' && e4.error.value === 'division by zero' && /ZeroDivisionError/.test(e4.error.traceback),
		JSON.stringify(e4.error));
	check('runCode: executions are counted', e1.executionCount === 1 && e4.executionCount === 4, `${e1.executionCount} ${e4.executionCount}`);
	const exec = recorded('POST', '/execute').at(-1);
	check('runCode: POST /execute to port 49999 with {code}',
		isDeepStrictEqual(exec?.body, { code: '1/0' }) && exec?.headers['e2b-sandbox-port'] === '49999' &&
		exec?.headers['e2b-sandbox-id'] === sbx.sandboxId, JSON.stringify(exec));
	const world = await sbx.runCode('import signal\n' +
		'print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),\n' +
		'      [s for s in range(1, 32) if s not in (9, 13, 19, 25) and signal.getsignal(s) == signal.SIG_IGN])');
	check('runCode: the kernel blocks no signal and ignores none (but SIGPIPE and SIGXFSZ, as Python does)',
		isDeepStrictEqual(world.logs.stdout, ['[] []\n']), JSON.stringify(world.logs));

	await sbx.runCode('import os\nopen("/home/user/py.txt", "w").write(os.environ["AKS_E2B"] + os.environ["ONCE"])',
		{ envs: { ONCE: '!' } });
	const py = await sbx.commands.run('cat /home/user/py.txt');
	const once = await sbx.runCode('import os\nprint(os.environ.get("ONCE"))');
	check('runCode: the sandbox\'s files and envs, envs for one execution only',
		py.stdout === 'hello world!' && isDeepStrictEqual(once.logs.stdout, ['None\n']), `${py.stdout} ${JSON.stringify(once.logs)}`);

	const seen = [];
	const t0 = Date.now();
	await sbx.runCode('import time\nprint("a")\ntime.sleep(1)\nprint("b")', { onStdout: (m) => seen.push({ line: m.line, at: Date.now() - t0 }) });
	const done = Date.now() - t0;
	check('runCode streams: "a" a second before the execution ends',
		seen[0]?.line === 'a\n' && done - seen[0].at >= 500 && seen.length === 2, `${JSON.stringify(seen)} ended at ${done}`);

	const t1 = Date.now();
	const abandoned = await rejection(sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 1000 }));
	const next = await sbx.runCode('print("next")');
	check('runCode timeoutMs: TimeoutError; the execution is interrupted and the next one runs at once',
		abandoned instanceof TimeoutError && isDeepStrictEqual(next.logs.stdout, ['next\n']) && Date.now() - t1 < 4000,
		`${describe(abandoned)}; ${JSON.stringify(next.logs)} after ${Date.now() - t1} ms`);

	const ctx = await sbx.createCodeContext();
	await sbx.runCode('y = 1', { context: ctx });
	const other = await sbx.runCode('print(y)');
	const same = await sbx.runCode('print(y)', { context: ctx });
	check('a context of its own: its state is not the default context\'s',
		other.error?.name === 'NameError' && isDeepStrictEqual(same.logs.stdout, ['1\n']), `${JSON.stringify(other.error)} ${JSON.stringify(same.logs)}`);
}

async function lifeScenarios(sbx) {
	await sbx.setTimeout(60_000);
	const info = await sbx.getInfo();
	const sent = recorded('POST', `/sandboxes/${sbx.sandboxId}/timeout`).at(-1);
	check('setTimeout: {timeout: seconds}; the sandbox now ends a minute from now',
		isDeepStrictEqual(sent?.body, { timeout: 60 }) && Math.abs(info.endAt - Date.now() - 60_000) < 3000,
		`${JSON.stringify(sent?.body)} ${info.endAt.toISOString()}`);
	const again = await Sandbox.connect(sbx.sandboxId);
	tokens.push(again.envdAccessToken);
	const via = await again.commands.run('echo via-connect');
	check('Sandbox.connect to a running sandbox: POST /v2/sandboxes/{id}/connect, and it works',
		via.stdout === 'via-connect\n' && recorded('POST', `/v2/sandboxes/${sbx.sandboxId}/connect`).length === 1, via.stdout);

	const bad = new Sandbox({ sandboxId: sbx.sandboxId, envdAccessToken: 'not-the-token', envdVersion: info.envdVersion });
	const b1 = await rejection(bad.files.list('/home/user'));
	const b2 = await rejection(bad.commands.run('true'));
	const b3 = await rejection(bad.files.read('/home/user/py.txt'));
	check('a wrong envd access token: AuthenticationError (RPC, stream and /files)',
		b1 instanceof AuthenticationError && b2 instanceof AuthenticationError && b3 instanceof AuthenticationError,
		[b1, b2, b3].map(describe).join('; '));
	const wrong = await rejection(Sandbox.create('base', { apiKey: `e2b_${'0'.repeat(40)}` }));
	check('a wrong API key: AuthenticationError', wrong instanceof AuthenticationError, describe(wrong));
}

async function faultScenarios(sbx) {
	const id = sbx.sandboxId;
	await fault({ status: 429, path_prefix: '/v2/sandboxes', method: 'POST' });
	const e429 = await rejection(Sandbox.create('base', { metadata: { run: RUN } }));
	check('fault 429 on create: RateLimitError', e429 instanceof RateLimitError, describe(e429));
	await fault({ status: 503, path_prefix: `/sandboxes/${id}`, method: 'GET' });
	const e503 = await rejection(sbx.getInfo());
	check('fault 503: ServiceBusyError', e503 instanceof ServiceBusyError, describe(e503));
	await fault({ status: 500, message: 'boom', path_prefix: `/sandboxes/${id}/timeout` });
	const e500 = await rejection(sbx.setTimeout(60_000));
	check('fault 500: SandboxError with statusCode 500 and the message',
		e500 instanceof SandboxError && e500.statusCode === 500 && /boom/.test(e500.message), describe(e500));
	const gets = recorded('GET', `/sandboxes/${id}`).length;
	await fault({ status: 429, retry_after: 1, path_prefix: `/sandboxes/${id}`, method: 'GET' });
	const t0 = Date.now();
	const retried = await rejection(sbx.getInfo());
	check('fault 429 with Retry-After: 1: the SDK waits a second, retries and succeeds',
		retried === null && Date.now() - t0 >= 900 && recorded('GET', `/sandboxes/${id}`).length === gets + 2, describe(retried));
	await fault({ delay_ms: 1500, path_prefix: `/sandboxes/${id}`, method: 'GET' });
	const t1 = Date.now();
	const slow = await rejection(sbx.getInfo({ requestTimeoutMs: 300 }));
	check('fault delay_ms past requestTimeoutMs: the request is given up (TimeoutError)',
		slow?.name === 'TimeoutError' && Date.now() - t1 < 1400, describe(slow));
	await fault({ drop_after_bytes: 60, path_prefix: '/process.Process/Start' });
	const dropped = await rejection(sbx.commands.run('echo one; sleep 0.3; echo two'));
	check('fault drop_after_bytes mid-stream: SandboxError ("terminated"), not an exit',
		dropped instanceof SandboxError && !(dropped instanceof CommandExitError) && /terminated/.test(dropped.message), describe(dropped));
	await fault({ malformed: true, path_prefix: '/v2/sandboxes', method: 'POST' });
	const badJson = await rejection(Sandbox.create('base', { metadata: { run: RUN } }));
	check('fault malformed on create: the SDK fails to parse it (SyntaxError)', badJson instanceof SyntaxError, describe(badJson));
	await fault({ malformed: true, path_prefix: '/process.Process/Start' });
	const badStream = await rejection(sbx.commands.run('true'));
	check('fault malformed on a stream: the SDK fails (SandboxError)', badStream instanceof SandboxError, describe(badStream));
	await fault({ status: 502, target: 'envd', path_prefix: '/files' });
	const e502 = await rejection(sbx.files.read('/home/user/py.txt'));
	check('fault 502 on envd: TimeoutError (E2B\'s "sandbox not running")', e502 instanceof TimeoutError, describe(e502));
	const left = await admin('GET', 'faults');
	check('every fault was used up, and no fault outlived its count', left.length === 0, JSON.stringify(left));
	const still = await sbx.commands.run('echo still fine');
	check('after the faults, the sandbox serves as before', still.stdout === 'still fine\n');
}

async function killScenarios(sbx) {
	const id = sbx.sandboxId;
	check('kill: true', (await sbx.kill()) === true);
	check('kill again (Sandbox.kill): false', (await Sandbox.kill(id)) === false);
	const info = await rejection(sbx.getInfo());
	check('getInfo of a killed sandbox: SandboxNotFoundError', info instanceof SandboxNotFoundError, describe(info));
	const conn = await rejection(Sandbox.connect(id));
	check('Sandbox.connect to a killed sandbox: SandboxNotFoundError', conn instanceof SandboxNotFoundError, describe(conn));
	const run = await rejection(sbx.commands.run('true'));
	check('a command in a killed sandbox: SandboxNotFoundError', run instanceof SandboxNotFoundError, describe(run));
	const read = await rejection(sbx.files.read('/home/user/py.txt'));
	check('a file of a killed sandbox: TimeoutError (E2B\'s 502)', read instanceof TimeoutError, describe(read));
	const code = await rejection(sbx.runCode('1'));
	check('runCode in a killed sandbox: TimeoutError (E2B\'s 502)', code instanceof TimeoutError, describe(code));
	check('isRunning of a killed sandbox: false', (await sbx.isRunning()) === false);
	// the API forgets the sandbox a moment before its tree is deleted
	check('its tree is removed', await eventually(() => !existsSync(join(STATE, id))));

	// E2B's own kill at the end of the timeout, with a command running.
	const short = await Sandbox.create('base', { timeoutMs: 1000, metadata: { run: RUN, role: 'short' } });
	tokens.push(short.envdAccessToken);
	const seen = await fakeSandbox(short.sandboxId);
	await short.commands.run(`sleep ${MARK}`, { background: true });
	const running = await eventually(() => processesWith(`sleep ${MARK}`).length);
	const expired = await eventually(async () => (await rejection(short.getInfo())) instanceof SandboxNotFoundError, 5000);
	check('timeout 1 s: E2B kills the sandbox (getInfo: SandboxNotFoundError)', expired);
	// as for kill, the tree goes a moment after the API forgets the sandbox (CI saw it still there)
	const gone = await eventually(() => !pidAlive(seen.initPid) && processesWith(`sleep ${MARK}`).length === 0 &&
		!existsSync(seen.root), 5000);
	check('... its agent and its processes are gone, its tree removed', running >= 1 && gone,
		`sleep before ${running}, after ${processesWith(`sleep ${MARK}`)}, agent ${pidAlive(seen.initPid)}, tree ${existsSync(seen.root)}`);

	// Killed behind the client's back, with a command streaming.
	const victim = await Sandbox.create('base', { metadata: { run: RUN, role: 'victim' } });
	tokens.push(victim.envdAccessToken);
	const h = await victim.commands.run('sleep 20', { background: true });
	await admin('POST', `sandboxes/${victim.sandboxId}/kill`);
	const inflight = await rejection(h.wait());
	check('killed behind the client\'s back: the running command\'s wait() is a TimeoutError',
		inflight instanceof TimeoutError, describe(inflight));
	const next = await rejection(victim.commands.run('true'));
	check('... the next command: SandboxNotFoundError', next instanceof SandboxNotFoundError, describe(next));
}

async function networkScenarios() {
	const hostNet = netInterfaces(readFileSync('/proc/net/dev', 'utf8'));
	const off = await Sandbox.create('base', { allowInternetAccess: false, metadata: { run: RUN, role: 'offline' } });
	tokens.push(off.envdAccessToken);
	const offBody = recorded('POST', '/v2/sandboxes').find((r) => r.body?.metadata?.role === 'offline')?.body;
	check('allowInternetAccess false: allow_internet_access false on the wire, no network',
		offBody?.allow_internet_access === false && !('network' in offBody), JSON.stringify(offBody));
	const offNet = await off.commands.run('cat /proc/net/dev');
	check('... the sandbox really has nothing but loopback', isDeepStrictEqual(netInterfaces(offNet.stdout), ['lo']), offNet.stdout);
	check('... getInfo says allowInternetAccess false', (await off.getInfo()).allowInternetAccess === false);

	const network = { allowOut: ['1.1.1.1', 'example.com'], denyOut: [ALL_TRAFFIC] };
	const allow = await Sandbox.create('base', { network, metadata: { run: RUN, role: 'allow' } });
	tokens.push(allow.envdAccessToken);
	const allowBody = recorded('POST', '/v2/sandboxes').find((r) => r.body?.metadata?.role === 'allow')?.body;
	check('network allowOut/denyOut: the network object on the wire as given, no allow_internet_access',
		isDeepStrictEqual(allowBody?.network, network) && !('allow_internet_access' in allowBody), JSON.stringify(allowBody));
	const info = await allow.getInfo();
	check('... getInfo gives the network back', isDeepStrictEqual(info.network?.allowOut, network.allowOut) &&
		isDeepStrictEqual(info.network?.denyOut, network.denyOut), JSON.stringify(info.network));
	const allowNet = await allow.commands.run('cat /proc/net/dev');
	check('... that sandbox stays on the host\'s network (its rules are the fake\'s iptables chain)',
		isDeepStrictEqual(netInterfaces(allowNet.stdout), hostNet), allowNet.stdout);
	await allow.kill();

	const domainOnly = await rejection(Sandbox.create('base', { network: { allowOut: ['example.com'] }, metadata: { run: RUN } }));
	check('a domain in allowOut without ALL_TRAFFIC in denyOut: E2B\'s 400',
		domainOnly instanceof SandboxError && /ALL_TRAFFIC/.test(domainOnly.message), describe(domainOnly));
	await rulesScenarios();
	return off;   // left running: SIGTERM must take it down
}

// allowOut/denyOut really hold, for TCP and UDP, to the host's loopback and to its other
// addresses, and updateNetwork replaces them; the fake's iptables chain goes with the sandbox.
async function rulesScenarios() {
	const other = Object.values(networkInterfaces()).flat().find((a) => a.family === 'IPv4' && !a.internal)?.address;
	if (!other) {
		check('egress rules: this host has an IPv4 address besides the loopback to test them with', false);
		return;
	}
	const lo = await listenOn('127.0.0.1'), out = await listenOn(other);
	try {
		const sbx = await Sandbox.create('base', {
			network: { allowOut: ['127.0.0.1'], denyOut: [ALL_TRAFFIC] }, metadata: { run: RUN, role: 'rules' },
		});
		tokens.push(sbx.envdAccessToken);
		await sbx.files.write('/tmp/net_probe.py', NET_PROBE);
		const chain = `AKSFAKE-${FAKE_PID}-${sbx.sandboxId.slice(0, 10)}`;
		const rules = fakeChains(FAKE_PID);
		check('allowOut [127.0.0.1], denyOut [ALL_TRAFFIC]: a chain of the fake\'s for the sandbox\'s group, jumped to from OUTPUT',
			rules.some((l) => l.startsWith(`iptables -A OUTPUT -m owner --gid-owner `) && l.endsWith(`-j ${chain}`)) &&
			rules.some((l) => l.includes(`-A ${chain} -d 127.0.0.1/32 `)), rules.join('\n'));
		const seen = await netProbe(sbx, [lo, out]);
		check(`... the sandbox reaches 127.0.0.1 (TCP and UDP), and ${other} refuses it (a TCP reset, UDP not sent)`,
			seen['tcp 127.0.0.1'] === 'connected' && seen[`tcp ${other}`] === 'ECONNREFUSED' &&
			seen['udp 127.0.0.1'] === 'sent' && seen[`udp ${other}`] !== 'sent' &&
			lo.accepted === 1 && out.accepted === 0 && lo.datagrams === 1 && out.datagrams === 0,
			`${JSON.stringify(seen)}; accepted ${lo.accepted} ${out.accepted}, datagrams ${lo.datagrams} ${out.datagrams}`);

		await sbx.updateNetwork({ allowOut: [other], denyOut: [ALL_TRAFFIC] });
		const put = recorded('PUT', `/sandboxes/${sbx.sandboxId}/network`).at(-1);
		const info = await sbx.getInfo();
		const again = await netProbe(sbx, [lo, out]);
		check(`updateNetwork to allowOut [${other}]: PUT /sandboxes/{id}/network, and now only ${other} is reached`,
			isDeepStrictEqual(put?.body, { allowOut: [other], denyOut: [ALL_TRAFFIC] }) &&
			isDeepStrictEqual(info.network?.allowOut, [other]) &&
			again['tcp 127.0.0.1'] === 'ECONNREFUSED' && again[`tcp ${other}`] === 'connected' &&
			again['udp 127.0.0.1'] !== 'sent' && again[`udp ${other}`] === 'sent' &&
			lo.accepted === 1 && out.accepted === 1 && lo.datagrams === 1 && out.datagrams === 1,
			`${JSON.stringify(put?.body)} ${JSON.stringify(again)}; accepted ${lo.accepted} ${out.accepted}, datagrams ${lo.datagrams} ${out.datagrams}`);
		await sbx.kill();
		const left = fakeChains(FAKE_PID);
		check('... killed: its chain and the jump to it are gone', !left.some((l) => l.includes(chain)), left.join('\n'));
	} finally {
		lo.close();
		out.close();
	}
}

async function shutdown(fake, left) {
	const before = await fakeSandbox(left.sandboxId);
	const exited = new Promise((resolve) => fake.on('exit', (code, sig) => resolve(code ?? sig)));
	fake.kill('SIGTERM');
	const status = await Promise.race([exited, sleep(10_000).then(() => 'still running after 10 s')]);
	check('SIGTERM: the fake exits with 0', status === 0, `exit: ${status}`);
	const leftover = await eventually(() => processesWith(STATE).length === 0 && !pidAlive(fake.pid) && !pidAlive(before?.initPid), 3000);
	check('no process of the fake is left (the fake, its sandboxes\' agents and all they ran)', leftover,
		`left: ${processesWith(STATE)}`);
	check('its state directory is empty', existsSync(STATE) && readdirSync(STATE).length === 0, readdirSync(STATE).join(' '));
	const chains = fakeChains(fake.pid);
	check('no iptables or ip6tables chain of the fake is left', chains.length === 0, chains.join('\n'));
	const text = readFileSync(RECORD, 'utf8') + readFileSync(LOG, 'utf8');
	check('the record and the log never hold the API key or an envd access token',
		tokens.length >= 5 && tokens.every((t) => t && !text.includes(t)) && !text.includes(KEY));
	const secretHeaders = records().flatMap((r) => ['x-api-key', 'x-access-token'].map((h) => r.headers[h]).filter(Boolean));
	check('every secret header in the record is <redacted>',
		secretHeaders.length > 10 && secretHeaders.every((v) => v === '<redacted>'), `${secretHeaders.length} secret headers`);
}

// ---- main ---------------------------------------------------------------------

// No request may reach the real E2B: every URL and the key are the fake's.
for (const k of Object.keys(process.env))
	if (k.startsWith('E2B_'))
		delete process.env[k];
let fake;
const t0 = Date.now();
try {
	let url;
	({ fake, url } = await startFake());
	URL_ = url;
	FAKE_PID = fake.pid;
	Object.assign(process.env, { E2B_API_URL: url, E2B_SANDBOX_URL: url, E2B_API_KEY: KEY });
	const sbx = await createScenario();
	await commandScenarios(sbx);
	await fileScenarios(sbx);
	await codeScenarios(sbx);
	await lifeScenarios(sbx);
	await faultScenarios(sbx);
	await killScenarios(sbx);
	const left = await networkScenarios();
	await shutdown(fake, left);
} catch (e) {
	tap.exception(e);
	if (fake && fake.exitCode === null)
		fake.kill('SIGKILL');
}
console.log(`# ${((Date.now() - t0) / 1000).toFixed(1)} s; the fake's record and log: ${T}`);
const status = tap.finish();
if (status === 0 && !process.env.AKS_E2B_KEEP)   // kept: for reading the wire of a passing run
	rmSync(T, { recursive: true, force: true });
process.exit(status);
