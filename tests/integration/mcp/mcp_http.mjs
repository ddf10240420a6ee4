// tests/integration/mcp/mcp_http.mjs - drives `aksandbox mcp --listen` (MCP's Streamable
// HTTP transport) with the official MCP TypeScript SDK client
// (StreamableHTTPClientTransport), and with raw HTTP wherever a client has to misbehave
// (a dropped stream resumed with Last-Event-ID, malformed and oversized bodies, unknown
// sessions, foreign origins, a thousand idle connections). Prints TAP. Run by
// mcp_http.test through run-node.sh, which installs the SDK from the pinned lock file.
//
// Every check looks at effects: the tools' exact output, a file on disk, the PID of a
// cancelled program gone, the server's exit status and its socket's mode.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn, execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync, readFileSync, existsSync, rmSync, statSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tap, sleep, pidAlive, text, json } from './tap.mjs';

const builddir = process.env.AKS_TEST_BUILDDIR;
if (!builddir) {
	console.log('Bail out! AKS_TEST_BUILDDIR is not set (run through make check)');
	process.exit(1);
}
const AKS = join(builddir, 'core/cli/aksandbox');
const T = mkdtempSync(join(tmpdir(), 'aks-mcp-http.'));
const config = join(T, 'config.yaml');
writeFileSync(config, `sandbox:
  enabled: true
  profiles:
    default: {type: local_subprocess, local_subprocess: {workdir: ${T}/boxes}}
`);
// The same sandboxes behind bearer authentication: signed_token verifies the tokens.
const authConfig = join(T, 'auth.yaml');
writeFileSync(authConfig, `sandbox:
  enabled: true
  principal_resolver: signed_token
  signed_token: {secret_env: AKS_TEST_IDENTITY_SECRET}
  profiles:
    default: {type: local_subprocess, local_subprocess: {workdir: ${T}/boxes}}
`);
const SECRET = 'mcp-http-test-secret-0123456789abcdef';
const env = { ...process.env, AKS_STATE_DIR: join(T, 'state'), AKSANDBOX_MCP_HEARTBEAT_MS: '300',
	AKS_TEST_IDENTITY_SECRET: SECRET };
delete env.AKSANDBOX_CONVERSATION;
delete env.AKSANDBOX_CONFIG;

const PLAN = 44;
const tap = new Tap(PLAN);
const check = tap.check.bind(tap);

// Every server started, so that none outlives the test whatever happens to it.
const servers = [];
process.on('exit', () => {
	for (const child of servers)
		if (child.exitCode === null && child.signalCode === null)
			child.kill('SIGKILL');
});

// A signed_token identity token (docs/plugins/signed_token.md): v1.<payload>.<HMAC>.
function mint(claims, key = SECRET) {
	const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
	const mac = createHmac('sha256', key).update(`v1.${payload}`).digest('base64url');
	return `v1.${payload}.${mac}`;
}
const inAMinute = () => Math.floor(Date.now() / 1000) + 600;

