// tests/integration/mcp/mcp_conformance.mjs - runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, server mode, its active scenarios) against
// `aksandbox mcp --listen`, with conformance-baseline.yml as the baseline of expected
// failures, and prints TAP: one line per scenario (it passes, or it fails and the baseline
// says why), the suite's own verdict, and the scenarios that exercise the protocol itself
// passing by name. Run by mcp_conformance.test through run-node.sh, which installs the pinned
// packages and copies this file next to their node_modules.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Tap, sleep } from './tap.mjs';

const builddir = process.env.AKS_TEST_BUILDDIR, srcdir = process.env.AKS_TEST_SRCDIR;
if (!builddir || !srcdir) {
	console.log('Bail out! AKS_TEST_BUILDDIR/AKS_TEST_SRCDIR are not set (run through make check)');
	process.exit(1);
}
const AKS = join(builddir, 'core/cli/aksandbox');
const SUITE = join(dirname(fileURLToPath(import.meta.url)),
	'node_modules/@modelcontextprotocol/conformance/dist/index.js');
const BASELINE = join(srcdir, 'tests/integration/mcp/conformance-baseline.yml');
// What any MCP server must get right, and aksandbox's does: these pass, whatever the
// baseline says.
const PROTOCOL = ['server-initialize', 'ping', 'tools-list', 'prompts-list', 'resources-list',
	'server-sse-multiple-streams', 'dns-rebinding-protection'];

const T = mkdtempSync(join(tmpdir(), 'aks-mcp-conformance.'));
const config = join(T, 'config.yaml');
writeFileSync(config, `sandbox:
  enabled: true
  profiles:
    default: {type: local_subprocess, local_subprocess: {workdir: ${T}/boxes}}
`);
const env = { ...process.env, AKS_STATE_DIR: join(T, 'state') };
delete env.AKSANDBOX_CONVERSATION;
delete env.AKSANDBOX_CONFIG;

const tap = new Tap();
const check = tap.check.bind(tap);

function run(cmd, args, opts) {
	return new Promise((resolve) => {
		const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
		let out = '';
		child.stdout.on('data', (d) => { out += d; });
		child.stderr.on('data', (d) => { out += d; });
		child.once('exit', (code) => resolve({ code, out }));
	});
}

async function main() {
	const server = spawn(AKS, ['-c', config, 'mcp', '--listen', '127.0.0.1:0'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
	process.on('exit', () => { if (server.exitCode === null) server.kill('SIGKILL'); });
	let stderr = '';
	server.stderr.on('data', (d) => { stderr += d; });
	const exited = new Promise((resolve) => server.once('exit', (code, signal) => resolve({ code, signal })));
	let url = null;
	for (let i = 0; i < 100 && !url && server.exitCode === null; i++) {
		url = /listening on (\S+)/.exec(stderr)?.[1] ?? null;
		if (!url)
			await sleep(50);
	}
	if (!url) {
		check('aksandbox mcp --listen starts', false, stderr);
		return;
	}

	const suite = await run(process.execPath, [SUITE, 'server', '--url', url, '--expected-failures', BASELINE,
		'-o', join(T, 'results')], { env });
	const baseline = new Set(readFileSync(BASELINE, 'utf8').split('\n')
		.map((l) => /^\s+-\s+(\S+)/.exec(l)?.[1]).filter(Boolean));
	// The summary: "✓ name: N passed, M failed" or "✗ ..." per scenario.
	const results = [...suite.out.matchAll(/^[✓✗] ([\w-]+): (\d+) passed, (\d+) failed/gm)]
		.map((m) => ({ name: m[1], passed: Number(m[3]) === 0 && Number(m[2]) > 0 }));
	check(`the suite ran its server scenarios (${results.length})`, results.length >= 20, suite.out.slice(-3000));
	for (const r of results) {
		if (baseline.has(r.name))
			check(`${r.name}: fails, as the baseline says it must (a fixture or capability aksandbox does not have)`,
				!r.passed, 'it passes now: remove it from conformance-baseline.yml');
		else
			check(`${r.name}: passes`, r.passed, suite.out.split('\n').filter((l) => l.includes(r.name)).join('\n'));
	}
	for (const name of PROTOCOL)
		check(`the protocol scenario ${name} is run and passes`,
			results.some((r) => r.name === name && r.passed) && !baseline.has(name));
	const unknown = [...baseline].filter((b) => !results.some((r) => r.name === b));
	check('every baseline entry names a scenario the suite ran', unknown.length === 0, unknown.join(' '));
	check('the suite\'s verdict with the baseline: exit 0 (no regression, no stale entry)', suite.code === 0,
		suite.out.slice(-2000));

	server.kill('SIGTERM');
	const st = await Promise.race([exited, sleep(15000).then(() => ({ code: 'timeout' }))]);
	check('the server survived the suite and exits 0 at SIGTERM', st.code === 0, JSON.stringify(st) + '\n' + stderr.slice(-2000));
}

try {
	await main();
} catch (e) {
	tap.exception(e);
}
rmSync(T, { recursive: true, force: true });
process.exit(tap.finish());
