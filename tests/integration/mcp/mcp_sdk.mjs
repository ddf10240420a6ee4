// tests/integration/mcp/mcp_sdk.mjs - drives `aksandbox mcp` with the official
// MCP TypeScript SDK client (@modelcontextprotocol/sdk, StdioClientTransport)
// and prints TAP. Run by mcp_sdk.test, which installs the SDK from the pinned
// package-lock.json and copies this file next to its node_modules.
//
// Every check looks at effects: the tools' exact JSON, a file read back in a
// later call and by a second client that joins the conversation, the sandbox
// program's process gone after a cancel, the server's exit status.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tap, sleep, pidAlive, text, json } from './tap.mjs';

const builddir = process.env.AKS_TEST_BUILDDIR;
if (!builddir) {
	console.log('Bail out! AKS_TEST_BUILDDIR is not set (run through make check)');
	process.exit(1);
}
const AKS = join(builddir, 'core/cli/aksandbox');
const T = mkdtempSync(join(tmpdir(), 'aks-mcp-sdk.'));
const config = join(T, 'config.yaml');
writeFileSync(config, `sandbox:
  enabled: true
  profiles:
    default: {type: local_subprocess, local_subprocess: {workdir: ${T}/boxes}}
    refused: {type: local_subprocess, local_subprocess: {workdir: ${T}/boxes}, policy: {memory_mb: 256}}
`);
const env = { ...process.env, AKS_STATE_DIR: join(T, 'state'), AKS_LOG_LEVEL: 'info' };
delete env.AKSANDBOX_CONVERSATION;
delete env.AKSANDBOX_CONFIG;

const PLAN = 32;
const tap = new Tap(PLAN);
const check = tap.check.bind(tap);

// opts: cwd, env (added to the test's), config (a file; null: none, the lookup's).
async function connect(extraArgs = [], opts = {}) {
	const cfg = opts.config === undefined ? config : opts.config;
	const transport = new StdioClientTransport({
		command: AKS,
		args: [...(cfg ? ['-c', cfg] : []), 'mcp', ...extraArgs],
		env: { ...env, ...(opts.env ?? {}) },
		cwd: opts.cwd,
		stderr: 'pipe',
	});
	let stderr = '';
	transport.stderr.on('data', (d) => { stderr += d; });
	const client = new Client({ name: 'aksandbox-sdk-test', version: '1.0.0' });
	// Protocol errors the SDK noticed: a stdout line that is not a JSON-RPC
	// message, a response to an unknown (e.g. cancelled) request id.
	const errors = [];
	client.onerror = (e) => errors.push(String(e));
	await client.connect(transport);
	// Every message the client receives, as the SDK hands it on (notifications included).
	const seen = [];
	const onmessage = transport.onmessage;
	transport.onmessage = (msg, extra) => {
		seen.push(msg);
		onmessage(msg, extra);
	};
	// The child process, to read its exit status (the SDK keeps it private).
	const child = transport._process;
	const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
	return { client, transport, exited, errors, seen, stderr: () => stderr };
}


