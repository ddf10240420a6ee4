// tests/integration/sqs/fauxqs-server.mjs APP PORTFILE - runs the SQS emulator fauxqs
// (installed from the npm registry; APP is its dist/app.js) on a port the system picks,
// and writes the port to PORTFILE once it listens. fauxqs.sh starts it.
import { renameSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [app, portFile] = process.argv.slice(2);
const { startFauxqs } = await import(pathToFileURL(app).href);
const server = await startFauxqs({ port: 0, host: "localhost", logger: false });
writeFileSync(`${portFile}.tmp`, `${server.port}\n`);
renameSync(`${portFile}.tmp`, portFile);
