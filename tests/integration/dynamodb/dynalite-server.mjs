// tests/integration/dynamodb/dynalite-server.mjs DYNALITE_DIR PORT_FILE [PORT [DATA_DIR]] - runs
// dynalite (the DynamoDB emulator from the npm registry, installed by run-node.sh --install) in
// memory on a free loopback port chosen by the kernel (no race with other tests for a fixed
// one), and writes that port to PORT_FILE once it listens. PORT other than 0: that port
// instead (a restart at the endpoint the clients already have). DATA_DIR: its tables on disk
// there (LevelDB), so a restart finds them again. dynalite.sh starts and stops it.
import { createRequire } from 'node:module';
import { writeFileSync, renameSync } from 'node:fs';

const [dir, portFile, port = '0', dataDir] = process.argv.slice(2);
const dynalite = createRequire(import.meta.url)(`${dir}/index.js`);
// Tables are CREATING for 50 ms instead of 500: the store's auto_provision waits for ACTIVE
// either way, and the tests make several.
const server = dynalite({
	createTableMs: 50,
	deleteTableMs: 50,
	updateTableMs: 50,
	...(dataDir ? { path: dataDir } : {}),
});
server.listen(Number(port), '127.0.0.1', () => {
	writeFileSync(`${portFile}.tmp`, `${server.address().port}\n`);
	renameSync(`${portFile}.tmp`, portFile);
});
for (const sig of ['SIGTERM', 'SIGINT'])
	process.on(sig, () => server.close(() => process.exit(0)));
