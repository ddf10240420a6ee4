// tests/integration/e2b/e2b_bench.mjs - the official E2B SDK's per-call cost against the
// fake E2B service, the same work as tests/bench/bench_e2b.c does through the plugin: a
// commands.run('true') in an existing sandbox, and a 1 MiB files.write then files.read
// (bytes). run.sh starts the fake, runs both in the same run and prints their ratio.
// Prints "e2b-sdk <what> median <ms> ms p90 <ms> ms". BENCH_E2B_ITER samples (default 50).
import { Sandbox } from 'e2b';

const n = Number(process.env.BENCH_E2B_ITER || 50);
const opts = {
	apiKey: process.env.E2B_API_KEY,
	apiUrl: process.env.E2B_API_URL,
	sandboxUrl: process.env.E2B_SANDBOX_URL,
};
const now = () => Number(process.hrtime.bigint()) / 1e6;
const report = (what, v) => {
	v.sort((a, b) => a - b);
	const at = (p) => v[Math.floor((v.length - 1) * p)];
	console.log(`e2b-sdk ${what} median ${at(0.5).toFixed(2)} ms p90 ${at(0.9).toFixed(2)} ms`);
};

const sbx = await Sandbox.create('base', opts);
const data = new Uint8Array(1 << 20);
for (let i = 0; i < data.length; i++)
	data[i] = (i * 7 + Math.floor(i / 251)) & 0xff;
const cmd = [], file = [];
try {
	for (let i = 0; i <= n; i++) { // the first of each untimed, as in bench_e2b
		const t0 = now();
		const r = await sbx.commands.run('true');
		const t1 = now();
		if (r.exitCode !== 0)
			throw new Error(`true exited ${r.exitCode}`);
		await sbx.files.write('/home/user/bench.bin', data);
		const back = await sbx.files.read('/home/user/bench.bin', { format: 'bytes' });
		const t2 = now();
		if (back.length !== data.length || !back.every((b, k) => b === data[k]))
			throw new Error(`the file came back with ${back.length} bytes, not the ones sent`);
		if (i > 0) {
			cmd.push(t1 - t0);
			file.push(t2 - t1);
		}
	}
} finally {
	await sbx.kill();
}
report('run_command-true', cmd);
report('file-1MiB-round-trip', file);
