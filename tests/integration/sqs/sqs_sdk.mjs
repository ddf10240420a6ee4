// tests/integration/sqs/sqs_sdk.mjs - holds the SQS emulator the sqs transport is tested
// against (fauxqs, from the npm registry) to AWS's documented behaviour with the official AWS
// SDK for JavaScript v3 (@aws-sdk/client-sqs, pinned in package-lock.json), wherever the
// transport relies on it: FIFO queues, per-group order with one message in flight per group,
// several messages of a group in one answer, deduplication, visibility (expiry, change, the
// receive count), long polling, attributes, the characters a body may hold, the size limit,
// a missing queue. Then judges the transport by what it puts on the wire: an `aksandbox tool`
// call sends a request that the SDK receives and reads (group, deduplication id, attributes,
// body), and a worker started afterwards runs it. Starts fauxqs with fauxqs.sh, as the shell
// tests do. Prints TAP; run by sqs-sdk.test through run-node.sh.
import {
	SQSClient, CreateQueueCommand, GetQueueAttributesCommand, SendMessageCommand,
	ReceiveMessageCommand, DeleteMessageCommand, ChangeMessageVisibilityCommand,
	GetQueueUrlCommand,
} from '@aws-sdk/client-sqs';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tap, sleep } from './tap.mjs';

const srcdir = process.env.AKS_TEST_SRCDIR, builddir = process.env.AKS_TEST_BUILDDIR;
if (!srcdir || !builddir) {
	console.log('Bail out! AKS_TEST_SRCDIR/AKS_TEST_BUILDDIR are not set (run through make check)');
	process.exit(1);
}
// Nothing of the host's AWS settings: the emulator's endpoint and dummy keys only.
for (const k of Object.keys(process.env))
	if (k.startsWith('AWS_'))
		delete process.env[k];
Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test',
	AWS_REGION: 'us-east-1', AWS_EC2_METADATA_DISABLED: 'true' });

const tap = new Tap();
const T = mkdtempSync(join(tmpdir(), 'aks-sqs-sdk.'));
const FQ = `${srcdir}/tests/integration/sqs/fauxqs.sh`;
const REDIS = `${srcdir}/tests/integration/redis-server.sh`;
const AKS = `${builddir}/core/cli/aksandbox`;
const children = [];
function cleanup() {
	for (const c of children)
		try { c.kill('SIGKILL'); } catch { /* gone */ }
	spawnSync('sh', [FQ, 'stop', `${T}/fq`]);
	spawnSync('sh', [REDIS, 'stop', `${T}/redis`]);
	rmSync(T, { recursive: true, force: true });
}
process.on('exit', cleanup);
// a test harness that gives up on the test stops it with a signal: clean up then too
for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'])
	process.on(sig, () => process.exit(1));

const started = spawnSync('sh', [FQ, 'start', `${T}/fq`], { encoding: 'utf8' });
const endpoint = started.stdout.trim();
tap.check('fauxqs.sh starts the emulator and prints its endpoint', started.status === 0 &&
	/^http:\/\/127\.0\.0\.1:\d+$/.test(endpoint), started.stderr);
if (started.status !== 0) {
	console.log(`Bail out! no emulator: ${started.stderr}`);
	process.exit(1);
}
const sqs = new SQSClient({ endpoint, region: 'us-east-1',
	credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });

async function fifo(name, attrs = {}) {
	const r = await sqs.send(new CreateQueueCommand({ QueueName: name,
		Attributes: { FifoQueue: 'true', ...attrs } }));
	return r.QueueUrl;
}
const receive = (QueueUrl, extra = {}) => sqs.send(new ReceiveMessageCommand({ QueueUrl,
	MaxNumberOfMessages: 1, WaitTimeSeconds: 0, MessageAttributeNames: ['All'],
	MessageSystemAttributeNames: ['ApproximateReceiveCount', 'MessageGroupId',
		'MessageDeduplicationId'], ...extra })).then((r) => r.Messages ?? []);
const send = (QueueUrl, body, group, dedup, extra = {}) => sqs.send(new SendMessageCommand({
	QueueUrl, MessageBody: body, MessageGroupId: group, MessageDeduplicationId: dedup, ...extra }));
const del = (QueueUrl, m) => sqs.send(new DeleteMessageCommand({ QueueUrl,
	ReceiptHandle: m.ReceiptHandle }));
async function fails(p) {
	try {
		await p;
		return 'no error';
	} catch (e) {
		return e.name;
	}
}