// The edges an agent meets: enums and outputSchema in tools/list, the guidance as a prompt
// and a resource, a long run with and without progress, a disabled sandbox, a project's own
// config.yaml.
async function edges(client) {
	const { tools } = await client.listTools();
	const rc = tools.find((t) => t.name === 'run_code');
	check('tools/list: profile and language are enums from the configuration; every tool has ' +
		'an outputSchema (the SDK has checked each result against it)',
		JSON.stringify(rc.inputSchema.properties.profile.enum) === '["default","refused",null]' &&
		JSON.stringify(rc.inputSchema.properties.language.enum) === '["python","bash"]' &&
		tools.every((t) => t.outputSchema?.type === 'object'), JSON.stringify(rc));
	let r = await client.callTool({ name: 'run_code', arguments: { code: 'x', profile: 'refused' } });
	check('an error result has isError and no structuredContent (it would not fit the schema)',
		r.isError === true && r.structuredContent === undefined && json(r).error, JSON.stringify(r));

	const instructions = client.getInstructions();
	const { prompts } = await client.listPrompts();
	const prompt = await client.getPrompt({ name: 'sandbox-guidance' });
	check('the guidance is the prompt sandbox-guidance',
		prompts.length === 1 && prompts[0].name === 'sandbox-guidance' &&
		prompt.messages[0].content.text === instructions, JSON.stringify({ prompts, prompt }));
	const { resources } = await client.listResources();
	const res = await client.readResource({ uri: 'aksandbox://guidance' });
	let missing = null;
	try {
		await client.readResource({ uri: 'aksandbox://nothing' });
	} catch (e) {
		missing = e;
	}
	check('the guidance is the resource aksandbox://guidance; another uri is -32002',
		resources.length === 1 && resources[0].uri === 'aksandbox://guidance' &&
		res.contents[0].text === instructions && missing instanceof McpError &&
		missing.code === -32002, JSON.stringify({ resources, res, missing: String(missing) }));

	// A run longer than the wait (1 s here) and than the client's timeout (1.2 s): with
	// progress, heartbeats keep a client that resets its timeout on progress waiting, and it
	// gets the outcome; without, a pending task that check_sandbox_task follows to the end.
	const slow = await connect(['--wait-timeout', '1'], { env: { AKSANDBOX_MCP_HEARTBEAT_MS: '300' } });
	const notes = [];
	r = await slow.client.callTool({ name: 'run_command', arguments: { command: 'sleep 2.5; echo end' } },
		undefined, { onprogress: (p) => notes.push(p), resetTimeoutOnProgress: true, timeout: 1200 });
	check('with a progressToken: "still running" every heartbeat, progress growing, and the ' +
		'outcome itself past the wait and the client\'s timeout',
		json(r).stdout === 'end\n' &&
		notes.filter((p) => /^\[still running: \d+s\]$/.test(p.message)).length >= 4 &&
		notes.every((p, i) => i === 0 || p.progress > notes[i - 1].progress) &&
		notes[notes.length - 1].message === '[stdout] end\n', JSON.stringify({ notes, r }));
	const t0 = Date.now();
	r = await slow.client.callTool({ name: 'run_command', arguments: { command: 'sleep 2; echo late' } });
	const pending = json(r);
	const waited = Date.now() - t0;
	let task = null;
	for (let i = 0; i < 100; i++) {
		task = json(await slow.client.callTool({ name: 'check_sandbox_task', arguments: { task_id: pending.task_id ?? '' } }));
		if (task.status !== 'pending')
			break;
		await sleep(100);
	}
	check('without one: a pending task after --wait-timeout, which then succeeds',
		pending.status === 'pending' && waited >= 900 && waited < 1900 &&
		task.status === 'succeeded' && task.result.stdout === 'late\n', JSON.stringify({ pending, waited, task }));
	await slow.client.close();

	const off = join(T, 'off.yaml');
	writeFileSync(off, 'sandbox:\n  enabled: false\n');
	const d = await connect([], { config: off });
	const offTools = (await d.client.listTools()).tools;
	const offPrompts = (await d.client.listPrompts()).prompts;
	await sleep(100);
	check('a disabled sandbox lists no tools and no prompt, and says so on stderr',
		offTools.length === 0 && offPrompts.length === 0 &&
		/the sandbox is disabled in this configuration/.test(d.stderr()), d.stderr());
	await d.client.close();

	// A project's own config.yaml (no sandbox: mapping) in the client's directory.
	const project = join(T, 'project');
	mkdirSync(project);
	writeFileSync(join(project, 'config.yaml'), 'sandbox:\n  - not ours\nlogging: {level: 2}\n');
	const e = await connect([], { config: null, cwd: project, env: { HOME: project, XDG_CONFIG_HOME: join(project, 'none') } });
	const eTools = (await e.client.listTools()).tools;
	await sleep(100);
	check('a config.yaml without a sandbox: mapping is skipped with a warning naming its ' +
		'absolute path; the tools are served',
		eTools.length === 8 && e.stderr().includes(`ignoring ${join(project, 'config.yaml')}: it has no sandbox: mapping`),
		e.stderr());
	await e.client.close();
}