// Starts `aksandbox mcp --listen ...`; resolves once it has said where it listens (or exited).
async function serve(args, cfg = config, childEnv = env) {
	const child = spawn(AKS, ['-c', cfg, 'mcp', ...args], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
	servers.push(child);
	let stderr = '', stdout = '';
	child.stderr.on('data', (d) => { stderr += d; });
	child.stdout.on('data', (d) => { stdout += d; });
	const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
	let url = null;
	for (let i = 0; i < 100 && !url; i++) {
		const m = /listening on (\S+)/.exec(stderr);
		if (m)
			url = m[1];
		else if (child.exitCode !== null)
			break;
		else
			await sleep(50);
	}
	return { child, url, exited, stderr: () => stderr, stdout: () => stdout };
}

async function sdkClient(url, name = 'aksandbox-http-test', token = null, options = {}) {
	const transport = new StreamableHTTPClientTransport(new URL(url), {
		...(token ? { requestInit: { headers: { authorization: `Bearer ${token}` } } } : {}), ...options });
	const client = new Client({ name, version: '1.0.0' });
	const errors = [];
	client.onerror = (e) => errors.push(String(e));
	await client.connect(transport);
	return { client, transport, errors };
}

const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = {
	jsonrpc: '2.0', id: 1, method: 'initialize',
	params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
async function post(url, body, headers = {}) {
	const res = await fetch(url, { method: 'POST', headers: { ...H, ...headers },
		body: typeof body === 'string' ? body : JSON.stringify(body) });
	return { status: res.status, headers: res.headers, body: await res.text() };
}
// A raw session: initialize and notifications/initialized; returns its id.
async function rawSession(url) {
	const r = await post(url, INIT);
	const sid = r.headers.get('mcp-session-id');
	await post(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sid });
	return sid;
}
// The SSE events of a body: [{id, data}], comments and priming data left as they are.
function events(body) {
	return body.split('\n\n').filter((b) => b.trim()).map((block) => {
		const ev = {};
		for (const line of block.split('\n')) {
			const i = line.indexOf(':');
			if (i <= 0)
				continue;
			ev[line.slice(0, i)] = line.slice(i + 1).replace(/^ /, '');
		}
		return ev;
	}).filter((ev) => ev.id !== undefined || ev.data !== undefined);
}

// A server whose runs answer with a pending task at once (--wait-timeout 0), in a
// conversation of its own.
async function waitlessServer() {
	return serve(['--listen', '127.0.0.1:0', '--wait-timeout', '0', '--conversation', 'waitless']);
}

// 39: a 90 s run with a progressToken, through the SDK client with its default request
// timeout (60 s) resetting it on progress, against a server with its default heartbeat (10 s)
// and wait: the heartbeats carry it to the outcome. It runs beside everything else.
async function ninetySeconds() {
	const defaults = { ...env };
	delete defaults.AKSANDBOX_MCP_HEARTBEAT_MS;
	const srv = await serve(['--listen', '127.0.0.1:0', '--conversation', 'ninety'], config, defaults);
	const c = await sdkClient(srv.url, 'ninety');
	const notes = [];
	const t0 = Date.now();
	const r = await c.client.callTool({ name: 'run_command', arguments: { command: 'sleep 90; echo done' } },
		undefined, { onprogress: (p) => notes.push(p), resetTimeoutOnProgress: true }).catch((e) => ({ error: String(e) }));
	const took = (Date.now() - t0) / 1000;
	const beats = notes.filter((p) => /still running/.test(p.message ?? '')).length;
	await c.client.close().catch(() => {});
	srv.child.kill('SIGTERM');
	await srv.exited;
	return { ok: r.content && json(r).stdout === 'done\n' && took >= 90 && beats >= 8,
		detail: `${took} s, ${beats} heartbeats, ${JSON.stringify(r).slice(0, 300)}` };
}

async function main() {
	const ninety = ninetySeconds();
	// 1-2: the server starts on loopback with an ephemeral port, and the SDK connects.
	const srv = await serve(['--listen', '127.0.0.1:0', '--allow-origin', 'https://app.example',
		'--grace', '5']);
	check('mcp --listen 127.0.0.1:0 says where it listens', /^http:\/\/127\.0\.0\.1:\d+\/mcp$/.test(srv.url ?? ''),
		srv.stderr());
	const url = srv.url;
	const a = await sdkClient(url);
	const { tools } = await a.client.listTools();
	check('the SDK client initializes over Streamable HTTP (a session id), lists the eight tools, ' +
		'and the GET it tries for a standalone stream is 405 without an error',
		/^[0-9a-f]{32}$/.test(a.transport.sessionId ?? '') && tools.length === 8 && a.errors.length === 0,
		JSON.stringify({ sid: a.transport.sessionId, tools: tools.length, errors: a.errors }));

	// 3-5: the tools work end to end: a command, a file written and read back, and on disk.
	let r = await a.client.callTool({ name: 'run_command', arguments: { command: 'echo "hi from $0"; echo err >&2' } });
	const sid = json(r).sandbox_session_id;
	check('run_command over HTTP: its stdout and stderr', json(r).stdout === 'hi from bash\n' &&
		json(r).stderr === 'err\n' && json(r).exit_code === 0, text(r));
	r = await a.client.callTool({ name: 'write_sandbox_file',
		arguments: { path: 'w/x.txt', content: 'über\n', sandbox_session_id: sid } });
	const wrote = r.isError === false;
	r = await a.client.callTool({ name: 'run_command', arguments: { command: 'cat w/x.txt; pwd', sandbox_session_id: sid } });
	const [line1, dir] = json(r).stdout.split('\n');
	check('write_sandbox_file lands in the workspace: cat reads it there', wrote && line1 === 'über', text(r));
	check('... and the file is on disk, in the workspace under the profile\'s workdir',
		dir.startsWith(join(T, 'boxes')) && readFileSync(join(dir, 'w/x.txt'), 'utf8') === 'über\n', dir);

	// Every other tool, over HTTP: run_code, read_sandbox_file, a pending task polled with
	// check_sandbox_task, new, list and destroy.
	const results = {};
	r = await a.client.callTool({ name: 'run_code', arguments: { code: 'print(6 * 7)', sandbox_session_id: sid } });
	results.run_code = json(r).stdout === '42\n';
	r = await a.client.callTool({ name: 'read_sandbox_file', arguments: { path: 'w/x.txt', sandbox_session_id: sid } });
	results.read_sandbox_file = json(r).content === 'über\n';
	r = await a.client.callTool({ name: 'new_sandbox_session', arguments: { name: 'http-tools' } });
	const made = json(r).sandbox_session_id;
	results.new_sandbox_session = r.isError === false && typeof made === 'string' && made !== sid;
	r = await a.client.callTool({ name: 'list_sandbox_sessions', arguments: {} });
	results.list_sandbox_sessions = json(r).sessions.some((x) => x.sandbox_session_id === made && x.name === 'http-tools');
	const waitless = await sdkClient((await waitlessServer()).url, 'waitless');
	r = await waitless.client.callTool({ name: 'run_command', arguments: { command: 'sleep 0.5; echo later' } });
	const task = json(r).task_id;
	let polled = null;
	for (let i = 0; i < 100 && !(polled && polled.status !== 'pending'); i++) {
		await sleep(100);
		polled = json(await waitless.client.callTool({ name: 'check_sandbox_task', arguments: { task_id: task } }));
	}
	results.check_sandbox_task = json(r).status === 'pending' && polled?.status === 'succeeded' &&
		polled?.result?.stdout === 'later\n';
	await waitless.client.close().catch(() => {});
	r = await a.client.callTool({ name: 'destroy_sandbox_session', arguments: { sandbox_session_id: made } });
	const relisted = await a.client.callTool({ name: 'list_sandbox_sessions', arguments: {} });
	results.destroy_sandbox_session = r.isError === false && !json(relisted).sessions.some((x) => x.sandbox_session_id === made);
	check('every other tool over HTTP: run_code, read_sandbox_file, new/list/destroy_sandbox_session, ' +
		'and a pending task (--wait-timeout 0) that check_sandbox_task follows to its result',
		Object.keys(results).length === 6 && Object.values(results).every(Boolean), JSON.stringify(results));

	// 6: progress arrives as events of the call's stream, then the result.
	const notes = [];
	r = await a.client.callTool({ name: 'run_command', arguments: { command: 'echo one; sleep 0.7; echo two', sandbox_session_id: sid } },
		undefined, { onprogress: (p) => notes.push(p) });
	const said = notes.map((p) => p.message ?? '').join('');
	check('a call with a progressToken hears its output as progress, then gets its result',
		json(r).stdout === 'one\ntwo\n' && said.includes('[stdout] one') && notes.length >= 2 &&
		notes.every((p, i) => i === 0 || p.progress > notes[i - 1].progress), JSON.stringify(notes));

	// 7-8: cancellation over HTTP kills the program; the session goes on.
	const pidfile = join(T, 'long.pid');
	const ac = new AbortController();
	const long = a.client.callTool({ name: 'run_command', arguments: { command: `echo $$ > ${pidfile}; exec sleep 60`, sandbox_session_id: sid } },
		undefined, { signal: ac.signal, timeout: 120000 });
	long.catch(() => {});
	let pid = 0;
	for (let i = 0; i < 100 && !pid; i++) {
		await sleep(100);
		if (existsSync(pidfile))
			pid = parseInt(readFileSync(pidfile, 'utf8'), 10) || 0;
	}
	const t0 = Date.now();
	await a.client.ping();
	check('the long run started, and ping is answered while it runs', pid > 0 && pidAlive(pid) &&
		Date.now() - t0 < 5000, `pid ${pid}`);
	ac.abort('test cancels');
	let gone = false;
	for (let i = 0; i < 100 && !gone; i++) {
		gone = pid > 0 && !pidAlive(pid);
		if (!gone)
			await sleep(100);
	}
	r = await a.client.callTool({ name: 'run_command', arguments: { command: 'echo after', sandbox_session_id: sid } });
	check('notifications/cancelled over HTTP killed the program; the session takes the next call',
		gone && json(r).stdout === 'after\n', `pid ${pid} gone ${gone}`);

	// 9: two clients at once: two MCP sessions whose calls (in two sandbox sessions) overlap:
	// each saw the other's start before it ended.
	const b = await sdkClient(url, 'second');
	r = await b.client.callTool({ name: 'new_sandbox_session', arguments: { name: 'second' } });
	const sidB = json(r).sandbox_session_id;
	const marks = join(T, 'marks');
	const both = await Promise.all([[a, sid], [b, sidB]].map(([c, s], i) => c.client.callTool({ name: 'run_command', arguments: {
		sandbox_session_id: s,
		command: `echo start${i} >> ${marks}; for k in $(seq 50); do grep -q start${1 - i} ${marks} && break; sleep 0.1; done; echo end${i} >> ${marks}` } })));
	const order = readFileSync(marks, 'utf8').trim().split('\n');
	check('two SDK clients: two sessions whose calls run at the same time',
		b.transport.sessionId !== a.transport.sessionId && both.every((x) => x.isError === false) &&
		order.indexOf('start0') < order.indexOf('end1') && order.indexOf('start1') < order.indexOf('end0'),
		order.join(' '));

	// 10-11: resumption: a stream dropped after its first event is read again with
	// Last-Event-ID, from where it was, up to the response; the call went on meanwhile.
	const rs = await rawSession(url);
	const ac2 = new AbortController();
	const res = await fetch(url, { method: 'POST', signal: ac2.signal, headers: { ...H, 'mcp-session-id': rs },
		body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'run_command',
			arguments: { command: 'echo first; sleep 1; echo second' }, _meta: { progressToken: 't' } } }) });
	const reader = res.body.getReader();
	let got = '';
	const dec = new TextDecoder();
	while (!/data: \{[^\n]*first/.test(got)) {
		const { value, done } = await reader.read();
		if (done)
			break;
		got += dec.decode(value);
	}
	ac2.abort();
	const seen = events(got);
	const lastId = seen[seen.length - 1]?.id;
	check('a tools/call answers as server-sent events: a priming event (an id, no data), then ' +
		'progress with ids <stream>-<n>',
		res.headers.get('content-type') === 'text/event-stream' && /^\d+-0$/.test(seen[0]?.id ?? '') &&
		seen[0].data === '' && /^\d+-1$/.test(lastId ?? ''), got);
	const resumed = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': rs, 'last-event-id': lastId } });
	const rest = events(await resumed.text());
	const fin = rest.length ? JSON.parse(rest[rest.length - 1].data) : null;
	check('GET with Last-Event-ID resumes after that event, through the response (the call ran on; ' +
		'the new connection takes the stream over from the one the client dropped)',
		resumed.status === 200 && rest.every((e) => Number(e.id.split('-')[1]) > 1) && fin?.id === 7 &&
		JSON.parse(fin.result.content[0].text).stdout === 'first\nsecond\n', `${resumed.status} ${JSON.stringify(rest)}`);
	const bad = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': rs, 'last-event-id': '999-1' } });
	const none = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': rs } });
	check('an unknown Last-Event-ID is 404; GET without one is 405 (nothing is sent unasked)',
		bad.status === 404 && none.status === 405 && /POST/.test(none.headers.get('allow') ?? ''),
		`${bad.status} ${none.status}`);

	// 12: the SDK's own reconnection: a fetch that cuts the call's event stream after its first
	// output; the SDK resumes with GET and Last-Event-ID, and the call, run once, answers.
	const fetches = [];
	let cut = false;
	const cuttingFetch = async (u, init) => {
		const res = await fetch(u, init);
		fetches.push({ method: init?.method ?? 'GET', lastEventId: new Headers(init?.headers).get('last-event-id') });
		if (cut || init?.method !== 'POST' || !String(init.body).includes('"tools/call"') ||
		    res.headers.get('content-type') !== 'text/event-stream')
			return res;
		cut = true;
		const reader = res.body.getReader();
		const dec = new TextDecoder();
		let seen = '';
		const body = new ReadableStream({
			async pull(controller) {
				const { value, done } = await reader.read();
				if (done)
					return controller.close();
				controller.enqueue(value);
				seen += dec.decode(value);
				if (/data: \{/.test(seen)) {
					reader.cancel().catch(() => {});
					controller.error(new Error('the test cut the connection'));
				}
			},
		});
		return new Response(body, { status: res.status, headers: res.headers });
	};
	const re = await sdkClient(url, 'reconnecting', null, { fetch: cuttingFetch,
		reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 } });
	const runs = join(T, 'runs.log');
	const reNotes = [];
	r = await re.client.callTool({ name: 'run_command', arguments: { command: `echo run >> ${runs}; echo first; sleep 1; echo second` } },
		undefined, { onprogress: (p) => reNotes.push(p), timeout: 30000 }).catch((e) => ({ error: String(e) }));
	const resumedWith = fetches.find((f) => f.method === 'GET' && f.lastEventId)?.lastEventId;
	check('the SDK reconnects by itself: its stream cut after the first output, it resumes with GET ' +
		'and Last-Event-ID and gets the outcome of the one run',
		cut && /^\d+-[1-9]\d*$/.test(resumedWith ?? '') && r.content && json(r).stdout === 'first\nsecond\n' &&
		readFileSync(runs, 'utf8') === 'run\n', JSON.stringify({ fetches, r, notes: reNotes.length }));
	await re.client.close().catch(() => {});

	// 13-14: DELETE ends a session: its id is then unknown (404), and the SDK's next call fails.
	const ended = b.transport.sessionId ?? '';
	await b.transport.terminateSession();
	const after = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': b.transport.sessionId ?? 'x' });
	const again = await post(url, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': rs });
	check('DELETE ends the session: its id is 404 afterwards; another session is untouched',
		after.status === 404 && again.status === 200, `${after.status} ${after.body} ${again.status}`);
	const del = await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': '0123456789abcdef0123456789abcdef' } });
	check('DELETE of an unknown session is 404', del.status === 404, String(del.status));
	check('the server logs the DELETE without any part of the session id (a bearer credential)',
		/a session was ended by its client/.test(srv.stderr()) && ended.length === 32 &&
		![...Array(25).keys()].some((i) => srv.stderr().includes(ended.slice(i, i + 8))), srv.stderr());

	// Slow-loris clients (headers a byte at a time) hold a connection each, within the bound, and
	// do not hold up anyone else: a call made meanwhile answers.
	const slow = [];
	for (let i = 0; i < 100; i++) {
		const sock = netConnect(Number(new URL(url).port), '127.0.0.1');
		sock.on('error', () => {});
		slow.push(sock);
	}
	const header = 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n';
	let k = 0;
	const drip = setInterval(() => { for (const sock of slow) sock.write(header[k % header.length]); k++; }, 50);
	await sleep(300);
	const t1 = Date.now();
	r = await a.client.callTool({ name: 'run_command', arguments: { command: 'echo meanwhile', sandbox_session_id: sid } });
	const slowMs = Date.now() - t1;
	clearInterval(drip);
	for (const sock of slow)
		sock.destroy();
	check('100 slow-loris clients dripping headers: a call made meanwhile answers (each slow client holds ' +
		'only its own connection, within the bound of 256)', json(r).stdout === 'meanwhile\n' && slowMs < 10000,
		`${slowMs} ms ${text(r)}`);

	// 14-21: bad input gets clear HTTP errors and the server stays up.
	let x = await post(url, '{"jsonrpc":"2.0","id":3,"method":', { 'mcp-session-id': rs });
	check('malformed JSON: 400 with a JSON-RPC parse error (-32700)',
		x.status === 400 && JSON.parse(x.body).error.code === -32700, x.body);
	x = await post(url, { jsonrpc: '2.0', id: 3, method: 'tools/list' });
	check('a request without Mcp-Session-Id (not initialize): 400 naming the header',
		x.status === 400 && /Mcp-Session-Id/.test(x.body), x.body);
	x = await post(url, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-session-id': 'forged' });
	check('an unknown session id: 404', x.status === 404, x.body);
	x = await post(url, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }), { 'content-type': 'text/plain', 'mcp-session-id': rs });
	check('a body that is not application/json: 415', x.status === 415, x.body);
	x = await post(url, INIT, { origin: 'http://evil.example' });
	const okOrigin = await post(url, INIT, { origin: 'https://app.example' });
	const local = await post(url, INIT, { origin: 'http://localhost:5173' });
	check('a foreign Origin is 403 (DNS rebinding); an allowed one and a loopback one are served',
		x.status === 403 && okOrigin.status === 200 && local.status === 200, `${x.status} ${okOrigin.status} ${local.status}`);
	x = await post(url, { jsonrpc: '2.0', id: 3, method: 'ping', params: { pad: 'x'.repeat(5 << 20) } }, { 'mcp-session-id': rs });
	check('a body over 4 MiB: 413 (read and dropped, so the client hears why)', x.status === 413 &&
		JSON.parse(x.body).error.message.includes('4 MiB'), `${x.status} ${x.body}`);
	x = await post(url, { jsonrpc: '2.0', id: 3, method: 'ping' }, { 'mcp-session-id': rs, 'mcp-protocol-version': '1999-01-01' });
	check('an unsupported MCP-Protocol-Version: 400', x.status === 400, x.body);
	x = await post(url, { jsonrpc: '2.0', id: 4, method: 'server/discover',
		params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } });
	check('a 2026-07-28 request needs no session: server/discover answers without one',
		x.status === 200 && JSON.parse(x.body).result && !x.headers.get('mcp-session-id'), x.body);
	// Its stream can never be resumed (no session names it), so a dropped connection cancels it.
	const spid = join(T, 'stateless.pid');
	const ac3 = new AbortController();
	const sres = await fetch(url, { method: 'POST', signal: ac3.signal, headers: H, body: JSON.stringify({
		jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'run_command',
			arguments: { command: `echo $$ > ${spid}; exec sleep 60` },
			_meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }) });
	let spidv = 0;
	for (let i = 0; i < 100 && !spidv; i++) {
		await sleep(100);
		if (existsSync(spid))
			spidv = parseInt(readFileSync(spid, 'utf8'), 10) || 0;
	}
	const wasAlive = spidv > 0 && pidAlive(spidv);
	ac3.abort();
	let sgone = false;
	for (let i = 0; i < 100 && !sgone; i++) {
		sgone = !pidAlive(spidv);
		if (!sgone)
			await sleep(100);
	}
	check('a 2026-07-28 tools/call whose client drops the connection is cancelled: its program dies',
		sres.status === 200 && wasAlive && sgone, `status ${sres.status} pid ${spidv} alive ${wasAlive} gone ${sgone}`);

	// 22: a thousand idle connections are bounded: the server holds at most 256 (a thread
	// each; the rest are closed at once); once they go it answers again.
	const socks = [];
	const port = Number(new URL(url).port);
	const threads = () => Number(/Threads:\s+(\d+)/.exec(readFileSync(`/proc/${srv.child.pid}/status`, 'utf8'))?.[1] ?? 0);
	const idleThreads = threads();
	await Promise.all(Array.from({ length: 1000 }, () => new Promise((resolve) => {
		const s = netConnect(port, '127.0.0.1', () => resolve());
		s.on('error', () => resolve());
		s.on('close', () => resolve());
		socks.push(s);
	})));
	let open = 0;
	for (let i = 0; i < 10; i++) {
		open = Math.max(open, threads() - idleThreads);
		await sleep(100);
	}
	for (const s of socks)
		s.destroy();
	await sleep(500);
	let pong = null;
	for (let i = 0; i < 20 && pong?.status !== 200; i++) {
		pong = await post(url, { jsonrpc: '2.0', id: 5, method: 'ping' }, { 'mcp-session-id': rs }).catch((e) => ({ status: String(e) }));
		if (pong.status !== 200)
			await sleep(250);
	}
	const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${srv.child.pid}/status`, 'utf8'))?.[1] ?? 0);
	check('1000 connections at once: at most 256 held (a thread each), the server answers once ' +
		'they go, and its memory stays under 200 MiB', open >= 100 && open <= 256 && pong?.status === 200 &&
		rss > 0 && rss < 200 * 1024, `held ${open}, ping ${pong?.status}, rss ${rss} kB`);

	// 23-24: SIGTERM: a call that runs is let finish (within --grace); then the server exits 0.
	const pending = a.client.callTool({ name: 'run_command', arguments: { command: 'sleep 1; echo drained', sandbox_session_id: sid } });
	await sleep(300);
	srv.child.kill('SIGTERM');
	r = await pending.catch((e) => ({ error: String(e) }));
	check('SIGTERM lets a running call finish and answer', r.content && json(r).stdout === 'drained\n', JSON.stringify(r));
	const st = await Promise.race([srv.exited, sleep(15000).then(() => ({ code: 'timeout' }))]);
	check('... then the server exits 0, having written nothing on stdout',
		st.code === 0 && srv.stdout() === '', JSON.stringify(st) + '\n' + srv.stderr());
	await a.client.close().catch(() => {});
	await b.client.close().catch(() => {});

	// 25-26: a unix socket, only for this user; the SDK's fetch cannot dial one, so raw HTTP.
	const sock = join(T, 'mcp.sock');
	const u = await serve(['--listen', `unix:${sock}`]);
	const mode = existsSync(sock) ? statSync(sock).mode & 0o777 : -1;
	const ures = await new Promise((resolve) => {
		const req = httpRequest({ socketPath: sock, path: '/mcp', method: 'POST', headers: H }, (res) => {
			let body = '';
			res.on('data', (d) => { body += d; });
			res.on('end', () => resolve({ status: res.statusCode, sid: res.headers['mcp-session-id'], body }));
		});
		req.on('error', (e) => resolve({ status: String(e) }));
		req.end(JSON.stringify(INIT));
	});
	check('--listen unix:PATH serves MCP on a socket of mode 0600',
		mode === 0o600 && ures.status === 200 && /^[0-9a-f]{32}$/.test(ures.sid ?? ''), JSON.stringify({ mode, ures }));
	u.child.kill('SIGTERM');
	const ust = await u.exited;
	check('... and removes the socket when it stops (status 0)', ust.code === 0 && !existsSync(sock),
		JSON.stringify(ust) + u.stderr());

	// 27-28: TLS with a certificate and key; the client trusts that certificate only.
	const cert = join(T, 'cert.pem'), key = join(T, 'key.pem');
	execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost',
		'-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
	const t = await serve(['--listen', '127.0.0.1:0', '--tls-cert', cert, '--tls-key', key]);
	const tres = await new Promise((resolve) => {
		const tu = new URL(t.url ?? 'https://127.0.0.1:1/mcp');
		const req = httpsRequest({ host: tu.hostname, port: tu.port, path: tu.pathname, method: 'POST', headers: H,
			ca: readFileSync(cert) }, (res) => {
			let body = '';
			res.on('data', (d) => { body += d; });
			res.on('end', () => resolve({ status: res.statusCode, body }));
		});
		req.on('error', (e) => resolve({ status: String(e) }));
		req.end(JSON.stringify(INIT));
	});
	check('--tls-cert/--tls-key: an https:// URL, and a client that trusts the certificate initializes',
		/^https:\/\//.test(t.url ?? '') && tres.status === 200 && JSON.parse(tres.body).result?.protocolVersion === '2025-11-25',
		JSON.stringify(tres) + t.stderr());
	t.child.kill('SIGTERM');
	await t.exited;

	// 30: a non-loopback address is refused without --auth.
	const wide = await serve(['--listen', '0.0.0.0:0']);
	const wst = await wide.exited;
	check('--listen 0.0.0.0:0 without --auth is refused (exit 125, the machinery\'s), saying why',
		wst.code === 125 && /not a loopback address/.test(wide.stderr()), JSON.stringify(wst) + wide.stderr());

	await authenticated();

	const ninetyResult = await ninety;
	check('a 90 s run with a progressToken completes through the SDK client with its default timeout ' +
		'(reset on progress) and the server\'s default heartbeat: its outcome, after a heartbeat every 10 s',
		ninetyResult.ok, ninetyResult.detail);
}

// 31-38: --auth: bearer tokens verified by the principal resolver; each user their own sessions
// and conversation.
async function authenticated() {
	const bad = await serve(['--listen', '127.0.0.1:0', '--auth']);
	const bst = await bad.exited;
	check('--auth with the built-in resolver (which verifies nothing) is refused, naming signed_token',
		bst.code === 125 && /principal_resolver: signed_token/.test(bad.stderr()), JSON.stringify(bst) + bad.stderr());

	// Every address, since tokens are required: reached here over loopback.
	const srv = await serve(['--listen', '0.0.0.0:0', '--auth', '--authorization-server', 'https://login.example',
		'--resource-url', 'https://sandbox.example/mcp'], authConfig);
	const port = /:(\d+)\/mcp/.exec(srv.url ?? '')?.[1];
	const url = `http://127.0.0.1:${port}/mcp`;
	let x = await post(url, INIT);
	const meta = await fetch(`http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`);
	const doc = await meta.json().catch(() => ({}));
	check('no token: 401 with a challenge naming the protected-resource metadata, which names the ' +
		'resource and the authorization server (--auth on every address, with a warning for plain HTTP)',
		x.status === 401 && x.headers.get('www-authenticate') ===
			'Bearer resource_metadata="https://sandbox.example/.well-known/oauth-protected-resource/mcp"' &&
		doc.resource === 'https://sandbox.example/mcp' && doc.authorization_servers?.[0] === 'https://login.example' &&
		/plain HTTP/.test(srv.stderr()), `${x.status} ${x.headers.get('www-authenticate')} ${JSON.stringify(doc)}\n${srv.stderr()}`);
	check('its first line says each user gets a conversation of their own, and invites no one to ' +
		'join its base conversation', /serving conversations '[^']+:<user>', one per authenticated user/.test(srv.stderr()) &&
		!/other clients join/.test(srv.stderr()), srv.stderr());
	const forged = mint({ sub: 'alice', exp: inAMinute() }, 'another-key-0123456789abcdef');
	const expired = mint({ sub: 'alice', exp: 1000000000 });
	const f = await post(url, INIT, { authorization: `Bearer ${forged}` });
	const e = await post(url, INIT, { authorization: `Bearer ${expired}` });
	const challenge = (r) => r.headers.get('www-authenticate') ?? '';
	check('a forged and an expired token: 401 invalid_token, saying why, and never echoing the token',
		f.status === 401 && e.status === 401 && /error="invalid_token"/.test(challenge(f)) &&
		/bad signature/.test(challenge(f)) && /expired/.test(challenge(e)) &&
		!challenge(f).includes(forged.split('.')[2]) && !f.body.includes(forged.split('.')[1]),
		`${challenge(f)} | ${challenge(e)}`);

	const alice = mint({ sub: 'alice', exp: inAMinute() }), bob = mint({ sub: 'bob', exp: inAMinute() });
	const a = await sdkClient(url, 'alice', alice);
	let r = await a.client.callTool({ name: 'write_sandbox_file', arguments: { path: 'mine.txt', content: 'alice\n' } });
	r = await a.client.callTool({ name: 'run_command', arguments: { command: 'cat mine.txt; pwd' } });
	const aliceDir = json(r).stdout.split('\n')[1];
	check('the SDK client with a bearer token (requestInit headers): initialize and tools work',
		r.isError === false && json(r).stdout.startsWith('alice\n'), text(r));
	const b = await sdkClient(url, 'bob', bob);
	r = await b.client.callTool({ name: 'run_command', arguments: { command: 'cat mine.txt; pwd' } });
	const bobDir = (json(r).stdout ?? '').trim();
	check('each user acts in a conversation of their own: bob\'s default session is another ' +
		'workspace, without alice\'s file', r.isError === false && /No such file/.test(json(r).stderr) &&
		bobDir !== '' && aliceDir !== '' && bobDir !== aliceDir, `${aliceDir} ${text(r)}`);
	const asBob = { authorization: `Bearer ${bob}`, 'mcp-session-id': a.transport.sessionId };
	x = await post(url, { jsonrpc: '2.0', id: 9, method: 'tools/list' }, asBob);
	const del = await fetch(url, { method: 'DELETE', headers: asBob });
	const resume = await fetch(url, { headers: { ...asBob, accept: 'text/event-stream', 'last-event-id': '2-0' } });
	r = await a.client.callTool({ name: 'run_command', arguments: { command: 'echo still' } });
	check('bob cannot reach alice\'s session: her id is unknown to him (404) for POST, DELETE and ' +
		'GET resumption; her session goes on', x.status === 404 && del.status === 404 && resume.status === 404 &&
		json(r).stdout === 'still\n', `${x.status} ${del.status} ${resume.status} ${text(r)}`);
	x = await post(url, { jsonrpc: '2.0', id: 9, method: 'tools/list' },
		{ authorization: `Bearer ${expired}`, 'mcp-session-id': a.transport.sessionId });
	check('alice\'s own session with her expired token: 401', x.status === 401, String(x.status));
	await a.client.close().catch(() => {});
	await b.client.close().catch(() => {});
	srv.child.kill('SIGTERM');
	const st = await srv.exited;
	check('the authenticating server exits 0 at SIGTERM', st.code === 0, JSON.stringify(st) + srv.stderr());
}

try {
	await main();
} catch (e) {
	tap.exception(e);
}
rmSync(T, { recursive: true, force: true });
process.exit(tap.finish());