try {
	// ---- the emulator held to AWS's documented behaviour ----
	const q = await fifo('sdk-order.fifo', { VisibilityTimeout: '30' });
	const attrs = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: q,
		AttributeNames: ['FifoQueue'] }));
	tap.check('a FIFO queue is created and says FifoQueue=true (what the transport checks)',
		attrs.Attributes?.FifoQueue === 'true', JSON.stringify(attrs.Attributes));
	tap.check('a missing queue is QueueDoesNotExist (the transport names it and fails)',
		await fails(sqs.send(new GetQueueAttributesCommand({
			QueueUrl: q.replace('sdk-order', 'nosuch'), AttributeNames: ['FifoQueue'] }))) ===
		'QueueDoesNotExist');
	tap.check('a FIFO queue name must end in .fifo', await fails(sqs.send(new CreateQueueCommand({
		QueueName: 'plain', Attributes: { FifoQueue: 'true' } }))) !== 'no error');

	await send(q, 'g1', 'G', 'g1');
	await send(q, 'g2', 'G', 'g2');
	await send(q, 'h1', 'H', 'h1');
	const first = await receive(q);
	const second = await receive(q);
	tap.check('per-group FIFO: while G\'s first message is in flight, the next receive gets H\'s, ' +
		'not G\'s second', first[0]?.Body === 'g1' && second[0]?.Body === 'h1',
		JSON.stringify([first.map((m) => m.Body), second.map((m) => m.Body)]));
	tap.check('nothing else while both groups are in flight', (await receive(q)).length === 0);
	await del(q, first[0]);
	const third = await receive(q);
	tap.check('after the delete, G\'s second message comes', third[0]?.Body === 'g2');
	tap.check('system attributes: the group and a receive count of 1 on the first delivery',
		third[0]?.Attributes?.MessageGroupId === 'G' &&
		third[0]?.Attributes?.ApproximateReceiveCount === '1', JSON.stringify(third[0]?.Attributes));
	await del(q, third[0]);
	await del(q, second[0]);

	await send(q, 'a1', 'A', 'a1');
	await send(q, 'a2', 'A', 'a2');
	await send(q, 'a3', 'A', 'a3');
	// AWS documents that one receive returns as many messages of one group as it can, in
	// order; fauxqs 1.9.2 returns one per group. The consumer's holding back of a group's later
	// messages is therefore unit-tested (tests/unit/test_sqs_codec: the documented behaviour), and
	// this check notices the day the emulator changes.
	const batch = await receive(q, { MaxNumberOfMessages: 10 });
	tap.check('the emulator differs from AWS: one message of a group per receive (AWS may ' +
		'return several, in order; the hold-back is unit-tested)',
	batch.map((m) => m.Body).join() === 'a1', JSON.stringify(batch.map((m) => m.Body)));
	await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: q,
		ReceiptHandle: batch[0].ReceiptHandle, VisibilityTimeout: 0 }));
	const again = await receive(q, { MaxNumberOfMessages: 10 });
	tap.check('ChangeMessageVisibility 0 lets a message go at once, first of its group again, ' +
		'counted again', again[0]?.Body === 'a1' && again[0]?.Attributes?.ApproximateReceiveCount === '2',
	JSON.stringify(again.map((m) => [m.Body, m.Attributes?.ApproximateReceiveCount])));
	await del(q, again[0]);
	for (const want of ['a2', 'a3']) { // drained in order
		const [m] = await receive(q);
		if (m?.Body !== want)
			throw new Error(`expected ${want}, got ${m?.Body}`);
		await del(q, m);
	}

	await send(q, 'once', 'D', 'same-id');
	const dup = await send(q, 'twice', 'D', 'same-id');
	const deduped = await receive(q, { MaxNumberOfMessages: 10 });
	tap.check('a second send with the same deduplication id is accepted and dropped',
		dup.MessageId && deduped.length === 1 && deduped[0].Body === 'once',
		JSON.stringify(deduped.map((m) => m.Body)));
	await del(q, deduped[0]);

	await send(q, 'v', 'V', 'v1');
	const [v1] = await receive(q, { VisibilityTimeout: 1 });
	const hidden = await receive(q);
	await sleep(1300);
	const [v2] = await receive(q);
	tap.check('an unsettled message comes back when its visibility runs out, counted again',
		v1?.Body === 'v' && hidden.length === 0 && v2?.Body === 'v' &&
		v2.Attributes?.ApproximateReceiveCount === '2');
	await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: q,
		ReceiptHandle: v2.ReceiptHandle, VisibilityTimeout: 1 }));
	await sleep(600);
	await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: q,
		ReceiptHandle: v2.ReceiptHandle, VisibilityTimeout: 2 }));
	await sleep(800);
	tap.check('ChangeMessageVisibility restarts the visibility from now (in_progress)',
		(await receive(q)).length === 0);
	await del(q, v2);

	let t0 = Date.now();
	const empty = await receive(q, { WaitTimeSeconds: 1 });
	const waited = Date.now() - t0;
	tap.check('long polling an empty queue waits WaitTimeSeconds and returns nothing',
		empty.length === 0 && waited >= 900 && waited < 5000, `${waited} ms`);
	t0 = Date.now();
	const pending = receive(q, { WaitTimeSeconds: 5 });
	await sleep(300);
	await send(q, 'late', 'L', 'late');
	const late = await pending;
	tap.check('a message sent during a long poll is returned at once', late[0]?.Body === 'late' &&
		Date.now() - t0 < 3000, `${Date.now() - t0} ms`);
	await del(q, late[0]);

	await send(q, 'attrs', 'M', 'm1', { MessageAttributes: {
		s: { DataType: 'String', StringValue: 'caf\u00e9' },
		b: { DataType: 'Binary', BinaryValue: Buffer.from([0, 0xff, 7]) } } });
	const [ma] = await receive(q);
	tap.check('String and Binary attributes come back as sent',
		ma?.MessageAttributes?.s?.StringValue === 'caf\u00e9' &&
		Buffer.from(ma?.MessageAttributes?.b?.BinaryValue ?? []).equals(Buffer.from([0, 0xff, 7])),
		JSON.stringify(ma?.MessageAttributes));
	await del(q, ma);
	tap.check('a body with a control character is refused (why the transport sends such bodies ' +
		'as base64)', (await fails(send(q, 'bell\u0007', 'X', 'x1'))).endsWith('InvalidMessageContents'));
	const small = await fifo('sdk-small.fifo', { MaximumMessageSize: '1024' });
	tap.check('a message over the queue\'s MaximumMessageSize is refused',
		await fails(send(small, 'x'.repeat(2000), 'X', 'x2')) !== 'no error');

	// ---- the transport judged by what it puts on the wire ----
	const qin = await fifo('aks-requests.fifo');
	const qout = await fifo('aks-replies.fifo');
	const redisUrl = spawnSync('sh', [REDIS, 'start', `${T}/redis`], { encoding: 'utf8' })
		.stdout.trim();
	mkdirSync(`${T}/sb`);
	const config = (wait) => `sandbox:
  enabled: true
  broker:
    flavor: queue
    wait_timeout: ${wait}
    wait_poll_interval: 0.05
    queue:
      type: sqs
      input: {url: "${qin}"}
      output: {url: "${qout}"}
      sqs: {endpoint_url: "${endpoint}", visibility_timeout: 30}
    response_store:
      type: redis
      redis: {url: "${redisUrl}"}
  profiles:
    default: {type: local_subprocess, local_subprocess: {workdir: "${T}/sb"}}
`;
	writeFileSync(`${T}/agent.yaml`, config(0));
	writeFileSync(`${T}/worker.yaml`, config(20));
	const env = { ...process.env, AKS_STATE_DIR: `${T}/state`,
		AKS_PLUGIN_PATH: `${builddir}/plugins/sqs/.libs:${builddir}/plugins/redis/.libs:` +
			`${builddir}/plugins/local_subprocess/.libs`, AKS_PLUGIN_SYSTEM_DIR: '' };
	const call = spawnSync(AKS, ['-c', `${T}/agent.yaml`, 'tool', 'run_command',
		JSON.stringify({ command: 'printf queued-through-sqs' })], { encoding: 'utf8', env });
	let answer = {};
	try { answer = JSON.parse(call.stdout); } catch { /* checked below */ }
	tap.check('an agent call over sqs (wait_timeout 0) answers with a pending task',
		answer.status === 'pending' && answer.task_id, call.stdout + call.stderr);
	const [req] = await receive(qin);
	let body = {};
	try { body = JSON.parse(req?.Body ?? ''); } catch { /* checked below */ }
	tap.check('the SDK receives the request from the input queue, its body the JSON request',
		req && typeof body === 'object' && JSON.stringify(body).includes('queued-through-sqs'),
		req?.Body);
	tap.check('its deduplication id and its request_id attribute are the task id',
		req?.Attributes?.MessageDeduplicationId === answer.task_id &&
		req?.MessageAttributes?.request_id?.StringValue === answer.task_id,
		JSON.stringify([req?.Attributes, req?.MessageAttributes]));
	tap.check('its message group is the sandbox session (one session, one group)',
		req?.Attributes?.MessageGroupId?.includes(answer.sandbox_session_id ?? '\u0000'),
		`${req?.Attributes?.MessageGroupId} vs ${answer.sandbox_session_id}`);
	await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: qin,
		ReceiptHandle: req.ReceiptHandle, VisibilityTimeout: 0 }));

	const worker = spawn(AKS, ['-c', `${T}/worker.yaml`, 'worker'], { env, stdio: 'ignore' });
	children.push(worker);
	let done = {};
	for (let i = 0; i < 200 && done.status !== 'succeeded'; i++) {
		await sleep(100);
		const r = spawnSync(AKS, ['-c', `${T}/agent.yaml`, 'tool', 'check_sandbox_task',
			JSON.stringify({ task_id: answer.task_id })], { encoding: 'utf8', env });
		try { done = JSON.parse(r.stdout); } catch { /* again */ }
	}
	tap.check('a worker takes the request (counted twice now) and runs it',
		done.status === 'succeeded' && done.result?.stdout === 'queued-through-sqs',
		JSON.stringify(done));
	tap.check('the worker settled it: the input and output queues are empty',
		(await receive(qin, { VisibilityTimeout: 0 })).length === 0 &&
		(await receive(qout, { VisibilityTimeout: 0 })).length === 0);
	tap.check('GetQueueUrl finds the queues by name (how an operator looks a URL up)',
		(await sqs.send(new GetQueueUrlCommand({ QueueName: 'aks-requests.fifo' }))).QueueUrl === qin);
} catch (e) {
	tap.exception(e);
}
// exit now: the worker child would keep node's event loop alive (cleanup stops it on exit)
process.exit(tap.finish());
