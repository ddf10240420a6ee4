// tests/integration/dynamodb/dynamodb_sdk.mjs - holds dynalite (the DynamoDB emulator the
// dynamodb store is tested against) to DynamoDB's behaviour where the store relies on it, and
// the store to its documented table layout (docs/plugins/dynamodb.md), with the official AWS
// SDK for JavaScript v3 (@aws-sdk/client-dynamodb, pinned in package-lock.json):
//  - the SDK drives dynalite through what the store uses: CreateTable with the store's key
//    schema, conditional PutItem / UpdateItem / DeleteItem refused with
//    ConditionalCheckFailedException, Query with begins_with on a binary sort key, Scan pages
//    joined with LastEvaluatedKey, binary values byte for byte, the 400 KB item limit; and
//    where dynalite differs from DynamoDB (no UpdateTimeToLive, no TTL deletion), so a change
//    of the emulator is noticed;
//  - the store writes through ddb_tool (tests/integration/dynamodb/ddb_tool.c, the plugin's
//    operation table driven as the host drives it) and the SDK reads the items where and as
//    the docs say; items the SDK writes in that layout with a past expires_at are absent to
//    every read of the store (get, scan, namespaces, update).
// Last, two aksandbox processes keep a session in the table (sandbox.state_store). Prints TAP.
// Run by dynamodb-sdk.test (which starts dynalite and says where in
// DYNAMODB_ENDPOINT) through run-node.sh.
import {
	DynamoDBClient, CreateTableCommand, DescribeTableCommand, UpdateTimeToLiveCommand,
	DescribeTimeToLiveCommand, PutItemCommand, GetItemCommand, UpdateItemCommand,
	DeleteItemCommand, QueryCommand, ScanCommand, waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Tap, sleep } from './tap.mjs';

const B = process.env.AKS_TEST_BUILDDIR, endpoint = process.env.DYNAMODB_ENDPOINT;
if (!B || !endpoint) {
	console.log('Bail out! AKS_TEST_BUILDDIR or DYNAMODB_ENDPOINT is not set (run through make check)');
	process.exit(1);
}
const tool = join(B, 'tests/integration/dynamodb/ddb_tool');
const plugin = join(B, 'plugins/dynamodb/.libs/dynamodb.so');
const tmp = mkdtempSync(join(tmpdir(), 'aks-dynamodb-sdk.'));
const t = new Tap();
const ddb = new DynamoDBClient({
	endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
	maxAttempts: 1,
});

const bytes = (s) => Uint8Array.from(Buffer.from(s, 'binary'));
const eq = (a, b) => a !== undefined && b !== undefined && Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0;
const hex = (s) => Buffer.from(s, 'binary').toString('hex');
const codeOf = async (p) => {
	try {
		await p;
		return 'no error';
	} catch (e) {
		return e.name;
	}
};

// The store's table as the docs say to create it.
async function makeTable(name) {
	await ddb.send(new CreateTableCommand({
		TableName: name,
		AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'B' },
			{ AttributeName: 'sk', AttributeType: 'B' }],
		KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }, { AttributeName: 'sk', KeyType: 'RANGE' }],
		BillingMode: 'PAY_PER_REQUEST',
	}));
	await waitUntilTableExists({ client: ddb, maxWaitTime: 30, minDelay: 1 }, { TableName: name });
}

// ---- the store, through ddb_tool ----
const cfg = join(tmp, 'dynamodb.yaml');
writeFileSync(cfg, `table_name: aks-sdk\nendpoint_url: "${endpoint}"\nauto_provision: true\nlock_lease: 3\n`);
const env = {
	...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_'))),
	AWS_ACCESS_KEY_ID: 'test', AWS_SECRET_ACCESS_KEY: 'test', AWS_REGION: 'us-east-1',
	AWS_CONFIG_FILE: join(tmp, 'no-config'), AWS_SHARED_CREDENTIALS_FILE: join(tmp, 'no-credentials'), AWS_EC2_METADATA_DISABLED: 'true',
	AKS_LOG_LEVEL: 'error',
};
const store = (...args) => {
	const r = spawnSync(tool, [plugin, cfg, ...args], { env, encoding: 'utf8' });
	return { status: r.status, out: r.stdout ?? '', err: r.stderr ?? '' };
};