async function main() {
	const a = await connect();
	const { client } = a;

	// 1-3: the handshake.
	check('serverInfo names aksandbox', client.getServerVersion()?.name === 'aksandbox',
		JSON.stringify(client.getServerVersion()));
	check('instructions are the sandbox guidance',
		(client.getInstructions() ?? '').startsWith('[Sandbox execution]\n'), client.getInstructions());
	await sleep(100);
	check('the newest handshake revision was negotiated (2025-11-25)',
		/speaking 2025-11-25/.test(a.stderr()), a.stderr());

	// 4-5: tools/list.
	const { tools } = await client.listTools();
	check('lists the eight tools in order', tools.map((t) => t.name).join(' ') ===
		'run_code run_command write_sandbox_file read_sandbox_file check_sandbox_task ' +
		'list_sandbox_sessions new_sandbox_session destroy_sandbox_session',
		tools.map((t) => t.name).join(' '));
	const rc = tools.find((t) => t.name === 'run_code');
	check('each tool has a description and an object schema; run_code requires code',
		tools.every((t) => t.description && t.inputSchema?.type === 'object') &&
		JSON.stringify(rc.inputSchema.required) === '["code"]' &&
		rc.inputSchema.properties.language.default === 'python', JSON.stringify(rc));

	// 6-7: run_code.
	let r = await client.callTool({ name: 'run_code', arguments: { code: 'print(6 * 7)' } });
	check('run_code: the tool JSON exactly, as text content',
		text(r) === '{"stdout": "42\\n", "stderr": "", "exit_code": 0, "sandbox_session_id": "default:default"}',
		JSON.stringify(r));
	check('run_code: isError false, structuredContent the same object',
		r.isError === false && r.structuredContent?.stdout === '42\n', JSON.stringify(r));

	// Output while it runs: onprogress (the SDK sends a progressToken) gets
	// notifications/progress with the output text, progress growing, all before the result.
	const steps = 'for i in 1 2 3 4 5; do echo line$i; sleep 0.25; done; echo oops >&2';
	const notes = [];
	const tStart = Date.now();
	r = await client.callTool({ name: 'run_command', arguments: { command: steps } }, undefined,
		{ onprogress: (p) => notes.push({ ...p, at: Date.now() }) });
	const tDone = Date.now();
	const shown = notes.map((p) => p.message).join('');
	check('onprogress: notifications/progress with increasing progress and the output ' +
		'(streams marked) arrive while the command runs, before the result',
		notes.length >= 2 && notes.every((p, i) => typeof p.progress === 'number' &&
			(i === 0 || p.progress > notes[i - 1].progress)) &&
		notes[notes.length - 1].progress === 35 &&
		shown.replace(/\[stdout\] /g, '').replace('[stderr] oops\n', '') ===
			'line1\nline2\nline3\nline4\nline5\n' && shown.includes('[stderr] oops\n') &&
		tDone - notes[0].at > 700 && notes.every((p) => p.at <= tDone) &&
		json(r).stdout === 'line1\nline2\nline3\nline4\nline5\n' && a.errors.length === 0,
		JSON.stringify({ notes, ms: tDone - tStart, r, errors: a.errors }));
	const before = a.seen.length;
	r = await client.callTool({ name: 'run_command', arguments: { command: 'echo a; sleep 0.5; echo b' } });
	const progressSeen = a.seen.slice(before).filter((m) => m.method === 'notifications/progress');
	check('without onprogress: no notifications/progress, the same result',
		progressSeen.length === 0 && json(r).stdout === 'a\nb\n', JSON.stringify(progressSeen));

	// 8-9: a file written, then read back in a later call.
	r = await client.callTool({ name: 'write_sandbox_file', arguments: { path: 'notes/k.txt', content: 'kept \u00e9\n' } });
	check('write_sandbox_file', text(r) === '{"path": "notes/k.txt", "written": true, "sandbox_session_id": "default:default"}', text(r));
	r = await client.callTool({ name: 'read_sandbox_file', arguments: { path: 'notes/k.txt' } });
	check('read_sandbox_file in a later call returns the content',
		r.isError === false && json(r).content === 'kept \u00e9\n', text(r));

	// 10-11: a named session, then the listing.
	r = await client.callTool({ name: 'new_sandbox_session', arguments: { name: 'proj' } });
	const sid = json(r).sandbox_session_id;
	check('new_sandbox_session returns a fresh id', /^[0-9a-f]{32}$/.test(sid ?? '') && json(r).name === 'proj', text(r));
	r = await client.callTool({ name: 'list_sandbox_sessions', arguments: {} });
	const listed = json(r).sessions ?? [];
	check('list_sandbox_sessions shows the named session and the default one',
		listed.some((s) => s.sandbox_session_id === sid && s.name === 'proj') &&
		listed.some((s) => s.sandbox_session_id === 'default:default'), text(r));

	// 12: a refused policy is an error result.
	r = await client.callTool({ name: 'run_code', arguments: { code: 'print(1)', profile: 'refused' } });
	check('a profile refused by the policy gate: isError true with the reason',
		r.isError === true && /cannot enforce policy dimensions \['resources'\]/.test(json(r).error ?? ''), JSON.stringify(r));

	// 13: bad arguments are an error result too (the tool's own message).
	r = await client.callTool({ name: 'run_code', arguments: { cod: 'x' } });
	check('bad arguments: isError true, the tool names the mistake',
		r.isError === true && /unknown argument 'cod'; did you mean 'code'\?/.test(text(r)), text(r));

	// 14: an unknown tool is a JSON-RPC error (-32602).
	let err = null;
	try {
		await client.callTool({ name: 'no_such_tool', arguments: {} });
	} catch (e) {
		err = e;
	}
	check('an unknown tool: JSON-RPC error -32602', err instanceof McpError && err.code === -32602, String(err));

	// 15-19: a long run; the server stays responsive; cancel kills the program.
	const pidfile = join(T, 'long.pid');
	const ac = new AbortController();
	let settled = false;
	const long = client.callTool({ name: 'run_command', arguments: { command: `echo $$ > ${pidfile}; exec sleep 60` } },
		undefined, { signal: ac.signal, timeout: 120000 }).finally(() => { settled = true; });
	long.catch(() => {});
	let pid = 0;
	for (let i = 0; i < 100 && !pid; i++) {
		await sleep(100);
		if (existsSync(pidfile))
			pid = parseInt(readFileSync(pidfile, 'utf8'), 10) || 0;
	}
	check('the long run started (its program wrote its PID)', pid > 0 && pidAlive(pid), `pid ${pid}`);
	let t0 = Date.now();
	await client.ping();
	check('ping is answered while the long run is in flight', !settled && Date.now() - t0 < 2000, `${Date.now() - t0} ms, settled ${settled}`);
	t0 = Date.now();
	r = await client.callTool({ name: 'run_command', arguments: { command: 'echo quick', sandbox_session_id: sid } });
	check('another tools/call (another session) completes while the long run is in flight',
		!settled && json(r).stdout === 'quick\n' && Date.now() - t0 < 10000, `${text(r)} settled ${settled}`);
	ac.abort('test cancels');
	let aborted = false;
	try {
		await long;
	} catch {
		aborted = true;
	}
	check('the aborted call rejects on the client', aborted);
	let gone = false;
	for (let i = 0; i < 100 && !gone; i++) {
		gone = !pidAlive(pid);
		if (!gone)
			await sleep(100);
	}
	check('notifications/cancelled killed the program (its PID is gone)', gone, `pid ${pid}`);

	// 20: the conversation id is on stderr; a second client joins it; a client restarted
	// in the same directory is in the same conversation by default, one in another
	// directory is not.
	const m = /serving conversation '([^']+)'/.exec(a.stderr());
	const conv = m ? m[1] : '';
	const b = await connect(['--conversation', conv]);
	r = await b.client.callTool({ name: 'read_sandbox_file', arguments: { path: 'notes/k.txt' } });
	const joined = r.isError === false && json(r).content === 'kept \u00e9\n';
	const again = await connect();
	r = await again.client.callTool({ name: 'read_sandbox_file', arguments: { path: 'notes/k.txt' } });
	const sameDefault = r.isError === false && again.stderr().includes(`serving conversation '${conv}'`);
	const elsewhere = join(T, 'other-project');
	mkdirSync(elsewhere);
	const c = await connect([], { cwd: elsewhere });
	r = await c.client.callTool({ name: 'read_sandbox_file', arguments: { path: 'notes/k.txt' } });
	const m2 = /serving conversation '([^']+)'/.exec(c.stderr());
	check('--conversation joins the first client\'s sessions; the default is the same after a ' +
		'restart in the same directory (mcp-UID-HASH), another in another directory',
		/^mcp-\d+-[0-9a-f]{16}$/.test(conv) && joined && sameDefault && r.isError === true &&
		m2 && m2[1] !== conv, `${conv} joined=${joined} same=${sameDefault} ${m2 && m2[1]} ${text(r)}`);
	await b.client.close();
	await again.client.close();
	await c.client.close();

	await edges(client);

	// end of input: exit 0, with nothing left running.
	const serverPid = a.transport.pid;
	await client.close();
	const st = await Promise.race([a.exited, sleep(5000).then(() => ({ code: 'timeout' }))]);
	check('closing stdin ends the server with status 0', st.code === 0, JSON.stringify(st) + '\n' + a.stderr());
	check('stdout carried protocol messages only, and no response came for the cancelled call ' +
		'(the SDK reported no error); the logs went to stderr',
		a.errors.length === 0 && /aksandbox: mcp: serving conversation/.test(a.stderr()) &&
		!pidAlive(serverPid), a.errors.join('\n') + '\n' + a.stderr());
}

try {
	await main();
} catch (e) {
	tap.exception(e);
}
rmSync(T, { recursive: true, force: true });
process.exit(tap.finish());
