// tests/integration/ec2_ssm/ec2_ssm_bench.mjs - the official AWS SDK for JavaScript's
// (@aws-sdk/client-ssm) per-call cost against the fake AWS service, the same work as
// tests/bench/bench_ec2_ssm.c does through the plugin: a command `true` on the registered
// instance, that is SendCommand with AWS-RunShellScript, then GetCommandInvocation read until
// the command ends, on the plugin's schedule (plugins/ec2_ssm/ec2_ssm_exec.c): the first read
// after 100 ms, the wait doubling up to poll_interval, here 0.05 s as bench_ec2_ssm's config
// block names (so every read 50 ms after the last); an invocation SSM does not know yet
// (InvocationDoesNotExist) is pending. run.sh starts the fake, runs both in the same run and
// prints the ratio. Prints "ec2_ssm-sdk command median <ms> ms p90 <ms> ms".
// BENCH_EC2_SSM_ITER samples (default 50). BENCH_EC2_SSM_SCRIPT: the script to send instead of
// `true` (run.sh passes the one the plugin sent for `true`, its measuring wrapper included, so
// both sides run the same script on the instance).
import { SSMClient, SendCommandCommand, GetCommandInvocationCommand } from '@aws-sdk/client-ssm';

const INSTANCE = 'i-0123456789abcdef0'; // the instance fake-aws.sh registers
const FIRST_POLL_MS = 100, POLL_INTERVAL_MS = 50; // the plugin's FIRST_POLL_MS, poll_interval
const n = Number(process.env.BENCH_EC2_SSM_ITER || 50);
// never the real AWS: the fake's URL, passed explicitly
const endpoint = process.env.AWS_ENDPOINT_URL_SSM || process.env.AWS_ENDPOINT_URL;
if (!endpoint) {
	console.error('ec2_ssm_bench.mjs: AWS_ENDPOINT_URL_SSM or AWS_ENDPOINT_URL must name the fake (run through tests/bench/run.sh)');
	process.exit(2);
}
// the key pair and region come from the environment fake-aws.sh exports, as the plugin's do;
// the SDK's notice that it will soon want a newer node is silenced, as in aws_sdk.mjs
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
const ssm = new SSMClient({ endpoint });
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const report = (what, v) => {
	v.sort((a, b) => a - b);
	const at = (p) => v[Math.floor((v.length - 1) * p)];
	console.log(`ec2_ssm-sdk ${what} median ${at(0.5).toFixed(2)} ms p90 ${at(0.9).toFixed(2)} ms`);
};

// SendCommand, then GetCommandInvocation until the command ends: its invocation
async function run(command) {
	const sent = await ssm.send(new SendCommandCommand({
		InstanceIds: [INSTANCE], DocumentName: 'AWS-RunShellScript',
		Parameters: { commands: [command], executionTimeout: ['60'] },
	}));
	const query = { CommandId: sent.Command.CommandId, InstanceId: INSTANCE };
	for (let wait = FIRST_POLL_MS; ; wait *= 2) {
		await sleep(Math.min(wait, POLL_INTERVAL_MS));
		let inv;
		try {
			inv = await ssm.send(new GetCommandInvocationCommand(query));
		} catch (e) {
			if (e.name === 'InvocationDoesNotExist')
				continue; // not visible yet: pending
			throw e;
		}
		if (!['Pending', 'InProgress', 'Delayed', 'Cancelling'].includes(inv.Status))
			return inv;
	}
}

const script = process.env.BENCH_EC2_SSM_SCRIPT || 'true';
const cmd = [];
for (let i = 0; i <= n; i++) { // the first untimed, as in bench_ec2_ssm
	const t0 = now();
	const inv = await run(script);
	const t1 = now();
	if (inv.Status !== 'Success' || inv.ResponseCode !== 0)
		throw new Error(`true ended ${inv.Status} with ${inv.ResponseCode}`);
	if (i > 0)
		cmd.push(t1 - t0);
}
ssm.destroy();
report('command', cmd);