try {
	// -- dynalite, held to DynamoDB --
	await makeTable('sdk-emulator');
	const d = await ddb.send(new DescribeTableCommand({ TableName: 'sdk-emulator' }));
	t.check('CreateTable: the store\'s key schema (pk HASH, sk RANGE, both binary), on demand, ACTIVE',
		d.Table.TableStatus === 'ACTIVE' && d.Table.BillingModeSummary?.BillingMode === 'PAY_PER_REQUEST' &&
		JSON.stringify(d.Table.KeySchema) === '[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]' &&
		d.Table.AttributeDefinitions.every((a) => a.AttributeType === 'B'), JSON.stringify(d.Table));
	t.check('CreateTable of an existing table: ResourceInUseException (auto_provision racing another process)',
		await codeOf(makeTable('sdk-emulator')) === 'ResourceInUseException');
	t.check('DescribeTable of a missing table: ResourceNotFoundException',
		await codeOf(ddb.send(new DescribeTableCommand({ TableName: 'no-such-table' }))) === 'ResourceNotFoundException');
	// DynamoDB has UpdateTimeToLive; dynalite 4.0.0 does not (the store then warns, and its reads
	// hide expired items, which DynamoDB too keeps for days).
	const ttl = await codeOf(ddb.send(new UpdateTimeToLiveCommand({ TableName: 'sdk-emulator',
		TimeToLiveSpecification: { AttributeName: 'expires_at', Enabled: true } })));
	t.check('UpdateTimeToLive: dynalite answers UnknownOperationException (DynamoDB turns TTL on)',
		ttl === 'UnknownOperationException', ttl);
	const dttl = await ddb.send(new DescribeTimeToLiveCommand({ TableName: 'sdk-emulator' }));
	t.check('DescribeTimeToLive: DISABLED on dynalite',
		dttl.TimeToLiveDescription?.TimeToLiveStatus === 'DISABLED');

	const T = 'sdk-emulator', key = { pk: { B: bytes('ns') }, sk: { B: bytes('k') } };
	const all = new Uint8Array(256).map((_, i) => i);
	await ddb.send(new PutItemCommand({ TableName: T, Item: { ...key, val: { B: all }, ver: { S: 'v1' } },
		ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': 'pk' } }));
	const got = await ddb.send(new GetItemCommand({ TableName: T, Key: key, ConsistentRead: true }));
	t.check('binary values: every byte 0..255 round-trips', eq(got.Item?.val?.B, all));
	t.check('empty binary value (a record of 0 bytes) is accepted and read back',
		await codeOf(ddb.send(new PutItemCommand({ TableName: T,
			Item: { pk: { B: bytes('ns') }, sk: { B: bytes('empty') }, val: { B: new Uint8Array(0) } } }))) === 'no error' &&
		(await ddb.send(new GetItemCommand({ TableName: T, Key: { pk: { B: bytes('ns') }, sk: { B: bytes('empty') } } })))
			.Item?.val?.B?.length === 0);
	t.check('conditional PutItem: attribute_not_exists on an existing item fails with ConditionalCheckFailedException',
		await codeOf(ddb.send(new PutItemCommand({ TableName: T, Item: { ...key, val: { B: bytes('x') } },
			ConditionExpression: 'attribute_not_exists(#pk)', ExpressionAttributeNames: { '#pk': 'pk' } })))
			=== 'ConditionalCheckFailedException');
	t.check('conditional PutItem: a stale version fails with ConditionalCheckFailedException',
		await codeOf(ddb.send(new PutItemCommand({ TableName: T, Item: { ...key, val: { B: bytes('x') }, ver: { S: 'v2' } },
			ConditionExpression: '#v = :old', ExpressionAttributeNames: { '#v': 'ver' },
			ExpressionAttributeValues: { ':old': { S: 'v0' } } }))) === 'ConditionalCheckFailedException');
	t.check('conditional PutItem: the current version passes',
		await codeOf(ddb.send(new PutItemCommand({ TableName: T, Item: { ...key, val: { B: bytes('x') }, ver: { S: 'v2' } },
			ConditionExpression: '#v = :old', ExpressionAttributeNames: { '#v': 'ver' },
			ExpressionAttributeValues: { ':old': { S: 'v1' } } }))) === 'no error');
	t.check('conditional UpdateItem (a lease renewed by another owner) fails with ConditionalCheckFailedException',
		await codeOf(ddb.send(new UpdateItemCommand({ TableName: T, Key: key,
			UpdateExpression: 'SET #l = :u', ConditionExpression: 'attribute_exists(#pk) AND #o = :me',
			ExpressionAttributeNames: { '#l': 'lease_ms', '#pk': 'pk', '#o': 'owner' },
			ExpressionAttributeValues: { ':u': { N: '1' }, ':me': { S: 'someone' } } })))
			=== 'ConditionalCheckFailedException');
	t.check('conditional UpdateItem on a missing item does not create it',
		await codeOf(ddb.send(new UpdateItemCommand({ TableName: T, Key: { pk: { B: bytes('ns') }, sk: { B: bytes('none') } },
			UpdateExpression: 'SET #l = :u', ConditionExpression: 'attribute_exists(#pk)',
			ExpressionAttributeNames: { '#l': 'lease_ms', '#pk': 'pk' },
			ExpressionAttributeValues: { ':u': { N: '1' } } }))) === 'ConditionalCheckFailedException' &&
		!(await ddb.send(new GetItemCommand({ TableName: T, Key: { pk: { B: bytes('ns') }, sk: { B: bytes('none') } } }))).Item);
	t.check('conditional DeleteItem: a stale version fails with ConditionalCheckFailedException, the item stays',
		await codeOf(ddb.send(new DeleteItemCommand({ TableName: T, Key: key, ConditionExpression: '#v = :old',
			ExpressionAttributeNames: { '#v': 'ver' }, ExpressionAttributeValues: { ':old': { S: 'v1' } } })))
			=== 'ConditionalCheckFailedException' &&
		!!(await ddb.send(new GetItemCommand({ TableName: T, Key: key }))).Item);
	const lkey = { pk: { B: bytes('\x00Lns') }, sk: { B: bytes('k') } };
	const take = (owner, lease, now) => codeOf(ddb.send(new PutItemCommand({ TableName: T,
		Item: { ...lkey, owner: { S: owner }, lease_ms: { N: String(lease) } },
		ConditionExpression: 'attribute_not_exists(#pk) OR #l < :now OR #o = :me',
		ExpressionAttributeNames: { '#pk': 'pk', '#l': 'lease_ms', '#o': 'owner' },
		ExpressionAttributeValues: { ':now': { N: String(now) }, ':me': { S: owner } } })));
	t.check('the lock\'s condition: a free lock is taken, a running lease refuses another owner',
		await take('a', 100, 0) === 'no error' && await take('b', 200, 99) === 'ConditionalCheckFailedException');
	t.check('the lock\'s condition: taken over when its lease ended, and again by its own owner',
		await take('b', 300, 101) === 'no error' && await take('b', 400, 0) === 'no error');
	t.check('conditional DeleteItem: only the current owner deletes',
		await codeOf(ddb.send(new DeleteItemCommand({ TableName: T, Key: lkey, ConditionExpression: '#o = :me',
			ExpressionAttributeNames: { '#o': 'owner' }, ExpressionAttributeValues: { ':me': { S: 'a' } } })))
			=== 'ConditionalCheckFailedException' &&
		await codeOf(ddb.send(new DeleteItemCommand({ TableName: T, Key: lkey, ConditionExpression: '#o = :me',
			ExpressionAttributeNames: { '#o': 'owner' }, ExpressionAttributeValues: { ':me': { S: 'b' } } }))) === 'no error' &&
		!(await ddb.send(new GetItemCommand({ TableName: T, Key: lkey }))).Item);

	// Query: begins_with on the binary sort key, within one partition only.
	for (const k of ['a:1', 'a:2', 'ab', 'b', '\xff\x01', '\xfe\x01', '\xc3\xa9t\xc3\xa9'])
		await ddb.send(new PutItemCommand({ TableName: T, Item: { pk: { B: bytes('q') }, sk: { B: bytes(k) } } }));
	await ddb.send(new PutItemCommand({ TableName: T, Item: { pk: { B: bytes('qq') }, sk: { B: bytes('a:3') } } }));
	const query = async (pk, prefix) => (await ddb.send(new QueryCommand({ TableName: T, ConsistentRead: true,
		KeyConditionExpression: '#pk = :ns AND begins_with(#sk, :p)', ExpressionAttributeNames: { '#pk': 'pk', '#sk': 'sk' },
		ExpressionAttributeValues: { ':ns': { B: bytes(pk) }, ':p': { B: bytes(prefix) } } })))
		.Items.map((i) => Buffer.from(i.sk.B).toString('binary')).sort();
	const qa = await query('q', 'a:');
	t.check('Query begins_with: exactly the partition\'s keys with the prefix', JSON.stringify(qa) === '["a:1","a:2"]', qa);
	// Binary sort keys compare byte for byte, as in DynamoDB (the store checks each key again).
	const qff = await query('q', '\xff');
	t.check('Query begins_with 0xff: 0xff... only, not 0xfe...', qff.length === 1 && qff[0] === '\xff\x01', qff.map(hex));
	t.check('Query begins_with a cut UTF-8 character (0xc3): matches the key that starts with its bytes',
		(await query('q', '\xc3')).length === 1);
	t.check('Query begins_with a whole UTF-8 character: found', (await query('q', '\xc3\xa9')).length === 1);

	// Scan pages, joined with LastEvaluatedKey.
	for (let i = 0; i < 30; i++)
		await ddb.send(new PutItemCommand({ TableName: T, Item: { pk: { B: bytes(`p${i % 3}`) }, sk: { B: bytes(`k${i}`) } } }));
	let pages = 0, seen = 0, start;
	do {
		const r = await ddb.send(new ScanCommand({ TableName: T, Limit: 7, ExclusiveStartKey: start,
			ProjectionExpression: '#pk', ExpressionAttributeNames: { '#pk': 'pk' } }));
		pages++;
		seen += r.Items.filter((i) => /^p\d$/.test(Buffer.from(i.pk.B).toString())).length;
		t.check(`Scan page ${pages}: only the projected partition key`, r.Items.every((i) => Object.keys(i).join() === 'pk'));
		start = r.LastEvaluatedKey;
	} while (start && pages < 20);
	t.check('Scan: pages of 7 joined with LastEvaluatedKey see all 30 items', seen === 30 && pages >= 5, `${seen} in ${pages}`);

	const big = new Uint8Array(401 * 1024);
	t.check('an item over 400 KB is refused (ValidationException)',
		await codeOf(ddb.send(new PutItemCommand({ TableName: T, Item: { pk: { B: bytes('b') }, sk: { B: bytes('b') },
			val: { B: big } } }))) === 'ValidationException');

	// -- the store's layout, read by the SDK --
	let r = store('put', 'cli', 'session:default:local', 'x:7b00ff7d');
	t.check('the store writes a record', r.status === 0, r.err);
	const S = 'aks-sdk';
	const desc = await ddb.send(new DescribeTableCommand({ TableName: S }));
	t.check('auto_provision made the table as documented (pk HASH, sk RANGE, binary, on demand)',
		JSON.stringify(desc.Table.KeySchema) === '[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}]' &&
		desc.Table.AttributeDefinitions.every((a) => a.AttributeType === 'B') &&
		desc.Table.BillingModeSummary?.BillingMode === 'PAY_PER_REQUEST');
	const rec = (await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true,
		Key: { pk: { B: bytes('cli') }, sk: { B: bytes('session:default:local') } } }))).Item;
	t.check('the record is the item (pk = namespace, sk = key) with val = its bytes',
		eq(rec?.val?.B, bytes('{\x00\xff}')), JSON.stringify(rec));
	t.check('the item carries a 32-hex version token and no expires_at',
		/^[0-9a-f]{32}$/.test(rec?.ver?.S ?? '') && rec.expires_at === undefined &&
		Object.keys(rec).sort().join() === 'pk,sk,val,ver', JSON.stringify(rec));
	const ver1 = rec?.ver?.S;
	r = store('incr', 'cli', 'counter');
	r = store('incr', 'cli', 'counter');
	const ctr = (await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true,
		Key: { pk: { B: bytes('cli') }, sk: { B: bytes('counter') } } }))).Item;
	t.check('updates rewrite the item with a new version each time', r.out.trim() === '2' &&
		Buffer.from(ctr?.val?.B ?? []).toString() === '2' && ctr.ver.S !== ver1);

	const before = Math.floor(Date.now() / 1000);
	r = store('expiring', 'queue', 'task-1', 'done', '60');
	const exp = (await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true,
		Key: { pk: { B: bytes('queue') }, sk: { B: bytes('task-1') } } }))).Item;
	const e = Number(exp?.expires_at?.N);
	t.check('put_expiring: expires_at is a number of epoch seconds, ttl later (rounded up)',
		r.status === 0 && e >= before + 60 && e <= before + 62, JSON.stringify(exp));

	// A lock is an item in a partition no namespace can have: 0x00 'L' + the namespace.
	const holder = spawn(tool, [plugin, cfg, 'lock', 'cli', 'session:default:local', '5', '3'], { env });
	const exited = new Promise((res) => holder.on('exit', res));
	let said = '';
	holder.stdout.on('data', (c) => { said += c; });
	for (let i = 0; i < 100 && !said.includes('locked'); i++)
		await sleep(50);
	const lockKey = { pk: { B: bytes('\x00Lcli') }, sk: { B: bytes('session:default:local') } };
	const lk = (await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true, Key: lockKey }))).Item;
	const now = Date.now();
	t.check('lock: the item (0x00 L + namespace, key) holds an owner token and a lease end in epoch ms',
		said.includes('locked') && /^[0-9a-f]{32}$/.test(lk?.owner?.S ?? '') &&
		Number(lk?.lease_ms?.N) > now && Number(lk?.lease_ms?.N) <= now + 3500 &&
		Number(lk?.expires_at?.N) > Number(lk?.lease_ms?.N) / 1000, JSON.stringify(lk));
	r = store('lock', 'cli', 'session:default:local', '0.5', '0');
	t.check('lock: a second taker times out while it is held', r.status === 4 && /timed out/.test(r.err), r.err);
	await sleep(1500);
	const renewed = (await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true, Key: lockKey }))).Item;
	t.check('lock: the holder renews its lease (every third of lock_lease)',
		Number(renewed?.lease_ms?.N) > Number(lk?.lease_ms?.N) && renewed.owner.S === lk.owner.S,
		`${lk?.lease_ms?.N} then ${renewed?.lease_ms?.N}`);
	await exited;
	t.check('unlock deletes the lock item',
		!(await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true, Key: lockKey }))).Item);
	r = store('namespaces');
	const names = r.out.trim().split('\n').map((h) => Buffer.from(h, 'hex').toString('binary')).sort();
	t.check('namespaces: the namespaces of the records, no lock partition',
		JSON.stringify(names) === '["cli","queue"]', names);

	// A lock item left by a dead holder is taken once its lease ended.
	await ddb.send(new PutItemCommand({ TableName: S, Item: { ...lockKey, owner: { S: 'dead' },
		lease_ms: { N: String(Date.now() - 1000) } } }));
	r = store('lock', 'cli', 'session:default:local', '2', '0');
	t.check('lock: a lease that ended (its holder died) is taken over', r.status === 0, r.err);

	// The read-side TTL filter: items DynamoDB has not deleted yet (dynalite never does).
	const past = String(Math.floor(Date.now() / 1000) - 10);
	for (const [ns, k] of [['old', 'gone'], ['cli', 'session:expired']])
		await ddb.send(new PutItemCommand({ TableName: S, Item: { pk: { B: bytes(ns) }, sk: { B: bytes(k) },
			val: { B: bytes('stale') }, ver: { S: 'f'.repeat(32) }, expires_at: { N: past } } }));
	t.check('an expired item is still in dynalite',
		!!(await ddb.send(new GetItemCommand({ TableName: S, Key: { pk: { B: bytes('old') }, sk: { B: bytes('gone') } } }))).Item);
	r = store('get', 'old', 'gone');
	t.check('get: an expired item is absent', r.status === 3, `${r.status} ${r.out}${r.err}`);
	r = store('scan', 'cli', 'session:');
	t.check('scan: an expired item is not listed',
		r.status === 0 && r.out.trim() === `${hex('session:default:local')} ${hex('{\x00\xff}')}`, r.out + r.err);
	r = store('namespaces');
	t.check('namespaces: a namespace whose only item expired is not listed',
		r.status === 0 && !r.out.split('\n').includes(hex('old')), r.out);
	r = store('incr', 'old', 'gone');
	const redone = (await ddb.send(new GetItemCommand({ TableName: S, ConsistentRead: true,
		Key: { pk: { B: bytes('old') }, sk: { B: bytes('gone') } } }))).Item;
	t.check('update: reads an expired item as absent and replaces it (no expires_at left)',
		r.out.trim() === '1' && Buffer.from(redone?.val?.B ?? []).toString() === '1' && redone.expires_at === undefined,
		JSON.stringify(redone) + r.err);
	r = store('expiring', 'queue', 'short', 'v', '1');
	await sleep(2100);
	r = store('get', 'queue', 'short');
	t.check('put_expiring with a 1 s TTL: absent to get 2 s later, though dynalite keeps the item',
		r.status === 3 && !!(await ddb.send(new GetItemCommand({ TableName: S,
			Key: { pk: { B: bytes('queue') }, sk: { B: bytes('short') } } }))).Item);

	// sandbox.state_store: two aksandbox processes share a session kept in the table.
	const cli = join(tmp, 'config.yaml');
	writeFileSync(cli, `sandbox:\n  enabled: true\n  state_store:\n    type: dynamodb\n` +
		`    dynamodb: {table_name: aks-state, endpoint_url: "${endpoint}", auto_provision: true}\n` +
		'  default_profile: local\n  profiles:\n    local:\n      type: local_subprocess\n' +
		'      local_subprocess: {}\n');
	const cliEnv = { ...env, AKS_PLUGIN_SYSTEM_DIR: '', AKS_STATE_DIR: join(tmp, 'state'),
		AKS_PLUGIN_PATH: `${join(B, 'plugins/dynamodb/.libs')}:${join(B, 'plugins/local_subprocess/.libs')}` };
	const aks = (...args) => spawnSync(join(B, 'core/cli/aksandbox'), ['-c', cli, ...args], { env: cliEnv, encoding: 'utf8' });
	const w = aks('run', '--persist', '--', 'sh', '-c', 'echo kept > f');
	const rd = aks('run', '--persist', '--', 'cat', 'f');
	t.check('state_store: a second aksandbox process finds the session the first kept in the table',
		w.status === 0 && rd.status === 0 && rd.stdout.trim() === 'kept', `${w.stderr}${rd.stderr}`);
	const sess = (await ddb.send(new GetItemCommand({ TableName: 'aks-state', ConsistentRead: true,
		Key: { pk: { B: bytes('cli') }, sk: { B: bytes('session:default:local') } } }))).Item;
	let rec0 = {};
	try { rec0 = JSON.parse(Buffer.from(sess?.val?.B ?? []).toString()); } catch { /* checked below */ }
	t.check('state_store: the session record is the item (cli, session:default:local), its JSON in val',
		rec0.sandbox_session_id === 'default:local' && rec0.provider_type === 'local_subprocess',
		JSON.stringify(sess));
	const gone = aks('tool', 'destroy_sandbox_session', '{"sandbox_session_id": "default:local"}');
	t.check('state_store: destroying the session removes its sandbox',
		gone.status === 0 && !!rec0.sandbox_id && !existsSync(rec0.sandbox_id), gone.stdout + gone.stderr);

	// Prefixes: byte for byte, whatever dynalite's Query returned.
	for (const k of ['\xff\x01', '\xfe\x01', '\xc3\xa9t\xc3\xa9'])
		store('put', 'bin', `x:${hex(k)}`, 'v');
	r = store('scan', 'bin', 'x:ff');
	t.check('scan of prefix 0xff: only 0xff... (not dynalite\'s 0xfe... too)', r.out.trim() === `${hex('\xff\x01')} 76`, r.out + r.err);
	r = store('scan', 'bin', 'x:c3');
	t.check('scan of prefix 0xc3 (a cut character): finds the key that starts with it',
		r.out.trim() === `${hex('\xc3\xa9t\xc3\xa9')} 76`, r.out + r.err);
} catch (e) {
	t.exception(e);
}
rmSync(tmp, { recursive: true, force: true });
process.exit(t.finish());
