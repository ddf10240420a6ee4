// tests/integration/daytona/daytona_bench.mjs - the official Daytona SDK's per-call cost
// against the fake Daytona service, the same work as tests/bench/bench_daytona.c does through
// the plugin: a command `true` in an existing sandbox, and a 1 MiB fs.uploadFile then
// fs.downloadFile. The plugin runs each command in a toolbox session, so the figure its ratio
// is taken against is executeSessionCommand in a session made beforehand (as the plugin's is
// by its untimed first command); process.executeCommand('true'), the SDK's plain call, is
// printed beside it. run.sh starts the fake, runs both in the same run and prints the ratios.
// Prints "daytona-sdk <what> median <ms> ms p90 <ms> ms". BENCH_DAYTONA_ITER samples
// (default 50).
import { Daytona } from '@daytonaio/sdk';

const n = Number(process.env.BENCH_DAYTONA_ITER || 50);
// never the real Daytona: the fake's URL and key, passed explicitly
if (!process.env.DAYTONA_API_URL || !process.env.DAYTONA_API_KEY) {
	console.error('daytona_bench.mjs: DAYTONA_API_URL and DAYTONA_API_KEY must name the fake (run through tests/bench/run.sh)');
	process.exit(2);
}
const daytona = new Daytona({
	apiKey: process.env.DAYTONA_API_KEY,
	apiUrl: process.env.DAYTONA_API_URL,
	target: process.env.DAYTONA_TARGET || 'us',
});
const now = () => Number(process.hrtime.bigint()) / 1e6;
const report = (what, v) => {
	v.sort((a, b) => a - b);
	const at = (p) => v[Math.floor((v.length - 1) * p)];
	console.log(`daytona-sdk ${what} median ${at(0.5).toFixed(2)} ms p90 ${at(0.9).toFixed(2)} ms`);
};

// the image bench_daytona's config block names
const sbx = await daytona.create({ image: 'python:3.12-slim' }, { timeout: 60 });
const data = Buffer.alloc(1 << 20);
for (let i = 0; i < data.length; i++)
	data[i] = (i * 7 + Math.floor(i / 251)) & 0xff;
const path = '/home/daytona/bench.bin';
const session = [], plain = [], file = [];
try {
	await sbx.process.createSession('bench');
	for (let i = 0; i <= n; i++) { // the first of each untimed, as in bench_daytona
		const t0 = now();
		const s = await sbx.process.executeSessionCommand('bench', { command: 'true' });
		const t1 = now();
		const r = await sbx.process.executeCommand('true');
		const t2 = now();
		if (s.exitCode !== 0 || r.exitCode !== 0)
			throw new Error(`true exited ${s.exitCode} in the session, ${r.exitCode} by executeCommand`);
		await sbx.fs.uploadFile(data, path);
		const back = await sbx.fs.downloadFile(path);
		const t3 = now();
		if (!data.equals(back))
			throw new Error(`the file came back with ${back.length} bytes, not the ones sent`);
		if (i > 0) {
			session.push(t1 - t0);
			plain.push(t2 - t1);
			file.push(t3 - t2);
		}
	}
} finally {
	await sbx.delete();
}
report('run_command-true', session);
report('executeCommand-true', plain);
report('file-1MiB-round-trip', file);
